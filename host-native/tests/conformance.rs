//! A2A conformance of `toolnexus serve` over real HTTP (issue 9): required
//! fields, versions, error details, and the dialect of unversioned calls,
//! kept by the file store across a restart.

mod common;

use serde_json::{json, Value};
use std::sync::Arc;
use toolnexus_core::skills::SkillSet;
use toolnexus_core::{HttpRequest, Transport};
use toolnexus_host_native::{serve, Model, NativeTransport, ServeOptions};

fn options() -> ServeOptions {
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    tk.add_skills(SkillSet::new());
    ServeOptions::new(Arc::new(tk), Model::Echo)
}

async fn rpc(url: &str, version: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
    if let Some(v) = version {
        req = req.with_header("A2A-Version", v);
    }
    let resp = NativeTransport::shared()
        .send(req)
        .await
        .expect("an HTTP answer");
    assert_eq!(resp.status, 200);
    serde_json::from_slice(&resp.body).expect("a JSON-RPC body")
}

#[tokio::test]
async fn required_fields_versions_and_error_details_over_http() {
    let handle = serve("127.0.0.1:0", options()).await.expect("serve");
    let url = handle.url.clone();
    let no_id = json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}});
    let v = rpc(&url, Some("1.0"), "SendMessage", no_id.clone()).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(v["error"]["data"][0]["reason"], "INVALID_PARAMS");
    assert_eq!(
        v["error"]["data"][1]["fieldViolations"][0]["field"],
        "message.messageId"
    );
    let v = rpc(
        &url,
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m", "parts": []}}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"].get("data").is_none(),
        "0.3 errors stay plain: {v}"
    );
    let v = rpc(&url, Some("1.1"), "SendMessage", no_id).await;
    assert_eq!(v["error"]["code"], -32009, "{v}");
    handle.stop().await;
}

