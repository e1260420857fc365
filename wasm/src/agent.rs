//! `agent`, `parseAgentsConfig`, `agentTools` and the `Tool` class.

use crate::abort::Abort;
use crate::convert::{
    core_error, error_text, event_sink, get, is_absent, misuse, opt_u64, promise, result_to_js,
    set, spec_to_js, string_pairs, to_js, to_json,
};
use crate::transport::JsTransport;
use js_sys::{Array, Object, Promise};
use std::rc::Rc;
use std::time::Duration;
use toolnexus_core::{millis, A2aTool, Agent, ToolResult};
use wasm_bindgen::prelude::*;

/// Reads an agent descriptor `{card, headers?, timeout?, pollEvery?}`, or a
/// bare card URL string.
pub fn agent_from_js(v: &JsValue) -> Result<Agent, JsValue> {
    if let Some(card) = v.as_string() {
        return Ok(Agent::new(card));
    }
    if !v.is_object() {
        return Err(misuse(
            "an agent is {card, headers?, timeout?, pollEvery?} or an Agent Card URL",
        ));
    }
    let card = get(v, "card")
        .as_string()
        .ok_or_else(|| misuse("agent.card (the Agent Card URL, a string) is required"))?;
    let ms = |key| Ok::<_, JsValue>(opt_u64(v, key, "agent")?.map(Duration::from_millis));
    let mut agent = Agent::new(card);
    agent.headers = string_pairs(&get(v, "headers"), "agent.headers")?;
    agent.timeout = ms("timeout")?;
    agent.poll_every = ms("pollEvery")?;
    agent.conversational = get(v, "conversational").as_bool() == Some(true);
    let auth = get(v, "auth");
    let get_token = get(v, "getToken");
    if !is_absent(&auth) {
        if !is_absent(&get_token) {
            return Err(misuse("an agent takes auth or getToken, not both"));
        }
        agent.auth = Some(toolnexus_core::Auth::from_value(&to_json(&auth, "agent.auth")?).ok_or_else(|| {
            misuse("agent.auth must be {bearer}, {apiKey} or {oauth2: {clientId, clientSecret, tokenUrl?, scopes?}}")
        })?);
        #[cfg(not(feature = "oauth2"))]
        if let Some(why) = no_oauth2(&agent) {
            return Err(misuse(why));
        }
    } else if get_token.is_function() {
        agent.auth = Some(crate::credentials::get_token_auth(
            get_token.unchecked_into(),
        ));
    } else if !is_absent(&get_token) {
        return Err(misuse(
            "agent.getToken must be a function () => token (or a promise of one)",
        ));
    }
    let origins = get(v, "allowedOrigins");
    if !is_absent(&origins) {
        let refused =
            || misuse("agent.allowedOrigins must be an array of origins (https://host[:port])");
        if !Array::is_array(&origins) {
            return Err(refused());
        }
        // A plain loop, not `collect::<Option<..>>()` (see ARCHITECTURE.md).
        let mut list = Vec::new();
        for o in Array::from(&origins).iter() {
            list.push(o.as_string().ok_or_else(refused)?);
        }
        agent.allowed_origins = list;
    }
    Ok(agent)
}

/// Why the client entry (built without the feature `oauth2`) cannot call
/// this agent: OAuth2 client credentials need a client secret, which has no
/// place in a browser.
#[cfg(not(feature = "oauth2"))]
pub fn no_oauth2(agent: &Agent) -> Option<&'static str> {
    matches!(agent.auth, Some(toolnexus_core::Auth::OAuth2(_))).then_some(
        "agent.auth {oauth2} (client credentials, which need a client secret) is not in toolnexus-wasm/client, the browser entry: give the agent getToken (a function that returns a bearer token), or import from \"toolnexus-wasm\" (Node, workers)",
    )
}

