//! The library world's exports (`toolnexus-a2a.wasm`): the WIT records to
//! and from the core's values, each call driven to its end on wstd's
//! executor. Conversions only: the calls themselves are the core's.

use crate::wasi_host::{MemoryStore, WasiHost, WasiTransport};
use std::sync::Arc;
use std::time::Duration;
use toolnexus_core::server::{build_agent_card, A2aConfig, A2aServer, EchoFulfiller};
use toolnexus_core::skills::Skill;
use toolnexus_core::{fetch_card, Dialect, Shape, StreamEvent};

wit_bindgen::generate!({
    path: "wit",
    world: "library",
    // The listener's abort pollable goes to wstd's reactor, which takes
    // wasip2's type for it.
    with: { "wasi:io/poll@0.2.12": wasip2::io::poll },
    generate_all,
});

use exports::toolnexus::a2a::client::{CallOptions, CallOutcome, Guest as ClientGuest};
use exports::toolnexus::a2a::server::{Guest as ServerGuest, GuestEchoServer, ServerOptions};
use toolnexus::a2a::call_host::CallListener;
use toolnexus::a2a::types as wit;

struct Component;

fn agent_in(a: wit::Agent) -> toolnexus_core::Agent {
    let mut agent = toolnexus_core::Agent::new(a.card);
    for (name, value) in a.headers {
        agent = agent.with_header(name, value);
    }
    if let Some(ms) = a.timeout_ms {
        agent = agent.with_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = a.poll_interval_ms {
        agent = agent.with_poll_every(Duration::from_millis(ms));
    }
    if let Some(bytes) = a.max_card_bytes {
        agent = agent.with_max_card_bytes(bytes);
    }
    if let Some(n) = a.max_skills {
        agent = agent.with_max_skills(n);
    }
    agent.with_insecure_headers_allowed(a.allow_insecure_headers)
}

fn agent_out(a: toolnexus_core::Agent) -> wit::Agent {
    let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
    wit::Agent {
        timeout_ms: ms(a.timeout),
        poll_interval_ms: ms(a.poll_every),
        max_card_bytes: a.max_card_bytes,
        max_skills: a.max_skills,
        allow_insecure_headers: a.allow_insecure_headers,
        card: a.card,
        headers: a.headers,
    }
}

fn dialect(d: Dialect) -> wit::Dialect {
    match d {
        Dialect::V10 => wit::Dialect::A2aV1,
        Dialect::V03 => wit::Dialect::A2aV03,
        Dialect::Rest10 => wit::Dialect::RestV1,
        Dialect::Rest03 => wit::Dialect::RestV03,
        Dialect::Toolnexus => wit::Dialect::Toolnexus,
    }
}

fn dialect_named(name: &str) -> wit::Dialect {
    match name {
        "toolnexus" => wit::Dialect::Toolnexus,
        "0.3" | "v0.3" | "a2a-0.3" => wit::Dialect::A2aV03,
        "rest-1.0" => wit::Dialect::RestV1,
        "rest-0.3" => wit::Dialect::RestV03,
        _ => wit::Dialect::A2aV1,
    }
}

fn error(e: toolnexus_core::Error) -> wit::Error {
    use toolnexus_core::Error as E;
    match e {
        E::Transport(m) => wit::Error::Transport(m.to_string()),
        E::Status { status, url, body } => {
            wit::Error::Status(wit::HttpStatusError { status, url, body })
        }
        E::Malformed(m) => wit::Error::Malformed(m.to_string()),
        E::Rpc { code, message } => wit::Error::Rpc(wit::RpcError { code, message }),
        E::Misuse(m) => wit::Error::Misuse(m),
        other => wit::Error::Misuse(other.to_string()),
    }
}

fn tool(t: &toolnexus_core::A2aTool) -> wit::Tool {
    wit::Tool {
        name: t.spec.name.clone(),
        description: t.spec.description.clone(),
        input_schema: t.spec.input_schema.to_string(),
        source: t.spec.source.as_str().into(),
        agent_name: t.agent_name.clone(),
        skill: t.skill.clone(),
        endpoint: t.endpoint.clone(),
        dialect: dialect(t.dialect),
        clash: t.clash.clone(),
    }
}

fn event(e: &StreamEvent) -> wit::TaskEvent {
    let kind = match e {
        StreamEvent::Task(_) => wit::EventKind::Task,
        StreamEvent::Message(_) => wit::EventKind::Message,
        StreamEvent::Status(_) => wit::EventKind::StatusUpdate,
        StreamEvent::Artifact(_) => wit::EventKind::ArtifactUpdate,
    };
    // Compact JSON, as `toolnexus call --events` prints it natively.
    let json = serde_json::to_string(&e.shaped(Shape::V03)).unwrap_or_default();
    wit::TaskEvent {
        kind,
        state: e.state().and_then(|s| {
            serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
        }),
        json,
    }
}

async fn tools_of(
    agent: &toolnexus_core::Agent,
) -> Result<Vec<toolnexus_core::A2aTool>, wit::Error> {
    let card = fetch_card(&WasiTransport, agent).await.map_err(error)?;
    Ok(toolnexus_core::card_tools(agent, &card))
}

/// One whole call: the card, the tool, then the task followed until it
/// settles, the deadline, or `abort` (the core then cancels the task).
fn run_call(
    agent: wit::Agent,
    name: &str,
    task: String,
    options: &CallOptions,
    on_tools: impl FnOnce(&[toolnexus_core::A2aTool]),
    abort: impl std::future::Future<Output = ()>,
    on_event: impl FnMut(StreamEvent),
) -> Result<wit::ToolResult, wit::Error> {
    let agent = agent_in(agent);
    wstd::runtime::block_on(async {
        // One time limit for the whole call, the card fetch included (as
        // `toolnexus call` natively).
        let started_ms = crate::wasi_host::now_ms();
        let tools = tools_of(&agent).await?;
        on_tools(&tools);
        let found = toolnexus_core::find_tool(&tools, name).map_err(error)?;
        // Withheld credentials are dropped by the call itself; refused ones fail here.
        if let toolnexus_core::CredentialRoute::Refuse(refused) = found.credential_route() {
            return Err(error(refused));
        }
        let deadline = async {
            match options.deadline_ms {
                Some(ms) => crate::wasi_host::sleep_until(started_ms + ms).await,
                None => std::future::pending().await,
            }
        };
        let abort = async {
            let abort = std::pin::pin!(abort);
            let deadline = std::pin::pin!(deadline);
            futures_util::future::select(abort, deadline).await;
        };
        let mut args = serde_json::json!({ "task": task });
        for (key, id) in [
            ("taskId", &options.task_id),
            ("contextId", &options.context_id),
        ] {
            if let Some(id) = id {
                args[key] = serde_json::json!(id);
            }
        }
        let result = found
            .execute_since(&WasiTransport, &args, started_ms, abort, on_event)
            .await;
        Ok(wit::ToolResult {
            output: result.output,
            is_error: result.is_error,
            metadata: result.metadata.map(|m| m.to_string()),
        })
    })
}

impl ClientGuest for Component {
    fn agent_tools(agent: wit::Agent) -> Result<Vec<wit::Tool>, wit::Error> {
        let agent = agent_in(agent);
        wstd::runtime::block_on(async { Ok(tools_of(&agent).await?.iter().map(tool).collect()) })
    }

    fn call(
        agent: wit::Agent,
        name: String,
        task: String,
        options: CallOptions,
    ) -> Result<CallOutcome, wit::Error> {
        let mut events = Vec::new();
        let keep = options.events;
        let result = run_call(
            agent,
            &name,
            task,
            &options,
            |_| {},
            std::future::pending(),
            |e| {
                if keep {
                    events.push(event(&e));
                }
            },
        )?;
        Ok(CallOutcome { result, events })
    }

    fn call_live(
        agent: wit::Agent,
        name: String,
        task: String,
        options: CallOptions,
        listener: &CallListener,
    ) -> Result<wit::ToolResult, wit::Error> {
        let aborted = listener.aborted();
        let aborted = async move {
            wstd::runtime::AsyncPollable::new(aborted).wait_for().await;
        };
        run_call(
            agent,
            &name,
            task,
            &options,
            |tools| listener.on_tools(&tools.iter().map(tool).collect::<Vec<_>>()),
            aborted,
            |e| listener.on_event(&event(&e)),
        )
    }

    fn parse_agents_config(json: String) -> Result<Vec<wit::Agent>, wit::Error> {
        let block: serde_json::Value = serde_json::from_str(&json)
            .map_err(|e| wit::Error::Misuse(format!("the agents config is not JSON: {e}")))?;
        Ok(toolnexus_core::parse_agents_config(&block)
            .into_iter()
            .map(agent_out)
            .collect())
    }

    fn read_card(agent: wit::Agent) -> Result<wit::CardSummary, wit::Error> {
        let agent = agent_in(agent);
        wstd::runtime::block_on(async {
            let card = fetch_card(&WasiTransport, &agent).await.map_err(error)?;
            let s = card.summary(&agent.card);
            Ok(wit::CardSummary {
                name: s.name,
                description: s.description,
                version: s.version,
                provider: s.provider,
                dialect: dialect_named(s.dialect),
                dialect_reason: s.dialect_reason.to_string(),
                endpoint: s.endpoint,
                streaming: s.streaming,
                long_poll: s.long_poll,
                follow: s.follow.to_string(),
                skills: s
                    .skills
                    .into_iter()
                    .map(|k| wit::SkillSummary {
                        id: k.id,
                        name: k.name,
                        description: k.description,
                        tags: k.tags,
                    })
                    .collect(),
            })
        })
    }

    fn sanitize(name: String) -> String {
        toolnexus_core::sanitize(&name)
    }
}

fn a2a_config(config: Option<&str>) -> Result<A2aConfig, wit::Error> {
    match config {
        None => Ok(A2aConfig::default()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            wit::Error::Misuse(format!(
                "the config must be {{name?, description?, version?, provider?, skills?}}: {e}"
            ))
        }),
    }
}

