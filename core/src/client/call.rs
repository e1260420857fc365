//! The outbound call as a state machine: send the task, follow it until it
//! settles, map it to a [`ToolResult`].
//!
//! How the task is followed depends on the peer:
//!
//! - The card says `capabilities.streaming`: `SendStreamingMessage` (0.3:
//!   `message/stream`), and the SSE events are followed to the terminal (or
//!   interrupted) one. A stream that ends early is resubscribed
//!   (`SubscribeToTask` / `tasks/resubscribe`) up to [`MAX_RESUBSCRIBES`]
//!   times with growing pauses, then the call falls back to polling. A peer
//!   that answers the stream request with plain JSON is read as a SendMessage
//!   answer; one that says streaming is unsupported gets a blocking send.
//! - An A2A peer without streaming: a blocking SendMessage (the A2A default),
//!   bounded by the call's deadline; polling only if it answers unsettled.
//! - The toolnexus dialect (its servers answer at once): a non-blocking
//!   SendMessage, then polling.
//!
//! Every task state seen (a stream event, a SendMessage answer, a GetTask
//! that changed something) is an event for the caller ([`Machine::poll_event`]).
//!
//! Loop order, per the contract: check abort → check timeout → sleep → check
//! abort → GetTask. The interval between polls is a quarter of the time spent
//! so far, at least [`FIRST_POLL_DELAY_MS`] and at most `poll_every`: a task
//! is seen at most ~25% of its run time after it settles, and a long one costs
//! one request per `poll_every`.
//!
//! When the card lists [`crate::client::card::LONG_POLL_EXTENSION`], every GetTask
//! also asks `Prefer: wait=N` (RFC 7240). A peer that honours it holds the answer until the task settles or N seconds
//! pass and says `Preference-Applied`; the call then polls again at once, so
//! a settled task reaches the caller within a round trip. Other peers get the
//! interval above (and never see the header, which browsers would preflight).

use crate::error::{Error, Reason, TransportError};
use crate::host::driver::{Machine, ResponseHead, Step};
use crate::model::event::{ArtifactUpdate, StatusUpdate, StreamEvent};
use crate::model::task::{SendResult, Task, TaskState};
use crate::model::tool::ToolResult;
use crate::wire::http::HttpResponse;
use crate::wire::json::with;
use crate::wire::rpc::MessageRefs;
use crate::wire::rpc::{Dialect, SendMode, UNSUPPORTED_OPERATION};
use crate::wire::sse::{is_event_stream, SseParser};
use serde_json::Value;
use std::collections::VecDeque;

/// The first poll interval (capped by `poll_every`).
pub const FIRST_POLL_DELAY_MS: u64 = 25;
/// How long a best-effort CancelTask may take after an abort.
pub const CANCEL_GRACE_MS: u64 = 2_000;
/// Consecutive GetTask transport failures tolerated before giving up.
pub const MAX_POLL_FAILURES: u32 = 3;
/// The `Prefer: wait` asked of each GetTask, in seconds (capped by the time left).
pub const LONG_POLL_SECS: u64 = 10;
/// Resubscriptions tried after a stream ends before its task settles.
pub const MAX_RESUBSCRIBES: u32 = 3;
/// The pause before the first resubscription; each next one waits 4× longer.
pub const RESUBSCRIBE_BACKOFF_MS: u64 = 50;
/// The largest non-SSE body read from a stream request.
pub const MAX_PLAIN_BODY: usize = 16 * 1024 * 1024;
/// How long the best-effort CancelTask sent when the call times out may take.
pub const TIMEOUT_CANCEL_GRACE_MS: u64 = 500;
/// The first pause before retrying a request the peer answered 429 or 503
/// without `Retry-After`; each next one doubles, up to [`RETRY_MAX_MS`].
pub const RETRY_BASE_MS: u64 = 250;
/// The longest pause between two retries of a 429/503 without `Retry-After`.
pub const RETRY_MAX_MS: u64 = 10_000;

/// Everything one call needs, resolved: no defaults left to apply.
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// The card's name, reported as `metadata.agent`.
    pub agent: String,
    pub endpoint: String,
    pub dialect: Dialect,
    /// Extra headers, already expanded.
    pub headers: Vec<(String, String)>,
    pub timeout_ms: u64,
    pub poll_every_ms: u64,
    pub message_id: String,
    pub text: String,
    /// Ask GetTask to long-poll (the card lists [`crate::client::card::LONG_POLL_EXTENSION`]).
    pub long_poll: bool,
    /// The card says `capabilities.streaming`: send `SendStreamingMessage`.
    pub streaming: bool,
    /// When the whole call began on the transport's clock (before its card
    /// fetch, say), so `timeout_ms` bounds all of it; `None`: when the
    /// machine starts.
    pub started_ms: Option<u64>,
    /// A random seed from the host (core has no randomness), for the jitter
    /// of retry pauses; hosts derive it from [`crate::HostBase::new_id`].
    pub jitter_seed: u64,
    /// The credential every request to the agent carries, if any.
    pub auth: Option<CallAuth>,
}

/// How a call authenticates: where the credential goes, and either the
/// credential itself or `None` for a token the machine asks for
/// ([`Step::Work`] of a [`TokenRequest`]) before the first request, when
/// it nears expiry, after a 401 (once) and for an `auth-required` task (once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallAuth {
    /// The card's scheme name, for messages.
    pub scheme: String,
    pub placement: crate::client::auth::Placement,
    /// A fixed credential (already expanded); `None`: tokens (refreshable).
    pub credential: Option<String>,
}

