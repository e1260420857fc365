//! The native host of toolnexus A2A: a pooled HTTP client, a tokio/hyper
//! server and stores, over the no-I/O [`toolnexus_core`]. The `toolnexus`
//! CLI is this package's binary (feature `cli`, on by default); the library
//! never needs it: depend with `default-features = false` to leave out its
//! argument parser.
//!
//! Process, file and socket handling live here; protocol logic does not.
//! The library logs through [`tracing`] (target `toolnexus_host_native`) and
//! never prints; install a subscriber to see its warnings.
//!
//! ## Who may call a served agent
//!
//! [`serve()`] answers loopback `Host`s only by default
//! ([`ServeOptions::allowed_hosts`]), sends no CORS headers unless
//! [`ServeOptions::cors_origin`] names origins, and refuses a non-loopback
//! address with no verifier unless [`ServeOptions::allow_anonymous`].
//! Verifiers: the `auth` block of [`ServeOptions::a2a`] (API keys; JWT,
//! whose signatures [`jwt::JwtVerifier`] checks with the `jsonwebtoken`
//! crate), and your own, [`ServeOptions::authenticate`]: a closure given
//! each request (method, URL, headers, body) that returns a future of a
//! [`Verdict`](toolnexus_core::server::auth::Verdict): the caller's
//! `Principal`, a 401/403 refusal, or `NotMine` to let the others decide.
//! A request passes when one verifier accepts it.

#[cfg(feature = "axum-ab")]
pub mod axum_ab;
#[cfg(feature = "component")]
pub mod component_host;
pub mod config_file;
mod head_timeout;
pub mod http_server;
pub mod jwt;
pub mod lock;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "otel")]
pub mod otel;
#[cfg(feature = "postgres")]
pub mod pg_store;
pub mod serve;
pub mod skills_dir;
pub mod store;
pub mod transport;

pub use http_server::Listener;
pub use lock::{MemoryStore, NativeLocks};
use serde_json::Value;
pub use serve::{serve, serve_on, Authenticate, Model, ServeError, ServeHandle, ServeOptions};
use std::sync::Arc;
pub use toolnexus_core::server::PushOptions;
pub use toolnexus_core::{self as core, Agent, Error, ToolResult, ToolSpec};
pub use transport::{ClientOptions, HttpClient, NativeTransport};

/// A toolkit over the shared native transport.
pub type Toolkit = toolnexus_core::Toolkit<Arc<NativeTransport>>;

/// One skill of a remote agent, ready to call.
#[derive(Clone)]
pub struct RemoteTool {
    inner: toolnexus_core::A2aTool,
    transport: Arc<NativeTransport>,
}

impl RemoteTool {
    /// The tool's name, description, input schema and source (`"a2a"`).
    pub fn spec(&self) -> &ToolSpec {
        &self.inner.spec
    }

    /// The skill id (or name) on the card.
    pub fn skill(&self) -> &str {
        &self.inner.skill
    }

    /// The card's name.
    pub fn agent_name(&self) -> &str {
        &self.inner.agent_name
    }

    /// The name this skill would have had when an earlier skill of its card
    /// made it first (it then carries a `_2`, `_3`… suffix).
    pub fn clash(&self) -> Option<&str> {
        self.inner.clash.as_deref()
    }

    /// Whether the agent's credentials (`auth` and headers) go to the
    /// endpoint the card names: only to the card's origin and the origins
    /// the agent allows. `Withhold`: calls go without them (each call logs
    /// the warning); `Refuse`: the card requires them, calls fail.
    pub fn credential_route(&self) -> toolnexus_core::CredentialRoute {
        self.inner.credential_route()
    }

    fn warn_if_withheld(&self) {
        if let toolnexus_core::CredentialRoute::Withhold(warning) = self.inner.credential_route() {
            tracing::warn!("{warning}");
        }
    }

    /// Runs the skill with `args` (`{"task": "…"}`). Never fails; see [`ToolResult::is_error`].
    pub async fn execute(&self, args: &Value) -> ToolResult {
        self.warn_if_withheld();
        self.inner
            .execute(&self.transport, args, std::future::pending())
            .await
    }

    /// [`RemoteTool::execute`] that stops, and cancels the remote task, when `abort` completes.
    pub async fn execute_with_abort(
        &self,
        args: &Value,
        abort: impl std::future::Future<Output = ()> + Send,
    ) -> ToolResult {
        self.warn_if_withheld();
        self.inner.execute(&self.transport, args, abort).await
    }

    /// [`RemoteTool::execute_with_abort`] that hands each event of the task
    /// (stream events, or the task as seen by SendMessage and GetTask) to
    /// `on_event` as it happens.
    pub async fn execute_with_events(
        &self,
        args: &Value,
        abort: impl std::future::Future<Output = ()> + Send,
        on_event: impl FnMut(toolnexus_core::StreamEvent) + Send,
    ) -> ToolResult {
        self.warn_if_withheld();
        self.inner
            .execute_with_events(&self.transport, args, abort, on_event)
            .await
    }

