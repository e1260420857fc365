//! `toolnexus serve`'s safe defaults, as a browser or a rebinding page
//! would meet them, over real HTTP on 127.0.0.1: no CORS unless origins
//! are named, only this server's `Host` names, no Private Network Access
//! unless asked, and no anonymous public address.

mod common;

use common::{run_to_end, run_to_end_env, start_listening, toolnexus_bin, Proc};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    /// What follows the head (read to the end: `Connection: close`).
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

const SEND: &str = r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}}"#;

/// One raw HTTP/1.1 exchange with these headers (`Host` among them when
/// given; the server's address otherwise).
async fn raw(proc: &Proc, method: &str, target: &str, headers: &[(&str, &str)]) -> Answer {
    let addr = proc.url.trim_start_matches("http://").to_string();
    let body = if method == "POST" { SEND } else { "" };
    let mut req = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        stream.write_all(req.as_bytes()).await.expect("write");
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.expect("read");
        bytes
    };
    let bytes = tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("an answer within 20 s");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| bytes[at + 4..].to_vec())
        .unwrap_or_default();
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line in {text:?}"));
    let headers = lines
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    Answer {
        status,
        headers,
        body,
    }
}

async fn serve(extra: &[&str]) -> Proc {
    let mut args = vec!["serve", "--addr", "127.0.0.1:0", "--llm", "echo"];
    args.extend_from_slice(extra);
    start_listening(&toolnexus_bin(), &args).await
}

const EVIL: &str = "http://evil.test";

fn preflight(origin: &str) -> Vec<(&str, &str)> {
    vec![
        ("Origin", origin),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "content-type, x-anything"),
    ]
}

#[tokio::test]
async fn by_default_no_page_of_another_origin_may_read_the_answers() {
    let proc = serve(&[]).await;
    let post = raw(&proc, "POST", "/", &[("Origin", EVIL)]).await;
    assert_eq!(post.status, 200, "answered (the browser withholds it)");
    assert_eq!(post.header("Access-Control-Allow-Origin"), None);
    let pre = raw(&proc, "OPTIONS", "/", &preflight(EVIL)).await;
    assert_ne!(pre.status, 204);
    assert_eq!(pre.header("Access-Control-Allow-Origin"), None);
    assert_eq!(pre.header("Access-Control-Allow-Headers"), None);
    let card = raw(
        &proc,
        "GET",
        "/.well-known/agent-card.json",
        &[("Origin", EVIL)],
    )
    .await;
    assert_eq!(card.status, 200);
    assert_eq!(card.header("Access-Control-Allow-Origin"), None);
}

#[tokio::test]
async fn listed_cors_origins_are_answered_and_no_other() {
    let a = "http://localhost:5173";
    let b = "https://app.example";
    let proc = serve(&["--cors-origin", a, "--cors-origin", b]).await;
    for origin in [a, b] {
        let post = raw(&proc, "POST", "/", &[("Origin", origin)]).await;
        assert_eq!(post.header("Access-Control-Allow-Origin"), Some(origin));
        assert_eq!(post.header("Vary"), Some("Origin"));
        let pre = raw(&proc, "OPTIONS", "/", &preflight(origin)).await;
        assert_eq!(pre.status, 204);
        assert_eq!(pre.header("Access-Control-Allow-Origin"), Some(origin));
    }
    let post = raw(&proc, "POST", "/", &[("Origin", EVIL)]).await;
    assert_eq!(post.header("Access-Control-Allow-Origin"), None);
    let pre = raw(&proc, "OPTIONS", "/", &preflight(EVIL)).await;
    assert_eq!(pre.header("Access-Control-Allow-Origin"), None);
    // A wildcard among origins is a mistake, said at startup.
    let (code, stdout, stderr) = run_to_end(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--cors-origin",
            "*",
            "--cors-origin",
            a,
        ],
    )
    .await;
    assert_ne!(code, 0);
    assert!(!stdout.contains("listening"), "{stdout}");
    assert!(stderr.contains("--cors-origin"), "{stderr}");
}

#[tokio::test]
async fn a_foreign_host_header_is_misdirected() {
    let proc = serve(&["--public-url", "https://agents.example/desk"]).await;
    let port = proc.url.rsplit(':').next().expect("port").to_string();
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_string(),
        format!("127.0.0.1.evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
    ] {
        for (method, path) in [
            ("POST", "/"),
            ("GET", "/.well-known/agent-card.json"),
            ("GET", "/healthz"),
            ("OPTIONS", "/"),
        ] {
            let a = raw(&proc, method, path, &[("Host", &host)]).await;
            assert_eq!(a.status, 421, "{method} {path} Host: {host}");
        }
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "agents.example".to_string(),
    ] {
        let a = raw(&proc, "POST", "/", &[("Host", &host)]).await;
        assert_eq!(a.status, 200, "Host: {host}");
    }
}

#[tokio::test]
async fn the_ui_is_misdirected_for_a_foreign_host_too() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ui-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("index.html"), "<p>ui</p>").expect("page");
    let proc = serve(&["--ui", &dir.display().to_string()]).await;
    let page = raw(&proc, "GET", "/", &[]).await;
    assert_eq!(page.status, 200);
    let page = raw(&proc, "GET", "/", &[("Host", "rebind.evil.example")]).await;
    assert_eq!(page.status, 421);
}

