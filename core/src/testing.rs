//! The one test harness of core: [`VirtualTime`] (a clock that only moves
//! when something waits), [`block_on`] / [`run_with_jobs`] (the executor),
//! and [`ScriptedPeer`], an in-memory A2A peer on that clock. No sockets, no
//! real sleeping; the same tests run natively and on wasm32. Enabled in
//! this crate's tests and by the `testing` feature.

use crate::error::TransportError;
use crate::host::transport::{MaybeSend, StreamingResponse, Transport};
use crate::wire::http::{HttpRequest, HttpResponse};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Virtual milliseconds for tests.
///
/// *Jumping* time (the default, as peers and model endpoints use it): when
/// a sleep is polled, the clock moves to the earliest instant something is
/// due ([`VirtualTime::due_at`]: an answer in flight, an abort), or to the
/// sleep's end — so a slow answer loses the race against a deadline exactly
/// as it would on a real network, in no real time.
///
/// *Manual* time ([`VirtualTime::manual`], for server hosts whose timers a
/// test fires): sleeps wait until the test moves the clock ([`VirtualTime::advance_to`]).
#[derive(Clone, Default)]
pub struct VirtualTime(Arc<Clock>);

#[derive(Default)]
struct Clock {
    now: AtomicU64,
    due: Mutex<Vec<u64>>,
    manual: bool,
}

impl VirtualTime {
    /// Jumping time, starting at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Manual time, starting at 0: only [`VirtualTime::advance_to`] moves it.
    pub fn manual() -> Self {
        VirtualTime(Arc::new(Clock {
            manual: true,
            ..Clock::default()
        }))
    }

    /// The time now.
    pub fn now(&self) -> u64 {
        self.0.now.load(Ordering::SeqCst)
    }

    /// Moves the clock forward to `at_ms` (never back).
    pub fn advance_to(&self, at_ms: u64) {
        self.0.now.fetch_max(at_ms, Ordering::SeqCst);
    }

    /// Something happens at `at_ms`: a jumping sleep stops there first.
    pub fn due_at(&self, at_ms: u64) {
        self.0.due.lock().expect("due lock").push(at_ms);
    }

    /// Completes once the clock reaches `at_ms`; polling it moves jumping time.
    pub fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + MaybeSend + 'static {
        let time = self.clone();
        std::future::poll_fn(move |_| time.poll_sleep(at_ms))
    }

    fn poll_sleep(&self, at: u64) -> Poll<()> {
        let now = self.now();
        if now >= at {
            return Poll::Ready(());
        }
        if self.0.manual {
            return Poll::Pending;
        }
        let next = self
            .0
            .due
            .lock()
            .expect("due lock")
            .iter()
            .copied()
            .filter(|&t| t > now)
            .min();
        match next {
            // Something due sooner happens first; this sleep goes on.
            Some(t) if t < at => {
                self.advance_to(t);
                Poll::Pending
            }
            _ => {
                self.advance_to(at);
                Poll::Ready(())
            }
        }
    }

    /// Completes once the clock reaches `at_ms`, without moving it (an
    /// abort at a given instant, marked due so the clock stops there).
    pub fn at(&self, at_ms: u64) -> impl Future<Output = ()> + MaybeSend + 'static {
        self.due_at(at_ms);
        let time = self.clone();
        std::future::poll_fn(move |_| {
            if time.now() >= at_ms {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    /// `value`, once the clock reaches `at_ms` (virtual latency), marked due.
    pub fn ready_at<T: MaybeSend + 'static>(
        &self,
        at_ms: u64,
        value: T,
    ) -> impl Future<Output = T> + MaybeSend + 'static {
        if at_ms > self.now() {
            self.due_at(at_ms);
        }
        let time = self.clone();
        let mut value = Some(value);
        std::future::poll_fn(move |_| match value.take() {
            Some(v) if time.now() >= at_ms => Poll::Ready(v),
            v => {
                value = v;
                Poll::Pending
            }
        })
    }
}

