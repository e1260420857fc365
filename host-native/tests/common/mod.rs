//! Shared pieces of the host tests: stub HTTP peers on 127.0.0.1.
#![allow(dead_code)]

pub mod pg;
pub mod sdk;
pub mod traced;

use serde_json::{json, Value};
use std::sync::Arc;
use toolnexus_core::{HttpRequest, HttpResponse};
use toolnexus_host_native::http_server::{bind, ServerHandle, DEFAULT_BODY_LIMIT};

pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// A real HTTP peer on 127.0.0.1 whose every request goes to a closure.
pub struct Stub {
    pub handle: ServerHandle,
}

impl Stub {
    pub async fn start(
        handler: impl Fn(HttpRequest) -> HttpResponse + Send + Sync + 'static,
    ) -> Stub {
        let handler = Arc::new(handler);
        let handle = bind(
            "127.0.0.1:0",
            DEFAULT_BODY_LIMIT,
            Arc::new(move |req| {
                let handler = handler.clone();
                Box::pin(async move { handler(req) })
            }),
        )
        .await
        .expect("bind a stub peer");
        Stub { handle }
    }

    /// A peer like the seeds' stubs: `card` at the card path, every JSON-RPC
    /// POST answered by `rpc(method, params)` with a `result`.
    pub async fn a2a(
        card: Value,
        rpc: impl Fn(&str, &Value) -> Value + Send + Sync + 'static,
    ) -> Stub {
        Stub::start(move |req| {
            if req.url == CARD_PATH {
                return json_response(200, &card);
            }
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let method = body["method"].as_str().unwrap_or_default();
            let result = rpc(method, &body["params"]);
            json_response(
                200,
                &json!({"jsonrpc": "2.0", "id": body["id"], "result": result}),
            )
        })
        .await
    }

    /// A webhook on 127.0.0.1 that answers 204 and records every request.
    pub async fn webhook() -> (Stub, Arc<std::sync::Mutex<Vec<HttpRequest>>>) {
        let hits: Arc<std::sync::Mutex<Vec<HttpRequest>>> = Arc::default();
        let seen = hits.clone();
        let stub = Stub::start(move |req| {
            seen.lock().expect("hits").push(req);
            HttpResponse {
                status: 204,
                headers: Vec::new(),
                body: Vec::new(),
            }
        })
        .await;
        (stub, hits)
    }

    pub fn url(&self) -> &str {
        &self.handle.url
    }

    pub fn card_url(&self) -> String {
        format!("{}{CARD_PATH}", self.handle.url)
    }
}

pub fn json_response(status: u16, v: &Value) -> HttpResponse {
    HttpResponse::json(status, v.to_string().into_bytes())
}

/// The method of a JSON-RPC request body.
pub fn method_of(req: &HttpRequest) -> String {
    serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|v| v["method"].as_str().map(str::to_string))
        .unwrap_or_default()
}

pub fn text_task(id: &str, state: &str, text: Option<&str>) -> Value {
    match text {
        Some(t) => json!({"id": id, "status": {"state": state},
                          "artifacts": [{"parts": [{"kind": "text", "text": t}]}]}),
        None => json!({"id": id, "status": {"state": state}}),
    }
}

/// An OpenAI-style model endpoint: every `POST …/chat/completions` body goes
/// to `answer`, which returns the `choices[0].message`; the bodies are logged.
pub async fn openai_stub(
    answer: impl Fn(&Value) -> Value + Send + Sync + 'static,
) -> (Stub, Arc<std::sync::Mutex<Vec<Value>>>) {
    let log: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let seen = log.clone();
    let stub = Stub::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        seen.lock().expect("log").push(body.clone());
        if !req.url.ends_with("/chat/completions") {
            return json_response(404, &json!({"error": {"message": "wrong path"}}));
        }
        let message = answer(&body);
        json_response(
            200,
            &json!({"model": "stub-model", "choices": [{"message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}),
        )
    })
    .await;
    (stub, log)
}

/// A chat-completions message with just text.
pub fn say(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// The repository root.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// A child process killed when dropped.
pub struct Proc {
    pub child: tokio::process::Child,
    pub url: String,
}

/// Starts `program args…` and waits (bounded) for its first stdout line,
/// `listening on http://HOST:PORT`.
pub async fn start_listening(program: &std::path::Path, args: &[&str]) -> Proc {
    start_listening_env(program, args, &[]).await
}

/// [`start_listening`] with these environment variables set.
pub async fn start_listening_env(
    program: &std::path::Path,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Proc {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    // A bound, not a speed check: `serve --component` compiles the component
    // with a debug-built Cranelift first, which took over 60 s on a loaded
    // 2-core machine.
    let first = tokio::time::timeout(std::time::Duration::from_secs(180), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{} did not start within 180 s", program.display()))
        .expect("read stdout")
        .unwrap_or_else(|| panic!("{} exited before listening", program.display()));
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
        .trim()
        .to_string();
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Proc { child, url }
}

/// A port that was free a moment ago (for peers that need one given).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The `toolnexus` binary built for these tests.
pub fn toolnexus_bin() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_toolnexus"))
}

/// The card cache `toolnexus` uses in these tests: one per test process, in
/// the target dir, so the user's cache neither helps nor hears of them.
pub fn test_cache_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("card-cache-{}", std::process::id()))
}

/// Runs a program to completion (bounded), returning (exit code, stdout, stderr).
pub async fn run_to_end(program: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    run_with_cache(program, args, &test_cache_dir()).await
}

/// [`run_to_end`] with these environment variables set.
pub async fn run_to_end_env(
    program: &std::path::Path,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (i32, String, String) {
    run_with_env(program, args, &test_cache_dir(), envs).await
}

/// [`run_to_end`] of `toolnexus` with the card cache in `cache`.
pub async fn run_to_end_in(cache: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    run_with_cache(&toolnexus_bin(), args, cache).await
}

async fn run_with_cache(
    program: &std::path::Path,
    args: &[&str],
    cache: &std::path::Path,
) -> (i32, String, String) {
    run_with_env(program, args, cache, &[]).await
}

async fn run_with_env(
    program: &std::path::Path,
    args: &[&str],
    cache: &std::path::Path,
    envs: &[(&str, &str)],
) -> (i32, String, String) {
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(90),
        tokio::process::Command::new(program)
            .args(args)
            .env("TOOLNEXUS_CACHE_DIR", cache)
            .envs(envs.iter().copied())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{} {args:?} did not finish within 90 s", program.display()))
    .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fulfiller that takes about a second: says "starting", two answer chunks
/// 300 ms apart, then completes 300 ms later. The task "hang" never finishes.
pub struct Steps;

impl toolnexus_core::server::Fulfiller for Steps {
    fn fulfil(
        &self,
        r: toolnexus_core::server::FulfilRequest,
        progress: toolnexus_core::server::Progress,
    ) -> toolnexus_core::BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            if r.text == "hang" {
                std::future::pending::<()>().await;
            }
            let pause = || tokio::time::sleep(std::time::Duration::from_millis(300));
            progress.status("starting");
            pause().await;
            progress.artifact_chunk("part one", false);
            pause().await;
            progress.artifact_chunk("part two", false);
            pause().await;
            Ok(String::new())
        })
    }
}

/// A folder name under the system temp dir no other test or run uses
/// (`toolnexus-WHAT-PID-NANOS`); not created.
pub fn temp_dir(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "toolnexus-{what}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    ))
}
