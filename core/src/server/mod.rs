//! The A2A server as one function: an [`HttpRequest`] in, a [`Reply`] (a
//! whole [`HttpResponse`] or an SSE event stream) out, and the [`Work`] it
//! started (fulfilment jobs, push deliveries) for the host to run.
//!
//! Every host (the native tokio server, an edge worker's `fetch`, tests)
//! calls [`A2aServer::serve`] (or [`A2aServer::handle`], which reads a
//! stream to its end); none re-implements routing. `serve` is itself only a
//! driver of the public machine API: [`A2aServer::handle_request`] gives an
//! [`Exchange`] whose outputs (store calls, verifications, waits, the
//! answer) a host may also carry out by hand. Core spawns nothing:
//! the host takes the work ([`A2aServer::take_work`], [`A2aServer::poll_work`])
//! and runs it where it belongs (`tokio::spawn`, the request's `ctx.waitUntil`).

pub mod auth;
mod calls;
mod cancel;
mod card;
#[cfg(feature = "push")]
mod configs;
mod conversation;
#[cfg(feature = "push")]
mod delivery;
mod exchange;
mod follow;
mod fulfil;
mod http;
mod ip;
mod job;
pub mod jwks;
pub mod jws;
mod lifecycle;
mod list;
mod live;
mod longpoll;
mod machine;
mod policy;
#[cfg(feature = "push")]
pub mod push;
mod read;
#[cfg(feature = "replicas")]
mod remote;
pub mod rest;
mod rpc;
mod send;
mod start;
mod store;
mod stream;
mod subscribe;
mod validate;
pub mod verify;

#[cfg(target_arch = "wasm32")]
pub use crate::host::lock::{CellLock, CellLocks};
pub use crate::host::lock::{Lock, Locks};
pub use card::{
    build_agent_card, card_for, A2aConfig, Provider, API_KEY_SCHEME, BEARER_SCHEME, DEFAULT_NAME,
    DEFAULT_VERSION, OIDC_SCHEME,
};
pub use conversation::{context_turns, MAX_CONTEXT_MESSAGES};
pub use exchange::{Exchange, Output, StoreCall, StoreDone, Wait, Woken};
pub use fulfil::{run_reporting, tool_call_status, EchoFulfiller, LlmFulfiller};
pub use http::CardSpec;
pub use policy::{
    admit, is_loopback_host, malformed_body, misdirected, payload_too_large, Admission,
    AllowedHosts, BodyRefusal, CorsOrigin, Health, InvalidOption, DEFAULT_BODY_LIMIT, HEALTH_PATH,
};
pub use store::{
    delete_push_record, event_from_json, event_json, is_expired_finished, may_replace,
    push_records, put_push_record, task_bytes, HostStore, LoggedEvent, MemoryStore, StoreError,
    TaskFilter, TaskStore, DEFAULT_MAX_BYTES, DEFAULT_MAX_TASKS,
};
pub use stream::{EventBody, Progress, Reply, HEARTBEAT_COMMENT};

use crate::host::transport::{BoxFuture, MaybeSend, MaybeSync};
use crate::model::event::StreamEvent;
use crate::model::task::{Message, Role, Shape, Task, TaskState};
use crate::wire::http::{HttpRequest, HttpResponse};
use calls::*;
use exchange::{stalled, Io, Woke};
use follow::*;
use http::*;
use job::*;
use lifecycle::*;
use machine::{AfterSave, Slot, Tasks, Until, Waited};
use read::ReadStep;
use rpc::{Method, RpcError, RpcRequest};
use serde_json::Value;
use std::future::Future;
use std::ops::DerefMut;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// The card path.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The `Access-Control-Allow-Origin` hosts serve when none is configured.
pub const DEFAULT_CORS_ORIGIN: &str = "*";

/// The card path of older A2A drafts, served too.
pub const LEGACY_CARD_PATH: &str = "/.well-known/agent.json";

