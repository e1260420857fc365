//! The A2A server as one function: an [`HttpRequest`] in, a [`Reply`] (a
//! whole [`HttpResponse`] or an SSE event stream) out, with fulfilment
//! handed to the host's spawner.
//!
//! Every host (the native tokio server, an edge worker's `fetch`, tests)
//! calls [`A2aServer::serve`] (or [`A2aServer::handle`], which reads a
//! stream to its end); none re-implements routing.

pub mod auth;
mod card;
mod conversation;
mod fulfil;
mod ip;
pub mod jwks;
pub mod jws;
mod list;
mod machine;
mod policy;
#[cfg(feature = "push")]
pub mod push;
pub mod rest;
mod rpc;
mod store;
mod stream;
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
pub use fulfil::{run_reporting, tool_call_status, EchoFulfiller, LlmFulfiller};
pub use policy::{
    admit, is_loopback_host, malformed_body, misdirected, payload_too_large, Admission,
    AllowedHosts, BodyRefusal, CorsOrigin, Health, InvalidOption, DEFAULT_BODY_LIMIT, HEALTH_PATH,
};
pub use store::{
    delete_push_record, event_from_json, event_json, is_expired_finished, may_replace,
    push_records, put_push_record, task_bytes, LoggedEvent, MemoryStore, StoreError, TaskFilter,
    TaskStore, DEFAULT_MAX_BYTES, DEFAULT_MAX_TASKS,
};
pub use stream::{EventBody, Progress, Reply, HEARTBEAT_COMMENT};

use crate::host::transport::{BoxFuture, MaybeSend, MaybeSync};
use crate::model::event::{StatusUpdate, StreamEvent};
use crate::model::task::{Message, Role, Shape, Task, TaskState};
use crate::wire::http::{HttpRequest, HttpResponse};
use machine::{AfterSave, Slot, Tasks, Until, Waited};
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

/// What the server needs from its host.
pub trait ServerHost: MaybeSend + MaybeSync + 'static {
    /// How state shared between requests is locked (the running tasks): a
    /// mutex natively, a `RefCell` on one thread.
    type Locks: Locks;
    /// A fresh unique id.
    fn new_id(&self) -> String;
    /// Runs `job` to completion in the background (tokio::spawn, ctx.waitUntil, …).
    fn spawn(&self, job: BoxFuture<'static, ()>);
    /// Called once per task on its terminal state.
    fn on_task(&self, _event: TaskEvent) {}
    /// Reports a problem no caller will see (a save that failed during fulfilment).
    fn report(&self, _problem: &str) {}
    /// The wall clock in Unix milliseconds, for status timestamps (and
    /// ListTasks' `statusTimestampAfter`). Hosts without one keep the
    /// default: tasks then carry no timestamps.
    fn unix_ms(&self) -> Option<u64> {
        None
    }
    /// Milliseconds on a monotonic clock, the same time as
    /// [`crate::Transport::now_ms`]: only differences matter.
    fn now_ms(&self) -> u64 {
        0
    }
    /// A timer that completes at (or soon after) `at_ms` of
    /// [`ServerHost::now_ms`], for GetTask long-polls (`Prefer: wait=N`) and
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

/// The seconds of an RFC 7240 `Prefer: wait=N` header, capped at [`MAX_WAIT_SECS`].
fn preferred_wait(req: &HttpRequest) -> Option<u64> {
    let prefer = req.header("Prefer")?;
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for p in prefer.split([',', ';']) {
        if let Some(n) = p.trim().strip_prefix("wait=") {
            if let Ok(n) = n.trim().parse::<u64>() {
                return Some(n.min(MAX_WAIT_SECS));
            }
        }
    }
    None
}

/// The card a server serves.
// Made once per server: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum CardSpec {
    /// This card, as is (see [`build_agent_card`]).
    Fixed(Value),
    /// [`build_agent_card`] for each card request, advertising the request's
    /// own origin (`<origin>/`): for hosts that learn their URL only from
    /// requests (edge workers, wasi:http). The origin is the request URL's,
    /// else `http://` and its `Host` header.
    RequestOrigin {
        config: A2aConfig,
        skills: Vec<crate::skills::Skill>,
    },
}

impl From<Value> for CardSpec {
    fn from(card: Value) -> Self {
        CardSpec::Fixed(card)
    }
}

/// The card ready to serve.
enum Card {
    /// Its bytes and their entity tag, computed once per version: 1.0, 0.3.
    Fixed([(Vec<u8>, String); 2]),
    RequestOrigin(Box<A2aConfig>, Vec<crate::skills::Skill>),
}

/// `card` in `shape` (see [`card_for`]), as bytes with their entity tag.
fn card_bytes(card: &Value, shape: Shape) -> (Vec<u8>, String) {
    let body = crate::wire::json::text(&card_for(card, shape)).into_bytes();
    let etag = entity_tag(&body);
    (body, etag)
}

/// The version a card request asks for: its `A2A-Version` (header or
/// query), else 1.0, the card the spec's well-known URI serves (§14.3,
/// and §6.9's example fetch, which sends no version), except at the
/// pre-1.0 path `/.well-known/agent.json`, which only older clients ask.
fn card_shape(req: &HttpRequest, path: &str) -> Shape {
    match rpc::requested_version(req).map(str::trim) {
        Some(v) if v.starts_with("0.") => Shape::V03,
        Some(v) if !v.is_empty() => Shape::V10,
        _ if path == LEGACY_CARD_PATH => Shape::V03,
        _ => Shape::V10,
    }
}

impl Card {
    fn fixed(card: &Value) -> Card {
        Card::Fixed([card_bytes(card, Shape::V10), card_bytes(card, Shape::V03)])
    }

    /// The card in `shape`, and its entity tag.
    fn body(&self, req: &HttpRequest, shape: Shape) -> (Vec<u8>, String) {
        match self {
            Card::Fixed([v10, v03]) => match shape {
                Shape::V10 => v10.clone(),
                Shape::V03 => v03.clone(),
            },
            Card::RequestOrigin(config, skills) => {
                let url = format!("{}/", request_origin(req));
                card_bytes(&build_agent_card(config, skills, &url), shape)
            }
        }
    }

    /// `200` with the card in `shape`, or `304` when the request's
    /// `If-None-Match` names its entity tag; both say how long to cache
    /// it, and that it varies with the version asked.
    fn respond(&self, req: &HttpRequest, shape: Shape, cache_control: &str) -> HttpResponse {
        let (body, etag) = self.body(req, shape);
        let matches = req.header("If-None-Match").is_some_and(|list| {
            list.split(',')
                .map(|t| {
                    let mut t = t.trim();
                    while let Some(rest) = t.strip_prefix("W/") {
                        t = rest;
                    }
                    t
                })
                .any(|t| t == "*" || t == etag)
        });
        let mut resp = if matches {
            HttpResponse {
                status: 304,
                headers: Vec::new(),
                body: Vec::new(),
            }
        } else {
            HttpResponse::json(200, body)
        };
        resp.headers.push(("ETag".into(), etag));
        resp.headers
            .push(("Cache-Control".into(), cache_control.into()));
        resp.headers.push(("Vary".into(), "A2A-Version".into()));
        resp
    }
}

/// A strong entity tag for `body`: its 64-bit hash, quoted.
fn entity_tag(body: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("\"{:016x}\"", h.finish())
}

