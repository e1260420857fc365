//! Skills: SKILL.md parsing, the `skill` tool and the skills prompt.
//!
//! A skill is a named set of instructions. The served agent's system prompt
//! lists the skills ([`SkillSet::prompt`]); the model loads one with the
//! `skill` tool ([`SkillSet::tool_spec`], [`SkillSet::run_tool`]) before it
//! follows it. This module reads no files: the host walks its folders and
//! hands each SKILL.md in as a `(path, text)` pair.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::json::object;

use crate::model::tool::{ToolResult, ToolSpec};

#[cfg(feature = "skill-md")]
mod skill_md;
#[cfg(feature = "skill-md")]
pub use skill_md::{parse_skill_md, SkillError};

/// The path recorded for skills given as data rather than read from a file.
const DATA_ORIGIN: &str = "<data>";

/// One skill: a name, a description and its instructions (the SKILL.md body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub content: String,
}

impl Skill {
    /// Reads a skill as its derived `Deserialize` does from an object
    /// (`name` required; `description`, `content` default to empty),
    /// without serde's error path (see [`crate::wire::json::opt_string`]).
    pub fn from_value(v: &Value) -> Result<Skill, String> {
        use crate::wire::json::{read_object, string_or};
        read_object(v, |v| {
            Ok(Skill {
                name: string_or(v, "name", None)?,
                description: string_or(v, "description", Some(""))?,
                content: string_or(v, "content", Some(""))?,
            })
        })
    }
}

/// A SKILL.md that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedSkill {
    pub path: String,
    pub reason: String,
}

/// A set of skills with unique names: the first skill of a name wins.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    skills: Vec<Skill>,
    /// Where each skill came from (a path or `<data>`), parallel to `skills`.
    origins: Vec<String>,
    /// The sampled files beside each SKILL.md ([`SkillSet::sample_files`]),
    /// parallel to `skills`.
    files: Vec<Vec<String>>,
    skipped: Vec<SkippedSkill>,
}

impl SkillSet {
    /// An empty set.
    pub fn new() -> Self {
        SkillSet::default()
    }

    /// Loads SKILL.md files given as `(path, text)`, in the order given.
    ///
    /// Malformed files and later duplicates of a name are recorded in
    /// [`SkillSet::skipped`] with a reason, never an error. The caller must
    /// pass files in a stable order (e.g. sorted by path) so that the same
    /// skill wins every time.
    #[cfg(feature = "skill-md")]
    pub fn from_files<I: IntoIterator<Item = (String, String)>>(files: I) -> Self {
        let mut set = SkillSet::new();
        for (path, text) in files {
            match parse_skill_md(&text) {
                Ok(skill) => {
                    set.insert(skill, path);
                }
                Err(reason) => set.skipped.push(SkippedSkill {
                    path,
                    reason: reason.to_string(),
                }),
            }
        }
        set
    }

    /// Adds a skill given as data, with its name and description trimmed.
    ///
    /// Returns false, and records it as skipped with path `<data>`, when the
    /// name is empty or already taken.
    pub fn add(&mut self, mut skill: Skill) -> bool {
        skill.name = skill.name.trim().to_string();
        skill.description = skill.description.trim().to_string();
        self.insert(skill, DATA_ORIGIN.to_string())
    }

    fn insert(&mut self, skill: Skill, origin: String) -> bool {
        let reason = if skill.name.is_empty() {
            "empty skill name".to_string()
        } else if let Some((_, first)) = self
            .skills
            .iter()
            .zip(&self.origins)
            .find(|(s, _)| s.name == skill.name)
        {
            format!(
                "duplicate skill name {} (first defined in {first})",
                skill.name
            )
        } else {
            self.skills.push(skill);
            self.origins.push(origin);
            self.files.push(Vec::new());
            return true;
        };
        self.skipped.push(SkippedSkill {
            path: origin,
            reason,
        });
        false
    }

    /// The skills, in the order they were loaded.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The SKILL.md files and data skills that were not loaded, and why.
    pub fn skipped(&self) -> &[SkippedSkill] {
        &self.skipped
    }

