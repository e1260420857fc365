//! Several replicas of the server on one store, on virtual time: the store
//! contract (versions and compare-and-swap, leases, cancel as a stored
//! state, wake-ups on store changes) with no sockets and no sleeps.

use super::{lock, yield_once};
use crate::model::event::StreamEvent;
use crate::server::*;
use crate::testing::{TestLocks, VirtualTime};
use crate::BoxFuture;
use crate::HostBase;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// The cluster's clock: manual virtual time, moved by [`Cluster::run`] to
/// the next deadline anyone waits for once nothing else moves.
#[derive(Default)]
struct Clock {
    time: VirtualTime,
    deadlines: Mutex<BTreeSet<u64>>,
}

impl Clock {
    fn sleep_until(&self, at: u64) -> BoxFuture<'static, ()> {
        lock(&self.deadlines).insert(at);
        Box::pin(self.time.sleep_until(at))
    }
}

/// The store every replica shares, telling of each change (as NOTIFY does)
/// while `tell` is on.
struct Shared {
    inner: MemoryStore<TestLocks>,
    changes: Mutex<Vec<(String, u64)>>,
    tell: AtomicBool,
    /// Whether it keeps the event log (else subscribers compare versions).
    log: AtomicBool,
}

impl TaskStore for Arc<Shared> {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        self.inner.get(id)
    }
    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        let (this, task) = (self.clone(), task.clone());
        async move {
            // A save takes a moment, as a database's does: others run meanwhile.
            yield_once().await;
            this.inner.save_now(&task)?;
            if this.tell.load(Ordering::SeqCst) {
                lock(&this.changes).push((task.id.clone(), task.revision.version));
            }
            Ok(())
        }
    }
    fn save_with_events(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        let (this, task, events) = (self.clone(), task.clone(), events.to_vec());
        async move {
            yield_once().await;
            if this.log.load(Ordering::SeqCst) {
                this.inner.save_events_now(&task, &events)?;
            } else {
                this.inner.save_now(&task)?;
            }
            if this.tell.load(Ordering::SeqCst) {
                lock(&this.changes).push((task.id.clone(), task.revision.version));
            }
            Ok(())
        }
    }
    fn events_after(
        &self,
        id: &str,
        version: u64,
    ) -> impl Future<Output = Result<Option<Vec<LoggedEvent>>, StoreError>> + MaybeSend {
        let log = self
            .log
            .load(Ordering::SeqCst)
            .then(|| self.inner.events_after_now(id, version));
        async move {
            // A read takes a moment too: saves land meanwhile.
            yield_once().await;
            Ok(log)
        }
    }
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<Value>, StoreError>> + MaybeSend {
        self.inner.get_push_configs(task_id)
    }
    fn put_push_config(
        &self,
        task_id: &str,
        config: &Value,
        max: usize,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.inner.put_push_now(task_id, config, max)))
    }
    fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.inner.delete_push_now(task_id, id)))
    }
    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.inner.delete_finished_now(before_ms, limit)))
    }
    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>, StoreError>> + MaybeSend {
        let mut found = self.inner.list_now(&TaskFilter::default());
        found.retain(|t| {
            t.state.is_active()
                && t.revision
                    .lease
                    .as_ref()
                    .is_some_and(|l| l.until_ms < now_ms)
        });
        found.truncate(limit);
        std::future::ready(Ok(found))
    }
}

/// One replica's host: its own ids, jobs and hook calls, the shared clock.
struct Replica {
    name: &'static str,
    ids: AtomicU64,
    jobs: Mutex<Vec<BoxFuture<'static, ()>>>,
    events: Mutex<Vec<TaskEvent>>,
    /// The webhook requests it sent (each answered 204).
    sent: Mutex<Vec<HttpRequest>>,
    clock: Arc<Clock>,
}

impl crate::HostBase for Arc<Replica> {
    fn new_id(&self) -> String {
        format!(
            "{}-{}",
            self.name,
            self.ids.fetch_add(1, Ordering::SeqCst) + 1
        )
    }
    fn unix_ms(&self) -> Option<u64> {
        Some(1_764_547_200_000 + self.clock.time.now())
    }
    fn now_ms(&self) -> u64 {
        self.clock.time.now()
    }
}