#[tokio::test]
async fn an_unversioned_10_client_reads_its_tasks_in_10_shapes_across_a_restart() {
    let dir = std::env::temp_dir().join(format!(
        "toolnexus-dialect-{}-{}",
        std::process::id(),
        common::free_port()
    ));
    let mut options = options();
    options.store = toolnexus_host_native::store::StoreConfig::File(dir.clone());
    let handle = serve("127.0.0.1:0", options.clone()).await.expect("serve");
    // What the official 1.0 clients send when they omit the header.
    let v = rpc(
        &handle.url,
        None,
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}}),
    )
    .await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    let id = task["id"].as_str().expect("id").to_string();
    let old = rpc(
        &handle.url,
        None,
        "SendMessage",
        json!({"message": {"role": "user", "messageId": "m2", "parts": [{"kind": "text", "text": "hi"}]}}),
    )
    .await;
    let old_id = old["result"]["id"]
        .as_str()
        .expect("a bare 0.3 task")
        .to_string();
    handle.stop().await;

    let handle = serve("127.0.0.1:0", options).await.expect("serve again");
    let got = rpc(&handle.url, None, "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    assert_eq!(got["result"]["history"][0]["role"], "ROLE_USER");
    let got = rpc(&handle.url, None, "GetTask", json!({"id": old_id})).await;
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    assert_eq!(got["result"]["kind"], "task");
    handle.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn file_and_data_parts_survive_serve_and_reach_the_cli_result() {
    // The server keeps a message's file and data parts, over HTTP.
    let handle = serve("127.0.0.1:0", options()).await.expect("serve");
    let parts = json!([{"text": "look"},
        {"url": "https://files.example/r.pdf", "mediaType": "application/pdf", "filename": "r.pdf"},
        {"data": {"k": [1, 2]}}]);
    let v = rpc(
        &handle.url,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": parts}}),
    )
    .await;
    let id = v["result"]["task"]["id"].as_str().expect("id").to_string();
    let got = rpc(&handle.url, Some("1.0"), "GetTask", json!({"id": id})).await;
    assert_eq!(got["result"]["history"][0]["parts"], parts, "{got}");
    handle.stop().await;

    // `toolnexus call` prints an answer's non-text parts in metadata.parts.
    let peer = common::Stub::a2a(
        json!({"name": "drawer", "skills": [{"id": "draw", "description": "Draws"}]}),
        |_, _| {
            json!({"id": "t1", "status": {"state": "completed"}, "artifacts": [{"parts": [
                {"kind": "text", "text": "a chart"},
                {"kind": "file", "file": {"bytes": "iVBORw0KGgo=", "mimeType": "image/png", "name": "c.png"}}]}]})
        },
    )
    .await;
    let card = peer.card_url();
    let (code, stdout, stderr) = common::run_to_end(
        &common::toolnexus_bin(),
        &["call", &card, "draw", "a chart please", "--no-cache"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let result: Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(result["output"], "a chart");
    assert_eq!(
        result["metadata"]["parts"],
        json!([{"raw": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "c.png"}])
    );
}

#[tokio::test]
async fn toolnexus_tasks_lists_a_served_agents_tasks_with_filters() {
    let handle = serve("127.0.0.1:0", options()).await.expect("serve");
    for (ctx, text) in [("ctx-a", "first"), ("ctx-b", "second"), ("ctx-a", "third")] {
        let v = rpc(
            &handle.url,
            Some("1.0"),
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "messageId": text, "contextId": ctx,
                "parts": [{"text": text}]}}),
        )
        .await;
        assert_eq!(
            v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{v}"
        );
    }
    let card = format!("{}/.well-known/agent-card.json", handle.url);
    let run = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::run_to_end(&common::toolnexus_bin(), &args).await
    };
    let (code, stdout, stderr) = run(vec![
        "tasks".into(),
        card.clone(),
        "--context".into(),
        "ctx-a".into(),
        "--no-cache".into(),
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("one JSON object");
    let outputs: Vec<&str> = v["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["output"].as_str())
        .collect();
    assert_eq!(outputs, ["third", "first"], "newest first: {v}");
    assert_eq!(v["totalSize"], 2);
    assert_eq!(v["tasks"][0]["state"], "completed");
    assert_eq!(v["tasks"][0]["contextId"], "ctx-a");
    assert!(v["tasks"][0]["timestamp"].is_string());
    let (code, stdout, _) = run(vec![
        "tasks".into(),
        card.clone(),
        "--status".into(),
        "working".into(),
        "--no-cache".into(),
    ])
    .await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["totalSize"], 0, "{v}");
    let (code, _, stderr) = run(vec![
        "tasks".into(),
        card,
        "--status".into(),
        "bogus".into(),
    ])
    .await;
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown --status"), "{stderr}");
    handle.stop().await;
}

#[tokio::test]
async fn push_is_advertised_only_when_enabled_and_private_webhooks_are_refused() {
    let card_of = |url: String| async move {
        let resp = NativeTransport::shared()
            .send(HttpRequest::get(format!(
                "{url}/.well-known/agent-card.json"
            )))
            .await
            .expect("card");
        serde_json::from_slice::<Value>(&resp.body).expect("card json")
    };
    let plain = serve("127.0.0.1:0", options()).await.expect("serve");
    assert_eq!(
        card_of(plain.url.clone()).await["capabilities"]["pushNotifications"],
        false
    );
    let v = rpc(
        &plain.url,
        Some("1.0"),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": "t"}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32003, "{v}");
    plain.stop().await;

    let mut opts = options();
    opts.push = Some(toolnexus_host_native::PushOptions::default());
    let handle = serve("127.0.0.1:0", opts).await.expect("serve");
    assert_eq!(
        card_of(handle.url.clone()).await["capabilities"]["pushNotifications"],
        true
    );
    let v = rpc(
        &handle.url,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]},
               "configuration": {"taskPushNotificationConfig": {"url": format!("{}/hook", handle.url)}}}),
    )
    .await;
    assert_eq!(
        v["error"]["code"], -32602,
        "a loopback webhook is refused: {v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("private"),
        "{v}"
    );
    handle.stop().await;
}

