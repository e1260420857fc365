//! Conversations over real HTTP on 127.0.0.1: a served task stops for input
//! and the caller's answer continues it; a context remembers its turns; the
//! file store keeps both across a restart; and the official SDKs, both ways
//! (their clients answering `toolnexus serve`, `toolnexus call` answering
//! their servers).

mod common;

use common::sdk::{official_client, official_server, Sdk};
use common::{openai_stub, run_to_end, say, start_listening, toolnexus_bin, Proc};
use serde_json::{json, Value};
use std::sync::Arc;
use toolnexus_core::server::{FulfilRequest, Fulfiller, Progress};
use toolnexus_core::BoxFuture;
use toolnexus_core::Role;
use toolnexus_host_native::store::StoreConfig;
use toolnexus_host_native::{
    agent_tools, serve, Agent, Model, NativeTransport, ServeHandle, ServeOptions,
};

const CITY: &str = "Which city?";

/// "ask…" stops in input-required with [`CITY`]; the answer to it books;
/// "recall" answers with the turns it was given; anything else echoes.
struct Asks;

impl Fulfiller for Asks {
    fn fulfil(
        &self,
        r: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            let asked = r
                .history
                .last()
                .filter(|m| m.role == Role::Agent)
                .map(|m| m.text());
            if r.text.starts_with("ask") {
                progress.input_required(CITY);
                return Ok(String::new());
            }
            if r.text == "recall" {
                let turns: Vec<String> = r.history.iter().map(|m| m.text()).collect();
                return Ok(format!("recall [{}]", turns.join(" | ")));
            }
            if asked.as_deref() == Some(CITY) {
                return Ok(format!("booked for {}", r.text));
            }
            Ok(format!("echo: {}", r.text))
        })
    }
}

async fn serve_asks(store: &str) -> ServeHandle {
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    let mut skills = toolnexus_core::skills::SkillSet::new();
    skills.add(toolnexus_core::skills::Skill {
        name: "trips".into(),
        description: "Books trips".into(),
        content: String::new(),
    });
    tk.add_skills(skills);
    let mut options = ServeOptions::new(Arc::new(tk), Model::Custom(Arc::new(Asks)));
    options.store = StoreConfig::parse(store).expect("store selector");
    serve("127.0.0.1:0", options).await.expect("serve")
}

async fn tool_of(handle: &ServeHandle) -> toolnexus_host_native::RemoteTool {
    let agent = Agent::new(format!("{}/.well-known/agent-card.json", handle.url))
        .with_poll_every(std::time::Duration::from_millis(20))
        .with_conversational(true);
    let mut tools = agent_tools(&agent).await.expect("tools");
    assert_eq!(
        tools[0].spec().input_schema["properties"]["taskId"]["type"],
        "string",
        "a conversational agent advertises taskId"
    );
    tools.remove(0)
}