/// What a [`CallMachine`] asks of its host between requests: a token for
/// the agent; `stale` is one the agent refused, to drop first. The answer
/// ([`Machine::handle_work`]) is the token or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    pub stale: Option<String>,
}

/// The request a call sends once it has a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resume {
    Send,
    Poll,
    Resubscribe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A SendMessage (blocking or not) is in flight.
    Sending,
    /// A stream request (send or resubscribe) waits for its head.
    Opening,
    /// Reading an SSE body.
    Streaming,
    /// Reading a stream request's answer that is not SSE, whole.
    Collecting,
    /// Pausing before a resubscription.
    Backoff,
    Waiting,
    Polling,
    Canceling,
    /// Pausing before sending again a request the peer answered 429 or 503.
    Retrying(Retry),
    /// Waiting for a token, then this request.
    Authorizing(Resume),
}

/// The request a [`Phase::Retrying`] sends again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// The SendMessage (or stream request), with the same `messageId`.
    Send,
    /// The GetTask.
    Poll,
}

/// One outbound call. Create it, then run it with [`crate::host::driver::drive`]
/// (or feed it inputs yourself).
#[derive(Debug)]
pub struct CallMachine {
    spec: CallSpec,
    dialect: Dialect,
    dialect_retried: bool,
    phase: Phase,
    started_ms: u64,
    deadline_ms: u64,
    rpc_id: u64,
    task_id: Option<String>,
    state: TaskState,
    polls: u32,
    poll_failures: u32,
    /// How the task is sent (it changes once if the peer cannot stream).
    mode: SendMode,
    /// The task as followed so far (from events, answers and polls).
    task: Option<Task>,
    /// Whether the open stream is a resubscription (not the first send).
    resubscribing: bool,
    resubscribes: u32,
    sse: SseParser,
    head: ResponseHead,
    plain: Vec<u8>,
    events: VecDeque<StreamEvent>,
    /// The answer's file and data parts (1.0 shape), for `metadata.parts`.
    attachments: Vec<Value>,
    /// When the last GetTask was sent: the next never goes before its schedule.
    last_poll_ms: Option<u64>,
    /// 429/503 answers retried so far (the backoff doubles with each).
    retries: u32,
    /// The call timed out and is sending a best-effort CancelTask.
    timing_out: bool,
    /// The task and context the message continues, if any.
    refs: MessageRefs,
    /// The context of the task, once seen.
    context_id: Option<String>,
    /// Answering a task: the question it was waiting on when first seen
    /// (state, status message id and text, status time), which is not a new
    /// question; `None` once the task has been seen at work again.
    answered: Option<Option<Question>>,
    /// The token in use (token auth only).
    token: Option<crate::client::auth::Token>,
    /// A 401 was answered with a fresh token; another one is the end.
    reauthorized: bool,
    /// An `auth-required` task was continued with a fresh token (once).
    auth_continued: bool,
}

/// What tells one question of a task from another: its state, its status
/// message's id and text, and its status time.
type Question = (TaskState, String, String, Option<u64>);

fn question(task: &Task) -> Question {
    let message = task.status_message.as_ref();
    (
        task.state,
        message.map(|m| m.message_id.clone()).unwrap_or_default(),
        message.map(|m| m.text()).unwrap_or_default(),
        task.updated_ms,
    )
}

impl CallMachine {
    pub fn new(spec: CallSpec) -> Self {
        let mode = match spec.dialect {
            // Its servers answer at once and cannot stream: poll.
            Dialect::Toolnexus => SendMode::NonBlocking,
            _ if spec.streaming => SendMode::Stream,
            _ => SendMode::Blocking,
        };
        CallMachine {
            dialect: spec.dialect,
            dialect_retried: false,
            phase: Phase::Sending,
            started_ms: 0,
            deadline_ms: 0,
            rpc_id: 0,
            task_id: None,
            state: TaskState::Unknown,
            polls: 0,
            poll_failures: 0,
            mode,
            task: None,
            resubscribing: false,
            resubscribes: 0,
            attachments: Vec::new(),
            sse: SseParser::new(),
            head: ResponseHead::default(),
            plain: Vec::new(),
            events: VecDeque::new(),
            last_poll_ms: None,
            retries: 0,
            timing_out: false,
            refs: MessageRefs::default(),
            context_id: None,
            answered: None,
            token: None,
            reauthorized: false,
            auth_continued: false,
            spec,
        }
    }

    /// The call sends its message in the task and context `refs` names: an
    /// answer to a task waiting for input, or a new task in a conversation.
    pub fn continuing(mut self, refs: MessageRefs) -> Self {
        if refs.task_id.is_some() {
            self.answered = Some(None);
        }
        self.refs = refs;
        self
    }

    /// Whether `task` waits for the caller with a question to return. When
    /// the call answers a task, the question it was waiting on (a stream's
    /// first snapshot, a non-blocking send's echo, a poll before the agent
    /// took the answer) is not one: only a state after the task was seen at
    /// work again, or a different question, is.
    fn asks(&mut self, task: &Task) -> bool {
        if !task.state.is_interrupted() {
            if !task.state.is_terminal() && task.state != TaskState::Unknown {
                self.answered = None;
            }
            return false;
        }
        let Some(seen) = &mut self.answered else {
            return true;
        };
        let question = question(task);
        match seen {
            None => {
                *seen = Some(question);
                false
            }
            Some(old) => *old != question,
        }
    }

    /// The dialect in use (it changes once if the peer asks for the other one).
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn next_rpc_id(&mut self) -> u64 {
        self.rpc_id += 1;
        self.rpc_id
    }

