//! `toolnexus tools` and `toolnexus call`: a remote agent from the command line.

use super::card_cache::{self, CardCache};
use super::Fail;
use serde_json::json;
use std::io::{Read, Write};
use std::time::Duration;
pub use toolnexus_core::MessageRefs;
use toolnexus_core::Shape;
use toolnexus_core::{HostBase, StreamEvent};
use toolnexus_host_native::{card_tools, Agent, NativeTransport, RemoteTool};

#[derive(clap::Args)]
pub struct Remote {
    /// The Agent Card URL, e.g. http://127.0.0.1:8080/.well-known/agent-card.json
    pub card: String,
    /// A request header "Name: value"; ${NAME} in the value expands from the environment. Repeatable.
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Overall time limit in ms (card fetch, and the whole call) [default: 300000]
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
    /// Fetch the card even if the cache holds a fresh copy, and store nothing.
    /// (Cards are cached as their server's Cache-Control / ETag allow, in the
    /// user cache dir or $TOOLNEXUS_CACHE_DIR; never with -H headers. The
    /// --bearer-env/--api-key-env/--oauth-* credentials never go with the
    /// card request, so the cached card is the public one.)
    #[arg(long)]
    pub no_cache: bool,
    /// Who runs the call: native (this binary), or wasm (the same core as the
    /// WebAssembly component toolnexus-a2a.wasm in wasmtime, HTTP and the card
    /// cache from this host; not for `tasks`) [default: native]
    #[arg(long, value_name = "native|wasm", env = "TOOLNEXUS_ENGINE", value_parser = ["native", "wasm"])]
    pub engine: Option<String>,
    /// The library component for --engine wasm [default: toolnexus-a2a.wasm beside this binary]
    #[arg(long, value_name = "FILE", env = "TOOLNEXUS_COMPONENT")]
    pub component: Option<std::path::PathBuf>,
    /// The largest Agent Card read, in bytes [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    pub max_card_bytes: Option<u64>,
    /// The most skills an Agent Card may list [default: 1000]
    #[arg(long, value_name = "N")]
    pub max_skills: Option<u64>,
    /// Deprecated: send the credentials to whatever origin the card names as
    /// its endpoint. Prefer --allow-credentials-to ORIGIN.
    #[arg(long)]
    pub allow_insecure_headers: bool,
    /// Send `Authorization: Bearer <token>`, the token read from the
    /// environment variable NAME (never from the command line).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["api_key_env", "oauth_client_id"])]
    pub bearer_env: Option<String>,
    /// Send the API key read from the environment variable NAME where the
    /// card's apiKey security scheme says (a header, query parameter or cookie).
    #[arg(long, value_name = "NAME", conflicts_with = "oauth_client_id")]
    pub api_key_env: Option<String>,
    /// Get OAuth2 tokens with the client-credentials grant as client ID
    /// (cached, refreshed before expiry, fetched again once on a 401).
    #[arg(long, value_name = "ID", requires = "oauth_client_secret_env")]
    pub oauth_client_id: Option<String>,
    /// The environment variable holding the OAuth2 client secret.
    #[arg(long, value_name = "NAME", requires = "oauth_client_id")]
    pub oauth_client_secret_env: Option<String>,
    /// The token endpoint [default: the card's clientCredentials flow, or its
    /// OpenID Connect discovery document]. Must be https or loopback http.
    #[arg(long, value_name = "URL", requires = "oauth_client_id")]
    pub oauth_token_url: Option<String>,
    /// An OAuth2 scope to ask for [default: the card's requirement]. Repeatable.
    #[arg(long = "oauth-scope", value_name = "S", requires = "oauth_client_id")]
    pub oauth_scopes: Vec<String>,
    /// Let the credentials (--bearer-env, --api-key-env, OAuth2 tokens, and
    /// the -H headers) go to this origin (https://host[:port]) too, when the
    /// card names an endpoint there. By default they go only to the card's
    /// own origin: elsewhere the call goes without them (a warning), or is
    /// refused when the card requires credentials. Repeatable.
    #[arg(long = "allow-credentials-to", value_name = "ORIGIN")]
    pub allow_credentials_to: Vec<String>,
    /// The binding to prefer when the card lists both: jsonrpc (then rest),
    /// or rest (HTTP+JSON, then jsonrpc). A card with only HTTP+JSON is
    /// called over it either way [default: jsonrpc]
    #[arg(long, value_name = "jsonrpc|rest", value_parser = ["jsonrpc", "rest"])]
    pub binding: Option<String>,
}

