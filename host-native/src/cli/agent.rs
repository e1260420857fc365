//! `toolnexus serve` and `toolnexus card`.

use super::Fail;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use toolnexus_core::llm::{LlmConfig, LlmStyle};
use toolnexus_core::server::{build_agent_card, card_for, A2aConfig, CorsOrigin, Provider};
use toolnexus_core::skills::SkillSet;
use toolnexus_host_native::config_file::ConfigFile;
use toolnexus_host_native::skills_dir::load_skill_dirs;
use toolnexus_host_native::store::StoreConfig;
use toolnexus_host_native::{
    add_config_agents_within, serve as serve_agent, Model, NativeTransport, ServeOptions,
    STARTUP_CARD_TIMEOUT,
};

/// What the agent is: skills, config, and card identity.
#[derive(clap::Args)]
pub struct Identity {
    /// A folder searched for **/SKILL.md. Repeatable.
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
    /// A JSON file with `agents`, `a2a` and `llm` blocks; flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// The card name [default: toolnexus-agent]
    #[arg(long, value_name = "N")]
    name: Option<String>,
    /// The card description [default: ""]
    #[arg(long, value_name = "D")]
    description: Option<String>,
    /// The card version [default: 0.1.0]
    #[arg(long = "agent-version", value_name = "V")]
    agent_version: Option<String>,
    /// The provider's organization (with --provider-url)
    #[arg(long = "provider-org", value_name = "O", requires = "provider_url")]
    provider_org: Option<String>,
    /// The provider's URL (with --provider-org)
    #[arg(long = "provider-url", value_name = "U", requires = "provider_org")]
    provider_url: Option<String>,
    /// Advertise only this skill. Repeatable; unknown names are ignored.
    #[arg(long = "expose", value_name = "SKILL")]
    expose: Vec<String>,
    /// The bindings offered and listed on the card: jsonrpc (at /), rest
    /// (HTTP+JSON, at /rest), or both [default: jsonrpc,rest]
    #[arg(long, value_name = "LIST")]
    bindings: Option<String>,
    /// The tenant the card's interfaces name; HTTP+JSON clients send it as
    /// the first path segment (/rest/TENANT/...).
    #[arg(long, value_name = "T")]
    tenant: Option<String>,
    /// Serve HTTP+JSON at the root (/message:send, /tasks/..., beside
    /// JSON-RPC's POST /) instead of under /rest, and list it there on the
    /// card: for clients that drop the interface URL's path, as the official
    /// TCK's REST client does. Not with --ui.
    #[arg(long = "rest-at-root")]
    rest_at_root: bool,
}

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    id: Identity,
    /// Where to listen; port 0 picks a free port.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    addr: String,
    /// The task store: memory, file:DIR (survives restarts), or
    /// postgres://USER@HOST/DB (replicas share it; `postgres` alone reads
    /// DATABASE_URL) [default: memory]
    #[arg(long, value_name = "memory|file:DIR|postgres://…")]
    store: Option<String>,
    /// How long a running task's lease in a shared store (file or
    /// PostgreSQL) lasts unless renewed: a replica that dies has its tasks
    /// failed by the others this long after.
    #[arg(long = "task-lease-seconds", value_name = "N", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    task_lease_seconds: u64,
    /// How often a shared store is read again for changes no notification
    /// told of (the fallback of PostgreSQL LISTEN/NOTIFY), in ms.
    #[arg(long = "store-poll-ms", value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=600_000))]
    store_poll_ms: u64,
    /// How long finished tasks (completed, failed, canceled, rejected) are
    /// kept after their last change, in hours; older ones are deleted (a
    /// sweep every minute). 0 keeps them for ever.
    #[arg(long = "task-retention-hours", value_name = "HOURS", default_value_t = 168,
          value_parser = clap::value_parser!(u64).range(0..=876_000))]
    task_retention_hours: u64,
    /// The base URL the card advertises (behind a proxy, or when bound to 0.0.0.0).
    #[arg(long = "public-url", value_name = "URL")]
    public_url: Option<String>,
    /// Let web pages on this origin (`scheme://host[:port]`, or `*`) call the
    /// agent: CORS headers for it. Repeatable. [default: none, no CORS headers]
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origin: Vec<String>,
    /// Also answer Private Network Access preflights (pages on public
    /// origins calling this private address). Needs --cors-origin.
    #[arg(long = "cors-private-network", requires = "cors_origin")]
    cors_private_network: bool,
    /// Serve a non-loopback --addr with no verifier (no a2a.auth block):
    /// anyone who reaches it may call. Refused without this flag.
    #[arg(long = "allow-anonymous")]
    allow_anonymous: bool,
    /// Offer push notifications: callers set webhooks (the config methods,
    /// or SendMessage's configuration) and get each state change POSTed.
    #[arg(long = "push-notifications")]
    push_notifications: bool,
    /// Serve Prometheus metrics at /metrics (GET; the same Host, CORS and
    /// verifier rules as the agent's calls).
    #[cfg(feature = "metrics")]
    #[arg(long)]
    metrics: bool,
    /// Log lines as `json` (one object a line) or `text` (time, level,
    /// target, message, fields), filtered by RUST_LOG (default `info`);
    /// each line in a traced request or task carries its trace id.
    /// Default: the short `toolnexus: …` lines (RUST_LOG set: `text`).
    #[arg(long = "log-format", value_name = "json|text")]
    pub log_format: Option<super::log::Format>,
    /// Let webhooks point at loopback, private, link-local and metadata
    /// addresses (refused by default: SSRF). Implies --push-notifications.
    #[arg(long = "allow-private-webhooks")]
    allow_private_webhooks: bool,
    /// Who answers tasks: openai, anthropic, or echo (offline: answers with the task's text).
    #[arg(long, value_name = "STYLE", value_parser = ["openai", "anthropic", "echo"])]
    llm: Option<String>,
    /// The model endpoint [default: https://api.openai.com/v1 or https://api.anthropic.com]
    #[arg(long = "llm-base-url", value_name = "URL")]
    llm_base_url: Option<String>,
    /// The model name (required for openai and anthropic).
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// The environment variable holding the API key [default: OPENAI_API_KEY or ANTHROPIC_API_KEY]
    #[arg(long = "api-key-env", value_name = "NAME")]
    api_key_env: Option<String>,
    /// Also serve this folder's static files (the browser UI: www/dist) on GET;
    /// the card and JSON-RPC stay where they are.
    #[arg(long, value_name = "DIR")]
    ui: Option<PathBuf>,
    /// Serve this agent component (toolnexus-agent.wasm, the wasi:http/proxy
    /// world) in wasmtime instead, an instance per request, as `wasmtime
    /// serve` does. It is configured by the TOOLNEXUS_* environment
    /// variables (--name, --description and --store file:DIR set them).
    #[arg(long, value_name = "FILE")]
    component: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CardArgs {
    #[command(flatten)]
    id: Identity,
    /// The JSON-RPC URL the card advertises.
    #[arg(long, value_name = "URL")]
    url: String,
}