    fn with_headers(&self, mut req: crate::HttpRequest) -> crate::HttpRequest {
        req.headers.extend(self.spec.headers.iter().cloned());
        let Some(auth) = &self.spec.auth else {
            return req;
        };
        let credential = auth
            .credential
            .as_deref()
            .or(self.token.as_ref().map(|t| t.value.as_str()));
        match credential {
            Some(c) => auth.placement.apply(req, c),
            None => req,
        }
    }

    /// Whether the credential is a token the machine asks for.
    fn uses_tokens(&self) -> bool {
        self.spec
            .auth
            .as_ref()
            .is_some_and(|a| a.credential.is_none())
    }

    /// Asks for a token before `resume` when there is none usable at
    /// `now_ms`; `None`: go on.
    fn authorize(&mut self, now_ms: u64, resume: Resume) -> Option<Step<ToolResult, TokenRequest>> {
        if !self.uses_tokens() || self.token.as_ref().is_some_and(|t| t.usable(now_ms)) {
            return None;
        }
        let stale = self.token.take().map(|t| t.value);
        self.phase = Phase::Authorizing(resume);
        Some(Step::Work(TokenRequest { stale }))
    }

    /// The agent answered 401 to a request (`resume` sends it again): with
    /// tokens, drop this one, fetch another and retry once; otherwise, or
    /// the second time, the call fails naming the scheme.
    fn unauthorized(
        &mut self,
        now_ms: u64,
        resume: Resume,
        status: u16,
    ) -> Step<ToolResult, TokenRequest> {
        if self.uses_tokens() && !self.reauthorized {
            self.reauthorized = true;
            let stale = self.token.take().map(|t| t.value);
            self.phase = Phase::Authorizing(resume);
            return Step::Work(TokenRequest { stale });
        }
        let what = match resume {
            Resume::Send => "SendMessage",
            Resume::Poll => "GetTask",
            Resume::Resubscribe => "SubscribeToTask",
        };
        let why = match &self.spec.auth {
            Some(a) if self.uses_tokens() => format!(
                "the agent refused a fresh token for its scheme {} (HTTP {status})",
                crate::wire::json::quoted(&a.scheme)
            ),
            Some(a) => format!(
                "the agent refused the credential for its scheme {} (HTTP {status})",
                crate::wire::json::quoted(&a.scheme)
            ),
            None => format!(
                "the agent wants credentials (HTTP {status}) and none were given for it (auth: bearer, apiKey or oauth2)"
            ),
        };
        let err = Error::Misuse(why);
        self.fail(now_ms, &format!("{what} to {}", self.endpoint()), &err)
    }

    /// Sends `resume` now that a token is in hand.
    fn resume(&mut self, now_ms: u64, resume: Resume) -> Step<ToolResult, TokenRequest> {
        match resume {
            Resume::Send => self.send_message(),
            Resume::Poll => self.get_task(now_ms),
            Resume::Resubscribe => self.resubscribe(),
        }
    }

    fn send_message(&mut self) -> Step<ToolResult, TokenRequest> {
        let id = self.next_rpc_id();
        let req = self.dialect.send_in(
            &self.spec.endpoint,
            id,
            &self.spec.message_id,
            &self.spec.text,
            self.mode,
            &self.refs,
        );
        let request = self.with_headers(req);
        let deadline_ms = self.deadline_ms;
        if self.mode == SendMode::Stream {
            self.open_stream(false);
            return Step::Stream {
                request,
                deadline_ms,
            };
        }
        self.phase = Phase::Sending;
        Step::Send {
            request,
            deadline_ms,
        }
    }

    /// Resets the stream readers for a new stream request.
    fn open_stream(&mut self, resubscribing: bool) {
        self.phase = Phase::Opening;
        self.resubscribing = resubscribing;
        self.sse = SseParser::new();
        self.plain.clear();
    }

    fn resubscribe(&mut self) -> Step<ToolResult, TokenRequest> {
        let id = self.next_rpc_id();
        let task_id = self.task_id.clone().unwrap_or_default();
        let req = self.dialect.subscribe(&self.spec.endpoint, id, &task_id);
        self.resubscribes += 1;
        self.open_stream(true);
        Step::Stream {
            request: self.with_headers(req),
            deadline_ms: self.deadline_ms,
        }
    }

    /// Whether a task the peer sent is another one than the task this call
    /// follows: a broken or hostile peer, never this call's result.
    fn foreign(&self, id: &str) -> bool {
        self.task_id.as_deref().is_some_and(|own| own != id)
    }

    fn foreign_task(&self, now_ms: u64, what: &str, id: &str) -> Step<ToolResult, TokenRequest> {
        let err = Error::malformed(format!(
            "protocol error: the answer is about task {}, not {}",
            crate::wire::http::snippet(id, 200),
            self.task_label()
        ));
        self.fail(now_ms, what, &err)
    }

    /// The peer answered 429 or 503: the request was not taken. Send it
    /// again (a SendMessage keeps its `messageId`) after the peer's
    /// `Retry-After` or the jittered backoff, whichever is longer, when that
    /// is before the deadline; otherwise fail with that answer.
    fn retry_later(
        &mut self,
        now_ms: u64,
        retry: Retry,
        status: u16,
        headers: &[(String, String)],
        body: String,
    ) -> Step<ToolResult, TokenRequest> {
        // At least the backoff: a `Retry-After: 0` must not make a loop.
        let pause = retry_after(headers).unwrap_or(0).max(self.backoff());
        self.retries += 1;
        if now_ms.saturating_add(pause) >= self.deadline_ms {
            let url = self.endpoint();
            let what = match retry {
                Retry::Send => "SendMessage",
                Retry::Poll => "GetTask",
            };
            let what = format!("{what} to {url}");
            return self.fail(now_ms, &what, &Error::Status { status, url, body });
        }
        self.phase = Phase::Retrying(retry);
        Step::Sleep {
            until_ms: now_ms + pause,
        }
    }

