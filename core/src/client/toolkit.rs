//! A2A agents as tools, and the [`Toolkit`] that gathers tools from several
//! sources behind one `execute(name, args)`.

use crate::client::auth::{AuthPlan, PlanCredential, SharedTokenCell};
use crate::client::call::{CallAuth, CallMachine, CallSpec, TokenRequest};
use crate::client::card::AgentCard;
use crate::client::sanitize::sanitize;
use crate::error::Error;
use crate::host::driver::drive_watched;
use crate::host::transport::{BoxFuture, MaybeSend, Transport};
use crate::model::agent::expand_env;
use crate::model::agent::Agent;
use crate::model::event::StreamEvent;
use crate::model::tool::{
    a2a_input_schema, to_anthropic, to_gemini, to_openai, ToolResult, ToolSource, ToolSpec,
};
use crate::wire::json::quoted;
use crate::wire::rpc::Dialect;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// One skill of a remote agent, callable as a tool.
#[derive(Debug, Clone)]
pub struct A2aTool {
    pub spec: ToolSpec,
    pub agent: Agent,
    /// The card's `name` (reported as `metadata.agent`).
    pub agent_name: String,
    pub skill: String,
    pub endpoint: String,
    pub dialect: Dialect,
    /// The card lists [`crate::client::card::LONG_POLL_EXTENSION`].
    pub long_poll: bool,
    /// The card says `capabilities.streaming`.
    pub streaming: bool,
    /// The name this skill would have had, when an earlier skill of the card
    /// already made it (`dup`/`dup`, `d.u.p`/`d_u_p`): this one then carries a
    /// `_2`, `_3`… suffix, in card order. Hosts should say so.
    pub clash: Option<String>,
    /// How calls authenticate (the agent's `auth` against the card's
    /// schemes), or why the agent's `auth` cannot be used with this card.
    pub auth: Result<Option<AuthPlan>, Error>,
    /// The card requires a credential for every call.
    pub requires_credentials: bool,
    /// The agent's token cache, shared by its tools and their concurrent
    /// calls; `None`: each call fetches its own token. Hosts set it
    /// ([`A2aTool::with_tokens`], [`Toolkit::with_token_cells`]).
    pub tokens: Option<AgentTokens>,
}

/// An agent's shared [`crate::TokenCell`] (its `Debug` shows nothing of it).
#[derive(Clone)]
pub struct AgentTokens(pub SharedTokenCell);

impl std::fmt::Debug for AgentTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentTokens")
    }
}

/// Where the credentials of calls to `agent` at `endpoint` go; `what`
/// names the call in messages (a tool name, `ListTasks`).
pub fn route(agent: &Agent, endpoint: &str, required: bool, what: &str) -> CredentialRoute {
    if !agent.has_credentials() || agent.credentials_may_go_to(endpoint) {
        return CredentialRoute::Send;
    }
    let endpoint = crate::wire::url::origin(endpoint).unwrap_or("(no origin)");
    let card = crate::wire::url::redact(&agent.card);
    if required {
        return CredentialRoute::Refuse(Error::Misuse(format!(
            "refusing to call {what}: the card at {card} names an endpoint on another origin, {endpoint}, and requires credentials; trust that origin with --allow-credentials-to {endpoint} (allowedOrigins in a config)"
        )));
    }
    CredentialRoute::Withhold(format!(
        "calling {what} without credentials: the card at {card} names an endpoint on another origin, {endpoint}; trust it with --allow-credentials-to {endpoint} (allowedOrigins in a config)"
    ))
}

/// Where a call's credentials go ([`A2aTool::credential_route`]).
#[derive(Debug, Clone, PartialEq)]
pub enum CredentialRoute {
    /// To the endpoint (the card's origin, or one the user allowed); or
    /// there are none.
    Send,
    /// Not sent: the card names an endpoint on another origin. The call
    /// goes without them; hosts show this warning.
    Withhold(String),
    /// Not sent, and the card requires them: the call is refused.
    Refuse(Error),
}

impl A2aTool {
    /// The tool, sharing `tokens` (the agent's token cache) with others.
    pub fn with_tokens(mut self, tokens: SharedTokenCell) -> Self {
        self.tokens = Some(AgentTokens(tokens));
        self
    }

    /// Whether the caller's credentials (the agent's `auth` and headers) go
    /// to the endpoint the card names: only to the card's own origin and
    /// the origins the agent lists ([`Agent::allowed_origins`]).
    pub fn credential_route(&self) -> CredentialRoute {
        route(
            &self.agent,
            &self.endpoint,
            self.requires_credentials,
            &self.spec.name,
        )
    }

    /// Runs the skill with `args.task` and follows the task until it settles
    /// (see [`CallMachine`]). Never fails: every problem comes back as `is_error`.
    pub async fn execute<T: Transport>(
        &self,
        transport: &T,
        args: &Value,
        abort: impl Future<Output = ()> + MaybeSend,
    ) -> ToolResult {
        self.execute_with_events(transport, args, abort, |_| {})
            .await
    }

