//! Several replicas on PostgreSQL (issue 19): how soon a GetTask long-poll
//! on replica B returns after the task settles on replica A, and GetTask /
//! SendMessage throughput on PostgreSQL against the memory and file stores.
//!
//! `cargo bench -p toolnexus-host-native --bench replicas [-- SAMPLES [SECONDS]]`
//!
//! Starts its own throw-away PostgreSQL 15 (as the tests do:
//! `tests/common/pg.rs`) and three in-process replicas of `serve` on it.
//! Wake-up: A's fulfilment is held until B's long-poll waits, then let go;
//! latency = when B's answer arrives − when A's store took the terminal
//! state (the `on_state` hook, after the save). Throughput: 32 concurrent
//! callers for SECONDS (default 3) per line, spread over the replicas.
//!
//! With `TOOLNEXUS_BENCH_PY` naming a Python that has `a2a-sdk[http-server,postgresql]`
//! (e.g. `python3 -m venv /tmp/pg && /tmp/pg/bin/pip install
//! 'a2a-sdk[http-server,postgresql]==1.3.0' uvicorn`), the same two lines are
//! measured against the official Python SDK server (`tests/peers/py_server.py
//! --compat-03 --db-url …`: its `DatabaseTaskStore` on the same PostgreSQL), 1 and
//! 3 uvicorn processes. The pinned test venv lacks SQLAlchemy and asyncpg.

#[path = "../tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use toolnexus_core::server::{FulfilRequest, Fulfiller, Progress};
use toolnexus_core::{BoxFuture, HttpRequest, Transport};
use toolnexus_host_native::serve::ServeHandle;
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

/// Holds each task until its gate (named by the task text) is opened.
#[derive(Clone, Default)]
struct Gates(Arc<Mutex<HashMap<String, Arc<Notify>>>>);

impl Gates {
    fn gate(&self, name: &str) -> Arc<Notify> {
        self.0
            .lock()
            .unwrap()
            .entry(name.to_string())
            .or_default()
            .clone()
    }
}

impl Fulfiller for Gates {
    fn fulfil(&self, r: FulfilRequest, _: Progress) -> BoxFuture<'static, Result<String, String>> {
        let gate = self.gate(&r.text);
        Box::pin(async move {
            gate.notified().await;
            Ok("done".into())
        })
    }
}

type Settled = Arc<Mutex<HashMap<String, Instant>>>;

async fn replica(store: StoreConfig, model: Model, settled: Settled, poll_ms: u64) -> ServeHandle {
    let mut options = ServeOptions::new(Arc::new(Toolkit::new(NativeTransport::shared())), model);
    options.store = store;
    options.store_poll = Duration::from_millis(poll_ms);
    options.on_state = Some(Arc::new(move |task: &toolnexus_core::Task| {
        if task.state.is_terminal() {
            settled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(task.id.clone(), Instant::now());
        }
    }));
    serve("127.0.0.1:0", options).await.expect("serve")
}

async fn rpc(url: &str, method: &str, params: Value, wait: Option<u64>) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
    if let Some(s) = wait {
        req = req.with_header("Prefer", format!("wait={s}"));
    }
    let resp = NativeTransport::shared().send(req).await.expect("answer");
    serde_json::from_slice(&resp.body).unwrap_or(Value::Null)
}

fn send_params(text: &str) -> Value {
    json!({"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": text}]},
           "configuration": {"blocking": false}})
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Wake-up latency samples (ms) across replicas `a` → `b`.
async fn wake_ups(a: &str, b: &str, gates: &Gates, settled: &Settled, samples: usize) -> Vec<f64> {
    let mut lat = Vec::new();
    for i in 0..samples {
        let name = format!("gate {i} {}", free_port());
        let v = rpc(a, "message/send", send_params(&name), None).await;
        let id = v["result"]["id"].as_str().expect("task").to_string();
        let b = b.to_string();
        let poll_id = id.clone();
        let polled = tokio::spawn(async move {
            let v = rpc(&b, "tasks/get", json!({"id": poll_id}), Some(30)).await;
            (Instant::now(), v)
        });
        // Let the long-poll reach B and wait.
        tokio::time::sleep(Duration::from_millis(30)).await;
        gates.gate(&name).notify_one();
        let (answered, v) = polled.await.expect("poll");
        assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
        // A's hook runs after its save returns; B may have answered first
        // (NOTIFY goes out at commit): wait for it, and count that as 0.
        let mut at = None;
        for _ in 0..1000 {
            at = settled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&id)
                .copied();
            if at.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let at = at.expect("A stored the terminal state");
        lat.push(answered.saturating_duration_since(at).as_secs_f64() * 1000.0);
    }
    lat.sort_by(|x, y| x.partial_cmp(y).unwrap());
    lat
}