/// The identity, skills and config file behind `serve` and `card`.
struct Resolved {
    card: A2aConfig,
    skills: SkillSet,
    config: ConfigFile,
}

impl Identity {
    fn resolve(&self) -> Result<Resolved, Fail> {
        let config = match &self.config {
            Some(path) => ConfigFile::load(path).map_err(|e| Fail(1, e.to_string()))?,
            None => ConfigFile::default(),
        };
        let mut card = config.a2a.card.clone();
        let set = |slot: &mut Option<String>, flag: &Option<String>| {
            if flag.is_some() {
                slot.clone_from(flag);
            }
        };
        set(&mut card.name, &self.name);
        set(&mut card.description, &self.description);
        set(&mut card.version, &self.agent_version);
        if let (Some(organization), Some(url)) = (&self.provider_org, &self.provider_url) {
            card.provider = Some(Provider {
                organization: organization.clone(),
                url: url.clone(),
            });
        }
        if !self.expose.is_empty() {
            card.skills = Some(self.expose.clone());
        }
        if let Some(list) = &self.bindings {
            toolnexus_core::server::rest::Bindings::parse(list)
                .map_err(|e| Fail(2, format!("--bindings: {e}")))?;
            card.bindings = Some(list.split(',').map(|b| b.trim().to_string()).collect());
        }
        set(&mut card.tenant, &self.tenant);
        card.rest_at_root = self.rest_at_root;
        let skills = load_skill_dirs(&self.skills).map_err(|e| Fail(1, e.to_string()))?;
        for s in skills.skipped() {
            eprintln!("toolnexus: skill {} skipped: {}", s.path, s.reason);
        }
        Ok(Resolved {
            card,
            skills,
            config,
        })
    }
}

