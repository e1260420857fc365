//! A2A agents as tools, and the [`Toolkit`] that gathers tools from several
//! sources behind one `execute(name, args)`.

use crate::client::call::{CallMachine, CallSpec};
use crate::client::card::AgentCard;
use crate::client::sanitize::sanitize;
use crate::error::Error;
use crate::host::driver::drive_with_events;
use crate::host::transport::{BoxFuture, MaybeSend, Transport};
use crate::model::agent::Agent;
use crate::model::event::StreamEvent;
use crate::model::tool::{
    a2a_input_schema, to_anthropic, to_gemini, to_openai, ToolResult, ToolSpec,
};
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
}

impl A2aTool {
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
        mut on_event: impl FnMut(StreamEvent) + MaybeSend,
    ) -> ToolResult {
        // One instance of the whole call per transport, whatever the caller's
        // abort and listener types: the call is the bulk of a client's code.
        let abort = std::pin::pin!(abort);
        self.run(transport, args, abort, &mut on_event).await
    }

    async fn run<T: Transport>(
        &self,
        transport: &T,
        args: &Value,
        abort: DynAbort<'_>,
        on_event: DynListener<'_>,
    ) -> ToolResult {
        let Some(task) = args.get("task").and_then(Value::as_str) else {
            return ToolResult::error(format!(
                "{}: the argument \"task\" (a string) is required",
                self.spec.name
            ));
        };
        let refs = match crate::wire::rpc::MessageRefs::from_args(args) {
            Ok(refs) => refs,
            Err(e) => return ToolResult::error(format!("{}: {e}", self.spec.name)),
        };
        let spec = CallSpec {
            agent: self.agent_name.clone(),
            endpoint: self.endpoint.clone(),
            dialect: self.dialect,
            headers: self.agent.expanded_headers(|n| transport.env(n)),
            timeout_ms: self.agent.timeout_ms(),
            poll_every_ms: self.agent.poll_every_ms(),
            message_id: transport.new_id(),
            text: task.to_string(),
            long_poll: self.long_poll,
            streaming: self.streaming,
        };
        let mut call = CallMachine::new(spec).continuing(refs);
        drive_with_events(&mut call, transport, abort, on_event).await
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
pub type ToolCallHook<'a> = &'a (dyn Fn(&crate::llm::ToolCall, Option<&str>) + Sync);
/// What [`Toolkit::run_llm_reporting`] calls before each tool call.
#[cfg(all(feature = "server", target_arch = "wasm32"))]
pub type ToolCallHook<'a> = &'a dyn Fn(&crate::llm::ToolCall, Option<&str>);

/// GETs and parses the agent's card (bounded by the agent's timeout).
pub async fn fetch_card<T: Transport>(transport: &T, agent: &Agent) -> Result<AgentCard, Error> {
    let headers = agent.expanded_headers(|n| transport.env(n));
    let mut machine =
        crate::client::card::CardMachine::new(&agent.card, headers, agent.timeout_ms());
    crate::host::driver::drive(&mut machine, transport, std::future::pending()).await
}

/// The tools of an already fetched card.
pub fn card_tools(agent: &Agent, card: &AgentCard) -> Vec<A2aTool> {
    let (dialect, endpoint) = card.endpoint(&agent.card);
    card.skills
        .iter()
        .filter_map(|skill| {
            let key = skill.key()?;
            let description = skill
                .description
                .clone()
                .or_else(|| skill.name.clone())
                .unwrap_or_else(|| key.to_string());
            Some(A2aTool {
                spec: ToolSpec {
                    name: format!("{}_{}", sanitize(&card.name), sanitize(key)),
                    input_schema: if agent.conversational {
                        crate::model::tool::a2a_conversational_schema(&description)
                    } else {
                        a2a_input_schema(&description)
                    },
                    description,
                    source: "a2a".into(),
                },
                agent: agent.clone(),
                agent_name: card.name.clone(),
                skill: key.to_string(),
                endpoint: endpoint.clone(),
                dialect,
                long_poll: card.long_poll(),
                streaming: card.streaming,
            })
        })
        .collect()
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
        }
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
    pub fn add_resolved(
        &mut self,
        agent: &Agent,
        resolved: Result<Vec<A2aTool>, Error>,
    ) -> Result<Vec<String>, Error> {
        match resolved {
            Ok(tools) => Ok(tools
                .into_iter()
                .filter_map(|t| {
                    let name = t.spec.name.clone();
                    self.push(t.spec.clone(), ToolImpl::A2a(Arc::new(t)))
                        .then_some(name)
                })
                .collect()),
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
    pub async fn run_llm(
        &self,
        cfg: &crate::llm::LlmConfig,
        prompt: &str,
    ) -> Result<crate::llm::RunResult, Error> {
        self.run_llm_reporting(cfg, prompt, &|_, _| {}).await
    }

    /// [`Toolkit::run_llm`] that tells `before_call` of every tool call, with
    /// the tool's source (`"a2a"`, `"skill"`, …, `None` if unknown), before it runs.
    #[cfg(feature = "server")]
    pub async fn run_llm_reporting(
        &self,
        cfg: &crate::llm::LlmConfig,
        prompt: &str,
        before_call: ToolCallHook<'_>,
    ) -> Result<crate::llm::RunResult, Error> {
        self.run_llm_conversation(cfg, &[], prompt, false, before_call)
            .await
    }

    /// [`Toolkit::run_llm_reporting`] after the earlier turns of a
    /// conversation; with `ask_user`, the model is also offered the
    /// built-in `question` tool (unless a tool of that name is here), which
    /// suspends the run ([`crate::llm::RunResult::pending`]) to ask the user.
    #[cfg(feature = "server")]
    pub async fn run_llm_conversation(
        &self,
        cfg: &crate::llm::LlmConfig,
        history: &[crate::model::task::Message],
        prompt: &str,
        ask_user: bool,
        before_call: ToolCallHook<'_>,
    ) -> Result<crate::llm::RunResult, Error> {
        let mut cfg = cfg.clone();
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
        let execute = |call: crate::llm::ToolCall| {
            let source = tools
                .iter()
                .find(|t| t.name == call.name)
                .map(|t| t.source.as_str());
            before_call(&call, source);
            let asks = builtin_question && call.name == crate::llm::question::NAME;
            async move {
                if asks {
                    return crate::llm::question::ask(&call.arguments, self.transport.new_id());
                }
                self.execute(&call.name, call.arguments).await
            }
        };
        crate::llm::run_conversation(
            &self.transport,
            &cfg,
            history,
            prompt.to_string(),
            tools.clone(),
            execute,
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
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == name) else {
            return ToolResult::error(format!("Unknown tool: {name}"));
        };
        match &entry.imp {
            ToolImpl::A2a(t) => {
                t.execute_with_events(&self.transport, &args, abort, on_event)
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
