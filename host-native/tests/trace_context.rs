//! W3C trace context across processes over real HTTP: `toolnexus call`
//! continues `TRACEPARENT`, `toolnexus serve` takes the caller's
//! `traceparent` with the task and sends it on (model calls, A2A tool
//! calls, webhooks, follow-ups), and the official SDK peers take part.

mod common;

use common::sdk::{official_client_env, py_server_with, Sdk};
use common::traced::{calls_the_agent_tool, card, model, say, serve, skills, Seen};
use common::{run_to_end_env, temp_dir, toolnexus_bin, Stub};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};
use toolnexus_core::HttpResponse;

/// The caller's span: what `TRACEPARENT` names.
const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

/// The (trace id, span id) of a `traceparent`, checked to be well formed.
fn ids(traceparent: &str) -> (&str, &str) {
    let fields: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(fields.len(), 4, "{traceparent}");
    assert_eq!(
        (fields[0], fields[1].len(), fields[2].len()),
        ("00", 32, 16)
    );
    (fields[1], fields[2])
}

/// Asserts every request in `seen` came in the test's trace, each as a span
/// of its own (never the caller's span itself); returns their span ids.
fn all_in_the_trace(who: &str, seen: &Seen) -> Vec<String> {
    let seen = seen.lock().expect("seen").clone();
    assert!(!seen.is_empty(), "{who} saw no request");
    seen.iter()
        .map(|t| {
            let t = t
                .as_deref()
                .unwrap_or_else(|| panic!("{who}: a request without traceparent"));
            let (trace, span) = ids(t);
            assert_eq!(trace, TRACE_ID, "{who}: {t}");
            assert_ne!(span, PARENT_SPAN, "{who}: a span of its own");
            span.to_string()
        })
        .collect()
}

/// Every `.json` file under `dir`, read as text.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    out
}

#[tokio::test]
async fn one_trace_from_the_cli_through_agent_a_its_model_and_agent_b() {
    let (model_b, seen_b) = model(|_| say("found it")).await;
    let store_b = temp_dir("trace-store-b");
    let store_arg = format!("file:{}", store_b.display());
    let b = serve(
        model_b.url(),
        &skills("lookup"),
        &["--name", "agent-b", "--store", &store_arg],
        &[],
    )
    .await;

    let (model_a, seen_a) = model(calls_the_agent_tool).await;
    let config = temp_dir("trace-config-a");
    std::fs::create_dir_all(&config).expect("mkdir");
    let config_file = config.join("a.json");
    std::fs::write(
        &config_file,
        json!({"agents": {"b": {"card": card(&b)}}}).to_string(),
    )
    .expect("write");
    let config_arg = config_file.display().to_string();
    let a = serve(
        model_a.url(),
        &skills("ask"),
        &["--name", "agent-a", "--config", &config_arg],
        &[],
    )
    .await;

    let (code, stdout, stderr) = run_to_end_env(
        &toolnexus_bin(),
        &["call", &card(&a), "ask", "hello"],
        &[("TRACEPARENT", PARENT), ("TRACESTATE", "vendor=abc")],
    )
    .await;
    assert_eq!(code, 0, "{stdout} {stderr}");
    let out: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(out["output"], "done: found it", "{out}");

    // A's model: both turns in the trace, each request a span of its own.
    let a_spans = all_in_the_trace("agent A's model", &seen_a);
    assert_eq!(a_spans.len(), 2, "the tool call turn and the answer turn");
    assert_ne!(a_spans[0], a_spans[1]);
    // B took the trace from A's call (its model is in it too) and stored it
    // with its task.
    all_in_the_trace("agent B's model", &seen_b);
    let stored = files_under(&store_b);
    assert!(
        stored
            .iter()
            .any(|t| t.contains(&format!("\"traceparent\":\"00-{TRACE_ID}-"))
                && t.contains("\"tracestate\":\"vendor=abc\"")),
        "B's stored task keeps the trace: {stored:?}"
    );
    let _ = std::fs::remove_dir_all(&store_b);
    let _ = std::fs::remove_dir_all(&config);
}

#[tokio::test]
async fn without_traceparent_nothing_is_sent_on() {
    let (model_a, seen) = model(|_| say("plain")).await;
    let a = serve(model_a.url(), &skills("ask"), &[], &[]).await;
    let (code, stdout, stderr) = run_to_end_env(
        &toolnexus_bin(),
        &["call", &card(&a), "ask", "hello"],
        // Not a valid traceparent (uppercase): ignored, as W3C asks.
        &[("TRACEPARENT", &PARENT.to_uppercase())],
    )
    .await;
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert_eq!(seen.lock().expect("seen").clone(), [None]);
}

