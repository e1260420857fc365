//! Against the official SDK servers (`tests/peers`, cards with `streaming: true`):
//! per-call latency of a quick task side by side with the official clients and
//! a raw keep-alive floor, then the lag between a task settling at the peer and
//! the caller having its result. Part of `cargo bench --bench latency`.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use toolnexus_core::Shape;
use toolnexus_host_native::{agent_tools, Agent};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts a peer server and waits (bounded) for `listening on URL`.
async fn start(program: &Path, args: &[&str]) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the peer did not start within 60 s")
        .expect("read stdout")
        .expect("the peer exited before listening");
    let url = first
        .strip_prefix("listening on ")
        .expect("a listening line")
        .trim()
        .to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// (p50, p90, min) in ms, nearest rank.
fn stats(mut ms: Vec<f64>) -> (f64, f64, f64) {
    ms.sort_by(f64::total_cmp);
    let rank = |p: f64| ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
    (rank(0.5), rank(0.9), ms[0])
}

fn row(who: &str, n: usize, (p50, p90, min): (f64, f64, f64)) {
    println!("  {who:<52} n={n:<4} p50 {p50:>7.3} ms  p90 {p90:>7.3} ms  min {min:>7.3} ms");
}

async fn official_clients(program: &Path, script: &Path, card: &str) {
    let out = tokio::process::Command::new(program)
        .arg(script)
        .args([card, "--n", "200", "--warmup", "20"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run the official bench client");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        let n = v["n"].as_u64().unwrap_or(0) as usize;
        let who = v["method"].as_str().unwrap_or("?");
        row(who, n, (f("p50_ms"), f("p90_ms"), f("min_ms")));
    }
    if !out.status.success() {
        println!(
            "  ({} failed: {})",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 UTC timestamp
/// (`2026-12-01T11:38:37.303Z`, any number of fraction digits, `Z` or `+00:00`).
fn epoch_ms(ts: &str) -> Option<f64> {
    let ts = ts.strip_suffix('Z').or_else(|| ts.strip_suffix("+00:00"))?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3_600 + min * 60) as f64 + sec) * 1e3)
}

fn now_epoch_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}

/// The peer's timestamp on the terminal status update, in epoch ms.
fn settled_at(event: &Value) -> Option<f64> {
    let terminal = matches!(
        event.pointer("/status/state").and_then(Value::as_str),
        Some("completed" | "failed" | "canceled" | "rejected")
    );
    if !terminal {
        return None;
    }
    epoch_ms(event.pointer("/status/timestamp")?.as_str()?)
}

/// `toolnexus call --events`: the peer's settled timestamp and the process's
/// exit, in epoch ms.
///
/// The exit is seen as a shell sees it: one thread blocked reading the
/// child's pipes, then in `waitpid`. Through the bench's tokio runtime it
/// would also count that runtime's own wake-ups (the pipes' EOF and the
/// child's exit arrive as separate events, each possibly on another worker).
async fn cli_lag(card: &str, task: &str) -> (f64, f64) {
    let (card, task) = (card.to_string(), task.to_string());
    let (out, done) = tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(toolnexus_bin());
        cmd.env("TOOLNEXUS_CACHE_DIR", bench_cache_dir());
        let out = cmd
            .args(["call", "--events", &card, "echo", &task])
            .stdin(Stdio::null())
            .output()
            .expect("run toolnexus call");
        (out, now_epoch_ms())
    })
    .await
    .expect("the blocking call");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let settled = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| settled_at(&e))
        .expect("a terminal status update with the peer's timestamp");
    (settled, done)
}

/// The environment variable that makes this benchmark binary, started as a
/// child, the one-shot floor ([`one_shot_floor`]): its value is the peer's
/// `host:port`.
const ONE_SHOT_FLOOR: &str = "TOOLNEXUS_BENCH_ONE_SHOT_SSE";