    /// [`A2aTool::execute`] that hands each event of the task (stream events,
    /// or the task as seen by SendMessage and GetTask) to `on_event` as it happens.
    pub async fn execute_with_events<T: Transport>(
        &self,
        transport: &T,
        args: &Value,
        abort: impl Future<Output = ()> + MaybeSend,
        on_event: impl FnMut(StreamEvent) + MaybeSend,
    ) -> ToolResult {
        self.execute_traced(transport, args, abort, on_event, None)
            .await
    }

    /// [`A2aTool::execute_with_events`] in a trace (W3C trace context): the
    /// call is a span of `trace`, and each of its requests carries it.
    pub async fn execute_traced<T: Transport>(
        &self,
        transport: &T,
        args: &Value,
        abort: impl Future<Output = ()> + MaybeSend,
        on_event: impl FnMut(StreamEvent) + MaybeSend,
        trace: Option<&crate::TraceContext>,
    ) -> ToolResult {
        self.execute_spanned(transport, args, abort, on_event, trace, None)
            .await
    }

    /// [`A2aTool::execute_traced`] that hands `spans` the call's spans (a
    /// [`crate::SpanRecord`] each): `execute_tool {tool}`, the child of
    /// `trace`, and under it `a2a.client {method}` for each request, whose
    /// span the peer sees as its parent. With `spans` and no `trace`, the
    /// call starts a trace of its own. (Without the feature `spans`, on
    /// with `server`, the call records none.)
    pub async fn execute_spanned<T: Transport>(
        &self,
        transport: &T,
        args: &Value,
        abort: impl Future<Output = ()> + MaybeSend,
        mut on_event: impl FnMut(StreamEvent) + MaybeSend,
        trace: Option<&crate::TraceContext>,
        spans: Option<&crate::SpanHook>,
    ) -> ToolResult {
        // One instance of the whole call per transport, whatever the caller's
        // abort and listener types: the call is the bulk of a client's code.
        let abort = std::pin::pin!(abort);
        self.run(transport, args, None, abort, &mut on_event, trace, spans)
            .await
    }

    /// [`A2aTool::execute_with_events`] for a call that began at `started_ms`
    /// of the transport's clock (before its card fetch, say): the agent's
    /// timeout bounds the whole of it, and `metadata.ms` counts from there.
    pub async fn execute_since<T: Transport>(
        &self,
        transport: &T,
        args: &Value,
        started_ms: u64,
        abort: impl Future<Output = ()> + MaybeSend,
        mut on_event: impl FnMut(StreamEvent) + MaybeSend,
    ) -> ToolResult {
        let abort = std::pin::pin!(abort);
        self.run(
            transport,
            args,
            Some(started_ms),
            abort,
            &mut on_event,
            None,
            None,
        )
        .await
    }

    // One argument each: this is the call's one instance per transport.
    #[allow(clippy::too_many_arguments)]
    async fn run<T: Transport>(
        &self,
        transport: &T,
        args: &Value,
        started_ms: Option<u64>,
        abort: DynAbort<'_>,
        on_event: DynListener<'_>,
        trace: Option<&crate::TraceContext>,
        spans: Option<&crate::SpanHook>,
    ) -> ToolResult {
        let Some(task) = args.get("task").and_then(Value::as_str) else {
            return ToolResult::error(format!(
                "{}: the argument \"task\" (a string) is required",
                self.spec.name
            ));
        };
        let send_credentials = match self.credential_route() {
            CredentialRoute::Send => true,
            CredentialRoute::Withhold(_) => false,
            CredentialRoute::Refuse(e) => return ToolResult::error(e.to_string()),
        };
        let plan = match (&self.auth, send_credentials) {
            (Err(e), true) => return ToolResult::error(e.to_string()),
            (Ok(Some(plan)), true) => Some(plan),
            _ => None,
        };
        let message_id = transport.new_id();
        // FNV-1a of the fresh id: the host's randomness, for retry jitter.
        let jitter_seed = crate::wire::fnv1a(crate::wire::FNV_OFFSET, message_id.as_bytes());
        let refs = match crate::wire::rpc::MessageRefs::from_args(args) {
            Ok(refs) => refs,
            Err(e) => return ToolResult::error(format!("{}: {e}", self.spec.name)),
        };
        let auth = plan.map(|p| CallAuth {
            scheme: p.scheme.clone(),
            placement: p.placement.clone(),
            credential: match &p.credential {
                PlanCredential::Static(v) => Some(expand_env(v, |n| transport.env(n))),
                PlanCredential::Token(_) => None,
            },
        });
        let source = plan.and_then(|p| match &p.credential {
            PlanCredential::Token(source) => Some(source),
            PlanCredential::Static(_) => None,
        });
        let mut headers = if send_credentials {
            self.agent.expanded_headers(|n| transport.env(n))
        } else {
            Vec::new()
        };
        // The call is a span of the caller's trace, named by its fresh id
        // (a trace of its own when only its spans are asked for).
        let context = match (trace, spans) {
            (Some(t), _) => Some(t.child(&message_id)),
            // Spans asked for outside a trace: the call is the root of one.
            (None, Some(_)) => Some(crate::TraceContext::root(&message_id)),
            (None, None) => None,
        };
        if let Some(context) = &context {
            context.put_on(&mut headers);
        }
        #[cfg(feature = "spans")]
        let mut span = match (spans, &context) {
            (Some(hook), Some(context)) => {
                let mut span = crate::SpanRecord::new(
                    crate::wire::trace::joined("execute_tool ", &self.spec.name),
                    crate::SpanKind::Internal,
                    context.clone(),
                    trace.map_or([0; 8], |t| t.span_id),
                    transport.now_ms(),
                );
                span.set("gen_ai.operation.name", "execute_tool");
                span.set("gen_ai.tool.name", self.spec.name.as_str());
                span.set("gen_ai.tool.type", "agent");
                span.set(
                    "server.address",
                    crate::wire::http::authority(&self.endpoint),
                );
                Some((
                    hook,
                    span,
                    crate::wire::trace::CallSpans::new(hook, context.clone()),
                ))
            }
            _ => None,
        };
        #[cfg(not(feature = "spans"))]
        let _ = spans;
        let spec = CallSpec {
            agent: self.agent_name.clone(),
            endpoint: self.endpoint.clone(),
            dialect: self.dialect,
            headers,
            timeout_ms: self.agent.timeout_ms(),
            poll_every_ms: self.agent.poll_every_ms(),
            message_id,
            text: task.to_string(),
            long_poll: self.long_poll,
            streaming: self.streaming,
            started_ms,
            jitter_seed,
            auth,
        };
        let deadline_ms = started_ms
            .unwrap_or_else(|| transport.now_ms())
            .saturating_add(self.agent.timeout_ms());
        let cell = self.tokens.as_ref().map(|t| &*t.0 as &dyn crate::TokenCell);
        let mut call = CallMachine::new(spec).continuing(refs);
        let work = |req: TokenRequest| async move {
            match source {
                Some(source) => {
                    crate::client::auth::token(
                        transport,
                        cell,
                        source,
                        req.stale.as_deref(),
                        deadline_ms,
                    )
                    .await
                }
                None => Err(Error::Misuse("no token source for this agent".into())),
            }
        };
        #[cfg(feature = "spans")]
        let watch = span.as_mut().map(|(_, _, w)| w);
        #[cfg(not(feature = "spans"))]
        let watch = ();
        let result = drive_watched(&mut call, transport, abort, on_event, work, watch).await;
        #[cfg(feature = "spans")]
        if let Some((hook, mut span, _)) = span {
            span.error = result.is_error;
            span.end(hook, transport.now_ms());
        }
        result
    }
}