/// What a task asks the agent to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FulfilRequest {
    pub task_id: String,
    pub context_id: String,
    /// The message's parts joined by `"\n"`: text as it is, a file or
    /// data part as one line (`[file name type url]`, `[data {…}]`); the
    /// parts themselves are in the task's history.
    pub text: String,
    /// The skill named in the message's `metadata.skill`, if any.
    pub skill: Option<String>,
    /// The conversation before this message, oldest first: the earlier
    /// turns of the context (when the caller named one) and, when the
    /// message answers a task's question, that task's turns up to the
    /// question. At most [`MAX_CONTEXT_MESSAGES`]; empty for a new conversation.
    pub history: Vec<Message>,
    /// The task's trace ([`Task::trace`]): the requests its work sends
    /// carry it on (`Toolkit::run_llm_traced`).
    pub trace: Option<crate::TraceContext>,
}

/// Does the work of a task: `Ok(answer text)` completes it, `Err(reason)` fails it.
///
/// On the way it may report through `progress` (working status messages,
/// chunks of the answer); streams following the task see each report at once.
/// With chunks, the answer artifact is the chunks in order and a non-empty
/// `Ok` text is appended as its last chunk.
pub trait Fulfiller: MaybeSend + MaybeSync + 'static {
    fn fulfil(
        &self,
        request: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>>;
}

/// A task reached a terminal state (the `onTask` hook).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskEvent {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The task's text.
    pub task: String,
    /// The answer (completed) or the error text (failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The terminal state (serialised in the 0.3 spelling, `canceled`).
    pub state: TaskState,
    /// The id of the trace the task belongs to ([`Task::trace`]), 32 hex digits.
    #[serde(rename = "traceId", skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// Work the server started that outlives the call that started it: a
/// task's fulfilment job (until its terminal state is stored), a task's
/// push deliveries. The host takes it ([`A2aServer::take_work`],
/// [`A2aServer::poll_work`]) and runs each to its end in the background;
/// work not taken does not run (a blocking SendMessage then waits).
pub type Work = BoxFuture<'static, ()>;

/// What the server needs from its host.
pub trait ServerHost: crate::HostBase + 'static {
    /// How state shared between requests is locked (the running tasks): a
    /// mutex natively, a `RefCell` on one thread.
    type Locks: Locks;
    /// Called once per task on its terminal state.
    fn on_task(&self, _event: TaskEvent) {}
    /// Reports a problem no caller will see (a save that failed during fulfilment).
    fn report(&self, _problem: &str) {}
    /// A timer that completes at (or soon after) `at_ms` of
    /// [`HostBase::now_ms`](crate::HostBase::now_ms), for GetTask long-polls (`Prefer: wait=N`) and
    /// stream heartbeats. Hosts without one keep the default: GetTask then
    /// answers at once, and streams get no heartbeat.
    fn sleep_until(&self, _at_ms: u64) -> Option<BoxFuture<'static, ()>> {
        None
    }
    /// Sends an HTTP request and reads the whole answer (push notifications
    /// to webhooks). Hosts without one keep the default: they cannot offer
    /// push notifications.
    fn send(
        &self,
        _req: HttpRequest,
    ) -> Option<BoxFuture<'static, Result<HttpResponse, crate::TransportError>>> {
        None
    }
    /// Checks a JWT's signature and `alg` against the configured keys
    /// ([`auth::JwtConfig`]: the secret of `secret_env`, or the keys at
    /// `jwks_url` / the issuer's discovery document) and returns its claims.
    /// Core then checks the claims. Hosts without a verifier keep the
    /// default, which refuses every token.
    fn verify_jwt(&self, _token: &str) -> BoxFuture<'static, Result<auth::Claims, String>> {
        Box::pin(std::future::ready(Err(
            "this host verifies no JWT".to_string()
        )))
    }
    /// The user's own verifier (the Rust `authenticate` hook, the npm
    /// `authenticate` option), given the request head and body. `None`: none
    /// is configured.
    fn authenticate(&self, _req: &HttpRequest) -> Option<BoxFuture<'static, auth::Verdict>> {
        None
    }

    /// The `WWW-Authenticate` challenge of [`ServerHost::authenticate`]'s
    /// scheme, sent on every 401 (`Session realm="corp"`). `None`: a 401
    /// no configured scheme challenges says `Bearer realm="a2a"`, as a 401
    /// must challenge (RFC 9110 §15.5.2).
    fn authenticate_challenge(&self) -> Option<String> {
        None
    }

    /// Where the server's spans go ([`crate::SpanRecord`]: each request
    /// served, each turn of a task), for the host to export. `None` (the
    /// default): none is recorded, and a request costs one branch more.
    fn span_hook(&self) -> Option<&crate::SpanHook> {
        None
    }
}

