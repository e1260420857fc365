//! The HTTP+JSON (REST) binding over real HTTP: the official SDK clients'
//! REST transports (Python `a2a-sdk`, npm `@a2a-js/sdk`, 1.0 and 0.3)
//! against `toolnexus serve`, and the A2A 1.0.1 error statuses on the wire.

mod common;

use common::sdk::{official_client, official_server_with, Sdk};
use common::{repo_root, run_to_end, start_listening, toolnexus_bin, Proc, Stub};
use serde_json::Value;
use toolnexus_core::{HttpRequest, Transport};
use toolnexus_host_native::NativeTransport;

/// `toolnexus serve` (echo model) with `extra` flags.
async fn served(extra: &[&str]) -> Proc {
    let skills = repo_root().join("examples/skills").display().to_string();
    let mut args = vec![
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--llm",
        "echo",
        "--skills",
        &skills,
    ];
    args.extend_from_slice(extra);
    start_listening(&toolnexus_bin(), &args).await
}

/// Every way the SDK clients send over REST, on a server that offers only
/// HTTP+JSON (so nothing can fall back to JSON-RPC).
const REST_MODES: [&[&str]; 8] = [
    &["--rest"],
    &["--rest", "--non-blocking"],
    &["--rest", "--stream"],
    &["--rest", "--list", "--cancel"],
    &["--rest", "--legacy"],
    &["--rest", "--legacy", "--non-blocking"],
    &["--rest", "--legacy", "--stream"],
    &["--rest", "--legacy", "--cancel"],
];

async fn rest_clients_complete_tasks(sdk: Sdk) {
    let server = served(&["--bindings", "rest"]).await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    for mode in REST_MODES {
        let text = format!("hello over REST from {sdk:?} {mode:?}");
        let (code, v, stderr) = official_client(sdk, &card, &text, mode).await;
        assert_eq!(code, 0, "{sdk:?} {mode:?}: {v} {stderr}");
        assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["text"], text.as_str(), "{sdk:?} {mode:?}");
        if mode.contains(&"--stream") {
            let events = v["events"].as_array().expect("events");
            assert_eq!(events[0]["kind"], "task", "{v}");
            let last = events.last().expect("an event");
            assert_eq!(
                (&last["kind"], &last["state"]),
                (&Value::from("status-update"), &Value::from("completed")),
                "{sdk:?} {mode:?}: {v}"
            );
        }
        if mode.contains(&"--cancel") {
            // A finished task is not cancelable: 400 FAILED_PRECONDITION,
            // read back by the 1.0 SDK clients as their typed error; the 0.3
            // REST clients raise their generic one (WIRE.md §10.4).
            let name = v["cancel"].as_str().unwrap_or_default();
            if mode.contains(&"--legacy") {
                assert!(!name.is_empty(), "{sdk:?}: the cancel was refused: {v}");
            } else {
                assert!(name.ends_with("TaskNotCancelableError"), "{sdk:?}: {v}");
            }
        }
        if mode.contains(&"--list") {
            let listed = v["listed"].as_array().expect("listed");
            assert_eq!(listed.len(), 1, "{v}");
            assert_eq!(listed[0]["text"], text.as_str());
        }
    }
}

#[tokio::test]
async fn python_rest_clients_complete_tasks_against_serve() {
    rest_clients_complete_tasks(Sdk::Python).await;
}

#[tokio::test]
async fn js_rest_clients_complete_tasks_against_serve() {
    rest_clients_complete_tasks(Sdk::Js).await;
}

