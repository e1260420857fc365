//! `serve`: skills and tools as an A2A agent on tokio/hyper, over the core
//! server function.

use crate::http_server::{self, HttpOptions, ServerHandle, StaticFiles, DEFAULT_BODY_LIMIT};
use crate::store::{AnyStore, StoreConfig};
use crate::{NativeTransport, Toolkit};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use toolnexus_core::llm::LlmConfig;
use toolnexus_core::server::auth::{AuthConfig, Claims, Verdict};
use toolnexus_core::server::{
    build_agent_card, is_loopback_host, misdirected, A2aConfig, A2aServer, Admission, AllowedHosts,
    BodyRefusal, CorsOrigin, EchoFulfiller, Fulfiller, Health, LlmFulfiller, PushOptions, Reply,
    ServerHost, ServerOptions, TaskEvent, Work, CARD_PATH, HEALTH_PATH, LEGACY_CARD_PATH,
};
use toolnexus_core::server::{StoreError, TaskStore};
use toolnexus_core::Task;
use toolnexus_core::{BoxFuture, TransportError};
use toolnexus_core::{HttpRequest, Transport};

/// Who answers the tasks.
#[derive(Clone)]
pub enum Model {
    /// An OpenAI- or Anthropic-style endpoint, with the toolkit's tools offered.
    Llm(LlmConfig),
    /// Answers each task with its own text (offline; for trying things out).
    Echo,
    /// Anything else.
    Custom(Arc<dyn Fulfiller>),
}

/// Your own verifier: given a request (method, URL, headers and body),
/// its caller ([`Verdict::Accepted`] with a
/// [`Principal`](toolnexus_core::server::auth::Principal)), a refusal
/// ([`Verdict::Rejected`]: 401 or 403 with a reason), or
/// [`Verdict::NotMine`] to let the configured verifiers (API keys, JWT)
/// decide. A request passes when one verifier accepts it.
///
/// ```
/// use std::sync::Arc;
/// use toolnexus_host_native::Authenticate;
/// use toolnexus_host_native::core::server::auth::{Principal, Verdict};
///
/// let hook: Authenticate = Arc::new(|req| {
///     let user = req.header("X-User").map(str::to_string);
///     Box::pin(async move {
///         match user {
///             Some(subject) => Verdict::Accepted(Principal { subject, ..Default::default() }),
///             None => Verdict::NotMine,
///         }
///     })
/// });
/// ```
pub type Authenticate =
    Arc<dyn Fn(&toolnexus_core::HttpRequest) -> BoxFuture<'static, Verdict> + Send + Sync>;

/// A task hook.
pub type OnTask = Arc<dyn Fn(&TaskEvent) + Send + Sync>;

