//! Server-side streaming over real HTTP on 127.0.0.1: SSE frames leave as
//! the task makes progress, idle streams get a heartbeat, a stop ends open
//! streams.

mod common;

use common::Steps;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolnexus_host_native::{serve, Model, NativeTransport, ServeHandle, ServeOptions};

async fn serve_steps(heartbeat: Option<Duration>) -> ServeHandle {
    let tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    let mut options = ServeOptions::new(Arc::new(tk), Model::Custom(Arc::new(Steps)));
    options.heartbeat = heartbeat;
    // Streams carry the CORS headers when CORS is on (off by default).
    options.cors_origin = Some(toolnexus_core::server::CorsOrigin::any());
    serve("127.0.0.1:0", options).await.expect("serve")
}

/// Sends a streaming call over a raw socket; the socket, to read from.
async fn open_stream(
    handle: &ServeHandle,
    version: Option<&str>,
    body: Value,
) -> tokio::net::TcpStream {
    let addr = handle.url.trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let body = body.to_string();
    let version = version
        .map(|v| format!("A2A-Version: {v}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: text/event-stream\r\n{version}Content-Length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.expect("write");
    socket.write_all(body.as_bytes()).await.expect("write");
    socket
}

fn send_body(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 5, "method": "SendStreamingMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": text}]}}})
}

/// What arrived so far, and when each `data:` frame was first seen.
struct Reader {
    socket: tokio::net::TcpStream,
    bytes: Vec<u8>,
    start: Instant,
    frames: Vec<(Duration, Value)>,
    eof: bool,
}