    /// The skill with this exact name.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// True when the set holds no skills; hosts then offer no `skill` tool.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Keeps only skills whose names are in `allow` (unknown names ignored).
    pub fn retain_names(&mut self, allow: &[String]) {
        let skills = std::mem::take(&mut self.skills);
        let origins = std::mem::take(&mut self.origins);
        let files = std::mem::take(&mut self.files);
        for ((skill, origin), files) in skills.into_iter().zip(origins).zip(files) {
            if allow.contains(&skill.name) {
                self.skills.push(skill);
                self.origins.push(origin);
                self.files.push(files);
            }
        }
    }

    /// Records the files beside each SKILL.md read from a folder, as
    /// `sample(dir)` lists them (the host reads the folder: up to
    /// [`SAMPLED_FILES`] absolute paths, SKILL.md excluded). The `skill`
    /// tool shows them in its `<skill_files>` block.
    pub fn sample_files(&mut self, sample: impl Fn(&str) -> Vec<String>) {
        for (origin, files) in self.origins.iter().zip(&mut self.files) {
            if let Some(dir) = skill_dir(origin) {
                *files = sample(dir);
                files.truncate(SAMPLED_FILES);
            }
        }
    }

    /// The system-prompt section (toolnexus SPEC §0.6, byte-identical in
    /// every port): the two-line preamble, a blank line, `## Available
    /// Skills` and `- **name**: description` per described skill, sorted by
    /// name; `No skills are currently available.` when none is described.
    pub fn prompt(&self) -> String {
        let mut described: Vec<&Skill> = Vec::new();
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        for s in &self.skills {
            if !s.description.is_empty() {
                described.push(s);
            }
        }
        if described.is_empty() {
            return NO_SKILLS.into();
        }
        // As JavaScript's localeCompare does for skill names: case last.
        let key = |s: &Skill| (s.name.to_ascii_lowercase(), s.name.clone());
        insertion_sort(&mut described, |a, b| key(a) < key(b));
        let mut out = format!("{SKILLS_PROMPT_PREAMBLE}\n\n## Available Skills");
        for skill in described {
            out.push_str(&format!("\n- **{}**: {}", skill.name, skill.description));
        }
        out
    }

    /// The `skill` tool's spec, as every toolnexus port offers it: the
    /// loader description (`skill.txt`) and one required string `name`.
    pub fn tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill".into(),
            description: SKILL_TOOL_DESCRIPTION.into(),
            input_schema: object([
                ("type", "object".into()),
                (
                    "properties",
                    object([(
                        "name",
                        object([
                            ("type", "string".into()),
                            ("description", "The name of the skill to load".into()),
                        ]),
                    )]),
                ),
                ("required", Value::Array(vec!["name".into()])),
                ("additionalProperties", false.into()),
            ]),
            source: crate::model::tool::ToolSource::Skill,
        }
    }

    /// Runs the `skill` tool: `{"name": "<skill>"}` gives the
    /// `<skill_content>` block (its body, base directory and sampled files);
    /// an unknown name gives `Skill "x" not found. Available skills: a, b`.
    pub fn run_tool(&self, args: &Value) -> ToolResult {
        let name = match args.get("name") {
            Some(Value::String(n)) => n.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => crate::wire::json::text(other),
        };
        let Some(i) = self.skills.iter().position(|s| s.name == name) else {
            let mut names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
            insertion_sort(&mut names, |a, b| a < b);
            let names = if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            };
            return ToolResult::error(format!(
                "Skill \"{name}\" not found. Available skills: {names}"
            ));
        };
        let (skill, origin) = (&self.skills[i], &self.origins[i]);
        let dir = skill_dir(origin);
        let base = match dir {
            Some(dir) => file_url(dir),
            None => format!("skill://{}/", skill.name),
        };
        let mut out = format!(
            "<skill_content name=\"{0}\">\n# Skill: {0}\n\n{1}\n\nBase directory for this skill: {base}\n\
             Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.\n",
            skill.name,
            skill.content.trim()
        );
        // A folder skill always lists its files (even none); a data skill has none to list.
        if dir.is_some() {
            out.push_str("Note: file list is sampled.\n\n<skill_files>\n");
            for f in &self.files[i] {
                out.push_str(&format!("<file>{f}</file>\n"));
            }
            if self.files[i].is_empty() {
                out.push('\n');
            }
            out.push_str("</skill_files>\n");
        }
        out.push_str("</skill_content>");
        ToolResult {
            output: out,
            is_error: false,
            metadata: Some(object([
                ("name", skill.name.as_str().into()),
                ("dir", dir.map_or(base.clone(), str::to_string).into()),
            ])),
        }
    }
}