/// The caller's abort, type-erased (`Send` on native targets).
#[cfg(not(target_arch = "wasm32"))]
type DynAbort<'a> = std::pin::Pin<&'a mut (dyn Future<Output = ()> + Send)>;
#[cfg(target_arch = "wasm32")]
type DynAbort<'a> = std::pin::Pin<&'a mut dyn Future<Output = ()>>;
/// The caller's event listener, type-erased (`Send` on native targets).
#[cfg(not(target_arch = "wasm32"))]
type DynListener<'a> = &'a mut (dyn FnMut(StreamEvent) + Send);
#[cfg(target_arch = "wasm32")]
type DynListener<'a> = &'a mut dyn FnMut(StreamEvent);

/// What [`Toolkit::run_llm_reporting`] calls before each tool call (`Sync` on
/// native targets, so the run stays `Send`).
#[cfg(all(feature = "server", not(target_arch = "wasm32")))]
pub type ToolCallHook<'a> = &'a (dyn Fn(&crate::llm::ToolCall, Option<ToolSource>) + Sync);
/// What [`Toolkit::run_llm_reporting`] calls before each tool call.
#[cfg(all(feature = "server", target_arch = "wasm32"))]
pub type ToolCallHook<'a> = &'a dyn Fn(&crate::llm::ToolCall, Option<ToolSource>);

/// GETs and parses the agent's card (bounded by the agent's timeout).
pub async fn fetch_card<T: Transport>(transport: &T, agent: &Agent) -> Result<AgentCard, Error> {
    let headers = agent.expanded_headers(|n| transport.env(n));
    let mut machine =
        crate::client::card::CardMachine::new(&agent.card, headers, agent.timeout_ms())
            .with_limits(agent.card_limits());
    crate::host::driver::drive(&mut machine, transport, std::future::pending()).await
}