pub fn card(args: CardArgs) -> Result<i32, Fail> {
    let r = args.id.resolve()?;
    // Written as `serve` serves it to a request naming no version: 1.0.
    let card = build_agent_card(&r.card, r.skills.skills(), &args.url);
    super::remote::print_json(&card_for(&card, toolnexus_core::Shape::V10));
    Ok(0)
}

fn model(args: &ServeArgs, config: &ConfigFile) -> Result<Model, Fail> {
    let block = config.llm.clone().unwrap_or_default();
    let style = args.llm.clone().or(block.style.clone());
    let style = match style.as_deref() {
        None => {
            eprintln!("toolnexus: no model configured (--llm or the config's llm block): answering with the echo model");
            return Ok(Model::Echo);
        }
        Some("echo") => return Ok(Model::Echo),
        Some(s) => s.parse::<LlmStyle>().map_err(|e| Fail(1, e.to_string()))?,
    };
    let base_url = args
        .llm_base_url
        .clone()
        .or(block.base_url.clone())
        .unwrap_or_else(|| {
            match style {
                LlmStyle::OpenAi => "https://api.openai.com/v1",
                LlmStyle::Anthropic => "https://api.anthropic.com",
            }
            .to_string()
        });
    let model = args.model.clone().or(block.model.clone()).ok_or_else(|| {
        Fail(
            1,
            format!(
                "--model is required with --llm {style} (or \"model\" in the config's llm block)"
            ),
        )
    })?;
    let mut cfg = LlmConfig::new(base_url, style, model);
    let key_env = args.api_key_env.clone().or(block.api_key_env.clone());
    cfg.api_key = match key_env {
        Some(name) => Some(std::env::var(&name).map_err(|_| {
            Fail(
                1,
                format!("the environment variable {name} (the API key) is not set"),
            )
        })?),
        None => block.api_key.clone().or_else(|| {
            let default = match style {
                LlmStyle::OpenAi => "OPENAI_API_KEY",
                LlmStyle::Anthropic => "ANTHROPIC_API_KEY",
            };
            std::env::var(default).ok()
        }),
    };
    cfg.headers = block.headers.into_iter().collect();
    cfg.system_prompt = block.system_prompt;
    if let Some(n) = block.max_turns {
        cfg.max_turns = n;
    }
    Ok(Model::Llm(cfg))
}

/// `--cors-origin`s, checked now (a CR or LF would otherwise break every
/// response); none (or `none`): no CORS headers.
fn cors_origin(args: &[String], private_network: bool) -> Result<Option<CorsOrigin>, Fail> {
    let origins: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|o| *o != "none")
        .collect();
    let cors = CorsOrigin::list(&origins).map_err(|e| Fail(1, format!("--cors-origin: {e}")))?;
    Ok(cors.map(|c| c.with_private_network(private_network)))
}

