//! Faults across replicas on PostgreSQL (issue 19), at scale, with figures
//! (no timed assertions: it prints what it saw).
//!
//! `cargo bench -p toolnexus-host-native --bench replica_faults [-- RACES TASKS]`
//!
//! 1. Cancel races: 2 × RACES (default 1,000) tasks, each sent to one of
//!    three in-process replicas and canceled through another after a
//!    varying delay while its fulfilment ends after another. For each: a
//!    `canceled` answer must be the final state (else "overwritten"), the
//!    task must end (else "stuck"), and the `on_task` hook must run once
//!    over all replicas.
//! 2. Fail-over: three replicas as processes (`toolnexus serve --store
//!    postgres://…`, lease 2 s) and a model that never answers; TASKS
//!    (default 100) tasks acknowledged by replica A, then A is killed
//!    (SIGKILL). How long after the kill each is settled (`failed`,
//!    interrupted) by a survivor (seen by a long-poll on a survivor), how
//!    many were lost, and whether new requests succeed meanwhile.

#[path = "../tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolnexus_core::server::{FulfilRequest, Fulfiller, Progress};
use toolnexus_core::{BoxFuture, HttpRequest, HttpResponse, Transport};
use toolnexus_host_native::http_server::{bind, DEFAULT_BODY_LIMIT};
use toolnexus_host_native::store::StoreConfig;
use toolnexus_host_native::{serve, Model, NativeTransport, ServeOptions, Toolkit};

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Answers "done" after the number of ms its text says.
struct Sleepy;

impl Fulfiller for Sleepy {
    fn fulfil(&self, r: FulfilRequest, _: Progress) -> BoxFuture<'static, Result<String, String>> {
        let ms = r.text.trim().parse::<u64>().unwrap_or(0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok("done".into())
        })
    }
}

async fn rpc(url: &str, method: &str, params: Value, wait: Option<u64>) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
    if let Some(s) = wait {
        req = req.with_header("Prefer", format!("wait={s}"));
    }
    match NativeTransport::shared().send(req).await {
        Ok(resp) => serde_json::from_slice(&resp.body).unwrap_or(Value::Null),
        Err(e) => json!({"error": {"message": e.to_string()}}),
    }
}

fn send_params(text: &str) -> Value {
    json!({"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": text}]},
           "configuration": {"blocking": false}})
}

fn state(v: &Value) -> &str {
    v["result"]["status"]["state"].as_str().unwrap_or_default()
}

type Hooks = Arc<Mutex<HashMap<String, usize>>>;

async fn cancel_races(url: &str, races: usize) {
    let hooks: Hooks = Arc::default();
    let mut rs = Vec::new();
    for _ in 0..3 {
        let mut options = ServeOptions::new(
            Arc::new(Toolkit::new(NativeTransport::shared())),
            Model::Custom(Arc::new(Sleepy)),
        );
        options.store = StoreConfig::Postgres(url.to_string());
        options.max_running = 256;
        let hooks = hooks.clone();
        options.on_task = Some(Arc::new(move |e: &toolnexus_core::server::TaskEvent| {
            *hooks.lock().unwrap().entry(e.id.clone()).or_default() += 1;
        }));
        rs.push(serve("127.0.0.1:0", options).await.expect("serve"));
    }
    let urls: Arc<Vec<String>> = Arc::new(rs.iter().map(|r| r.url.clone()).collect());
    for round in 0..2 {
        let started = Instant::now();
        let mut outcomes = Vec::new();
        // 50 races at a time.
        for chunk in (0..races).collect::<Vec<_>>().chunks(50) {
            let mut batch = Vec::new();
            for &k in chunk {
                let urls = urls.clone();
                batch.push(tokio::spawn(async move {
                    // Round 0: A → B; round 1: B → A (and C reads).
                    let (a, b) = if round == 0 {
                        (k % 3, (k + 1) % 3)
                    } else {
                        ((k + 1) % 3, k % 3)
                    };
                    let work = 30 + (k as u64 * 7) % 70;
                    let sent = rpc(
                        &urls[a],
                        "message/send",
                        send_params(&work.to_string()),
                        None,
                    )
                    .await;
                    let id = sent["result"]["id"].as_str().map(str::to_string)?;
                    tokio::time::sleep(Duration::from_millis((k as u64 * 13) % 60)).await;
                    let answer = rpc(&urls[b], "tasks/cancel", json!({"id": id}), None).await;
                    let last =
                        rpc(&urls[(k + 2) % 3], "tasks/get", json!({"id": id}), Some(20)).await;
                    Some((id, state(&answer) == "canceled", state(&last).to_string()))
                }));
            }
            for b in batch {
                outcomes.push(b.await.expect("race"));
            }
        }
        let elapsed = started.elapsed();
        // The hooks run after the save: give the last ones a moment.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let hooks = hooks.lock().unwrap();
        let (mut canceled, mut completed, mut overwritten, mut stuck, mut unsent) = (0, 0, 0, 0, 0);
        let mut refused_yet_canceled = 0;
        let (mut hook_once, mut hook_other) = (0, 0);
        for o in &outcomes {
            let Some((id, won, last)) = o else {
                unsent += 1;
                continue;
            };
            match (won, last.as_str()) {
                (true, "canceled") => canceled += 1,
                (true, _) => overwritten += 1,
                (false, "completed") => completed += 1,
                (false, "canceled") => refused_yet_canceled += 1,
                _ => stuck += 1,
            }
            match hooks.get(id) {
                Some(1) => hook_once += 1,
                _ => hook_other += 1,
            }
        }
        println!(
            "cancel races, round {} ({} → {}): {races} tasks in {:.1} s: {canceled} canceled, \
             {completed} finished first, {overwritten} overwritten, {stuck} stuck, {unsent} not \
             acknowledged, {refused_yet_canceled} cancels refused yet canceled; on_task once for \
             {hook_once}, not once for {hook_other}",
            round + 1,
            if round == 0 { "A" } else { "B" },
            if round == 0 { "B" } else { "A" },
            elapsed.as_secs_f64()
        );
    }
    for r in rs {
        r.stop_within(Duration::from_secs(1)).await;
    }
}

