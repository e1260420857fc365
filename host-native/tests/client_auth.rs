//! Our client against protected agents, over real HTTP on 127.0.0.1: the
//! official Python SDK server behind bearer middleware and behind OAuth2
//! client credentials (its token endpoint counts token requests and issues
//! short-lived tokens), through `toolnexus call` / `tasks` and the Rust
//! library; and where credentials may go (a card on one origin naming an
//! endpoint on another), over http and https with a test CA.

mod common;

use common::sdk::py_server_with;
use common::{test_cache_dir, toolnexus_bin, Proc};
use serde_json::{json, Value};
use std::sync::Arc;
use toolnexus_core::{Auth, HttpRequest, OAuth2Client, Transport};
use toolnexus_host_native::{agent_tools_with, Agent, NativeTransport};

const CARD_PATH: &str = "/.well-known/agent-card.json";

/// `toolnexus ARGS…` with these environment variables, to the end (bounded).
async fn toolnexus(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new(toolnexus_bin());
    cmd.args(args)
        .env("TOOLNEXUS_CACHE_DIR", test_cache_dir())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(90), cmd.output())
        .await
        .expect("toolnexus finished within 90 s")
        .expect("run toolnexus");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn card_url(p: &Proc) -> String {
    format!("{}{CARD_PATH}", p.url)
}

