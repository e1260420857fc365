//! `toolnexus serve --ui DIR`: the browser UI's static files beside the agent.

mod common;

use common::{run_to_end, start_listening, toolnexus_bin, Proc};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A folder `site/` with a page, a script and a module, inside a folder that
/// also holds a `Cargo.toml` the server must never hand out.
struct Site {
    outer: PathBuf,
}

impl Site {
    fn new(name: &str) -> Site {
        let outer = std::env::temp_dir().join(format!(
            "toolnexus-ui-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        let site = outer.join("site");
        std::fs::create_dir_all(site.join("pkg")).expect("mkdir");
        std::fs::write(outer.join("Cargo.toml"), "[package]\nname = \"secret\"\n").expect("write");
        std::fs::write(site.join("index.html"), "<!doctype html><title>ui</title>").expect("write");
        std::fs::write(site.join("app.js"), "export const ok = 1;\n").expect("write");
        std::fs::write(site.join("pkg/mod_bg.wasm"), b"\0asm\x01\0\0\0").expect("write");
        #[cfg(unix)]
        std::os::unix::fs::symlink(outer.join("Cargo.toml"), site.join("escape.txt"))
            .expect("symlink");
        Site { outer }
    }

    fn dir(&self) -> String {
        self.outer.join("site").display().to_string()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.outer);
    }
}

async fn serve_ui(site: &Site) -> Proc {
    start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--name",
            "ui-agent",
            "--ui",
            &site.dir(),
        ],
    )
    .await
}

/// One raw HTTP/1.1 exchange, so the request target reaches the server
/// exactly as written (no client-side path normalisation).
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn raw(base: &str, method: &str, target: &str, body: Option<&str>) -> Answer {
    raw_with(base, method, target, body, &[]).await
}

