//! `createToolkit` and the `Toolkit` class.
//!
//! A JS toolkit is a list of core toolkits ("segments"): the one built by
//! `createToolkit`, then one more per `addAgent`. The core's
//! `Toolkit::add_agent` needs `&mut` across the card fetch, while JS may be
//! running `execute` on the same toolkit at that moment; a new segment per
//! added agent keeps every running call's toolkit untouched. Lookups go
//! through the segments in order, so the first tool of a name wins.
//! (With a synchronous "add resolved tools" in the core this collapses to one
//! segment; see the crate README.)

use crate::abort::Abort;
use crate::agent::{agent_from_js, agents_from_js};
use crate::convert::{
    console_warn, core_error, error_text, get, is_absent, misuse, opt_string, result_to_js,
    spec_to_js, specs_to_js, to_js, to_json, values_to_js,
};
use crate::handles::{self, Handle};
use crate::transport::JsTransport;
use js_sys::{Array, Function, Object, Promise};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use toolnexus_core::toolkit::HostFn;
use toolnexus_core::{Agent, ToolResult, ToolSpec};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

/// The core toolkit over the JS transport.
pub type CoreToolkit = toolnexus_core::Toolkit<JsTransport>;

/// The segments of one JS toolkit (never empty).
pub struct Segments(RefCell<Vec<Rc<CoreToolkit>>>);

impl Segments {
    pub fn new(first: CoreToolkit) -> Self {
        Segments(RefCell::new(vec![Rc::new(first)]))
    }

    /// The segments now; later `addAgent`s do not change the copy.
    pub fn snapshot(&self) -> Vec<Rc<CoreToolkit>> {
        self.0.borrow().clone()
    }
}

/// Every tool, first of a name wins.
pub fn all_tools(segments: &[Rc<CoreToolkit>]) -> Vec<ToolSpec> {
    let mut out: Vec<ToolSpec> = Vec::new();
    for spec in segments.iter().flat_map(|s| s.tools()) {
        if !out.iter().any(|t| t.name == spec.name) {
            out.push(spec);
        }
    }
    out
}

/// Runs tool `name` on the first segment that has it (the core answers
/// "Unknown tool" when none does).
pub async fn execute(
    segments: &[Rc<CoreToolkit>],
    name: &str,
    args: Value,
    abort: impl Future<Output = ()>,
) -> ToolResult {
    let owner = segments
        .iter()
        .find(|s| s.get(name).is_some())
        .or(segments.first());
    match owner {
        Some(tk) => tk.execute_with_abort(name, args, abort).await,
        None => ToolResult::error(format!("Unknown tool: {name}")),
    }
}

/// Runs the LLM loop with every tool of `segments` offered.
#[cfg(feature = "server")]
pub async fn run_llm(
    segments: &[Rc<CoreToolkit>],
    cfg: &toolnexus_core::llm::LlmConfig,
    prompt: &str,
) -> Result<toolnexus_core::llm::RunResult, toolnexus_core::Error> {
    if let [only] = segments {
        return only.run_llm(cfg, prompt).await;
    }
    // Several segments: what `Toolkit::run_llm` does, over all of them.
    let mut cfg = cfg.clone();
    let skills_prompt = segments
        .iter()
        .map(|s| s.skills_prompt())
        .find(|p| !p.is_empty())
        .unwrap_or_default();
    if !skills_prompt.is_empty() {
        cfg.system_prompt = Some(match cfg.system_prompt.take() {
            Some(own) if !own.trim().is_empty() => format!("{own}\n\n{skills_prompt}"),
            _ => skills_prompt,
        });
    }
    let run = |call: toolnexus_core::llm::ToolCall| async move {
        execute(segments, &call.name, call.arguments, std::future::pending()).await
    };
    toolnexus_core::llm::run(
        &JsTransport,
        &cfg,
        prompt.to_string(),
        all_tools(segments),
        run,
    )
    .await
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
        json!({"type": "object", "properties": {}})
    } else {
        to_json(&schema, &format!("{what}.inputSchema"))?
    };
    let run = get(v, "execute")
        .dyn_into::<Function>()
        .map_err(|_| misuse(format!("{what}.execute must be a function")))?;
    let this = v.clone();
    // HostFn is an Arc in the core; nothing here is shared across threads.
    #[allow(clippy::arc_with_non_send_sync)]
    let host: HostFn = Arc::new(move |args: Value| {
        let (run, this) = (run.clone(), this.clone());
        Box::pin(async move { call_host(&run, &this, &args).await })
    });
    let spec = ToolSpec {
        name,
        description,
        input_schema,
        source: "host".into(),
    };
    Ok((spec, host))
}

/// Calls a host tool's `execute(args)` and reads what it returned (or threw).
async fn call_host(run: &Function, this: &JsValue, args: &Value) -> ToolResult {
    let returned = match run.call1(this, &to_js(args)) {
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
                other => other.to_string(),
            },
            is_error: o.get("isError").and_then(Value::as_bool).unwrap_or(false),
            metadata: o.get("metadata").filter(|m| !m.is_null()).cloned(),
        },
        other => ToolResult::ok(other.to_string()),
    }
}

