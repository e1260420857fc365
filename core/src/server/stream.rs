//! Streaming on the server side: the live view of a running task, the
//! progress handle a fulfiller reports through, and the SSE body of a
//! `SendStreamingMessage` / `SubscribeToTask` answer.
//!
//! Every running task has one [`Live`]: the task as the fulfilment has made
//! it so far, and the streams that follow it. Events are applied and sent
//! under one lock, and a subscriber takes its snapshot under that same lock,
//! so a stream sees each event exactly once: in its first `Task` or after it.

use crate::event::{ArtifactUpdate, StatusUpdate, StreamEvent};
use crate::http::HttpResponse;
use crate::task::{Artifact, Message, Shape, Task, TaskState};
use crate::transport::{BoxFuture, BoxStream, MaybeSend, MaybeSync};
use futures_channel::mpsc;
use futures_util::StreamExt;
use serde_json::Value;
use std::sync::{Arc, Mutex};

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

/// What the live view needs from the server it belongs to.
pub(crate) trait Hooks: MaybeSend + MaybeSync {
    /// A fresh unique id.
    fn new_id(&self) -> String;
    /// A timer for the next heartbeat of an idle stream, if there is one.
    fn heartbeat(&self) -> Option<BoxFuture<'static, ()>>;
}

/// Whether a task in this state has nothing more to stream.
pub(crate) fn ends_stream(state: TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

fn ends(event: &StreamEvent) -> bool {
    event.state().is_some_and(ends_stream)
}

struct LiveState {
    task: Task,
    subscribers: Vec<mpsc::UnboundedSender<StreamEvent>>,
    /// The id of the answer artifact.
    answer_id: String,
    /// Chunks of the answer artifact published so far.
    chunks: usize,
    /// Someone (the fulfilment ending, a cancel) is settling the task:
    /// progress is no longer taken.
    claimed: bool,
}

/// A running task as its fulfilment has made it so far, and its followers.
pub(crate) struct Live {
    state: Mutex<LiveState>,
    /// Wakes the fulfilment job to save the task after a progress event.
    dirty: mpsc::UnboundedSender<()>,
}

fn lock(m: &Mutex<LiveState>) -> std::sync::MutexGuard<'_, LiveState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Live {
    /// A live view of `task`; the receiver hears of every change to save.
    pub(crate) fn new(task: Task, answer_id: String) -> (Arc<Live>, mpsc::UnboundedReceiver<()>) {
        let (dirty, saves) = mpsc::unbounded();
        let live = Live {
            state: Mutex::new(LiveState {
                task,
                subscribers: Vec::new(),
                answer_id,
                chunks: 0,
                claimed: false,
            }),
            dirty,
        };
        (Arc::new(live), saves)
    }

    /// The task as it is now.
    pub(crate) fn snapshot(&self) -> Task {
        lock(&self.state).task.clone()
    }

    /// The task as it is now, and a subscription to every later event.
    /// A task that has already ended gets no subscription.
    pub(crate) fn subscribe(self: &Arc<Self>) -> (Task, Option<Subscription>) {
        let mut st = lock(&self.state);
        let task = st.task.clone();
        if ends_stream(task.state) {
            return (task, None);
        }
        let (tx, rx) = mpsc::unbounded();
        st.subscribers.push(tx);
        let sub = Subscription {
            rx,
            live: self.clone(),
        };
        (task, Some(sub))
    }

    /// The number of streams following the task (for tests).
    #[cfg(test)]
    pub(crate) fn subscribers(&self) -> usize {
        lock(&self.state).subscribers.len()
    }

    /// Takes the right to settle the task; `false` if someone already has it.
    pub(crate) fn claim(&self) -> bool {
        let mut st = lock(&self.state);
        !std::mem::replace(&mut st.claimed, true)
    }

    /// Applies and sends `events` (nothing once the task has ended); the
    /// streams end after an event that ends the task.
    pub(crate) fn publish(&self, events: Vec<StreamEvent>) {
        let mut st = lock(&self.state);
        for event in events {
            if st.task.state.is_terminal() {
                break;
            }
            st.task.apply(&event);
            st.subscribers
                .retain(|tx| tx.unbounded_send(event.clone()).is_ok());
            if ends(&event) {
                st.subscribers.clear();
            }
        }
        let _ = self.dirty.unbounded_send(());
    }

    /// Ends every stream without an event (the job is gone).
    pub(crate) fn close(&self) {
        lock(&self.state).subscribers.clear();
    }

    fn progress(&self, make: impl FnOnce(&mut LiveState) -> StreamEvent) {
        let mut st = lock(&self.state);
        if st.claimed || ends_stream(st.task.state) {
            return;
        }
        let event = make(&mut st);
        st.task.apply(&event);
        st.subscribers
            .retain(|tx| tx.unbounded_send(event.clone()).is_ok());
        drop(st);
        let _ = self.dirty.unbounded_send(());
    }

    /// The events that settle the task with `outcome` (not yet published).
    pub(crate) fn settling_events(
        &self,
        outcome: Result<String, String>,
        message_id: String,
    ) -> Vec<StreamEvent> {
        let st = lock(&self.state);
        let (task_id, context_id) = (st.task.id.clone(), st.task.context_id.clone());
        let status = |state, message| {
            StreamEvent::Status(StatusUpdate {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                state,
                timestamp: None,
                message,
            })
        };
        match outcome {
            Ok(text) => {
                let mut events = Vec::new();
                if st.chunks == 0 || !text.is_empty() {
                    events.push(StreamEvent::Artifact(ArtifactUpdate {
                        task_id: task_id.clone(),
                        context_id: context_id.clone(),
                        artifact: Artifact {
                            artifact_id: st.answer_id.clone(),
                            parts: vec![text],
                        },
                        append: st.chunks > 0,
                        last_chunk: true,
                    }));
                }
                events.push(status(TaskState::Completed, None));
                events
            }
            Err(error) => vec![status(
                TaskState::Failed,
                Some(Message::agent_text(message_id, error)),
            )],
        }
    }
}