/// The descriptor as a plain object; unset fields stay unset.
pub fn agent_to_js(a: &Agent) -> JsValue {
    let o: JsValue = Object::new().into();
    set(&o, "card", &a.card.as_str().into());
    if !a.headers.is_empty() {
        let h: JsValue = Object::new().into();
        for (k, v) in &a.headers {
            set(&h, k, &v.as_str().into());
        }
        set(&o, "headers", &h);
    }
    if let Some(t) = a.timeout {
        set(&o, "timeout", &(millis(t) as f64).into());
    }
    if let Some(p) = a.poll_every {
        set(&o, "pollEvery", &(millis(p) as f64).into());
    }
    if a.conversational {
        set(&o, "conversational", &true.into());
    }
    match crate::credentials::get_token_of(a) {
        Some(f) => set(&o, "getToken", &f),
        None => {
            if let Some(auth) = &a.auth {
                let (key, value): (&str, JsValue) = match auth {
                    // Only ever made with its function (above).
                    toolnexus_core::Auth::HostToken(_) => ("getToken", JsValue::UNDEFINED),
                    toolnexus_core::Auth::Bearer(t) => ("bearer", t.as_str().into()),
                    toolnexus_core::Auth::ApiKey(k) => ("apiKey", k.as_str().into()),
                    toolnexus_core::Auth::OAuth2(c) => {
                        let o2: JsValue = Object::new().into();
                        set(&o2, "clientId", &c.client_id.as_str().into());
                        set(&o2, "clientSecret", &c.client_secret.as_str().into());
                        if let Some(u) = &c.token_url {
                            set(&o2, "tokenUrl", &u.as_str().into());
                        }
                        let scopes: Array =
                            c.scopes.iter().map(|s| JsValue::from(s.as_str())).collect();
                        set(&o2, "scopes", &scopes);
                        ("oauth2", o2)
                    }
                };
                let auth_js: JsValue = Object::new().into();
                set(&auth_js, key, &value);
                set(&o, "auth", &auth_js);
            }
        }
    }
    if !a.allowed_origins.is_empty() {
        let list: Array = a
            .allowed_origins
            .iter()
            .map(|s| JsValue::from(s.as_str()))
            .collect();
        set(&o, "allowedOrigins", &list);
    }
    o
}

/// A list of agents: descriptors or card URLs.
pub fn agents_from_js(v: &JsValue, what: &str) -> Result<Vec<Agent>, JsValue> {
    if is_absent(v) {
        return Ok(Vec::new());
    }
    if !Array::is_array(v) {
        return Err(misuse(format!(
            "{what} must be an array of agents or card URLs"
        )));
    }
    let mut agents = Vec::new();
    for a in Array::from(v).iter() {
        agents.push(agent_from_js(&a)?);
    }
    Ok(agents)
}

/// `agent({card, headers?, timeout?, pollEvery?})`: a checked descriptor.
#[wasm_bindgen]
pub fn agent(descriptor: JsValue) -> Result<JsValue, JsValue> {
    Ok(agent_to_js(&agent_from_js(&descriptor)?))
}

/// `parseAgentsConfig(block)`: the enabled agents of an `agents` block.
#[wasm_bindgen(js_name = parseAgentsConfig)]
pub fn parse_agents_config(block: JsValue) -> Result<JsValue, JsValue> {
    let block = to_json(&block, "the agents block")?;
    let agents = toolnexus_core::parse_agents_config(&block);
    Ok(agents.iter().map(agent_to_js).collect::<Array>().into())
}

/// `agentTools(agent)`: fetches the card, one `Tool` per skill. Rejects
/// with a kinded `Error` (transport, status, malformed, misuse).
#[wasm_bindgen(js_name = agentTools)]
pub fn agent_tools(agent: JsValue) -> Promise {
    promise(Box::pin(async move {
        let agent = agent_from_js(&agent)?;
        let tools = toolnexus_core::agent_tools(&JsTransport, &agent)
            .await
            .map_err(|e| core_error(&e))?;
        // One token cache for the agent's tools (and its listTasks).
        let cell = crate::credentials::tokens_for(&agent);
        Ok(tools
            .into_iter()
            .map(|t| {
                JsValue::from(Tool {
                    inner: Rc::new(match &cell {
                        Some(cell) => t.with_tokens(cell.clone()),
                        None => t,
                    }),
                })
            })
            .collect::<Array>()
            .into())
    }))
}