/// The origin a request was sent to: its URL's, else its `Host` header's.
fn request_origin(req: &HttpRequest) -> String {
    if let Some(origin) = crate::wire::url::origin(&req.url) {
        return origin.to_string();
    }
    let host = req
        .header("Host")
        .map(str::trim)
        .filter(|h| !h.is_empty() && !h.contains(['/', ' ', '"', '\\']))
        .unwrap_or("localhost");
    format!("http://{host}")
}

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
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
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
type TasksLock<H> = <<H as ServerHost>::Locks as Locks>::Lock<Tasks>;
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
            tasks: Lock::new(tasks),
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
            if let Ok(task) = self.fail_abandoned(task).await {
                if task.state == TaskState::Failed {
                    settled.push(task.id);
                }
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

    fn tasks(&self) -> <TasksLock<H> as Lock<Tasks>>::Guard<'_> {
        // Nothing runs user code under this lock, and the machine's maps are
        // whole between its operations.
        self.tasks.lock()
    }

    /// Answers one HTTP request with a whole response: a streamed answer
    /// is read to its end (the task's last event).
    pub async fn handle(self: &Arc<Self>, req: HttpRequest) -> HttpResponse {
        self.serve(req).await.collect().await
    }

    /// Answers one HTTP request: `SendStreamingMessage` / `message/stream`
    /// and `SubscribeToTask` / `tasks/resubscribe` with an SSE stream, the
    /// rest (errors included) with a whole response.
    pub async fn serve(self: &Arc<Self>, req: HttpRequest) -> Reply {
        if !self.host_allowed(req.header("Host")) {
            return Reply::Full(misdirected());
        }
        let origin = req.header("Origin").map(str::to_string);
        if req.method == "POST" && !policy::call_content_type(req.header("Content-Type")) {
            let mut resp = policy::not_json();
            self.add_cors_for(origin.as_deref(), &mut resp);
            return Reply::Full(resp);
        }
        let mut reply = self.route(req).await;
        self.add_cors_for(origin.as_deref(), reply.head_mut());
        reply
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
        match Box::pin(verify::authenticate(auth, &self.host, req)).await {
            Ok(_) => None,
            Err(refusal) => Some(verify::refusal_response(auth, &refusal, true)),
        }
    }

    async fn route(self: &Arc<Self>, req: HttpRequest) -> Reply {
        let Some(card) = &self.card else {
            return Reply::Full(plain(404, "not found"));
        };
        if matches!(req.method.as_str(), "GET" | "HEAD") && path_of(&req.url) == HEALTH_PATH {
            let answer = self.tasks().health.respond();
            return Reply::Full(answer);
        }
        if self.jsonrpc && req.method == "POST" && path_of(&req.url) == "/" {
            // The authentication step: only calls need credentials.
            let caller = match &self.auth {
                None => None,
                // Boxed: the calls of a server without auth keep a small future.
                Some(auth) => match Box::pin(verify::authenticate(auth, &self.host, &req)).await {
                    Ok(principal) => Some(Caller::new(principal)),
                    Err(refusal) => {
                        let v10 = rpc::requested_version(&req).is_some_and(|v| v.starts_with('1'));
                        return Reply::Full(verify::refusal_response(auth, &refusal, v10));
                    }
                },
            };
            return self.json_rpc(&req, caller.as_ref()).await;
        }
        if let Some(under) = self.rest_path(&req) {
            if let Some(reply) = self.rest(&req, &under).await {
                return reply;
            }
        }
        Reply::Full(self.route_plain(&req, card))
    }

    /// The path of a request below the HTTP+JSON mount, if it is under it
    /// (preflights excepted).
    fn rest_path(&self, req: &HttpRequest) -> Option<String> {
        let mount = self.rest.as_ref()?;
        if req.method == "OPTIONS" {
            return None;
        }
        let under = path_of(&req.url).strip_prefix(mount.path.as_str())?;
        (under.len() > 1 && under.starts_with('/')).then(|| under.to_string())
    }

    fn route_plain(&self, req: &HttpRequest, card: &Card) -> HttpResponse {
        let path = path_of(&req.url);
        match (req.method.as_str(), path) {
            ("OPTIONS", _) if self.cors_origin.is_some() => HttpResponse {
                status: 204,
                headers: [
                    (
                        "Access-Control-Allow-Methods".into(),
                        "GET, POST, DELETE, OPTIONS".into(),
                    ),
                    (
                        "Access-Control-Allow-Headers".into(),
                        req.header("Access-Control-Request-Headers")
                            .unwrap_or("Content-Type, A2A-Version, Authorization")
                            .into(),
                    ),
                    ("Access-Control-Max-Age".into(), "86400".into()),
                ]
                .into_iter()
                .chain(self.private_network_preflight(req))
                .collect(),
                body: Vec::new(),
            },
            ("GET" | "HEAD", CARD_PATH | LEGACY_CARD_PATH) => {
                card.respond(req, card_shape(req, path), &self.card_cache_control)
            }
            (_, "/" | CARD_PATH | LEGACY_CARD_PATH) => {
                let mut r = plain(405, "method not allowed");
                r.headers.push((
                    "Allow".into(),
                    if path == "/" { "POST" } else { "GET" }.into(),
                ));
                r
            }
            _ => plain(404, "not found"),
        }
    }

    async fn json_rpc(self: &Arc<Self>, req: &HttpRequest, caller: Option<&Caller>) -> Reply {
        let owner = caller.map(|c| c.owner.as_str());
        let mut waited = None;
        // The shape errors are written in: 1.0 adds `data` details.
        let mut shape = Shape::V03;
        let (id, outcome) = match RpcRequest::parse(req) {
            Ok(call) if Method::from_name(&call.method).is_some_and(Method::streams) => {
                let id = call.id.clone();
                shape = call.shape;
                match self.stream_call(call, owner, req).await {
                    Ok(reply) => return reply,
                    Err(e) => (id, Err(e)),
                }
            }
            Ok(call) => {
                let id = call.id.clone();
                shape = call.shape;
                let is_get = Method::from_name(&call.method) == Some(Method::Get);
                let wait = preferred_wait(req).filter(|_| is_get);
                // Hosts without a timer answer at once, as if no wait was asked.
                let timer = wait.and_then(|secs| {
                    let at = self.host.now_ms().saturating_add(secs * 1000);
                    Some((secs, self.host.sleep_until(at)?))
                });
                let outcome = match timer {
                    Some((secs, timer)) => {
                        waited = Some(secs);
                        self.get_task_waiting(&call, timer, owner)
                            .await
                            .map(Answered::Task)
                    }
                    None => self.dispatch(call, caller, req).await,
                };
                (id, outcome)
            }
            Err((id, err)) => {
                // A client naming a version we lack speaks a later one: details help it.
                if err.code == rpc::VERSION_NOT_SUPPORTED {
                    shape = Shape::V10;
                }
                (id, Err(err))
            }
        };
        let body = match &outcome {
            Ok(result) => serde_json::to_vec(&Envelope {
                jsonrpc: "2.0",
                id: &id,
                result: Some(result),
                error: None,
            }),
            Err(e) => serde_json::to_vec(&Envelope {
                jsonrpc: "2.0",
                id: &id,
                result: None,
                error: Some(ErrorBody {
                    code: e.code,
                    message: &e.message,
                    data: (shape == Shape::V10).then(|| e.details()),
                }),
            }),
        };
        // Serialising plain data into memory cannot fail; keep a valid answer anyway.
        let body = body.unwrap_or_else(|_| {
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#
                .to_vec()
        });
        let mut resp = HttpResponse::json(200, body);
        // A client that sends the A2A media type (1.0.1) gets it back;
        // `application/json` to the others.
        if req
            .header("Content-Type")
            .is_some_and(|t| t.trim_start().starts_with(rest::A2A_JSON))
        {
            resp.headers = vec![("Content-Type".into(), rest::A2A_JSON.into())];
        }
        if let Some(secs) = waited {
            resp.headers
                .push(("Preference-Applied".into(), format!("wait={secs}")));
        }
        Reply::Full(resp)
    }

    /// A streaming method: the stream, or the error to answer before it starts.
    async fn stream_call(
        self: &Arc<Self>,
        call: RpcRequest,
        owner: Owner<'_>,
        req: &HttpRequest,
    ) -> Result<Reply, RpcError> {
        let (first, slot) = match Method::from_name(&call.method) {
            Some(Method::Stream) => {
                let (task, request, _blocking, pending) = self
                    .create_task(&call.params, call.shape, owner, req)
                    .await?;
                let started = self.start(request, task, Follow::Stream, pending).await?;
                started
                    .stream
                    .ok_or_else(|| RpcError::internal("the task ended at once".into()))?
            }
            _ => self.subscribe(&call.params, owner).await?,
        };
        let shape = answer_shape(&call, &first);
        // Not running here but not done: another replica runs it; follow
        // it through the store.
        #[cfg(feature = "replicas")]
        let remote = (slot.is_none() && !machine::ends_stream(first.state))
            .then(|| self.follow_stored(first.clone()));
        #[cfg(not(feature = "replicas"))]
        let remote = None;
        let hooks: Arc<dyn stream::Hooks> = self.clone();
        Ok(Reply::Stream {
            head: stream::stream_head(),
            body: stream::event_body(
                stream::Framing::of(&call),
                shape,
                first,
                slot,
                remote,
                hooks,
            ),
        })
    }

    /// SubscribeToTask: the task as it is now and its later events. A task
    /// that has already ended cannot be followed (UnsupportedOperationError,
    /// as the A2A spec asks).
    async fn subscribe(
        self: &Arc<Self>,
        params: &Value,
        owner: Owner<'_>,
    ) -> Result<(Task, Option<Slot>), RpcError> {
        let id = task_id(params)?;
        let live = {
            let mut tasks = self.tasks();
            // Another caller's running task is not found, before anything follows it.
            if tasks.task(id).is_some_and(|t| !visible(t, owner)) {
                return Err(task_not_found(id));
            }
            tasks.subscribe(id)
        };
        let (task, slot) = match live {
            Some(live) => live,
            // Not running here: the stored task, and nothing to follow.
            None => (self.existing(params, owner).await?, None),
        };
        if task.state.is_terminal() {
            if let Some(slot) = slot {
                self.tasks().drop_stream(slot);
            }
            return Err(RpcError::new(
                rpc::UNSUPPORTED_OPERATION,
                format!(
                    "Task {} is {}: a task in a terminal state cannot be subscribed to",
                    task.id,
                    task.state.as_str()
                ),
            ));
        }
        Ok((task, slot))
    }

    /// The events of a stored task running on another replica, from the
    /// version `last`: replayed from the store's event log
    /// ([`TaskStore::events_after`]) with `last`'s version as the cursor,
    /// then followed at each change the store tells of (or `store_poll`
    /// finds), until the task stops. The cursor moves past each event
    /// told, so none is told twice and none written after `last` is
    /// missed. A store that keeps no log is followed by comparing each
    /// version read with the one before it (chunks saved together merge).
    #[cfg(feature = "replicas")]
    fn follow_stored(
        self: &Arc<Self>,
        last: Task,
    ) -> crate::host::transport::BoxStream<'static, StreamEvent> {
        let cursor = last.revision.version;
        let state = (
            self.clone(),
            last,
            cursor,
            std::collections::VecDeque::new(),
            false,
        );
        Box::pin(futures_util::stream::unfold(
            state,
            |(server, mut last, mut cursor, mut queue, mut done)| async move {
                loop {
                    if let Some(event) = queue.pop_front() {
                        return Some((event, (server, last, cursor, queue, done)));
                    }
                    if done {
                        return None;
                    }
                    // Watch before reading, so a change in between is not missed.
                    let changed = server.watched(&last.id);
                    match server.store.events_after(&last.id, cursor).await {
                        Ok(Some(events)) if !events.is_empty() => {
                            for (version, event) in events {
                                cursor = cursor.max(version);
                                done = event.state().is_some_and(machine::ends_stream);
                                queue.push_back(event);
                                if done {
                                    break;
                                }
                            }
                            continue;
                        }
                        // Nothing logged since: gone, or stopped by a
                        // write that logged nothing; else wait.
                        Ok(Some(_)) => match server.store.get(&last.id).await {
                            Ok(None) => return None,
                            Ok(Some(now))
                                if now.revision.version > cursor
                                    && machine::ends_stream(now.state) =>
                            {
                                queue.push_back(machine::status(
                                    &now,
                                    now.state,
                                    now.status_message.clone(),
                                    now.updated_ms,
                                ));
                                done = true;
                                continue;
                            }
                            _ => {}
                        },
                        // No log: compare versions.
                        Ok(None) => match server.store.get(&last.id).await {
                            Ok(Some(now)) if now.revision.version > last.revision.version => {
                                queue.extend(stream::changes(&last, &now));
                                done = machine::ends_stream(now.state);
                                last = now;
                                continue;
                            }
                            // Gone.
                            Ok(None) => return None,
                            // Unchanged, or unreadable for now: wait for the next change.
                            _ => {}
                        },
                        // Unreadable for now: wait for the next change.
                        Err(_) => {}
                    }
                    let poll = server.store_poll_ms.and_then(|ms| {
                        server
                            .host
                            .sleep_until(server.host.now_ms().saturating_add(ms))
                    });
                    match poll {
                        Some(poll) => {
                            futures_util::future::select(Box::pin(changed), poll).await;
                        }
                        None => changed.await,
                    }
                }
            },
        ))
    }

    /// Waits on `slot` (from [`Tasks::wait`]); dropping the future stops waiting.
    fn waited(&self, slot: Slot) -> impl Future<Output = Waited> + '_ {
        struct Wait<'a, S: TaskStore, H: ServerHost, F: Fulfiller> {
            server: &'a A2aServer<S, H, F>,
            slot: Slot,
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Future for Wait<'_, S, H, F> {
            type Output = Waited;
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Waited> {
                self.server.tasks().poll_wait(self.slot, cx)
            }
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Wait<'_, S, H, F> {
            fn drop(&mut self) {
                self.server.tasks().drop_wait(self.slot);
            }
        }
        Wait { server: self, slot }
    }

    /// Ready once the stored task `id` changes ([`A2aServer::store_changed`]);
    /// dropping the future stops watching.
    #[cfg(feature = "replicas")]
    fn watched(&self, id: &str) -> impl Future<Output = ()> + MaybeSend + '_ {
        struct Watching<'a, S: TaskStore, H: ServerHost, F: Fulfiller> {
            server: &'a A2aServer<S, H, F>,
            slot: Slot,
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Future for Watching<'_, S, H, F> {
            type Output = ();
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                self.server.tasks().poll_watch(self.slot, cx)
            }
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Watching<'_, S, H, F> {
            fn drop(&mut self) {
                self.server.tasks().drop_watch(self.slot);
            }
        }
        let slot = self.tasks().watch(id);
        Watching { server: self, slot }
    }

    /// GetTask that holds the answer until `timer` ends while the task is
    /// still running, so a caller sees it settle at once instead of at its next poll.
    async fn get_task_waiting(
        self: &Arc<Self>,
        call: &RpcRequest,
        timer: BoxFuture<'static, ()>,
        owner: Owner<'_>,
    ) -> Result<Answer, RpcError> {
        let id = call
            .params
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // Wait before reading, so a task settling in between is not missed.
        let settled = self.tasks().wait(id, Until::Stops).map(|s| self.waited(s));
        // Not running here: watch the store for its change instead.
        #[cfg(feature = "replicas")]
        let mut watch = settled.is_none().then(|| self.watched(id));
        let history = validate::history_length(&call.params, "historyLength")?;
        // Another caller's task is not found: the waiter taken is dropped unused.
        let task = self.existing(&call.params, owner).await?;
        if machine::ends_stream(task.state) {
            return Ok(Answer::about(call, task, history));
        }
        let woke = match settled {
            Some(settled) => match futures_util::future::select(Box::pin(settled), timer).await {
                futures_util::future::Either::Left((woke, _)) => Some(woke),
                futures_util::future::Either::Right(_) => None,
            },
            // Running elsewhere (another replica) or nowhere: woken by a
            // change the store tells of, or at each `store_poll`, until the
            // timer ends.
            #[cfg(feature = "replicas")]
            None => {
                let mut timer = timer;
                loop {
                    let changed = watch.take().unwrap_or_else(|| self.watched(id));
                    let poll = self.store_poll_ms.and_then(|ms| {
                        self.host.sleep_until(self.host.now_ms().saturating_add(ms))
                    });
                    let woken = async move {
                        match poll {
                            Some(poll) => {
                                futures_util::future::select(Box::pin(changed), poll).await;
                            }
                            None => changed.await,
                        }
                    };
                    match futures_util::future::select(Box::pin(woken), &mut timer).await {
                        futures_util::future::Either::Left(_) => {
                            watch = Some(self.watched(id));
                            let task = self.existing(&call.params, owner).await?;
                            if machine::ends_stream(task.state) {
                                return Ok(Answer::about(call, task, history));
                            }
                        }
                        futures_util::future::Either::Right(_) => break None,
                    }
                }
            }
            // Not running here: nothing will change it before the timer ends.
            #[cfg(not(feature = "replicas"))]
            None => {
                timer.await;
                None
            }
        };
        match woke {
            Some(Waited::Saved(task)) => Ok(Answer::about(call, task, history)),
            Some(Waited::SaveFailed(e)) => Err(not_stored(&e)),
            Some(Waited::Released) | None => {
                let task = self.existing(&call.params, owner).await?;
                Ok(Answer::about(call, task, history))
            }
        }
    }

    async fn dispatch(
        self: &Arc<Self>,
        call: RpcRequest,
        caller: Option<&Caller>,
        req: &HttpRequest,
    ) -> Result<Answered, RpcError> {
        let shape = call.shape;
        let owner = caller.map(|c| c.owner.as_str());
        match Method::from_name(&call.method) {
            Some(Method::Send) => self
                .send_message(&call.params, shape, owner, req)
                .await
                .map(Answered::Task),
            Some(Method::Get) => {
                let history = validate::history_length(&call.params, "historyLength")?;
                let task = self.existing(&call.params, owner).await?;
                let answer = Answer::about(&call, task, history);
                Ok(Answered::Task(answer))
            }
            Some(Method::Cancel) => {
                let mut answer = self.cancel(&call.params, shape, owner).await?;
                answer.shape = answer_shape(&call, &answer.task);
                Ok(Answered::Task(answer))
            }
            Some(Method::List) => self
                .list(&call.params, shape, owner)
                .await
                .map(Answered::Page),
            #[cfg(feature = "push")]
            Some(Method::PushConfig) if self.push.is_some() => self
                .push_config(&call, owner)
                .await
                .map(|v| Answered::Value(Box::new(v))),
            // The card says pushNotifications: false.
            Some(Method::PushConfig) => Err(push_not_supported()),
            Some(Method::ExtendedCard) => self
                .extended_card(caller, req, shape)
                .map(|v| Answered::Value(Box::new(v))),
            // Streaming methods are answered before dispatch.
            Some(Method::Stream | Method::Subscribe) | None => Err(RpcError::new(
                rpc::METHOD_NOT_FOUND,
                format!("Method not found: {}", call.method),
            )),
        }
    }

    /// GetExtendedAgentCard. With auth on, the caller is authenticated (the
    /// step before any call) and gets the card, which then declares
    /// `extendedAgentCard`: the same card as the public one (nothing varies
    /// by caller or scope yet). Without auth the card declares none: -32004,
    /// not -32007 (that one is for a declared card not configured).
    /// The card is written in the call's version, as the public one is for
    /// the version a card request asks.
    fn extended_card(
        &self,
        caller: Option<&Caller>,
        req: &HttpRequest,
        shape: Shape,
    ) -> Result<Value, RpcError> {
        match (caller, &self.card) {
            (Some(_), Some(card)) => {
                let (body, _) = card.body(req, shape);
                serde_json::from_slice(&body)
                    .map_err(|_| RpcError::internal("the card is not JSON".into()))
            }
            _ => Err(RpcError::new(
                rpc::UNSUPPORTED_OPERATION,
                "This agent has no extended agent card",
            )),
        }
    }

    /// ListTasks: one page of the stored tasks the params ask for.
    async fn list(
        &self,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
    ) -> Result<list::Page, RpcError> {
        let mut query = list::ListQuery::parse(params)?;
        // The caller's tasks only, chosen by the store as it lists.
        query.filter.owner = owner.map(str::to_string);
        // A store that pages (in SQL) reads one page and its count.
        let after = query.after.as_ref().map(|(ms, id)| (*ms, id.as_str()));
        match self
            .store
            .list_page(&query.filter, after, query.page_size + 1)
            .await
        {
            Ok(Some((tasks, total))) => return Ok(query.paged(tasks, total, shape)),
            Ok(None) => {}
            Err(e) => return Err(RpcError::internal(format!("the task store failed: {e}"))),
        }
        match self.store.list(&query.filter).await {
            Ok(Some(tasks)) => Ok(query.page(tasks, shape)),
            Ok(None) => Err(RpcError::new(
                rpc::UNSUPPORTED_OPERATION,
                "this agent's task store cannot list tasks",
            )),
            Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
        }
    }

    /// The stored task `params.id` names.
    async fn existing(&self, params: &Value, owner: Owner<'_>) -> Result<Task, RpcError> {
        self.stored(task_id(params)?, owner).await
    }

    /// The stored task `id`: unknown is -32001, and so is another caller's
    /// (the same answer, so nothing tells that it exists).
    async fn stored(&self, id: &str, owner: Owner<'_>) -> Result<Task, RpcError> {
        match self.store.get(id).await {
            Ok(Some(task)) if !visible(&task, owner) => Err(task_not_found(id)),
            Ok(Some(task)) if self.abandoned(&task) => Box::pin(self.fail_abandoned(task)).await,
            Ok(Some(task)) => Ok(task),
            Ok(None) => Err(task_not_found(id)),
            Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
        }
    }

    /// The task a follow-up names, as its caller last heard of it. A
    /// stream tells of a state as it happens and the store a moment later,
    /// so a task whose question or outcome is decided here but still being
    /// saved is waited for; one still working is refused as such; any
    /// other is read from the store.
    async fn to_continue(&self, id: &str, owner: Owner<'_>) -> Result<Task, RpcError> {
        let slot = {
            let mut tasks = self.tasks();
            match tasks.task(id) {
                Some(task) if !visible(task, owner) => return Err(task_not_found(id)),
                Some(task) if !machine::ends_stream(task.state) => return Ok(task.clone()),
                Some(_) => tasks.wait(id, Until::Stops),
                None => None,
            }
        };
        if let Some(slot) = slot {
            match self.waited(slot).await {
                Waited::Saved(task) => return Ok(task),
                Waited::SaveFailed(e) => return Err(not_stored(&e)),
                Waited::Released => {}
            }
        }
        self.stored(id, owner).await
    }

    /// Whether [`ServerOptions::interrupted_after`] says the fulfilment of
    /// this stored task is gone: still `submitted`/`working`, silent that
    /// long, and not running here.
    /// Also: its lease ([`ServerOptions::lease`]) ran out.
    fn abandoned(&self, task: &Task) -> bool {
        if !task.state.is_active() {
            return false;
        }
        let Some(now) = self.host.unix_ms() else {
            return false;
        };
        let silent = match (
            &task.revision.lease,
            self.interrupted_after_ms,
            task.updated_ms,
        ) {
            (Some(_), _, _) => self.lease_expired(task, now),
            (None, Some(after_ms), Some(updated)) => now.saturating_sub(updated) >= after_ms,
            _ => false,
        };
        silent && !self.tasks().is_running(&task.id)
    }

    /// Fails an [`abandoned`](Self::abandoned) task as [`INTERRUPTED`] and
    /// saves it so. Boxed where it is awaited: it is rare, and inlined it
    /// would grow every future that reads a task.
    ///
    /// A compare-and-swap: if the task changed meanwhile (its replica
    /// renewed the lease, another settled it), the stored task is the answer.
    async fn fail_abandoned(&self, mut task: Task) -> Result<Task, RpcError> {
        let silent_s = task.updated_ms.map_or(0, |u| {
            self.host.unix_ms().unwrap_or(u).saturating_sub(u) / 1000
        });
        let holder = task.revision.lease.take().map(|l| l.holder);
        mark_interrupted(&mut task, self.host.unix_ms());
        task.revision.version += 1;
        let logged = [machine::status(
            &task,
            task.state,
            task.status_message.clone(),
            task.updated_ms,
        )];
        match self.store.save_with_events(&task, &logged).await {
            Ok(()) => {}
            Err(e) if e.is_conflict() => {
                return match self.store.get(&task.id).await {
                    Ok(Some(stored)) => Ok(stored),
                    Ok(None) => Err(task_not_found(&task.id)),
                    Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
                };
            }
            Err(e) => return Err(not_stored(e.message())),
        }
        self.store_changed(&task.id, Some(task.revision.version));
        self.host.report(&match holder {
            Some(holder) => format!(
                "task {}: the lease of replica {holder} ran out (no progress for {silent_s} s); marked failed",
                task.id
            ),
            None => format!(
                "task {} made no progress for {silent_s} s and is not running here; marked failed",
                task.id
            ),
        });
        Ok(task)
    }

    async fn send_message(
        self: &Arc<Self>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
        req: &HttpRequest,
    ) -> Result<Answer, RpcError> {
        let (task, request, blocking, pending) =
            self.create_task(params, shape, owner, req).await?;
        let history = params
            .get("configuration")
            .map(|c| validate::history_length(c, "configuration.historyLength"))
            .transpose()?
            .flatten();
        let follow = if blocking { Follow::Wait } else { Follow::None };
        let id = task.id.clone();
        let started = self.start(request, task.clone(), follow, pending).await?;
        let task = match started.wait {
            Some(slot) => match self.waited(slot).await {
                Waited::Saved(settled) => settled,
                Waited::SaveFailed(e) => return Err(not_stored(&e)),
                // Released without settling (the job was dropped): answer what is stored now.
                Waited::Released => self.store.get(&id).await.ok().flatten().unwrap_or(task),
            },
            None => task,
        };
        // 1.0 wraps a SendMessage result: `{"task": …}`; 0.3 answers the bare task.
        Ok(Answer {
            wrap: shape == Shape::V10,
            ..Answer::task(task, shape, history)
        })
    }

    /// Validates a SendMessage's params and makes its task (not yet
    /// stored): a new one (submitted), or the task the message names
    /// continued with it (working); what to fulfil; and whether the caller
    /// asked to block. The task's trace is the request's `traceparent`
    /// (a new span of it), else the continued task's own.
    async fn create_task(
        self: &Arc<Self>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
        req: &HttpRequest,
    ) -> Result<(Task, FulfilRequest, bool, PendingPush), RpcError> {
        let msg = validate::check_send(params)?;
        let mut user = Message::from_value(msg)
            .unwrap_or_else(|| Message::agent_text(String::new(), String::new()));
        user.role = Role::User;
        if user.parts.is_empty() {
            return Err(RpcError::invalid_field(
                "message.parts",
                "has no part with content",
            ));
        }
        let config = params.get("configuration");
        let flag = |k: &str| config.and_then(|c| c.get(k)).and_then(Value::as_bool);
        // 1.0 blocks unless returnImmediately; 0.3 blocks unless blocking:false.
        let blocking =
            !(flag("returnImmediately") == Some(true) || flag("blocking") == Some(false));
        let skill = msg
            .get("metadata")
            .and_then(|m| m.get("skill"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if user.message_id.is_empty() {
            user.message_id = self.host.new_id();
        }
        // Files and data reach a fulfiller that reads text as one line each.
        let mut text = String::new();
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        for (i, part) in user.parts.iter().enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&part.describe());
        }
        // Stored without ids of its own: on the wire it carries the task's.
        // Some clients send empty ids for "none" (protobuf defaults).
        let present = |id: Option<String>| id.filter(|s| !s.is_empty());
        let (task_id, context_id) = (
            present(user.task_id.take()),
            present(user.context_id.take()),
        );
        // A context the caller names may have earlier turns; a fresh one has none.
        let read_context = task_id.is_some() || context_id.is_some();
        let trace = crate::TraceContext::from_headers(&req.headers)
            .map(|caller| Box::new(caller.child(&self.host.new_id())));
        let mut task = match task_id {
            Some(task_id) => {
                let waiting = self.to_continue(&task_id, owner).await?;
                if let Some(refused) =
                    conversation::refuse_continuation(&waiting, context_id.as_deref())
                {
                    return Err(refused);
                }
                conversation::continued(waiting, user, self.host.unix_ms())
            }
            None => Task {
                id: self.host.new_id(),
                context_id: context_id.unwrap_or_else(|| self.host.new_id()),
                state: TaskState::Submitted,
                status_message: None,
                updated_ms: self.host.unix_ms(),
                artifacts: Vec::new(),
                history: vec![user],
                dialect: shape,
                owner: owner.map(str::to_string),
                trace: None,
                revision: Default::default(),
            },
        };
        match trace {
            Some(trace) => task.trace = Some(trace),
            // A turn with no caller's context continues the task's trace as
            // a span of its own (its model calls then get ids of their own).
            None => {
                if let Some(earlier) = task.trace.take() {
                    task.trace = Some(Box::new(earlier.child(&self.host.new_id())));
                }
            }
        }
        // A continued task's webhook is stored at once; a new one's after
        // the task's first save.
        #[cfg(feature = "push")]
        let pending = {
            let continued = (task.state != TaskState::Submitted).then_some(task.owner.as_deref());
            self.push_on_send(params, &task.id, shape, continued)
                .await?
        };
        #[cfg(not(feature = "push"))]
        let pending = self.push_on_send(params, &task.id, shape)?;
        let history = self.conversation(&task, read_context).await;
        let request = FulfilRequest {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            text,
            skill,
            history,
            trace: task.trace.as_deref().cloned(),
        };
        Ok((task, request, blocking, pending))
    }

    /// The turns before `task`'s last message: its earlier turns, after
    /// those of the other tasks of its context in the store (read only
    /// with `read_context`: a fresh context has none).
    async fn conversation(&self, task: &Task, read_context: bool) -> Vec<Message> {
        let own = &task.history[..task.history.len().saturating_sub(1)];
        let mut tasks = Vec::new();
        if read_context {
            // The caller's own earlier turns only: a context id another
            // caller also uses reads none of theirs.
            let filter = TaskFilter {
                context_id: Some(task.context_id.clone()),
                owner: task.owner.clone(),
                ..TaskFilter::default()
            };
            // A store that cannot list keeps no memory beyond the task itself.
            if let Ok(Some(found)) = self.store.list(&filter).await {
                tasks = found;
            }
            tasks.retain(|t| t.id != task.id && filter.matches(t));
        }
        let mut turns = context_turns(tasks, MAX_CONTEXT_MESSAGES);
        turns.extend(own.iter().cloned());
        let skip = turns.len().saturating_sub(MAX_CONTEXT_MESSAGES);
        turns.drain(..skip);
        turns
    }

    /// Takes the new `task` as running, stores it (submitted), and hands its
    /// fulfilment to the host; with `follow`, a stream of its events or a
    /// waiter taken before it starts (so nothing is missed).
    ///
    /// The task is in [`Tasks`] before its first save begins, so a CancelTask
    /// arriving at any moment goes through the machine, never around it.
    async fn start(
        self: &Arc<Self>,
        request: FulfilRequest,
        mut task: Task,
        follow: Follow,
        pending: PendingPush,
    ) -> Result<Started, RpcError> {
        let id = request.task_id.clone();
        let answer_id = self.host.new_id();
        let mut started = Started::default();
        {
            let mut tasks = self.tasks();
            // The version after the one read (a new task: 1), and this
            // replica's lease: a continued task taken by two replicas at
            // once is stored by one only.
            task.revision.version += 1;
            task.revision.lease = tasks.lease_for(task.state, self.host.unix_ms());
            if !tasks.has_room() {
                let (running, queued) = tasks.limits();
                return Err(RpcError::internal(format!(
                    "the agent is busy ({running} tasks running, {queued} waiting); try again later"
                )));
            }
            // A task is continued only while it waits; two answers racing
            // to continue it: the first one does.
            if !tasks.start(
                task.clone(),
                answer_id,
                request.skill.clone(),
                request.text.clone(),
            ) {
                return Err(conversation::running(&id, TaskState::Working.as_str()));
            }
            match follow {
                Follow::Stream => started.stream = tasks.subscribe(&id),
                Follow::Wait => started.wait = tasks.wait(&id, Until::Stops),
                Follow::None => {}
            }
        }
        if let Err(e) = self.store.save(&task).await {
            self.tasks().abandon(&id);
            if e.is_conflict() {
                // Another replica continued (or settled) it first.
                return Err(conversation::running(&id, TaskState::Working.as_str()));
            }
            self.save_failed(&format!("task {id}: saving state submitted failed: {e}"));
            return Err(RpcError::internal(format!(
                "the task could not be stored: {e}"
            )));
        }
        self.save_worked();
        // A new task's webhooks (set on its SendMessage) are stored once the
        // task is: a send refused before it leaves nothing behind.
        #[cfg(feature = "push")]
        if let Err(e) = self.store_new_push(pending, task.owner.as_deref()).await {
            self.host.report(&format!("task {id}: {}", e.message));
        }
        #[cfg(not(feature = "push"))]
        let _ = pending;
        let admitted = {
            let mut tasks = self.tasks();
            // A continued task is stored working already.
            let submitted = task.state == TaskState::Submitted;
            let version = task.revision.version;
            let after = tasks.saved(task, Ok(()));
            tasks.store_changed(&id, Some(version));
            let admitted = tasks.is_admitted(&id);
            if admitted && submitted {
                self.working(&mut tasks, &id);
            }
            drop(tasks);
            self.after_save(after);
            admitted
        };
        // A task past the cap waits, submitted, for its job to be let in.
        let (work, request) = if admitted {
            (Some(self.fulfil(request)), None)
        } else {
            (None, Some(request))
        };
        self.host.spawn(Box::pin(Job {
            server: self.clone(),
            id,
            request,
            work,
            retry: None,
            save: None,
            check: None,
            renew: None,
            poll: None,
            finished: false,
        }));
        Ok(started)
    }

    /// The task's fulfilment starts: it is `working`.
    fn working(&self, tasks: &mut Tasks, id: &str) {
        let timestamp = self.host.unix_ms().map(crate::model::time::format_rfc3339);
        tasks.progress(id, |p| {
            StreamEvent::Status(StatusUpdate {
                task_id: p.task_id.to_string(),
                context_id: p.context_id.to_string(),
                state: TaskState::Working,
                timestamp,
                message: None,
            })
        });
    }

    fn fulfil(
        self: &Arc<Self>,
        request: FulfilRequest,
    ) -> BoxFuture<'static, Result<String, String>> {
        let hooks: Arc<dyn stream::Hooks> = self.clone();
        let id = request.task_id.clone();
        self.fulfiller.fulfil(request, Progress::new(hooks, &id))
    }

    /// Reports what a save left to do: a problem, the `on_task` hook.
    fn after_save(&self, after: AfterSave) {
        if let Some(problem) = after.problem {
            self.save_failed(&problem);
        }
        if let Some((task, info)) = after.settled {
            self.host.on_task(TaskEvent {
                trace_id: task.trace.as_ref().map(|t| t.trace_id_hex()),
                id: task.id,
                skill: info.skill,
                task: info.text,
                result: info.result,
                state: task.state,
            });
        }
    }

    async fn cancel(
        self: &Arc<Self>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
    ) -> Result<Answer, RpcError> {
        let id = task_id(params)?;
        let not_cancelable = |task: &Task| {
            RpcError::new(
                rpc::TASK_NOT_CANCELABLE,
                format!(
                    "Task cannot be canceled: {} is {}",
                    task.id,
                    task.state.as_str()
                ),
            )
        };
        // The machine first: a task it runs is canceled through it, whatever
        // the store says at this instant.
        let running = {
            let mut tasks = self.tasks();
            // Another caller's task is not found, and is never canceled.
            if tasks.task(id).is_some_and(|t| !visible(t, owner)) {
                return Err(task_not_found(id));
            }
            if !tasks.is_running(id) {
                None
            } else if tasks.cancel(id, self.host.unix_ms()) {
                tasks.wait(id, Until::Terminal).map(Some)
            } else {
                Some(None)
            }
        };
        match running {
            // Not running here (stored before a restart, or already ended:
            // a task leaves the machine only once its terminal state is
            // saved, so the store is read after that). Settle what is stored.
            // Running elsewhere, the canceled state is stored over the
            // version read (compare and swap): the replica running it sees
            // it and stops, and its later outcome can never overwrite it.
            None => {
                let mut conflicts = 0;
                let task = loop {
                    let mut task = self.existing(params, owner).await?;
                    if task.state.is_terminal() {
                        return Err(not_cancelable(&task));
                    }
                    task.state = TaskState::Canceled;
                    task.updated_ms = self.host.unix_ms().or(task.updated_ms);
                    task.revision.version += 1;
                    task.revision.lease = None;
                    let logged = [machine::status(
                        &task,
                        task.state,
                        task.status_message.clone(),
                        task.updated_ms,
                    )];
                    match self.store.save_with_events(&task, &logged).await {
                        Ok(()) => break task,
                        // Changed meanwhile: read it again and decide again.
                        Err(e) if e.is_conflict() && conflicts < CONFLICT_RETRIES => {
                            conflicts += 1;
                        }
                        Err(e) => {
                            if !e.is_conflict() {
                                self.save_failed(&format!(
                                    "task {id}: saving state canceled failed: {e}"
                                ));
                            }
                            return Err(not_stored(e.message()));
                        }
                    }
                };
                self.save_worked();
                self.store_changed(id, Some(task.revision.version));
                self.notify(&task);
                let info = machine::RunInfo {
                    skill: None,
                    text: task.history.first().map(Message::text).unwrap_or_default(),
                    result: None,
                };
                self.after_save(AfterSave {
                    settled: Some((task.clone(), info)),
                    ..AfterSave::default()
                });
                Ok(Answer::task(task, shape, None))
            }
            // Its outcome was decided first: it is finishing.
            Some(None) => Err(RpcError::new(
                rpc::TASK_NOT_CANCELABLE,
                format!("Task cannot be canceled: {id} is finishing"),
            )),
            // The answer is the canceled state as stored.
            Some(Some(slot)) => match self.waited(slot).await {
                Waited::Saved(task) => Ok(Answer::task(task, shape, None)),
                Waited::SaveFailed(e) => Err(not_stored(&e)),
                Waited::Released => Ok(Answer::task(
                    self.existing(params, owner).await?,
                    shape,
                    None,
                )),
            },
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

/// What a new task's caller follows.
enum Follow {
    None,
    /// Its events (SendStreamingMessage).
    Stream,
    /// Its outcome (a blocking SendMessage).
    Wait,
}

#[derive(Default)]
struct Started {
    stream: Option<(Task, Option<Slot>)>,
    wait: Option<Slot>,
}

/// A new task's webhook from its SendMessage, stored after the task's first save.
#[cfg(feature = "push")]
type PendingPush = Option<push::PushConfig>;
#[cfg(not(feature = "push"))]
type PendingPush = Option<std::convert::Infallible>;

/// PushNotificationNotSupportedError: the card says `pushNotifications: false`.
fn push_not_supported() -> RpcError {
    RpcError::new(
        rpc::PUSH_NOTIFICATION_NOT_SUPPORTED,
        "Push notifications are not supported by this agent",
    )
}

/// The error for a state the store did not take: never acknowledged.
fn not_stored(e: &str) -> RpcError {
    RpcError::internal(format!("the task's new state could not be stored: {e}"))
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

type SaveFuture = BoxFuture<'static, (machine::Due, Result<(), StoreError>)>;
type ReadFuture = BoxFuture<'static, Result<Option<Task>, StoreError>>;

/// The background job of one task: runs its fulfilment and saves every
/// state the machine says is due, one save at a time, until the terminal
/// state is saved.
struct Job<S: TaskStore, H: ServerHost, F: Fulfiller> {
    server: Arc<A2aServer<S, H, F>>,
    id: String,
    /// A task waiting for a place: what to fulfil once let in.
    request: Option<FulfilRequest>,
    /// The wait before saving a refused terminal state again.
    retry: Option<BoxFuture<'static, ()>>,
    work: Option<BoxFuture<'static, Result<String, String>>>,
    save: Option<SaveFuture>,
    /// A read of the stored task, to reconcile with (after a conflict or a
    /// change elsewhere).
    check: Option<ReadFuture>,
    /// The next lease renewal, and the next look at the store.
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    renew: Option<BoxFuture<'static, ()>>,
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    poll: Option<BoxFuture<'static, ()>>,
    finished: bool,
}

/// Polls the fulfilment; where panics unwind, a panicking one fails its
/// task instead of leaving it `working` forever. (With `panic = "abort"`,
/// as in the wasm build, a panic ends the whole instance anyway.)
fn poll_work(
    work: &mut BoxFuture<'static, Result<String, String>>,
    cx: &mut Context<'_>,
) -> Poll<Result<String, String>> {
    #[cfg(panic = "unwind")]
    {
        let poll = std::panic::AssertUnwindSafe(|| work.as_mut().poll(cx));
        std::panic::catch_unwind(poll).unwrap_or_else(|_| Poll::Ready(Err(CRASHED.to_string())))
    }
    #[cfg(not(panic = "unwind"))]
    {
        work.as_mut().poll(cx)
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Future for Job<S, H, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let job = self.get_mut();
        let server = job.server.clone();
        loop {
            let mut moved = false;
            // A change elsewhere (or a conflict): read the task and reconcile.
            if job.check.is_none() && job.save.is_none() && server.tasks().take_check(&job.id) {
                let s = server.clone();
                let id = job.id.clone();
                job.check = Some(Box::pin(async move { s.store.get(&id).await }));
            }
            if let Some(check) = job.check.as_mut() {
                if let Poll::Ready(read) = check.as_mut().poll(cx) {
                    job.check = None;
                    match read {
                        Ok(stored) => server.tasks().reconcile(&job.id, stored),
                        Err(e) => server
                            .host
                            .report(&format!("task {}: reading it again failed: {e}", job.id)),
                    }
                    moved = true;
                }
            }
            // Saves first, so each state reaches the store in order.
            if job.save.is_none() && job.check.is_none() {
                let due = server.tasks().next_save(&job.id, server.host.unix_ms());
                if let Some(due) = due {
                    let s = server.clone();
                    job.save = Some(Box::pin(async move {
                        let result = s.store.save_with_events(&due.task, &due.events).await;
                        (due, result)
                    }));
                }
            }
            if let Some(save) = job.save.as_mut() {
                if let Poll::Ready((due, result)) = save.as_mut().poll(cx) {
                    job.save = None;
                    let task = due.task;
                    if result.is_err() {
                        // Not stored: its events go with the next save.
                        server.tasks().unlogged(&task.id, due.events);
                    }
                    if matches!(&result, Err(e) if e.is_conflict()) {
                        // Another replica wrote it: nothing of ours was stored.
                        server.tasks().conflicted(&task);
                        continue;
                    }
                    if result.is_ok() {
                        server.save_worked();
                        if !due.renewal {
                            server.notify(&task);
                        }
                        server
                            .tasks()
                            .store_changed(&task.id, Some(task.revision.version));
                    }
                    let mut after = server
                        .tasks()
                        .saved(task, result.map_err(|e| e.to_string()));
                    if let Some(n) = after.retry.take() {
                        let at = server
                            .host
                            .now_ms()
                            .saturating_add(machine::retry_delay_ms(n));
                        match server.host.sleep_until(at) {
                            Some(timer) => job.retry = Some(timer),
                            // No timer to wait with: retry at once.
                            None => server.tasks().retry_now(&job.id),
                        }
                    }
                    server.after_save(after);
                    moved = true;
                }
            }
            if let Some(retry) = job.retry.as_mut() {
                if retry.as_mut().poll(cx).is_ready() {
                    job.retry = None;
                    server.tasks().retry_now(&job.id);
                    moved = true;
                }
            }
            if job.request.is_some() {
                let mut tasks = server.tasks();
                match tasks.poll_admitted(&job.id, cx) {
                    machine::Admitted::Waiting => {}
                    machine::Admitted::Never => {
                        tasks.work_ended(&job.id);
                        job.request = None;
                        moved = true;
                    }
                    machine::Admitted::Yes => {
                        server.working(&mut tasks, &job.id);
                        drop(tasks);
                        job.work = job.request.take().map(|r| server.fulfil(r));
                        moved = true;
                    }
                }
            }
            if let Some(work) = job.work.as_mut() {
                let stop = server.tasks().job_poll(&job.id, cx);
                if stop {
                    // Canceled: the cancel has decided the outcome.
                    job.work = None;
                    server.tasks().work_ended(&job.id);
                } else if let Poll::Ready(outcome) = poll_work(work, cx) {
                    job.work = None;
                    let result = match &outcome {
                        Ok(text) | Err(text) => text.clone(),
                    };
                    let message_id = server.host.new_id();
                    let mut tasks = server.tasks();
                    tasks.work_ended(&job.id);
                    let now = server.host.unix_ms();
                    let events = tasks.outcome_events(&job.id, outcome, message_id, now);
                    // A cancel that raced the answer wins: it decided first.
                    tasks.decide(&job.id, events, Some(result));
                    moved = true;
                }
            }
            if job.save.is_none() && job.check.is_none() && server.tasks().finished(&job.id) {
                job.finished = true;
                return Poll::Ready(());
            }
            // The lease is renewed a third of the way through; the store is
            // looked at every `store_poll` in case a change was not told.
            #[cfg(feature = "replicas")]
            job.timers(&server, cx, &mut moved);
            if !moved {
                return Poll::Pending;
            }
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Job<S, H, F> {
    #[cfg(feature = "replicas")]
    fn timers(&mut self, server: &Arc<A2aServer<S, H, F>>, cx: &mut Context<'_>, moved: &mut bool) {
        let job = self;
        let lease_ms = server.tasks().lease_ms();
        if let Some(ms) = lease_ms {
            if job.renew.is_none() {
                job.renew = server.host.sleep_until(server.host.now_ms() + ms / 3);
            }
            if let Some(renew) = job.renew.as_mut() {
                if renew.as_mut().poll(cx).is_ready() {
                    job.renew = None;
                    server.tasks().renew(&job.id);
                    *moved = true;
                }
            }
        }
        if let Some(ms) = server.store_poll_ms {
            if job.poll.is_none() {
                job.poll = server.host.sleep_until(server.host.now_ms() + ms);
            }
            if let Some(poll) = job.poll.as_mut() {
                if poll.as_mut().poll(cx).is_ready() {
                    job.poll = None;
                    server.tasks().store_changed(&job.id, None);
                    *moved = true;
                }
            }
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Job<S, H, F> {
    /// Dropped before its end (the host shut down): nobody is left waiting.
    fn drop(&mut self) {
        if !self.finished {
            self.server.tasks().abandon(&self.id);
        }
    }
}

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
    fn unix_ms(&self) -> Option<u64> {
        self.host.unix_ms()
    }
}

/// The path of a request URL (absolute URLs accepted), without query or fragment.
fn path_of(url: &str) -> &str {
    let path = match crate::wire::url::origin(url) {
        Some(o) => url.get(o.len()..).unwrap_or(url),
        None => url,
    };
    path.split(['?', '#'])
        .next()
        .filter(|p| !p.is_empty())
        .unwrap_or("/")
}

/// `params.id`, the task a call names.
fn task_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("params.id must be a string"))
}

/// The shape to answer a call about `task` in: the version the call
/// names, else the one the task was made in (a 1.0 client that omits
/// `A2A-Version` reads its own tasks in 1.0 shapes).
fn answer_shape(call: &RpcRequest, task: &Task) -> Shape {
    if call.versioned {
        call.shape
    } else {
        task.dialect
    }
}

/// A JSON-RPC result (always a task here), serialised straight to bytes.
struct Answer {
    task: Task,
    shape: Shape,
    history_length: Option<usize>,
    /// 1.0 SendMessage results are `{"task": …}`.
    wrap: bool,
}

impl Answer {
    /// `task` answering `call`, in the shape [`answer_shape`] picks.
    fn about(call: &RpcRequest, task: Task, history_length: Option<usize>) -> Answer {
        let shape = answer_shape(call, &task);
        Answer::task(task, shape, history_length)
    }

    fn task(task: Task, shape: Shape, history_length: Option<usize>) -> Answer {
        Answer {
            task,
            shape,
            history_length,
            wrap: false,
        }
    }
}

/// A JSON-RPC result: a task, a page of them, or another value.
// One per answer, never stored: boxing the task would cost GetTask an allocation.
#[allow(clippy::large_enum_variant)]
enum Answered {
    Task(Answer),
    Page(list::Page),
    #[cfg_attr(not(feature = "push"), allow(dead_code))]
    Value(Box<Value>),
}

impl serde::Serialize for Answered {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        match self {
            Answered::Task(a) => a.serialize(s),
            Answered::Page(p) => p.serialize(s),
            Answered::Value(v) => v.serialize(s),
        }
    }
}

impl serde::Serialize for Answer {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        use serde::ser::SerializeMap;
        let shaped = self.task.shaped(self.shape, self.history_length);
        if self.wrap {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry("task", &shaped)?;
            map.end()
        } else {
            serde::Serialize::serialize(&shaped, s)
        }
    }
}

#[derive(serde::Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<rpc::ErrorDetails<'a>>,
}

#[derive(serde::Serialize)]
struct Envelope<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Answered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorBody<'a>>,
}

fn plain(status: u16, text: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: format!("{text}\n").into_bytes(),
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
        let config = params.get("configuration").and_then(|c| {
            c.get("taskPushNotificationConfig")
                .or_else(|| c.get("pushNotificationConfig"))
        });
        match config {
            Some(c) if !c.is_null() => Err(push_not_supported()),
            _ => Ok(None),
        }
    }

    fn notify(self: &Arc<Self>, _task: &Task) {}
}