/// An OpenAI-style model that never answers.
async fn hanging_model() -> toolnexus_host_native::http_server::ServerHandle {
    bind(
        "127.0.0.1:0",
        DEFAULT_BODY_LIMIT,
        Arc::new(|_req: HttpRequest| {
            Box::pin(async move {
                std::future::pending::<()>().await;
                HttpResponse::json(200, Vec::new())
            })
        }),
    )
    .await
    .expect("bind the model stub")
}

struct Proc {
    child: tokio::process::Child,
    url: String,
}

async fn start_replica(db: &str, model: &str) -> Proc {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolnexus"))
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            db,
            "--llm",
            "openai",
            "--model",
            "m",
            "--llm-base-url",
            model,
            "--task-lease-seconds",
            "2",
            "--store-poll-ms",
            "200",
        ])
        .env("OPENAI_API_KEY", "k")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start toolnexus serve");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the replica started within 60 s")
        .expect("stdout")
        .expect("a line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("listening on http://…")
        .trim_end_matches('/')
        .to_string();
    // Keep reading its stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Proc { child, url }
}

async fn fail_over(db: &str, tasks: usize) {
    let model = hanging_model().await;
    let mut r = Vec::new();
    for _ in 0..3 {
        r.push(start_replica(db, &model.url).await);
    }
    let mut ids = Vec::new();
    for _ in 0..tasks {
        let v = rpc(&r[0].url, "message/send", send_params("hang"), None).await;
        ids.push(
            v["result"]["id"]
                .as_str()
                .expect("acknowledged")
                .to_string(),
        );
    }
    // Let A take them all (working, or submitted waiting for a place).
    tokio::time::sleep(Duration::from_millis(500)).await;
    r[0].child.start_kill().expect("kill -9");
    let _ = r[0].child.wait().await;
    let killed = Instant::now();
    let mut polls = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let (url, id) = (r[1 + i % 2].url.clone(), id.clone());
        polls.push(tokio::spawn(async move {
            let got = rpc(&url, "tasks/get", json!({"id": id}), Some(30)).await;
            (killed.elapsed(), got)
        }));
    }
    // New requests meanwhile, on the survivors.
    let mut fresh_ok = 0;
    for i in 0..20 {
        let v = rpc(&r[1 + i % 2].url, "message/send", send_params("hang"), None).await;
        if v["result"]["id"].is_string() {
            fresh_ok += 1;
        }
    }
    let (mut settled, mut lost, mut other) = (Vec::new(), 0, 0);
    for p in polls {
        let (after, got) = p.await.expect("poll");
        match state(&got) {
            "failed" => settled.push(after.as_secs_f64() * 1000.0),
            "" => lost += 1,
            _ => other += 1,
        }
    }
    settled.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let within = settled.iter().filter(|ms| **ms <= 4_000.0).count();
    println!(
        "fail-over: kill -9 of a replica with {tasks} tasks acknowledged (lease 2 s): {} settled \
         failed by survivors, {within} within lease + 2 s (p50 {:.0} ms, max {:.0} ms after the \
         kill), {lost} lost, {other} still unsettled; {fresh_ok}/20 new requests on the survivors \
         acknowledged meanwhile",
        settled.len(),
        settled.get(settled.len() / 2).copied().unwrap_or(f64::NAN),
        settled.last().copied().unwrap_or(f64::NAN),
    );
    for mut p in r {
        let _ = p.child.start_kill();
        let _ = p.child.wait().await;
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let races: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(1_000);
    let tasks: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    let cluster = pg::PgCluster::start();
    cancel_races(&cluster.database("races"), races).await;
    fail_over(&cluster.database("failover"), tasks).await;
}
