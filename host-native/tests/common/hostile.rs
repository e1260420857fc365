//! A small scriptable hostile peer on 127.0.0.1, over raw TCP so it can
//! answer what no well-behaved server library would: 16 MiB cards, escape
//! sequences, another task's id, 429s, answers held for seconds. A script is
//! a closure from the request (and how many of its JSON-RPC method came
//! before) to an [`Answer`]; every request is logged.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the peer saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` when none or not JSON).
    pub body: Value,
}

impl Seen {
    /// The JSON-RPC method, or `""`.
    pub fn rpc(&self) -> &str {
        self.body["method"].as_str().unwrap_or_default()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the peer answers: after `delay`, this status, headers and body.
#[derive(Clone, Debug)]
pub struct Answer {
    pub delay: Duration,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn bytes(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            delay: Duration::ZERO,
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    pub fn json(status: u16, v: &Value) -> Answer {
        Answer::bytes(status, "application/json", v.to_string())
    }

    /// A JSON-RPC `result` for the request `seen`.
    pub fn result(seen: &Seen, result: Value) -> Answer {
        Answer::json(
            200,
            &json!({"jsonrpc": "2.0", "id": seen.body["id"], "result": result}),
        )
    }

    /// A JSON-RPC `error` for the request `seen`.
    pub fn error(seen: &Seen, code: i64, message: &str) -> Answer {
        Answer::json(
            200,
            &json!({"jsonrpc": "2.0", "id": seen.body["id"], "error": {"code": code, "message": message}}),
        )
    }

    pub fn after(mut self, ms: u64) -> Answer {
        self.delay = Duration::from_millis(ms);
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Answer {
        self.headers.push((name.into(), value.into()));
        self
    }
}

type Script = dyn Fn(&Seen, usize) -> Answer + Send + Sync;

/// The peer; dropped, it stops accepting.
pub struct Hostile {
    pub url: String,
    log: Arc<Mutex<Vec<Seen>>>,
    /// Answers written whole, and answers the client closed the connection
    /// under before all was written.
    done: Arc<[AtomicUsize; 2]>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Hostile {
    /// Starts the peer: `script(request, n)` answers every request, `n`
    /// counting the earlier requests with the same JSON-RPC method (or the
    /// same path for a GET).
    pub async fn start(script: impl Fn(&Seen, usize) -> Answer + Send + Sync + 'static) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let seen = log.clone();
        let done: Arc<[AtomicUsize; 2]> = Arc::default();
        let dones = done.clone();
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, script.clone(), seen.clone(), dones.clone()));
            }
        });
        Hostile {
            url,
            log,
            done,
            accept,
        }
    }

    pub fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.url)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().expect("log").clone()
    }

    /// How many answers were written whole, and how many the client
    /// stopped reading (the connection closed before the peer had written
    /// them whole).
    pub fn written_and_cut(&self) -> (usize, usize) {
        let [written, cut] = &*self.done;
        (written.load(Ordering::SeqCst), cut.load(Ordering::SeqCst))
    }

    /// The requests with this JSON-RPC method.
    pub fn calls(&self, rpc: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.rpc() == rpc).collect()
    }
}

/// Serves one keep-alive connection until the client closes it.
async fn serve(
    mut socket: TcpStream,
    script: Arc<Script>,
    log: Arc<Mutex<Vec<Seen>>>,
    done: Arc<[AtomicUsize; 2]>,
) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.len() > 1024 * 1024 {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or_default().split(' ');
        let method = first.next().unwrap_or_default().to_string();
        let path = first.next().unwrap_or_default().to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 8192];
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
        buf.drain(..head_end + length);
        let seen = Seen {
            at: Instant::now(),
            method,
            path,
            headers,
            body,
        };
        let n = {
            let mut log = log.lock().expect("log");
            let n = log
                .iter()
                .filter(|s| s.rpc() == seen.rpc() && (seen.rpc() != "" || s.path == seen.path))
                .count();
            log.push(seen.clone());
            n
        };
        let answer = script(&seen, n);
        if !answer.delay.is_zero() {
            tokio::time::sleep(answer.delay).await;
        }
        let mut out = format!(
            "HTTP/1.1 {} X\r\nContent-Length: {}\r\n",
            answer.status,
            answer.body.len()
        );
        for (k, v) in &answer.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&answer.body);
        let written = socket.write_all(&bytes).await.is_ok();
        done[usize::from(!written)].fetch_add(1, Ordering::SeqCst);
        if !written {
            return;
        }
    }
}