/// What to serve and how.
#[derive(Clone)]
pub struct ServeOptions {
    /// The card identity; `None` serves no A2A profile (every route 404).
    pub a2a: Option<A2aConfig>,
    /// The tools and skills offered to the model (skills are also advertised).
    pub toolkit: Arc<Toolkit>,
    pub model: Model,
    /// The task store: memory (default, bounded by count and bytes), a
    /// folder, or yours ([`StoreConfig::parse`] reads `"memory"` / `"file:<dir>"`).
    pub store: StoreConfig,
    /// The base URL the card advertises (behind a proxy, or bound to 0.0.0.0).
    pub public_url: Option<String>,
    /// `Access-Control-Allow-Origin` (one origin, `*`, or a list:
    /// [`CorsOrigin::list`]); `None` (the default) sends no CORS headers,
    /// so no other web page can read the answers.
    pub cors_origin: Option<CorsOrigin>,
    /// The `Host` headers answered; others get 421 (against DNS
    /// rebinding). Default: loopback names; the bound address (every IP
    /// literal when bound to all interfaces) and the host of
    /// [`ServeOptions::public_url`] are added when serving. `None`: any.
    pub allowed_hosts: Option<AllowedHosts>,
    /// Your own verifier, asked with the configured ones ([`Authenticate`]).
    pub authenticate: Option<Authenticate>,
    /// The `WWW-Authenticate` challenge of your verifier's scheme, sent on
    /// every 401 (`Session realm="corp"`); `None`: `Bearer realm="a2a"`
    /// when no configured scheme challenges.
    pub authenticate_challenge: Option<String>,
    /// Serve a non-loopback address with no verifier (no
    /// [`A2aConfig::auth`], no `authenticate`). Off by default: [`serve`] then refuses to start
    /// ([`ServeError::Anonymous`]).
    pub allow_anonymous: bool,
    /// Largest accepted request body; default 1 MiB (larger ⇒ 413).
    pub body_limit: usize,
    /// At most this many tasks are fulfilled at once (default 64): each may
    /// hold a model connection. Later tasks wait, `submitted`, in order.
    pub max_running: usize,
    /// At most this many tasks wait (default 1024); past it a new task is
    /// refused at once with a "busy" error.
    pub max_queued: usize,
    /// Connection limits and timeouts (its `policy` is replaced by the
    /// agent's: `body_limit` and the CORS headers on refusals).
    pub http: HttpOptions,
    /// Called on every terminal state.
    pub on_task: Option<OnTask>,
    /// Called after every saved state change (submitted, working, …).
    pub on_state: Option<OnState>,
    /// A folder of static files (a browser UI) served beside the agent: every
    /// GET and HEAD except the card's paths reads from it (`/` is its
    /// `index.html`); `POST /`, `OPTIONS` and the card stay the agent's.
    pub ui_dir: Option<PathBuf>,
    /// The `: ping` heartbeat of idle event streams; default 15 s, `None` for none.
    pub heartbeat: Option<Duration>,
    /// Push notifications to webhooks (the card then says
    /// `pushNotifications: true`); `None` (the default): the config methods
    /// answer -32003.
    pub push: Option<PushOptions>,
    /// The lease a running task holds in a shared store (file or
    /// PostgreSQL), renewed while it runs: another replica fails it as
    /// interrupted only once it has run out (default 30 s). The memory
    /// store, which no one else sees, takes none.
    pub task_lease: Duration,
    /// How often a shared store is read again for changes nobody told of
    /// (default 1 s): PostgreSQL's notifications wake waiters at once, this
    /// is the fallback; it also paces the sweep of expired leases.
    pub store_poll: Duration,
    /// How long finished tasks (completed, failed, canceled, rejected) are
    /// kept after their last status change, in any store (default 7 days,
    /// [`toolnexus_core::server::DEFAULT_RETENTION`]); older ones are
    /// deleted by a sweep every minute (sooner for a short retention).
    /// `None`: kept for ever (the memory store still drops the oldest past
    /// its caps).
    pub task_retention: Option<Duration>,
    /// Serve Prometheus metrics at `/metrics` (GET), under the same Host,
    /// CORS and verifier rules as the agent's calls (feature `metrics`).
    pub metrics: bool,
}

/// [`ServeOptions::task_lease`] by default.
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(30);
/// [`ServeOptions::store_poll`] by default.
pub const DEFAULT_STORE_POLL: Duration = Duration::from_millis(1000);

/// A state-change hook: the task as just saved.
pub type OnState = Arc<dyn Fn(&Task) + Send + Sync>;

/// The toolkit a model-run task uses: with span export on, its local tool
/// calls' spans (core's [`toolnexus_core::SpanRecord`]s) are exported.
fn traced_toolkit(toolkit: &Arc<Toolkit>) -> Arc<Toolkit> {
    #[cfg(feature = "otel")]
    if crate::otel::enabled() {
        let hook: toolnexus_core::SpanHook = Arc::new(crate::otel::core_span);
        return Arc::new(Toolkit::clone(toolkit).with_span_hook(hook));
    }
    toolkit.clone()
}

/// The store, with the state-change hook.
pub struct ObservedStore {
    inner: AnyStore,
    on_state: Option<OnState>,
}

/// A read of a task (owned or shared) through the store, with its span
/// and metric.
fn observed_read<T: std::borrow::Borrow<Task>, R>(
    read: impl FnOnce() -> R,
) -> impl std::future::Future<Output = Result<Option<T>, StoreError>> + Send
where
    R: std::future::Future<Output = Result<Option<T>, StoreError>> + Send,
{
    #[cfg(feature = "otel")]
    let span = crate::otel::store_op("get", None);
    #[cfg(feature = "metrics")]
    let started = std::time::Instant::now();
    let got = read();
    async move {
        let got = got.await;
        #[cfg(feature = "metrics")]
        crate::metrics::store("get", started, got.is_ok());
        #[cfg(feature = "otel")]
        if let Some(span) = span {
            if let Ok(Some(task)) = &got {
                crate::otel::task_read(task.borrow());
            }
            span.finish(&got);
        }
        got
    }
}

impl TaskStore for ObservedStore {
    fn get(
        &self,
        id: &str,
    ) -> impl std::future::Future<Output = Result<Option<Task>, StoreError>> + Send {
        observed_read(|| self.inner.get(id))
    }