impl ServerHost for Arc<Replica> {
    type Locks = TestLocks;
    fn on_task(&self, event: TaskEvent) {
        lock(&self.events).push(event);
    }
    fn sleep_until(&self, at: u64) -> Option<BoxFuture<'static, ()>> {
        Some(self.clock.sleep_until(at))
    }
    fn send(
        &self,
        req: HttpRequest,
    ) -> Option<BoxFuture<'static, Result<HttpResponse, crate::error::TransportError>>> {
        lock(&self.sent).push(req);
        Some(Box::pin(std::future::ready(Ok(HttpResponse {
            status: 204,
            headers: Vec::new(),
            body: Vec::new(),
        }))))
    }
}

/// "slow N": answers "done" at virtual time N ms; "chunks N": the answer
/// chunks "one" at N, "two" at N + 1000, and "tail" at N + 2000, its end;
/// "hang": never answers.
/// Counts the fulfilments that ended and those dropped unfinished (stopped).
struct Slow {
    clock: Arc<Clock>,
    answered: Arc<AtomicUsize>,
    stopped: Arc<AtomicUsize>,
}

struct CountDrop(Arc<AtomicUsize>, bool);
impl Drop for CountDrop {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Fulfiller for Slow {
    fn fulfil(
        &self,
        r: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        if r.text == "ask" {
            progress.input_required("which city?");
            return Box::pin(std::future::pending());
        }
        if let Some(at) = r
            .text
            .strip_prefix("chunks ")
            .and_then(|n| n.trim().parse::<u64>().ok())
        {
            let clock = self.clock.clone();
            return Box::pin(async move {
                clock.sleep_until(at).await;
                progress.artifact_chunk("one", false);
                clock.sleep_until(at + 1_000).await;
                progress.artifact_chunk("two", false);
                clock.sleep_until(at + 2_000).await;
                Ok("tail".to_string())
            });
        }
        if let Some(at) = r
            .text
            .strip_prefix("burst ")
            .and_then(|n| n.trim().parse::<u64>().ok())
        {
            // Three chunks at once (saved together), then one more later.
            let clock = self.clock.clone();
            return Box::pin(async move {
                clock.sleep_until(at).await;
                progress.artifact_chunk("one", false);
                progress.artifact_chunk("two", false);
                progress.artifact_chunk("three", false);
                clock.sleep_until(at + 1_000).await;
                progress.artifact_chunk("four", false);
                clock.sleep_until(at + 2_000).await;
                Ok("tail".to_string())
            });
        }
        let at = r
            .text
            .strip_prefix("slow ")
            .and_then(|n| n.trim().parse::<u64>().ok());
        let wait: BoxFuture<'static, ()> = match at {
            Some(at) => self.clock.sleep_until(at),
            None => Box::pin(std::future::pending()),
        };
        let (answered, stopped) = (self.answered.clone(), self.stopped.clone());
        Box::pin(async move {
            let mut guard = CountDrop(stopped, false);
            wait.await;
            guard.1 = true;
            answered.fetch_add(1, Ordering::SeqCst);
            Ok("done".to_string())
        })
    }
}

type Server = Arc<A2aServer<Arc<Shared>, Arc<Replica>, Slow>>;

struct Cluster {
    clock: Arc<Clock>,
    store: Arc<Shared>,
    hosts: Vec<Arc<Replica>>,
    servers: Vec<Server>,
    dead: Vec<bool>,
    answered: Arc<AtomicUsize>,
    stopped: Arc<AtomicUsize>,
}

const LEASE_MS: u64 = 30_000;
const RETENTION_MS: u64 = 3_600_000;

// On wasm32 the queued jobs are not Send, so neither is the host; that is fine there.
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn cluster(n: usize, poll: Option<u64>) -> Cluster {
    let clock = Arc::new(Clock {
        time: VirtualTime::manual(),
        ..Clock::default()
    });
    let store = Arc::new(Shared {
        inner: MemoryStore::default(),
        changes: Mutex::default(),
        tell: AtomicBool::new(true),
        log: AtomicBool::new(true),
    });
    let (answered, stopped) = (Arc::default(), Arc::default());
    let names = ["a", "b", "c"];
    let mut c = Cluster {
        clock: clock.clone(),
        store: store.clone(),
        hosts: Vec::new(),
        servers: Vec::new(),
        dead: vec![false; n],
        answered,
        stopped,
    };
    for name in names.into_iter().take(n) {
        let host = Arc::new(Replica {
            name,
            ids: AtomicU64::new(0),
            jobs: Mutex::default(),
            events: Mutex::default(),
            sent: Mutex::default(),
            clock: clock.clone(),
        });
        let options = ServerOptions {
            card: Some(super::card().into()),
            lease: Some(std::time::Duration::from_millis(LEASE_MS)),
            store_poll: poll.map(std::time::Duration::from_millis),
            push: Some(PushOptions {
                allow_private_webhooks: false,
            }),
            retention: Some(std::time::Duration::from_millis(RETENTION_MS)),
            ..Default::default()
        };
        let fulfiller = Slow {
            clock: clock.clone(),
            answered: c.answered.clone(),
            stopped: c.stopped.clone(),
        };
        c.servers.push(A2aServer::new(
            options,
            store.clone(),
            host.clone(),
            fulfiller,
        ));
        c.hosts.push(host);
    }
    c
}

