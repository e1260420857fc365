//! The native host of toolnexus A2A: a pooled HTTP client, a tokio/hyper
//! server and stores, over the no-I/O [`toolnexus_core`]. The `toolnexus`
//! CLI is this package's binary (feature `cli`, on by default); the library
//! never needs it: depend with `default-features = false` to leave out its
//! argument parser.
//!
//! Process, file and socket handling live here; protocol logic does not.
//! The library logs through [`tracing`] (target `toolnexus_host_native`) and
//! never prints; install a subscriber to see its warnings.

pub mod config_file;
pub mod http_server;
pub mod lock;
pub mod serve;
pub mod skills_dir;
pub mod store;
pub mod transport;

pub use http_server::Listener;
pub use lock::{MemoryStore, NativeLocks};
use serde_json::Value;
pub use serve::{serve, serve_on, Model, ServeHandle, ServeOptions};
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

    /// Runs the skill with `args` (`{"task": "…"}`). Never fails; see [`ToolResult::is_error`].
    pub async fn execute(&self, args: &Value) -> ToolResult {
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
        self.inner
            .execute_with_events(&self.transport, args, abort, on_event)
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
    let tools = toolnexus_core::agent_tools(transport, agent).await?;
    Ok(tools
        .into_iter()
        .map(|inner| RemoteTool {
            inner,
            transport: transport.clone(),
        })
        .collect())
}

/// The tools of a card you already hold (fetched yourself, or cached), called
/// over `transport`. No request is sent.
pub fn card_tools(
    transport: &Arc<NativeTransport>,
    agent: &Agent,
    card: &toolnexus_core::AgentCard,
) -> Vec<RemoteTool> {
    toolnexus_core::card_tools(agent, card)
        .into_iter()
        .map(|inner| RemoteTool {
            inner,
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

/// [`toolkit`] over your own transport.
pub async fn toolkit_with(
    transport: Arc<NativeTransport>,
    agents: &[Agent],
    config: Option<&Value>,
) -> Toolkit {
    let mut tk = toolnexus_core::Toolkit::new(transport);
    tk.add_agents(agents).await;
    if let Some(config) = config {
        tk.add_config(config).await;
    }
    for f in tk.failures() {
        tracing::warn!(card = %f.card, "agent {} skipped: {}", f.card, f.error);
    }
    tk
}