/// `listTasks(agent, {contextId?, status?}?)`: the agent's tasks (A2A 1.0
/// ListTasks, page by page), newest status change first, as
/// `{tasks: [{id, contextId, state, timestamp?, text}], totalSize?, truncated}`
/// (`text`: a completed task's answer, else its status message). Bounded by
/// the agent's timeout; rejects with a kinded `Error` (an agent that cannot
/// list answers `rpc`).
#[wasm_bindgen(js_name = listTasks)]
pub fn list_tasks(agent: JsValue, filter: JsValue) -> Promise {
    promise(Box::pin(list_tasks_of(agent, filter)))
}

async fn list_tasks_of(agent: JsValue, filter: JsValue) -> Result<JsValue, JsValue> {
    use futures_util::future::{select, Either};
    use toolnexus_core::{ListFilter, TaskState};
    let agent = agent_from_js(&agent)?;
    let mut wanted = ListFilter {
        context_id: get(&filter, "contextId").as_string(),
        status: None,
    };
    if let Some(s) = get(&filter, "status").as_string() {
        match TaskState::parse(&s) {
            TaskState::Unknown => {
                let s = toolnexus_core::quoted(&s);
                return Err(misuse(format!("listTasks: unknown status {s}")));
            }
            state => wanted.status = Some(state),
        }
    }
    let work = Box::pin(async {
        let card = toolnexus_core::fetch_card(&JsTransport, &agent).await?;
        let tokens = crate::credentials::tokens_for(&agent);
        toolnexus_core::list_tasks(&JsTransport, &agent, &card, &wanted, tokens.as_deref()).await
    });
    let ms = agent.timeout_ms();
    let deadline = crate::transport::timer_until(crate::transport::now_ms().saturating_add(ms));
    let list = match select(work, deadline).await {
        Either::Left((listed, _)) => listed.map_err(|e| core_error(&e))?,
        Either::Right(_) => {
            return Err(core_error(&toolnexus_core::Error::transport(format!(
                "ListTasks timed out after {ms}ms"
            ))))
        }
    };
    let tasks = Array::new();
    for t in &list.tasks {
        let o: JsValue = Object::new().into();
        set(&o, "id", &t.id.as_str().into());
        set(&o, "contextId", &t.context_id.as_str().into());
        set(&o, "state", &t.state.as_str().into());
        if let Some(ms) = t.updated_ms {
            set(&o, "timestamp", &toolnexus_core::format_rfc3339(ms).into());
        }
        set(&o, "text", &t.summary_text().into());
        tasks.push(&o);
    }
    let out: JsValue = Object::new().into();
    set(&out, "tasks", &tasks);
    if let Some(n) = list.total_size {
        set(&out, "totalSize", &(n as f64).into());
    }
    set(&out, "truncated", &list.truncated.into());
    Ok(out)
}

/// `describeCard(card, cardUrl)`: what a UI shows of a card (as JSON text
/// or an object) fetched from `cardUrl`: identity, skills, and how a call will
/// talk to it (`dialect`, `endpoint`, `follow`: stream, block or poll), decided
/// by the same rules the calls use. Throws a `malformed` Error for a non-card.
#[wasm_bindgen(js_name = describeCard)]
pub fn describe_card(card: JsValue, card_url: String) -> Result<JsValue, JsValue> {
    let parsed = match card.as_string() {
        Some(text) => toolnexus_core::AgentCard::parse(text.as_bytes()),
        None => toolnexus_core::AgentCard::from_value(&to_json(&card, "card")?),
    };
    let card = parsed.map_err(|e| core_error(&e))?;
    Ok(summary_to_js(&card.summary(&card_url)))
}

