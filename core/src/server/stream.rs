//! Streaming on the server side: the live view of a running task, the
//! progress handle a fulfiller reports through, and the SSE body of a
//! `SendStreamingMessage` / `SubscribeToTask` answer.
//!
//! Every running task lives in the server's [`Tasks`]: events are applied
//! and queued to its streams under the server's one lock, and a subscriber
//! takes its snapshot under that same lock, so a stream sees each event
//! exactly once: in its first `Task` or after it.

use super::machine::{ends_stream, Slot, Tasks};
use crate::host::transport::{BoxFuture, BoxStream, MaybeSend, MaybeSync};
use crate::model::event::{ArtifactUpdate, StatusUpdate, StreamEvent};
use crate::model::task::{Artifact, Message, Shape, Task, TaskState};
use crate::wire::http::HttpResponse;
use futures_util::StreamExt;
use serde_json::Value;
use std::ops::DerefMut;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The body of a streamed answer: SSE frames, each flushed as it comes.
/// `Send` on native targets, not on wasm32.
pub type EventBody = BoxStream<'static, Vec<u8>>;

/// An answer that is either whole or an event stream.
pub enum Reply {
    /// A whole response.
    Full(HttpResponse),
    /// `200 text/event-stream`: `head` has the status and headers (its body
    /// is empty); `body` yields one SSE frame at a time and ends after the
    /// task's last event.
    Stream { head: HttpResponse, body: EventBody },
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Full(r) => f.debug_tuple("Full").field(r).finish(),
            Reply::Stream { head, .. } => f
                .debug_struct("Stream")
                .field("head", head)
                .finish_non_exhaustive(),
        }
    }
}

impl Reply {
    /// The status and headers.
    pub fn head(&self) -> &HttpResponse {
        match self {
            Reply::Full(r) | Reply::Stream { head: r, .. } => r,
        }
    }

    /// The status and headers, to add to.
    pub fn head_mut(&mut self) -> &mut HttpResponse {
        match self {
            Reply::Full(r) | Reply::Stream { head: r, .. } => r,
        }
    }

    /// The whole response: a stream is read to its end.
    pub async fn collect(self) -> HttpResponse {
        match self {
            Reply::Full(r) => r,
            Reply::Stream { mut head, mut body } => {
                while let Some(frame) = body.next().await {
                    head.body.extend_from_slice(&frame);
                }
                head
            }
        }
    }
}

/// What streams and progress handles need from the server they belong to.
pub(crate) trait Hooks: MaybeSend + MaybeSync {
    /// A fresh unique id.
    fn new_id(&self) -> String;
    /// A timer for the next heartbeat of an idle stream, if there is one.
    fn heartbeat(&self) -> Option<BoxFuture<'static, ()>>;
    /// The running tasks, under the server's one lock (boxed: the host's
    /// guard type does not fit a trait object).
    fn tasks(&self) -> Box<dyn DerefMut<Target = Tasks> + '_>;
    /// The next event of the stream `slot` ([`Tasks::poll_stream`]), woken
    /// by the next one.
    fn poll_stream(&self, slot: Slot, cx: &Context<'_>) -> Poll<Option<StreamEvent>>;
    /// The wall clock (Unix ms), if the host has one.
    fn unix_ms(&self) -> Option<u64>;
}

/// The handle a fulfiller reports progress through: each call updates the
/// stored task and reaches every stream that follows it. Cheap to clone.
/// Calls after the task's outcome is decided are ignored.
#[derive(Clone, Default)]
pub struct Progress {
    inner: Option<(Arc<dyn Hooks>, Arc<str>)>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("attached", &self.inner.is_some())
            .finish()
    }
}

impl Progress {
    pub(crate) fn new(hooks: Arc<dyn Hooks>, task_id: &str) -> Progress {
        Progress {
            inner: Some((hooks, task_id.into())),
        }
    }

    /// A handle that reports nowhere (to call a fulfiller outside a server).
    pub fn detached() -> Progress {
        Progress::default()
    }

    /// A `working` status update with an agent message saying `text`.
    pub fn status(&self, text: impl Into<String>) {
        let Some((hooks, id)) = &self.inner else {
            return;
        };
        let message = Message::agent_text(hooks.new_id(), text.into());
        let timestamp = hooks.unix_ms().map(crate::model::time::format_rfc3339);
        hooks.tasks().progress(id, |p| {
            StreamEvent::Status(StatusUpdate {
                task_id: p.task_id.to_string(),
                context_id: p.context_id.to_string(),
                state: TaskState::Working,
                timestamp,
                message: Some(message),
            })
        });
    }

