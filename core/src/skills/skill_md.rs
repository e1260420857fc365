//! SKILL.md texts: YAML frontmatter (`name`, `description`) and a Markdown
//! body, read with a real YAML parser (feature `skill-md`).
//!
//! A separate feature because the parser is most of a small build's size:
//! the npm package keeps it in its own `.wasm` (`toolnexus-wasm/skills`).

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use super::Skill;

/// The YAML core-schema tag prefix that `!!str`, `!!int`, … expand to.
const CORE_TAG_HANDLE: &str = "tag:yaml.org,2002:";

crate::error::message_error! {
    /// Why a SKILL.md was refused, and the YAML parser's error when that was
    /// the problem.
    SkillError
}

/// Parses one SKILL.md: YAML frontmatter between a first line `---` and the
/// next `---` line, then the Markdown body.
///
/// `name` is required (a non-empty string after trimming); `description` is
/// optional (`""` when absent or null; a number or boolean keeps its text).
/// Both are trimmed. The body after the closing `---`, with leading blank
/// lines removed and trailing whitespace trimmed, is the `content`; CRLF line
/// endings become LF and a UTF-8 BOM is ignored. Anything else (no or
/// unclosed frontmatter, a YAML syntax error, a frontmatter that is not a
/// mapping, a missing, empty or non-string `name`, a `description` that is a
/// sequence or mapping) is an `Err` with a reason to show the operator. Never
/// panics, and never expands YAML aliases.
pub fn parse_skill_md(text: &str) -> Result<Skill, SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let (yaml, body) = split_frontmatter(&text).map_err(SkillError::new)?;
    let fields = read_frontmatter(yaml)?;

    let name = match fields.name {
        None => return Err("missing `name` in frontmatter".into()),
        Some(Node::Scalar(text, ScalarKind::Str)) => text.trim().to_string(),
        Some(other) => {
            return Err(format!("`name` must be a string, found {}", other.kind()).into())
        }
    };
    if name.is_empty() {
        return Err("`name` is empty".into());
    }
    let description = match fields.description {
        None | Some(Node::Scalar(_, ScalarKind::Null)) => String::new(),
        Some(Node::Scalar(text, _)) => text.trim().to_string(),
        Some(other) => {
            return Err(format!("`description` must be a string, found {}", other.kind()).into())
        }
    };
    Ok(Skill {
        name,
        description,
        content: body_content(body),
    })
}

/// Splits normalised SKILL.md text into its frontmatter YAML and its body.
fn split_frontmatter(text: &str) -> Result<(&str, &str), String> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err("no frontmatter: the file must start with a `---` line".into());
    }
    let start = first.len();
    let mut end = start;
    for line in lines {
        if line.trim_end() == "---" {
            // `end` and `line.len()` are sums of whole lines of `text`, so
            // both slices fall on line (and therefore char) boundaries.
            let yaml = text.get(start..end).unwrap_or("");
            let body = text.get(end + line.len()..).unwrap_or("");
            return Ok((yaml, body));
        }
        end += line.len();
    }
    Err("unclosed frontmatter: no `---` line ends it".into())
}

/// The body without its leading blank lines and trailing whitespace.
fn body_content(body: &str) -> String {
    let mut rest = body;
    while let Some((line, after)) = rest.split_once('\n') {
        if !line.trim().is_empty() {
            break;
        }
        rest = after;
    }
    rest.trim_end().to_string()
}

/// What a YAML scalar resolves to under the core schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScalarKind {
    Str,
    Null,
    Bool,
    Number,
}

/// A frontmatter value, reduced to what a skill needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// A scalar: its source text and what it resolves to.
    Scalar(String, ScalarKind),
    /// A sequence or a mapping, named for error messages.
    Collection(&'static str),
}

impl Node {
    /// The node's kind as a reason string names it ("a number", "a sequence").
    fn kind(&self) -> &'static str {
        match self {
            Node::Scalar(_, ScalarKind::Str) => "a string",
            Node::Scalar(_, ScalarKind::Null) => "null",
            Node::Scalar(_, ScalarKind::Bool) => "a boolean",
            Node::Scalar(_, ScalarKind::Number) => "a number",
            Node::Collection(kind) => kind,
        }
    }

    /// Resolves a scalar event the way `yaml_rust2::YamlLoader` does: quoted
    /// and block scalars are strings, core tags (`!!str`, `!!int`, …) decide,
    /// and untagged plain scalars follow the core schema.
    fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Node {
        let kind = match tag {
            _ if style != TScalarStyle::Plain => ScalarKind::Str,
            Some(tag) if tag.handle == CORE_TAG_HANDLE => match tag.suffix.as_str() {
                "null" => ScalarKind::Null,
                "bool" => ScalarKind::Bool,
                "int" | "float" => ScalarKind::Number,
                _ => ScalarKind::Str,
            },
            Some(_) => ScalarKind::Str,
            None => core_schema_kind(&text),
        };
        Node::Scalar(text, kind)
    }
}