/// A stream's hold on a task's events. Dropping it unsubscribes.
pub(crate) struct Subscription {
    rx: mpsc::UnboundedReceiver<StreamEvent>,
    live: Arc<Live>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.rx.close();
        lock(&self.live.state)
            .subscribers
            .retain(|tx| !tx.is_closed());
    }
}

/// The handle a fulfiller reports progress through: each call updates the
/// stored task and reaches every stream that follows it. Cheap to clone.
/// Calls after the task has settled are ignored.
#[derive(Clone, Default)]
pub struct Progress {
    inner: Option<(Arc<Live>, Arc<dyn Hooks>)>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("attached", &self.inner.is_some())
            .finish()
    }
}

impl Progress {
    pub(crate) fn new(live: Arc<Live>, hooks: Arc<dyn Hooks>) -> Progress {
        Progress {
            inner: Some((live, hooks)),
        }
    }

    /// A handle that reports nowhere (to call a fulfiller outside a server).
    pub fn detached() -> Progress {
        Progress::default()
    }

    /// A `working` status update with an agent message saying `text`.
    pub fn status(&self, text: impl Into<String>) {
        let Some((live, hooks)) = &self.inner else {
            return;
        };
        let message = Message::agent_text(hooks.new_id(), text.into());
        live.progress(|st| {
            StreamEvent::Status(StatusUpdate {
                task_id: st.task.id.clone(),
                context_id: st.task.context_id.clone(),
                state: TaskState::Working,
                timestamp: None,
                message: Some(message),
            })
        });
    }

    /// A chunk of the answer artifact. The answer is the chunks in order; a
    /// non-empty final answer text is appended as one more chunk.
    pub fn artifact_chunk(&self, text: impl Into<String>, last_chunk: bool) {
        let Some((live, _)) = &self.inner else {
            return;
        };
        let text = text.into();
        live.progress(|st| {
            let append = st.chunks > 0;
            st.chunks += 1;
            StreamEvent::Artifact(ArtifactUpdate {
                task_id: st.task.id.clone(),
                context_id: st.task.context_id.clone(),
                artifact: Artifact {
                    artifact_id: st.answer_id.clone(),
                    parts: vec![text],
                },
                append,
                last_chunk,
            })
        });
    }
}

/// One SSE frame: `data: <JSON-RPC response with the request's id>`.
fn frame(id: &Value, shape: Shape, event: &StreamEvent) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: crate::event::ShapedEvent<'a>,
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
    crate::sse::write_event(&mut out, None, &json);
    out
}

/// The heartbeat comment of an idle stream.
pub const HEARTBEAT_COMMENT: &str = "ping";

struct Body {
    id: Value,
    shape: Shape,
    first: Option<Task>,
    sub: Option<Subscription>,
    hooks: Arc<dyn Hooks>,
    timer: Option<BoxFuture<'static, ()>>,
}

/// The head of every event stream (CORS is added by the server).
pub(crate) fn stream_head() -> HttpResponse {
    HttpResponse {
        status: 200,
        headers: vec![
            ("Content-Type".into(), crate::sse::CONTENT_TYPE.into()),
            ("Cache-Control".into(), "no-store".into()),
        ],
        body: Vec::new(),
    }
}

/// The event stream of one call: `first` (the task as it is), then what
/// `sub` delivers until the task ends, with a heartbeat while idle.
pub(crate) fn event_body(
    id: Value,
    shape: Shape,
    first: Task,
    sub: Option<Subscription>,
    hooks: Arc<dyn Hooks>,
) -> EventBody {
    let body = Body {
        id,
        shape,
        first: Some(first),
        sub,
        hooks,
        timer: None,
    };
    Box::pin(futures_util::stream::unfold(body, |mut b| async move {
        if let Some(task) = b.first.take() {
            if ends_stream(task.state) {
                b.sub = None;
            }
            let out = frame(&b.id, b.shape, &StreamEvent::Task(task));
            return Some((out, b));
        }
        let sub = b.sub.as_mut()?;
        if b.timer.is_none() {
            b.timer = b.hooks.heartbeat();
        }
        let next = match b.timer.as_mut() {
            Some(timer) => match futures_util::future::select(sub.rx.next(), timer).await {
                futures_util::future::Either::Left((event, _)) => Some(event),
                futures_util::future::Either::Right(((), _)) => None,
            },
            None => Some(sub.rx.next().await),
        };
        b.timer = None;
        match next {
            None => {
                let mut out = Vec::new();
                crate::sse::write_comment(&mut out, HEARTBEAT_COMMENT);
                Some((out, b))
            }
            // Every sender is gone: the task settled or its job ended.
            Some(None) => None,
            Some(Some(event)) => {
                if ends(&event) {
                    b.sub = None;
                }
                let out = frame(&b.id, b.shape, &event);
                Some((out, b))
            }
        }
    }))
}