/// Background jobs a test host was asked to run (`spawn`), for [`run_with_jobs`].
#[derive(Default)]
pub struct Jobs(Mutex<Vec<crate::host::transport::BoxFuture<'static, ()>>>);

impl Jobs {
    /// Queues a job.
    pub fn spawn(&self, job: crate::host::transport::BoxFuture<'static, ()>) {
        self.0.lock().expect("jobs lock").push(job);
    }

    /// How many jobs have not finished.
    pub fn len(&self) -> usize {
        self.0.lock().expect("jobs lock").len()
    }

    /// Whether every job has finished.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn take(&self) -> Vec<crate::host::transport::BoxFuture<'static, ()>> {
        std::mem::take(&mut *self.0.lock().expect("jobs lock"))
    }
}

/// Polls `fut` and every job in `jobs` until `fut` is done; jobs still
/// running stay queued (dropping one would end its work). Panics if `fut`
/// is not done after a million rounds: it waits on something not virtual.
pub fn run_with_jobs<F: Future>(fut: F, jobs: &Jobs) -> F::Output {
    run_with_work(fut, jobs, Vec::new)
}

/// [`run_with_jobs`], where each round also queues in `jobs` the work
/// `take` hands out (a server's [`take_work`](crate::server::A2aServer::take_work)).
pub fn run_with_work<F: Future>(
    fut: F,
    jobs: &Jobs,
    take: impl Fn() -> Vec<crate::host::transport::BoxFuture<'static, ()>>,
) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut running = Vec::new();
    for _ in 0..1_000_000 {
        let done = fut.as_mut().poll(&mut cx);
        running.extend(jobs.take());
        running.extend(take());
        if let Poll::Ready(v) = done {
            jobs.0.lock().expect("jobs lock").extend(running);
            return v;
        }
        running.retain_mut(|j| j.as_mut().poll(&mut cx).is_pending());
    }
    panic!("the future did not finish: a virtual wait never became ready")
}

/// Runs a future whose every wait is virtual to completion.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    run_with_jobs(fut, &Jobs::default())
}