/// Resolves an untagged plain scalar by the YAML 1.2 core schema (spec
/// §10.3.2, "Tag Resolution").
///
/// `yaml_rust2::Yaml::from_str` answers the same question but parses floats
/// with `f64::from_str`, which adds ~20 KB to the wasm for a yes/no answer.
pub(super) fn core_schema_kind(text: &str) -> ScalarKind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return ScalarKind::Null,
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => return ScalarKind::Bool,
        ".nan" | ".NaN" | ".NAN" => return ScalarKind::Number,
        _ => {}
    }
    let digits_in = |t: &str, radix: u32| !t.is_empty() && t.chars().all(|c| c.is_digit(radix));
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let number = matches!(unsigned, ".inf" | ".Inf" | ".INF")
        || is_decimal(unsigned)
        || text.strip_prefix("0o").is_some_and(|d| digits_in(d, 8))
        || text.strip_prefix("0x").is_some_and(|d| digits_in(d, 16));
    if number {
        ScalarKind::Number
    } else {
        ScalarKind::Str
    }
}

/// Matches `( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`,
/// the unsigned part of the core schema's integers and floats.
fn is_decimal(text: &str) -> bool {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (text, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", fraction)) => digits(fraction),
        Some((whole, fraction)) => digits(whole) && (fraction.is_empty() || digits(fraction)),
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)))
}

/// The top-level fields of a frontmatter block that a skill uses.
#[derive(Debug, Default)]
struct Frontmatter {
    name: Option<Node>,
    description: Option<Node>,
}

/// Reads `name` and `description` from frontmatter YAML.
///
/// This walks the parser's events instead of building a document tree:
/// nested values are skipped without being stored, and aliases are never
/// expanded, so neither deep nesting nor an alias bomb can exhaust the
/// stack or memory of a wasm instance.
fn read_frontmatter(yaml: &str) -> Result<Frontmatter, SkillError> {
    let mut parser = Parser::new_from_str(yaml);
    let mut fields = Frontmatter::default();
    // Anchored nodes by anchor id, so `name: *alias` resolves to its scalar.
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut documents = 0usize;
    let mut root: Option<&'static str> = None;
    // Collection nesting: 1 inside the root mapping, 2 inside its values.
    let mut depth = 0usize;
    // Nodes completed directly in the root mapping: even means a key is next.
    let mut entries = 0usize;
    let mut key: Option<String> = None;

    loop {
        let (event, _) = parser.next_token().map_err(|e| {
            // Marker lines count from 1 within the frontmatter, which starts
            // on the file's second line; columns count from 0.
            let m = e.marker();
            let text = format!(
                "invalid YAML in frontmatter (line {}, column {}): {}",
                m.line() + 1,
                m.col() + 1,
                e.info()
            );
            SkillError::with_source(text, e)
        })?;
        // `opens` marks a collection start: its node completes at its end.
        let (node, opens) = match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err("frontmatter holds more than one YAML document".into());
                }
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                depth = depth.saturating_sub(1);
                if depth == 1 {
                    entries += 1;
                }
                continue;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let node = Node::scalar(text, style, tag.as_ref());
                if anchor > 0 {
                    anchors.insert(anchor, node.clone());
                }
                (node, false)
            }
            Event::Alias(anchor) => {
                let node = anchors.get(&anchor).cloned();
                (node.unwrap_or(Node::Collection("an unknown alias")), false)
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                let node = Node::Collection(if matches!(event, Event::SequenceStart(..)) {
                    "a sequence"
                } else {
                    "a mapping"
                });
                if anchor > 0 {
                    anchors.insert(anchor, node.clone());
                }
                depth += 1;
                (node, true)
            }
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => continue,
        };
        // `depth` already counts a collection that this event opened.
        let level = if opens {
            depth.saturating_sub(1)
        } else {
            depth
        };
        if level == 0 {
            root = Some(node.kind());
            continue;
        }
        if level != 1 || root != Some("a mapping") {
            continue;
        }
        if entries % 2 == 0 {
            key = match &node {
                Node::Scalar(text, _) => Some(text.clone()),
                Node::Collection(_) => None,
            };
        } else {
            let slot = match key.take().as_deref() {
                Some("name") => Some(("name", &mut fields.name)),
                Some("description") => Some(("description", &mut fields.description)),
                _ => None,
            };
            if let Some((field, slot)) = slot {
                if slot.is_some() {
                    return Err(format!("duplicate key `{field}` in frontmatter").into());
                }
                *slot = Some(node);
            }
        }
        if !opens {
            entries += 1;
        }
    }

    match root {
        Some("a mapping") => Ok(fields),
        None => Err("frontmatter is empty: it must be a mapping with a `name`".into()),
        Some(kind) => Err(format!("frontmatter must be a mapping, found {kind}").into()),
    }
}