/// Push notifications, when the server offers them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOptions {
    /// Take webhooks on loopback, private, link-local and metadata
    /// addresses (refused by default: SSRF).
    pub allow_private_webhooks: bool,
}

/// The longest `Prefer: wait` honoured, in seconds.
pub const MAX_WAIT_SECS: u64 = 30;

/// How the server answers browsers and what it advertises.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The served card. `None`: no A2A profile, every route is 404.
    pub card: Option<CardSpec>,
    /// `Access-Control-Allow-Origin`; `None` sends no CORS headers.
    pub cors_origin: Option<CorsOrigin>,
    /// The largest request body (default [`DEFAULT_BODY_LIMIT`]); hosts
    /// learn it from [`A2aServer::admit`].
    pub body_limit: usize,
    /// At most this many fulfilments run at once (default
    /// [`DEFAULT_MAX_RUNNING`]); later tasks wait, `submitted`, in order.
    pub max_running: usize,
    /// At most this many tasks wait for a place (default
    /// [`DEFAULT_MAX_QUEUED`]); past it a new task is refused at once
    /// (-32603, "busy"), before anything is stored.
    pub max_queued: usize,
    /// How long an event stream may stay silent before a `: ping` comment
    /// keeps it open (default [`DEFAULT_HEARTBEAT`]); `None` sends none.
    /// Needs a host timer ([`ServerHost::sleep_until`]).
    pub heartbeat: Option<Duration>,
    /// How long clients may use the card without asking again
    /// (`Cache-Control: public, max-age=N`). `None` (the default): they
    /// revalidate every time (`no-cache`), cheaply, with its `ETag`.
    pub card_max_age: Option<Duration>,
    /// Push notifications to webhooks (feature `push`, and a host that
    /// sends HTTP); `None`: the config methods answer -32003. The card
    /// should say so ([`A2aConfig::push_notifications`]).
    pub push: Option<PushOptions>,
    /// Crash recovery for a store that no start-up can sweep (a worker's KV,
    /// shared by instances that come and go): a stored task still
    /// `submitted` or `working`, not running on this server, whose last
    /// status change is older than this, is failed as [`INTERRUPTED`] when it
    /// is read (its fulfilment died with the instance that ran it). Pick it
    /// above the longest silent stretch of a fulfilment. `None` (the
    /// default) trusts the store's own recovery (the native file store
    /// fails such tasks when it opens). Needs the host's wall clock.
    pub interrupted_after: Option<Duration>,
    /// Who may call ([`auth::AuthConfig`]). `None`: every caller is
    /// anonymous and tasks have no owner (for loopback and tests; hosts
    /// refuse it on a public address unless told to allow it).
    pub auth: Option<auth::AuthConfig>,
    /// The `Host` headers answered ([`AllowedHosts`]: loopback names plus
    /// those listed); any other gets 421 before anything else is done,
    /// which stops DNS rebinding. `None` (the default): every `Host`.
    pub allowed_hosts: Option<AllowedHosts>,
    /// Running tasks hold a lease this long in the store, renewed by their
    /// job a third of the way through, so other replicas sharing the store
    /// tell a live task from one whose replica died: a task still
    /// `submitted`/`working` past its lease is failed as [`INTERRUPTED`]
    /// (when read, and by [`A2aServer::recover_expired`]). `None` (the
    /// default): no leases, for a store only this server uses. Needs the
    /// host's wall clock and timer.
    pub lease: Option<Duration>,
    /// How often a request waiting on a task that runs elsewhere (a
    /// long-poll), and a job running a task, read the store again in case
    /// a change was not told ([`A2aServer::store_changed`]). `None` (the
    /// default): only when told.
    pub store_poll: Option<Duration>,
    /// How long a finished task (completed, failed, canceled, rejected) is
    /// kept after its last status change: [`A2aServer::sweep`] deletes the
    /// older ones, with their push configs, so the store stays bounded.
    /// `None` (the default here): kept until the store drops them itself
    /// (the memory store's caps). Hosts call `sweep` now and then; the
    /// native `serve` defaults to [`DEFAULT_RETENTION`]. Needs the host's
    /// wall clock.
    pub retention: Option<Duration>,
}

