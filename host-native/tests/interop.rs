//! Interop with the official A2A SDKs 1.3.0 (Python `a2a-sdk`, npm
//! `@a2a-js/sdk`), in their default 1.0 mode and with 0.3 compatibility, and
//! with a toolnexus-dialect peer — as a client (`toolnexus call`) and as a
//! server (`toolnexus serve` called by the official clients).
//!
//! The peers come from `bash tests/peers/setup.sh`, which the README test
//! command runs first.

mod common;

use common::sdk::{official_client, official_server, Sdk, CLIENT_MODES};
use common::{repo_root, run_to_end, start_listening, toolnexus_bin, Proc, Steps};
use serde_json::{json, Value};

async fn call(card: &str, tool: &str, task: &str) -> (i32, Value, String) {
    let (code, stdout, stderr) = run_to_end(
        &toolnexus_bin(),
        &["call", card, tool, task, "--timeout", "30000"],
    )
    .await;
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (code, v, stderr)
}

/// `toolnexus tools` and `toolnexus call` against one peer: the echo skill
/// completes with the agent's text, the fail skill comes back as isError with
/// the agent's message.
async fn client_round_trip(card: &str, agent: &str) {
    let (code, stdout, stderr) = run_to_end(&toolnexus_bin(), &["tools", card]).await;
    assert_eq!(code, 0, "tools: {stderr}");
    let tools: Value = serde_json::from_str(&stdout).expect("tools JSON");
    let names: Vec<&str> = tools
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&format!("{agent}_echo").as_str()),
        "{names:?}"
    );

    let (code, r, stderr) = call(card, "echo", "hello interop").await;
    assert_eq!(code, 0, "echo: {r} {stderr}");
    assert_eq!(r["output"], "echo: hello interop");
    assert_eq!(r["metadata"]["state"], "completed");
    assert_eq!(r["metadata"]["agent"], agent);

    let (code, r, stderr) = call(card, &format!("{agent}_fail"), "fail on purpose").await;
    assert_eq!(code, 2, "fail: {r} {stderr}");
    assert_eq!(r["isError"], true);
    assert_eq!(r["metadata"]["state"], "failed");
    assert!(
        r["output"]
            .as_str()
            .is_some_and(|o| o.contains("deliberate failure: fail on purpose")),
        "{r}"
    );
}

#[tokio::test]
async fn client_against_the_python_sdk_in_10_mode() {
    let peer = official_server(Sdk::Python, false).await;
    client_round_trip(
        &format!("{}/.well-known/agent-card.json", peer.url),
        "py-agent",
    )
    .await;
}

#[tokio::test]
async fn client_against_the_python_sdk_with_03_compat() {
    let peer = official_server(Sdk::Python, true).await;
    client_round_trip(
        &format!("{}/.well-known/agent-card.json", peer.url),
        "py-agent",
    )
    .await;
}

#[tokio::test]
async fn client_against_the_js_sdk_in_10_mode() {
    let peer = official_server(Sdk::Js, false).await;
    client_round_trip(
        &format!("{}/.well-known/agent-card.json", peer.url),
        "js-agent",
    )
    .await;
}

#[tokio::test]
async fn client_against_the_js_sdk_with_03_compat() {
    let peer = official_server(Sdk::Js, true).await;
    client_round_trip(
        &format!("{}/.well-known/agent-card.json", peer.url),
        "js-agent",
    )
    .await;
}