/// The least a process that makes one call must do: start (a Rust binary,
/// no async runtime), open a new TCP connection, send one hand-written A2A
/// 1.0 `SendStreamingMessage` and read the SSE until a terminal state, then
/// exit at once, as `toolnexus call` does. `toolnexus --version` alone misses
/// the new connection (the keep-alive floor reuses one) and the peer's work
/// to accept it. Returns `false` when this process is not that child.
pub fn one_shot_floor() -> bool {
    use std::io::{Read, Write};
    let Ok(addr) = std::env::var(ONE_SHOT_FLOOR) else {
        return false;
    };
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{{"message":{{"role":"ROLE_USER","messageId":"floor-{}","parts":[{{"text":"sleep 0"}}]}}}}}}"#,
        std::process::id()
    );
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    stream.write_all(request.as_bytes()).expect("send");
    let mut seen = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let terminal = [
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
    ];
    loop {
        let n = stream.read(&mut buf).expect("read");
        assert!(n > 0, "the stream ended before a terminal state");
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(state) = terminal.iter().find(|s| text.contains(*s)) {
            std::process::exit(if *state == terminal[0] { 0 } else { 1 });
        }
    }
}

/// The card cache of this bench's `toolnexus` runs: its own, empty at the
/// start, so the user's cache neither helps nor hears of it.
fn bench_cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!("toolnexus-bench-cache-{}", std::process::id()))
}

/// The `toolnexus` binary measured: this build's, or `$TOOLNEXUS_BENCH_BIN`
/// (another build, for an A/B on the same peers).
fn toolnexus_bin() -> PathBuf {
    std::env::var_os("TOOLNEXUS_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_toolnexus")))
}

fn toolnexus() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(toolnexus_bin());
    cmd.env("TOOLNEXUS_CACHE_DIR", bench_cache_dir());
    cmd
}

/// One `toolnexus call [extra…] CARD echo TASK`, in wall-clock ms to its exit.
async fn cli_call(card: &str, task: &str, extra: &[&str]) -> f64 {
    let started = Instant::now();
    let out = toolnexus()
        .arg("call")
        .args(extra)
        .args([card, "echo", task])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run toolnexus call");
    let ms = started.elapsed().as_secs_f64() * 1e3;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    ms
}

/// Per-call latency (`calls`) and the lag after the peer settles (`lag`).
pub async fn run(calls: bool, lag: bool) {
    let root = repo_root();
    let _ = std::fs::remove_dir_all(bench_cache_dir());
    let python = root.join("tests/peers/.venv/bin/python");
    if !python.exists() || !root.join("tests/peers/js/node_modules").exists() {
        println!("\nofficial SDK peers: skipped (run `bash tests/peers/setup.sh` first)");
        return;
    }
    let node = PathBuf::from("node");
    let (js_port, py_port) = (free_port().to_string(), free_port().to_string());
    let js_server = root.join("tests/peers/js/server.mjs");
    let py_server = root.join("tests/peers/py_server.py");
    let (_js, js_url) = start(
        &node,
        &[js_server.to_str().unwrap_or_default(), "--port", &js_port],
    )
    .await;
    let (_py, py_url) = start(
        &python,
        &[py_server.to_str().unwrap_or_default(), "--port", &py_port],
    )
    .await;

    if calls {
        per_call(&root, &node, &python, &js_url, &py_url).await;
    }
    if lag {
        lags(&js_url, &py_url).await;
    }
    let _ = std::fs::remove_dir_all(bench_cache_dir());
}

