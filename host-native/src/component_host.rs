//! The wasmtime host of the component (feature `component`): the same
//! `core`, compiled to `wasm32-wasip2` (wasm/component), run in wasmtime with
//! HTTP, clocks and randomness supplied by this host (wasmtime-wasi,
//! wasmtime-wasi-http).
//!
//! - [`ComponentHost`]: the library world (`toolnexus-a2a.wasm`), loaded and
//!   linked once (`InstancePre`); each call gets a fresh instance.
//! - [`serve_agent`]: the agent world (`toolnexus-agent.wasm`) behind a
//!   hyper server, an instance per request, as `wasmtime serve` does.

use serde_json::Value;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use toolnexus_core::{Agent, Error, MessageRefs, ToolResult, ToolSource, ToolSpec};
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

mod card_cache;
pub use card_cache::CardStore;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wasm/component/wit",
        world: "toolnexus:a2a/library",
        exports: { default: async },
        imports: { default: trappable },
        with: {
            "toolnexus:a2a/call-host.call-listener": super::CallListener,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "wasi:random": wasmtime_wasi::p2::bindings::random,
            "wasi:cli": wasmtime_wasi::p2::bindings::cli,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
        },
        require_store_data_send: true,
    });
}

use bindings::exports::toolnexus::a2a::client::CallOptions;
use bindings::toolnexus::a2a::types as wit;

/// What each instance's store holds: its WASI context, HTTP context and resources.
pub struct State {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    card_hook: Option<card_cache::CardHook>,
}

impl State {
    fn new(wasi: WasiCtx) -> Self {
        State {
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            card_hook: None,
        }
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: match &mut self.card_hook {
                Some(hook) => hook,
                None => Default::default(),
            },
        }
    }
}

/// Why a component could not be loaded, or could not answer a request; the
/// error underneath (wasmtime's, WASI's) is its [`source`](std::error::Error::source).
#[derive(Debug)]
pub struct ComponentError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ComponentError {
    fn new(message: impl Into<String>) -> Self {
        ComponentError {
            message: message.into(),
            source: None,
        }
    }

    /// `context` and the error's text (with its causes), over the error.
    fn caused(context: impl std::fmt::Display, e: wasmtime::Error) -> Self {
        ComponentError {
            message: format!("{context}: {e:#}"),
            source: Some(e.into()),
        }
    }
}

impl std::fmt::Display for ComponentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ComponentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The engine: async (host HTTP is tokio), compiled code cached on disk so
/// a short-lived process does not recompile the component each time.
fn engine(pooling: bool) -> Result<Engine, ComponentError> {
    let mut config = Config::new();
    if let Ok(cache) = wasmtime::Cache::new(wasmtime::CacheConfig::new()) {
        config.cache(Some(cache));
    }
    if pooling {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(256)
            .total_memories(256)
            .total_tables(256)
            .max_memory_size(256 << 20);
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config).map_err(|e| ComponentError::caused("cannot start wasmtime", e))
}

/// The host side of a `call-listener` (`call-live`): where the task's
/// events go as they happen, and the signal that aborts the call.
pub struct CallListener {
    on_tools: Box<dyn FnMut(Vec<ComponentTool>) + Send>,
    on_event: Box<dyn FnMut(String) + Send>,
    aborted: tokio::sync::watch::Receiver<bool>,
}

/// What [`ComponentHost::call_live`] tells as the call goes.
pub struct LiveListener {
    /// The agent's tools, once the card is read.
    pub on_tools: Box<dyn FnMut(Vec<ComponentTool>) + Send>,
    /// Each event of the task (A2A 0.3 JSON), as it happens.
    pub on_event: Box<dyn FnMut(String) + Send>,
}

/// The pollable of `call-listener.aborted`: ready once the host aborts.
struct AbortSignal(tokio::sync::watch::Receiver<bool>);

// `Pollable` is an `async_trait`; this is its signature written out, so the
// host needs no macro crate for one method.
impl wasmtime_wasi::p2::Pollable for AbortSignal {
    fn ready<'life0, 'async_trait>(
        &'life0 mut self,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            // A sender gone (the call is over) counts as aborted: nothing waits then.
            let _ = self.0.wait_for(|aborted| *aborted).await;
        })
    }
}

impl bindings::toolnexus::a2a::call_host::Host for State {}

impl bindings::toolnexus::a2a::call_host::HostCallListener for State {
    fn on_tools(
        &mut self,
        listener: Resource<CallListener>,
        tools: Vec<wit::Tool>,
    ) -> wasmtime::Result<()> {
        let tools = tools.into_iter().filter_map(|t| component_tool(t).ok());
        (self.table.get_mut(&listener)?.on_tools)(tools.collect());
        Ok(())
    }