/// The tools of an already fetched card, one per skill with an id or name.
/// Names are unique: a skill whose name an earlier one already made gets the
/// first free `_2`, `_3`… suffix and says so in [`A2aTool::clash`].
pub fn card_tools(agent: &Agent, card: &AgentCard) -> Vec<A2aTool> {
    let (dialect, endpoint) = card.endpoint_for(&agent.card, agent.binding);
    let auth = crate::client::auth::plan(
        agent.auth.as_ref(),
        &agent.card,
        &card.security_schemes,
        &card.security_requirements,
    );
    // (base name, name) of each tool so far; at most `max_skills` of them.
    let mut taken: Vec<(String, String)> = Vec::new();
    // A plain loop, not `filter_map(..).collect()` (its own iterator code
    // in the client `.wasm`).
    let mut tools = Vec::new();
    for skill in &card.skills {
        let Some(key) = skill.key() else {
            continue;
        };
        let base = format!("{}_{}", sanitize(&card.name), sanitize(key));
        // Start past the suffixes this base already used, so a card of
        // a thousand equal skills costs no more than a thousand checks each.
        let mut n = taken.iter().filter(|(b, _)| *b == base).count().max(1);
        let mut name = base.clone();
        while taken.iter().any(|(_, t)| *t == name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        taken.push((base.clone(), name.clone()));
        let description = skill
            .description
            .clone()
            .or_else(|| skill.name.clone())
            .unwrap_or_else(|| key.to_string());
        tools.push(A2aTool {
            clash: (name != base).then_some(base),
            spec: ToolSpec {
                name,
                input_schema: if agent.conversational {
                    crate::model::tool::a2a_conversational_schema(&description)
                } else {
                    a2a_input_schema(&description)
                },
                description,
                source: ToolSource::A2a,
            },
            agent: agent.clone(),
            agent_name: card.name.clone(),
            skill: key.to_string(),
            endpoint: endpoint.clone(),
            dialect,
            long_poll: card.long_poll(),
            streaming: card.streaming,
            auth: auth.clone(),
            requires_credentials: card.requires_credentials(),
            tokens: None,
        });
    }
    tools
}

/// Fetches the agent's card and returns one tool per advertised skill.
/// Fails loudly (network, non-2xx, not a card); a [`Toolkit`] isolates that instead.
pub async fn agent_tools<T: Transport>(
    transport: &T,
    agent: &Agent,
) -> Result<Vec<A2aTool>, Error> {
    let card = fetch_card(transport, agent).await?;
    Ok(card_tools(agent, &card))
}

/// The tool a caller named: by its tool name, else by its skill id (what
/// `toolnexus call TOOL` and the component's `call` accept).
pub fn find_tool<'a>(tools: &'a [A2aTool], name: &str) -> Result<&'a A2aTool, Error> {
    find_tool_by(tools, name, |t: &A2aTool| {
        (t.spec.name.as_str(), t.skill.as_str())
    })
}

/// [`find_tool`] over any list of tools: `keys` gives a tool's (name, skill
/// id). A skill id the card lists twice names no tool: the caller must use
/// the tool name (`review` and `review_2`, say).
pub fn find_tool_by<'a, T>(
    tools: &'a [T],
    name: &str,
    keys: impl Fn(&T) -> (&str, &str),
) -> Result<&'a T, Error> {
    if let Some(t) = tools.iter().find(|t| keys(t).0 == name) {
        return Ok(t);
    }
    let by_skill: Vec<&T> = tools.iter().filter(|t| keys(t).1 == name).collect();
    let names = |list: &mut dyn Iterator<Item = &T>| -> String {
        list.map(|t| keys(t).0).collect::<Vec<_>>().join(", ")
    };
    match by_skill.as_slice() {
        [one] => Ok(one),
        // `quoted`, not `{:?}`: the client `.wasm` keeps no `Debug` escaping.
        [] => Err(Error::Misuse(format!(
            "the agent has no tool {} (it has: {})",
            quoted(name),
            names(&mut tools.iter())
        ))),
        many => Err(Error::Misuse(format!(
            "the card lists the skill {} {} times: name the tool ({})",
            quoted(name),
            many.len(),
            names(&mut many.iter().copied())
        ))),
    }
}

/// A tool the host implements itself (a closure).
#[cfg(not(target_arch = "wasm32"))]
pub type HostFn = Arc<dyn Fn(Value) -> BoxFuture<'static, ToolResult> + Send + Sync>;
/// A tool the host implements itself (a closure).
#[cfg(target_arch = "wasm32")]
pub type HostFn = Arc<dyn Fn(Value) -> BoxFuture<'static, ToolResult>>;

#[derive(Clone)]
enum ToolImpl {
    A2a(Arc<A2aTool>),
    #[cfg(feature = "server")]
    Skill(Arc<crate::skills::SkillSet>),
    Host(HostFn),
}

impl ToolImpl {
    /// Precedence when two sources offer one name: agents, then skills, then
    /// the host's own tools. Within a source, the first added wins.
    fn rank(&self) -> u8 {
        match self {
            ToolImpl::A2a(_) => 0,
            #[cfg(feature = "server")]
            ToolImpl::Skill(_) => 1,
            ToolImpl::Host(_) => 2,
        }
    }
}

#[derive(Clone)]
struct Entry {
    spec: ToolSpec,
    imp: ToolImpl,
}

/// An agent that could not be resolved: it contributes no tools.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFailure {
    pub card: String,
    pub error: Error,
}

/// Tools from A2A agents and the host, behind one `execute(name, args)`.
/// Names are unique: when two sources offer the same name, the first added wins.
/// Cloning is cheap (tools are shared) when the transport is.
#[derive(Clone)]
pub struct Toolkit<T: Transport> {
    transport: T,
    entries: Vec<Entry>,
    failures: Vec<AgentFailure>,
    #[cfg(feature = "server")]
    skills: Option<Arc<crate::skills::SkillSet>>,
    /// Makes each agent's token cache (the host's lock around a `TokenCache`).
    token_cells: Option<fn(&Agent) -> SharedTokenCell>,
    /// Gets the spans of its calls and runs ([`Toolkit::with_span_hook`]).
    spans: Option<crate::SpanHook>,
}

