//! A stub OpenAI-style model that records each request's `traceparent`,
//! and the skills and answers the trace tests (trace_context.rs, otel.rs)
//! give it.

use super::{json_response, start_listening_env, temp_dir, toolnexus_bin, Proc, Stub};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The `traceparent` of each request a stub saw, in order.
pub type Seen = Arc<Mutex<Vec<Option<String>>>>;

/// An OpenAI-style model (`stub-1`, reporting 11 tokens in and 7 out)
/// recording each request's `traceparent`; `answer` gets the request body
/// and returns `choices[0].message`.
pub async fn model(answer: impl Fn(&Value) -> Value + Send + Sync + 'static) -> (Stub, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let stub = Stub::start(move |req| {
        log.lock()
            .expect("seen")
            .push(req.header("traceparent").map(str::to_string));
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        json_response(
            200,
            &json!({"model": "stub-1", "choices": [{"message": answer(&body)}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7}}),
        )
    })
    .await;
    (stub, seen)
}

/// An assistant message saying `text`.
pub fn say(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// A model that calls the first A2A tool it is offered (not `skill` nor
/// `question`) once, then says `done` with what the tool answered.
pub fn calls_the_agent_tool(body: &Value) -> Value {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if let Some(result) = messages.iter().find(|m| m["role"] == "tool") {
        return say(&format!(
            "done: {}",
            result["content"].as_str().unwrap_or_default()
        ));
    }
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let tool = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .find(|n| *n != "skill" && *n != "question")
        .unwrap_or("missing");
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": tool, "arguments": "{\"task\":\"look it up\"}"}}]})
}

/// A folder with one skill, `name`.
pub fn skills(name: &str) -> PathBuf {
    let dir = temp_dir(&format!("traced-skills-{name}"));
    std::fs::create_dir_all(dir.join(name)).expect("mkdir");
    std::fs::write(
        dir.join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: the {name} skill\n---\nDo it."),
    )
    .expect("write");
    dir
}

/// `toolnexus serve` with the OpenAI-style model at `model_url`, the
/// skills folder `skill`, more arguments and environment variables.
pub async fn serve(model_url: &str, skill: &Path, extra: &[&str], env: &[(&str, &str)]) -> Proc {
    let skill = skill.display().to_string();
    let mut args = vec![
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--skills",
        &skill,
        "--llm",
        "openai",
        "--model",
        "m",
        "--llm-base-url",
        model_url,
    ];
    args.extend_from_slice(extra);
    start_listening_env(&toolnexus_bin(), &args, env).await
}

/// The Agent Card URL of a served agent.
pub fn card(proc: &Proc) -> String {
    format!("{}/.well-known/agent-card.json", proc.url)
}