/// One quick task, sequential calls: the official clients, the raw floors,
/// the library and `toolnexus call`.
async fn per_call(root: &Path, node: &Path, python: &Path, js_url: &str, py_url: &str) {
    println!("\nagainst the official SDK servers: one quick task (\"sleep 0\"), sequential calls");
    for (name, url) in [
        ("@a2a-js/sdk server", &js_url),
        ("a2a-sdk (Python) server", &py_url),
    ] {
        let card = format!("{}/.well-known/agent-card.json", url.trim_end_matches('/'));
        println!("{name}:");
        official_clients(node, &root.join("tests/peers/js/bench_client.mjs"), &card).await;
        official_clients(python, &root.join("tests/peers/bench_client.py"), &card).await;

        let tools = agent_tools(&Agent::new(&card)).await.expect("tools");
        let tool = tools
            .iter()
            .find(|t| t.skill() == "echo")
            .expect("the echo skill");
        let args = json!({"task": "sleep 0"});
        for _ in 0..20 {
            tool.execute(&args).await;
        }
        let mut ms = Vec::new();
        for _ in 0..200 {
            let started = Instant::now();
            let r = tool.execute(&args).await;
            ms.push(started.elapsed().as_secs_f64() * 1e3);
            assert!(!r.is_error, "{}", r.output);
        }
        row("toolnexus library (execute)", 200, stats(ms));
        // One untimed run each: the first fills the card cache.
        for (who, extra) in [
            (
                "toolnexus call --no-cache (process, card, call)",
                &["--no-cache"][..],
            ),
            ("toolnexus call (card cache warm)", &[][..]),
        ] {
            cli_call(&card, "sleep 0", extra).await;
            let mut ms = Vec::new();
            for _ in 0..30 {
                ms.push(cli_call(&card, "sleep 0", extra).await);
            }
            row(who, 30, stats(ms));
        }
        let mut ms = Vec::new();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let floor = std::env::current_exe().expect("this benchmark's path");
        for _ in 0..30 {
            let started = Instant::now();
            let status = tokio::process::Command::new(&floor)
                .env(ONE_SHOT_FLOOR, &addr)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .await
                .expect("run the one-shot floor");
            ms.push(started.elapsed().as_secs_f64() * 1e3);
            assert!(status.success(), "the one-shot floor failed: {status}");
        }
        row(
            "  (one-shot floor: process, new connection, raw SSE)",
            30,
            stats(ms),
        );
        let mut ms = Vec::new();
        for _ in 0..30 {
            let started = Instant::now();
            let _ = tokio::process::Command::new(toolnexus_bin())
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .await;
            ms.push(started.elapsed().as_secs_f64() * 1e3);
        }
        row("  (toolnexus --version: process start)", 30, stats(ms));
    }
}

/// The lag between the peer's settled timestamp and the caller having the
/// result, for 0.1–5 s tasks.
async fn lags(js_url: &str, py_url: &str) {
    let samples = std::env::var_os("TOOLNEXUS_BENCH_SAMPLES").is_some();
    println!("\nlag from the peer's settled timestamp (its terminal status update) to the caller having the result");
    println!("(same machine, wall clock), 5 calls each: median / max");
    println!(
        "{:>26} {:>8}  {:>18}  {:>18}",
        "server", "task ms", "library", "toolnexus call"
    );
    for (name, url) in [("@a2a-js/sdk", js_url), ("a2a-sdk (Python)", py_url)] {
        let card = format!("{}/.well-known/agent-card.json", url.trim_end_matches('/'));
        let tools = agent_tools(&Agent::new(&card)).await.expect("tools");
        let tool = tools
            .iter()
            .find(|t| t.skill() == "echo")
            .expect("the echo skill");
        for duration in [100u64, 500, 2_000, 5_000] {
            let task = format!("sleep {duration}");
            let mut lib = Vec::new();
            let mut cli = Vec::new();
            for _ in 0..5 {
                let mut settled = None;
                let r = tool
                    .execute_with_events(&json!({"task": task}), std::future::pending(), |e| {
                        let v = serde_json::to_value(e.shaped(Shape::V03)).unwrap_or_default();
                        settled = settled.or(settled_at(&v));
                    })
                    .await;
                let done = now_epoch_ms();
                assert!(!r.is_error, "{}", r.output);
                let settled = settled.expect("the peer's settled timestamp");
                lib.push(done - settled);
                let (cli_settled, cli_done) = cli_lag(&card, &task).await;
                cli.push(cli_done - cli_settled);
                if samples {
                    eprintln!("sample {name} {duration} library {settled:.3} {done:.3} call {cli_settled:.3} {cli_done:.3}");
                }
            }
            let (lib, cli) = (stats(lib), stats(cli));
            // With 5 samples the nearest-rank p90 is the maximum.
            println!(
                "{name:>26} {duration:>8}  {:>8.1} / {:>6.1} ms  {:>8.1} / {:>6.1} ms",
                lib.0, lib.1, cli.0, cli.1
            );
        }
    }
    let _ = std::fs::remove_dir_all(bench_cache_dir());
}
