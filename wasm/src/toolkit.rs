//! `createToolkit` and the `Toolkit` class.
//!
//! A JS toolkit is one core toolkit behind a `RefCell<Rc<_>>`
//! ([`SharedToolkit`]). Every call takes the `Rc` current when it starts;
//! `addAgent` resolves the agent without touching the toolkit, then swaps in
//! an extended clone (tools are shared between clones), so calls in flight
//! keep the toolkit they started with.

use crate::abort::Abort;
use crate::agent::{agent_from_js, agents_from_js};
use crate::convert::{
    console_warn, core_error, error_text, event_sink, get, is_absent, misuse, opt_string, promise,
    result_to_js, spec_to_js, specs_to_js, to_js, to_json, values_to_js,
};
use crate::handles::{self, Handle};
use crate::transport::JsTransport;
use js_sys::{Array, Function, Object, Promise};
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use toolnexus_core::HostFn;
use toolnexus_core::{agent_tools, A2aTool, Agent, Error, ToolResult, ToolSpec};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// The core toolkit over the JS transport.
pub type CoreToolkit = toolnexus_core::Toolkit<JsTransport>;

/// The state of one JS toolkit, shared with `run({toolkit})` and
/// `createA2AHandler({toolkit})`: the current core toolkit.
pub struct SharedToolkit(RefCell<Rc<CoreToolkit>>);

impl SharedToolkit {
    fn new(tk: CoreToolkit) -> Self {
        SharedToolkit(RefCell::new(Rc::new(tk)))
    }

    /// The toolkit now; a later `addAgent` does not change it.
    pub fn current(&self) -> Rc<CoreToolkit> {
        self.0.borrow().clone()
    }

    /// Adds an agent resolved with [`agent_tools`] (its tools, or its failure)
    /// to a clone of the current toolkit and makes that clone current.
    fn add_resolved(
        &self,
        agent: &Agent,
        resolved: Result<Vec<A2aTool>, Error>,
    ) -> Result<Vec<String>, Error> {
        let mut next = CoreToolkit::clone(&self.current());
        let added = next.add_resolved(agent, resolved);
        *self.0.borrow_mut() = Rc::new(next);
        added
    }
}

/// A host tool `{name, description?, inputSchema?, execute}`.
fn host_tool(v: &JsValue, i: usize) -> Result<(ToolSpec, HostFn), JsValue> {
    let what = format!("tools[{i}]");
    let name = opt_string(v, "name", &what)?
        .filter(|n| !n.is_empty())
        .ok_or_else(|| misuse(format!("{what}.name (a non-empty string) is required")))?;
    let description = opt_string(v, "description", &what)?.unwrap_or_default();
    let schema = get(v, "inputSchema");
    let input_schema = if is_absent(&schema) {
        toolnexus_core::json_object([
            ("type", "object".into()),
            ("properties", Value::Object(Default::default())),
        ])
    } else {
        to_json(&schema, &format!("{what}.inputSchema"))?
    };
    let run = get(v, "execute")
        .dyn_into::<Function>()
        .map_err(|_| misuse(format!("{what}.execute must be a function")))?;
    let this = v.clone();
    // HostFn is an Arc in the core; nothing here is shared across threads.
    #[allow(clippy::arc_with_non_send_sync)]
    let host: HostFn =
        Arc::new(move |args: Value| Box::pin(call_host(run.clone(), this.clone(), args)));
    let spec = ToolSpec {
        name,
        description,
        input_schema,
        source: toolnexus_core::ToolSource::Host,
    };
    Ok((spec, host))
}

/// Calls a host tool's `execute(args)` and reads what it returned (or threw).
async fn call_host(run: Function, this: JsValue, args: Value) -> ToolResult {
    let returned = match run.call1(&this, &to_js(&args)) {
        Ok(v) => v,
        Err(e) => return ToolResult::error(error_text(&e)),
    };
    match JsFuture::from(Promise::resolve(&returned)).await {
        Ok(v) => result_from_js(&v),
        Err(e) => ToolResult::error(error_text(&e)),
    }
}

/// A host tool's answer: a string, a `{output, isError?, metadata?}` object,
/// or any other JSON value (used as the output text).
fn result_from_js(v: &JsValue) -> ToolResult {
    if let Some(s) = v.as_string() {
        return ToolResult::ok(s);
    }
    let value = match to_json(v, "the tool's result") {
        Ok(v) => v,
        Err(e) => return ToolResult::error(error_text(&e)),
    };
    match value {
        Value::Null => ToolResult::ok(""),
        Value::Object(ref o) if o.contains_key("output") => ToolResult {
            output: match &o["output"] {
                Value::String(s) => s.clone(),
                other => toolnexus_core::json_text(other),
            },
            is_error: o.get("isError").and_then(Value::as_bool).unwrap_or(false),
            metadata: o.get("metadata").filter(|m| !m.is_null()).cloned(),
        },
        other => ToolResult::ok(toolnexus_core::json_text(&other)),
    }
}