fn skills(list: Vec<(String, String)>) -> Vec<Skill> {
    list.into_iter()
        .map(|(name, description)| Skill {
            name,
            description,
            content: String::new(),
        })
        .collect()
}

/// The `echo-server` resource: the core's server with the echo agent.
pub struct EchoServer {
    server: Arc<A2aServer<MemoryStore, WasiHost, EchoFulfiller>>,
}

impl GuestEchoServer for EchoServer {
    fn new(options: ServerOptions) -> Self {
        // A config that does not parse advertises the defaults (a constructor
        // cannot fail); build-agent-card reports it.
        let config = a2a_config(options.config.as_deref()).unwrap_or_default();
        let skills = skills(options.skills);
        let card = Some(match &options.url {
            Some(url) => {
                toolnexus_core::server::CardSpec::Fixed(build_agent_card(&config, &skills, url))
            }
            None => toolnexus_core::server::CardSpec::RequestOrigin { config, skills },
        });
        let server = A2aServer::new(
            toolnexus_core::server::ServerOptions {
                card,
                ..Default::default()
            },
            MemoryStore::default(),
            WasiHost::default(),
            EchoFulfiller,
        );
        EchoServer { server }
    }

    fn handle(&self, request: wit::HttpRequest) -> wit::HttpResponse {
        let server = self.server.clone();
        let response = wstd::runtime::block_on(async move {
            let handled = server.handle(toolnexus_core::HttpRequest {
                method: request.method,
                url: request.url,
                headers: request.headers,
                body: request.body,
            });
            crate::wasi_host::with_work(&server, handled).await
        });
        wit::HttpResponse {
            status: response.status,
            headers: response.headers,
            body: response.body,
        }
    }
}

impl ServerGuest for Component {
    type EchoServer = EchoServer;

    fn build_agent_card(
        config: String,
        skill_list: Vec<(String, String)>,
        url: String,
    ) -> Result<String, wit::Error> {
        let config = a2a_config(Some(&config))?;
        Ok(build_agent_card(&config, &skills(skill_list), &url).to_string())
    }
}

export!(Component);