#[tokio::test]
async fn an_official_python_sdk_server_receives_the_traceparent_of_toolnexus_call() {
    let peer = py_server_with(&[]).await;
    let (code, stdout, stderr) = run_to_end_env(
        &toolnexus_bin(),
        &["call", &card(&peer), "echo", "traceparent please"],
        &[("TRACEPARENT", PARENT)],
    )
    .await;
    assert_eq!(code, 0, "{stdout} {stderr}");
    let out: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    let text = out["output"].as_str().unwrap_or_default();
    let seen = text
        .strip_prefix("traceparent: ")
        .unwrap_or_else(|| panic!("{out}"));
    let (trace, span) = ids(seen);
    assert_eq!(trace, TRACE_ID);
    assert_ne!(span, PARENT_SPAN, "the command is a span of its own");
}

#[tokio::test]
async fn an_official_python_sdk_clients_traceparent_is_continued_by_serve() {
    let (model_a, seen) = model(|_| say("hi from the model")).await;
    let a = serve(model_a.url(), &skills("ask"), &[], &[]).await;
    let (code, out, stderr) = official_client_env(
        Sdk::Python,
        &card(&a),
        "hello",
        &[],
        &[("TRACEPARENT", PARENT)],
    )
    .await;
    assert_eq!(code, 0, "{out} {stderr}");
    assert_eq!(out["text"], "hi from the model", "{out}");
    all_in_the_trace("the model", &seen);
}

#[tokio::test]
async fn a_follow_up_and_its_push_delivery_stay_in_the_tasks_trace() {
    // The model asks the user first (the built-in `question` tool), then
    // answers the follow-up.
    let (model_a, seen) = model(|body| {
        // The answer reaches the model in the conversation, whatever its form.
        if body["messages"].to_string().contains("Paris") {
            return say("booked");
        }
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "q1", "type": "function",
            "function": {"name": "question", "arguments": "{\"question\":\"Which city?\"}"}}]})
    })
    .await;
    let hooks: Seen = Arc::default();
    let states: Arc<Mutex<Vec<String>>> = Arc::default();
    let (log, state_log) = (hooks.clone(), states.clone());
    let webhook = Stub::start(move |req| {
        log.lock()
            .expect("hooks")
            .push(req.header("traceparent").map(str::to_string));
        let task: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let state = task["status"]["state"].as_str().unwrap_or_default();
        state_log.lock().expect("states").push(state.to_string());
        HttpResponse {
            status: 204,
            headers: Vec::new(),
            body: Vec::new(),
        }
    })
    .await;
    let a = serve(
        model_a.url(),
        &skills("ask"),
        &["--push-notifications", "--allow-private-webhooks"],
        &[],
    )
    .await;
    let client = reqwest_like(&a.url);
    let first = client
        .send(
            json!({"message": {"role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": "book a trip"}]},
            "configuration": {"pushNotificationConfig": {"url": webhook.url()}}}),
            Some(PARENT),
        )
        .await;
    assert_eq!(
        first["result"]["status"]["state"], "input-required",
        "{first}"
    );
    let id = first["result"]["id"].as_str().expect("task id").to_string();
    let ctx = first["result"]["contextId"]
        .as_str()
        .expect("context id")
        .to_string();
    // The follow-up comes with no traceparent: it continues the task's trace.
    let second = client
        .send(
            json!({"message": {"role": "user", "messageId": "m2", "taskId": id, "contextId": ctx,
            "parts": [{"kind": "text", "text": "Paris"}]}}),
            None,
        )
        .await;
    assert_eq!(second["result"]["status"]["state"], "completed", "{second}");
    let spans = all_in_the_trace("the model", &seen);
    assert_eq!(spans.len(), 2, "the question turn and the follow-up's turn");
    // Every delivery (the states of both runs) carries the task's trace;
    // deliveries run in the background: wait (bounded) for the last one.
    let delivered = |state: &str| states.lock().expect("states").iter().any(|s| s == state);
    for _ in 0..500 {
        if delivered("completed") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        delivered("input-required") && delivered("completed"),
        "{:?}",
        states.lock().expect("states")
    );
    all_in_the_trace("the webhook", &hooks);
}

/// A JSON-RPC client of one agent, with an optional `traceparent`.
struct Rpc {
    url: String,
}

fn reqwest_like(url: &str) -> Rpc {
    Rpc {
        url: format!("{url}/"),
    }
}

impl Rpc {
    async fn send(&self, params: Value, traceparent: Option<&str>) -> Value {
        use toolnexus_core::Transport;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params});
        let mut req =
            toolnexus_core::HttpRequest::post_json(&self.url, body.to_string().into_bytes());
        if let Some(t) = traceparent {
            req = req.with_header("traceparent", t);
        }
        let resp = toolnexus_host_native::NativeTransport::new()
            .send(req)
            .await
            .expect("an answer");
        serde_json::from_slice(&resp.body).expect("JSON-RPC answer")
    }
}