    fn get_shared(
        &self,
        id: &str,
    ) -> impl std::future::Future<Output = Result<Option<Arc<Task>>, StoreError>> + Send {
        observed_read(|| self.inner.get_shared(id))
    }

    fn list(
        &self,
        filter: &toolnexus_core::server::TaskFilter,
    ) -> impl std::future::Future<Output = Result<Option<Vec<Task>>, StoreError>> + Send {
        self.inner.list(filter)
    }

    fn list_page(
        &self,
        filter: &toolnexus_core::server::TaskFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> impl std::future::Future<Output = Result<Option<(Vec<Task>, usize)>, StoreError>> + Send
    {
        self.inner.list_page(filter, after, limit)
    }

    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl std::future::Future<Output = Result<Vec<Task>, StoreError>> + Send {
        self.inner.expired(now_ms, limit)
    }

    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl std::future::Future<Output = Result<Option<serde_json::Value>, StoreError>> + Send
    {
        self.inner.get_push_configs(task_id)
    }

    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.inner.save_push_configs(task_id, configs)
    }

    fn put_push_config(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> impl std::future::Future<Output = Result<bool, StoreError>> + Send {
        self.inner.put_push_config(task_id, config, max)
    }

    fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> impl std::future::Future<Output = Result<bool, StoreError>> + Send {
        self.inner.delete_push_config(task_id, id)
    }

    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl std::future::Future<Output = Result<usize, StoreError>> + Send {
        self.inner.delete_finished(before_ms, limit)
    }

    fn events_after(
        &self,
        id: &str,
        version: u64,
    ) -> impl std::future::Future<
        Output = Result<Option<Vec<toolnexus_core::server::LoggedEvent>>, StoreError>,
    > + Send {
        self.inner.events_after(id, version)
    }

    fn save_with_events(
        &self,
        task: &Task,
        events: &[toolnexus_core::StreamEvent],
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.observe_save(task, || self.inner.save_with_events(task, events))
    }

    fn save(
        &self,
        task: &Task,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.observe_save(task, || self.inner.save(task))
    }
}

impl ObservedStore {
    /// A save of `task` (what `save` starts) inside its span and metrics,
    /// and the state hook once it is durable.
    fn observe_save<F: std::future::Future<Output = Result<(), StoreError>> + Send>(
        &self,
        task: &Task,
        save: impl FnOnce() -> F,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        #[cfg(feature = "otel")]
        let span = crate::otel::store_op("save", Some(task));
        #[cfg(feature = "otel")]
        crate::otel::task_saved(task);
        #[cfg(feature = "metrics")]
        let (started, state) = (std::time::Instant::now(), task.state);
        let saved = save();
        let hook = self.on_state.clone().map(|h| (h, task.clone()));
        async move {
            let saved = saved.await;
            #[cfg(feature = "metrics")]
            {
                crate::metrics::store("save", started, saved.is_ok());
                if saved.is_ok() {
                    crate::metrics::task_state(state);
                }
            }
            #[cfg(feature = "otel")]
            if let Some(span) = span {
                span.finish(&saved);
            }
            saved?;
            if let Some((hook, task)) = hook {
                hook(&task);
            }
            Ok(())
        }
    }
}

impl ServeOptions {
    /// Defaults: an A2A profile with default identity, memory store, no
    /// CORS, loopback `Host`s, no verifier, 1 MiB bodies.
    pub fn new(toolkit: Arc<Toolkit>, model: Model) -> Self {
        ServeOptions {
            a2a: Some(A2aConfig::default()),
            toolkit,
            model,
            store: StoreConfig::default(),
            public_url: None,
            cors_origin: None,
            allowed_hosts: Some(AllowedHosts::loopback()),
            authenticate: None,
            authenticate_challenge: None,
            allow_anonymous: false,
            body_limit: DEFAULT_BODY_LIMIT,
            http: HttpOptions::default(),
            max_running: toolnexus_core::server::DEFAULT_MAX_RUNNING,
            max_queued: toolnexus_core::server::DEFAULT_MAX_QUEUED,
            on_task: None,
            on_state: None,
            ui_dir: None,
            heartbeat: Some(toolnexus_core::server::DEFAULT_HEARTBEAT),
            push: None,
            task_lease: DEFAULT_TASK_LEASE,
            store_poll: DEFAULT_STORE_POLL,
            task_retention: Some(toolnexus_core::server::DEFAULT_RETENTION),
            metrics: false,
        }
    }
}

/// The wall clock in Unix milliseconds (`None` before 1970).
pub(crate) fn unix_ms() -> Option<u64> {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.ok().map(|d| d.as_millis() as u64)
}

/// Background jobs in flight, so a stop can wait for them.
#[derive(Default)]
struct Jobs {
    running: AtomicUsize,
    idle: Notify,
}

impl Jobs {
    /// Runs `work` (a task's fulfilment, its push deliveries) as a tokio
    /// task, counted while it runs.
    fn spawn(self: &Arc<Self>, work: Work) {
        /// Counts the job out however it ends, a panic included.
        struct Running(Arc<Jobs>);
        impl Drop for Running {
            fn drop(&mut self) {
                if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                    self.0.idle.notify_waiters();
                }
            }
        }
        self.running.fetch_add(1, Ordering::SeqCst);
        let running = Running(self.clone());
        tokio::spawn(async move {
            let _running = running;
            work.await;
        });
    }
}