/// An environment variable's name for a `--*-env` option, checked: a name,
/// and set (its value is never shown).
fn env_name(option: &str, name: &str) -> Result<String, Fail> {
    let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err(Fail(
            1,
            format!(
                "{option} takes the name of an environment variable (letters, digits, _), not {:?}",
                name.chars().take(40).collect::<String>()
            ),
        ));
    }
    if std::env::var_os(name).is_none_or(|v| v.is_empty()) {
        return Err(Fail(
            1,
            format!("{option} {name}: the environment variable {name} is not set"),
        ));
    }
    Ok(format!("${{{name}}}"))
}

/// Says on stderr that a skill's tool was renamed because an earlier skill
/// of the card made its name first.
fn say_clash(skill: &str, clash: Option<&str>, name: &str) {
    if let Some(clash) = clash {
        let line = format!(
            "toolnexus: skill {:?} makes the tool name {clash:?}, which an earlier skill of the card took: it is {name:?}",
            skill.chars().take(200).collect::<String>(),
        );
        eprintln!("{}", super::terminal::line(&line));
    }
}

/// Prints one event of a call as a JSON line on stderr (`call --events`).
fn print_event_line(line: String) {
    let line = super::terminal::json(line);
    let mut err = std::io::stderr().lock();
    // A closed stderr must not stop the call.
    let _ = writeln!(err, "{line}");
}

fn parse_header(h: &str) -> Result<(String, String), Fail> {
    match h.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(Fail(
            1,
            format!(
                "invalid header {:?}: expected \"Name: value\"",
                h.split(':').next().unwrap_or("")
            ),
        )),
    }
}

impl Remote {
    fn wasm(&self) -> bool {
        self.engine.as_deref() == Some("wasm")
    }

    /// The library component, loaded (`--engine wasm`), with the card cache
    /// under its card requests unless `--no-cache`.
    #[cfg(feature = "component")]
    fn component(
        &self,
        agent: &Agent,
    ) -> Result<toolnexus_host_native::component_host::ComponentHost, Fail> {
        let path = match &self.component {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.join("toolnexus-a2a.wasm")))
                .ok_or_else(|| Fail(1, "--engine wasm needs --component FILE".into()))?,
        };
        let host = toolnexus_host_native::component_host::ComponentHost::load(&path)
            .map_err(|e| Fail(1, e.to_string()))?;
        Ok(match (self.no_cache, CardCache::open()) {
            (false, Some(cache)) => {
                host.with_card_cache(std::sync::Arc::new(card_cache::AgentCards {
                    cache,
                    limits: agent.card_limits(),
                }))
            }
            _ => host,
        })
    }

    /// The agent's tools, the card taken from the cache when it allows.
    /// Says on stderr which tools were renamed because their names clashed.
    async fn tools(&self, agent: &Agent) -> Result<Vec<RemoteTool>, Fail> {
        // One transport, so the card and the call share a keep-alive connection.
        let transport = transport();
        let cache = if self.no_cache {
            None
        } else {
            CardCache::open()
        };
        let card = card_cache::fetch_card(&transport, agent, cache.as_ref())
            .await
            .map_err(|e| Fail(1, e.to_string()))?;
        let tools = card_tools(&transport, agent, &card);
        for t in &tools {
            say_clash(t.skill(), t.clash(), &t.spec().name);
        }
        Ok(tools)
    }

    fn agent(&self, poll_every: Option<u64>) -> Result<Agent, Fail> {
        let mut agent = Agent::new(self.card.clone());
        agent.headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<_, _>>()?;
        agent.timeout = self.timeout.map(Duration::from_millis);
        agent.poll_every = poll_every.map(Duration::from_millis);
        agent.max_card_bytes = self.max_card_bytes;
        agent.max_skills = self.max_skills;
        agent.allow_insecure_headers = self.allow_insecure_headers;
        agent.binding = self
            .binding
            .as_deref()
            .and_then(toolnexus_core::Binding::parse);
        agent.auth = self.auth()?;
        for origin in &self.allow_credentials_to {
            let trimmed = origin.strip_suffix('/').unwrap_or(origin);
            if toolnexus_core::url_origin(trimmed) != Some(trimmed) {
                return Err(Fail(
                    1,
                    format!("--allow-credentials-to takes an origin (https://host[:port]), not {origin:?}"),
                ));
            }
            agent.allowed_origins.push(trimmed.to_string());
        }
        if self.wasm() && (agent.auth.is_some() || !agent.allowed_origins.is_empty()) {
            return Err(Fail(
                1,
                "--engine wasm takes no credential options yet (--bearer-env, --api-key-env, --oauth-*, --allow-credentials-to): use --engine native".into(),
            ));
        }
        Ok(agent)
    }

    /// The credential the options name; secrets stay in the environment
    /// (`${NAME}`, expanded at each request).
    fn auth(&self) -> Result<Option<toolnexus_core::Auth>, Fail> {
        use toolnexus_core::{Auth, OAuth2Client};
        if let Some(name) = &self.bearer_env {
            return Ok(Some(Auth::Bearer(env_name("--bearer-env", name)?)));
        }
        if let Some(name) = &self.api_key_env {
            return Ok(Some(Auth::ApiKey(env_name("--api-key-env", name)?)));
        }
        let Some(client_id) = &self.oauth_client_id else {
            return Ok(None);
        };
        let secret = self.oauth_client_secret_env.as_deref().unwrap_or_default();
        Ok(Some(Auth::OAuth2(OAuth2Client {
            client_id: client_id.clone(),
            client_secret: env_name("--oauth-client-secret-env", secret)?,
            token_url: self.oauth_token_url.clone(),
            scopes: self.oauth_scopes.clone(),
        })))
    }
}