/// How long `toolnexus serve` keeps finished tasks unless told
/// (`--task-retention`): 7 days, long enough for a caller to come back
/// for an answer after a weekend.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many finished tasks one [`A2aServer::sweep`] deletes at most.
pub const SWEEP_LIMIT: usize = 1_000;

/// Fulfilments a server runs at once by default: each may hold a model
/// connection, so this bounds those too.
pub const DEFAULT_MAX_RUNNING: usize = 64;

/// Tasks that may wait for a place by default.
pub const DEFAULT_MAX_QUEUED: usize = 1024;

/// The heartbeat of idle event streams: 15 s (as the official Python SDK).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

impl Default for ServerOptions {
    /// No A2A profile, no CORS, the default heartbeat.
    fn default() -> Self {
        ServerOptions {
            card: None,
            cors_origin: None,
            body_limit: DEFAULT_BODY_LIMIT,
            max_running: DEFAULT_MAX_RUNNING,
            max_queued: DEFAULT_MAX_QUEUED,
            heartbeat: Some(DEFAULT_HEARTBEAT),
            card_max_age: None,
            push: None,
            interrupted_after: None,
            auth: None,
            allowed_hosts: None,
            lease: None,
            store_poll: None,
            retention: None,
        }
    }
}

/// The A2A server. Keep it in an `Arc`; every request goes to [`A2aServer::handle`].
///
/// Its one lock guards the running tasks (`Tasks`, a machine
/// with no I/O); fulfilment jobs, event streams and waiting requests poll
/// it with their wakers.
pub struct A2aServer<S: TaskStore, H: ServerHost, F: Fulfiller> {
    store: S,
    host: H,
    fulfiller: F,
    card: Option<Card>,
    cors_origin: Option<CorsOrigin>,
    allowed_hosts: Option<AllowedHosts>,
    body_limit: usize,
    heartbeat_ms: Option<u64>,
    interrupted_after_ms: Option<u64>,
    store_poll_ms: Option<u64>,
    retention_ms: Option<u64>,
    card_cache_control: String,
    /// The bindings the card lists: JSON-RPC at `/`, HTTP+JSON at its mount.
    jsonrpc: bool,
    rest: Option<rest::Mount>,
    /// The verifiers; `None`: every caller is anonymous.
    auth: Option<auth::AuthConfig>,
    tasks: TasksLock<H>,
    #[cfg(feature = "push")]
    push: Option<(PushOptions, PushLock<H>)>,
}