struct NativeHost {
    on_task: Option<OnTask>,
    /// Webhooks whose names resolve to internal addresses are refused unless this.
    allow_private_webhooks: bool,
    /// The zero of `now_ms`.
    epoch: std::time::Instant,
    /// Checks JWT signatures, when a `jwt` verifier is configured.
    jwt: Option<Arc<crate::jwt::JwtVerifier>>,
    authenticate: Option<Authenticate>,
    authenticate_challenge: Option<String>,
}

impl toolnexus_core::HostBase for NativeHost {
    fn new_id(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
    fn unix_ms(&self) -> Option<u64> {
        unix_ms()
    }
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl ServerHost for NativeHost {
    type Locks = crate::NativeLocks;

    fn on_task(&self, event: TaskEvent) {
        if let Some(hook) = &self.on_task {
            hook(&event);
        }
    }

    fn report(&self, problem: &str) {
        tracing::warn!("{problem}");
    }

    fn sleep_until(&self, at_ms: u64) -> Option<BoxFuture<'static, ()>> {
        let at = self.epoch + Duration::from_millis(at_ms);
        Some(Box::pin(tokio::time::sleep_until(at.into())))
    }

    fn verify_jwt(&self, token: &str) -> BoxFuture<'static, Result<Claims, String>> {
        let Some(jwt) = self.jwt.clone() else {
            return Box::pin(std::future::ready(Err(
                "no JWT verifier is configured".to_string()
            )));
        };
        let token = token.to_string();
        Box::pin(async move { jwt.verify(&token).await })
    }

    fn authenticate(&self, req: &HttpRequest) -> Option<BoxFuture<'static, Verdict>> {
        self.authenticate.as_ref().map(|hook| hook(req))
    }

    fn authenticate_challenge(&self) -> Option<String> {
        self.authenticate_challenge.clone()
    }

    fn send(
        &self,
        req: HttpRequest,
    ) -> Option<BoxFuture<'static, Result<toolnexus_core::HttpResponse, TransportError>>> {
        let allow_private = self.allow_private_webhooks;
        Some(Box::pin(async move {
            if !allow_private {
                refuse_internal_names(&req.url).await?;
            }
            let sent = NativeTransport::shared().send(req).await;
            #[cfg(feature = "metrics")]
            crate::metrics::webhook(sent.as_ref().is_ok_and(|r| r.status < 300));
            sent
        }))
    }
}

/// Core refuses internal addresses written in a webhook URL; a name that
/// resolves to one is refused here, before anything is sent.
async fn refuse_internal_names(url: &str) -> Result<(), TransportError> {
    let Some(with_port) = toolnexus_core::server::push::webhook_address(url) else {
        return Ok(());
    };
    let addrs = tokio::net::lookup_host(with_port).await.map_err(|e| {
        TransportError::with_source(format!("cannot resolve the webhook {url}: {e}"), e)
    })?;
    for addr in addrs {
        if toolnexus_core::server::push::is_internal(addr.ip()) {
            return Err(TransportError::new(format!(
                "the webhook {url} resolves to an internal address ({}); refused",
                addr.ip()
            )));
        }
    }
    Ok(())
}

/// A running agent.
pub struct ServeHandle {
    /// `http://HOST:PORT` (the bound address, with the real port).
    pub url: String,
    /// The URL the card advertises as its JSON-RPC endpoint.
    pub card_url: String,
    /// Tasks a crash had left unfinished, now failed (file store only).
    pub recovered: Vec<String>,
    http: ServerHandle,
    jobs: Arc<Jobs>,
    /// The server (its work, at a stop); its requests keep it alive.
    server: std::sync::Weak<NativeServer>,
    /// Spawns the work the server starts (`run_work`).
    runner: tokio::task::JoinHandle<()>,
    health: Arc<dyn Fn() -> Health + Send + Sync>,
    /// The shared store's listener and lease sweeper, stopped with the server.
    background: Vec<tokio::task::JoinHandle<()>>,
}