impl<T: Transport> Toolkit<T> {
    /// An empty toolkit over `transport`.
    pub fn new(transport: T) -> Self {
        Toolkit {
            transport,
            entries: Vec::new(),
            failures: Vec::new(),
            #[cfg(feature = "server")]
            skills: None,
            token_cells: None,
            spans: None,
        }
    }

    /// Hands `hook` a [`crate::SpanRecord`] for each span of its work: the
    /// model calls and tool calls of a traced model run
    /// ([`Toolkit::run_llm_traced`]), and each A2A tool call with its
    /// requests ([`A2aTool::execute_spanned`]), traced or not.
    pub fn with_span_hook(mut self, hook: crate::SpanHook) -> Self {
        self.spans = Some(hook);
        self
    }

    /// Gives each agent added from now on the token cache `make` gives for
    /// it (the host's lock around a [`crate::TokenCache`]), shared by its
    /// tools and their concurrent calls; a host that keeps one cell per agent
    /// and credential shares it with its other calls (ListTasks). Without it
    /// each call fetches its own OAuth2 token.
    pub fn with_token_cells(mut self, make: fn(&Agent) -> SharedTokenCell) -> Self {
        self.token_cells = Some(make);
        self
    }

    /// The transport the tools call through.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    fn push(&mut self, spec: ToolSpec, imp: ToolImpl) -> bool {
        match self.entries.iter().position(|e| e.spec.name == spec.name) {
            Some(i) if self.entries[i].imp.rank() <= imp.rank() => false,
            Some(i) => {
                self.entries[i] = Entry { spec, imp };
                true
            }
            None => {
                self.entries.push(Entry { spec, imp });
                true
            }
        }
    }

    /// Resolves `agents` concurrently and adds their tools in the given order.
    /// An agent that fails is recorded in [`Toolkit::failures`] and skipped.
    pub async fn add_agents(&mut self, agents: &[Agent]) {
        let transport = &self.transport;
        let resolved =
            crate::host::driver::join_all(agents.iter().map(|a| agent_tools(transport, a))).await;
        for (agent, result) in agents.iter().zip(resolved) {
            let _ = self.add_resolved(agent, result);
        }
    }

    /// Adds the agents of a config object's `agents` key (see
    /// [`crate::parse_agents_config`]); other keys are ignored here.
    pub async fn add_config(&mut self, config: &Value) {
        let agents = crate::client::config::parse_agents_config(
            config.get("agents").unwrap_or(&Value::Null),
        );
        self.add_agents(&agents).await;
    }

    /// Adds one agent at run time; returns the names of the tools it added
    /// (a failure is also recorded in [`Toolkit::failures`]).
    pub async fn add_agent(&mut self, agent: Agent) -> Result<Vec<String>, Error> {
        let resolved = agent_tools(&self.transport, &agent).await;
        self.add_resolved(&agent, resolved)
    }

    /// Adds an agent already resolved with [`agent_tools`]: its tools, or its
    /// failure (recorded in [`Toolkit::failures`] and returned). Returns the
    /// names of the tools added. For hosts that resolve without holding the
    /// toolkit (resolve, then add to a clone and swap it in).
    // On wasm32 (one thread) a tool's token cell is an `Rc`-like `RefCell`.
    #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
    pub fn add_resolved(
        &mut self,
        agent: &Agent,
        resolved: Result<Vec<A2aTool>, Error>,
    ) -> Result<Vec<String>, Error> {
        let cell = self.token_cells.map(|make| make(agent));
        match resolved {
            Ok(tools) => {
                // A plain loop, not a `filter_map(..).collect()` chain (see ARCHITECTURE.md).
                let mut added = Vec::new();
                for t in tools {
                    let t = match (&cell, &t.tokens) {
                        (Some(c), None) => t.with_tokens(c.clone()),
                        _ => t,
                    };
                    let name = t.spec.name.clone();
                    if self.push(t.spec.clone(), ToolImpl::A2a(Arc::new(t))) {
                        added.push(name);
                    }
                }
                Ok(added)
            }
            Err(error) => {
                self.failures.push(AgentFailure {
                    card: agent.card.clone(),
                    error: error.clone(),
                });
                Err(error)
            }
        }
    }

    /// Adds a host-implemented tool; `false` when the name is taken.
    pub fn add_host_tool(&mut self, spec: ToolSpec, run: HostFn) -> bool {
        self.push(spec, ToolImpl::Host(run))
    }

    /// Adds skills: the `skill` tool that loads one, and the skills prompt
    /// ([`Toolkit::skills_prompt`]). Replaces skills added before.
    #[cfg(feature = "server")]
    pub fn add_skills(&mut self, skills: crate::skills::SkillSet) {
        self.entries
            .retain(|e| !matches!(e.imp, ToolImpl::Skill(_)));
        let skills = Arc::new(skills);
        if !skills.is_empty() {
            self.push(skills.tool_spec(), ToolImpl::Skill(skills.clone()));
        }
        self.skills = Some(skills);
    }

    /// The skills, if any were added.
    #[cfg(feature = "server")]
    pub fn skills(&self) -> Option<&crate::skills::SkillSet> {
        self.skills.as_deref()
    }

    /// The system-prompt section listing the skills (empty without skills).
    #[cfg(feature = "server")]
    pub fn skills_prompt(&self) -> String {
        self.skills.as_ref().map(|s| s.prompt()).unwrap_or_default()
    }

    /// Runs the LLM loop on `prompt` with this toolkit's tools offered and
    /// executed; the skills prompt joins the configured system prompt.
    #[cfg(feature = "server")]
    ///
    /// This and the two below are plain functions returning the future of
    /// [`Toolkit::run_llm_traced`]: as async wrappers, each would nest a
    /// state machine of its own.
    pub fn run_llm<'a>(
        &'a self,
        cfg: &'a crate::llm::LlmConfig,
        prompt: &'a str,
    ) -> impl Future<Output = Result<crate::llm::RunResult, Error>> + 'a {
        self.run_llm_reporting(cfg, prompt, &|_, _| {})
    }

    /// [`Toolkit::run_llm`] that tells `before_call` of every tool call, with
    /// the tool's [`ToolSource`] (`None` if unknown), before it runs.
    #[cfg(feature = "server")]
    pub fn run_llm_reporting<'a>(
        &'a self,
        cfg: &'a crate::llm::LlmConfig,
        prompt: &'a str,
        before_call: ToolCallHook<'a>,
    ) -> impl Future<Output = Result<crate::llm::RunResult, Error>> + 'a {
        self.run_llm_conversation(cfg, &[], prompt, false, before_call)
    }

    /// [`Toolkit::run_llm_reporting`] after the earlier turns of a
    /// conversation; with `ask_user`, the model is also offered the
    /// built-in `question` tool (unless a tool of that name is here), which
    /// suspends the run ([`crate::llm::RunResult::pending`]) to ask the user.
    #[cfg(feature = "server")]
    pub fn run_llm_conversation<'a>(
        &'a self,
        cfg: &'a crate::llm::LlmConfig,
        history: &'a [crate::model::task::Message],
        prompt: &'a str,
        ask_user: bool,
        before_call: ToolCallHook<'a>,
    ) -> impl Future<Output = Result<crate::llm::RunResult, Error>> + 'a {
        self.run_llm_traced(cfg, history, prompt, ask_user, before_call, None)
    }

    /// [`Toolkit::run_llm_conversation`] in a trace: each model call and each
    /// A2A tool call is a span of `trace` (W3C trace context).
    #[cfg(feature = "server")]
    pub async fn run_llm_traced(
        &self,
        cfg: &crate::llm::LlmConfig,
        history: &[crate::model::task::Message],
        prompt: &str,
        ask_user: bool,
        before_call: ToolCallHook<'_>,
        trace: Option<&crate::TraceContext>,
    ) -> Result<crate::llm::RunResult, Error> {
        let mut cfg = cfg.clone();
        cfg.trace = trace.cloned();
        let skills_prompt = self.skills_prompt();
        if !skills_prompt.is_empty() {
            cfg.system_prompt = Some(match cfg.system_prompt.take() {
                Some(own) if !own.trim().is_empty() => format!("{own}\n\n{skills_prompt}"),
                _ => skills_prompt,
            });
        }
        let mut tools = self.tools();
        let builtin_question = ask_user && self.get(crate::llm::question::NAME).is_none();
        if builtin_question {
            tools.push(crate::llm::question::spec());
        }
        let trace = cfg.trace.as_ref();
        let execute = |call: crate::llm::ToolCall| {
            let source = tools.iter().find(|t| t.name == call.name).map(|t| t.source);
            before_call(&call, source);
            let asks = builtin_question && call.name == crate::llm::question::NAME;
            // The model call that asked: the parent of the tool's span.
            let model = trace.map(|t| t.nth_child(call.turn));
            // A local tool's call in a trace is a span core hands the host
            // (an A2A tool's call records its own).
            let span = match (&self.spans, &model, source) {
                (Some(hook), Some(model), Some(ToolSource::Skill | ToolSource::Host)) => {
                    let mut span = crate::SpanRecord::new(
                        crate::wire::trace::joined("execute_tool ", &call.name),
                        crate::SpanKind::Internal,
                        model.child(&self.transport.new_id()),
                        model.span_id,
                        self.transport.now_ms(),
                    );
                    span.set("gen_ai.operation.name", "execute_tool");
                    span.set("gen_ai.tool.name", call.name.as_str());
                    span.set("gen_ai.tool.call.id", call.id.as_str());
                    span.set("gen_ai.tool.type", "function");
                    span.set(
                        "toolnexus.tool.source",
                        source.map_or("", ToolSource::as_str),
                    );
                    Some((hook, span))
                }
                _ => None,
            };
            async move {
                if asks {
                    return crate::llm::question::ask(&call.arguments, self.transport.new_id());
                }
                let result = self
                    .execute_on(
                        &call.name,
                        call.arguments,
                        std::future::pending(),
                        |_| {},
                        model.as_ref(),
                    )
                    .await;
                if let Some((hook, mut span)) = span {
                    span.error = result.is_error;
                    span.end(hook, self.transport.now_ms());
                }
                result
            }
        };
        crate::llm::run_spanned(
            &self.transport,
            &cfg,
            history,
            prompt.to_string(),
            tools.clone(),
            execute,
            self.spans.clone(),
        )
        .await
    }

    /// Every tool, in order.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.entries.iter().map(|e| e.spec.clone()).collect()
    }

    /// One tool by name.
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.entries
            .iter()
            .find(|e| e.spec.name == name)
            .map(|e| &e.spec)
    }

    /// The A2A tool behind `name`, if it is one.
    pub fn a2a_tool(&self, name: &str) -> Option<&A2aTool> {
        self.entries.iter().find_map(|e| match &e.imp {
            ToolImpl::A2a(t) if e.spec.name == name => Some(t.as_ref()),
            _ => None,
        })
    }

    /// Agents that failed to resolve.
    pub fn failures(&self) -> &[AgentFailure] {
        &self.failures
    }

    /// Runs tool `name`. An unknown name is `{isError, "Unknown tool: <name>"}`.
    pub async fn execute(&self, name: &str, args: Value) -> ToolResult {
        self.execute_with_abort(name, args, std::future::pending())
            .await
    }

    /// [`Toolkit::execute`] that stops (and cancels the remote task) when `abort` completes.
    pub async fn execute_with_abort(
        &self,
        name: &str,
        args: Value,
        abort: impl Future<Output = ()> + MaybeSend,
    ) -> ToolResult {
        self.execute_with_events(name, args, abort, |_| {}).await
    }

    /// [`Toolkit::execute_with_abort`] that hands the events of an A2A tool's
    /// task to `on_event` as they happen (other tools have none).
    pub async fn execute_with_events(
        &self,
        name: &str,
        args: Value,
        abort: impl Future<Output = ()> + MaybeSend,
        on_event: impl FnMut(StreamEvent) + MaybeSend,
    ) -> ToolResult {
        self.execute_on(name, args, abort, on_event, None).await
    }

    /// [`Toolkit::execute_with_events`] in a trace (W3C trace context): an
    /// A2A tool's call is a span of `trace`, each of its requests carries
    /// it on, and the toolkit's span hook gets their spans.
    ///
    /// A plain function returning the future of the one underneath: as an
    /// async wrapper, it would nest a state machine of its own.
    pub fn execute_traced<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        abort: impl Future<Output = ()> + MaybeSend + 'a,
        on_event: impl FnMut(StreamEvent) + MaybeSend + 'a,
        trace: Option<&'a crate::TraceContext>,
    ) -> impl Future<Output = ToolResult> + 'a {
        self.execute_on(name, args, abort, on_event, trace)
    }

    /// Runs tool `name`, an A2A tool's call in `trace` (the parent of its span).
    async fn execute_on(
        &self,
        name: &str,
        args: Value,
        abort: impl Future<Output = ()> + MaybeSend,
        on_event: impl FnMut(StreamEvent) + MaybeSend,
        trace: Option<&crate::TraceContext>,
    ) -> ToolResult {
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == name) else {
            return ToolResult::error(format!("Unknown tool: {name}"));
        };
        match &entry.imp {
            ToolImpl::A2a(t) => {
                t.execute_spanned(
                    &self.transport,
                    &args,
                    abort,
                    on_event,
                    trace,
                    self.spans.as_ref(),
                )
                .await
            }
            #[cfg(feature = "server")]
            ToolImpl::Skill(skills) => skills.run_tool(&args),
            ToolImpl::Host(run) => run(args).await,
        }
    }

    /// The tools as OpenAI `tools` entries.
    pub fn to_openai(&self) -> Vec<Value> {
        to_openai(&self.tools())
    }

    /// The tools as Anthropic `tools` entries.
    pub fn to_anthropic(&self) -> Vec<Value> {
        to_anthropic(&self.tools())
    }

    /// The tools as Gemini `functionDeclarations`.
    pub fn to_gemini(&self) -> Vec<Value> {
        to_gemini(&self.tools())
    }
}