    /// The pause before the next retry without `Retry-After`: doubling from
    /// [`RETRY_BASE_MS`] up to [`RETRY_MAX_MS`], half of it random (from the
    /// host's seed), so clients refused together do not return together.
    fn backoff(&self) -> u64 {
        let full = (RETRY_BASE_MS << self.retries.min(8)).min(RETRY_MAX_MS);
        // splitmix64 of the seed and the retry number.
        let mut x = self
            .spec
            .jitter_seed
            .wrapping_add(u64::from(self.retries + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        full / 2 + x % (full / 2 + 1)
    }

    /// The endpoint as messages show it (no userinfo, no query).
    fn endpoint(&self) -> String {
        crate::wire::url::redact(&self.spec.endpoint)
    }

    /// A GetTask for the followed task (long-polling when the card allows).
    fn get_task(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        self.phase = Phase::Polling;
        self.polls += 1;
        self.last_poll_ms = Some(now_ms);
        let id = self.next_rpc_id();
        let task_id = self.task_id.clone().unwrap_or_default();
        let mut req = self.dialect.get_task(&self.spec.endpoint, id, &task_id);
        let wait = LONG_POLL_SECS.min(self.deadline_ms.saturating_sub(now_ms) / 1000);
        if self.spec.long_poll && wait > 0 {
            req = req.with_header("Prefer", format!("wait={wait}"));
        }
        Step::Send {
            request: self.with_headers(req),
            deadline_ms: self.deadline_ms,
        }
    }

    /// Sends a best-effort CancelTask that may take `grace_ms`.
    fn cancel(
        &mut self,
        now_ms: u64,
        task_id: String,
        grace_ms: u64,
    ) -> Step<ToolResult, TokenRequest> {
        self.phase = Phase::Canceling;
        let id = self.next_rpc_id();
        let req = self.dialect.cancel_task(&self.spec.endpoint, id, &task_id);
        Step::Send {
            request: self.with_headers(req),
            deadline_ms: now_ms + grace_ms,
        }
    }

    /// Records a task state seen on a poll or an answer, as an event if it
    /// tells the caller something new.
    fn observe(&mut self, task: &Task) {
        let changed = self.task.as_ref().is_none_or(|t| t != task);
        if changed {
            self.task = Some(task.clone());
            self.events.push_back(StreamEvent::Task(task.clone()));
        }
    }

    /// The answer to the first send (or a stream request answered in plain JSON).
    fn on_send_reply(
        &mut self,
        now_ms: u64,
        response: HttpResponse,
    ) -> Step<ToolResult, TokenRequest> {
        let reply = self.dialect.read_reply(&response, &self.endpoint());
        self.on_send_result(now_ms, reply)
    }

    /// The send's JSON-RPC result or error, however it arrived (a reply, or
    /// an error event that opened a stream).
    fn on_send_result(
        &mut self,
        now_ms: u64,
        reply: Result<Value, Error>,
    ) -> Step<ToolResult, TokenRequest> {
        let what = format!("SendMessage to {}", self.endpoint());
        match reply {
            Err(Error::Rpc { code, .. })
                if self.mode == SendMode::Stream && code == UNSUPPORTED_OPERATION =>
            {
                // The card said it streams; the server says it does not.
                self.mode = SendMode::Blocking;
                self.send_message()
            }
            Err(Error::Rpc { code, .. })
                if !self.dialect_retried && self.dialect.fallback(code).is_some() =>
            {
                self.dialect_retried = true;
                self.dialect = self.dialect.fallback(code).unwrap_or(self.dialect);
                self.send_message()
            }
            Err(e) => self.fail(now_ms, &what, &e),
            Ok(v) => match SendResult::from_value(&v) {
                Some(SendResult::Task(task)) => {
                    self.observe(&task);
                    self.on_task(now_ms, task)
                }
                Some(SendResult::Message(m)) => self.on_message(now_ms, m),
                None => {
                    let err = Error::malformed(format!(
                        "the reply is neither a task nor a message: {}",
                        crate::wire::http::snippet(&crate::wire::json::text(&v), 200)
                    ));
                    self.fail(now_ms, &what, &err)
                }
            },
        }
    }

    /// The agent answered directly, without a task.
    fn on_message(
        &mut self,
        now_ms: u64,
        message: crate::model::task::Message,
    ) -> Step<ToolResult, TokenRequest> {
        self.state = TaskState::Completed;
        self.attachments = attachments(std::iter::once(&message.parts[..]));
        let text = message.text();
        self.events.push_back(StreamEvent::Message(message));
        self.finish(now_ms, false, text)
    }

    /// Reads the complete SSE events received so far; a step when one ends the call.
    fn read_events(&mut self, now_ms: u64) -> Option<Step<ToolResult, TokenRequest>> {
        while let Some(next) = self.sse.next_event() {
            let event = match next {
                Ok(event) => event,
                Err(e) => {
                    let err = Error::Malformed(Reason::with_source(
                        format!("the event stream broke off: {e}"),
                        e,
                    ));
                    return Some(self.fail(now_ms, "streaming", &err));
                }
            };
            if event.data.trim().is_empty() {
                continue;
            }
            // from_slice: the one JSON reader the rest of the client already uses.
            let value = match serde_json::from_slice::<Value>(event.data.as_bytes()) {
                Ok(value) => value,
                Err(e) => {
                    let err = Error::Malformed(Reason::with_source(
                        format!(
                            "a stream event is not JSON: {}",
                            crate::wire::http::snippet(&event.data, 200)
                        ),
                        e,
                    ));
                    return Some(self.fail(now_ms, "streaming", &err));
                }
            };
            let result = match self.dialect.read_event(value) {
                Ok(result) => result,
                // An error before any event means the request itself failed.
                Err(e @ Error::Rpc { .. }) if self.task.is_none() && !self.resubscribing => {
                    return Some(self.on_send_result(now_ms, Err(e)));
                }
                Err(_) if self.resubscribing => return Some(self.poll_instead(now_ms)),
                Err(e) => return Some(self.fail(now_ms, "streaming", &e)),
            };
            let Some(event) = StreamEvent::from_value(&result) else {
                let err = Error::malformed(format!(
                    "a stream event is none of task, message, status or artifact: {}",
                    crate::wire::http::snippet(&crate::wire::json::text(&result), 200)
                ));
                return Some(self.fail(now_ms, "streaming", &err));
            };
            if let Some(step) = self.on_event(now_ms, event) {
                return Some(step);
            }
        }
        None
    }

    /// Applies one stream event; a step when it settles the task.
    fn on_event(
        &mut self,
        now_ms: u64,
        event: StreamEvent,
    ) -> Option<Step<ToolResult, TokenRequest>> {
        if let StreamEvent::Message(m) = &event {
            if self.task.is_none() {
                return Some(self.on_message(now_ms, m.clone()));
            }
        }
        let about = match &event {
            StreamEvent::Task(t) => Some(&t.id),
            StreamEvent::Status(u) => Some(&u.task_id),
            StreamEvent::Artifact(u) => Some(&u.task_id),
            StreamEvent::Message(_) => None,
        };
        if let Some(id) = about.filter(|id| self.foreign(id)) {
            return Some(self.foreign_task(now_ms, "streaming", &id.clone()));
        }
        let task = match (&mut self.task, &event) {
            (_, StreamEvent::Task(t)) => self.task.insert(t.clone()),
            (Some(task), _) => {
                task.apply(&event);
                task
            }
            // An update before its task: start the view from the update's ids.
            (
                None,
                StreamEvent::Status(StatusUpdate {
                    task_id,
                    context_id,
                    ..
                })
                | StreamEvent::Artifact(ArtifactUpdate {
                    task_id,
                    context_id,
                    ..
                }),
            ) => {
                let mut t = Task {
                    id: task_id.clone(),
                    context_id: context_id.clone(),
                    state: TaskState::Working,
                    status_message: None,
                    updated_ms: None,
                    artifacts: Vec::new(),
                    history: Vec::new(),
                    dialect: crate::model::task::Shape::V03,
                    owner: None,
                    trace: None,
                    revision: Default::default(),
                };
                t.apply(&event);
                self.task.insert(t)
            }
            (None, StreamEvent::Message(_)) => return None,
        };
        if !task.id.is_empty() {
            self.task_id = Some(task.id.clone());
        }
        self.state = task.state;
        let task = task.clone();
        let settled = task.state.is_terminal() || self.asks(&task);
        self.events.push_back(event);
        settled.then(|| self.on_task(now_ms, task))
    }

    /// The stream ended (or broke) before the task settled.
    fn stream_ended(
        &mut self,
        now_ms: u64,
        why: Option<TransportError>,
    ) -> Step<ToolResult, TokenRequest> {
        if self.task_id.is_none() {
            let err = match why {
                Some(e) => e.into(),
                None => Error::malformed("the event stream ended before the task was created"),
            };
            return self.fail(
                now_ms,
                &format!("SendStreamingMessage to {}", self.endpoint()),
                &err,
            );
        }
        if self.resubscribes >= MAX_RESUBSCRIBES {
            return self.wait_for(now_ms, 0);
        }
        let pause = RESUBSCRIBE_BACKOFF_MS << (2 * self.resubscribes);
        if now_ms.saturating_add(pause) >= self.deadline_ms {
            return self.timed_out(now_ms);
        }
        self.phase = Phase::Backoff;
        Step::Sleep {
            until_ms: now_ms + pause,
        }
    }

    /// A resubscription was refused: follow the task by GetTask from now on.
    fn poll_instead(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        self.resubscribes = MAX_RESUBSCRIBES;
        self.wait_for(now_ms, 0)
    }

    fn task_label(&self) -> String {
        match &self.task_id {
            Some(id) => crate::wire::http::snippet(id, 200),
            None => "(not created)".into(),
        }
    }

    fn finish(
        &self,
        now_ms: u64,
        is_error: bool,
        output: String,
    ) -> Step<ToolResult, TokenRequest> {
        let mut metadata = crate::wire::json::object([
            ("agent", self.spec.agent.as_str().into()),
            ("taskId", self.task_id.clone().into()),
            ("state", self.state.as_str().into()),
            ("polls", self.polls.into()),
            ("ms", now_ms.saturating_sub(self.started_ms).into()),
        ]);
        if !self.attachments.is_empty() {
            metadata = with(metadata, "parts", Value::Array(self.attachments.clone()));
        }
        // A task waiting for the caller: the context to name with the task to answer it.
        if let Some(context) = self
            .context_id
            .as_ref()
            .filter(|_| self.state.is_interrupted())
        {
            metadata = with(metadata, "contextId", context.as_str().into());
        }
        Step::Done(ToolResult {
            output,
            is_error,
            metadata: Some(metadata),
        })
    }

    fn fail(&self, now_ms: u64, what: &str, err: &Error) -> Step<ToolResult, TokenRequest> {
        self.finish(now_ms, true, format!("A2A {what} failed: {err}"))
    }

    /// The deadline passed: tell the peer (best effort, as on abort) when
    /// the task is known, then give the timeout result.
    fn timed_out(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        match self.task_id.clone() {
            Some(task_id) if !self.timing_out && self.phase != Phase::Canceling => {
                self.timing_out = true;
                self.cancel(now_ms, task_id, TIMEOUT_CANCEL_GRACE_MS)
            }
            _ => self.timeout_result(now_ms),
        }
    }

    fn timeout_result(&self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        let output = format!(
            "A2A task {} timed out after {}ms (state={})",
            self.task_label(),
            self.spec.timeout_ms,
            self.state.as_str()
        );
        self.finish(now_ms, true, output)
    }

    fn canceled(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        if self.timing_out {
            return self.timeout_result(now_ms);
        }
        self.state = TaskState::Canceled;
        let output = format!("A2A task {} canceled", self.task_label());
        self.finish(now_ms, true, output)
    }

    /// A task arrived (from SendMessage, GetTask or a stream): finish or wait for the next poll.
    fn on_task(&mut self, now_ms: u64, task: Task) -> Step<ToolResult, TokenRequest> {
        let asks = self.asks(&task);
        self.task_id = Some(task.id.clone());
        if !task.context_id.is_empty() {
            self.context_id = Some(task.context_id.clone());
        }
        self.state = task.state;
        let id = &task.id;
        let state = task.state.as_str();
        match task.state {
            TaskState::Completed => {
                self.attachments = attachments(task.artifacts.iter().map(|a| &a.parts[..]));
                self.finish(now_ms, false, task.output_text())
            }
            TaskState::Failed | TaskState::Canceled | TaskState::Rejected => {
                let id = crate::wire::http::snippet(id, 200);
                let output = match task.status_text() {
                    Some(text) => format!("A2A task {id} {state}: {}", peer_text(&text)),
                    None => format!("A2A task {id} {state}"),
                };
                self.finish(now_ms, true, output)
            }
            // The agent wants a credential the token source can renew:
            // continue the task once with a fresh token.
            TaskState::AuthRequired if asks && self.uses_tokens() && !self.auth_continued => {
                self.auth_continued = true;
                self.refs = MessageRefs {
                    task_id: Some(task.id.clone()),
                    context_id: (!task.context_id.is_empty()).then(|| task.context_id.clone()),
                };
                self.spec.message_id.push_str("-auth");
                // The same question again is its echo; another one is surfaced.
                self.answered = Some(Some(question(&task)));
                let stale = self.token.take().map(|t| t.value);
                self.phase = Phase::Authorizing(Resume::Send);
                Step::Work(TokenRequest { stale })
            }
            // The agent waits for the caller: polling on would only burn the timeout.
            TaskState::InputRequired | TaskState::AuthRequired if asks => {
                let question = task.status_text().or_else(|| {
                    task.history
                        .iter()
                        .rev()
                        .find(|m| m.role == crate::model::task::Role::Agent)
                        .map(|m| m.text())
                });
                let id = crate::wire::http::snippet(id, 200);
                let output = match question {
                    Some(q) => format!("A2A task {id} {state}: {}", peer_text(&q)),
                    None => format!("A2A task {id} {state}"),
                };
                self.finish(now_ms, true, output)
            }
            TaskState::Submitted
            | TaskState::Working
            | TaskState::Unknown
            | TaskState::InputRequired
            | TaskState::AuthRequired => self.wait(now_ms),
        }
    }

    fn wait(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        // A peer that long-polls holds the first GetTask itself: ask at once.
        if self.spec.long_poll && self.polls == 0 {
            return self.wait_for(now_ms, 0);
        }
        let delay = self.interval(now_ms);
        self.wait_for(now_ms, delay)
    }

    /// The poll interval at `now_ms`: a quarter of the time spent so far, at
    /// least [`FIRST_POLL_DELAY_MS`], at most `poll_every`.
    fn interval(&self, now_ms: u64) -> u64 {
        let elapsed = now_ms.saturating_sub(self.started_ms);
        (elapsed / 4)
            .max(FIRST_POLL_DELAY_MS)
            .min(self.spec.poll_every_ms)
    }

    /// Sleeps `delay_ms`, and never less than the schedule allows after the
    /// last GetTask: whatever the peer says or does (a long-poll answered at
    /// once, say), polls stay at least one interval apart.
    fn wait_for(&mut self, now_ms: u64, delay_ms: u64) -> Step<ToolResult, TokenRequest> {
        if now_ms >= self.deadline_ms {
            return self.timed_out(now_ms);
        }
        let mut until_ms = now_ms + delay_ms;
        if let Some(last) = self.last_poll_ms {
            until_ms = until_ms.max(last + self.interval(now_ms));
        }
        self.phase = Phase::Waiting;
        Step::Sleep {
            until_ms: until_ms.min(self.deadline_ms),
        }
    }
}

/// The file and data parts among `parts`, in the 1.0 shape: the output
/// keeps the text, `metadata.parts` carries these.
fn attachments<'a>(lists: impl Iterator<Item = &'a [crate::model::task::Part]>) -> Vec<Value> {
    let mut out = Vec::new();
    for list in lists {
        for p in list {
            if let crate::model::task::Part::Other(o) = p {
                out.push(Value::Object(o.clone()));
            }
        }
    }
    out
}

impl Machine for CallMachine {
    type Output = ToolResult;
    type Event = StreamEvent;
    type Work = TokenRequest;
    type Worked = Result<crate::client::auth::Token, Error>;