/// How long [`ServeHandle::stop`] lets requests and tasks finish: the
/// whole stop stays within 10 s.
pub const STOP_GRACE: Duration = Duration::from_secs(9);

impl ServeHandle {
    /// Whether the server's saves work (also served at `/healthz`).
    pub fn health(&self) -> Health {
        (self.health)()
    }

    /// Stops accepting, and lets requests in flight and running tasks
    /// finish for up to `grace` in all; what is left then is dropped.
    pub async fn stop_within(self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        for task in &self.background {
            task.abort();
        }
        self.http.stop_within(grace).await;
        // No request is left to start work: from now on, what the jobs
        // start is taken here, as it comes, and waited for too.
        self.runner.abort();
        let _ = self.runner.await;
        let server = &self.server;
        let jobs = &self.jobs;
        let take = |cx: &mut std::task::Context<'_>| match server.upgrade() {
            Some(server) => server.poll_work(cx),
            None => std::task::Poll::Ready(Vec::new()),
        };
        let wait = async {
            loop {
                let idle = jobs.idle.notified();
                let ready = server.upgrade().map(|s| s.take_work());
                for work in ready.unwrap_or_default() {
                    jobs.spawn(work);
                }
                if jobs.running.load(Ordering::SeqCst) == 0 {
                    break;
                }
                tokio::select! {
                    _ = idle => {}
                    work = std::future::poll_fn(take) => {
                        for work in work {
                            jobs.spawn(work);
                        }
                    }
                }
            }
        };
        let _ = tokio::time::timeout_at(deadline, wait).await;
        // Past the grace: work never started is dropped (it holds the server).
        if let Some(server) = self.server.upgrade() {
            drop(server.take_work());
        }
    }

    /// [`ServeHandle::stop_within`] [`STOP_GRACE`].
    pub async fn stop(self) {
        self.stop_within(STOP_GRACE).await;
    }
}

/// Why [`serve`] could not start. Each variant keeps the error underneath
/// ([`source`](std::error::Error::source)).
#[non_exhaustive]
#[derive(Debug)]
pub enum ServeError {
    /// The task store could not be opened.
    Store(StoreError),
    /// The `ui_dir` folder cannot be served (missing, or not a folder).
    Ui {
        dir: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The address cannot be listened on (`on` is the address, or "the given socket").
    Listen { on: String, source: std::io::Error },
    /// The `auth` block cannot be used (an unset secret, a bad key URL, …).
    Auth(String),
    /// A non-loopback address with no verifier, and not
    /// [`ServeOptions::allow_anonymous`].
    Anonymous { on: String },
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Store(e) => write!(f, "{e}"),
            ServeError::Ui { dir, source } => {
                write!(f, "cannot serve the UI folder {}: {source}", dir.display())
            }
            ServeError::Listen { on, source } => write!(f, "cannot listen on {on}: {source}"),
            ServeError::Auth(e) => write!(f, "{e}"),
            ServeError::Anonymous { on } => write!(
                f,
                "refusing to serve {on} without authentication: it is not a loopback address, \
                 so anyone who can reach it could read every task and spend the model's key. \
                 Configure a verifier (the a2a.auth block of --config: apiKeys or jwt), \
                 bind 127.0.0.1, or pass --allow-anonymous to serve it open anyway"
            ),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Store(e) => Some(e),
            ServeError::Ui { source, .. } | ServeError::Listen { source, .. } => Some(source),
            ServeError::Auth(_) | ServeError::Anonymous { .. } => None,
        }
    }
}

/// Serves `options` on `addr` (`HOST:PORT`; port 0 picks a free one).
pub async fn serve(addr: &str, options: ServeOptions) -> Result<ServeHandle, ServeError> {
    if !is_loopback_address(addr) {
        refuse_anonymous(addr, &options)?;
    }
    let opened = Opened::open(&options).await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Listen {
            on: addr.to_string(),
            source,
        })?;
    start(listener, options, opened)
}