/// A peer speaking only the toolnexus reference dialect: `SendMessage` and
/// `GetTask` with 0.3 shapes, a card with just `url`; every other method name
/// is -32601.
#[tokio::test]
async fn client_against_a_toolnexus_dialect_peer() {
    use common::{json_response, Stub};
    use std::sync::{Arc, Mutex};
    let tasks: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let url_cell: Arc<Mutex<String>> = Arc::default();
    let (tasks_h, url_h) = (tasks.clone(), url_cell.clone());
    let peer = Stub::start(move |req| {
        if req.method == "GET" {
            let url = url_h.lock().expect("url").clone();
            return json_response(200, &json!({"name": "tn-agent", "description": "", "version": "0.1.0",
                "protocolVersion": "0.3.0", "url": url, "capabilities": {"streaming": false},
                "skills": [{"id": "echo", "name": "echo", "description": "Echo"}, {"id": "fail", "name": "fail", "description": "Fails"}]}));
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let id = body["id"].clone();
        let answer = |result: Value| json_response(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}));
        let task_value = |tid: &str, text: &str| {
            if text.starts_with("fail") {
                json!({"id": tid, "contextId": "c", "status": {"state": "failed", "message": {"role": "agent",
                    "parts": [{"kind": "text", "text": format!("deliberate failure: {text}")}]}}})
            } else {
                json!({"id": tid, "contextId": "c", "status": {"state": "completed"},
                    "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": format!("echo: {text}")}]}]})
            }
        };
        match body["method"].as_str() {
            Some("SendMessage") if req.header("A2A-Version").is_none() => {
                let text = body["params"]["message"]["parts"][0]["text"].as_str().unwrap_or_default().to_string();
                let mut tasks = tasks_h.lock().expect("tasks");
                let tid = format!("t{}", tasks.len() + 1);
                tasks.push((tid.clone(), text));
                answer(json!({"id": tid, "contextId": "c", "status": {"state": "working"}}))
            }
            Some("GetTask") => {
                let tid = body["params"]["id"].as_str().unwrap_or_default();
                let tasks = tasks_h.lock().expect("tasks");
                match tasks.iter().find(|(t, _)| t == tid) {
                    Some((t, text)) => answer(task_value(t, text)),
                    None => json_response(200, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32001, "message": "Task not found"}})),
                }
            }
            other => json_response(200, &json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("Method not found: {other:?}")}})),
        }
    })
    .await;
    *url_cell.lock().expect("url") = format!("{}/", peer.url());
    client_round_trip(&peer.card_url(), "tn-agent").await;
    peer.handle.stop().await;
}

async fn our_server() -> Proc {
    let skills = repo_root().join("examples/skills").display().to_string();
    start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--skills",
            &skills,
            "--name",
            "tn-served",
        ],
    )
    .await
}

async fn served_to(sdk: Sdk) {
    let server = our_server().await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    for mode in CLIENT_MODES {
        let text = format!("hello from {sdk:?} {mode:?}");
        let (code, v, stderr) = official_client(sdk, &card, &text, mode).await;
        assert_eq!(code, 0, "{sdk:?} {mode:?}: {v} {stderr}");
        assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["text"], text.as_str(), "{sdk:?} {mode:?}");
        if mode.contains(&"--stream") {
            // Streamed for real (the card says streaming:true), not a
            // blocking send: the terminal state came as an event.
            let kinds = event_kinds(&v);
            assert_eq!(kinds.first().map(|k| k.0.as_str()), Some("task"), "{v}");
            assert_eq!(
                kinds.last(),
                Some(&("status-update".to_string(), "completed".to_string())),
                "{sdk:?} {mode:?}: {v}"
            );
        }
    }
}