impl Cluster {
    fn now(&self) -> u64 {
        self.clock.time.now()
    }

    /// One round: every live replica's jobs polled, the store's changes
    /// told to every live replica (their LISTEN).
    fn round(&self, cx: &mut Context<'_>) {
        for (i, host) in self.hosts.iter().enumerate() {
            if self.dead[i] {
                continue;
            }
            let mut jobs = std::mem::take(&mut *lock(&host.jobs));
            jobs.extend(self.servers[i].take_work());
            jobs.retain_mut(|j| j.as_mut().poll(cx).is_pending());
            lock(&host.jobs).extend(jobs);
        }
        let changes = std::mem::take(&mut *lock(&self.store.changes));
        for (id, version) in changes {
            for (i, server) in self.servers.iter().enumerate() {
                if !self.dead[i] {
                    server.store_changed(&id, Some(version));
                }
            }
        }
    }

    /// Runs `fut` with every live replica until it is done; when nothing
    /// moves, the clock jumps to the next deadline. Bounded.
    fn run<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..2_000 {
            for _ in 0..50 {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                    return v;
                }
                self.round(&mut cx);
            }
            self.advance();
        }
        panic!("the future did not finish by virtual time {}", self.now())
    }

    /// Moves the clock to the next deadline after now.
    fn advance(&self) {
        let now = self.now();
        let next = {
            let mut d = lock(&self.clock.deadlines);
            d.retain(|&t| t > now);
            d.iter().next().copied()
        };
        if let Some(t) = next {
            self.clock.time.advance_to(t);
        }
    }

    /// Lets everything run until virtual time `at`.
    fn run_until(&self, at: u64) {
        lock(&self.clock.deadlines).insert(at);
        let time = self.clock.time.clone();
        self.run(std::future::poll_fn(move |_| {
            if time.now() >= at {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }));
        // What became ready at `at` runs too.
        self.settle();
    }

    fn settle(&self) {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..200 {
            self.round(&mut cx);
        }
    }

    fn request(i: usize, method: &str, params: Value, wait: Option<u64>) -> HttpRequest {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut req = HttpRequest::post_json("/", body.to_string().into_bytes());
        if let Some(s) = wait {
            req = req.with_header("Prefer", format!("wait={s}"));
        }
        let _ = i;
        req
    }

    fn rpc(&self, i: usize, method: &str, params: Value) -> Value {
        let req = Self::request(i, method, params, None);
        let server = self.servers[i].clone();
        let resp = self.run(async move { server.handle(req).await });
        serde_json::from_slice(&resp.body).expect("JSON")
    }

    /// A non-blocking SendMessage on replica `i`; the new task's id.
    fn send(&self, i: usize, text: &str) -> String {
        let v = self.rpc(
            i,
            "message/send",
            json!({"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": text}]},
                   "configuration": {"blocking": false}}),
        );
        v["result"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {v}"))
            .to_string()
    }

    fn stored(&self, id: &str) -> Task {
        self.store.inner.get_now(id).expect("stored")
    }

    fn hooks(&self, id: &str) -> usize {
        self.hosts
            .iter()
            .map(|h| lock(&h.events).iter().filter(|e| e.id == id).count())
            .sum()
    }

    /// Replica `i` dies (kill -9): its jobs vanish, it hears and answers nothing.
    fn kill(&mut self, i: usize) {
        self.dead[i] = true;
        // Dropped without running: the store keeps what was saved.
        std::mem::forget(std::mem::take(&mut *lock(&self.hosts[i].jobs)));
        std::mem::forget(self.servers[i].take_work());
    }
}