/// [`serve`] on a listener you bound: a `tokio::net::TcpListener` or a
/// `std::net::TcpListener`. The card advertises the listener's address
/// unless [`ServeOptions::public_url`] says otherwise.
pub async fn serve_on(
    listener: impl http_server::Listener,
    options: ServeOptions,
) -> Result<ServeHandle, ServeError> {
    let opened = Opened::open(&options).await?;
    let listener = listener.into_tokio().map_err(given_socket)?;
    let addr = listener.local_addr().map_err(given_socket)?;
    if !addr.ip().is_loopback() {
        refuse_anonymous(&addr.to_string(), &options)?;
    }
    start(listener, options, opened)
}

/// Whether `addr` (`HOST:PORT`) is a loopback address or name.
pub fn is_loopback_address(addr: &str) -> bool {
    if let Ok(sock) = addr.parse::<std::net::SocketAddr>() {
        return sock.ip().is_loopback();
    }
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    is_loopback_host(host)
}

/// Whether anyone can call: no verifier of any kind.
fn anonymous(options: &ServeOptions) -> bool {
    let configured = options
        .a2a
        .as_ref()
        .and_then(|a| a.auth.as_ref())
        .is_some_and(|a| a.api_keys.is_some() || a.jwt.is_some() || a.custom);
    !configured && options.authenticate.is_none()
}

fn refuse_anonymous(on: &str, options: &ServeOptions) -> Result<(), ServeError> {
    if anonymous(options) && !options.allow_anonymous && options.a2a.is_some() {
        return Err(ServeError::Anonymous { on: on.to_string() });
    }
    Ok(())
}

/// What `serve` opens before it listens, so a bad store or UI folder fails
/// before the port is taken.
struct Opened {
    store: AnyStore,
    recovered: Vec<String>,
    ui: Option<Arc<StaticFiles>>,
    jwt: Option<Arc<crate::jwt::JwtVerifier>>,
}

/// The listener a caller gave could not be used.
fn given_socket(source: std::io::Error) -> ServeError {
    ServeError::Listen {
        on: "the given socket".into(),
        source,
    }
}

impl Opened {
    async fn open(options: &ServeOptions) -> Result<Opened, ServeError> {
        let (store, recovered) = crate::store::open_async(&options.store)
            .await
            .map_err(ServeError::Store)?;
        let ui = match &options.ui_dir {
            Some(dir) => Some(Arc::new(StaticFiles::open(dir).map_err(|source| {
                ServeError::Ui {
                    dir: dir.clone(),
                    source,
                }
            })?)),
            None => None,
        };
        let auth = options.a2a.as_ref().and_then(|a| a.auth.as_ref());
        let jwt = match auth.and_then(|a| a.jwt.as_ref()) {
            Some(cfg) => Some(Arc::new(
                crate::jwt::JwtVerifier::new(cfg, |name| std::env::var(name).ok())
                    .map_err(ServeError::Auth)?,
            )),
            None => None,
        };
        Ok(Opened {
            store,
            recovered,
            ui,
            jwt,
        })
    }
}