/// `(kind, state)` of each event a `--stream` client printed.
fn event_kinds(v: &Value) -> Vec<(String, String)> {
    v["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or("-").to_string();
                    (s("kind"), s("state"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The official clients' default streaming path (1.0 `SendStreamingMessage`
/// and legacy 0.3 `message/stream`) against `serve` with a one-second task:
/// events arrive as the task goes, and the terminal state is an event after
/// at least one intermediate one.
async fn streams_a_slow_task_to(sdk: Sdk) {
    use std::sync::Arc;
    use toolnexus_host_native::{serve, Model, NativeTransport, ServeOptions};
    let tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    let handle = serve(
        "127.0.0.1:0",
        ServeOptions::new(Arc::new(tk), Model::Custom(Arc::new(Steps))),
    )
    .await
    .expect("serve");
    let card = format!("{}/.well-known/agent-card.json", handle.url);
    for mode in [&["--stream"][..], &["--stream", "--legacy"]] {
        let (code, v, stderr) = official_client(sdk, &card, "go slowly", mode).await;
        assert_eq!(code, 0, "{sdk:?} {mode:?}: {v} {stderr}");
        assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["text"], "part one\npart two", "{sdk:?} {mode:?}: {v}");
        let events = v["events"].as_array().expect("events");
        let at = |e: &Value| e["t_ms"].as_f64().expect("t_ms");
        let last = events.last().expect("an event");
        assert_eq!(
            (last["kind"].as_str(), last["state"].as_str()),
            (Some("status-update"), Some("completed")),
            "{sdk:?} {mode:?}: {v}"
        );
        assert!(
            at(last) >= 800.0,
            "{sdk:?} {mode:?}: completed at {} ms",
            at(last)
        );
        let intermediate: Vec<&Value> = events[..events.len() - 1]
            .iter()
            .filter(|e| e["kind"] == "artifact-update" || e["state"] == "working")
            .collect();
        assert!(!intermediate.is_empty(), "{sdk:?} {mode:?}: {v}");
        assert!(
            at(intermediate[0]) + 300.0 < at(last),
            "{sdk:?} {mode:?}: the first progress came as it happened: {v}"
        );
        let chunks: Vec<&str> = events
            .iter()
            .filter(|e| e["kind"] == "artifact-update")
            .filter_map(|e| e["text"].as_str())
            .collect();
        assert_eq!(chunks, ["part one", "part two"], "{sdk:?} {mode:?}: {v}");
    }
    handle.stop().await;
}

#[tokio::test]
async fn the_python_sdk_client_streams_a_slow_task_from_serve() {
    streams_a_slow_task_to(Sdk::Python).await;
}

#[tokio::test]
async fn the_js_sdk_client_streams_a_slow_task_from_serve() {
    streams_a_slow_task_to(Sdk::Js).await;
}

#[tokio::test]
async fn the_python_sdk_client_calls_toolnexus_serve() {
    served_to(Sdk::Python).await;
}

#[tokio::test]
async fn the_js_sdk_client_calls_toolnexus_serve() {
    served_to(Sdk::Js).await;
}

/// The official clients list tasks (ListTasks, 1.0) from `toolnexus serve`:
/// the task they just ran is there, with its answer.
async fn lists_tasks_of(sdk: Sdk) {
    let server = our_server().await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    let text = format!("list me, {sdk:?}");
    let (code, v, stderr) = official_client(sdk, &card, &text, &["--list"]).await;
    assert_eq!(code, 0, "{sdk:?}: {v} {stderr}");
    assert_eq!(v["totalSize"], 1, "{sdk:?}: {v}");
    assert_eq!(
        v["listed"],
        json!([{"id": v["listed"][0]["id"], "state": "completed", "text": text}]),
        "{sdk:?}: {v}"
    );
}

#[tokio::test]
async fn the_python_sdk_client_lists_tasks_from_serve() {
    lists_tasks_of(Sdk::Python).await;
}

#[tokio::test]
async fn the_js_sdk_client_lists_tasks_from_serve() {
    lists_tasks_of(Sdk::Js).await;
}

/// The official clients set webhooks on `toolnexus serve` (on the message,
/// and with the four config methods) and the webhook gets the task's states
/// with the config's Authorization: in 1.0 (`{"task": …}`) and, with
/// `--legacy`, in 0.3 (`tasks/pushNotificationConfig/*`, the bare task).
async fn pushes_to(sdk: Sdk, legacy: bool) {
    let (hook, hits) = common::Stub::webhook().await;
    let skills = repo_root().join("examples/skills").display().to_string();
    let server = start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--skills",
            &skills,
            // The webhook is on 127.0.0.1: private, so allowed explicitly.
            "--allow-private-webhooks",
        ],
    )
    .await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    let webhook = format!("{}/hook", hook.url());
    let text = format!("push me, {sdk:?}");
    let mut args = vec!["--push", webhook.as_str()];
    if legacy {
        args.push("--legacy");
    }
    let (code, v, stderr) = official_client(sdk, &card, &text, &args).await;
    assert_eq!(code, 0, "{sdk:?}: {v} {stderr}");
    let push = &v["push"];
    assert_eq!(
        push["listed"], 2,
        "the message's config and the created one: {v}"
    );
    assert_eq!(push["afterDelete"], 1, "{v}");
    assert_eq!(push["got"], format!("{webhook}/2"), "{v}");
    let task_id = push["taskId"].as_str().expect("task id").to_string();
    // Delivery runs beside the task: wait (bounded) for the terminal state.
    let secret = if sdk == Sdk::Python {
        "py-secret"
    } else {
        "js-secret"
    };
    let mut states = Vec::new();
    for _ in 0..200 {
        states = hits
            .lock()
            .expect("hits")
            .iter()
            .map(|r| {
                assert_eq!(
                    r.header("Authorization"),
                    Some(format!("Bearer {secret}").as_str())
                );
                let body: Value = serde_json::from_slice(&r.body).expect("a JSON body");
                let task = if legacy { &body } else { &body["task"] };
                assert_eq!(task["id"], task_id.as_str(), "{body}");
                task["status"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        if states
            .last()
            .is_some_and(|s| s == "TASK_STATE_COMPLETED" || s == "completed")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let completed = if legacy {
        "completed"
    } else {
        "TASK_STATE_COMPLETED"
    };
    assert_eq!(
        states.last().map(String::as_str),
        Some(completed),
        "{states:?}"
    );
}

#[tokio::test]
async fn the_python_sdk_client_gets_push_notifications_from_serve() {
    pushes_to(Sdk::Python, false).await;
    pushes_to(Sdk::Python, true).await;
}

#[tokio::test]
async fn the_js_sdk_client_gets_push_notifications_from_serve() {
    pushes_to(Sdk::Js, false).await;
    pushes_to(Sdk::Js, true).await;
}