#[tokio::test]
async fn a_question_is_answered_on_the_same_task_and_a_file_store_keeps_the_conversation_across_a_restart(
) {
    let dir = common::temp_dir("conv");
    let store = format!("file:{}", dir.display());
    let handle = serve_asks(&store).await;
    let tool = tool_of(&handle).await;
    let hello = tool
        .execute(&json!({"task": "hello", "contextId": "trip-1"}))
        .await;
    assert_eq!(hello.output, "echo: hello");
    let asked = tool
        .execute(&json!({"task": "ask me", "contextId": "trip-1"}))
        .await;
    assert!(asked.is_error, "{asked:?}");
    let meta = asked.metadata.clone().expect("metadata");
    assert_eq!(meta["state"], "input-required");
    assert!(
        asked.output.ends_with(&format!("input-required: {CITY}")),
        "{}",
        asked.output
    );
    assert_eq!(meta["contextId"], "trip-1");
    let task_id = meta["taskId"].as_str().expect("taskId").to_string();
    // A stream hears of a state as it happens, the store a moment later:
    // stop only once the question is stored.
    stored_state(&handle, &task_id, "input-required").await;
    handle.stop().await;

    // A new process on the same folder: the question is still waiting.
    let handle = serve_asks(&store).await;
    let tool = tool_of(&handle).await;
    let done = tool
        .execute(&json!({"task": "Paris", "taskId": task_id, "contextId": "trip-1"}))
        .await;
    assert!(!done.is_error, "{done:?}");
    assert_eq!(done.output, "booked for Paris");
    assert_eq!(done.metadata.expect("metadata")["taskId"], task_id.as_str());
    let again = tool
        .execute(&json!({"task": "Rome", "taskId": task_id}))
        .await;
    assert!(
        again.is_error && again.output.contains("terminal"),
        "{again:?}"
    );

    let recall = tool
        .execute(&json!({"task": "recall", "contextId": "trip-1"}))
        .await;
    assert_eq!(
        recall.output,
        format!("recall [hello | echo: hello | ask me | {CITY} | Paris | booked for Paris]")
    );
    handle.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

async fn serve_asks_with_push(store: &str) -> ServeHandle {
    let tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    let mut options = ServeOptions::new(Arc::new(tk), Model::Custom(Arc::new(Asks)));
    options.store = StoreConfig::parse(store).expect("store selector");
    // The webhook is on 127.0.0.1: private, so allowed explicitly.
    options.push = Some(toolnexus_host_native::PushOptions {
        allow_private_webhooks: true,
    });
    serve("127.0.0.1:0", options).await.expect("serve")
}

async fn rpc(handle: &ServeHandle, method: &str, params: Value) -> Value {
    use toolnexus_core::Transport;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let req = toolnexus_core::HttpRequest::post_json(
        format!("{}/", handle.url),
        body.to_string().into_bytes(),
    )
    .with_header("A2A-Version", "1.0");
    let resp = NativeTransport::shared().send(req).await.expect(method);
    serde_json::from_slice(&resp.body).expect("JSON-RPC answer")
}

#[tokio::test]
async fn a_file_store_keeps_push_configs_across_a_restart_and_delivery_continues() {
    let dir = common::temp_dir("push");
    let store = format!("file:{}", dir.display());
    let (hook, hits) = common::Stub::webhook().await;
    let webhook = format!("{}/hook", hook.url());

    let handle = serve_asks_with_push(&store).await;
    let asked = rpc(
        &handle,
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "ask me"}]}}),
    )
    .await;
    let task = &asked["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let id = task["id"].as_str().expect("id").to_string();
    let set = rpc(
        &handle,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": webhook, "token": "tk",
               "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}),
    )
    .await;
    let cid = set["result"]["id"].as_str().expect("config id").to_string();
    handle.stop().await;

    // A new process on the same folder: the config is still there.
    let handle = serve_asks_with_push(&store).await;
    let got = rpc(
        &handle,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": cid}),
    )
    .await;
    assert_eq!(got["result"]["url"], webhook.as_str(), "{got}");
    assert!(!got.to_string().contains("s3cret"), "{got}");
    let listed = rpc(
        &handle,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    assert_eq!(
        listed["result"]["configs"][0]["id"],
        cid.as_str(),
        "{listed}"
    );

    // The answer resumes the task, and its states reach the webhook.
    let done = rpc(
        &handle,
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": id,
                           "parts": [{"text": "Paris"}]}}),
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    // Delivery runs in the background: wait (bounded) for the completed state.
    let mut states = Vec::new();
    for _ in 0..300 {
        states = hits
            .lock()
            .expect("hits")
            .iter()
            .map(|r| {
                assert_eq!(r.header("Authorization"), Some("Bearer s3cret"));
                assert_eq!(r.header("X-A2A-Notification-Token"), Some("tk"));
                let v: Value = serde_json::from_slice(&r.body).expect("json");
                v["task"]["status"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect::<Vec<_>>();
        if states.last().map(String::as_str) == Some("TASK_STATE_COMPLETED") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{states:?}"
    );
    handle.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (a bounded number of GetTask reads) until the stored task is in `state`.
async fn stored_state(handle: &ServeHandle, id: &str, state: &str) {
    use toolnexus_core::Transport;
    let mut last = Value::Null;
    for _ in 0..200 {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": id}});
        let req = toolnexus_core::HttpRequest::post_json(
            format!("{}/", handle.url),
            body.to_string().into_bytes(),
        );
        let resp = NativeTransport::shared().send(req).await.expect("GetTask");
        last = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
        if last["result"]["status"]["state"] == state {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("task {id} never stored as {state}: {last}");
}

// ---------------------------------------------------------------------------
// The official SDKs

/// `toolnexus serve` whose model (an OpenAI stub) asks the caller with the
/// built-in question tool, then books what the caller answered.
async fn serve_asking_model() -> (Proc, common::Stub) {
    let (stub, _log) = openai_stub(|body: &Value| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let answered = messages.iter().any(|m| m["role"] == "assistant");
        if !answered {
            return json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "question", "arguments": "{\"questions\":[{\"question\":\"Which city?\"}]}"}}]});
        }
        let last = messages.last().and_then(|m| m["content"].as_str()).unwrap_or_default();
        say(&format!("booked for {last}"))
    })
    .await;
    let base = format!("{}/v1", stub.url());
    let server = start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "openai",
            "--llm-base-url",
            &base,
            "--model",
            "stub",
            "--name",
            "tn-asks",
        ],
    )
    .await;
    (server, stub)
}