    fn on_event(
        &mut self,
        listener: Resource<CallListener>,
        event: wit::TaskEvent,
    ) -> wasmtime::Result<()> {
        (self.table.get_mut(&listener)?.on_event)(event.json);
        Ok(())
    }

    fn aborted(
        &mut self,
        listener: Resource<CallListener>,
    ) -> wasmtime::Result<Resource<wasmtime_wasi::p2::DynPollable>> {
        let signal = AbortSignal(self.table.get(&listener)?.aborted.clone());
        let signal = self.table.push(signal)?;
        wasmtime_wasi::p2::subscribe(&mut self.table, signal)
    }

    fn drop(&mut self, listener: Resource<CallListener>) -> wasmtime::Result<()> {
        self.table.delete(listener)?;
        Ok(())
    }
}

fn load(engine: &Engine, path: &Path) -> Result<(Component, Linker<State>), ComponentError> {
    let component = Component::from_file(engine, path).map_err(|e| {
        ComponentError::caused(
            format_args!("cannot load the component {}", path.display()),
            e,
        )
    })?;
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)
        .and_then(|()| wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker))
        .and_then(|()| {
            bindings::toolnexus::a2a::call_host::add_to_linker::<State, HasSelf<State>>(
                &mut linker,
                |state| state,
            )
        })
        .map_err(|e| ComponentError::caused("cannot link WASI", e))?;
    // `toolnexus:a2a/types` has types only: an empty instance satisfies it.
    let _ = linker.instance("toolnexus:a2a/types@0.1.0");
    Ok((component, linker))
}

/// The library component (`toolnexus-a2a.wasm`), compiled and linked once;
/// each call runs in a fresh instance of it.
#[derive(Clone)]
pub struct ComponentHost {
    pre: bindings::LibraryPre<State>,
    cards: Option<Arc<dyn CardStore>>,
}

/// A problem of the host itself (a trap, a failed instantiation).
fn host_error(e: wasmtime::Error) -> Error {
    Error::Misuse(format!("the component failed: {e:#}"))
}

fn error(e: wit::Error) -> Error {
    match e {
        wit::Error::Transport(m) => Error::Transport(m.into()),
        wit::Error::Status(s) => Error::Status {
            status: s.status,
            url: s.url,
            body: s.body,
        },
        wit::Error::Malformed(m) => Error::Malformed(m.into()),
        wit::Error::Rpc(r) => Error::Rpc {
            code: r.code,
            message: r.message,
        },
        wit::Error::Misuse(m) => Error::Misuse(m),
    }
}

fn agent(a: &Agent) -> wit::Agent {
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis() as u64);
    wit::Agent {
        card: a.card.clone(),
        headers: a.headers.clone(),
        timeout_ms: ms(a.timeout),
        poll_interval_ms: ms(a.poll_every),
        max_card_bytes: a.max_card_bytes,
        max_skills: a.max_skills,
        allow_insecure_headers: a.allow_insecure_headers,
    }
}

fn tool_result(r: wit::ToolResult) -> ToolResult {
    ToolResult {
        output: r.output,
        is_error: r.is_error,
        metadata: r.metadata.and_then(|m| serde_json::from_str(&m).ok()),
    }
}

fn component_tool(t: wit::Tool) -> Result<ComponentTool, Error> {
    let source = ToolSource::parse(&t.source).ok_or_else(|| {
        Error::malformed(format!(
            "the component listed a tool of unknown source {:?}",
            t.source
        ))
    })?;
    Ok(ComponentTool {
        spec: ToolSpec {
            name: t.name,
            description: t.description,
            input_schema: serde_json::from_str(&t.input_schema).unwrap_or(Value::Null),
            source,
        },
        skill: t.skill,
        clash: t.clash,
    })
}

/// One tool as the component lists it: its spec, the skill it runs, and the
/// name it would have had had an earlier skill not taken it.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentTool {
    pub spec: ToolSpec,
    pub skill: String,
    pub clash: Option<String>,
}

/// The outcome of [`ComponentHost::call`]: the result and, when asked for,
/// the task's events as A2A 0.3 JSON (what `toolnexus call --events` prints).
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub result: ToolResult,
    pub events: Vec<String>,
}