async fn raw_with(
    base: &str,
    method: &str,
    target: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Answer {
    let addr = base.trim_start_matches("http://");
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut req =
            format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(body.unwrap_or(""));
        stream.write_all(req.as_bytes()).await.expect("write");
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.expect("read");
        bytes
    };
    let bytes = tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {target}: no answer within 20 s"));
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    Answer {
        status,
        headers,
        body: bytes[split + 4..].to_vec(),
    }
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_their_content_types() {
    let site = Site::new("types");
    let proc = serve_ui(&site).await;
    for (target, ty, body) in [
        ("/", "text/html", "<!doctype html><title>ui</title>"),
        (
            "/index.html",
            "text/html",
            "<!doctype html><title>ui</title>",
        ),
        ("/app.js?v=2", "text/javascript", "export const ok = 1;\n"),
    ] {
        let a = raw(&proc.url, "GET", target, None).await;
        assert_eq!(a.status, 200, "GET {target}");
        assert!(
            a.header("content-type").unwrap_or_default().starts_with(ty),
            "GET {target}: {:?}",
            a.headers
        );
        assert_eq!(a.text(), body, "GET {target}");
    }
    let wasm = raw(&proc.url, "GET", "/pkg/mod_bg.wasm", None).await;
    assert_eq!(wasm.status, 200);
    assert_eq!(wasm.header("content-type"), Some("application/wasm"));
    assert_eq!(wasm.body, b"\0asm\x01\0\0\0");
    let head = raw(&proc.url, "HEAD", "/index.html", None).await;
    assert_eq!(head.status, 200);
    assert!(head
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/html"));
    let missing = raw(&proc.url, "GET", "/nope.js", None).await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn a_reload_of_unchanged_files_is_answered_304_and_a_changed_file_in_full() {
    let site = Site::new("conditional");
    let proc = serve_ui(&site).await;
    let first = raw(&proc.url, "GET", "/app.js", None).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("cache-control"), Some("no-cache"));
    let etag = first.header("etag").expect("an ETag").to_string();
    let modified = first
        .header("last-modified")
        .expect("a Last-Modified date")
        .to_string();
    assert!(httpdate_ok(&modified), "{modified}");

    // The browser's reload: If-None-Match, and If-Modified-Since alone.
    for conditions in [
        vec![("If-None-Match", etag.as_str())],
        vec![("If-None-Match", "\"other\", *")],
        vec![("If-Modified-Since", modified.as_str())],
        vec![
            ("If-None-Match", etag.as_str()),
            ("If-Modified-Since", modified.as_str()),
        ],
    ] {
        let again = raw_with(&proc.url, "GET", "/app.js", None, &conditions).await;
        assert_eq!(again.status, 304, "{conditions:?}");
        assert!(again.body.is_empty(), "a 304 has no body");
        assert_eq!(again.header("etag"), Some(etag.as_str()));
    }
    // If-None-Match decides when present: an old tag means a full answer
    // whatever the date says.
    let other = raw_with(
        &proc.url,
        "GET",
        "/app.js",
        None,
        &[
            ("If-None-Match", "W/\"0-0\""),
            ("If-Modified-Since", &modified),
        ],
    )
    .await;
    assert_eq!(other.status, 200);
    assert_eq!(other.text(), "export const ok = 1;\n");

    // A rebuilt file (another size) has another tag and is sent in full.
    std::fs::write(
        site.outer.join("site/app.js"),
        "export const ok = 2; // rebuilt\n",
    )
    .expect("write");
    let rebuilt = raw_with(
        &proc.url,
        "GET",
        "/app.js",
        None,
        &[("If-None-Match", &etag)],
    )
    .await;
    assert_eq!(rebuilt.status, 200);
    assert_eq!(rebuilt.text(), "export const ok = 2; // rebuilt\n");
    assert_ne!(rebuilt.header("etag"), Some(etag.as_str()));
    // The folder's page is validated like any file.
    let page = raw(&proc.url, "GET", "/", None).await;
    let page_tag = page.header("etag").expect("an ETag").to_string();
    let reload = raw_with(&proc.url, "GET", "/", None, &[("If-None-Match", &page_tag)]).await;
    assert_eq!(reload.status, 304);
}

/// Whether `date` is an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn httpdate_ok(date: &str) -> bool {
    date.len() == 29 && date.ends_with(" GMT") && date.as_bytes()[3] == b','
}

#[tokio::test]
async fn the_card_and_json_rpc_still_work_beside_the_page() {
    let site = Site::new("agent");
    let proc = serve_ui(&site).await;
    let card = raw(&proc.url, "GET", "/.well-known/agent-card.json", None).await;
    assert_eq!(card.status, 200);
    assert!(card
        .header("content-type")
        .unwrap_or_default()
        .starts_with("application/json"));
    let card: Value = serde_json::from_slice(&card.body).expect("card JSON");
    assert_eq!(card["name"], "ui-agent");
    assert_eq!(card["url"], format!("{}/", proc.url));

    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "hi from the page"}]}}});
    let a = raw(&proc.url, "POST", "/", Some(&send.to_string())).await;
    assert_eq!(a.status, 200);
    let v: Value = serde_json::from_slice(&a.body).expect("JSON-RPC answer");
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"],
        "hi from the page"
    );

    // The page is same-origin: it needs no CORS, and other pages get none.
    let preflight = raw(&proc.url, "OPTIONS", "/", None).await;
    assert_eq!(preflight.status, 405);
    assert_eq!(preflight.header("access-control-allow-origin"), None);
}

#[tokio::test]
async fn paths_outside_the_folder_are_refused() {
    let site = Site::new("traversal");
    let proc = serve_ui(&site).await;
    for target in [
        "/../Cargo.toml",
        "/pkg/../../Cargo.toml",
        "/%2e%2e/Cargo.toml",
        "/%2E%2E/Cargo.toml",
        "/..%2fCargo.toml",
        "/%2e%2e%2fCargo.toml",
        "/pkg/%2e%2e%2f%2e%2e%2fCargo.toml",
        "/..%5cCargo.toml",
        "/%2e%2e%5cCargo.toml",
        "/.%2e/Cargo.toml",
        "/escape.txt",
        "/%00",
        "/%2",
    ] {
        let a = raw(&proc.url, "GET", target, None).await;
        assert!(
            a.status == 400 || a.status == 404,
            "GET {target}: {} {}",
            a.status,
            a.text()
        );
        assert!(
            !a.text().contains("secret"),
            "GET {target} leaked: {}",
            a.text()
        );
    }
}

#[tokio::test]
async fn a_missing_ui_folder_is_one_line_and_exit_1() {
    let missing = std::env::temp_dir().join("toolnexus-ui-no-such-folder");
    let (code, stdout, stderr) = run_to_end(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--ui",
            &missing.display().to_string(),
        ],
    )
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--ui") && stderr.contains("toolnexus-ui-no-such-folder"),
        "{stderr}"
    );
}