    fn start(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        self.started_ms = self.spec.started_ms.unwrap_or(now_ms).min(now_ms);
        self.deadline_ms = self.started_ms.saturating_add(self.spec.timeout_ms);
        if now_ms >= self.deadline_ms {
            // The card fetch took all the time there was.
            return self.timeout_result(now_ms);
        }
        if let Some(step) = self.authorize(now_ms, Resume::Send) {
            return step;
        }
        self.send_message()
    }

    fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> Step<ToolResult, TokenRequest> {
        let endpoint = self.endpoint();
        match self.phase {
            Phase::Sending => match response {
                Err(e) => self.fail(now_ms, &format!("SendMessage to {endpoint}"), &e.into()),
                Ok(resp) if retryable(resp.status) => {
                    let body = resp.body_snippet(200);
                    self.retry_later(now_ms, Retry::Send, resp.status, &resp.headers, body)
                }
                Ok(resp) if resp.status == 401 => self.unauthorized(now_ms, Resume::Send, 401),
                Ok(resp) => {
                    self.reauthorized = false;
                    self.on_send_reply(now_ms, resp)
                }
            },
            Phase::Polling => {
                let what = format!("GetTask {}", self.task_label());
                match response {
                    Err(e) => {
                        // A dropped connection mid-task is often transient; the task is
                        // still running remotely, so try again on the normal schedule.
                        self.poll_failures += 1;
                        if self.poll_failures >= MAX_POLL_FAILURES {
                            return self.fail(now_ms, &what, &e.into());
                        }
                        self.wait(now_ms)
                    }
                    Ok(resp) if retryable(resp.status) => {
                        let body = resp.body_snippet(200);
                        self.retry_later(now_ms, Retry::Poll, resp.status, &resp.headers, body)
                    }
                    Ok(resp) if resp.status == 401 => self.unauthorized(now_ms, Resume::Poll, 401),
                    Ok(resp) => {
                        self.poll_failures = 0;
                        self.reauthorized = false;
                        let long_polled = resp
                            .header("Preference-Applied")
                            .is_some_and(|p| crate::wire::http::find_str(p, "wait").is_some());
                        match self.dialect.read_reply(&resp, &endpoint) {
                            Err(e) => self.fail(now_ms, &what, &e),
                            Ok(v) => {
                                // 1.0 peers may wrap the task; accept both.
                                let task = Task::from_value(v.get("task").unwrap_or(&v));
                                match task {
                                    Some(task) if self.foreign(&task.id) => {
                                        self.foreign_task(now_ms, &what, &task.id)
                                    }
                                    // The peer already waited for us: ask again at once
                                    // (or as soon as the schedule allows).
                                    Some(task)
                                        if long_polled
                                            && !task.state.is_terminal()
                                            && !task.state.is_interrupted() =>
                                    {
                                        self.observe(&task);
                                        self.task_id = Some(task.id.clone());
                                        self.state = task.state;
                                        self.wait_for(now_ms, 0)
                                    }
                                    Some(task) => {
                                        self.observe(&task);
                                        self.on_task(now_ms, task)
                                    }
                                    None => {
                                        let err = Error::malformed(format!(
                                            "the reply is not a task: {}",
                                            crate::wire::http::snippet(
                                                &crate::wire::json::text(&v),
                                                200
                                            )
                                        ));
                                        self.fail(now_ms, &what, &err)
                                    }
                                }
                            }
                        }
                    }
                }
            }
            Phase::Canceling => self.canceled(now_ms),
            // No plain request is in flight otherwise; a stray response changes nothing.
            Phase::Waiting | Phase::Backoff | Phase::Retrying(_) | Phase::Authorizing(_) => {
                self.wait(now_ms)
            }
            Phase::Opening | Phase::Streaming | Phase::Collecting => Step::Read {
                deadline_ms: self.deadline_ms,
            },
        }
    }