impl ComponentHost {
    /// Compiles (or takes from wasmtime's cache) and links the library component.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ComponentError> {
        Self::load_with(path, false)
    }

    /// [`ComponentHost::load`] with instances from wasmtime's pooling
    /// allocator (memories reserved up front and reused) when `pooling`.
    pub fn load_with(path: impl AsRef<Path>, pooling: bool) -> Result<Self, ComponentError> {
        let engine = engine(pooling)?;
        let (component, linker) = load(&engine, path.as_ref())?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(bindings::LibraryPre::new)
            .map_err(|e| {
                let what = path.as_ref().display();
                ComponentError::caused(
                    format_args!("{what} is not a toolnexus:a2a library component"),
                    e,
                )
            })?;
        Ok(ComponentHost { pre, cards: None })
    }

    /// Answers the component's Agent Card requests from `cards` while they
    /// are fresh (revalidating stale ones), as the native engine's card
    /// cache does. Never for an agent with headers: those may be credentials.
    pub fn with_card_cache(mut self, cards: Arc<dyn CardStore>) -> Self {
        self.cards = Some(cards);
        self
    }

    /// A fresh instance, with this process's environment (for `${NAME}` in
    /// headers) and stderr; `agent`'s card through the card cache, if any.
    async fn instance_for(
        &self,
        agent: Option<&Agent>,
    ) -> Result<(Store<State>, bindings::Library), Error> {
        let wasi = WasiCtx::builder().inherit_env().inherit_stderr().build();
        let mut state = State::new(wasi);
        if let (Some(store), Some(agent)) = (&self.cards, agent) {
            if let (true, Ok(uri)) = (agent.headers.is_empty(), agent.card.parse()) {
                state.card_hook = Some(card_cache::CardHook {
                    card: agent.card.clone(),
                    uri,
                    store: store.clone(),
                    max_bytes: agent.card_limits().0.saturating_add(1),
                });
            }
        }
        let mut store = Store::new(self.pre.engine(), state);
        let library = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(host_error)?;
        Ok((store, library))
    }

    /// Instantiates the component and drops the instance (the benchmark's
    /// instantiate-per-call cost).
    pub async fn instantiate(&self) -> Result<(), Error> {
        self.instance_for(None).await.map(|_| ())
    }

    /// The agent's tools: `agent-tools` in the component.
    pub async fn agent_tools(&self, a: &Agent) -> Result<Vec<ToolSpec>, Error> {
        Ok(self.tools(a).await?.into_iter().map(|t| t.spec).collect())
    }

    /// [`ComponentHost::agent_tools`] with each tool's skill and name clash.
    pub async fn tools(&self, a: &Agent) -> Result<Vec<ComponentTool>, Error> {
        let (mut store, library) = self.instance_for(Some(a)).await?;
        let tools = library
            .toolnexus_a2a_client()
            .call_agent_tools(&mut store, &agent(a))
            .await
            .map_err(host_error)?
            .map_err(error)?;
        tools.into_iter().map(component_tool).collect()
    }

    /// Runs one tool (by name or skill id) with `task`: `call` in the component.
    pub async fn call(
        &self,
        a: &Agent,
        tool: &str,
        task: &str,
        events: bool,
        deadline_ms: Option<u64>,
    ) -> Result<CallOutcome, Error> {
        let (mut store, library) = self.instance_for(Some(a)).await?;
        let outcome = library
            .toolnexus_a2a_client()
            .call_call(
                &mut store,
                &agent(a),
                tool,
                task,
                &CallOptions {
                    deadline_ms,
                    events,
                    task_id: None,
                    context_id: None,
                },
            )
            .await
            .map_err(host_error)?
            .map_err(error)?;
        Ok(CallOutcome {
            result: tool_result(outcome.result),
            events: outcome.events.into_iter().map(|e| e.json).collect(),
        })
    }

    /// Runs one tool (by name or skill id) with `task`, as [`ComponentHost::call`],
    /// handing each event (A2A 0.3 JSON) to `listener.on_event` as it happens:
    /// `call-live` in the component. `listener.on_tools` hears the agent's
    /// tools once the card is read. When `abort` completes the component stops the call
    /// and cancels the remote task (the core's abort path), and the result is
    /// the canceled one. `refs` answers a task's question or continues a conversation.
    pub async fn call_live(
        &self,
        a: &Agent,
        tool: &str,
        task: &str,
        refs: MessageRefs,
        abort: impl Future<Output = ()> + Send,
        listener: LiveListener,
    ) -> Result<ToolResult, Error> {
        let (mut store, library) = self.instance_for(Some(a)).await?;
        let (abort_tx, aborted) = tokio::sync::watch::channel(false);
        let listener = store
            .data_mut()
            .table
            .push(CallListener {
                on_tools: listener.on_tools,
                on_event: listener.on_event,
                aborted,
            })
            .map_err(|e| host_error(e.into()))?;
        let options = CallOptions {
            deadline_ms: None,
            events: true,
            task_id: refs.task_id,
            context_id: refs.context_id,
        };
        let wit_agent = agent(a);
        let call = library
            .toolnexus_a2a_client()
            .call_call_live(&mut store, &wit_agent, tool, task, &options, listener);
        let signal = async move {
            abort.await;
            let _ = abort_tx.send(true);
            // The call goes on (it cancels the task) and ends the select.
            std::future::pending::<std::convert::Infallible>().await
        };
        let result = tokio::select! {
            result = call => result,
            never = signal => match never {},
        };
        Ok(tool_result(result.map_err(host_error)?.map_err(error)?))
    }
}