/// The four push-config routes, and delivery of a config set on the message.
async fn rest_push_configs(sdk: Sdk) {
    let (hook, hits) = Stub::webhook().await;
    let server = served(&["--bindings", "rest", "--allow-private-webhooks"]).await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    let webhook = format!("{}/hook", hook.url());
    let (code, v, stderr) = official_client(
        sdk,
        &card,
        "push me over REST",
        &["--rest", "--push", &webhook],
    )
    .await;
    assert_eq!(code, 0, "{sdk:?}: {v} {stderr}");
    assert_eq!(v["push"]["listed"], 2, "{v}");
    assert_eq!(v["push"]["afterDelete"], 1, "{v}");
    assert_eq!(v["push"]["got"], format!("{webhook}/2"), "{v}");
    let task = v["push"]["taskId"].as_str().expect("task id").to_string();
    let mut delivered = false;
    for _ in 0..200 {
        delivered = hits
            .lock()
            .expect("hits")
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains(&task));
        if delivered {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(delivered, "the webhook heard of task {task}");
}

#[tokio::test]
async fn python_rest_client_push_configs() {
    rest_push_configs(Sdk::Python).await;
}

#[tokio::test]
async fn js_rest_client_push_configs() {
    rest_push_configs(Sdk::Js).await;
}

async fn send(req: HttpRequest) -> (u16, Option<String>, Value) {
    let resp = NativeTransport::shared()
        .send(req)
        .await
        .expect("an answer");
    let ct = resp.header("Content-Type").map(str::to_string);
    let v = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    (resp.status, ct, v)
}

fn request(method: &str, url: String, body: &str) -> HttpRequest {
    HttpRequest {
        method: method.into(),
        url,
        headers: vec![("Content-Type".into(), "application/a2a+json".into())],
        body: body.as_bytes().to_vec(),
    }
}

#[tokio::test]
async fn the_1_0_1_error_statuses_on_the_wire() {
    let server = served(&[]).await;
    let base = format!("{}/rest", server.url);
    let reason = |v: &Value| {
        v["error"]["details"][0]["reason"]
            .as_str()
            .map(str::to_string)
    };

    let (status, ct, v) = send(request("GET", format!("{base}/tasks/nope"), "")).await;
    assert_eq!(
        (status, reason(&v).as_deref()),
        (404, Some("TASK_NOT_FOUND")),
        "{v}"
    );
    assert_eq!(ct.as_deref(), Some("application/a2a+json"));
    assert_eq!(v["error"]["status"], "NOT_FOUND");

    let body = r#"{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hi"}]}}"#;
    let (status, ct, v) = send(request("POST", format!("{base}/message:send"), body)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(ct.as_deref(), Some("application/a2a+json"));
    let id = v["task"]["id"].as_str().expect("id").to_string();
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED");

    // TaskNotCancelable: 400 since 1.0.1 (was 409).
    let (status, _, v) = send(request("POST", format!("{base}/tasks/{id}:cancel"), "")).await;
    assert_eq!(
        (status, reason(&v).as_deref()),
        (400, Some("TASK_NOT_CANCELABLE")),
        "{v}"
    );
    assert_eq!(v["error"]["status"], "FAILED_PRECONDITION");

    // Invalid params: 400 with the field named.
    let bad = r#"{"message":{"role":"ROLE_USER","parts":[{"text":"hi"}]}}"#;
    let (status, _, v) = send(request("POST", format!("{base}/message:send"), bad)).await;
    assert_eq!(
        (status, reason(&v).as_deref()),
        (400, Some("INVALID_PARAMS")),
        "{v}"
    );
    assert_eq!(
        v["error"]["details"][1]["fieldViolations"][0]["field"],
        "message.messageId"
    );

    // Not JSON.
    let (status, _, v) = send(request("POST", format!("{base}/message:send"), "{x")).await;
    assert_eq!(status, 400, "{v}");

    // Push notifications not offered; no extended card: 400 FAILED_PRECONDITION.
    let (status, _, v) = send(request(
        "GET",
        format!("{base}/tasks/{id}/pushNotificationConfigs"),
        "",
    ))
    .await;
    assert_eq!(
        (status, reason(&v).as_deref()),
        (400, Some("PUSH_NOTIFICATION_NOT_SUPPORTED")),
        "{v}"
    );
    let (status, _, v) = send(request("GET", format!("{base}/extendedAgentCard"), "")).await;
    assert_eq!(
        (status, reason(&v).as_deref()),
        (400, Some("UNSUPPORTED_OPERATION")),
        "{v}"
    );

    // A version the server lacks.
    let mut req = request("GET", format!("{base}/tasks/{id}"), "");
    req.headers.push(("A2A-Version".into(), "9.0".into()));
    let (status, _, v) = send(req).await;
    assert_eq!(
        (status, reason(&v).as_deref()),
        (400, Some("VERSION_NOT_SUPPORTED")),
        "{v}"
    );

    // A tenant's requests see only its own tasks; JSON-RPC still answers
    // application/json beside it.
    let (status, _, v) = send(request("GET", format!("{base}/acme/tasks/{id}"), "")).await;
    assert_eq!(status, 404, "{v}");
    let rpc = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"{id}"}}}}"#);
    let mut req = HttpRequest::post_json(format!("{}/", server.url), rpc.into_bytes());
    req.headers.push(("A2A-Version".into(), "1.0".into()));
    let (status, ct, v) = send(req).await;
    assert_eq!(
        (status, ct.as_deref()),
        (200, Some("application/json")),
        "{v}"
    );
    assert_eq!(v["result"]["id"], id.as_str());
}

async fn call(card: &str, tool: &str, task: &str, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["call", card, tool, task, "--no-cache", "--timeout", "30000"];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run_to_end(&toolnexus_bin(), &args).await;
    (
        code,
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    )
}