/// `createToolkit`'s options, checked before any request is made.
struct ToolkitOptions {
    agents: Vec<Agent>,
    config: Option<Value>,
    #[cfg(feature = "server")]
    skills: Option<toolnexus_core::skills::SkillSet>,
    tools: Vec<(ToolSpec, HostFn)>,
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
            Array::from(&tools)
                .iter()
                .enumerate()
                .map(|(i, t)| host_tool(&t, i))
                .collect::<Result<_, _>>()?
        } else {
            return Err(misuse(
                "tools must be an array of {name, description, inputSchema, execute}",
            ));
        };
        Ok(ToolkitOptions {
            agents: agents_from_js(&get(v, "agents"), "agents")?,
            config,
            #[cfg(feature = "server")]
            skills: (!is_absent(&skills))
                .then(|| crate::skills::skill_set(&skills, "skills"))
                .transpose()?,
            tools,
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
pub async fn create_toolkit(options: JsValue) -> Result<Toolkit, JsValue> {
    let opts = ToolkitOptions::from_js(&options)?;
    let mut tk = CoreToolkit::new(JsTransport);
    tk.add_agents(&opts.agents).await;
    if let Some(config) = &opts.config {
        tk.add_config(config).await;
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
    Ok(Toolkit::new(Segments::new(tk)))
}

/// Tools from A2A agents, skills and the host behind one `execute(name, args)`.
#[wasm_bindgen]
pub struct Toolkit {
    handle: u32,
    segments: Rc<Segments>,
}

impl Toolkit {
    fn new(segments: Segments) -> Self {
        let segments = Rc::new(segments);
        Toolkit {
            handle: handles::register(Handle::Toolkit(segments.clone())),
            segments,
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
        specs_to_js(&all_tools(&self.segments.snapshot()))
    }

    /// One tool's spec, or `undefined`.
    pub fn get(&self, name: JsValue) -> JsValue {
        let Some(name) = name.as_string() else {
            return JsValue::UNDEFINED;
        };
        all_tools(&self.segments.snapshot())
            .iter()
            .find(|t| t.name == name)
            .map_or(JsValue::UNDEFINED, spec_to_js)
    }

    /// `execute(name, args, {signal}?)`: never rejects; an unknown name is
    /// `{isError: true, output: "Unknown tool: <name>"}`.
    pub fn execute(&self, name: JsValue, args: JsValue, options: JsValue) -> Promise {
        let segments = self.segments.snapshot();
        let name = name.as_string().unwrap_or_default();
        let args = to_json(&args, "args");
        let abort = Abort::from_options(&options);
        future_to_promise(async move {
            let result = match (args, abort) {
                (Ok(args), Ok(abort)) => execute(&segments, &name, args, abort).await,
                (Err(e), _) | (_, Err(e)) => ToolResult::error(error_text(&e)),
            };
            Ok(result_to_js(&result))
        })
    }

    /// `addAgent(agentOrCardUrl)`: resolves one agent now; the names of the
    /// tools it added (names already taken are not added). Rejects with a
    /// kinded `Error` when the agent cannot be resolved.
    #[wasm_bindgen(js_name = addAgent)]
    pub fn add_agent(&self, agent: JsValue) -> Promise {
        let segments = self.segments.clone();
        let agent = agent_from_js(&agent);
        future_to_promise(async move {
            let mut tk = CoreToolkit::new(JsTransport);
            let names = tk.add_agent(agent?).await.map_err(|e| core_error(&e))?;
            let taken = all_tools(&segments.snapshot());
            let added: Array = names
                .iter()
                .filter(|n| !taken.iter().any(|t| &t.name == *n))
                .map(|n| JsValue::from(n.as_str()))
                .collect();
            segments.0.borrow_mut().push(Rc::new(tk));
            Ok(added.into())
        })
    }

    /// The tools as OpenAI `tools` entries.
    #[wasm_bindgen(js_name = toOpenAI)]
    pub fn to_openai(&self) -> JsValue {
        values_to_js(&toolnexus_core::tool::to_openai(&all_tools(
            &self.segments.snapshot(),
        )))
    }

    /// The tools as Anthropic `tools` entries.
    #[wasm_bindgen(js_name = toAnthropic)]
    pub fn to_anthropic(&self) -> JsValue {
        values_to_js(&toolnexus_core::tool::to_anthropic(&all_tools(
            &self.segments.snapshot(),
        )))
    }

    /// The tools as Gemini `functionDeclarations`.
    #[wasm_bindgen(js_name = toGemini)]
    pub fn to_gemini(&self) -> JsValue {
        values_to_js(&toolnexus_core::tool::to_gemini(&all_tools(
            &self.segments.snapshot(),
        )))
    }

    /// The agents that could not be resolved: `{card, kind, message}`.
    pub fn failures(&self) -> JsValue {
        let out = Array::new();
        for seg in self.segments.snapshot() {
            for f in seg.failures() {
                let o: JsValue = Object::new().into();
                crate::convert::set(&o, "card", &f.card.as_str().into());
                crate::convert::set(&o, "kind", &f.error.kind().into());
                crate::convert::set(&o, "message", &f.error.to_string().into());
                out.push(&o);
            }
        }
        out.into()
    }
}
