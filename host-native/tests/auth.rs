//! Who calls, over real HTTP (issue 18): `toolnexus serve --config` with API
//! keys in its `a2a.auth` block; alice's task is bob's TaskNotFound on every
//! method, ListTasks counts only the caller's, and a file store keeps each
//! task's owner across a restart.

mod common;

use common::{start_listening, temp_dir, toolnexus_bin, Proc};
use serde_json::{json, Value};
use toolnexus_core::{HttpRequest, Transport};
use toolnexus_host_native::NativeTransport;

const ALICE: &str = "alice-key-5f1c2a9e";
const BOB: &str = "bob-key-07d3b86f";

async fn serve(config: &std::path::Path, store: &std::path::Path) -> Proc {
    let store = format!("file:{}", store.display());
    start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--config",
            config.to_str().expect("utf-8 path"),
            "--store",
            &store,
        ],
    )
    .await
}

/// A JSON-RPC call (1.0) with `key` in `X-API-Key` (none when `None`).
async fn call(
    url: &str,
    key: Option<&str>,
    method: &str,
    params: Value,
) -> toolnexus_core::HttpResponse {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes())
        .with_header("A2A-Version", "1.0");
    if let Some(key) = key {
        req = req.with_header("X-API-Key", key);
    }
    NativeTransport::shared().send(req).await.expect("answer")
}

async fn rpc(url: &str, key: &str, method: &str, params: Value) -> Value {
    let resp = call(url, Some(key), method, params).await;
    assert_eq!(resp.status, 200, "{method}: {}", resp.body_snippet(300));
    serde_json::from_slice(&resp.body).expect("JSON")
}

async fn send(url: &str, key: &str, text: &str) -> String {
    let v = rpc(
        url,
        key,
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": format!("m-{text}"), "parts": [{"text": text}]}}),
    )
    .await;
    v["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {v}"))
        .to_string()
}

#[tokio::test]
async fn alices_task_is_task_not_found_for_bob_over_http_and_after_a_restart() {
    let dir = temp_dir("auth");
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        json!({"a2a": {"name": "guarded", "auth": {"apiKeys": {"keys": {"alice": ALICE, "bob": BOB}}}}})
            .to_string(),
    )
    .expect("config");
    let store = dir.join("tasks");
    let server = serve(&config, &store).await;
    let url = server.url.trim_end_matches('/').to_string();

    // The public card is open and declares the scheme.
    let card = NativeTransport::shared()
        .send(HttpRequest::get(format!(
            "{url}/.well-known/agent-card.json"
        )))
        .await
        .expect("card");
    assert_eq!(card.status, 200);
    let card: Value = serde_json::from_slice(&card.body).expect("card JSON");
    assert_eq!(
        card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"],
        "X-API-Key"
    );

    // No key, a wrong key: 401 with the challenge.
    for key in [None, Some("guess")] {
        let resp = call(&url, key, "ListTasks", json!({})).await;
        assert_eq!(resp.status, 401);
        assert_eq!(
            resp.header("WWW-Authenticate"),
            Some(r#"ApiKey realm="a2a", in="header", name="X-API-Key""#)
        );
    }

    let alices = send(&url, ALICE, "alice's plan").await;
    send(&url, ALICE, "alice again").await;
    let bobs = send(&url, BOB, "bob's note").await;

    let isolated = |url: String| {
        let alices = alices.clone();
        async move {
            for (method, params) in [
                ("GetTask", json!({"id": alices})),
                ("CancelTask", json!({"id": alices})),
                ("SubscribeToTask", json!({"id": alices})),
                (
                    "GetTaskPushNotificationConfig",
                    json!({"taskId": alices, "id": "x"}),
                ),
                ("ListTaskPushNotificationConfigs", json!({"taskId": alices})),
                (
                    "CreateTaskPushNotificationConfig",
                    json!({"taskId": alices, "url": "https://hooks.example/x"}),
                ),
                (
                    "DeleteTaskPushNotificationConfig",
                    json!({"taskId": alices, "id": "x"}),
                ),
            ] {
                let v = rpc(&url, BOB, method, params).await;
                let code = v["error"]["code"].as_i64();
                // Push configs may be unsupported (-32003) when serve offers
                // none; never an answer about alice's task.
                assert!(
                    code == Some(-32001) || (method.contains("Push") && code == Some(-32003)),
                    "{method}: {v}"
                );
                assert!(v["result"].is_null(), "{method}: {v}");
            }
            let v = rpc(&url, BOB, "ListTasks", json!({})).await;
            assert_eq!(v["result"]["totalSize"], 1, "{v}");
            let v = rpc(&url, ALICE, "ListTasks", json!({})).await;
            assert_eq!(v["result"]["totalSize"], 2, "{v}");
            let v = rpc(&url, ALICE, "GetTask", json!({"id": alices})).await;
            assert_eq!(v["result"]["id"], alices.as_str(), "{v}");
            assert!(v["result"].get("owner").is_none(), "{v}");
        }
    };
    isolated(url.clone()).await;
    drop(server);

    // The file store kept each task's owner.
    let files: Vec<String> = std::fs::read_dir(&store)
        .expect("store")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .map(|e| std::fs::read_to_string(e.path()).expect("task file"))
        .collect();
    assert_eq!(files.len(), 3);
    assert!(files
        .iter()
        .any(|f| f.contains(&bobs) && f.contains("\"owner\":\"bob\"")));
    let server = serve(&config, &store).await;
    isolated(server.url.trim_end_matches('/').to_string()).await;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