/// `toolnexus call` against an SDK server that offers only HTTP+JSON, in
/// 1.0 and (its card listing only the 0.3 interface) 0.3: a streamed task
/// completes, a failure is isError, a question is answered in the same
/// task, and a call that times out cancels its task.
async fn our_client_against_rest_only(sdk: Sdk, v03: bool) {
    our_client_against_rest_only_with(sdk, v03, true).await;
}

/// [`our_client_against_rest_only`]; `streaming: false` serves a card that
/// says so, and both SDK servers then refuse `message:stream` (400
/// UnsupportedOperation): every call is a plain (blocking) `message:send`.
async fn our_client_against_rest_only_with(sdk: Sdk, v03: bool, streaming: bool) {
    let mut flags = vec!["--rest-only"];
    if v03 {
        flags.extend(["--compat-03", "--card-03"]);
    }
    if !streaming {
        flags.push("--no-streaming");
    }
    let server = official_server_with(sdk, &flags).await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    let what = format!("{sdk:?} v03={v03} streaming={streaming}");

    let (code, r, stderr) = call(&card, "echo", "hello over REST", &[]).await;
    assert_eq!(code, 0, "{what}: {r} {stderr}");
    assert_eq!(r["output"], "echo: hello over REST", "{what}");
    assert_eq!(r["metadata"]["state"], "completed");
    if !streaming {
        assert_eq!(
            r["metadata"]["polls"], 0,
            "{what}: answered by the send: {r}"
        );
    }

    let (code, r, _) = call(&card, "fail", "fail on purpose", &[]).await;
    assert_eq!(
        (code, &r["isError"]),
        (2, &Value::Bool(true)),
        "{what}: {r}"
    );
    assert!(r["output"]
        .as_str()
        .is_some_and(|o| o.contains("deliberate failure")));

    let (code, asked, _) = call(&card, "echo", "ask me", &[]).await;
    assert_eq!(code, 2, "{what}: {asked}");
    assert_eq!(
        asked["metadata"]["state"], "input-required",
        "{what}: {asked}"
    );
    let task = asked["metadata"]["taskId"]
        .as_str()
        .expect("task id")
        .to_string();
    let ctx = asked["metadata"]["contextId"]
        .as_str()
        .expect("context")
        .to_string();
    let (code, r, stderr) = call(
        &card,
        "echo",
        "Paris",
        &["--task-id", &task, "--context-id", &ctx],
    )
    .await;
    assert_eq!(code, 0, "{what}: {r} {stderr}");
    assert_eq!(r["output"], "booked for Paris", "{what}");
    assert_eq!(r["metadata"]["taskId"], task.as_str(), "the same task");

    // A call that times out sends CancelTask: the task ends canceled.
    let mut args = vec![
        "call",
        &card,
        "echo",
        "slow down",
        "--no-cache",
        "--timeout",
        "1500",
    ];
    args.push("--events");
    let (code, stdout, _) = run_to_end(&toolnexus_bin(), &args).await;
    let r: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    assert_eq!(code, 2, "{what}: {r}");
    if !streaming {
        // A blocking send names no task until it answers: the timeout ends
        // the call, and there is no task id to cancel (as over JSON-RPC).
        assert_eq!(r["isError"], true, "{what}: {r}");
        assert!(r["metadata"]["taskId"].is_null(), "{what}: {r}");
        assert!(
            r["output"]
                .as_str()
                .is_some_and(|o| o.contains("timed out")),
            "{what}: {r}"
        );
        return;
    }
    let slow = r["metadata"]["taskId"]
        .as_str()
        .expect("task id")
        .to_string();
    if !v03 {
        // ListTasks (1.0 only) over REST shows it canceled.
        let mut canceled = false;
        for _ in 0..100 {
            let (_, out, _) = run_to_end(
                &toolnexus_bin(),
                &["tasks", &card, "--no-cache", "--status", "canceled"],
            )
            .await;
            let list: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
            canceled = list["tasks"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["id"] == slow.as_str()));
            if canceled {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(canceled, "{what}: task {slow} canceled");
    }
}

#[tokio::test]
async fn our_client_against_python_rest_only_1_0() {
    our_client_against_rest_only(Sdk::Python, false).await;
}

#[tokio::test]
async fn our_client_against_python_rest_only_0_3() {
    our_client_against_rest_only(Sdk::Python, true).await;
}

#[tokio::test]
async fn our_client_against_js_rest_only_1_0() {
    our_client_against_rest_only(Sdk::Js, false).await;
}

#[tokio::test]
async fn our_client_against_js_rest_only_0_3() {
    our_client_against_rest_only(Sdk::Js, true).await;
}

#[tokio::test]
async fn our_client_sends_blocking_over_rest_to_non_streaming_sdk_servers() {
    for sdk in [Sdk::Python, Sdk::Js] {
        for v03 in [false, true] {
            our_client_against_rest_only_with(sdk, v03, false).await;
        }
    }
}

/// `--binding rest` on a card that lists both: the call goes over HTTP+JSON
/// (a server offering both answers either way; the task is the same).
#[tokio::test]
async fn binding_rest_prefers_http_json_on_our_server() {
    let server = served(&[]).await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    let (code, r, stderr) = call(&card, "hello-world", "hi there", &["--binding", "rest"]).await;
    assert_eq!(code, 0, "{r} {stderr}");
    assert_eq!(r["output"], "hi there");
    let (code, out, stderr) = run_to_end(
        &toolnexus_bin(),
        &["tasks", &card, "--no-cache", "--binding", "rest"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        out.contains(r["metadata"]["taskId"].as_str().expect("id")),
        "{out}"
    );
}

/// A card with a tenant: every request of our client and of the SDK
/// clients carries it (a path segment), and another tenant sees nothing.
#[tokio::test]
async fn a_card_tenant_is_sent_with_every_request_and_tenants_stay_apart() {
    let server = served(&["--tenant", "acme"]).await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    let base = format!("{}/rest", server.url);
    let visible = |tenant: &'static str, id: String| {
        let base = base.clone();
        async move {
            let url = format!("{base}/{tenant}/tasks/{id}");
            send(request("GET", url, "")).await.0 == 200
        }
    };
    let (code, r, stderr) = call(&card, "hello-world", "for acme", &["--binding", "rest"]).await;
    assert_eq!(code, 0, "{r} {stderr}");
    let id = r["metadata"]["taskId"].as_str().expect("id").to_string();
    assert!(
        visible("acme", id.clone()).await,
        "made under the card's tenant"
    );
    assert!(
        !visible("globex", id.clone()).await,
        "another tenant sees nothing"
    );
    // ListTasks over REST carries it too.
    let (code, out, stderr) = run_to_end(
        &toolnexus_bin(),
        &["tasks", &card, "--no-cache", "--binding", "rest"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains(&id), "{out}");
    for sdk in [Sdk::Python, Sdk::Js] {
        let (code, v, stderr) =
            official_client(sdk, &card, "sdk for acme", &["--rest", "--list"]).await;
        assert_eq!(code, 0, "{sdk:?}: {v} {stderr}");
        let listed = v["listed"].as_array().expect("listed");
        let sdk_id = listed[0]["id"].as_str().expect("id").to_string();
        assert!(
            visible("acme", sdk_id.clone()).await,
            "{sdk:?} sent the tenant"
        );
        assert!(!visible("globex", sdk_id).await);
    }
}

/// `--rest-at-root`: HTTP+JSON at the card URL itself, beside JSON-RPC, and
/// listed there; an SDK REST client follows the card to it. Not with `--ui`.
#[tokio::test]
async fn rest_at_root_is_listed_and_served_beside_json_rpc() {
    let server = served(&["--rest-at-root"]).await;
    let card_url = format!("{}/.well-known/agent-card.json", server.url);
    let (status, _, card) = send(HttpRequest::get(card_url.clone())).await;
    assert_eq!(status, 200);
    let base = format!("{}/", server.url);
    let listed: Vec<&Value> = card["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter(|i| i["protocolBinding"] == "HTTP+JSON")
        .collect();
    assert!(
        !listed.is_empty() && listed.iter().all(|i| i["url"] == base.as_str()),
        "{card}"
    );
    for (sdk, mode) in [
        (Sdk::Python, &["--rest"][..]),
        (Sdk::Js, &["--rest", "--stream"][..]),
    ] {
        let (code, v, stderr) = official_client(sdk, &card_url, "at the root", mode).await;
        assert_eq!(code, 0, "{sdk:?}: {v} {stderr}");
        assert_eq!(v["text"], "at the root", "{sdk:?}: {v}");
    }
    let (status, _, v) = send(request(
        "POST",
        format!("{}/message:send", server.url),
        r#"{"message":{"role":"ROLE_USER","message_id":"m-root","parts":[{"text":"proto names"}]}}"#,
    ))
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    let ui = repo_root().join("www").display().to_string();
    let (code, _, stderr) = run_to_end(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--rest-at-root",
            "--ui",
            &ui,
        ],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--rest-at-root"), "{stderr}");
}