/// The agent component (`toolnexus-agent.wasm`), served an instance per
/// request as `wasmtime serve` does.
pub struct AgentComponent {
    pre: wasmtime_wasi_http::p2::bindings::ProxyPre<State>,
    env: Arc<Vec<(String, String)>>,
    store_dir: Option<std::path::PathBuf>,
}

impl AgentComponent {
    /// Compiles and links the agent component; `env` is what each instance
    /// sees of the environment (its `TOOLNEXUS_*` configuration), and
    /// `store_dir` the folder it sees as `/tasks` (for `TOOLNEXUS_STORE=file:/tasks`).
    pub fn load(
        path: impl AsRef<Path>,
        env: Vec<(String, String)>,
        store_dir: Option<std::path::PathBuf>,
    ) -> Result<Self, ComponentError> {
        let engine = engine(true).or_else(|_| engine(false))?;
        let (component, linker) = load(&engine, path.as_ref())?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(wasmtime_wasi_http::p2::bindings::ProxyPre::new)
            .map_err(|e| {
                let what = path.as_ref().display();
                ComponentError::caused(format_args!("{what} is not a wasi:http/proxy component"), e)
            })?;
        Ok(AgentComponent {
            pre,
            env: Arc::new(env),
            store_dir,
        })
    }

    /// One request through a fresh instance.
    pub async fn handle(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<wasmtime_wasi_http::p2::body::HyperOutgoingBody>, ComponentError>
    {
        use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
        let mut wasi = WasiCtx::builder();
        wasi.envs(&self.env).inherit_stderr();
        if let Some(dir) = &self.store_dir {
            wasi.preopened_dir(dir, "/tasks", wasmtime_wasi::FsPerms::ReadWrite)
                .map_err(|e| {
                    ComponentError::caused(
                        format_args!("cannot open the store folder {}", dir.display()),
                        e,
                    )
                })?;
        }
        let mut store = Store::new(self.pre.engine(), State::new(wasi.build()));
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let req = store
            .data_mut()
            .http()
            .new_incoming_request(Scheme::Http, req)
            .map_err(|e| ComponentError {
                message: e.to_string(),
                source: Some(e.into()),
            })?;
        let out = store
            .data_mut()
            .http()
            .new_response_outparam(sender)
            .map_err(|e| ComponentError {
                message: e.to_string(),
                source: Some(e.into()),
            })?;
        let pre = self.pre.clone();
        // The instance may go on after the response head (a streamed body,
        // background work), so it runs on its own task.
        let task = tokio::spawn(async move {
            let proxy = pre.instantiate_async(&mut store).await?;
            proxy
                .wasi_http_incoming_handler()
                .call_handle(store, req, out)
                .await
        });
        match receiver.await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(ComponentError::new(format!(
                "the agent failed the request: {e:?}"
            ))),
            Err(_) => Err(match task.await {
                Ok(Ok(())) => ComponentError::new("the agent sent no response"),
                Ok(Err(e)) => ComponentError::caused("the agent failed", e),
                Err(e) => ComponentError {
                    message: format!("the agent failed: {e}"),
                    source: Some(e.into()),
                },
            }),
        }
    }
}

/// Serves the agent component on `listener`, an instance per request, until
/// `stop` completes. Connections are HTTP/1.1 with keep-alive.
pub async fn serve_agent(
    listener: tokio::net::TcpListener,
    agent: Arc<AgentComponent>,
    stop: impl std::future::Future<Output = ()>,
) {
    use http_body_util::BodyExt;
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
            () = &mut stop => return,
        };
        let agent = agent.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let agent = agent.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(match agent.handle(req).await {
                        Ok(resp) => resp,
                        Err(problem) => {
                            tracing::warn!("{problem}");
                            let body = http_body_util::Full::new(hyper::body::Bytes::from(
                                problem.to_string(),
                            ))
                            .map_err(|never| match never {})
                            .boxed_unsync();
                            let mut resp = hyper::Response::new(body);
                            *resp.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                            resp
                        }
                    })
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}