/// Completes on Ctrl-C or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled, so a signal that comes
/// right after (say, after `serve` printed its address) is never the
/// default action that kills the process.
pub fn interrupted() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        async move {
            match (term, int) {
                (Some(mut term), Some(mut int)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Prints `v` as pretty JSON, inert on a terminal ([`super::terminal::json`]).
/// The transport of `tools`, `call` and `tasks`: the shared one, in the
/// trace of `TRACEPARENT` (and `TRACESTATE`) when that names a valid one:
/// the command is a span of that trace, its requests children of it.
fn transport() -> std::sync::Arc<NativeTransport> {
    let shared = NativeTransport::shared();
    let var = |name: &str| std::env::var(name).ok();
    let caller = var("TRACEPARENT")
        .and_then(|p| toolnexus_core::TraceContext::parse(&p, var("TRACESTATE").as_deref()));
    // With span export on, a command that came in no trace starts one.
    #[cfg(feature = "otel")]
    let exporting = toolnexus_host_native::otel::enabled();
    #[cfg(not(feature = "otel"))]
    let exporting = false;
    let command = match &caller {
        Some(parent) => parent.child(&shared.new_id()),
        None if exporting => toolnexus_core::TraceContext::root(&shared.new_id()),
        None => return shared,
    };
    #[cfg(feature = "otel")]
    {
        let name = std::env::args().nth(1).unwrap_or_default();
        toolnexus_host_native::otel::start_command(&name, &command, caller.as_ref());
    }
    std::sync::Arc::new(shared.as_ref().clone().with_trace(command))
}

pub fn print_json(v: &serde_json::Value) {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) ends the output, not the process.
    let _ = writeln!(out, "{}", super::terminal::json(text));
}

pub async fn tools(remote: Remote) -> Result<i32, Fail> {
    let agent = remote.agent(None)?;
    if remote.wasm() {
        return wasm_tools(&remote, &agent).await;
    }
    let tools = remote.tools(&agent).await?;
    print_json(&json!(tools.iter().map(|t| t.spec()).collect::<Vec<_>>()));
    Ok(0)
}

/// `toolnexus tasks`: the agent's tasks, one summary each.
pub async fn tasks(
    remote: Remote,
    context: Option<String>,
    status: Option<String>,
) -> Result<i32, Fail> {
    use toolnexus_core::TaskState;
    use toolnexus_core::{list_tasks, ListFilter};
    let status = match status.as_deref().map(TaskState::parse) {
        Some(TaskState::Unknown) => {
            return Err(Fail(
                1,
                format!(
                    "unknown --status {:?} (submitted, working, input-required, auth-required, completed, failed, canceled, rejected)",
                    status.unwrap_or_default()
                ),
            ))
        }
        s => s,
    };
    if remote.wasm() {
        // The component has no ListTasks: say so rather than list natively.
        return Err(Fail(
            1,
            "tasks has no --engine wasm (the component lists no tasks): use --engine native".into(),
        ));
    }
    let agent = remote.agent(None)?;
    let transport = transport();
    let cache = (!remote.no_cache).then(CardCache::open).flatten();
    let work = async {
        let card = card_cache::fetch_card(&transport, &agent, cache.as_ref())
            .await
            .map_err(|e| Fail(1, e.to_string()))?;
        let (_, endpoint) = card.endpoint(&agent.card);
        let route = toolnexus_core::credential_route_for(
            &agent,
            &endpoint,
            card.requires_credentials(),
            "ListTasks",
        );
        if let toolnexus_core::CredentialRoute::Withhold(warning) = route {
            eprintln!("toolnexus: {}", super::terminal::line(&warning));
        }
        let filter = ListFilter {
            context_id: context,
            status,
        };
        // One listing per process: no token cache to share.
        list_tasks(&transport, &agent, &card, &filter, None)
            .await
            .map_err(|e| Fail(2, format!("ListTasks failed: {e}")))
    };
    let ms = agent.timeout_ms();
    let list = tokio::time::timeout(Duration::from_millis(ms), work)
        .await
        .map_err(|_| Fail(2, format!("ListTasks timed out after {ms}ms")))??;
    let tasks: Vec<serde_json::Value> = list
        .tasks
        .iter()
        .map(|t| {
            let output = t.summary_text();
            json!({
                "id": t.id,
                "contextId": t.context_id,
                "state": t.state.as_str(),
                "timestamp": t.updated_ms.map(toolnexus_core::format_rfc3339),
                "output": output,
            })
        })
        .collect();
    print_json(&json!({"tasks": tasks, "totalSize": list.total_size, "truncated": list.truncated}));
    Ok(0)
}

pub async fn call(
    remote: Remote,
    tool: String,
    task: String,
    refs: MessageRefs,
    poll_every: Option<u64>,
    events: bool,
) -> Result<i32, Fail> {
    let agent = remote.agent(poll_every)?;
    // One deadline for the whole call, the card fetch included.
    let started_ms = NativeTransport::shared().now_ms();
    let task = if task == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Fail(1, format!("cannot read the task from stdin: {e}")))?;
        text.strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(&text)
            .to_string()
    } else {
        task
    };
    if remote.wasm() {
        return wasm_call(&remote, &agent, &tool, &task, refs, events).await;
    }
    let tools = remote.tools(&agent).await?;
    let found = toolnexus_core::find_tool_by(&tools, &tool, |t: &RemoteTool| {
        (t.spec().name.as_str(), t.skill())
    })
    .map_err(|e| Fail(1, e.to_string()))?;
    // Refused before anything is sent; withheld ones are said by the
    // library's warning (on stderr through the CLI's subscriber).
    if let toolnexus_core::CredentialRoute::Refuse(refused) = found.credential_route() {
        return Err(Fail(1, refused.to_string()));
    }
    let print_event = |event: StreamEvent| {
        if events {
            let line = serde_json::to_string(&event.shaped(Shape::V03))
                .unwrap_or_else(|e| json!({"error": e.to_string()}).to_string());
            print_event_line(line);
        }
    };
    let mut args = json!({"task": task});
    for (key, id) in [("taskId", refs.task_id), ("contextId", refs.context_id)] {
        if let Some(id) = id {
            args[key] = json!(id);
        }
    }
    let result = found
        .execute_since(&args, started_ms, interrupted(), print_event)
        .await;
    println!("{}", super::terminal::json(json!(result).to_string()));
    Ok(if result.is_error { 2 } else { 0 })
}

