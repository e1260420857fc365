//! Tool descriptors, results, and the LLM-provider schema adapters.

use crate::wire::json::{object, with};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a tool looks like to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// Where the tool comes from.
    pub source: ToolSource,
}

/// Where a tool comes from. Written (JSON, JS, WIT) as its
/// [`as_str`](ToolSource::as_str) name: `"a2a"`, `"skill"`, `"host"`, `"builtin"`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSource {
    /// A remote A2A agent (or one of its skills).
    A2a,
    /// The `skill` tool of a skill set.
    Skill,
    /// A function of the host (Rust, JS).
    Host,
    /// Built into the LLM run (the `question` tool).
    Builtin,
}

impl ToolSource {
    /// The wire name: `"a2a"`, `"skill"`, `"host"` or `"builtin"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSource::A2a => "a2a",
            ToolSource::Skill => "skill",
            ToolSource::Host => "host",
            ToolSource::Builtin => "builtin",
        }
    }

    /// Reads a wire name; `None` for any other text.
    pub fn parse(name: &str) -> Option<ToolSource> {
        [
            ToolSource::A2a,
            ToolSource::Skill,
            ToolSource::Host,
            ToolSource::Builtin,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// Written as its wire name, a plain string (smaller in the `.wasm` than a
/// derived enum serialiser).
impl Serialize for ToolSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Compares with the wire name: `source == "a2a"`.
impl PartialEq<str> for ToolSource {
    fn eq(&self, name: &str) -> bool {
        self.as_str() == name
    }
}

impl PartialEq<&str> for ToolSource {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl std::fmt::Display for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of running a tool. Tools report failure here rather than by
/// returning an error, so a model can read it and react.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub output: String,
    #[serde(rename = "isError")]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl ToolResult {
    /// A successful result without metadata.
    pub fn ok(output: impl Into<String>) -> Self {
        ToolResult {
            output: output.into(),
            is_error: false,
            metadata: None,
        }
    }

    /// A failed result without metadata.
    pub fn error(output: impl Into<String>) -> Self {
        ToolResult {
            output: output.into(),
            is_error: true,
            metadata: None,
        }
    }
}

/// The fixed input schema of every A2A tool: one required string `task`.
pub fn a2a_input_schema(description: &str) -> Value {
    let task = object([
        ("type", "string".into()),
        ("description", description.into()),
    ]);
    object([
        ("type", "object".into()),
        ("properties", object([("task", task)])),
        ("required", Value::Array(vec!["task".into()])),
    ])
}

/// [`a2a_input_schema`] with the optional `taskId` and `contextId` of a
/// conversational agent (see [`crate::agent::Agent::conversational`]).
pub fn a2a_conversational_schema(description: &str) -> Value {
    let mut schema = a2a_input_schema(description);
    let ids: Value = serde_json::from_slice(CONVERSATION_PROPERTIES.as_bytes()).unwrap_or_default();
    let props = schema.get_mut("properties").and_then(Value::as_object_mut);
    if let (Some(props), Value::Object(ids)) = (props, ids) {
        props.extend(ids);
    }
    schema
}

/// The optional properties of [`a2a_conversational_schema`], as text:
/// parsed on use, smaller in the `.wasm` than `json!`.
const CONVERSATION_PROPERTIES: &str = r#"{"taskId":{"type":"string","description":"To answer the agent's question: the taskId of the result that asked it (omit for a new task)"},"contextId":{"type":"string","description":"To continue an earlier conversation with the agent: the contextId of its result"}}"#;

/// One entry per spec, made by `entry`: a plain loop, not one
/// `map(..).collect()` per format (see ARCHITECTURE.md).
fn entries(specs: &[ToolSpec], entry: &dyn Fn(&ToolSpec) -> Value) -> Vec<Value> {
    let mut out = Vec::with_capacity(specs.len());
    for s in specs {
        out.push(entry(s));
    }
    out
}

/// `{name, description}` of a spec.
fn named(s: &ToolSpec) -> Value {
    object([
        ("name", s.name.as_str().into()),
        ("description", s.description.as_str().into()),
    ])
}

/// OpenAI chat-completions `tools` entries.
pub fn to_openai(specs: &[ToolSpec]) -> Vec<Value> {
    entries(specs, &|s| {
        let function = with(named(s), "parameters", s.input_schema.clone());
        object([("type", "function".into()), ("function", function)])
    })
}

/// Anthropic messages `tools` entries.
pub fn to_anthropic(specs: &[ToolSpec]) -> Vec<Value> {
    entries(specs, &|s| {
        with(named(s), "input_schema", s.input_schema.clone())
    })
}

/// Gemini `functionDeclarations` entries. Gemini rejects some JSON Schema
/// keywords (`$schema`, `additionalProperties`), so they are removed.
pub fn to_gemini(specs: &[ToolSpec]) -> Vec<Value> {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m {
                    if !matches!(k.as_str(), "$schema" | "additionalProperties") {
                        out.insert(k.clone(), strip(v));
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                for v in a {
                    out.push(strip(v));
                }
                Value::Array(out)
            }
            other => other.clone(),
        }
    }
    entries(specs, &|s| {
        with(named(s), "parameters", strip(&s.input_schema))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "reviewer_review".into(),
            description: "Review some code".into(),
            input_schema: json!({"type": "object", "additionalProperties": false,
                                 "properties": {"task": {"type": "string"}}, "required": ["task"]}),
            source: ToolSource::A2a,
        }
    }

    #[test]
    fn adapters_emit_each_provider_shape() {
        let s = [spec()];
        assert_eq!(to_openai(&s)[0]["function"]["name"], "reviewer_review");
        assert_eq!(
            to_openai(&s)[0]["function"]["parameters"]["required"],
            json!(["task"])
        );
        assert_eq!(to_anthropic(&s)[0]["input_schema"]["type"], "object");
        let g = &to_gemini(&s)[0];
        assert_eq!(g["parameters"]["properties"]["task"]["type"], "string");
        assert!(g["parameters"].get("additionalProperties").is_none());
    }

    #[test]
    fn tool_sources_keep_their_wire_names() {
        let names = ["a2a", "skill", "host", "builtin"];
        for name in names {
            let source = ToolSource::parse(name).expect(name);
            assert_eq!(source.as_str(), name);
            assert_eq!(serde_json::to_value(source).expect("json"), json!(name));
            let read: ToolSource = serde_json::from_value(json!(name)).expect("read");
            assert_eq!(read, source);
        }
        assert_eq!(ToolSource::parse("A2A"), None);
        assert!(ToolSource::Skill == "skill" && ToolSource::Skill != "a2a");
        assert_eq!(serde_json::to_value(spec()).expect("json")["source"], "a2a");
    }

    #[test]
    fn results_serialise_in_camel_case() {
        let v = serde_json::to_value(ToolResult::error("x")).expect("json");
        assert_eq!(v, json!({"output": "x", "isError": true}));
    }
}