#[cfg(test)]
mod find_tool_tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn tools() -> Vec<A2aTool> {
        let card = AgentCard::from_value(&serde_json::json!({
            "name": "Echo Agent",
            "url": "http://127.0.0.1:1/",
            "skills": [{"id": "echo", "name": "Echo"}, {"id": "shout"}]
        }))
        .expect("card");
        card_tools(&Agent::new("http://127.0.0.1:1/"), &card)
    }

    #[test]
    fn a_tool_is_found_by_its_name_then_by_its_skill_id() {
        let tools = tools();
        assert_eq!(
            find_tool(&tools, "Echo_Agent_shout").unwrap().skill,
            "shout"
        );
        assert_eq!(
            find_tool(&tools, "echo").unwrap().spec.name,
            "Echo_Agent_echo"
        );
        let err = find_tool(&tools, "nope").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the agent has no tool \"nope\" (it has: Echo_Agent_echo, Echo_Agent_shout)"
        );
        assert_eq!(err.kind(), "misuse");
    }

    #[test]
    fn a_skill_id_listed_twice_names_no_tool() {
        let card = AgentCard::from_value(&serde_json::json!({
            "name": "desk", "url": "http://127.0.0.1:1/",
            "skills": [{"id": "dup"}, {"id": "dup"}]
        }))
        .expect("card");
        let tools = card_tools(&Agent::new("http://127.0.0.1:1/"), &card);
        let err = find_tool(&tools, "dup").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the card lists the skill \"dup\" 2 times: name the tool (desk_dup, desk_dup_2)"
        );
        assert_eq!(
            find_tool(&tools, "desk_dup_2").unwrap().spec.name,
            "desk_dup_2"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{block_on, completed, Reply, ScriptedPeer};
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const CARD_URL: &str = "http://127.0.0.1:9/.well-known/agent-card.json";

    fn card(v: Value) -> AgentCard {
        AgentCard::from_value(&v).expect("a card")
    }

    #[test]
    fn colliding_skill_names_get_suffixes_in_card_order_and_say_so() {
        let c = card(json!({"name": "desk", "skills": [
            {"id": "dup"}, {"id": "dup"}, {"id": "d.u.p"}, {"id": "d_u_p"}, {"id": "dup_2"}, {"id": "dup"}]}));
        let tools = card_tools(&Agent::new(CARD_URL), &c);
        let names: Vec<&str> = tools.iter().map(|t| t.spec.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "desk_dup",
                "desk_dup_2",
                "desk_d_u_p",
                "desk_d_u_p_2",
                "desk_dup_2_2",
                "desk_dup_3"
            ]
        );
        let clashes: Vec<Option<&str>> = tools.iter().map(|t| t.clash.as_deref()).collect();
        assert_eq!(
            clashes,
            [
                None,
                Some("desk_dup"),
                None,
                Some("desk_d_u_p"),
                Some("desk_dup_2"),
                Some("desk_dup")
            ]
        );
    }

    #[test]
    fn credentials_go_to_the_card_origin_and_listed_origins_only() {
        let agent = Agent {
            headers: vec![("X-Trace".into(), "${TOKEN}".into())],
            ..Agent::new(CARD_URL).with_auth(crate::Auth::Bearer("${TOKEN}".into()))
        };
        let call = |agent: &Agent, card_json: Value| {
            let peer = ScriptedPeer::new()
                .env_var("TOKEN", "s3cret")
                .on("SendMessage", vec![Reply::Result(completed("t1", "ok"))]);
            let tool = card_tools(agent, &card(card_json))[0].clone();
            let route = tool.credential_route();
            let r = block_on(tool.execute(&peer, &json!({"task": "x"}), std::future::pending()));
            (route, r, peer.requests())
        };
        // Another origin, http or https: the call goes without them, with a warning.
        for stranger in [
            "http://collector.example/rpc",
            "https://collector.example/rpc",
            "http://127.0.0.1:10/",
        ] {
            let (route, r, requests) = call(
                &agent,
                json!({"name": "d", "url": stranger, "skills": [{"id": "s"}]}),
            );
            let CredentialRoute::Withhold(warning) = route else {
                panic!("not withheld for {stranger}")
            };
            assert!(warning.contains("--allow-credentials-to"), "{warning}");
            assert!(!warning.contains("s3cret"), "{warning}");
            assert_eq!(r.output, "ok", "{stranger}");
            let req = &requests[0].1;
            assert_eq!(req.header("Authorization"), None, "{stranger}");
            assert_eq!(req.header("X-Trace"), None, "{stranger}");
        }
        // A card that requires credentials: refused, nothing sent.
        let (route, r, requests) = call(
            &agent,
            json!({"name": "d", "url": "https://collector.example/rpc", "skills": [{"id": "s"}],
                   "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
                   "securityRequirements": [{"schemes": {"bearer": {"list": []}}}]}),
        );
        assert!(matches!(route, CredentialRoute::Refuse(_)));
        assert!(
            r.is_error && r.output.starts_with("refusing to call d_s"),
            "{}",
            r.output
        );
        assert!(requests.is_empty(), "nothing sent");
        // The card's own origin, an allowed origin, or the deprecated blanket opt-in: sent.
        let allowed = agent
            .clone()
            .with_allowed_origin("https://collector.example");
        let blanket = Agent {
            allow_insecure_headers: true,
            ..agent.clone()
        };
        for (agent, url) in [
            (&agent, "/rpc"),
            (&allowed, "https://collector.example/rpc"),
            (&blanket, "http://collector.example/rpc"),
        ] {
            let (route, r, requests) = call(
                agent,
                json!({"name": "d", "url": url, "skills": [{"id": "s"}]}),
            );
            assert_eq!(route, CredentialRoute::Send, "{url}");
            assert_eq!(r.output, "ok", "{url}");
            let req = &requests[0].1;
            assert_eq!(req.header("Authorization"), Some("Bearer s3cret"), "{url}");
            assert_eq!(req.header("X-Trace"), Some("s3cret"), "{url}");
        }
    }
}