/// The host's lock around the running tasks.
type TasksLock<H> = <<H as ServerHost>::Locks as Locks>::Lock<live::Live>;
/// The host's lock around the push-notification configs.
#[cfg(feature = "push")]
type PushLock<H> = <<H as ServerHost>::Locks as Locks>::Lock<push::PushConfigs>;

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// With [`ServerOptions::auth`], the card declares what is enforced:
    /// its security schemes and extended card are derived from that config
    /// (whatever the card given says of them).
    pub fn new(options: ServerOptions, store: S, host: H, fulfiller: F) -> Arc<Self> {
        let (jsonrpc, rest) = match &options.card {
            Some(CardSpec::Fixed(card)) => rest::card_bindings(card),
            Some(CardSpec::RequestOrigin { config, .. }) => {
                let b = config.bindings();
                let mount = b.rest.then(|| rest::Mount {
                    path: if config.rest_at_root {
                        String::new()
                    } else {
                        rest::REST_PATH.into()
                    },
                });
                (b.jsonrpc, mount)
            }
            None => (false, None),
        };
        let auth = options.auth;
        let mut tasks = Tasks::with_limits(options.max_running, options.max_queued);
        let lease_ms = options
            .lease
            .map(|d| crate::model::time::millis(d).max(3))
            .filter(|_| host.unix_ms().is_some());
        tasks.set_lease(host.new_id(), lease_ms);
        Arc::new(A2aServer {
            jsonrpc,
            rest,
            store,
            host,
            fulfiller,
            card: options.card.map(|c| match c {
                CardSpec::Fixed(mut card) => {
                    card::declare_auth(&mut card, auth.as_ref());
                    Card::fixed(&card)
                }
                CardSpec::RequestOrigin { mut config, skills } => {
                    config.auth = auth.clone();
                    Card::RequestOrigin(Box::new(config), skills)
                }
            }),
            auth,
            cors_origin: options.cors_origin,
            allowed_hosts: options.allowed_hosts,
            body_limit: options.body_limit,
            heartbeat_ms: options
                .heartbeat
                .map(|d| crate::model::time::millis(d).max(1)),
            interrupted_after_ms: options.interrupted_after.map(crate::model::time::millis),
            retention_ms: options.retention.map(crate::model::time::millis),
            store_poll_ms: options
                .store_poll
                .map(|d| crate::model::time::millis(d).max(1)),
            card_cache_control: match options.card_max_age {
                Some(age) => format!("public, max-age={}", age.as_secs()),
                None => "no-cache".into(),
            },
            tasks: Lock::new(live::Live::new(tasks)),
            #[cfg(feature = "push")]
            push: options
                .push
                .map(|o| (o, Lock::new(push::PushConfigs::default()))),
        })
    }

    /// The task store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Whether the server's saves work: unhealthy from a failed save until
    /// a later one works. Also served at [`HEALTH_PATH`].
    pub fn health(&self) -> Health {
        self.tasks().health.get()
    }

    /// Checks a request's head (its headers) before the host reads the
    /// body: how much body to read, or the answer to give at once.
    pub fn admit(&self, headers: &[(String, String)]) -> Admission {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        if !self.host_allowed(header("Host")) {
            return Admission::Refuse(misdirected());
        }
        match policy::admit(headers, self.body_limit) {
            Admission::Refuse(mut resp) => {
                self.add_cors_for(header("Origin"), &mut resp);
                Admission::Refuse(resp)
            }
            read => read,
        }
    }

    /// The answer when the host could not read a body (with the CORS
    /// headers, so a page can read it too).
    pub fn refuse(&self, refusal: BodyRefusal) -> HttpResponse {
        let mut resp = match refusal {
            BodyRefusal::TooLarge => payload_too_large(self.body_limit),
            BodyRefusal::Malformed => malformed_body(),
        };
        self.add_cors(&mut resp);
        resp
    }

    /// Whether a request with this `Host` header is answered
    /// ([`ServerOptions::allowed_hosts`]); the host's other routes (a UI's
    /// files) ask too.
    pub fn host_allowed(&self, host: Option<&str>) -> bool {
        self.allowed_hosts.as_ref().is_none_or(|a| a.allows(host))
    }

    /// Adds the CORS headers (when configured) to an answer, for a request
    /// whose `Origin` is unknown (a list of origins then sends none).
    pub fn add_cors(&self, resp: &mut HttpResponse) {
        self.add_cors_for(None, resp)
    }

    /// Adds the CORS headers (when configured) to the answer to a request
    /// from `origin` (its `Origin` header).
    pub fn add_cors_for(&self, origin: Option<&str>, resp: &mut HttpResponse) {
        if let Some(origin) = self.cors_origin.as_ref().and_then(|o| o.allow(origin)) {
            if resp
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("Access-Control-Allow-Origin"))
            {
                return;
            }
            resp.headers
                .push(("Access-Control-Allow-Origin".into(), origin.into()));
            // A page reads a refusal's challenges too when callers authenticate.
            let exposed = if self.auth.is_some() {
                "Preference-Applied, WWW-Authenticate"
            } else {
                "Preference-Applied"
            };
            resp.headers
                .push(("Access-Control-Expose-Headers".into(), exposed.into()));
            if origin != "*" {
                resp.headers.push(("Vary".into(), "Origin".into()));
            }
        }
    }

    /// The store says task `id` changed, perhaps on another replica (a
    /// PostgreSQL `NOTIFY`), at `version` when known: long-polls waiting on
    /// it read it again, and its job here (if it runs here) reconciles with
    /// it (a cancel stored elsewhere stops the fulfilment). Cheap; hosts may
    /// call it for every change, their own included.
    pub fn store_changed(&self, id: &str, version: Option<u64>) {
        self.tasks().store_changed(id, version);
    }

    /// Fails the stored tasks whose lease ran out (their replica died) as
    /// [`INTERRUPTED`], through the store's compare-and-swap (a replica
    /// that renewed meanwhile, or another that settled them first, wins).
    /// Hosts of a shared store call it now and then. The ids settled here.
    #[cfg(feature = "replicas")]
    pub async fn recover_expired(&self) -> Result<Vec<String>, StoreError> {
        let Some(now) = self.host.unix_ms() else {
            return Ok(Vec::new());
        };
        let mut settled = Vec::new();
        for task in self.store.expired(now, 100).await? {
            if self.tasks().is_running(&task.id) || !self.lease_expired(&task, now) {
                continue;
            }
            let id = task.id.clone();
            let mut read = read::ReadMachine::new(&id, None);
            let step = read.fail(task, self.host.unix_ms());
            let flow = self.coroutine(|io| async move { self.read(&io, Ok(read), step).await });
            let read = self.run(flow).await;
            if read.is_some_and(|read| read.is_ok_and(|task| task.state == TaskState::Failed)) {
                settled.push(id);
            }
        }
        Ok(settled)
    }

    /// Deletes the finished tasks older than [`ServerOptions::retention`]
    /// (at most [`SWEEP_LIMIT`] a call: call again while it returns that
    /// many). The host calls it now and then (the native `serve` every
    /// minute); several replicas may, the store deletes each task once.
    /// How many went; none without a retention or a wall clock.
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        let (Some(keep), Some(now)) = (self.retention_ms, self.host.unix_ms()) else {
            return Ok(0);
        };
        let before = now.saturating_sub(keep);
        self.store.delete_finished(before, SWEEP_LIMIT).await
    }

    /// Whether `task` is active and its lease ended before `now` (or it
    /// has none while leases are on).
    fn lease_expired(&self, task: &Task, now: u64) -> bool {
        task.state.is_active()
            && match &task.revision.lease {
                Some(lease) => lease.until_ms < now,
                None => false,
            }
    }

    /// A save failed: the server is unhealthy, and the host hears why.
    fn save_failed(&self, problem: &str) {
        let first = self.tasks().health.save_failed();
        if first {
            self.host.report(&format!(
                "unhealthy: a task state was not saved ({problem})"
            ));
        } else {
            self.host.report(problem);
        }
    }

    /// A save worked: healthy again if it was not.
    fn save_worked(&self) {
        let back = self.tasks().health.save_worked();
        if back {
            self.host.report("healthy: task states are saved again");
        }
    }

    fn tasks(&self) -> live::TasksGuard<<TasksLock<H> as Lock<live::Live>>::Guard<'_>> {
        // Nothing runs user code under this lock, and the machine's maps are
        // whole between its operations.
        live::TasksGuard(self.tasks.lock())
    }

    /// The work started since the last call ([`Work`]), oldest first,
    /// for the host to run. A host on one thread (an edge worker, a
    /// component) takes it after each poll of a future the server gave it
    /// (a [`A2aServer::serve`], a [`Work`]): whatever was started in that
    /// poll belongs to the request being served, and can be kept alive
    /// with it (`ctx.waitUntil`).
    pub fn take_work(&self) -> Vec<Work> {
        self.tasks().take_work(None)
    }

    /// Like [`A2aServer::take_work`], but pending (and woken when work
    /// is started) while there is none: for a host with one background
    /// task that runs what comes (`tokio::spawn` of each). One consumer:
    /// a second caller's waker replaces the first's.
    pub fn poll_work(&self, cx: &mut Context<'_>) -> Poll<Vec<Work>> {
        let work = self.tasks().take_work(Some(cx));
        if work.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(work)
        }
    }

    /// Hands each piece of work to `run` as it is started, until the
    /// server is dropped (it keeps no hold on it): the background task of
    /// a host with a spawner,
    /// `tokio::spawn(server.clone().run_work(|w| drop(tokio::spawn(w))))`.
    pub async fn run_work(self: Arc<Self>, mut run: impl FnMut(Work)) {
        let server = Arc::downgrade(&self);
        drop(self);
        loop {
            let work = std::future::poll_fn(|cx| match server.upgrade() {
                Some(server) => server.poll_work(cx).map(Some),
                None => Poll::Ready(None),
            });
            let Some(work) = work.await else { return };
            for work in work {
                run(work);
            }
        }
    }

    /// Answers one HTTP request with a whole response: a streamed answer
    /// is read to its end (the task's last event).
    pub async fn handle(self: &Arc<Self>, req: HttpRequest) -> HttpResponse {
        self.serve(req).await.collect().await
    }

    /// Answers one HTTP request: `SendStreamingMessage` / `message/stream`
    /// and `SubscribeToTask` / `tasks/resubscribe` with an SSE stream, the
    /// rest (errors included) with a whole response. The driver of the
    /// request's [`Exchange`] ([`A2aServer::handle_request`], [`A2aServer::drive`]).
    pub async fn serve(self: &Arc<Self>, req: HttpRequest) -> Reply {
        let exchange = self.handle_request(req);
        match self.drive(exchange).await {
            Some(reply) => reply,
            None => Reply::Full(stalled()),
        }
    }

    /// The span of a request ([`ServerHost::span_hook`]): `a2a.server
    /// {method}`, the child of the caller's `traceparent` or the root of a
    /// new trace. The request goes on with that span as its `traceparent`,
    /// so the task it makes is the span's child; a message on an existing
    /// task with no caller's context keeps the task's own trace.
    fn begin_span(&self, req: &mut HttpRequest, hook: crate::SpanHook) -> exchange::Traced {
        let start_ms = self.host.now_ms();
        let caller = crate::TraceContext::from_headers(&req.headers);
        let id = self.host.new_id();
        let context = match &caller {
            Some(c) => c.child(&id),
            None => crate::TraceContext::root(&id),
        };
        let rest = self.rest_path(req).is_some();
        let body = (req.method == "POST")
            .then(|| serde_json::from_slice::<Value>(&req.body).ok())
            .flatten();
        let method = body
            .as_ref()
            .filter(|_| !rest)
            .and_then(|b| b.get("method"))
            .and_then(Value::as_str);
        let (binding, op) = match (method, rest) {
            (Some(m), _) => ("jsonrpc", m),
            (None, true) => ("http+json", req.method.as_str()),
            (None, false) => ("http", req.method.as_str()),
        };
        let mut name = crate::wire::trace::joined("a2a.server ", op);
        if method.is_none() {
            name.push(' ');
            name.push_str(path_of(&req.url));
        }
        let mut span = crate::SpanRecord::new(
            name,
            crate::SpanKind::Server,
            context.clone(),
            caller.as_ref().map_or([0; 8], |c| c.span_id),
            start_ms,
        );
        span.set("http.request.method", req.method.as_str());
        span.set("url.path", path_of(&req.url));
        span.set("a2a.binding", binding);
        if let Some(m) = method {
            span.set("rpc.system", "jsonrpc");
            span.set("rpc.method", m);
            // A2A 0.3 names methods with a slash (message/send), 1.0 without.
            span.set("a2a.dialect", if m.contains('/') { "0.3" } else { "1.0" });
        }
        let message = body.as_ref().and_then(|b| {
            b.get("params")
                .and_then(|p| p.get("message"))
                .or_else(|| b.get("message"))
        });
        let continues = message
            .and_then(|m| m.get("taskId").or_else(|| m.get("task_id")))
            .and_then(Value::as_str)
            .is_some_and(|id| !id.is_empty());
        if caller.is_some() || !continues {
            context.put_on(&mut req.headers);
        }
        exchange::Traced { span, hook }
    }

    /// Ends a request's span with what its answer says.
    fn end_span(&self, traced: exchange::Traced, reply: &Reply) {
        let exchange::Traced { mut span, hook } = traced;
        let (status, outcome, code) = match reply {
            Reply::Full(r) => {
                let code = (r.status < 400)
                    .then(|| crate::wire::trace::rpc_error(&r.body))
                    .flatten();
                let failed = r.status >= 400 || code.is_some();
                (r.status, if failed { "error" } else { "ok" }, code)
            }
            Reply::Stream { head, .. } => (head.status, "stream", None),
        };
        let status_text = crate::wire::trace::decimal(status.into());
        if let Some(code) = code {
            span.set("rpc.jsonrpc.error_code", code);
            span.set("error.type", code);
            span.error = true;
        } else if status >= 500 {
            span.set("error.type", status_text.as_str());
            span.error = true;
        }
        span.set("http.response.status_code", status_text);
        span.set("a2a.outcome", outcome);
        span.end(&hook, self.host.now_ms());
    }

    /// `Access-Control-Allow-Private-Network: true` for a Private Network
    /// Access preflight, when the CORS options allow it.
    fn private_network_preflight(&self, req: &HttpRequest) -> Option<(String, String)> {
        let asked = req
            .header("Access-Control-Request-Private-Network")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let allowed = self
            .cors_origin
            .as_ref()
            .is_some_and(|c| c.private_network());
        (asked && allowed).then(|| ("Access-Control-Allow-Private-Network".into(), "true".into()))
    }

    /// The refusal of `req` by the configured verifiers (401/403, as a call
    /// would get), or `None` when they accept it or none is configured:
    /// for host routes beside the agent's (a `/metrics` page).
    pub async fn refuse_caller(&self, req: &HttpRequest) -> Option<HttpResponse> {
        let auth = self.auth.as_ref()?;
        let flow = self
            .coroutine(|io| async move { verify::authenticate(&io, auth, &self.host, req).await });
        match Box::pin(self.run(flow)).await {
            Some(Ok(_)) => None,
            Some(Err(refusal)) => Some(verify::refusal_response(auth, &refusal, true)),
            None => Some(stalled()),
        }
    }
}