/// The summary as a plain object, its keys in the order of `CardSummary`'s
/// fields (camelCase, unset ones `null`). Set one by one, not through
/// serde: the `.wasm` has no `Serialize` of the summary to carry.
fn summary_to_js(s: &toolnexus_core::CardSummary) -> JsValue {
    let o: JsValue = Object::new().into();
    let opt = |v: &Option<String>| v.as_deref().map_or(JsValue::NULL, JsValue::from);
    set(&o, "name", &s.name.as_str().into());
    set(&o, "description", &opt(&s.description));
    set(&o, "version", &opt(&s.version));
    set(&o, "provider", &opt(&s.provider));
    set(&o, "dialect", &s.dialect.into());
    set(&o, "dialectReason", &s.dialect_reason.into());
    set(&o, "endpoint", &s.endpoint.as_str().into());
    set(&o, "requiresCredentials", &s.requires_credentials.into());
    let schemes = Array::new();
    for scheme in &s.security_schemes {
        let so: JsValue = Object::new().into();
        set(&so, "name", &scheme.name.as_str().into());
        set(&so, "kind", &scheme.kind.into());
        schemes.push(&so);
    }
    set(&o, "securitySchemes", &schemes);
    set(&o, "streaming", &s.streaming.into());
    set(&o, "longPoll", &s.long_poll.into());
    set(&o, "follow", &s.follow.into());
    let skills = Array::new();
    for skill in &s.skills {
        let so: JsValue = Object::new().into();
        set(&so, "id", &opt(&skill.id));
        set(&so, "name", &opt(&skill.name));
        set(&so, "description", &opt(&skill.description));
        let tags = Array::new();
        for t in &skill.tags {
            tags.push(&t.as_str().into());
        }
        set(&so, "tags", &tags);
        skills.push(&so);
    }
    set(&o, "skills", &skills);
    o
}

/// One skill of a remote agent, callable as a tool.
#[wasm_bindgen]
pub struct Tool {
    inner: Rc<A2aTool>,
}

#[wasm_bindgen]
impl Tool {
    // The getters return strings as `JsValue`s (`string` in the .d.ts):
    // made by JS from the bytes in place, not copied out through an
    // allocation and a return shim each.
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> JsValue {
        self.inner.spec.name.as_str().into()
    }

    #[wasm_bindgen(getter)]
    pub fn description(&self) -> JsValue {
        self.inner.spec.description.as_str().into()
    }

    #[wasm_bindgen(getter, js_name = inputSchema)]
    pub fn input_schema(&self) -> JsValue {
        to_js(&self.inner.spec.input_schema)
    }

    #[wasm_bindgen(getter)]
    pub fn source(&self) -> JsValue {
        self.inner.spec.source.as_str().into()
    }

    /// `execute({task}, {signal, onEvent, traceparent, tracestate, onSpan}?)`:
    /// never rejects; problems come back as `{isError: true}`.
    /// `onEvent(event)` sees each event of the task; a valid W3C
    /// `traceparent` goes on with every request of the call (each as a span
    /// of its own); `onSpan(span)` gets the call's spans.
    pub fn execute(&self, args: JsValue, options: JsValue) -> Promise {
        let tool = self.inner.clone();
        let args = to_json(&args, "args");
        let trace = crate::convert::trace_option(&options);
        let spans = crate::convert::opt_span_hook(&options, "options");
        let abort = Abort::from_options(&options);
        let sink = event_sink(&options, "options");
        promise(Box::pin(async move {
            let result = match (args, abort, sink, spans) {
                (Ok(args), Ok(abort), Ok(sink), Ok(spans)) => {
                    tool.execute_spanned(
                        &JsTransport,
                        &args,
                        abort,
                        sink,
                        trace.as_ref(),
                        spans.as_ref(),
                    )
                    .await
                }
                (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => {
                    ToolResult::error(error_text(&e))
                }
            };
            Ok(result_to_js(&result))
        }))
    }

    /// The spec as plain data (what `JSON.stringify(tool)` shows).
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> JsValue {
        spec_to_js(&self.inner.spec)
    }
}