    fn handle_head(
        &mut self,
        now_ms: u64,
        head: Result<ResponseHead, TransportError>,
    ) -> Step<ToolResult, TokenRequest> {
        if self.phase == Phase::Canceling {
            return self.canceled(now_ms);
        }
        let head = match head {
            Ok(head) if retryable(head.status) && self.resubscribing => {
                let refused = TransportError::new(format!("HTTP {}", head.status));
                return self.stream_ended(now_ms, Some(refused));
            }
            Ok(head) if retryable(head.status) => {
                return self.retry_later(
                    now_ms,
                    Retry::Send,
                    head.status,
                    &head.headers,
                    "".into(),
                );
            }
            Ok(head) if head.status == 401 => {
                let resume = if self.resubscribing {
                    Resume::Resubscribe
                } else {
                    Resume::Send
                };
                return self.unauthorized(now_ms, resume, 401);
            }
            Ok(head) => {
                self.reauthorized = false;
                head
            }
            Err(e) if self.resubscribing => return self.stream_ended(now_ms, Some(e)),
            Err(e) => {
                let what = format!("SendStreamingMessage to {}", self.endpoint());
                return self.fail(now_ms, &what, &e.into());
            }
        };
        let sse = head.is_success() && head.header("Content-Type").is_some_and(is_event_stream);
        self.phase = if sse {
            Phase::Streaming
        } else {
            Phase::Collecting
        };
        self.head = head;
        Step::Read {
            deadline_ms: self.deadline_ms,
        }
    }