/// `createToolkit`'s options, checked before any request is made.
struct ToolkitOptions {
    agents: Vec<Agent>,
    config: Option<Value>,
    #[cfg(feature = "server")]
    skills: Option<toolnexus_core::skills::SkillSet>,
    tools: Vec<(ToolSpec, HostFn)>,
    #[cfg(feature = "server")]
    on_span: Option<toolnexus_core::SpanHook>,
}

impl ToolkitOptions {
    fn from_js(v: &JsValue) -> Result<Self, JsValue> {
        if !is_absent(v) && !v.is_object() {
            return Err(misuse(
                "createToolkit takes {agents?, config?, skills?, tools?}",
            ));
        }
        let config = get(v, "config");
        let config = (!is_absent(&config))
            .then(|| to_json(&config, "config"))
            .transpose()?;
        let skills = get(v, "skills");
        #[cfg(not(feature = "server"))]
        if !is_absent(&skills) {
            return Err(misuse(
                "skills need the full build: import from \"toolnexus-wasm\", not \"toolnexus-wasm/client\"",
            ));
        }
        let tools = get(v, "tools");
        let tools = if is_absent(&tools) {
            Vec::new()
        } else if Array::is_array(&tools) {
            // A plain loop, not `collect::<Result<..>>()` (see ARCHITECTURE.md).
            let mut list = Vec::new();
            for (i, t) in Array::from(&tools).iter().enumerate() {
                list.push(host_tool(&t, i)?);
            }
            list
        } else {
            return Err(misuse(
                "tools must be an array of {name, description, inputSchema, execute}",
            ));
        };
        let agents = agents_from_js(&get(v, "agents"), "agents")?;
        // The client entry refuses onSpan (opt_span_hook says so) and has
        // no hook to keep; checked in the same order as the full entry.
        #[cfg(not(feature = "server"))]
        crate::convert::opt_span_hook(v, "createToolkit options")?;
        Ok(ToolkitOptions {
            agents,
            config,
            #[cfg(feature = "server")]
            skills: (!is_absent(&skills))
                .then(|| crate::skills::skill_set(&skills, "skills"))
                .transpose()?,
            tools,
            #[cfg(feature = "server")]
            on_span: crate::convert::opt_span_hook(v, "createToolkit options")?,
        })
    }
}

/// Logs the agents a toolkit could not resolve (they contribute no tools).
fn warn_failures(tk: &CoreToolkit) {
    for f in tk.failures() {
        console_warn(&format!("toolnexus: agent {} skipped: {}", f.card, f.error));
    }
}

/// `createToolkit({agents?, config?, skills?, tools?})`: resolves the agents
/// (and the config's `agents` block) concurrently; a failing agent is logged
/// and skipped, never fatal.
#[wasm_bindgen(js_name = createToolkit)]
pub fn create_toolkit(options: JsValue) -> Promise {
    promise(Box::pin(create(options)))
}

async fn create(options: JsValue) -> Result<JsValue, JsValue> {
    let opts = ToolkitOptions::from_js(&options)?;
    let mut tk = CoreToolkit::new(JsTransport);
    #[cfg(feature = "oauth2")]
    {
        tk = tk.with_token_cells(crate::credentials::token_cell_for);
    }
    #[cfg(feature = "server")]
    if let Some(hook) = opts.on_span.clone() {
        tk = tk.with_span_hook(hook);
    }
    tk.add_agents(&opts.agents).await;
    if let Some(config) = &opts.config {
        #[cfg(feature = "oauth2")]
        tk.add_config(config).await;
        // The client entry: an OAuth2 agent of the config is a failure of
        // its own (warned about below), like an agent whose card fails.
        #[cfg(not(feature = "oauth2"))]
        {
            let agents = toolnexus_core::parse_agents_config(
                config.get("agents").unwrap_or(&serde_json::Value::Null),
            );
            let mut callable = Vec::new();
            for agent in agents {
                match crate::agent::no_oauth2(&agent) {
                    Some(why) => {
                        let _ =
                            tk.add_resolved(&agent, Err(toolnexus_core::Error::Misuse(why.into())));
                    }
                    None => callable.push(agent),
                }
            }
            tk.add_agents(&callable).await;
        }
    }
    warn_failures(&tk);
    #[cfg(feature = "server")]
    if let Some(skills) = opts.skills {
        tk.add_skills(skills);
    }
    for (spec, run) in opts.tools {
        let name = spec.name.clone();
        if !tk.add_host_tool(spec, run) {
            console_warn(&format!(
                "toolnexus: tool {name} skipped: the name is taken"
            ));
        }
    }
    Ok(Toolkit::new(tk).into())
}