/// Sorts a short list in place. (The standard sorts add kilobytes per
/// element type to the npm `.wasm`; a skill list is a few dozen names.)
fn insertion_sort<T>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && less(&v[j], &v[j - 1]) {
            v.swap(j, j - 1);
            j -= 1;
        }
    }
}

/// How many files beside a SKILL.md the `skill` tool lists.
pub const SAMPLED_FILES: usize = 10;

/// The skills prompt's preamble (toolnexus `SKILLS_PROMPT_PREAMBLE`).
pub const SKILLS_PROMPT_PREAMBLE: &str =
    "Skills provide specialized instructions and workflows for specific tasks.\n\
    Use the skill tool to load a skill when a task matches its description.";

/// The skills prompt when no skill has a description.
pub const NO_SKILLS: &str = "No skills are currently available.";

/// The `skill` tool's description (toolnexus `skill.txt`, from opencode).
pub const SKILL_TOOL_DESCRIPTION: &str = "Load a specialized skill when the task at hand matches one of the skills listed in the system prompt.

Use this tool to inject the skill's instructions and resources into current conversation. The output may contain detailed workflow guidance as well as references to scripts, files, etc in the same directory as the skill.

The skill name must match one of the skills listed in your system prompt.";

/// The folder of a SKILL.md read from disk; `None` for a skill given as data.
fn skill_dir(origin: &str) -> Option<&str> {
    if origin == DATA_ORIGIN {
        return None;
    }
    let cut = origin.rfind(['/', '\\'])?;
    Some(if cut == 0 { "/" } else { origin.get(..cut)? })
}

