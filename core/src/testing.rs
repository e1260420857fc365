//! A scripted in-memory A2A peer with virtual time, for tests: no sockets,
//! no real sleeping. Enabled in this crate's tests and by the `testing` feature.

use crate::error::TransportError;
use crate::http::{HttpRequest, HttpResponse};
use crate::transport::{MaybeSend, StreamingResponse, Transport};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// What the peer does with one JSON-RPC request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Answer `{"jsonrpc":"2.0","id":…,"result": value}`.
    Result(Value),
    /// Answer a JSON-RPC error.
    RpcError(i64, &'static str),
    /// Answer this raw HTTP status and body.
    Http(u16, &'static str),
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
}

/// An in-memory peer implementing [`Transport`], with a virtual clock that
/// jumps forward whenever something sleeps.
#[derive(Default)]
pub struct ScriptedPeer {
    now: Arc<AtomicU64>,
    ids: AtomicU64,
    script: Mutex<Script>,
    log: Mutex<Vec<(u64, HttpRequest)>>,
    env: HashMap<String, String>,
    /// Virtual instants something is due at (answers in flight, aborts); a
    /// sleep never jumps the clock past one of them.
    events: Arc<Mutex<Vec<u64>>>,
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

    /// An environment variable the host would expose.
    pub fn env_var(mut self, name: &str, value: &str) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// The virtual time now.
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
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
        self.events.lock().expect("events lock").push(at_ms);
        std::future::poll_fn(move |_| {
            if self.now() >= at_ms {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
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
            Reply::Unreachable => Err(TransportError("connection refused".into())),
            Reply::Stream(events) | Reply::StreamBroken(events) => {
                // Sent whole (by `send`): every event at once.
                let mut body = Vec::new();
                for (_, result) in &events {
                    let data = json!({"jsonrpc": "2.0", "id": id, "result": result});
                    crate::sse::write_event(&mut body, None, &data.to_string());
                }
                Ok(HttpResponse {
                    status: 200,
                    headers: vec![("Content-Type".into(), crate::sse::CONTENT_TYPE.into())],
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

/// Completes when the virtual clock reaches `at`. Polling it moves the clock
/// to the earliest due instant (an answer in flight, an abort) or to `at`.
/// Virtual latency: `value` becomes ready once the clock reaches `due`. The
/// call's own deadline timer moves the clock, so a slow answer loses the race
/// against a deadline exactly as it would on a real network.
fn ready_at<'a, T: 'a>(
    now: &'a AtomicU64,
    due: u64,
    value: Result<T, TransportError>,
) -> impl Future<Output = Result<T, TransportError>> + 'a {
    let mut value = Some(value);
    std::future::poll_fn(move |_| {
        if now.load(Ordering::SeqCst) >= due {
            Poll::Ready(
                value
                    .take()
                    .unwrap_or(Err(TransportError("polled twice".into()))),
            )
        } else {
            Poll::Pending
        }
    })
}

struct VirtualSleep<'a> {
    peer: &'a ScriptedPeer,
    at: u64,
}

impl Future for VirtualSleep<'_> {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let now = self.peer.now();
        let next = self
            .peer
            .events
            .lock()
            .expect("events lock")
            .iter()
            .copied()
            .filter(|&t| t > now)
            .min();
        match next {
            Some(t) if t < self.at => {
                self.peer.now.store(t, Ordering::SeqCst);
                Poll::Pending
            }
            _ => {
                self.peer.now.fetch_max(self.at, Ordering::SeqCst);
                Poll::Ready(())
            }
        }
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
        let due = self.now() + delay;
        if delay > 0 {
            self.events.lock().expect("events lock").push(due);
        }
        ready_at(&self.now, due, out)
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
        let mut events = self.events.lock().expect("events lock");
        events.push(due);
        let response = match stream {
            None => out.map(StreamingResponse::whole),
            Some((items, broken, id)) => {
                // Each event becomes readable once the clock reaches its time.
                let mut at = due;
                let mut chunks = VecDeque::new();
                for (pause, result) in items {
                    at += pause;
                    events.push(at);
                    let mut bytes = Vec::new();
                    let data = json!({"jsonrpc": "2.0", "id": id, "result": result});
                    crate::sse::write_event(&mut bytes, None, &data.to_string());
                    chunks.push_back((at, bytes));
                }
                let now = self.now.clone();
                let mut broken = broken;
                let body = futures_util::stream::poll_fn(move |_| match chunks.front() {
                    Some((at, _)) if now.load(Ordering::SeqCst) < *at => Poll::Pending,
                    Some(_) => Poll::Ready(chunks.pop_front().map(|(_, b)| Ok(b))),
                    None if broken => {
                        broken = false;
                        Poll::Ready(Some(Err(TransportError("connection reset".into()))))
                    }
                    None => Poll::Ready(None),
                });
                Ok(StreamingResponse {
                    status: 200,
                    headers: vec![("Content-Type".into(), crate::sse::CONTENT_TYPE.into())],
                    body: Box::pin(body),
                })
            }
        };
        drop(events);
        ready_at(&self.now, due, response)
    }

    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + MaybeSend {
        VirtualSleep {
            peer: self,
            at: at_ms,
        }
    }

    fn now_ms(&self) -> u64 {
        self.now()
    }

    fn new_id(&self) -> String {
        format!("id-{}", self.ids.fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).cloned()
    }
}

/// Runs a future whose every wait is virtual to completion.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("the future did not finish: a virtual wait never became ready")
}