/// Tools from A2A agents, skills and the host behind one `execute(name, args)`.
#[wasm_bindgen]
pub struct Toolkit {
    handle: u32,
    shared: Rc<SharedToolkit>,
}

impl Toolkit {
    fn new(tk: CoreToolkit) -> Self {
        let shared = Rc::new(SharedToolkit::new(tk));
        Toolkit {
            handle: handles::register(Handle::Toolkit(shared.clone())),
            shared,
        }
    }
}

impl Drop for Toolkit {
    fn drop(&mut self) {
        handles::release(self.handle);
    }
}

#[wasm_bindgen]
impl Toolkit {
    /// See [`crate::handles`].
    #[wasm_bindgen(getter, js_name = __toolnexusHandle)]
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Every tool's `{name, description, inputSchema, source}`, in order.
    pub fn tools(&self) -> JsValue {
        specs_to_js(&self.shared.current().tools())
    }

    /// One tool's spec, or `undefined`.
    pub fn get(&self, name: JsValue) -> JsValue {
        let Some(name) = name.as_string() else {
            return JsValue::UNDEFINED;
        };
        self.shared
            .current()
            .get(&name)
            .map_or(JsValue::UNDEFINED, spec_to_js)
    }

    /// `execute(name, args, {signal, onEvent, traceparent, tracestate}?)`:
    /// never rejects; an unknown name is `{isError: true, output: "Unknown
    /// tool: <name>"}`. `onEvent(event)` sees each event of an A2A tool's
    /// task; a valid W3C `traceparent` goes on with its requests, and the
    /// toolkit's `onSpan` gets the call's spans.
    pub fn execute(&self, name: JsValue, args: JsValue, options: JsValue) -> Promise {
        let tk = self.shared.current();
        let trace = crate::convert::trace_option(&options);
        let name = name.as_string().unwrap_or_default();
        let args = to_json(&args, "args");
        let abort = Abort::from_options(&options);
        let sink = event_sink(&options, "options");
        promise(Box::pin(async move {
            let result = match (args, abort, sink) {
                (Ok(args), Ok(abort), Ok(sink)) => {
                    tk.execute_traced(&name, args, abort, sink, trace.as_ref())
                        .await
                }
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                    ToolResult::error(error_text(&e))
                }
            };
            Ok(result_to_js(&result))
        }))
    }

    /// `addAgent(agentOrCardUrl)`: resolves one agent now; the names of the
    /// tools it added (names already taken are not added). Rejects with a
    /// kinded `Error` when the agent cannot be resolved (also in `failures()`).
    #[wasm_bindgen(js_name = addAgent)]
    pub fn add_agent(&self, agent: JsValue) -> Promise {
        let shared = self.shared.clone();
        let agent = agent_from_js(&agent);
        promise(Box::pin(async move {
            let agent = agent?;
            let resolved = agent_tools(&JsTransport, &agent).await;
            let names = shared
                .add_resolved(&agent, resolved)
                .map_err(|e| core_error(&e))?;
            let added: Array = names.iter().map(|n| JsValue::from(n.as_str())).collect();
            Ok(added.into())
        }))
    }

    /// The tools as OpenAI `tools` entries.
    #[wasm_bindgen(js_name = toOpenAI)]
    pub fn to_openai(&self) -> JsValue {
        values_to_js(&self.shared.current().to_openai())
    }

    /// The tools as Anthropic `tools` entries.
    #[wasm_bindgen(js_name = toAnthropic)]
    pub fn to_anthropic(&self) -> JsValue {
        values_to_js(&self.shared.current().to_anthropic())
    }

    /// The tools as Gemini `functionDeclarations`.
    #[wasm_bindgen(js_name = toGemini)]
    pub fn to_gemini(&self) -> JsValue {
        values_to_js(&self.shared.current().to_gemini())
    }

    /// The agents that could not be resolved: `{card, kind, message}`.
    pub fn failures(&self) -> JsValue {
        let out = Array::new();
        for f in self.shared.current().failures() {
            let o: JsValue = Object::new().into();
            crate::convert::set(&o, "card", &f.card.as_str().into());
            crate::convert::set(&o, "kind", &f.error.kind().into());
            crate::convert::set(&o, "message", &f.error.to_string().into());
            out.push(&o);
        }
        out.into()
    }
}