    /// Stops the task in `input-required` with `question` as its status
    /// message: the caller answers with a message naming the task, and the
    /// fulfiller is called again for it, the question and the earlier turns
    /// in [`FulfilRequest::history`](super::FulfilRequest::history). The
    /// fulfilment is dropped at its next await; what it returns is ignored.
    pub fn input_required(&self, question: impl Into<String>) {
        self.ask(TaskState::InputRequired, question.into());
    }

    /// [`Progress::input_required`] for credentials: stops the task in
    /// `auth-required` with `prompt` (say, where to sign in) as its status message.
    pub fn auth_required(&self, prompt: impl Into<String>) {
        self.ask(TaskState::AuthRequired, prompt.into());
    }

    fn ask(&self, state: TaskState, text: String) {
        let Some((hooks, id)) = &self.inner else {
            return;
        };
        let message = Message::agent_text(hooks.new_id(), text);
        let timestamp = hooks.unix_ms().map(crate::model::time::format_rfc3339);
        let mut tasks = hooks.tasks();
        let Some(event) = tasks.task(id).map(|t| {
            StreamEvent::Status(StatusUpdate {
                task_id: t.id.clone(),
                context_id: t.context_id.clone(),
                state,
                timestamp,
                message: Some(message),
            })
        }) else {
            return;
        };
        tasks.interrupt(id, event);
    }

    /// A chunk of the answer artifact. The answer is the chunks in order; a
    /// non-empty final answer text is appended as one more chunk.
    pub fn artifact_chunk(&self, text: impl Into<String>, last_chunk: bool) {
        let Some((hooks, id)) = &self.inner else {
            return;
        };
        let text = text.into();
        hooks.tasks().progress(id, |p| {
            let append = *p.chunks > 0;
            *p.chunks += 1;
            StreamEvent::Artifact(ArtifactUpdate {
                task_id: p.task_id.to_string(),
                context_id: p.context_id.to_string(),
                artifact: Artifact {
                    artifact_id: p.answer_id.to_string(),
                    parts: vec![crate::model::task::Part::Text(text)],
                },
                append,
                last_chunk,
            })
        });
    }
}

/// How a stream's events are written.
pub(crate) enum Framing {
    /// `data: <JSON-RPC response with the request's id>`.
    JsonRpc(Value),
    /// HTTP+JSON: `data: <StreamResponse>`.
    Rest,
    /// HTTP+JSON of A2A 0.3: the `StreamResponse` of the 0.3 proto.
    Rest03,
}

impl Framing {
    pub(crate) fn of(call: &super::rpc::RpcRequest) -> Framing {
        match call.binding {
            super::rpc::Binding::JsonRpc => Framing::JsonRpc(call.id.clone()),
            super::rpc::Binding::Rest => Framing::Rest,
            super::rpc::Binding::Rest03 => Framing::Rest03,
        }
    }
}

/// One SSE frame of `event`, as `framing` writes it.
fn frame(framing: &Framing, shape: Shape, event: &StreamEvent) -> Vec<u8> {
    let id = match framing {
        Framing::JsonRpc(id) => id,
        rest => {
            let json = if matches!(rest, Framing::Rest03) {
                // Bytes read back, not `to_value`: see `rest::reparse`.
                let bytes = serde_json::to_vec(&event.shaped(shape)).unwrap_or_default();
                let mut v = super::rest::reparse(bytes);
                super::rest::to_v03_stream_response(&mut v);
                crate::wire::json::text(&v)
            } else {
                serde_json::to_string(&event.shaped(shape)).unwrap_or_default()
            };
            let mut out = Vec::with_capacity(json.len() + 8);
            crate::wire::sse::write_event(&mut out, None, &json);
            return out;
        }
    };
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: crate::model::event::ShapedEvent<'a>,
    }
    let json = serde_json::to_string(&Envelope {
        jsonrpc: "2.0",
        id,
        result: event.shaped(shape),
    })
    .unwrap_or_else(|_| {
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#.into()
    });
    let mut out = Vec::with_capacity(json.len() + 8);
    crate::wire::sse::write_event(&mut out, None, &json);
    out
}

/// The heartbeat comment of an idle stream.
pub const HEARTBEAT_COMMENT: &str = "ping";

