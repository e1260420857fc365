//! The built-in `question` tool (toolnexus SPEC §4A): the model asks the
//! human, and the run suspends (§10) with a `kind:"question"` request.
//!
//! A served agent offers it so its model can ask the caller: the task stops
//! in `input-required` with the rendered questions, and the caller's answer
//! continues the task (the model then reads the answer as the next turn).

use crate::model::tool::{ToolResult, ToolSpec};
use crate::wire::json::object;
use serde_json::Value;

/// The tool's name, the same in every toolnexus port.
pub const NAME: &str = "question";

const DESCRIPTION: &str = "Ask the user one or more questions when you cannot go on without their answer (a missing detail, a choice between options, a confirmation). The task pauses until the user replies; their reply comes back as the next message. Do not use it to ask for passwords, keys or other secrets.";

/// The input schema, as text: parsed on use, smaller in the `.wasm` than `json!`.
const SCHEMA: &str = r#"{"type":"object","properties":{"questions":{"type":"array","description":"The questions, in the order to ask them","items":{"type":"object","properties":{"question":{"type":"string","description":"The question"},"header":{"type":"string","description":"A short label for it"},"options":{"type":"array","items":{"type":"string"},"description":"Answers to choose from, if any"},"multiple":{"type":"boolean","description":"Whether several options may be chosen"}},"required":["question"]}}},"required":["questions"]}"#;

/// The tool's descriptor: `questions`, each `{question, header?, options?, multiple?}`.
pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: DESCRIPTION.into(),
        // A constant that parses: the test below says so.
        input_schema: serde_json::from_slice(SCHEMA.as_bytes()).unwrap_or_default(),
        source: crate::model::tool::ToolSource::Builtin,
    }
}

/// The questions rendered as the request's prompt: each question's text in
/// order, `" (options: a, b, c)"` after one with options, joined by `"\n"`.
pub fn render(questions: &[Value]) -> String {
    // Plain loops, not iterator chains (see ARCHITECTURE.md).
    let mut out = String::new();
    let mut first = true;
    for q in questions {
        let Some(text) = q.get("question").and_then(Value::as_str) else {
            continue;
        };
        if !first {
            out.push('\n');
        }
        first = false;
        out.push_str(text);
        let mut listed = false;
        let options = q.get("options").and_then(Value::as_array);
        for option in options.map_or(&[][..], Vec::as_slice) {
            if let Some(option) = option.as_str() {
                out.push_str(if listed { ", " } else { " (options: " });
                out.push_str(option);
                listed = true;
            }
        }
        if listed {
            out.push(')');
        }
    }
    out
}

/// Runs the tool: a suspension carrying the request `{id, kind:"question",
/// prompt, data:{questions}}` (`id` from the caller), or an error result for
/// arguments without a question.
pub fn ask(args: &Value, id: String) -> ToolResult {
    // Lenient with a model that sends one `question` string.
    let questions = match (args.get("questions"), args.get("question")) {
        (Some(Value::Array(qs)), _) => qs.clone(),
        (_, Some(Value::String(q))) => vec![object([("question", q.as_str().into())])],
        _ => Vec::new(),
    };
    let prompt = render(&questions);
    if prompt.is_empty() {
        return ToolResult::error(
            "Error: the question tool needs `questions`, a non-empty array of {question: string}",
        );
    }
    ToolResult {
        output: prompt.clone(),
        is_error: true,
        metadata: Some(object([(
            "pending",
            object([
                ("id", id.into()),
                ("kind", "question".into()),
                ("prompt", prompt.into()),
                ("data", object([("questions", Value::Array(questions))])),
            ]),
        )])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn the_schema_asks_for_questions() {
        let schema = spec().input_schema;
        assert_eq!(schema["required"], json!(["questions"]));
        assert_eq!(
            schema["properties"]["questions"]["items"]["required"],
            json!(["question"])
        );
    }

    #[test]
    fn questions_render_in_order_with_their_options() {
        let qs = json!([
            {"question": "Which city?", "header": "City"},
            {"question": "Which class?", "options": ["economy", "business"]},
            {"question": "Window?", "options": []}
        ]);
        let prompt = render(qs.as_array().unwrap());
        assert_eq!(
            prompt,
            "Which city?\nWhich class? (options: economy, business)\nWindow?"
        );
        let r = ask(&json!({"questions": qs}), "q1".into());
        assert!(r.is_error);
        assert_eq!(r.output, prompt);
        let pending = crate::llm::pending_request(&r).expect("a suspension");
        assert_eq!(pending["id"], "q1");
        assert_eq!(pending["kind"], "question");
        assert_eq!(pending["prompt"], prompt);
        assert_eq!(pending["data"]["questions"], qs);
    }

    #[test]
    fn a_single_question_string_is_taken_and_no_question_is_an_error() {
        let r = ask(&json!({"question": "Which day?"}), "q".into());
        assert_eq!(r.output, "Which day?");
        assert!(crate::llm::pending_request(&r).is_some());
        for args in [
            json!({}),
            json!({"questions": []}),
            json!({"questions": [{"header": "x"}]}),
        ] {
            let r = ask(&args, "q".into());
            assert!(
                r.is_error && crate::llm::pending_request(&r).is_none(),
                "{args}"
            );
        }
    }
}