/// The caller's owner string ([`auth::Principal::owner`]); `None` when the
/// server authenticates nobody (every task is everyone's).
type Owner<'a> = Option<&'a str>;

/// An authenticated caller: the owner of what it makes.
struct Caller {
    owner: String,
}

impl Caller {
    fn new(principal: auth::Principal) -> Caller {
        Caller {
            owner: principal.owner(),
        }
    }
}

/// Whether `owner` may see `task`: every task when nobody is authenticated,
/// else only the tasks it made (a task from before auth was on has no
/// owner, and is nobody's).
fn visible(task: &Task, owner: Owner<'_>) -> bool {
    owner.is_none_or(|o| task.owner.as_deref() == Some(o))
}

/// TaskNotFoundError: no such task, or another caller's (one answer for both).
fn task_not_found(id: &str) -> RpcError {
    RpcError::new(rpc::TASK_NOT_FOUND, format!("Task not found: {id}"))
}

/// The status text of a task whose fulfilment died with its server (a
/// restart, an instance that went away).
pub const INTERRUPTED: &str = "the server stopped before this task finished; send it again";

/// Fails `task` as [`INTERRUPTED`] if it is `submitted` or `working`: the
/// one crash-recovery rule of every durable store (the file store applies it
/// when it opens; [`ServerOptions::interrupted_after`] when a task is read).
/// `unix_ms` stamps the change. Whether it changed the task.
pub fn mark_interrupted(task: &mut Task, unix_ms: Option<u64>) -> bool {
    if !task.state.is_active() {
        return false;
    }
    task.state = TaskState::Failed;
    let mut m = Message::agent_text(format!("{}-interrupted", task.id), INTERRUPTED.into());
    m.context_id = Some(task.context_id.clone());
    m.task_id = Some(task.id.clone());
    task.status_message = Some(m);
    task.updated_ms = unix_ms.or(task.updated_ms);
    true
}