#[tokio::test]
async fn the_version_query_the_extended_card_and_card_revalidation_over_http() {
    let handle = serve("127.0.0.1:0", options()).await.expect("serve");
    let url = handle.url.clone();
    // A2A 1.0 §3.6.1: the version may come as a request parameter.
    let post = |query: &'static str, method: &'static str, params: Value| {
        let url = url.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            let req =
                HttpRequest::post_json(format!("{url}/{query}"), body.to_string().into_bytes());
            let resp = NativeTransport::shared()
                .send(req)
                .await
                .expect("an HTTP answer");
            serde_json::from_slice::<Value>(&resp.body).expect("a JSON-RPC body")
        }
    };
    let hello = json!({"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hi"}]}});
    let v = post("?A2A-Version=1.0", "SendMessage", hello.clone()).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "the query names 1.0 for a 0.3-shaped message: {v}"
    );
    let v = post("?A2A-Version=2.0", "SendMessage", hello).await;
    assert_eq!(v["error"]["code"], -32009, "{v}");
    // §3.3.4: the card does not declare extendedAgentCard ⇒ -32004.
    for method in ["GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"] {
        let v = post("", method, json!({})).await;
        assert_eq!(v["error"]["code"], -32004, "{method}: {v}");
    }
    // §8.6.1: the card's ETag, and a 304 for a matching If-None-Match.
    let card_url = format!("{url}/.well-known/agent-card.json");
    let first = NativeTransport::shared()
        .send(HttpRequest::get(card_url.clone()))
        .await
        .expect("card");
    assert_eq!(first.status, 200);
    let etag = first.header("etag").expect("an ETag").to_string();
    assert!(first.header("cache-control").is_some());
    let again = NativeTransport::shared()
        .send(HttpRequest::get(card_url).with_header("If-None-Match", &etag))
        .await
        .expect("card again");
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    handle.stop().await;
}

#[tokio::test]
async fn a_message_naming_a_task_is_checked_against_it_over_http() {
    // A2A 1.0 §3.4.2 and §3.4.3, and the terminal-task error of §3.1.1, in
    // both dialects: never a new task made instead.
    let handle = serve("127.0.0.1:0", options()).await.expect("serve");
    let url = handle.url.clone();
    let v = rpc(
        &url,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}}),
    )
    .await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    let (id, ctx) = (task["id"].clone(), task["contextId"].clone());
    let v10 = |task_id: &Value, context: Option<&Value>| {
        let mut m = json!({"role": "ROLE_USER", "messageId": "m2", "taskId": task_id,
            "parts": [{"text": "more"}]});
        if let Some(c) = context {
            m["contextId"] = c.clone();
        }
        json!({"message": m})
    };
    let v03 = |task_id: &Value, context: Option<&Value>| {
        let mut m = json!({"role": "user", "messageId": "m3", "taskId": task_id,
            "parts": [{"kind": "text", "text": "more"}]});
        if let Some(c) = context {
            m["contextId"] = c.clone();
        }
        json!({"message": m})
    };
    let nope = json!("nope");
    let other = json!("other");
    for (version, method, params, code) in [
        (Some("1.0"), "SendMessage", v10(&nope, None), -32001),
        (None, "message/send", v03(&nope, None), -32001),
        (Some("1.0"), "SendMessage", v10(&id, Some(&other)), -32602),
        (None, "message/send", v03(&id, Some(&other)), -32602),
        (Some("1.0"), "SendMessage", v10(&id, Some(&ctx)), -32004),
        (None, "message/send", v03(&id, None), -32004),
    ] {
        let v = rpc(&url, version, method, params).await;
        assert_eq!(v["error"]["code"], code, "{method}: {v}");
    }
    let listed = rpc(&url, Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(
        listed["result"]["totalSize"], 1,
        "no task was made: {listed}"
    );
    handle.stop().await;
}