/// `file:///abs/dir` for a folder, percent-encoded as Node's `pathToFileURL`.
fn file_url(dir: &str) -> String {
    let path = dir.replace('\\', "/");
    let mut url = String::from(if path.starts_with('/') {
        "file://"
    } else {
        "file:///"
    });
    for b in path.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b);
        if keep {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

#[cfg(all(test, feature = "skill-md"))]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const GOOD: &str = "---\nname: pdf-tools\ndescription: Work with PDF files\n---\n\n# PDF tools\n\nUse `pdftotext`.\n";

    fn skill(name: &str, description: &str, content: &str) -> Skill {
        Skill {
            name: name.into(),
            description: description.into(),
            content: content.into(),
        }
    }

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    /// Asserts that `text` is rejected with a reason containing `expected`.
    fn assert_rejected(text: &str, expected: &str) {
        match parse_skill_md(text) {
            Ok(s) => panic!("expected an error containing {expected:?}, parsed {s:?}"),
            Err(reason) => assert!(
                reason.message().contains(expected),
                "reason {reason:?} does not contain {expected:?}"
            ),
        }
    }

    #[test]
    fn a_good_skill_md_gives_name_description_and_body() {
        assert_eq!(
            parse_skill_md(GOOD),
            Ok(skill(
                "pdf-tools",
                "Work with PDF files",
                "# PDF tools\n\nUse `pdftotext`."
            ))
        );
    }

    #[test]
    fn a_missing_description_is_empty() {
        let s = parse_skill_md("---\nname: hello\n---\nSay hello.").expect("parses");
        assert_eq!(s, skill("hello", "", "Say hello."));
        let s = parse_skill_md("---\nname: hello\ndescription:\n---\n").expect("parses");
        assert_eq!(s.description, "");
        assert_eq!(s.content, "");
    }

    #[test]
    fn values_are_trimmed_and_body_loses_leading_blank_lines_only() {
        let text = "---\nname: \"  hello-world  \"\ndescription: '  greets  '\n---\n\n  \n    indented\n\nend  \n\n";
        assert_eq!(
            parse_skill_md(text),
            Ok(skill("hello-world", "greets", "    indented\n\nend"))
        );
    }

    #[test]
    fn crlf_line_endings_and_a_bom_are_accepted() {
        let text =
            "\u{feff}---\r\nname: hello\r\ndescription: hi\r\n---\r\n\r\nline 1\r\nline 2\r\n";
        assert_eq!(
            parse_skill_md(text),
            Ok(skill("hello", "hi", "line 1\nline 2"))
        );
    }

    #[test]
    fn yaml_features_resolve_like_a_yaml_parser() {
        let text = "---\n# a comment\nname: !!str 123\ndescription: >\n  folded\n  text\nmetadata: {tags: [a, b]}\n---\nbody";
        assert_eq!(
            parse_skill_md(text),
            Ok(skill("123", "folded text", "body"))
        );
        let text = "---\nlabel: &n shared\nname: *n\n---\n";
        assert_eq!(parse_skill_md(text).map(|s| s.name), Ok("shared".into()));
        let text = "---\nlist: &l [a]\ncopy: *l\nname: after-alias\n---\n";
        assert_eq!(
            parse_skill_md(text).map(|s| s.name),
            Ok("after-alias".into())
        );
        assert_rejected("---\nl: &l [a]\nname: *l\n---\n", "found a sequence");
        // A number as description keeps its text rather than losing the skill.
        let text = "---\nname: n\ndescription: 1.5\n---\n";
        assert_eq!(
            parse_skill_md(text).map(|s| s.description),
            Ok("1.5".into())
        );
        // Only top-level keys count.
        assert_rejected("---\nmeta:\n  name: nested\n---\n", "missing `name`");
    }

    #[test]
    fn plain_scalars_resolve_by_the_yaml_core_schema() {
        use super::skill_md::{core_schema_kind, ScalarKind, ScalarKind::*};
        let cases: &[(&[&str], ScalarKind)] = &[
            (&["", "~", "null", "Null", "NULL"], Null),
            (&["true", "True", "FALSE"], Bool),
            (
                &[
                    "42", "-7", "+3", "0o17", "0x1F", "1.5", "-.5", "1.", "1e5", "2.5E-3", ".inf",
                    "-.Inf", ".nan",
                ],
                Number,
            ),
            (
                &[
                    "1.2.3", "0x", "0o8", "e5", "1e", ".", "+", "inf", "nan", "+.nan", "v1.0",
                    "1_000", "yes", "1-2", "0x1G", "NUll",
                ],
                Str,
            ),
        ];
        for (texts, kind) in cases {
            for text in *texts {
                assert_eq!(core_schema_kind(text), *kind, "{text:?}");
            }
        }
    }

    #[test]
    fn a_yaml_error_is_kept_as_the_source() {
        let err = parse_skill_md("---\nname: [unclosed\n---\n").expect_err("bad YAML");
        let cause = std::error::Error::source(&err);
        // The npm build keeps no causes (see `error.rs`).
        let keeps = !cfg!(all(target_arch = "wasm32", target_os = "unknown"));
        assert_eq!(
            cause.is_some_and(|c| c.downcast_ref::<yaml_rust2::ScanError>().is_some()),
            keeps,
            "{err:?}"
        );
        let err = parse_skill_md("---\nname: x\n").expect_err("unclosed");
        assert!(std::error::Error::source(&err).is_none());
    }

    #[test]
    fn malformed_files_are_rejected_with_a_reason() {
        assert_rejected("# Just markdown\n", "no frontmatter");
        assert_rejected("", "no frontmatter");
        assert_rejected("---\nname: x\n", "unclosed frontmatter");
        assert_rejected("---", "unclosed frontmatter");
        assert_rejected(
            "---\nname: [unclosed\n---\n",
            "invalid YAML in frontmatter (line 3",
        );
        assert_rejected(
            "---\n- name\n- x\n---\n",
            "frontmatter must be a mapping, found a sequence",
        );
        assert_rejected(
            "---\njust text\n---\n",
            "frontmatter must be a mapping, found a string",
        );
        assert_rejected("---\n---\nbody", "frontmatter is empty");
        assert_rejected("---\ndescription: d\n---\n", "missing `name`");
        assert_rejected(
            "---\nname: 42\n---\n",
            "`name` must be a string, found a number",
        );
        assert_rejected("---\nname: true\n---\n", "found a boolean");
        assert_rejected("---\nname: [a]\n---\n", "found a sequence");
        assert_rejected("---\nname: \"  \"\n---\n", "`name` is empty");
        assert_rejected("---\nname:\n---\n", "found null");
        assert_rejected(
            "---\nname: a\ndescription: {x: 1}\n---\n",
            "`description` must be a string",
        );
        assert_rejected("---\nname: a\nname: b\n---\n", "duplicate key `name`");
        assert_rejected(
            "---\nname: a\n...\n--- b\n---\n",
            "more than one YAML document",
        );
    }

    #[test]
    fn hostile_yaml_is_rejected_or_parsed_without_expansion() {
        let deep_flow = format!("---\nname: x\nd: {}\n---\n", "[".repeat(10_000));
        assert_rejected(&deep_flow, "invalid YAML");
        let deep_block = format!("---\nname: x\nd: {}x\n---\n", "- ".repeat(2_000));
        assert_rejected(&deep_block, "invalid YAML");
        let deep_value = format!("---\nname: x\nd:\n  {}x\n---\n", "- ".repeat(2_000));
        assert_eq!(parse_skill_md(&deep_value).map(|s| s.name), Ok("x".into()));
        // An alias bomb: expanded it would hold 10^9 strings.
        let mut bomb = String::from("---\nname: bomb\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!("l{i}: &l{i} [*l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}]\n"));
        }
        bomb.push_str("---\n");
        assert_eq!(parse_skill_md(&bomb).map(|s| s.name), Ok("bomb".into()));
    }

    #[test]
    fn malformed_files_are_skipped_and_the_rest_loaded() {
        let set = SkillSet::from_files(files(&[
            ("a/SKILL.md", GOOD),
            ("b/SKILL.md", "no frontmatter"),
            ("c/SKILL.md", "---\nname: [unclosed\n---\n"),
            ("d/SKILL.md", "---\nname: 7\n---\n"),
        ]));
        assert_eq!(set.skills().len(), 1);
        let skipped: Vec<&str> = set.skipped().iter().map(|s| s.path.as_str()).collect();
        assert_eq!(skipped, ["b/SKILL.md", "c/SKILL.md", "d/SKILL.md"]);
        assert!(set.skipped().iter().all(|s| !s.reason.is_empty()));
    }

    #[test]
    fn the_first_skill_of_a_name_wins_and_the_duplicate_is_recorded() {
        let set = SkillSet::from_files(files(&[
            ("one/SKILL.md", "---\nname: x\ndescription: first\n---\n"),
            (
                "two/SKILL.md",
                "---\nname: \" x \"\ndescription: second\n---\n",
            ),
        ]));
        assert_eq!(set.skills().len(), 1);
        assert_eq!(set.get("x").map(|s| s.description.as_str()), Some("first"));
        assert_eq!(
            set.skipped(),
            [SkippedSkill {
                path: "two/SKILL.md".into(),
                reason: "duplicate skill name x (first defined in one/SKILL.md)".into(),
            }]
        );
    }

    #[test]
    fn skills_given_as_data_are_added_unless_empty_or_taken() {
        let mut set = SkillSet::new();
        assert!(set.is_empty());
        assert!(set.add(skill(" greet ", " Say hi ", "Say hi.")));
        assert_eq!(set.get("greet"), Some(&skill("greet", "Say hi", "Say hi.")));
        assert!(!set.add(skill("greet", "", "")));
        assert!(!set.add(skill("  ", "", "")));
        assert_eq!(
            set.skipped(),
            [
                SkippedSkill {
                    path: "<data>".into(),
                    reason: "duplicate skill name greet (first defined in <data>)".into(),
                },
                SkippedSkill {
                    path: "<data>".into(),
                    reason: "empty skill name".into(),
                },
            ]
        );
        let from_json: Skill = serde_json::from_value(json!({"name": "n"})).expect("skill");
        for v in [
            json!({"name": "n"}),
            json!({"name": "n", "description": "d", "content": "c", "x": 1}),
            json!({"description": "d"}),
            json!({"name": null}),
            json!({"name": "n", "content": null}),
            json!({"name": "n", "description": 2}),
            json!("n"),
            json!(null),
        ] {
            let derived = serde_json::from_value::<Skill>(v.clone()).map_err(|_| ());
            assert_eq!(Skill::from_value(&v).map_err(|_| ()), derived, "{v}");
        }
        assert_eq!(from_json, skill("n", "", ""));
    }

    #[test]
    fn retain_names_keeps_the_allowlist_and_ignores_unknown_names() {
        let mut set = SkillSet::new();
        for name in ["a", "b", "c"] {
            set.add(skill(name, "", ""));
        }
        set.retain_names(&["c".into(), "a".into(), "nope".into()]);
        let names: Vec<&str> = set.skills().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        // A removed name is free again.
        assert!(set.add(skill("b", "", "")));
    }

    #[test]
    fn the_prompt_is_the_reference_bytes() {
        let mut set = SkillSet::new();
        assert_eq!(set.prompt(), "No skills are currently available.");
        set.add(skill("pdf", "Work with PDF files", ""));
        set.add(skill("bare", "", ""));
        set.add(skill("Csv", "Read CSV", ""));
        assert_eq!(
            set.prompt(),
            "Skills provide specialized instructions and workflows for specific tasks.\n\
             Use the skill tool to load a skill when a task matches its description.\n\
             \n\
             ## Available Skills\n\
             - **Csv**: Read CSV\n\
             - **pdf**: Work with PDF files"
        );
        let mut bare = SkillSet::new();
        bare.add(skill("x", "", ""));
        assert_eq!(bare.prompt(), NO_SKILLS);
    }

    #[test]
    fn the_tool_spec_is_the_reference_one() {
        let mut set = SkillSet::new();
        set.add(skill("a", "", ""));
        let spec = set.tool_spec();
        assert_eq!(
            (spec.name.as_str(), spec.source),
            ("skill", crate::ToolSource::Skill)
        );
        assert!(spec.description.starts_with(
            "Load a specialized skill when the task at hand matches one of the skills listed in the system prompt.\n\nUse this tool"
        ));
        assert_eq!(
            spec.input_schema,
            json!({"type": "object", "properties": {"name": {"type": "string",
                "description": "The name of the skill to load"}}, "required": ["name"],
                "additionalProperties": false})
        );
    }

    #[test]
    fn a_folder_skill_loads_as_the_reference_block_with_its_sampled_files() {
        let mut set = SkillSet::from_files([
            (
                "/srv/skills/my skill/SKILL.md".to_string(),
                "---\nname: pdf\ndescription: PDFs\n---\n\n# PDF\n\nUse it.\n".to_string(),
            ),
            (
                "/srv/skills/empty/SKILL.md".to_string(),
                "---\nname: empty\n---\nNothing.".to_string(),
            ),
        ]);
        set.sample_files(|dir| match dir {
            "/srv/skills/my skill" => vec![
                "/srv/skills/my skill/scripts/run.sh".into(),
                "/srv/skills/my skill/ref.md".into(),
            ],
            _ => Vec::new(),
        });
        let r = set.run_tool(&json!({"name": "pdf"}));
        assert!(!r.is_error);
        assert_eq!(
            r.output,
            "<skill_content name=\"pdf\">\n# Skill: pdf\n\n# PDF\n\nUse it.\n\n\
             Base directory for this skill: file:///srv/skills/my%20skill\n\
             Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.\n\
             Note: file list is sampled.\n\n<skill_files>\n\
             <file>/srv/skills/my skill/scripts/run.sh</file>\n<file>/srv/skills/my skill/ref.md</file>\n\
             </skill_files>\n</skill_content>"
        );
        assert_eq!(
            r.metadata,
            Some(json!({"name": "pdf", "dir": "/srv/skills/my skill"}))
        );
        // No files: the block is still there, empty.
        let r = set.run_tool(&json!({"name": "empty"}));
        assert!(
            r.output.ends_with(
                "Note: file list is sampled.\n\n<skill_files>\n\n</skill_files>\n</skill_content>"
            ),
            "{}",
            r.output
        );
    }

    #[test]
    fn a_data_skill_has_a_logical_base_and_no_file_list() {
        let mut set = SkillSet::new();
        set.add(skill("b", "", "  Do B.\n"));
        set.add(skill("a", "", "Do A."));
        let r = set.run_tool(&json!({"name": "b"}));
        assert_eq!(
            r.output,
            "<skill_content name=\"b\">\n# Skill: b\n\nDo B.\n\nBase directory for this skill: skill://b/\n\
             Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.\n\
             </skill_content>"
        );
        let unknown = set.run_tool(&json!({"name": "zzz"}));
        assert!(unknown.is_error);
        assert_eq!(
            unknown.output,
            "Skill \"zzz\" not found. Available skills: a, b"
        );
        assert_eq!(
            set.run_tool(&json!({})).output,
            "Skill \"\" not found. Available skills: a, b"
        );
        assert!(set.run_tool(&json!({"name": 3})).is_error);
        assert!(set.run_tool(&json!("a")).is_error);
        assert_eq!(
            SkillSet::new().run_tool(&json!({"name": "a"})).output,
            "Skill \"a\" not found. Available skills: none"
        );
    }

    #[test]
    fn random_and_mutated_input_never_panics() {
        const ALPHABET: &[u8] =
            b"-:[]{}\"'&*!|>#%@`,?\t \r\n\n\nname description\xef\xbb\xbf\xff\x00";
        let seeds = [
            GOOD,
            "---\nname: a\n---\n",
            "---\r\nname: 'b'\r\n---\r\nx",
            "---\nname: &a \"c\"\nd: [*a, {k: v}]\n...\n",
            "---\nname: |\n  multi\n  line\ndescription: >-\n  f\n---\n",
            "\u{feff}---\n%YAML 1.2\n--- !!map\nname: !!str x\n---\n",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |bound: usize| -> usize {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as usize) % bound.max(1)
        };
        for _ in 0..200 {
            let mut bytes = seeds[next(seeds.len())].as_bytes().to_vec();
            for _ in 0..1 + next(8) {
                let at = next(bytes.len() + 1);
                let byte = if next(4) == 0 {
                    next(256) as u8
                } else {
                    ALPHABET[next(ALPHABET.len())]
                };
                match next(4) {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    2 => {
                        let len = next(bytes.len() - at + 1);
                        let copy = bytes[at..at + len].to_vec();
                        bytes.splice(at..at, copy);
                    }
                    _ => bytes.insert(at, byte),
                }
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if let Ok(skill) = parse_skill_md(&text) {
                assert!(
                    !skill.name.is_empty() && skill.name.trim() == skill.name,
                    "{text:?}"
                );
                assert_eq!(skill.description.trim(), skill.description, "{text:?}");
                assert_eq!(skill.content.trim_end(), skill.content, "{text:?}");
            }
            let set = SkillSet::from_files([("f".to_string(), text)]);
            assert_eq!(set.skills().len() + set.skipped().len(), 1);
        }
    }
}