    fn handle_body(
        &mut self,
        now_ms: u64,
        chunk: Result<Option<Vec<u8>>, TransportError>,
    ) -> Step<ToolResult, TokenRequest> {
        let read_on = Step::Read {
            deadline_ms: self.deadline_ms,
        };
        match (self.phase, chunk) {
            (Phase::Streaming, Ok(Some(bytes))) => {
                self.sse.feed(&bytes);
                self.read_events(now_ms).unwrap_or(read_on)
            }
            (Phase::Streaming, end) => {
                self.sse.finish();
                if let Some(step) = self.read_events(now_ms) {
                    return step;
                }
                self.stream_ended(now_ms, end.err())
            }
            (Phase::Collecting, Ok(Some(bytes))) => {
                if self.plain.len() + bytes.len() > MAX_PLAIN_BODY {
                    let err = Error::malformed(format!(
                        "the answer is over the {MAX_PLAIN_BODY}-byte limit"
                    ));
                    return self.fail(now_ms, "streaming", &err);
                }
                self.plain.extend_from_slice(&bytes);
                read_on
            }
            (Phase::Collecting, Err(e)) if self.resubscribing => self.stream_ended(now_ms, Some(e)),
            (Phase::Collecting, Err(e)) => {
                let what = format!("SendStreamingMessage to {}", self.endpoint());
                self.fail(now_ms, &what, &e.into())
            }
            (Phase::Collecting, Ok(None)) => {
                let head = std::mem::take(&mut self.head);
                let resp = HttpResponse {
                    status: head.status,
                    headers: head.headers,
                    body: std::mem::take(&mut self.plain),
                };
                if !self.resubscribing {
                    return self.on_send_reply(now_ms, resp);
                }
                // A resubscription answered in JSON: an error, or the task itself.
                match self.dialect.read_reply(&resp, &self.endpoint()) {
                    Ok(v) => match Task::from_value(v.get("task").unwrap_or(&v)) {
                        Some(task) if self.foreign(&task.id) => {
                            self.foreign_task(now_ms, "resubscribing", &task.id)
                        }
                        Some(task) => {
                            self.observe(&task);
                            self.on_task(now_ms, task)
                        }
                        None => self.wait_for(now_ms, 0),
                    },
                    Err(_) => self.poll_instead(now_ms),
                }
            }
            (Phase::Canceling, _) => self.canceled(now_ms),
            // No body is being read: nothing to do but carry on.
            _ => self.wait(now_ms),
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        match self.phase {
            Phase::Canceling => self.canceled(now_ms),
            _ if now_ms >= self.deadline_ms => self.timed_out(now_ms),
            Phase::Backoff => self
                .authorize(now_ms, Resume::Resubscribe)
                .unwrap_or_else(|| self.resubscribe()),
            Phase::Waiting | Phase::Retrying(Retry::Poll) => self
                .authorize(now_ms, Resume::Poll)
                .unwrap_or_else(|| self.get_task(now_ms)),
            Phase::Retrying(Retry::Send) => self
                .authorize(now_ms, Resume::Send)
                .unwrap_or_else(|| self.send_message()),
            // The host runs the token work with no deadline of its own.
            Phase::Authorizing(_) => self.timed_out(now_ms),
            // A request's deadline is the call's deadline, handled above.
            Phase::Sending
            | Phase::Polling
            | Phase::Opening
            | Phase::Streaming
            | Phase::Collecting => self.timed_out(now_ms),
        }
    }

    fn handle_abort(&mut self, now_ms: u64) -> Step<ToolResult, TokenRequest> {
        let following = !matches!(self.phase, Phase::Sending | Phase::Canceling);
        match self.task_id.clone() {
            // Best effort: tell the peer, but never wait long for it.
            Some(task_id) if following => self.cancel(now_ms, task_id, CANCEL_GRACE_MS),
            _ => self.canceled(now_ms),
        }
    }

    fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    fn handle_work(
        &mut self,
        now_ms: u64,
        worked: Result<crate::client::auth::Token, Error>,
    ) -> Step<ToolResult, TokenRequest> {
        let Phase::Authorizing(resume) = self.phase else {
            return self.wait(now_ms);
        };
        match worked {
            _ if now_ms >= self.deadline_ms => self.timed_out(now_ms),
            Ok(token) => {
                self.token = Some(token);
                self.resume(now_ms, resume)
            }
            Err(e) => {
                let scheme = self.spec.auth.as_ref().map(|a| a.scheme.as_str());
                let what = format!(
                    "getting a token for the scheme {}",
                    crate::wire::json::quoted(scheme.unwrap_or_default())
                );
                self.fail(now_ms, &what, &e)
            }
        }
    }
}

/// 429 (too many requests) and 503 (unavailable): the peer did not take the
/// request, so sending it again is safe.
fn retryable(status: u16) -> bool {
    status == 429 || status == 503
}

/// `Retry-After` in seconds, as ms. An HTTP-date would need the wall clock,
/// which core does not read: the backoff applies instead.
fn retry_after(headers: &[(String, String)]) -> Option<u64> {
    let secs = crate::wire::http::find_header(headers, "Retry-After")?;
    crate::wire::http::parse_u64(secs.trim()).map(|s| s.saturating_mul(1000))
}

/// Peer text quoted in a result: cut to [`crate::wire::http::MAX_PEER_TEXT`] chars.
fn peer_text(text: &str) -> String {
    crate::wire::http::snippet(text, crate::wire::http::MAX_PEER_TEXT)
}

#[cfg(test)]
#[path = "call_test_support.rs"]
mod test_support;

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "call_hostile_tests.rs"]
mod hostile_tests;