fn start(
    listener: tokio::net::TcpListener,
    options: ServeOptions,
    opened: Opened,
) -> Result<ServeHandle, ServeError> {
    let Opened {
        store,
        recovered,
        ui,
        jwt,
    } = opened;
    // The listener is bound: the card can name its real port.
    let addr = listener.local_addr().map_err(given_socket)?;
    let card_url = match &options.public_url {
        Some(u) => format!("{}/", u.trim_end_matches('/')),
        None if addr.ip().is_unspecified() => format!("http://127.0.0.1:{}/", addr.port()),
        None => format!("http://{addr}/"),
    };
    let skills = options
        .toolkit
        .skills()
        .map(|s| s.skills().to_vec())
        .unwrap_or_default();
    let mut a2a = options.a2a.clone();
    if let (Some(cfg), Some(_)) = (a2a.as_mut(), &options.authenticate) {
        cfg.auth.get_or_insert_with(AuthConfig::default).custom = true;
    }
    let card = a2a.as_ref().map(|cfg| {
        let cfg = A2aConfig {
            push_notifications: options.push.is_some(),
            ..cfg.clone()
        };
        build_agent_card(&cfg, &skills, &card_url)
    });
    let fulfiller: Arc<dyn Fulfiller> = match options.model {
        Model::Llm(llm) => Arc::new(LlmFulfiller {
            toolkit: traced_toolkit(&options.toolkit),
            llm,
        }),
        Model::Echo => Arc::new(EchoFulfiller),
        Model::Custom(f) => f,
    };
    let jobs = Arc::new(Jobs::default());
    let host = NativeHost {
        epoch: std::time::Instant::now(),
        on_task: options.on_task,
        allow_private_webhooks: options
            .push
            .as_ref()
            .is_some_and(|p| p.allow_private_webhooks),
        jwt,
        authenticate: options.authenticate.clone(),
        authenticate_challenge: options.authenticate_challenge.clone(),
    };
    let auth = a2a.as_ref().and_then(|a| a.auth.clone());
    let allowed_hosts = options.allowed_hosts.map(|hosts| {
        let hosts = match addr.ip() {
            ip if ip.is_unspecified() => hosts.with_any_ip(),
            std::net::IpAddr::V6(ip) => hosts.with(&format!("[{ip}]")),
            ip => hosts.with(&ip.to_string()),
        };
        match &options.public_url {
            Some(u) => hosts.with(u),
            None => hosts,
        }
    });
    // A store others may share takes leases, and is looked at again now and then.
    let shared = !matches!(store, AnyStore::Memory(_));
    #[cfg(feature = "postgres")]
    let postgres = match &store {
        AnyStore::Host(crate::store::NativeStore::Postgres(p)) => Some(p.url().to_string()),
        _ => None,
    };
    let store = ObservedStore {
        inner: store,
        on_state: options.on_state,
    };
    let server = A2aServer::new(
        ServerOptions {
            card: card.map(Into::into),
            cors_origin: options.cors_origin,
            body_limit: options.body_limit,
            max_running: options.max_running,
            max_queued: options.max_queued,
            heartbeat: options.heartbeat,
            push: options.push,
            // The verifiers of the `a2a` block (`--config`'s `a2a.auth`).
            auth,
            allowed_hosts,
            lease: shared.then_some(options.task_lease),
            store_poll: shared.then_some(options.store_poll),
            retention: options.task_retention,
            ..Default::default()
        },
        store,
        host,
        fulfiller,
    );
    // The work the server starts (fulfilment jobs, push deliveries), each
    // run as a tokio task of its own.
    let weak = Arc::downgrade(&server);
    let runner = {
        let jobs = jobs.clone();
        tokio::spawn(server.clone().run_work(move |work| jobs.spawn(work)))
    };
    let mut background = Vec::new();
    // Finished tasks past their retention: deleted now and then.
    if let Some(keep) = options.task_retention {
        let (sweeper, every) = (
            Arc::downgrade(&server),
            (keep / 4).clamp(Duration::from_millis(10), Duration::from_secs(60)),
        );
        background.push(tokio::spawn(async move {
            loop {
                let Some(server) = sweeper.upgrade() else {
                    return;
                };
                // A full sweep may leave more: go on at once (bounded).
                for _ in 0..100 {
                    match server.sweep().await {
                        Ok(n) if n >= toolnexus_core::server::SWEEP_LIMIT => continue,
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!("task store: deleting old finished tasks failed: {e}")
                        }
                    }
                    break;
                }
                drop(server);
                tokio::time::sleep(every).await;
            }
        }));
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = postgres {
        let on_change: crate::pg_store::OnChange = {
            let server = Arc::downgrade(&server);
            Arc::new(move |id, version| {
                if let Some(server) = server.upgrade() {
                    server.store_changed(id, version);
                }
            })
        };
        background.push(crate::pg_store::listen(&url, on_change));
        // Tasks whose replica died: failed once their lease runs out.
        let (sweeper, every) = (Arc::downgrade(&server), options.store_poll);
        background.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(server) = sweeper.upgrade() else {
                    return;
                };
                if let Err(e) = server.recover_expired().await {
                    tracing::warn!("task store: looking for expired leases failed: {e}");
                }
            }
        }));
    }
    let policy: Arc<dyn http_server::RequestPolicy> = Arc::new(Policy(server.clone()));
    let health = {
        let server = server.clone();
        Arc::new(move || server.health())
    };
    #[cfg(feature = "metrics")]
    let metrics = options.metrics;
    #[cfg(feature = "metrics")]
    if metrics {
        crate::metrics::enable();
    }
    let handler: http_server::StreamHandler = Arc::new(move |req| {
        #[cfg(feature = "metrics")]
        if metrics && req.method == "GET" && http_server::url_path(&req.url) == METRICS_PATH {
            let server = server.clone();
            return Box::pin(async move { Reply::Full(metrics_page(&server, &req).await) });
        }
        #[cfg(feature = "metrics")]
        let measured = crate::metrics::enabled().then(|| {
            (
                crate::metrics::request_method(&req),
                std::time::Instant::now(),
            )
        });
        #[cfg(feature = "otel")]
        let mut req = req;
        #[cfg(feature = "otel")]
        let span = crate::otel::server_request(&mut req);
        let server = server.clone();
        let ui = ui
            .as_ref()
            .filter(|_| is_ui_request(&req))
            .cloned()
            .map(|ui| (ui, server.host_allowed(req.header("Host"))));
        // The UI's files and a traced request are boxed where they are
        // awaited: this future, moved into its box for every request, stays
        // the size of the plain call's.
        let serving = async move {
            match ui {
                Some((ui, true)) => Reply::Full(Box::pin(ui.respond(&req)).await),
                Some((_, false)) => Reply::Full(misdirected()),
                None => {
                    #[cfg(feature = "otel")]
                    if let Some(mut span) = span {
                        let reply = Box::pin(span.scope(server.serve(req))).await;
                        match &reply {
                            Reply::Full(r) => span.finish(r.status, Some(&r.body)),
                            Reply::Stream { head, .. } => span.finish(head.status, None),
                        }
                        return reply;
                    }
                    server.serve(req).await
                }
            }
        };
        #[cfg(feature = "metrics")]
        if let Some((method, started)) = measured {
            return Box::pin(async move {
                let reply = serving.await;
                match reply {
                    Reply::Full(r) => {
                        crate::metrics::request(method, started, r.status, Some(&r.body));
                        Reply::Full(r)
                    }
                    Reply::Stream { head, body } => {
                        crate::metrics::request(method, started, head.status, None);
                        let open = crate::metrics::stream_opened();
                        let body = futures_util::StreamExt::map(body, move |frame| {
                            let _open = &open;
                            frame
                        });
                        Reply::Stream {
                            head,
                            body: Box::pin(body),
                        }
                    }
                }
            });
        }
        Box::pin(serving)
    });
    let http_options = HttpOptions {
        policy,
        ..options.http
    };
    #[cfg(feature = "axum-ab")]
    let serve_with = if crate::axum_ab::wanted() {
        crate::axum_ab::serve_with
    } else {
        http_server::serve_with
    };
    #[cfg(not(feature = "axum-ab"))]
    let serve_with = http_server::serve_with;
    let http =
        serve_with(listener, http_options, handler).map_err(|source| ServeError::Listen {
            on: addr.to_string(),
            source,
        })?;
    Ok(ServeHandle {
        url: http.url.clone(),
        card_url,
        recovered,
        http,
        jobs,
        server: weak,
        runner,
        health,
        background,
    })
}