/// `serve --component` on a non-loopback address, as `serve` without an
/// `a2a.auth` block: refused unless the component gets a verifier from its
/// environment (`TOOLNEXUS_API_KEYS`, `TOOLNEXUS_JWT_SECRET`: what it
/// reads) or `--allow-anonymous` says to serve it open. Checked before the
/// component is read or the address bound.
fn refuse_anonymous_component(
    addr: &str,
    allow_anonymous: bool,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), Fail> {
    let verifier = ["TOOLNEXUS_API_KEYS", "TOOLNEXUS_JWT_SECRET"]
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.trim().is_empty()));
    if allow_anonymous || verifier || toolnexus_host_native::serve::is_loopback_address(addr) {
        return Ok(());
    }
    Err(Fail(
        1,
        format!(
            "refusing to serve {addr} without authentication: it is not a loopback address, \
             so anyone who can reach it could read every task and spend the model's key. \
             Give the component a verifier (TOOLNEXUS_API_KEYS or TOOLNEXUS_JWT_SECRET in its \
             environment), bind 127.0.0.1, or pass --allow-anonymous to serve it open anyway"
        ),
    ))
}

pub async fn serve(args: ServeArgs) -> Result<i32, Fail> {
    if let Some(component) = &args.component {
        refuse_anonymous_component(&args.addr, args.allow_anonymous, |k| std::env::var(k).ok())?;
        return serve_component(&args, component).await;
    }
    // Options first: a bad one fails before anything is resolved or bound.
    let cors = cors_origin(&args.cors_origin, args.cors_private_network)?;
    if args.ui.is_some() && args.id.rest_at_root {
        return Err(Fail(
            2,
            "--rest-at-root and --ui both want the root: serve the UI, or HTTP+JSON at the root (without --rest-at-root it is under /rest)".into(),
        ));
    }
    if let Some(dir) = &args.ui {
        if !dir.is_dir() {
            return Err(Fail(
                1,
                format!(
                    "--ui {}: no such directory (the bundled page is built by www/build.sh into www/dist)",
                    dir.display()
                ),
            ));
        }
    }
    let r = args.id.resolve()?;
    let model = model(&args, &r.config)?;
    // The config's agents get a short startup deadline: a card that never
    // answers must not keep the agent from listening.
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared())
        .with_token_cells(|_| toolnexus_host_native::token_cell());
    let agents = toolnexus_core::parse_agents_config(
        r.config
            .raw
            .get("agents")
            .unwrap_or(&serde_json::Value::Null),
    );
    if !agents.is_empty() {
        tracing::info!(
            target: "toolnexus",
            "resolving {} agent card(s) from the config (at most {} s)",
            agents.len(),
            STARTUP_CARD_TIMEOUT.as_secs()
        );
        for (card, added) in
            add_config_agents_within(&mut tk, &r.config.raw, STARTUP_CARD_TIMEOUT).await
        {
            if let Ok(n) = added {
                tracing::info!(target: "toolnexus", "agent {card}: {n} tool(s)");
            }
        }
    }
    tk.add_skills(r.skills);
    let mut options = ServeOptions::new(Arc::new(tk), model);
    options.a2a = Some(r.card);
    let store = args
        .store
        .clone()
        .or(r.config.a2a.store.clone())
        .unwrap_or_else(|| "memory".into());
    options.store = StoreConfig::parse(&store).map_err(|e| Fail(1, e.to_string()))?;
    options.task_lease = std::time::Duration::from_secs(args.task_lease_seconds);
    options.store_poll = std::time::Duration::from_millis(args.store_poll_ms);
    options.task_retention = (args.task_retention_hours > 0)
        .then(|| std::time::Duration::from_secs(args.task_retention_hours * 3600));
    #[cfg(feature = "metrics")]
    {
        options.metrics = args.metrics;
    }
    options.public_url = args.public_url.clone();
    options.cors_origin = cors;
    options.allow_anonymous = args.allow_anonymous;
    options.ui_dir = args.ui.clone();
    if args.push_notifications || args.allow_private_webhooks {
        options.push = Some(toolnexus_host_native::PushOptions {
            allow_private_webhooks: args.allow_private_webhooks,
        });
    }
    options.on_task = Some(Arc::new(|e| match &e.trace_id {
        Some(trace) => tracing::info!(
            target: "toolnexus",
            task_id = %e.id,
            state = %e.state,
            trace_id = %trace,
            "task {} {} (trace {trace})",
            e.id,
            e.state
        ),
        None => tracing::info!(
            target: "toolnexus",
            task_id = %e.id,
            state = %e.state,
            "task {} {}",
            e.id,
            e.state
        ),
    }));
    let handle = serve_agent(&args.addr, options)
        .await
        .map_err(|e| Fail(1, e.to_string()))?;
    // Listen for the stop signals before saying we are up.
    let stop = super::remote::interrupted();
    println!("listening on {}", handle.url);
    let _ = std::io::stdout().flush();
    tracing::info!(
        target: "toolnexus",
        "Agent Card at {}.well-known/agent-card.json",
        handle.card_url
    );
    if let Some(dir) = &args.ui {
        if !dir.join("index.html").is_file() {
            tracing::warn!(target: "toolnexus", "warning: {} has no index.html", dir.display());
        }
        tracing::info!(target: "toolnexus", "browser UI at {}/", handle.url);
    }
    for id in &handle.recovered {
        tracing::warn!(target: "toolnexus", task_id = %id, "task {id} was interrupted by a restart; marked failed");
    }
    stop.await;
    tracing::info!(target: "toolnexus", "stopping");
    handle.stop().await;
    Ok(0)
}