    /// [`RemoteTool::execute_with_events`] for a call that began at
    /// `started_ms` of the transport's clock ([`toolnexus_core::HostBase::now_ms`]),
    /// before its card fetch: the agent's timeout bounds the whole call.
    pub async fn execute_since(
        &self,
        args: &Value,
        started_ms: u64,
        abort: impl std::future::Future<Output = ()> + Send,
        on_event: impl FnMut(toolnexus_core::StreamEvent) + Send,
    ) -> ToolResult {
        self.warn_if_withheld();
        self.inner
            .execute_since(&self.transport, args, started_ms, abort, on_event)
            .await
    }
}

/// Fetches the agent's card and returns one tool per skill, over
/// [`NativeTransport::shared`]. Fails loudly (unreachable, non-2xx, not a
/// card); [`toolkit`] isolates failures instead.
pub async fn agent_tools(agent: &Agent) -> Result<Vec<RemoteTool>, Error> {
    agent_tools_with(&NativeTransport::shared(), agent).await
}

/// [`agent_tools`] over your own transport; the tools keep using it.
pub async fn agent_tools_with(
    transport: &Arc<NativeTransport>,
    agent: &Agent,
) -> Result<Vec<RemoteTool>, Error> {
    let card = toolnexus_core::fetch_card(transport, agent).await?;
    Ok(card_tools(transport, agent, &card))
}

/// A token cache for one agent behind the native lock: the tools of an
/// agent share it, so N concurrent calls cause one OAuth2 token fetch.
pub fn token_cell() -> toolnexus_core::SharedTokenCell {
    use toolnexus_core::server::Lock;
    Arc::new(lock::NativeLock::new(toolnexus_core::TokenCache::new()))
}

/// The tools of a card you already hold (fetched yourself, or cached), called
/// over `transport`. No request is sent. The tools share one token cache
/// ([`token_cell`]).
pub fn card_tools(
    transport: &Arc<NativeTransport>,
    agent: &Agent,
    card: &toolnexus_core::AgentCard,
) -> Vec<RemoteTool> {
    let tokens = token_cell();
    toolnexus_core::card_tools(agent, card)
        .into_iter()
        .map(|inner| RemoteTool {
            inner: inner.with_tokens(tokens.clone()),
            transport: transport.clone(),
        })
        .collect()
}

/// Builds a toolkit over [`NativeTransport::shared`] from `agents` and the
/// `agents` key of `config`, resolving every agent concurrently. A failing
/// agent is logged (a `tracing` warning) and contributes no tools; it never
/// fails the toolkit: see [`toolnexus_core::Toolkit::failures`].
pub async fn toolkit(agents: &[Agent], config: Option<&Value>) -> Toolkit {
    toolkit_with(NativeTransport::shared(), agents, config).await
}

/// How long `toolnexus serve` waits, at most, for the cards of its
/// config's agents before it listens.
pub const STARTUP_CARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Adds the agents of `config`'s `agents` key to `tk`, resolving their
/// cards concurrently, each within `limit` (or its own shorter timeout):
/// a card that does not answer in time is a failure (logged, recorded in
/// [`toolnexus_core::Toolkit::failures`]), never a hang. Calls to the
/// agents keep their own timeouts. Returns each agent's card URL and the
/// number of tools it added, or its error. (The URLs returned and logged
/// leave out userinfo and query, which may hold secrets.)
pub async fn add_config_agents_within(
    tk: &mut Toolkit,
    config: &Value,
    limit: std::time::Duration,
) -> Vec<(String, Result<usize, Error>)> {
    let agents = toolnexus_core::parse_agents_config(config.get("agents").unwrap_or(&Value::Null));
    let transport = tk.transport().clone();
    let cards = futures_util::future::join_all(agents.iter().map(|agent| {
        let own = std::time::Duration::from_millis(agent.timeout_ms());
        let quick = agent.clone().with_timeout(own.min(limit));
        let transport = transport.clone();
        async move { toolnexus_core::fetch_card(&transport, &quick).await }
    }))
    .await;
    let mut outcomes = Vec::new();
    for (agent, card) in agents.iter().zip(cards) {
        let resolved = card.map(|card| toolnexus_core::card_tools(agent, &card));
        let added = tk.add_resolved(agent, resolved);
        let shown = shown_url(&agent.card);
        if let Err(e) = &added {
            tracing::warn!("agent {shown} skipped: {e}");
        }
        outcomes.push((shown, added.map(|names| names.len())));
    }
    outcomes
}

/// A URL as it may be shown: without userinfo, query or fragment, which
/// may carry secrets.
fn shown_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit('@').next().unwrap_or_default();
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

/// [`toolkit`] over your own transport.
pub async fn toolkit_with(
    transport: Arc<NativeTransport>,
    agents: &[Agent],
    config: Option<&Value>,
) -> Toolkit {
    let mut tk = toolnexus_core::Toolkit::new(transport).with_token_cells(|_| token_cell());
    tk.add_agents(agents).await;
    if let Some(config) = config {
        tk.add_config(config).await;
    }
    for f in tk.failures() {
        let card = toolnexus_core::redact_url(&f.card);
        tracing::warn!(card = %card, "agent {card} skipped: {}", f.error);
    }
    tk
}