/// A GetTask long-poll on replica B returns as soon as the task settles on
/// A (told by the store), not when its wait ends.
#[test]
fn a_long_poll_on_one_replica_wakes_when_the_task_settles_on_another() {
    let c = cluster(2, None);
    let id = c.send(0, "slow 5000");
    let req = Cluster::request(1, "tasks/get", json!({"id": id}), Some(30));
    let b = c.servers[1].clone();
    let resp = c.run(async move { b.handle(req).await });
    let v: Value = serde_json::from_slice(&resp.body).expect("JSON");
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    assert_eq!(
        c.now(),
        5_000,
        "answered when the task settled, not after the 30 s wait"
    );
    assert_eq!(c.hooks(&id), 1);
}

/// Without notifications (a pooling proxy ate them), the long-poll reads
/// the store at each `store_poll` and still answers within one interval.
#[test]
fn without_notifications_a_long_poll_falls_back_to_polling_the_store() {
    let c = cluster(2, Some(1_000));
    c.store.tell.store(false, Ordering::SeqCst);
    let id = c.send(0, "slow 5500");
    let req = Cluster::request(1, "tasks/get", json!({"id": id}), Some(30));
    let b = c.servers[1].clone();
    let resp = c.run(async move { b.handle(req).await });
    let v: Value = serde_json::from_slice(&resp.body).expect("JSON");
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    assert!(
        (5_500..=6_500).contains(&c.now()),
        "answered at the first poll after it settled: {}",
        c.now()
    );
}

/// CancelTask on B for a task A runs: B stores `canceled` over the version
/// it read; A hears of it, stops the fulfilment, and its later outcome
/// never overwrites it. The hook runs once, on B.
#[test]
fn a_cancel_on_one_replica_stops_the_fulfilment_on_another() {
    let c = cluster(2, None);
    let id = c.send(0, "slow 5000");
    c.run_until(1_000);
    let v = c.rpc(1, "tasks/cancel", json!({"id": id}));
    assert_eq!(v["result"]["status"]["state"], "canceled", "{v}");
    c.run_until(10_000);
    assert_eq!(c.stored(&id).state, TaskState::Canceled);
    assert_eq!(
        c.answered.load(Ordering::SeqCst),
        0,
        "A's fulfilment stopped"
    );
    assert_eq!(c.stopped.load(Ordering::SeqCst), 1);
    assert_eq!(c.hooks(&id), 1, "the hook ran once");
    assert!(lock(&c.hosts[0].jobs).is_empty(), "A's job ended");
}

/// Cancels racing the outcome across replicas, at every step of the
/// race: the answer and the store always agree, no task stays running,
/// and the hook runs exactly once per task.
#[test]
fn cancel_races_across_replicas_overwrite_nothing_and_leave_nothing_stuck() {
    let c = cluster(3, None);
    let (mut canceled, mut refused) = (0, 0);
    for k in 0..60u64 {
        let at = c.now() + 1_000;
        let id = c.send((k % 3) as usize, &format!("slow {at}"));
        // The answer is due now; the cancel starts after a different
        // number of steps of the replicas each time.
        c.run_until(at - 1);
        c.clock.time.advance_to(at);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..(k % 8) {
            c.round(&mut cx);
        }
        let server = c.servers[((k + 1) % 3) as usize].clone();
        let req = Cluster::request(0, "tasks/cancel", json!({"id": id}), None);
        let resp = c.run(async move { server.handle(req).await });
        c.run_until(c.now() + 100);
        let v: Value = serde_json::from_slice(&resp.body).expect("JSON");
        let stored = c.stored(&id);
        if v["result"]["status"]["state"] == "canceled" {
            canceled += 1;
            assert_eq!(stored.state, TaskState::Canceled, "overwritten: {v}");
        } else {
            refused += 1;
            assert_eq!(v["error"]["code"], -32002, "{v}");
            assert_eq!(stored.state, TaskState::Completed);
        }
        assert_eq!(c.hooks(&id), 1, "task {id}: the hook once");
        for s in &c.servers {
            assert!(!s.tasks().is_running(&id), "task {id} stuck");
        }
    }
    assert!(
        canceled > 0 && refused > 0,
        "{canceled} canceled, {refused} refused"
    );
}