/// Requests per second: `callers` loops for `secs`.
async fn throughput(
    secs: u64,
    callers: usize,
    call: impl Fn() -> BoxFuture<'static, bool> + Send + Sync + 'static,
) -> f64 {
    let call = Arc::new(call);
    let stop = Instant::now() + Duration::from_secs(secs);
    let mut loops = Vec::new();
    for _ in 0..callers {
        let call = call.clone();
        loops.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < stop {
                if call().await {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut total = 0;
    for l in loops {
        total += l.await.unwrap_or(0);
    }
    total as f64 / secs as f64
}

async fn rates(label: &str, urls: Vec<String>, secs: u64) {
    rates_sending(label, urls, secs, "hi").await
}

/// [`rates`] with `text` as the sent message (the Python peer completes
/// "sleep 0" at once, as the echo model does).
async fn rates_sending(label: &str, urls: Vec<String>, secs: u64, text: &'static str) {
    let id = rpc(&urls[0], "message/send", send_params(text), None).await["result"]["id"]
        .as_str()
        .expect("task")
        .to_string();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let pick = {
        let (urls, next) = (urls.clone(), next.clone());
        move || urls[next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % urls.len()].clone()
    };
    let p = pick.clone();
    let get = throughput(secs, 32, move || {
        let (u, id) = (p(), id.clone());
        Box::pin(async move {
            rpc(&u, "tasks/get", json!({"id": id}), None).await["result"].is_object()
        })
    })
    .await;
    let send = throughput(secs, 32, move || {
        let u = pick();
        Box::pin(async move {
            rpc(&u, "message/send", send_params(text), None).await["result"].is_object()
        })
    })
    .await;
    println!(
        "{label:<34} GetTask {get:>8.0} req/s   SendMessage (non-blocking, echo) {send:>7.0} req/s"
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let samples: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(200);
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let cluster = pg::PgCluster::start();

    // Wake-ups across replicas: NOTIFY, then polling alone.
    let gates = Gates::default();
    let settled: Settled = Arc::default();
    let url = cluster.database("wake");
    let mut rs = Vec::new();
    for _ in 0..3 {
        rs.push(
            replica(
                StoreConfig::Postgres(url.clone()),
                Model::Custom(Arc::new(gates.clone())),
                settled.clone(),
                1000,
            )
            .await,
        );
    }
    let lat = wake_ups(&rs[0].url, &rs[1].url, &gates, &settled, samples).await;
    println!(
        "cross-replica wake-up, LISTEN/NOTIFY ({} samples): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(f64::NAN)
    );
    for r in rs.drain(..) {
        r.stop_within(Duration::from_secs(1)).await;
    }

    // Throughput on one replica: memory, file, PostgreSQL (1 and 3 replicas).
    let none: Settled = Arc::default();
    let memory = replica(StoreConfig::default(), Model::Echo, none.clone(), 1000).await;
    rates("memory store, 1 process", vec![memory.url.clone()], secs).await;
    memory.stop_within(Duration::from_secs(1)).await;
    let dir = std::env::temp_dir().join(format!("toolnexus-bench-replicas-{}", std::process::id()));
    let file = replica(
        StoreConfig::File(dir.clone()),
        Model::Echo,
        none.clone(),
        1000,
    )
    .await;
    rates("file store, 1 process", vec![file.url.clone()], secs).await;
    file.stop_within(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
    let url = cluster.database("rates");
    let one = replica(
        StoreConfig::Postgres(url.clone()),
        Model::Echo,
        none.clone(),
        1000,
    )
    .await;
    rates("PostgreSQL, 1 replica", vec![one.url.clone()], secs).await;
    let mut three = vec![one];
    for _ in 0..2 {
        three.push(
            replica(
                StoreConfig::Postgres(url.clone()),
                Model::Echo,
                none.clone(),
                1000,
            )
            .await,
        );
    }
    rates(
        "PostgreSQL, 3 replicas",
        three.iter().map(|r| r.url.clone()).collect(),
        secs,
    )
    .await;
    for r in three {
        r.stop_within(Duration::from_secs(1)).await;
    }

    match std::env::var("TOOLNEXUS_BENCH_PY") {
        Ok(py) if !py.is_empty() => python_sdk(&py, &cluster, secs).await,
        _ => println!(
            "official Python SDK DatabaseTaskStore: not run (set TOOLNEXUS_BENCH_PY, see the header)"
        ),
    }
}

/// An official Python SDK server with its `DatabaseTaskStore` on `db_url`;
/// returns once it listens.
fn python_replica(py: &str, db_url: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let port = free_port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/peers/py_server.py");
    let mut child = std::process::Command::new(py)
        .args([
            script,
            "--port",
            &port.to_string(),
            "--compat-03",
            "--db-url",
            db_url,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the Python SDK server");
    let mut line = String::new();
    let out = child.stdout.take().expect("stdout");
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("its first line");
    assert!(
        line.starts_with("listening on"),
        "the Python SDK server said {line:?}"
    );
    (child, format!("http://127.0.0.1:{port}"))
}

async fn python_sdk(py: &str, cluster: &pg::PgCluster, secs: u64) {
    let url = cluster
        .database("pysdk")
        .replacen("postgres://", "postgresql+asyncpg://", 1);
    let mut procs = vec![python_replica(py, &url)];
    rates_sending(
        "Python SDK DB store, 1 process",
        vec![procs[0].1.clone()],
        secs,
        "sleep 0",
    )
    .await;
    for _ in 0..2 {
        procs.push(python_replica(py, &url));
    }
    rates_sending(
        "Python SDK DB store, 3 processes",
        procs.iter().map(|p| p.1.clone()).collect(),
        secs,
        "sleep 0",
    )
    .await;
    for (mut child, _) in procs {
        let _ = child.kill();
        let _ = child.wait();
    }
}