/// How many times a request re-reads a task whose save conflicted (another
/// replica kept changing it) before it answers with an error.
const CONFLICT_RETRIES: u32 = 8;

/// The status text of a task whose fulfilment panicked.
pub const CRASHED: &str = "the agent failed unexpectedly while working on this task";

impl<S: TaskStore, H: ServerHost, F: Fulfiller> stream::Hooks for A2aServer<S, H, F> {
    fn new_id(&self) -> String {
        self.host.new_id()
    }
    fn heartbeat(&self) -> Option<BoxFuture<'static, ()>> {
        let at = self.host.now_ms().saturating_add(self.heartbeat_ms?);
        self.host.sleep_until(at)
    }
    fn tasks(&self) -> Box<dyn DerefMut<Target = Tasks> + '_> {
        Box::new(A2aServer::tasks(self))
    }
    fn poll_stream(&self, slot: Slot, cx: &Context<'_>) -> Poll<Option<StreamEvent>> {
        A2aServer::tasks(self).poll(slot, cx, |t| t.poll_stream(slot))
    }
    fn unix_ms(&self) -> Option<u64> {
        self.host.unix_ms()
    }
}

#[cfg(test)]
mod tests;

#[cfg(not(feature = "push"))]
impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// Without the `push` feature a SendMessage naming a webhook is -32003.
    fn push_on_send(
        &self,
        params: &Value,
        _task: &str,
        _shape: Shape,
    ) -> Result<PendingPush, RpcError> {
        match send::sent_webhook(params) {
            Some(_) => Err(push_not_supported()),
            None => Ok(None),
        }
    }

    fn notify(self: &Arc<Self>, _task: &Task) {}
}