/// A replica dies with a task working: its lease is not renewed, and once
/// it runs out a survivor fails the task as interrupted. Before that, the
/// task is left alone.
#[test]
fn a_dead_replicas_tasks_are_failed_by_a_survivor_once_their_lease_runs_out() {
    let mut c = cluster(2, Some(1_000));
    let id = c.send(0, "hang");
    c.run_until(1_000);
    c.kill(0);
    c.run_until(LEASE_MS - 1_000);
    let b = c.servers[1].clone();
    assert_eq!(
        c.run(b.recover_expired()),
        Ok(vec![]),
        "the lease still holds"
    );
    let v = c.rpc(1, "tasks/get", json!({"id": id}));
    assert_eq!(v["result"]["status"]["state"], "working", "{v}");
    c.run_until(LEASE_MS + 1_001);
    let b = c.servers[1].clone();
    assert_eq!(c.run(b.recover_expired()), Ok(vec![id.clone()]));
    let stored = c.stored(&id);
    assert_eq!(stored.state, TaskState::Failed);
    assert_eq!(stored.status_text().as_deref(), Some(INTERRUPTED));
    assert!(stored.revision.lease.is_none());
    // A new request on the survivor works.
    let other = c.send(1, "slow 40000");
    c.run_until(40_100);
    assert_eq!(c.stored(&other).state, TaskState::Completed);
}

/// A live replica renews its tasks' leases: however long a task runs, no
/// other replica fails it.
#[test]
fn a_live_replica_renews_its_leases_and_nobody_fails_its_tasks() {
    let c = cluster(2, Some(1_000));
    let id = c.send(0, "slow 200000");
    for at in (10_000..200_000).step_by(20_000) {
        c.run_until(at);
        let b = c.servers[1].clone();
        assert_eq!(c.run(b.recover_expired()), Ok(vec![]), "at {at}");
        let lease = c.stored(&id).revision.lease.expect("leased");
        assert!(lease.until_ms > c.hosts[0].unix_ms().unwrap(), "renewed");
        assert_eq!(lease.holder, c.servers[0].tasks().lease_holder());
    }
    c.run_until(200_100);
    let stored = c.stored(&id);
    assert_eq!(stored.state, TaskState::Completed);
    assert!(
        stored.revision.lease.is_none(),
        "a settled task holds no lease"
    );
    assert_eq!(c.hooks(&id), 1);
}

/// Two saves over the same version: the store takes one, the other is a
/// typed conflict and changes nothing.
#[test]
fn a_save_over_a_stale_version_is_a_conflict() {
    let store = MemoryStore::<TestLocks>::default();
    let mut t = Task {
        id: "t".into(),
        context_id: "c".into(),
        state: TaskState::Working,
        status_message: None,
        updated_ms: None,
        artifacts: vec![],
        history: vec![],
        dialect: crate::model::task::Shape::V03,
        owner: None,
        trace: None,
        revision: Default::default(),
    };
    t.revision.version = 1;
    store.save_now(&t).expect("first");
    let mut canceled = t.clone();
    canceled.state = TaskState::Canceled;
    canceled.revision.version = 2;
    store.save_now(&canceled).expect("over version 1");
    let mut completed = t.clone();
    completed.state = TaskState::Completed;
    completed.revision.version = 2;
    let e = store.save_now(&completed).expect_err("stale");
    assert!(e.is_conflict(), "{e}");
    assert_eq!(
        store.get_now("t").map(|t| t.state),
        Some(TaskState::Canceled)
    );
    assert!(!StoreError::new("disk full").is_conflict());
}