impl Reader {
    fn new(socket: tokio::net::TcpStream) -> Reader {
        Reader {
            socket,
            bytes: Vec::new(),
            start: Instant::now(),
            frames: Vec::new(),
            eof: false,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// Reads once (bounded by `within`); records complete new frames.
    async fn read_some(&mut self, within: Duration) {
        let mut buf = [0u8; 4096];
        match tokio::time::timeout(within, self.socket.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => self.eof = true,
            Ok(Ok(n)) => self.bytes.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        let text = self.text();
        // Each SSE frame is one `data: <json>\n\n` (one chunk on the wire).
        let frames: Vec<Value> = text
            .match_indices("data: ")
            .filter_map(|(at, _)| {
                let rest = &text[at + 6..];
                let end = rest.find("\n\n")?;
                serde_json::from_str(&rest[..end]).ok()
            })
            .collect();
        let now = self.start.elapsed();
        for f in frames.into_iter().skip(self.frames.len()) {
            self.frames.push((now, f));
        }
    }

    /// Reads until the stream ends (chunked terminator or EOF), bounded.
    async fn read_to_end(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.eof && !self.text().ends_with("\r\n0\r\n\r\n") && Instant::now() < deadline {
            self.read_some(Duration::from_millis(100)).await;
        }
    }
}

fn state_of(frame: &Value) -> Option<&str> {
    let r = &frame["result"];
    r["task"]["status"]["state"]
        .as_str()
        .or(r["statusUpdate"]["status"]["state"].as_str())
}

#[tokio::test]
async fn the_first_event_arrives_before_the_task_finishes() {
    let handle = serve_steps(None).await;
    let mut reader = Reader::new(open_stream(&handle, Some("1.0"), send_body("go")).await);
    while reader.frames.is_empty() && reader.start.elapsed() < Duration::from_secs(5) {
        reader.read_some(Duration::from_millis(50)).await;
    }
    let head = reader.text();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    assert!(head
        .to_ascii_lowercase()
        .contains("access-control-allow-origin: *"));
    let (first_at, first) = reader.frames[0].clone();
    assert_eq!(state_of(&first), Some("TASK_STATE_SUBMITTED"));
    assert_eq!(first["id"], 5);
    assert!(
        first_at < Duration::from_millis(600),
        "first event after {first_at:?}"
    );

    reader.read_to_end(Duration::from_secs(10)).await;
    let (last_at, last) = reader.frames.last().cloned().expect("frames");
    assert_eq!(state_of(&last), Some("TASK_STATE_COMPLETED"));
    assert!(
        last_at >= Duration::from_millis(800),
        "completed after {last_at:?}: the stream was not held back"
    );
    assert!(first_at + Duration::from_millis(500) < last_at);
    let kinds: Vec<&str> = reader
        .frames
        .iter()
        .filter_map(|(_, f)| f["result"].as_object()?.keys().next().map(String::as_str))
        .collect();
    assert_eq!(
        kinds,
        [
            "task",
            "statusUpdate",
            "statusUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "statusUpdate"
        ]
    );
    // The chunks arrived spread over the task, not at its end.
    let chunk_at = reader.frames[3].0;
    assert!(
        chunk_at + Duration::from_millis(300) < last_at,
        "{chunk_at:?} vs {last_at:?}"
    );
    handle.stop().await;
}

#[tokio::test]
async fn an_idle_stream_gets_heartbeats_and_a_stop_ends_it() {
    let handle = serve_steps(Some(Duration::from_millis(150))).await;
    let mut reader = Reader::new(
        open_stream(
            &handle,
            None,
            json!({"jsonrpc": "2.0", "id": 1,
        "method": "message/stream", "params": {"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "hang"}]}}}),
        )
        .await,
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while reader.text().matches(": ping").count() < 2 && Instant::now() < deadline {
        reader.read_some(Duration::from_millis(100)).await;
    }
    assert!(
        reader.text().matches(": ping\n\n").count() >= 2,
        "{}",
        reader.text()
    );
    let kinds: Vec<&str> = reader
        .frames
        .iter()
        .filter_map(|(_, f)| f["result"]["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["task", "status-update"]);

    let stopping = Instant::now();
    handle.stop_within(Duration::from_millis(100)).await;
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "stop waited {:?} on an open stream",
        stopping.elapsed()
    );
    reader.read_to_end(Duration::from_secs(3)).await;
    assert!(
        reader.eof || reader.text().ends_with("\r\n0\r\n\r\n"),
        "the stream ended at the stop: {}",
        reader.text()
    );
}

#[tokio::test]
async fn errors_before_a_stream_are_plain_json() {
    let handle = serve_steps(None).await;
    let body =
        json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": "nope"}});
    let resp = NativeTransport::shared()
        .send(
            toolnexus_core::HttpRequest::post_json(
                format!("{}/", handle.url),
                body.to_string().into_bytes(),
            )
            .with_header("A2A-Version", "1.0"),
        )
        .await
        .expect("answer");
    use toolnexus_core::Transport;
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let v: Value = serde_json::from_slice(&resp.body).expect("json");
    assert_eq!(v["error"]["code"], -32001);
    handle.stop().await;
}

/// Reads one HTTP/1.1 request (head and Content-Length body) off `socket`;
/// `false` when the peer closed the connection.
async fn read_request(socket: &mut tokio::net::TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match socket.read(&mut byte).await {
            Ok(1) => buf.push(byte[0]),
            _ => return false,
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    socket.read_exact(&mut body).await.is_ok()
}

/// A peer that ends its event stream a moment after the last event (as the
/// Python SDK's does): the client stops reading at the terminal event, and
/// the rest is drained so the next call reuses the keep-alive connection.
#[tokio::test]
async fn a_stream_dropped_at_its_terminal_event_keeps_its_connection() {
    use toolnexus_core::Transport;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                while read_request(&mut socket).await {
                    let event = "data: {\"done\":true}\n\n";
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                                Transfer-Encoding: chunked\r\n\r\n";
                    let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                    let _ = socket.write_all(format!("{head}{chunk}").as_bytes()).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                }
            });
        }
    });
    let transport = NativeTransport::new();
    let url = format!("http://{addr}/");
    for _ in 0..3 {
        let req = toolnexus_core::HttpRequest::post_json(&url, b"{}".to_vec());
        let mut resp = transport.send_streaming(req).await.expect("answer");
        let first = futures_util::StreamExt::next(&mut resp.body).await;
        assert!(first.is_some_and(|c| c.is_ok()), "the event arrives");
        drop(resp);
        // The drain needs ~20 ms; give it ample time before the next call.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "every call reused the one connection"
    );
}
