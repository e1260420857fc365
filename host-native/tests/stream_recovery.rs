//! A stream cut mid-task never loses or duplicates the result: the client
//! resubscribes and ends with exactly the peer's final answer. Real official
//! SDK servers (`tests/peers`), a real TCP proxy on 127.0.0.1 that breaks the
//! first event stream after its first event.

mod common;

use common::{free_port, repo_root, start_listening, Proc};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolnexus_core::Agent;

fn peers() -> PathBuf {
    repo_root().join("tests/peers")
}

async fn official_server(python: bool) -> Proc {
    let port = free_port().to_string();
    let py = peers().join(".venv/bin/python");
    assert!(
        py.exists() && peers().join("js/node_modules/@a2a-js/sdk").exists(),
        "the official SDK peers are not installed: run `bash tests/peers/setup.sh`"
    );
    if python {
        let script = peers().join("py_server.py").display().to_string();
        start_listening(&py, &[&script, "--port", &port]).await
    } else {
        let script = peers().join("js/server.mjs").display().to_string();
        start_listening(&PathBuf::from("node"), &[&script, "--port", &port]).await
    }
}

/// A proxy to `upstream` that cuts the first `SendStreamingMessage` answer
/// right after its first SSE event, and records each request's JSON-RPC method.
struct CuttingProxy {
    url: String,
    methods: Arc<Mutex<Vec<String>>>,
}

async fn cutting_proxy(upstream: String) -> CuttingProxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let methods = Arc::new(Mutex::new(Vec::new()));
    let armed = Arc::new(AtomicBool::new(true));
    let seen = methods.clone();
    tokio::spawn(async move {
        // Bounded: the test makes a handful of connections.
        for _ in 0..64 {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let Ok(server) = TcpStream::connect(&upstream).await else {
                return;
            };
            tokio::spawn(pipe(client, server, armed.clone(), seen.clone()));
        }
    });
    CuttingProxy { url, methods }
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<AtomicBool>,
    methods: Arc<Mutex<Vec<String>>>,
) {
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let streaming = Arc::new(AtomicBool::new(false));
    let is_stream = streaming.clone();
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = client_rx.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&buf[..n]);
            for m in [
                "SendStreamingMessage",
                "SubscribeToTask",
                "GetTask",
                "CancelTask",
            ] {
                if text.contains(&format!("\"{m}\"")) {
                    methods.lock().expect("methods").push(m.to_string());
                    if m == "SendStreamingMessage" {
                        is_stream.store(true, Ordering::SeqCst);
                    }
                }
            }
            if server_tx.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = server_rx.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if client_tx.write_all(&buf[..n]).await.is_err() {
            break;
        }
        let cut = streaming.load(Ordering::SeqCst)
            && String::from_utf8_lossy(&buf[..n]).contains("data:")
            && armed.swap(false, Ordering::SeqCst);
        if cut {
            // Drop both directions mid-stream, as a dying proxy or network would.
            break;
        }
    }
    up.abort();
}

async fn recovers(python: bool, task: &str, expected: &str) {
    let peer = official_server(python).await;
    let upstream = peer
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let proxy = cutting_proxy(upstream).await;
    let card_url = format!(
        "{}/.well-known/agent-card.json",
        peer.url.trim_end_matches('/')
    );
    let transport = toolnexus_host_native::NativeTransport::shared();
    let agent = Agent::new(&card_url);
    let card = toolnexus_core::fetch_card(&transport, &agent)
        .await
        .expect("card");
    assert!(card.streaming, "the official servers advertise streaming");
    let mut tool = toolnexus_core::card_tools(&agent, &card)
        .into_iter()
        .find(|t| t.skill == "echo")
        .expect("echo skill");
    // Everything JSON-RPC goes through the proxy.
    tool.endpoint = proxy.url.clone();
    let mut events = Vec::new();
    let r = tool
        .execute_with_events(
            &transport,
            &json!({"task": task}),
            std::future::pending(),
            |e| events.push(e),
        )
        .await;
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(r.output, expected);
    let methods = proxy.methods.lock().expect("methods").clone();
    assert_eq!(
        methods.first().map(String::as_str),
        Some("SendStreamingMessage")
    );
    assert!(
        methods.iter().any(|m| m == "SubscribeToTask"),
        "the cut stream was resubscribed: {methods:?}"
    );
    let terminal = events
        .iter()
        .filter(|e| e.state().is_some_and(|s| s.is_terminal()))
        .count();
    assert!(terminal >= 1, "a terminal event reached the caller");
}

#[tokio::test]
async fn a_cut_stream_from_the_js_sdk_is_resubscribed_and_ends_right() {
    recovers(false, "sleep 800", "echo: sleep 800").await;
    recovers(false, "chunks 4", "chunk 0\nchunk 1\nchunk 2\nchunk 3").await;
}

#[tokio::test]
async fn a_cut_stream_from_the_python_sdk_is_resubscribed_and_ends_right() {
    recovers(true, "sleep 800", "echo: sleep 800").await;
    recovers(true, "chunks 4", "chunk 0\nchunk 1\nchunk 2\nchunk 3").await;
}