async fn sdk_clients_answer_serve(sdk: Sdk) {
    let (server, _model) = serve_asking_model().await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    for mode in [
        &[][..],
        &["--legacy"],
        &["--non-blocking"],
        &["--stream"],
        &["--legacy", "--stream"],
    ] {
        let mut extra = vec!["--answer", "Paris"];
        extra.extend_from_slice(mode);
        let (code, v, stderr) = official_client(sdk, &card, "book a trip", &extra).await;
        assert_eq!(code, 0, "{sdk:?} {mode:?}: {v} {stderr}");
        assert_eq!(v["asked"], CITY, "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["sameTask"], true, "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["text"], "booked for Paris", "{sdk:?} {mode:?}: {v}");
    }
}

#[tokio::test]
async fn the_python_sdk_client_answers_a_question_from_serve() {
    sdk_clients_answer_serve(Sdk::Python).await;
}

#[tokio::test]
async fn the_js_sdk_client_answers_a_question_from_serve() {
    sdk_clients_answer_serve(Sdk::Js).await;
}

async fn call(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["call", "--no-cache", "--timeout", "30000"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = run_to_end(&toolnexus_bin(), &all).await;
    (
        code,
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    )
}

/// `toolnexus call` gets the SDK peer's question, then answers it with
/// `--task-id` / `--context-id` from the question's metadata.
async fn call_answers_an_sdk_server(sdk: Sdk, compat_03: bool) {
    let peer = official_server(sdk, compat_03).await;
    let card = format!("{}/.well-known/agent-card.json", peer.url);
    let (code, asked, stderr) = call(&[&card, "echo", "ask for a trip"]).await;
    assert_eq!(code, 2, "{sdk:?}: {asked} {stderr}");
    assert_eq!(asked["isError"], true);
    assert_eq!(asked["metadata"]["state"], "input-required", "{asked}");
    assert!(
        asked["output"]
            .as_str()
            .unwrap_or("")
            .ends_with(": Which city?"),
        "{asked}"
    );
    let task_id = asked["metadata"]["taskId"].as_str().expect("taskId");
    let context_id = asked["metadata"]["contextId"].as_str().expect("contextId");
    let (code, done, stderr) = call(&[
        "--task-id",
        task_id,
        "--context-id",
        context_id,
        &card,
        "echo",
        "Paris",
    ])
    .await;
    assert_eq!(code, 0, "{sdk:?}: {done} {stderr}");
    assert_eq!(done["output"], "booked for Paris");
    assert_eq!(done["metadata"]["taskId"], task_id);
    assert_eq!(done["metadata"]["state"], "completed");
}

#[tokio::test]
async fn toolnexus_call_answers_the_python_sdk_server() {
    call_answers_an_sdk_server(Sdk::Python, false).await;
    call_answers_an_sdk_server(Sdk::Python, true).await;
}

#[tokio::test]
async fn toolnexus_call_answers_the_js_sdk_server() {
    call_answers_an_sdk_server(Sdk::Js, false).await;
    call_answers_an_sdk_server(Sdk::Js, true).await;
}