/// What the peer does with one JSON-RPC request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Answer `{"jsonrpc":"2.0","id":…,"result": value}`.
    Result(Value),
    /// Answer a JSON-RPC error.
    RpcError(i64, &'static str),
    /// Answer this raw HTTP status and body.
    Http(u16, &'static str),
    /// Answer this status (429, 503…) with this `Retry-After`, if any, and no body.
    Busy(u16, Option<&'static str>),
    /// Never answer (the connection is refused or reset).
    Unreachable,
    /// Take this long (virtual ms), then do the inner reply.
    Delay(u64, Box<Reply>),
    /// The inner reply, marked as a honoured long-poll (`Preference-Applied: wait=…`).
    LongPolled(Box<Reply>),
    /// An SSE answer (`text/event-stream`): each JSON-RPC result after its
    /// delay in ms (counted from the previous event), then the stream ends.
    Stream(Vec<(u64, Value)>),
    /// Like [`Reply::Stream`], but the connection breaks after the last event.
    StreamBroken(Vec<(u64, Value)>),
}

/// A task result in the toolnexus shape, for scripts.
pub fn task(id: &str, state: &str) -> Value {
    json!({"id": id, "status": {"state": state}})
}

/// A task that carries a status message.
pub fn task_with_message(id: &str, state: &str, text: &str) -> Value {
    json!({"id": id, "status": {"state": state,
        "message": {"role": "agent", "parts": [{"kind": "text", "text": text}]}}})
}

/// A completed task with one text artifact.
pub fn completed(id: &str, text: &str) -> Value {
    json!({"id": id, "status": {"state": "completed"},
        "artifacts": [{"artifactId": "a1", "parts": [{"kind": "text", "text": text}]}]})
}

#[derive(Default)]
struct Script {
    card: Option<Value>,
    /// Virtual ms the card takes to arrive.
    card_delay: u64,
    /// Replies by JSON-RPC method, consumed in order; the last one repeats.
    by_method: HashMap<String, Vec<Reply>>,
    /// Replies by exact URL (a token endpoint, say), before any other rule.
    by_url: HashMap<String, Vec<Reply>>,
    /// JSON-RPC requests must carry this header with one of these values;
    /// others are answered HTTP 401.
    require: Option<(String, Vec<String>)>,
}

/// An in-memory peer implementing [`Transport`], with a virtual clock that
/// jumps forward whenever something sleeps.
#[derive(Default)]
pub struct ScriptedPeer {
    time: VirtualTime,
    ids: AtomicU64,
    script: Mutex<Script>,
    log: Mutex<Vec<(u64, HttpRequest)>>,
    env: HashMap<String, String>,
    /// [`Transport::host_token`]: the tokens given in turn (the last
    /// repeats), and the `refused` flag of each ask.
    host_tokens: Mutex<(Vec<String>, Vec<bool>)>,
}

impl ScriptedPeer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Serve this card at any GET.
    pub fn card(self, card: Value) -> Self {
        self.script.lock().expect("script lock").card = Some(card);
        self
    }

    /// Serve the card only after `ms` virtual milliseconds.
    pub fn card_delay(self, ms: u64) -> Self {
        self.script.lock().expect("script lock").card_delay = ms;
        self
    }

    /// Answer the JSON-RPC `method` with these replies in turn (the last repeats).
    pub fn on(self, method: &str, replies: Vec<Reply>) -> Self {
        self.script
            .lock()
            .expect("script lock")
            .by_method
            .insert(method.to_string(), replies);
        self
    }

    /// Answer requests to exactly `url` (any method) with these replies in
    /// turn (the last repeats): [`Reply::Http`] or [`Reply::Delay`] of it.
    pub fn on_url(self, url: &str, replies: Vec<Reply>) -> Self {
        self.script
            .lock()
            .expect("script lock")
            .by_url
            .insert(url.to_string(), replies);
        self
    }

    /// Answer HTTP 401 to every JSON-RPC request whose `header` is none of `accepted`.
    pub fn require(self, header: &str, accepted: &[&str]) -> Self {
        self.script.lock().expect("script lock").require = Some((
            header.to_string(),
            accepted.iter().map(|a| a.to_string()).collect(),
        ));
        self
    }

    /// The requests sent to `url` so far.
    pub fn requests_to(&self, url: &str) -> Vec<HttpRequest> {
        self.requests()
            .into_iter()
            .filter(|(_, r)| r.url == url)
            .map(|(_, r)| r)
            .collect()
    }

    /// An environment variable the host would expose.
    pub fn env_var(mut self, name: &str, value: &str) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Give these tokens in turn (the last repeats) when asked for a host token.
    pub fn host_tokens(self, tokens: &[&str]) -> Self {
        self.host_tokens.lock().expect("tokens lock").0 =
            tokens.iter().map(|t| t.to_string()).collect();
        self
    }

    /// The `refused` flag of each host-token ask so far.
    pub fn host_token_asks(&self) -> Vec<bool> {
        self.host_tokens.lock().expect("tokens lock").1.clone()
    }

    /// The virtual time now.
    pub fn now(&self) -> u64 {
        self.time.now()
    }

    /// The peer's clock.
    pub fn time(&self) -> &VirtualTime {
        &self.time
    }

    /// Every request so far, with the virtual time it was sent at.
    pub fn requests(&self) -> Vec<(u64, HttpRequest)> {
        self.log.lock().expect("log lock").clone()
    }

    /// The JSON-RPC methods called so far, in order.
    pub fn methods(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter_map(|(_, r)| serde_json::from_slice::<Value>(&r.body).ok())
            .filter_map(|v| v["method"].as_str().map(str::to_string))
            .collect()
    }

    /// A future that completes once the virtual clock reaches `at_ms`.
    pub fn abort_at(&self, at_ms: u64) -> impl Future<Output = ()> + '_ {
        self.time.at(at_ms)
    }

    fn answer(&self, req: &HttpRequest) -> (u64, Result<HttpResponse, TransportError>) {
        self.answer_or_stream(req, false).0
    }

    /// The scripted answer; with `streaming`, a [`Reply::Stream`] comes back
    /// as its events (and whether the connection breaks after them) instead.
    #[allow(clippy::type_complexity)]
    fn answer_or_stream(
        &self,
        req: &HttpRequest,
        streaming: bool,
    ) -> (
        (u64, Result<HttpResponse, TransportError>),
        Option<(Vec<(u64, Value)>, bool, Value)>,
    ) {
        let mut script = self.script.lock().expect("script lock");
        let by_url = match script.by_url.get_mut(&req.url) {
            Some(list) if list.len() > 1 => Some(list.remove(0)),
            Some(list) => list.first().cloned(),
            None => None,
        };
        if let Some(mut reply) = by_url {
            let mut delay = 0;
            while let Reply::Delay(ms, inner) = reply {
                delay += ms;
                reply = *inner;
            }
            let out = match reply {
                Reply::Http(status, text) => Ok(HttpResponse {
                    status,
                    headers: vec![("Content-Type".into(), "application/json".into())],
                    body: text.as_bytes().to_vec(),
                }),
                _ => Err(TransportError::new("connection refused")),
            };
            return ((delay, out), None);
        }
        let refused = script.require.as_ref().is_some_and(|(name, accepted)| {
            req.method == "POST"
                && !req
                    .header(name)
                    .is_some_and(|v| accepted.iter().any(|a| a == v))
        });
        if refused {
            let out = Ok(HttpResponse {
                status: 401,
                headers: vec![("WWW-Authenticate".into(), "Bearer".into())],
                body: b"unauthorized".to_vec(),
            });
            return ((0, out), None);
        }
        if req.method == "GET" {
            let out = match &script.card {
                Some(card) => (
                    script.card_delay,
                    Ok(HttpResponse::json(200, card.to_string().into_bytes())),
                ),
                None => (
                    0,
                    Ok(HttpResponse {
                        status: 404,
                        headers: vec![],
                        body: b"not found".to_vec(),
                    }),
                ),
            };
            return (out, None);
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let method = body["method"].as_str().unwrap_or_default().to_string();
        let id = body["id"].clone();
        let reply = match script.by_method.get_mut(&method) {
            Some(list) if list.len() > 1 => list.remove(0),
            Some(list) if !list.is_empty() => list[0].clone(),
            _ => Reply::RpcError(-32601, "Method not found"),
        };
        let mut delay = 0;
        let mut long_polled = false;
        let mut reply = reply;
        let reply = loop {
            match reply {
                Reply::Delay(ms, inner) => {
                    delay += ms;
                    reply = *inner;
                }
                Reply::LongPolled(inner) => {
                    long_polled = true;
                    reply = *inner;
                }
                other => break other,
            }
        };
        match reply {
            Reply::Stream(events) if streaming => {
                return (
                    (delay, Ok(HttpResponse::default())),
                    Some((events, false, id)),
                )
            }
            Reply::StreamBroken(events) if streaming => {
                return (
                    (delay, Ok(HttpResponse::default())),
                    Some((events, true, id)),
                )
            }
            _ => {}
        }
        let rpc = |v: Value| Ok(HttpResponse::json(200, v.to_string().into_bytes()));
        let out = match reply {
            Reply::Result(r) => rpc(json!({"jsonrpc": "2.0", "id": id, "result": r})),
            Reply::RpcError(code, msg) => {
                rpc(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": msg}}))
            }
            Reply::Http(status, text) => Ok(HttpResponse {
                status,
                headers: vec![],
                body: text.as_bytes().to_vec(),
            }),
            Reply::Busy(status, retry_after) => Ok(HttpResponse {
                status,
                headers: retry_after
                    .map(|v| ("Retry-After".to_string(), v.to_string()))
                    .into_iter()
                    .collect(),
                body: Vec::new(),
            }),
            Reply::Unreachable => Err(TransportError::new("connection refused")),
            Reply::Stream(events) | Reply::StreamBroken(events) => {
                // Sent whole (by `send`): every event at once.
                let mut body = Vec::new();
                for (_, result) in &events {
                    let data = json!({"jsonrpc": "2.0", "id": id, "result": result});
                    crate::wire::sse::write_event(&mut body, None, &data.to_string());
                }
                Ok(HttpResponse {
                    status: 200,
                    headers: vec![("Content-Type".into(), crate::wire::sse::CONTENT_TYPE.into())],
                    body,
                })
            }
            Reply::Delay(..) | Reply::LongPolled(..) => {
                unreachable!("wrappers were unwrapped above")
            }
        };
        let out = out.map(|mut r| {
            if long_polled {
                r.headers
                    .push(("Preference-Applied".into(), "wait=10".into()));
            }
            r
        });
        ((delay, out), None)
    }
}

impl crate::HostBase for ScriptedPeer {
    fn now_ms(&self) -> u64 {
        self.now()
    }
    fn new_id(&self) -> String {
        format!("id-{}", self.ids.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

impl Transport for ScriptedPeer {
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> + MaybeSend {
        let (delay, out) = self.answer(&request);
        self.log
            .lock()
            .expect("log lock")
            .push((self.now(), request));
        self.time.ready_at(self.now() + delay, out)
    }

    fn send_streaming(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<StreamingResponse, TransportError>> + MaybeSend {
        let ((delay, out), stream) = self.answer_or_stream(&request, true);
        self.log
            .lock()
            .expect("log lock")
            .push((self.now(), request));
        let due = self.now() + delay;
        let response = match stream {
            None => out.map(StreamingResponse::whole),
            Some((items, broken, id)) => {
                // Each event becomes readable once the clock reaches its time.
                let mut at = due;
                let mut chunks = VecDeque::new();
                for (pause, result) in items {
                    at += pause;
                    self.time.due_at(at);
                    let mut bytes = Vec::new();
                    let data = json!({"jsonrpc": "2.0", "id": id, "result": result});
                    crate::wire::sse::write_event(&mut bytes, None, &data.to_string());
                    chunks.push_back((at, bytes));
                }
                let time = self.time.clone();
                let mut broken = broken;
                let body = futures_util::stream::poll_fn(move |_| match chunks.front() {
                    Some((at, _)) if time.now() < *at => Poll::Pending,
                    Some(_) => Poll::Ready(chunks.pop_front().map(|(_, b)| Ok(b))),
                    None if broken => {
                        broken = false;
                        Poll::Ready(Some(Err(TransportError::new("connection reset"))))
                    }
                    None => Poll::Ready(None),
                });
                Ok(StreamingResponse {
                    status: 200,
                    headers: vec![("Content-Type".into(), crate::wire::sse::CONTENT_TYPE.into())],
                    body: Box::pin(body),
                })
            }
        };
        self.time.ready_at(due, response)
    }

    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + MaybeSend {
        self.time.sleep_until(at_ms)
    }

    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).cloned()
    }

    fn host_token(
        &self,
        _key: &str,
        refused: bool,
    ) -> impl Future<Output = Result<String, crate::Error>> + MaybeSend {
        let mut t = self.host_tokens.lock().expect("tokens lock");
        t.1.push(refused);
        let n = t.1.len() - 1;
        let got = t.0.get(n).or(t.0.last()).cloned();
        async move { got.ok_or_else(|| crate::Error::Misuse("no host token scripted".into())) }
    }
}

/// A [`Locks`](crate::server::Locks) for tests and examples: a `std` mutex
/// (core's own code has none; hosts bring theirs).
#[cfg(feature = "server")]
pub struct TestLocks;

/// The lock of [`TestLocks`].
pub struct TestLock<T>(Mutex<T>);

impl<T: MaybeSend> crate::host::lock::Lock<T> for TestLock<T> {
    type Guard<'a>
        = std::sync::MutexGuard<'a, T>
    where
        T: 'a;

    fn new(value: T) -> Self {
        TestLock(Mutex::new(value))
    }

    /// Tests drive each server from one thread, so a lock already held is
    /// held by the caller itself: a guard kept across a call that locks
    /// again, which would deadlock a host. It fails the test at once
    /// instead of hanging it.
    fn lock(&self) -> Self::Guard<'_> {
        match self.0.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                panic!("locked twice on one thread: a guard is held across a call that locks again")
            }
        }
    }
}

#[cfg(feature = "server")]
impl crate::server::Locks for TestLocks {
    type Lock<T: MaybeSend> = TestLock<T>;
}