/// The OAuth2 peer's counters (`/oauth/stats`).
async fn stats(p: &Proc) -> Value {
    let resp = NativeTransport::new()
        .send(HttpRequest::get(format!("{}/oauth/stats", p.url)))
        .await
        .expect("stats");
    serde_json::from_slice(&resp.body).expect("stats JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toolnexus_call_and_the_library_call_a_bearer_protected_python_sdk_server() {
    let peer = py_server_with(&["--auth-bearer", "s3cret-token"]).await;
    let card = card_url(&peer);

    // No credential: the agent's 401 is a clear error.
    let (code, out, err) = toolnexus(&["call", &card, "echo", "hello"], &[]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("wants credentials (HTTP 401)"), "{out}");

    // The right one, from the environment.
    let env = [("PEER_TOKEN", "s3cret-token")];
    let (code, out, err) = toolnexus(
        &["call", "--bearer-env", "PEER_TOKEN", &card, "echo", "hello"],
        &env,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let result: Value = serde_json::from_str(out.trim()).expect("JSON");
    assert_eq!(result["output"], "echo: hello");
    let (code, out, err) = toolnexus(&["tasks", "--bearer-env", "PEER_TOKEN", &card], &env).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("echo: hello"), "{out}");

    // A wrong one: the error names the scheme, never the token.
    let wrong = [("PEER_TOKEN", "wrong-token")];
    let (code, out, err) = toolnexus(
        &["call", "--bearer-env", "PEER_TOKEN", &card, "echo", "x"],
        &wrong,
    )
    .await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("refused the credential for its scheme \\\"bearer\\\" (HTTP 401)"),
        "{out}"
    );
    assert!(!out.contains("wrong-token") && !err.contains("wrong-token"));

    // An unset variable is refused before anything is sent.
    let (code, _, err) = toolnexus(
        &["call", "--bearer-env", "NO_SUCH_VAR_X", &card, "echo", "x"],
        &[],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("NO_SUCH_VAR_X is not set"), "{err}");

    // The Rust library.
    let agent = Agent::new(card).with_auth(Auth::Bearer("s3cret-token".into()));
    let transport = Arc::new(NativeTransport::new());
    let tools = agent_tools_with(&transport, &agent).await.expect("tools");
    let echo = tools.iter().find(|t| t.skill() == "echo").expect("echo");
    let r = echo.execute(&json!({"task": "library"})).await;
    assert_eq!((r.output.as_str(), r.is_error), ("echo: library", false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth2_tokens_are_shared_refreshed_and_refetched_once_on_401() {
    const TTL_S: u64 = 3;
    let peer = py_server_with(&["--auth-oauth", "app one:s3cret&", "--oauth-ttl", "3"]).await;
    let card = card_url(&peer);
    let agent = Agent::new(card.clone()).with_auth(Auth::OAuth2(OAuth2Client {
        client_id: "app one".into(),
        client_secret: "s3cret&".into(),
        ..Default::default()
    }));
    let transport = Arc::new(NativeTransport::new());
    let tools = agent_tools_with(&transport, &agent).await.expect("tools");
    let echo = tools
        .iter()
        .find(|t| t.skill() == "echo")
        .expect("echo")
        .clone();

    // N concurrent calls: one token fetch.
    let calls = (0..8).map(|i| {
        let echo = echo.clone();
        tokio::spawn(async move { echo.execute(&json!({"task": format!("n{i}")})).await })
    });
    for (i, call) in futures_util::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        let r = call.expect("joined");
        assert_eq!(r.output, format!("echo: n{i}"), "{r:?}");
    }
    let s = stats(&peer).await;
    assert_eq!(s["tokenRequests"], 1, "{s}");
    assert_eq!(s["scopes"], json!(["a2a.call"]), "the card's requirement");
    assert_eq!(s["unauthorized"], 0, "{s}");

    // Past its lifetime (less the leeway), a new token before the call.
    tokio::time::sleep(std::time::Duration::from_millis(TTL_S * 1000 + 100)).await;
    let r = echo.execute(&json!({"task": "later"})).await;
    assert_eq!(r.output, "echo: later");
    let s = stats(&peer).await;
    assert_eq!(
        (s["tokenRequests"].as_u64(), s["unauthorized"].as_u64()),
        (Some(2), Some(0)),
        "{s}"
    );

    // Revoked: one 401, one re-fetch, one retry.
    NativeTransport::new()
        .send(HttpRequest::post_json(
            format!("{}/oauth/revoke", peer.url),
            b"{}".to_vec(),
        ))
        .await
        .expect("revoke");
    let r = echo.execute(&json!({"task": "revoked"})).await;
    assert_eq!(r.output, "echo: revoked", "{r:?}");
    let s = stats(&peer).await;
    assert_eq!(
        (s["tokenRequests"].as_u64(), s["unauthorized"].as_u64()),
        (Some(3), Some(1)),
        "{s}"
    );

    // The CLI: the secret from the environment; a wrong one is a clear error.
    let args = [
        "call",
        "--oauth-client-id",
        "app one",
        "--oauth-client-secret-env",
        "APP_SECRET",
        &card,
        "echo",
        "from the CLI",
    ];
    let (code, out, err) = toolnexus(&args, &[("APP_SECRET", "s3cret&")]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("echo: from the CLI"), "{out}");
    let (code, out, err) = toolnexus(&args, &[("APP_SECRET", "not-it")]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("getting a token for the scheme \\\"oauth\\\" failed"),
        "{out}"
    );
    assert!(out.contains("invalid_client"), "{out}");
    assert!(!out.contains("not-it") && !err.contains("not-it"));
    // An explicit token URL wins over the card's (here: a refused one).
    let mut explicit = args.to_vec();
    explicit.splice(1..1, ["--oauth-token-url", "http://example.com/token"]);
    let (code, out, _) = toolnexus(&explicit, &[("APP_SECRET", "s3cret&")]).await;
    assert_eq!(code, 2);
    assert!(
        out.contains("refusing the token URL http://example.com/token"),
        "{out}"
    );
}

/// A stub on 127.0.0.1 that answers every JSON-RPC call with a completed
/// task saying which credentials it saw, and records the requests.
async fn endpoint_stub() -> (common::Stub, Arc<std::sync::Mutex<Vec<HttpRequest>>>) {
    let seen: Arc<std::sync::Mutex<Vec<HttpRequest>>> = Arc::default();
    let log = seen.clone();
    let stub = common::Stub::start(move |req| {
        log.lock().expect("log").push(req.clone());
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let task = json!({"id": "t1", "contextId": "c", "status": {"state": "completed"},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": "done"}]}]});
        common::json_response(
            200,
            &json!({"jsonrpc": "2.0", "id": body["id"], "result": task}),
        )
    })
    .await;
    (stub, seen)
}

/// A card stub on its own origin naming `endpoint`.
async fn card_stub(endpoint: &str, required: bool) -> common::Stub {
    let mut card = json!({"name": "far", "url": endpoint, "skills": [{"id": "s"}]});
    if required {
        card["security"] = json!([{"bearer": []}]);
        card["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer"}});
    }
    common::Stub::start(move |_| common::json_response(200, &card)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_reach_an_endpoint_on_another_origin_over_http() {
    let (endpoint, seen) = endpoint_stub().await;
    let cards = card_stub(endpoint.url(), false).await;
    let env = [("PEER_TOKEN", "s3cret-token")];
    let base = [
        "call",
        "--no-cache",
        "--bearer-env",
        "PEER_TOKEN",
        "-H",
        "X-Secret: ${PEER_TOKEN}",
    ];
    let card = cards.card_url();
    let mut args = base.to_vec();
    args.extend([card.as_str(), "s", "hi"]);
    let (code, out, err) = toolnexus(&args, &env).await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(err.matches("without credentials").count(), 1, "{err}");
    assert!(err.contains("--allow-credentials-to"), "{err}");
    {
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.len(), 1);
        assert!(seen[0].header("Authorization").is_none() && seen[0].header("X-Secret").is_none());
    }

    // Allowed by the user: sent.
    let origin = endpoint.url().trim_end_matches('/').to_string();
    let mut allowed = base.to_vec();
    allowed.extend(["--allow-credentials-to", &origin, card.as_str(), "s", "hi"]);
    let (code, out, err) = toolnexus(&allowed, &env).await;
    assert_eq!(code, 0, "{out}{err}");
    {
        let seen = seen.lock().expect("seen");
        assert_eq!(seen[1].header("Authorization"), Some("Bearer s3cret-token"));
        assert_eq!(seen[1].header("X-Secret"), Some("s3cret-token"));
    }

    // A card that requires credentials elsewhere: refused, nothing sent.
    let strict = card_stub(endpoint.url(), true).await;
    let strict_card = strict.card_url();
    let mut args = base.to_vec();
    args.extend([strict_card.as_str(), "s", "hi"]);
    let (code, _, err) = toolnexus(&args, &env).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("refusing to call far_s"), "{err}");
    assert_eq!(seen.lock().expect("seen").len(), 2, "nothing more sent");
    assert!(!err.contains("s3cret-token"));
}

/// `tls_server.py` on a free port with the test certificate, its card naming
/// `endpoint` (default: itself).
async fn tls_server(certs: &std::path::Path, endpoint: Option<&str>) -> Proc {
    let python = common::sdk::peers().join(".venv/bin/python");
    let script = common::sdk::peers().join("tls_server.py");
    let port = common::free_port().to_string();
    let cert = certs.join("cert.pem").display().to_string();
    let key = certs.join("key.pem").display().to_string();
    let script = script.display().to_string();
    let mut args = vec![
        script.as_str(),
        "--port",
        &port,
        "--cert",
        &cert,
        "--key",
        &key,
    ];
    if let Some(e) = endpoint {
        args.extend(["--card-endpoint", e]);
    }
    common::start_listening(&python, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_reach_an_endpoint_on_another_origin_over_https() {
    let certs = common::temp_dir("client-auth-tls");
    std::fs::create_dir_all(&certs).expect("cert dir");
    let python = common::sdk::peers().join(".venv/bin/python");
    let script = common::sdk::peers().join("tls_server.py");
    let dir = certs.display().to_string();
    let (code, _, err) = common::run_to_end(
        &python,
        &[&script.display().to_string(), "--make-certs", &dir],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let ca = certs.join("ca.pem").display().to_string();

    let endpoint = tls_server(&certs, None).await;
    let other = format!("{}/", endpoint.url);
    let cards = tls_server(&certs, Some(&other)).await;
    let card = format!("{}{CARD_PATH}", cards.url);
    let env = [
        ("PEER_TOKEN", "s3cret-token"),
        ("SSL_CERT_FILE", ca.as_str()),
    ];
    let call = |extra: Vec<String>| {
        let mut args: Vec<String> = [
            "call",
            "--no-cache",
            "--bearer-env",
            "PEER_TOKEN",
            "-H",
            "X-Secret: ${PEER_TOKEN}",
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra);
        args.extend([card.clone(), "s".into(), "hi".into()]);
        args
    };

    // The card's https endpoint on another origin gets nothing.
    let args = call(vec![]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = toolnexus(&args, &env).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("authorization=absent x-secret=absent"),
        "{out}"
    );
    assert!(err.contains("without credentials"), "{err}");

    // Listed by the user: sent.
    let args = call(vec!["--allow-credentials-to".into(), endpoint.url.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = toolnexus(&args, &env).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("authorization=present x-secret=present"),
        "{out}"
    );

    // The test CA is trusted only through SSL_CERT_FILE (or ClientOptions::extra_roots).
    let (code, _, err) = toolnexus(&args, &env[..1]).await;
    assert_eq!(code, 1, "{err}");

    // The library, trusting the CA through its options.
    let mut options = toolnexus_host_native::ClientOptions::default();
    options.extra_roots = vec![std::fs::read(certs.join("ca.pem")).expect("ca")];
    let transport = Arc::new(NativeTransport::with_options(&options));
    let agent = Agent::new(card.clone())
        .with_auth(Auth::Bearer("s3cret-token".into()))
        .with_header("X-Secret", "s3cret-token");
    let tools = agent_tools_with(&transport, &agent).await.expect("tools");
    let r = tools[0].execute(&json!({"task": "hi"})).await;
    assert_eq!(r.output, "authorization=absent x-secret=absent", "{r:?}");
    let allowed = agent.with_allowed_origin(endpoint.url.clone());
    let tools = agent_tools_with(&transport, &allowed).await.expect("tools");
    let r = tools[0].execute(&json!({"task": "hi"})).await;
    assert_eq!(r.output, "authorization=present x-secret=present", "{r:?}");
    let _ = std::fs::remove_dir_all(&certs);
}