/// `tools --engine wasm`: the component lists the tools; the same JSON and
/// the same stderr lines.
#[cfg(feature = "component")]
async fn wasm_tools(remote: &Remote, agent: &Agent) -> Result<i32, Fail> {
    let tools = remote
        .component(agent)?
        .tools(agent)
        .await
        .map_err(|e| Fail(1, e.to_string()))?;
    for t in &tools {
        say_clash(&t.skill, t.clash.as_deref(), &t.spec.name);
    }
    print_json(&json!(tools.iter().map(|t| &t.spec).collect::<Vec<_>>()));
    Ok(0)
}

/// `call --engine wasm`: the component makes the call (`call-live`); the
/// same JSON, exit codes and event lines, each printed as it happens, and
/// Ctrl-C or SIGTERM cancels the task through the component.
#[cfg(feature = "component")]
async fn wasm_call(
    remote: &Remote,
    agent: &Agent,
    tool: &str,
    task: &str,
    refs: MessageRefs,
    events: bool,
) -> Result<i32, Fail> {
    use toolnexus_host_native::component_host::{ComponentTool, LiveListener};
    let listener = LiveListener {
        on_tools: Box::new(|tools: Vec<ComponentTool>| {
            for t in &tools {
                say_clash(&t.skill, t.clash.as_deref(), &t.spec.name);
            }
        }),
        on_event: Box::new(move |line: String| {
            if events {
                print_event_line(line);
            }
        }),
    };
    let result = remote
        .component(agent)?
        .call_live(agent, tool, task, refs, interrupted(), listener)
        .await
        .map_err(|e| Fail(1, e.to_string()))?;
    println!("{}", super::terminal::json(json!(result).to_string()));
    Ok(if result.is_error { 2 } else { 0 })
}

#[cfg(not(feature = "component"))]
fn no_engine() -> Fail {
    Fail(
        1,
        "--engine wasm: this toolnexus was built without the component feature (cargo build --features component)".into(),
    )
}

#[cfg(not(feature = "component"))]
async fn wasm_tools(_: &Remote, _: &Agent) -> Result<i32, Fail> {
    Err(no_engine())
}

#[cfg(not(feature = "component"))]
async fn wasm_call(
    _: &Remote,
    _: &Agent,
    _: &str,
    _: &str,
    _: MessageRefs,
    _: bool,
) -> Result<i32, Fail> {
    Err(no_engine())
}
