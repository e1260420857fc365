//! `toolnexus serve`, `card` and `demo` as a user runs them.

mod common;

use common::{repo_root, run_to_end, start_listening, toolnexus_bin};
use serde_json::{json, Value};
use std::time::Duration;
use toolnexus_core::{HttpRequest, Transport};
use toolnexus_host_native::NativeTransport;

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let resp = NativeTransport::shared()
        .send(HttpRequest::post_json(format!("{url}/"), body.into_bytes()))
        .await
        .expect("answer");
    serde_json::from_slice(&resp.body).expect("json")
}

#[tokio::test]
async fn serve_prints_its_real_address_first_and_stops_cleanly_on_sigterm() {
    let mut proc = start_listening(
        &toolnexus_bin(),
        &["serve", "--addr", "127.0.0.1:0", "--llm", "echo"],
    )
    .await;
    assert!(
        proc.url.starts_with("http://127.0.0.1:") && !proc.url.ends_with(":0"),
        "{}",
        proc.url
    );
    let v = rpc(
        &proc.url,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "hi"}]}}),
    )
    .await;
    assert_eq!(v["result"]["status"]["state"], "completed");
    let pid = proc.child.id().expect("pid").to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let status = tokio::time::timeout(Duration::from_secs(20), proc.child.wait())
        .await
        .expect("stopped")
        .expect("status");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn card_prints_what_serve_would_serve() {
    let skills = repo_root().join("examples/skills").display().to_string();
    let (code, stdout, stderr) = run_to_end(
        &toolnexus_bin(),
        &[
            "card",
            "--skills",
            &skills,
            "--name",
            "desk",
            "--agent-version",
            "2.0.0",
            "--provider-org",
            "Acme",
            "--provider-url",
            "https://acme.example",
            "--expose",
            "summarize",
            "--expose",
            "nope",
            "--url",
            "http://127.0.0.1:9/",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let card: Value = serde_json::from_str(&stdout).expect("card JSON");
    assert_eq!(card["name"], "desk");
    assert_eq!(card["version"], "2.0.0");
    assert_eq!(card["url"], "http://127.0.0.1:9/");
    assert_eq!(
        card["provider"],
        json!({"organization": "Acme", "url": "https://acme.example"})
    );
    assert_eq!(card["skills"].as_array().map(Vec::len), Some(1));
    assert_eq!(card["skills"][0]["id"], "summarize");
}

#[tokio::test]
async fn the_config_file_sets_the_identity_and_flags_override_it() {
    let dir = std::env::temp_dir().join(format!("toolnexus-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("config.json");
    std::fs::write(
        &path,
        json!({"a2a": {"name": "from-config", "description": "configured",
        "provider": {"organization": "Cfg Org", "url": "https://cfg.example"}}})
        .to_string(),
    )
    .expect("write");
    let path = path.display().to_string();
    let (code, stdout, _) = run_to_end(
        &toolnexus_bin(),
        &["card", "--config", &path, "--url", "http://h/"],
    )
    .await;
    assert_eq!(code, 0);
    let card: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(
        (card["name"].as_str(), card["description"].as_str()),
        (Some("from-config"), Some("configured"))
    );
    assert_eq!(card["provider"]["organization"], "Cfg Org");
    let (_, stdout, _) = run_to_end(
        &toolnexus_bin(),
        &[
            "card",
            "--config",
            &path,
            "--name",
            "flag",
            "--url",
            "http://h/",
        ],
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).expect("json")["name"],
        "flag"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn bad_flags_and_config_are_one_line_and_exit_1() {
    let dir = std::env::temp_dir().join(format!("toolnexus-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{ not json").expect("write");
    let bad = bad.display().to_string();
    for args in [
        vec![
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            "redis://x",
            "--llm",
            "echo",
        ],
        vec!["serve", "--addr", "127.0.0.1:0", "--llm", "gpt"],
        vec!["serve", "--addr", "127.0.0.1:0", "--llm", "openai"],
        vec![
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "openai",
            "--model",
            "m",
            "--api-key-env",
            "TN_SURELY_UNSET_VAR",
        ],
        vec!["serve", "--addr", "not-an-address", "--llm", "echo"],
        vec!["serve", "--config", &bad],
        vec!["serve", "--config", "/no/such/file.json"],
        vec!["serve", "--skills", "/no/such/folder", "--llm", "echo"],
        vec!["serve", "--provider-org", "Acme"],
        vec!["card"],
    ] {
        let (code, stdout, stderr) = run_to_end(&toolnexus_bin(), &args).await;
        assert_eq!(code, 1, "{args:?}: {stdout} {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stdout.contains("listening"), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kill -9 the server while a task is running; after a restart on the same
/// file store the task is there, and terminal, with a clear message.
#[tokio::test]
async fn a_task_interrupted_by_a_crash_is_failed_not_lost() {
    // A model that never answers (a listener that never accepts) keeps the task `working`.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hang_url = format!("http://{}", hang.local_addr().expect("addr"));
    let dir = std::env::temp_dir().join(format!("toolnexus-crash-{}", std::process::id()));
    let store = format!("file:{}", dir.display());
    let args = [
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        &store,
        "--llm",
        "openai",
        "--model",
        "m",
        "--llm-base-url",
        &hang_url,
        // The dead process's lease runs out a second after its last renewal.
        "--task-lease-seconds",
        "1",
    ];
    let mut first = start_listening(&toolnexus_bin(), &args).await;
    let v = rpc(
        &first.url,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "long job"}]}, "configuration": {"blocking": false}}),
    )
    .await;
    let id = v["result"]["id"]
        .as_str()
        .expect("acknowledged task")
        .to_string();
    let mut state = String::new();
    for _ in 0..200 {
        state = rpc(&first.url, "tasks/get", json!({"id": id})).await["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .into();
        if state == "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(state, "working");
    first.child.start_kill().expect("kill -9");
    let _ = first.child.wait().await;

    let second = start_listening(&toolnexus_bin(), &args).await;
    // Failed once its lease has run out (never while another process may
    // still hold it), by the process that reads it then.
    let mut got = Value::Null;
    for _ in 0..100 {
        got = rpc(&second.url, "tasks/get", json!({"id": id})).await;
        if got["result"]["status"]["state"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got["result"]["status"]["state"], "failed", "{got}");
    let text = got["result"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("stopped before this task finished"), "{text}");
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn demo_runs_a_task_end_to_end_offline() {
    let (code, stdout, stderr) = run_to_end(&toolnexus_bin(), &["demo"]).await;
    assert_eq!(code, 0, "{stderr}");
    for needle in [
        "\"name\": \"toolnexus-demo\"",
        "toolnexus-demo_hello-world",
        "submitted",
        "working",
        "completed",
        "\"isError\": false",
        "\"output\": \"Hello! I am trying the toolnexus demo.\"",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    let order = ["as submitted", "as working", "as completed"].map(|s| stdout.find(s).expect(s));
    assert!(
        order[0] < order[1] && order[1] < order[2],
        "state changes in order"
    );
}

#[tokio::test]
async fn public_url_is_what_the_card_advertises() {
    let proc = start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--public-url",
            "https://agents.example/desk",
        ],
    )
    .await;
    let port = proc.url.rsplit(':').next().expect("port");
    let card = NativeTransport::shared()
        .send(HttpRequest::get(format!(
            "http://127.0.0.1:{port}/.well-known/agent-card.json"
        )))
        .await
        .expect("card");
    let card: Value = serde_json::from_slice(&card.body).expect("json");
    assert_eq!(card["url"], "https://agents.example/desk/");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://agents.example/desk/"
    );
}

/// §9: a config agent whose card never answers does not keep `serve` from
/// listening (its card gets a short startup deadline), and the wait is
/// said on stderr.
#[tokio::test]
async fn serve_listens_even_when_a_config_agents_card_never_answers() {
    // Accepts connections (the backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let card = format!(
        "http://{}/.well-known/agent-card.json",
        silent.local_addr().expect("addr")
    );
    let dir = std::env::temp_dir().join(format!("toolnexus-silent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        json!({"agents": {"silent": {"card": card}}}).to_string(),
    )
    .expect("config");
    let mut child = tokio::process::Command::new(toolnexus_bin())
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--config",
        ])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    use tokio::io::AsyncBufReadExt;
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    // Bounded well under the agent's own 300 s timeout.
    let first = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
        .await
        .expect("serve listened without waiting out the card")
        .expect("read")
        .expect("a line");
    assert!(
        first.starts_with("listening on http://127.0.0.1:"),
        "{first}"
    );
    let _ = child.start_kill();
    let out = child.wait_with_output().await.expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("resolving 1 agent card(s)"), "{stderr}");
    assert!(stderr.contains("skipped"), "{stderr}");
    drop(silent);
    let _ = std::fs::remove_dir_all(&dir);
}

/// §9: a CORS origin with CR/LF is refused at startup with a clear error
/// (it used to be taken, and then every response was a 500).
#[tokio::test]
async fn a_cors_origin_with_a_line_break_is_refused_at_startup() {
    let (code, _stdout, stderr) = run_to_end(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--cors-origin",
            "http://a.example\r\nX-Evil: 1",
        ],
    )
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--cors-origin: invalid CORS origin"),
        "{stderr}"
    );
}