/// SubscribeToTask on B for a task running on A follows it through the
/// store: the task as stored, then each later change once, to the end.
#[test]
fn a_subscription_on_another_replica_follows_the_task_to_its_end() {
    let c = cluster(2, None);
    let id = c.send(0, "chunks 1000");
    c.run_until(1_500);
    let req = Cluster::request(1, "tasks/resubscribe", json!({"id": id}), None);
    let b = c.servers[1].clone();
    let reply = c.run(async move { b.serve(req).await });
    let Reply::Stream { mut body, .. } = reply else {
        panic!("not a stream: {reply:?}");
    };
    let frames: Vec<Vec<u8>> = c.run(async move {
        use futures_util::StreamExt;
        let mut frames = Vec::new();
        while let Some(f) = body.next().await {
            frames.push(f);
        }
        frames
    });
    let events: Vec<Value> = frames
        .iter()
        .filter_map(|f| {
            let text = String::from_utf8_lossy(f);
            let data = text.lines().find_map(|l| l.strip_prefix("data:"))?;
            serde_json::from_str::<Value>(data.trim()).ok()
        })
        .map(|v| v["result"].clone())
        .collect();
    assert_eq!(events[0]["kind"], "task", "{events:?}");
    let mut text: Vec<String> = events[0]["artifacts"][0]["parts"]
        .as_array()
        .map(|p| {
            p.iter()
                .map(|p| p["text"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    for e in &events[1..] {
        if e["kind"] == "artifact-update" {
            assert_eq!(e["append"], true, "{e}");
            for p in e["artifact"]["parts"].as_array().expect("parts") {
                text.push(p["text"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    assert_eq!(
        text,
        ["one", "two", "tail"],
        "none lost, none twice: {events:?}"
    );
    let last = events.last().expect("events");
    assert_eq!(last["status"]["state"], "completed", "{events:?}");
    assert_eq!(c.stored(&id).state, TaskState::Completed);
}

/// An input-required task answered on two replicas at once: the store
/// takes one continuation (compare and swap on the version read), the
/// other is refused; the task runs once more, and ends once.
#[test]
fn two_answers_racing_on_two_replicas_one_wins() {
    let c = cluster(2, None);
    let id = c.send(0, "ask");
    c.run_until(100);
    assert_eq!(c.stored(&id).state, TaskState::InputRequired);
    let answer = |i: usize, text: &str| {
        let params = json!({"message": {"role": "user", "messageId": format!("a{i}"), "taskId": id,
            "parts": [{"kind": "text", "text": text}]}, "configuration": {"blocking": false}});
        let req = Cluster::request(i, "message/send", params, None);
        let server = c.servers[i].clone();
        async move { server.handle(req).await }
    };
    let (a, b) = c.run(futures_util::future::join(
        answer(0, "slow 1000"),
        answer(1, "slow 1000"),
    ));
    let (a, b): (Value, Value) = (
        serde_json::from_slice(&a.body).expect("JSON"),
        serde_json::from_slice(&b.body).expect("JSON"),
    );
    let won = [&a, &b]
        .iter()
        .filter(|v| v["result"]["id"] == json!(id))
        .count();
    assert_eq!(won, 1, "exactly one answer continues the task: {a} {b}");
    let lost = if a["error"].is_object() { &a } else { &b };
    assert_eq!(lost["error"]["code"], -32004, "{lost}");
    c.run_until(2_000);
    assert_eq!(c.stored(&id).state, TaskState::Completed);
    assert_eq!(c.answered.load(Ordering::SeqCst), 1, "fulfilled once");
    assert_eq!(c.hooks(&id), 1);
}

/// The webhook states replica `i` sent for task `id` to `url`.
fn deliveries(c: &Cluster, i: usize, url: &str, id: &str) -> Vec<String> {
    lock(&c.hosts[i].sent)
        .iter()
        .filter(|r| r.url == url)
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|v| v["id"] == id)
        .map(|v| {
            v["status"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Push configs are read through the store, never cached per replica: a
/// webhook set through B is used by A's deliveries, one deleted through A
/// gets nothing more from B, and the store holds one record per config,
/// with its task's owner.
#[test]
fn webhooks_set_or_deleted_on_one_replica_count_on_the_others() {
    let c = cluster(2, None);
    let (one, two) = ("https://hooks.example.com/1", "https://hooks.example.com/2");
    let set = |i: usize, id: &str, hook: &str, url: &str| {
        let v = c.rpc(
            i,
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"id": hook, "url": url}}),
        );
        assert_eq!(v["result"]["pushNotificationConfig"]["id"], hook, "{v}");
    };
    let on_a = c.send(0, "slow 5000");
    c.run_until(1_000);
    set(1, &on_a, "h1", one);
    c.run_until(6_000);
    assert_eq!(
        deliveries(&c, 0, one, &on_a),
        ["completed"],
        "A used B's webhook"
    );
    assert!(lock(&c.hosts[1].sent).is_empty(), "B runs nothing");

    let on_b = c.send(1, "slow 10000");
    c.run_until(7_000);
    set(0, &on_b, "h1", one);
    set(1, &on_b, "h2", two);
    let v = c.rpc(1, "tasks/pushNotificationConfig/list", json!({"id": on_b}));
    assert_eq!(v["result"].as_array().map(Vec::len), Some(2), "{v}");
    let v = c.rpc(
        0,
        "tasks/pushNotificationConfig/delete",
        json!({"id": on_b, "pushNotificationConfigId": "h1"}),
    );
    assert!(v.get("error").is_none(), "{v}");
    c.run_until(11_000);
    assert_eq!(deliveries(&c, 1, two, &on_b), ["completed"]);
    assert!(
        deliveries(&c, 1, one, &on_b).is_empty(),
        "B delivered to a webhook deleted through A"
    );
    let stored = c.store.inner.get_push_configs_now(&on_b);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["id"], "h2");
}

/// Finished tasks older than the retention are deleted by a sweep (on any
/// replica), with their webhooks; running and recent ones stay.
#[test]
fn a_sweep_deletes_finished_tasks_past_their_retention_only() {
    let c = cluster(2, None);
    let done = c.send(0, "slow 1000");
    let running = c.send(1, "hang");
    c.run_until(2_000);
    assert_eq!(c.stored(&done).state, TaskState::Completed);
    let v = c.rpc(
        0,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": done, "pushNotificationConfig": {"id": "h", "url": "https://hooks.example.com/x"}}),
    );
    assert!(v.get("error").is_none(), "{v}");
    let b = c.servers[1].clone();
    assert_eq!(c.run(async move { b.sweep().await }), Ok(0), "not old yet");
    // An hour after it settled (at 1 s), and the renewals of the running
    // task's lease go on meanwhile.
    c.run_until(1_000 + RETENTION_MS + 1);
    let b = c.servers[1].clone();
    assert_eq!(c.run(async move { b.sweep().await }), Ok(1));
    assert!(c.store.inner.get_now(&done).is_none());
    assert!(c.store.inner.get_push_configs_now(&done).is_empty());
    assert_eq!(c.stored(&running).state, TaskState::Working);
    let v = c.rpc(0, "tasks/get", json!({"id": done}));
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let a = c.servers[0].clone();
    assert_eq!(c.run(async move { a.sweep().await }), Ok(0), "deleted once");
}

/// The events a stream's frames carry (`result` of each `data:` line).
fn frame_events(frames: &[Vec<u8>]) -> Vec<Value> {
    frames
        .iter()
        .filter_map(|f| {
            let text = String::from_utf8_lossy(f);
            let data = text.lines().find_map(|l| l.strip_prefix("data:"))?;
            serde_json::from_str::<Value>(data.trim()).ok()
        })
        .map(|v| v["result"].clone())
        .collect()
}

/// Each chunk's text, in order, of the artifact-update events.
fn chunk_texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .flat_map(|e| {
            e["artifact"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|p| p["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Chunks published together are saved together, yet a subscriber on
/// another replica hears each one as its own event, once, from the log.
#[test]
fn a_subscription_on_another_replica_replays_every_chunk_from_the_log() {
    let c = cluster(2, None);
    let id = c.send(0, "burst 1000");
    // Subscribed before any chunk: every one comes through the follow.
    let req = Cluster::request(1, "tasks/resubscribe", json!({"id": id}), None);
    let b = c.servers[1].clone();
    let reply = c.run(async move { b.serve(req).await });
    let Reply::Stream { mut body, .. } = reply else {
        panic!("not a stream: {reply:?}");
    };
    let frames: Vec<Vec<u8>> = c.run(async move {
        use futures_util::StreamExt;
        let mut frames = Vec::new();
        while let Some(f) = body.next().await {
            frames.push(f);
        }
        frames
    });
    let events = frame_events(&frames);
    assert_eq!(events[0]["kind"], "task", "{events:?}");
    assert!(
        events[0]["artifacts"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "subscribed before the first chunk: {events:?}"
    );
    let chunks: Vec<&Value> = events[1..]
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .collect();
    assert_eq!(
        chunks.len(),
        5,
        "one event per chunk, as published: {events:?}"
    );
    assert_eq!(
        chunk_texts(&events[1..]),
        ["one", "two", "three", "four", "tail"],
        "none lost, none twice: {events:?}"
    );
    let states: Vec<&str> = events[1..]
        .iter()
        .filter_map(|e| e["status"]["state"].as_str())
        .collect();
    assert_eq!(states, ["working", "completed"], "{events:?}");
    assert_eq!(events.last().unwrap()["status"]["state"], "completed");
    // What the log holds is what was told: the logged chunks are the same.
    let logged = c.store.inner.events_after_now(&id, 0);
    assert_eq!(logged.len(), events.len() - 1, "{logged:?}");
    let versions: Vec<u64> = logged.iter().map(|(v, _)| *v).collect();
    assert!(
        versions.windows(2).all(|w| w[0] <= w[1]),
        "logged in version order: {versions:?}"
    );
    assert_eq!(
        versions.last().copied(),
        Some(c.stored(&id).revision.version),
        "the terminal event is logged with the terminal version"
    );
}

/// A follower that starts from a snapshot read before later saves landed
/// (the gap between SubscribeToTask's read and its follow) replays those
/// saves' events from the log: nothing in the gap is lost, nothing twice.
#[test]
fn events_written_between_the_snapshot_and_the_follow_are_replayed_once() {
    let c = cluster(2, None);
    let id = c.send(0, "burst 1000");
    c.run_until(500);
    let snapshot = c.stored(&id);
    assert_eq!(snapshot.state, TaskState::Working);
    // The burst and the fourth chunk land before the follow starts.
    c.run_until(2_500);
    assert!(c.stored(&id).revision.version > snapshot.revision.version);
    let follow = c.servers[1].follow_stored(snapshot.clone());
    let told: Vec<StreamEvent> = c.run(async move {
        use futures_util::StreamExt;
        follow.collect::<Vec<_>>().await
    });
    let values: Vec<Value> = told
        .iter()
        .map(|e| serde_json::to_value(e.shaped(crate::model::task::Shape::V03)).unwrap())
        .collect();
    assert_eq!(
        chunk_texts(&values),
        ["one", "two", "three", "four", "tail"],
        "{values:?}"
    );
    assert_eq!(
        told.iter().filter(|e| e.state().is_some()).count(),
        1,
        "working was in the snapshot; only the terminal state follows: {values:?}"
    );
    assert_eq!(
        told.last().and_then(StreamEvent::state),
        Some(TaskState::Completed)
    );
}

/// Without a log the follow compares versions: still every chunk's text,
/// once, but chunks saved together arrive as one event.
#[test]
fn a_store_without_a_log_is_followed_by_comparing_versions() {
    let c = cluster(2, None);
    c.store.log.store(false, Ordering::SeqCst);
    let id = c.send(0, "burst 1000");
    c.run_until(500);
    let snapshot = c.stored(&id);
    let follow = c.servers[1].follow_stored(snapshot);
    let told: Vec<StreamEvent> = c.run(async move {
        use futures_util::StreamExt;
        follow.collect::<Vec<_>>().await
    });
    let values: Vec<Value> = told
        .iter()
        .map(|e| serde_json::to_value(e.shaped(crate::model::task::Shape::V03)).unwrap())
        .collect();
    assert_eq!(
        chunk_texts(&values),
        ["one", "two", "three", "four", "tail"],
        "{values:?}"
    );
    let chunks = values
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .count();
    assert!(
        chunks < 5,
        "the burst was saved as one version, so it is told as one event: {values:?}"
    );
    assert_eq!(
        told.last().and_then(StreamEvent::state),
        Some(TaskState::Completed)
    );
}

/// A canceled task's log ends with the canceled state, written by the
/// replica that stored it; the sweep deletes the log with the task.
#[test]
fn a_cancel_elsewhere_is_logged_and_the_sweep_deletes_the_log() {
    let c = cluster(2, None);
    let id = c.send(0, "slow 100000");
    c.run_until(500);
    let v = c.rpc(1, "tasks/cancel", json!({"id": id}));
    assert_eq!(v["result"]["status"]["state"], "canceled", "{v}");
    c.settle();
    let logged = c.store.inner.events_after_now(&id, 0);
    let states: Vec<TaskState> = logged.iter().filter_map(|(_, e)| e.state()).collect();
    assert_eq!(
        states.iter().filter(|s| **s == TaskState::Canceled).count(),
        1,
        "{logged:?}"
    );
    assert_eq!(states.last(), Some(&TaskState::Canceled), "{logged:?}");
    c.run_until(c.now() + RETENTION_MS + 1_000);
    let server = c.servers[0].clone();
    assert_eq!(c.run(async move { server.sweep().await }), Ok(1));
    assert!(c.store.inner.get_now(&id).is_none(), "swept");
    assert!(
        c.store.inner.events_after_now(&id, 0).is_empty(),
        "the log went with its task"
    );
}