/// `serve --component`: the agent world in wasmtime, an instance per request.
#[cfg(feature = "component")]
async fn serve_component(args: &ServeArgs, component: &std::path::Path) -> Result<i32, Fail> {
    use toolnexus_host_native::component_host::{serve_agent as serve_wasm, AgentComponent};
    // What the instances see: the TOOLNEXUS_* variables (and the model key
    // they name), with the flags on top.
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("TOOLNEXUS_") || k.ends_with("_API_KEY"))
        .collect();
    let mut set = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            env.retain(|(name, _)| name != k);
            env.push((k.to_string(), v.clone()));
        }
    };
    set("TOOLNEXUS_NAME", &args.id.name);
    set("TOOLNEXUS_DESCRIPTION", &args.id.description);
    set("TOOLNEXUS_PUBLIC_URL", &args.public_url);
    let mut preopen = None;
    match args.store.as_deref() {
        None => {}
        Some("memory") => set("TOOLNEXUS_STORE", &Some("memory".into())),
        Some(s) if s.starts_with("file:") => {
            let dir = PathBuf::from(&s[5..]);
            std::fs::create_dir_all(&dir).map_err(|e| {
                Fail(
                    1,
                    format!("cannot create the store folder {}: {e}", dir.display()),
                )
            })?;
            set("TOOLNEXUS_STORE", &Some("file:/tasks".into()));
            preopen = Some(dir);
        }
        Some(other) => {
            return Err(Fail(
                1,
                format!("--store must be memory or file:DIR, not {other:?}"),
            ))
        }
    }
    let agent =
        AgentComponent::load(component, env, preopen).map_err(|e| Fail(1, e.to_string()))?;
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .map_err(|e| Fail(1, format!("cannot listen on {}: {e}", args.addr)))?;
    let addr = listener.local_addr().map_err(|e| Fail(1, e.to_string()))?;
    let stop = super::remote::interrupted();
    println!("listening on http://{addr}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "toolnexus: serving the agent component {}",
        component.display()
    );
    serve_wasm(listener, Arc::new(agent), stop).await;
    eprintln!("toolnexus: stopping");
    Ok(0)
}

#[cfg(not(feature = "component"))]
async fn serve_component(_: &ServeArgs, _: &std::path::Path) -> Result<i32, Fail> {
    Err(Fail(
        1,
        "--component: this toolnexus was built without the component feature (cargo build --features component)".into(),
    ))
}