struct Body {
    framing: Framing,
    shape: Shape,
    first: Option<Task>,
    /// The task's later events, until they end.
    slot: Option<Slot>,
    /// Or, for a task running on another replica, its events as read from
    /// the store.
    remote: Option<BoxStream<'static, StreamEvent>>,
    hooks: Arc<dyn Hooks>,
    timer: Option<BoxFuture<'static, ()>>,
}

impl Drop for Body {
    fn drop(&mut self) {
        self.end();
    }
}

impl futures_util::Stream for Body {
    type Item = Vec<u8>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<u8>>> {
        let b = self.get_mut();
        if let Some(task) = b.first.take() {
            if ends_stream(task.state) {
                b.end();
            }
            return Poll::Ready(Some(frame(&b.framing, b.shape, &StreamEvent::Task(task))));
        }
        let next = match (b.slot, b.remote.as_mut()) {
            (Some(slot), _) => b.hooks.poll_stream(slot, cx),
            (None, Some(remote)) => remote.as_mut().poll_next(cx),
            (None, None) => return Poll::Ready(None),
        };
        match next {
            Poll::Ready(Some(event)) => {
                b.timer = None;
                if event.state().is_some_and(ends_stream) {
                    b.end();
                }
                Poll::Ready(Some(frame(&b.framing, b.shape, &event)))
            }
            // The task settled or its job ended.
            Poll::Ready(None) => {
                b.slot = None;
                b.remote = None;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if b.timer.is_none() {
                    b.timer = b.hooks.heartbeat();
                }
                match b.timer.as_mut().map(|t| t.as_mut().poll(cx)) {
                    Some(Poll::Ready(())) => {
                        b.timer = None;
                        let mut out = Vec::new();
                        crate::wire::sse::write_comment(&mut out, HEARTBEAT_COMMENT);
                        Poll::Ready(Some(out))
                    }
                    _ => Poll::Pending,
                }
            }
        }
    }
}

impl Body {
    /// No more events after this one.
    fn end(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.hooks.tasks().drop_stream(slot);
        }
        self.remote = None;
    }
}

/// The head of every event stream (CORS is added by the server).
pub(crate) fn stream_head() -> HttpResponse {
    HttpResponse {
        status: 200,
        headers: vec![
            ("Content-Type".into(), crate::wire::sse::CONTENT_TYPE.into()),
            ("Cache-Control".into(), "no-store".into()),
        ],
        body: Vec::new(),
    }
}

/// The event stream of one call: `first` (the task as it is), then what
/// `slot` (or `remote`) delivers until the task ends, with a heartbeat while idle.
pub(crate) fn event_body(
    framing: Framing,
    shape: Shape,
    first: Task,
    slot: Option<Slot>,
    remote: Option<BoxStream<'static, StreamEvent>>,
    hooks: Arc<dyn Hooks>,
) -> EventBody {
    Box::pin(Body {
        framing,
        shape,
        first: Some(first),
        slot,
        remote,
        hooks,
        timer: None,
    })
}

#[cfg(feature = "replicas")]
/// The events that take a follower from `last` to `now` (two stored
/// versions of a task): each artifact that is new or changed (its new
/// parts appended when it grew, else whole), then the status when it changed.
pub(crate) fn changes(last: &Task, now: &Task) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    let ends = ends_stream(now.state);
    for artifact in &now.artifacts {
        let before = last
            .artifacts
            .iter()
            .find(|a| a.artifact_id == artifact.artifact_id);
        let (append, parts) = match before {
            Some(b) if b.parts == artifact.parts => continue,
            Some(b)
                if b.parts.len() < artifact.parts.len()
                    && artifact.parts.get(..b.parts.len()) == Some(&b.parts[..]) =>
            {
                (true, artifact.parts[b.parts.len()..].to_vec())
            }
            _ => (false, artifact.parts.clone()),
        };
        events.push(StreamEvent::Artifact(ArtifactUpdate {
            task_id: now.id.clone(),
            context_id: now.context_id.clone(),
            artifact: Artifact {
                artifact_id: artifact.artifact_id.clone(),
                parts,
            },
            append,
            last_chunk: ends,
        }));
    }
    if now.state != last.state
        || now.status_message != last.status_message
        || now.updated_ms != last.updated_ms
    {
        events.push(StreamEvent::Status(StatusUpdate {
            task_id: now.id.clone(),
            context_id: now.context_id.clone(),
            state: now.state,
            timestamp: now.updated_ms.map(crate::model::time::format_rfc3339),
            message: now.status_message.clone(),
        }));
    }
    events
}