#[tokio::test]
async fn private_network_access_is_answered_only_when_asked_for() {
    let origin = "https://app.example";
    let mut ask = preflight(origin);
    ask.push(("Access-Control-Request-Private-Network", "true"));
    let plain = serve(&["--cors-origin", origin]).await;
    let pre = raw(&plain, "OPTIONS", "/", &ask).await;
    assert_eq!(pre.status, 204);
    assert_eq!(pre.header("Access-Control-Allow-Private-Network"), None);
    let pna = serve(&["--cors-origin", origin, "--cors-private-network"]).await;
    let pre = raw(&pna, "OPTIONS", "/", &ask).await;
    assert_eq!(
        pre.header("Access-Control-Allow-Private-Network"),
        Some("true")
    );
    let pre = raw(&pna, "OPTIONS", "/", &preflight(origin)).await;
    assert_eq!(
        pre.header("Access-Control-Allow-Private-Network"),
        None,
        "only to a preflight that asks"
    );
    // It needs an origin to go with.
    let (code, _, stderr) = run_to_end(
        &toolnexus_bin(),
        &["serve", "--addr", "127.0.0.1:0", "--cors-private-network"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("--cors-origin"), "{stderr}");
}

#[tokio::test]
async fn a_public_address_without_a_verifier_is_refused_before_listening() {
    // Refused before binding: nothing listens on these addresses.
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:0"] {
        let (code, stdout, stderr) = run_to_end(
            &toolnexus_bin(),
            &["serve", "--addr", addr, "--llm", "echo"],
        )
        .await;
        assert_ne!(code, 0, "{addr}");
        assert!(!stdout.contains("listening"), "{addr}: {stdout}");
        for says in [
            "without authentication",
            "a2a.auth",
            "--allow-anonymous",
            "127.0.0.1",
        ] {
            assert!(stderr.contains(says), "{addr}: {says} in {stderr}");
        }
    }
}

#[tokio::test]
async fn a_public_component_without_a_verifier_is_refused_as_serve_is() {
    // The address check comes before the component is read or an address
    // bound: this file need not exist, and nothing listens.
    let missing = "/nonexistent/toolnexus-agent.wasm";
    let run = |addr: &'static str,
               extra: &'static [&'static str],
               env: &'static [(&'static str, &'static str)]| async move {
        let mut args = vec!["serve", "--component", missing, "--addr", addr];
        args.extend_from_slice(extra);
        run_to_end_env(&toolnexus_bin(), &args, env).await
    };
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:0"] {
        let (code, stdout, stderr) = run(addr, &[], &[]).await;
        assert_ne!(code, 0, "{addr}");
        assert!(!stdout.contains("listening"), "{addr}: {stdout}");
        for says in [
            "without authentication",
            "TOOLNEXUS_API_KEYS",
            "TOOLNEXUS_JWT_SECRET",
            "--allow-anonymous",
            "127.0.0.1",
        ] {
            assert!(stderr.contains(says), "{addr}: {says} in {stderr}");
        }
    }
    // A verifier in the component's environment, --allow-anonymous, or a
    // loopback address: past the check (then the missing file, or a build
    // without the component feature, stops it).
    for (addr, extra, env) in [
        (
            "192.0.2.1:0",
            &[][..],
            &[("TOOLNEXUS_API_KEYS", "alice:k-0123456789abcdef")][..],
        ),
        (
            "192.0.2.1:0",
            &[][..],
            &[("TOOLNEXUS_JWT_SECRET", "s3cret-0123456789abcdef")][..],
        ),
        ("192.0.2.1:0", &["--allow-anonymous"][..], &[][..]),
        ("127.0.0.1:0", &[][..], &[][..]),
    ] {
        let (code, _, stderr) = run(addr, extra, env).await;
        assert_ne!(
            code, 0,
            "{addr} {extra:?} {env:?}: the component is missing"
        );
        assert!(
            !stderr.contains("without authentication"),
            "{addr} {extra:?} {env:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn the_config_auth_block_guards_serve_and_shows_on_the_card() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("auth-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"a2a": {"name": "guarded", "auth": {"apiKeys": {"keys": {"alice": "${SD_ALICE_KEY}"}}}}}"#,
    )
    .expect("config");
    let config = config.display().to_string();
    let bin = toolnexus_bin().display().to_string();
    let key = "SD_ALICE_KEY=k-alice-0123456789abcdef";
    // `env` sets the key for the child only.
    let proc = start_listening(
        std::path::Path::new("/usr/bin/env"),
        &[
            key,
            &bin,
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--config",
            &config,
        ],
    )
    .await;
    let without = raw(&proc, "POST", "/", &[]).await;
    assert_eq!(without.status, 401);
    assert!(without.header("WWW-Authenticate").is_some());
    let wrong = raw(&proc, "POST", "/", &[("X-API-Key", "guess")]).await;
    assert_eq!(wrong.status, 401);
    let with = raw(
        &proc,
        "POST",
        "/",
        &[("X-API-Key", "k-alice-0123456789abcdef")],
    )
    .await;
    assert_eq!(with.status, 200);
    let served = raw(&proc, "GET", "/.well-known/agent-card.json", &[]).await;
    assert_eq!(served.status, 200, "the public card needs no key");
    // `toolnexus card` derives the same schemes.
    let out = tokio::process::Command::new("/usr/bin/env")
        .args([
            key,
            &bin,
            "card",
            "--config",
            &config,
            "--url",
            "http://127.0.0.1:9/",
        ])
        .output()
        .await
        .expect("card");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let card: serde_json::Value = serde_json::from_slice(&out.stdout).expect("card JSON");
    let served: serde_json::Value = serde_json::from_slice(&served.body).expect("served card");
    assert_eq!(card["securitySchemes"], served["securitySchemes"], "{card}");
    assert_eq!(
        card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"],
        "X-API-Key"
    );
    assert_eq!(card["securityRequirements"], served["securityRequirements"]);
}