/// Asks to sign in (auth-required) unless the message answers that request.
struct SignInFirst;

const SIGN_IN: &str = "Sign in at https://auth.example/login, then say done";

impl toolnexus_core::server::Fulfiller for SignInFirst {
    fn fulfil(
        &self,
        request: toolnexus_core::server::FulfilRequest,
        progress: toolnexus_core::server::Progress,
    ) -> toolnexus_core::BoxFuture<'static, Result<String, String>> {
        let answering = request
            .history
            .last()
            .is_some_and(|m| m.role == toolnexus_core::Role::Agent && m.text() == SIGN_IN);
        Box::pin(async move {
            if answering {
                Ok(format!("signed in: {}", request.text))
            } else {
                progress.auth_required(SIGN_IN);
                Ok(String::new())
            }
        })
    }
}

#[tokio::test]
async fn auth_required_and_list_pages_over_http() {
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    tk.add_skills(SkillSet::new());
    let options = ServeOptions::new(
        Arc::new(tk),
        toolnexus_host_native::Model::Custom(Arc::new(SignInFirst)),
    );
    let handle = serve("127.0.0.1:0", options).await.expect("serve");
    let url = handle.url.clone();
    // A2A 1.0 §7.6.1: a Task, in TASK_STATE_AUTH_REQUIRED, with a status
    // message saying why; a blocking send ends there (§3.2.2).
    let asked = rpc(
        &url,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "my calendar"}]}}),
    )
    .await;
    let task = asked["result"]["task"].clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{asked}"
    );
    assert_eq!(task["status"]["message"]["parts"][0]["text"], SIGN_IN);
    // The answer names the task only: §3.4.3, the context is inferred.
    let done = rpc(
        &url,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": task["id"],
            "parts": [{"text": "done"}]}}),
    )
    .await;
    let finished = &done["result"]["task"];
    assert_eq!(finished["id"], task["id"], "{done}");
    assert_eq!(finished["contextId"], task["contextId"]);
    assert_eq!(finished["status"]["state"], "TASK_STATE_COMPLETED");
    // 0.3 names and shapes too.
    let v = rpc(
        &url,
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m3", "parts": [{"kind": "text", "text": "mail"}]}}),
    )
    .await;
    assert_eq!(v["result"]["status"]["state"], "auth-required", "{v}");
    assert_eq!(
        v["result"]["status"]["message"]["parts"][0]["text"],
        SIGN_IN
    );

    // ListTasks in pages of one, following the opaque tokens (§3.1.4): every
    // task once, artifacts omitted unless asked for.
    let mut seen = Vec::new();
    let mut token = String::new();
    for _ in 0..4 {
        let page = rpc(
            &url,
            Some("1.0"),
            "ListTasks",
            json!({"pageSize": 1, "pageToken": token}),
        )
        .await;
        let page = &page["result"];
        assert_eq!(page["totalSize"], 2, "{page}");
        assert_eq!(page["pageSize"], 1);
        assert!(page["tasks"][0].get("artifacts").is_none(), "{page}");
        seen.push(page["tasks"][0]["id"].clone());
        token = page["nextPageToken"]
            .as_str()
            .expect("nextPageToken is always there")
            .to_string();
        if token.is_empty() {
            break;
        }
    }
    // (Both may carry the same millisecond, so their order is not asserted here.)
    let mut want = vec![v["result"]["id"].to_string(), task["id"].to_string()];
    let mut seen: Vec<String> = seen.iter().map(Value::to_string).collect();
    want.sort();
    seen.sort();
    assert_eq!(seen, want, "every task once");
    let with = rpc(
        &url,
        Some("1.0"),
        "ListTasks",
        json!({"includeArtifacts": true, "status": "TASK_STATE_COMPLETED"}),
    )
    .await;
    assert_eq!(
        with["result"]["tasks"][0]["artifacts"][0]["parts"][0]["text"], "signed in: done",
        "{with}"
    );
    handle.stop().await;
}