type NativeServer = A2aServer<ObservedStore, NativeHost, Arc<dyn Fulfiller>>;

/// Where [`ServeOptions::metrics`] serves the Prometheus text.
pub const METRICS_PATH: &str = "/metrics";

/// `GET /metrics`: the Host, verifier and CORS rules of the agent's calls.
#[cfg(feature = "metrics")]
async fn metrics_page(
    server: &Arc<NativeServer>,
    req: &toolnexus_core::HttpRequest,
) -> toolnexus_core::HttpResponse {
    if !server.host_allowed(req.header("Host")) {
        return misdirected();
    }
    let mut resp = match server.refuse_caller(req).await {
        Some(refused) => refused,
        None => toolnexus_core::HttpResponse {
            status: 200,
            headers: vec![(
                "Content-Type".into(),
                "text/plain; version=0.0.4; charset=utf-8".into(),
            )],
            body: crate::metrics::render().unwrap_or_default().into_bytes(),
        },
    };
    server.add_cors_for(req.header("Origin"), &mut resp);
    resp
}

/// The agent's rules for request bodies, applied by the HTTP server.
struct Policy(Arc<NativeServer>);

impl http_server::RequestPolicy for Policy {
    fn admit(&self, headers: &[(String, String)]) -> Admission {
        self.0.admit(headers)
    }
    fn refuse(&self, why: BodyRefusal) -> toolnexus_core::HttpResponse {
        self.0.refuse(why)
    }
}

/// Whether a request is for the UI's static files rather than the agent:
/// a GET or HEAD of anything but the card.
fn is_ui_request(req: &toolnexus_core::HttpRequest) -> bool {
    let path = http_server::url_path(&req.url);
    matches!(req.method.as_str(), "GET" | "HEAD")
        && !matches!(path, CARD_PATH | LEGACY_CARD_PATH | HEALTH_PATH)
        // The HTTP+JSON binding's routes.
        && !path
            .strip_prefix(toolnexus_core::server::rest::REST_PATH)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}
