//! The agent world (`toolnexus-agent.wasm`): the core's `A2aServer` behind
//! `wasi:http/incoming-handler`, configured from wasi:cli environment
//! variables. With none set it is the offline echo agent.
//!
//! | variable | meaning |
//! |---|---|
//! | `TOOLNEXUS_NAME`, `TOOLNEXUS_DESCRIPTION`, `TOOLNEXUS_VERSION` | the card identity |
//! | `TOOLNEXUS_SKILLS` | the skills, as data: a JSON array of `{name, description, content?}` |
//! | `TOOLNEXUS_LLM` | who answers: `echo` (default), `openai` or `anthropic` |
//! | `TOOLNEXUS_LLM_BASE_URL`, `TOOLNEXUS_MODEL` | the model endpoint and name |
//! | `TOOLNEXUS_API_KEY_ENV` | the variable holding the model's key [default: OPENAI_API_KEY or ANTHROPIC_API_KEY] |
//! | `TOOLNEXUS_STORE` | `memory` (default: one instance's life) or `file:DIR` (a preopened dir, shared by instances; see [`DirStore`]) |
//! | `TOOLNEXUS_CORS_ORIGIN` | the origin(s) browsers may call from: `*`, one origin, or several separated by commas [default: none] |
//! | `TOOLNEXUS_PUBLIC_URL` | the URL the card advertises [default: each request's origin] |
//! | `TOOLNEXUS_API_KEYS` | API keys, each naming its caller: `alice=KEY1,bob=KEY2` |
//! | `TOOLNEXUS_API_KEY_HEADER` | the header that carries them [default: `X-API-Key`] |
//! | `TOOLNEXUS_JWT_SECRET` | the HS256 secret of bearer JWTs (the caller is their `sub` with their `iss`) |
//! | `TOOLNEXUS_JWT_ISSUER`, `TOOLNEXUS_JWT_AUDIENCE` | the `iss` and `aud` those JWTs must have |
//!
//! With API keys or a JWT secret set, every request but the public card
//! needs a credential (401 otherwise), and each caller sees only its own tasks.

use crate::dir_store::DirStore;
use crate::wasi_host::{
    forbidden_header, header_pairs, read_capped, MemoryStore, WasiHost, WasiTransport,
};
use futures_util::StreamExt;
use std::sync::Arc;
use toolnexus_core::llm::{LlmConfig, LlmStyle};
use toolnexus_core::server::auth::{ApiKeys, AuthConfig, JwtConfig, KeyLocation};
use toolnexus_core::server::{
    build_agent_card, A2aConfig, A2aServer, Admission, BodyRefusal, CardSpec, CorsOrigin,
    EchoFulfiller, Fulfiller, HostStore, LlmFulfiller, Reply, ServerOptions,
};
use toolnexus_core::skills::{Skill, SkillSet};
use toolnexus_core::{HttpRequest, HttpResponse, Toolkit};
use wstd::http::{Body, Request, Response};

/// Tasks in core's memory store (one instance's life), or in a preopened
/// folder shared by the instances a wasi:http host starts per request
/// ([`DirStore`]: core's store contract), through core's one store dispatch.
pub type AgentStore = HostStore<MemoryStore, DirStore>;

type Server = A2aServer<AgentStore, WasiHost, Arc<dyn Fulfiller>>;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The server the environment describes, or what is wrong with it.
pub fn from_env() -> Result<Arc<Server>, String> {
    let config = A2aConfig {
        name: env("TOOLNEXUS_NAME"),
        description: env("TOOLNEXUS_DESCRIPTION"),
        version: env("TOOLNEXUS_VERSION"),
        // `jsonrpc,rest` (the default), `jsonrpc` or `rest`.
        bindings: env("TOOLNEXUS_BINDINGS")
            .map(|b| {
                toolnexus_core::server::rest::Bindings::parse(&b)
                    .map(|_| b.split(',').map(|s| s.trim().to_string()).collect())
                    .map_err(|e| format!("TOOLNEXUS_BINDINGS: {e}"))
            })
            .transpose()?,
        tenant: env("TOOLNEXUS_TENANT"),
        ..Default::default()
    };
    let skills: Vec<Skill> = match env("TOOLNEXUS_SKILLS") {
        None => Vec::new(),
        Some(text) => serde_json::from_str(&text).map_err(|e| {
            format!("TOOLNEXUS_SKILLS must be a JSON array of {{name, description, content?}}: {e}")
        })?,
    };
    let store = match env("TOOLNEXUS_STORE").as_deref() {
        None | Some("memory") => HostStore::Memory(MemoryStore::default()),
        Some(s) if s.starts_with("file:") => HostStore::Host(DirStore::open(&s[5..])?),
        Some(other) => {
            return Err(format!(
                "TOOLNEXUS_STORE must be memory or file:DIR, not {other:?}"
            ))
        }
    };
    let style = match env("TOOLNEXUS_LLM").as_deref() {
        None | Some("echo") => None,
        Some("openai") => Some(LlmStyle::OpenAi),
        Some("anthropic") => Some(LlmStyle::Anthropic),
        Some(other) => {
            return Err(format!(
                "TOOLNEXUS_LLM must be echo, openai or anthropic, not {other:?}"
            ))
        }
    };
    let fulfiller: Arc<dyn Fulfiller> = match style {
        None => Arc::new(EchoFulfiller),
        Some(style) => {
            let (base, key_var) = match style {
                LlmStyle::OpenAi => ("https://api.openai.com/v1", "OPENAI_API_KEY"),
                LlmStyle::Anthropic => ("https://api.anthropic.com", "ANTHROPIC_API_KEY"),
            };
            let model = env("TOOLNEXUS_MODEL")
                .ok_or("TOOLNEXUS_MODEL is required with TOOLNEXUS_LLM=openai or anthropic")?;
            let mut llm = LlmConfig::new(
                env("TOOLNEXUS_LLM_BASE_URL").unwrap_or_else(|| base.to_string()),
                style,
                model,
            );
            llm.api_key = env(&env("TOOLNEXUS_API_KEY_ENV").unwrap_or_else(|| key_var.into()));
            let mut toolkit = Toolkit::new(WasiTransport);
            let mut set = SkillSet::new();
            for skill in skills.iter().cloned() {
                set.add(skill);
            }
            toolkit.add_skills(set);
            // Nothing crosses threads in a component.
            #[allow(clippy::arc_with_non_send_sync)]
            let f: Arc<dyn Fulfiller> = Arc::new(LlmFulfiller {
                toolkit: Arc::new(toolkit),
                llm,
            });
            f
        }
    };
    let auth = auth_from_env()?;
    let cors_origin = match env("TOOLNEXUS_CORS_ORIGIN") {
        None => None,
        Some(list) => {
            let list: Vec<&str> = list.split(',').map(str::trim).collect();
            CorsOrigin::list(&list).map_err(|e| format!("TOOLNEXUS_CORS_ORIGIN: {e}"))?
        }
    };
    let host = WasiHost {
        jwt: auth.as_ref().and_then(|a| a.jwt.clone()),
    };
    let card = match env("TOOLNEXUS_PUBLIC_URL") {
        Some(url) => CardSpec::Fixed(build_agent_card(&config, &skills, &url)),
        None => CardSpec::RequestOrigin { config, skills },
    };
    Ok(A2aServer::new(
        ServerOptions {
            card: Some(card),
            auth,
            cors_origin,
            ..Default::default()
        },
        store,
        host,
        fulfiller,
    ))
}

/// The verifiers the environment names (see the module's table), or none.
fn auth_from_env() -> Result<Option<AuthConfig>, String> {
    let api_keys = match env("TOOLNEXUS_API_KEYS") {
        None => None,
        Some(list) => Some(ApiKeys {
            location: KeyLocation::Header,
            name: env("TOOLNEXUS_API_KEY_HEADER").unwrap_or_else(|| "X-API-Key".into()),
            keys: api_key_list(&list)?,
        }),
    };
    let jwt = env("TOOLNEXUS_JWT_SECRET").map(|_| JwtConfig {
        issuer: env("TOOLNEXUS_JWT_ISSUER"),
        audience: env("TOOLNEXUS_JWT_AUDIENCE"),
        algorithms: vec!["HS256".into()],
        secret_env: Some("TOOLNEXUS_JWT_SECRET".into()),
        leeway_seconds: 30,
        ..Default::default()
    });
    if api_keys.is_none() && jwt.is_none() {
        for lone in [
            "TOOLNEXUS_API_KEY_HEADER",
            "TOOLNEXUS_JWT_ISSUER",
            "TOOLNEXUS_JWT_AUDIENCE",
        ] {
            if env(lone).is_some() {
                return Err(format!(
                    "{lone} is set but no verifier is: set TOOLNEXUS_API_KEYS or TOOLNEXUS_JWT_SECRET"
                ));
            }
        }
        return Ok(None);
    }
    Ok(Some(AuthConfig {
        api_keys,
        jwt,
        custom: false,
    }))
}

/// `alice=KEY1,bob=KEY2` as (caller, key) pairs. Errors name the entry by
/// its position and caller, never by its key.
fn api_key_list(list: &str) -> Result<Vec<(String, String)>, String> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for (i, entry) in list.split(',').enumerate() {
        let entry = entry.trim();
        let (who, key) = entry.split_once('=').unwrap_or((entry, ""));
        let (who, key) = (who.trim(), key.trim());
        if who.is_empty() || key.is_empty() {
            return Err(format!(
                "TOOLNEXUS_API_KEYS entry {} must be CALLER=KEY (entries separated by commas)",
                i + 1
            ));
        }
        if keys.iter().any(|(_, k)| k == key) {
            return Err(format!(
                "TOOLNEXUS_API_KEYS gives {who} a key another caller has"
            ));
        }
        keys.push((who.to_string(), key.to_string()));
    }
    Ok(keys)
}

/// A stream body for wstd, which asks for `Send` bodies. A wasm32-wasip2
/// component has exactly one thread, so nothing is ever sent anywhere.
struct OneThread<T>(T);
// SAFETY: wasm32-wasip2 has no threads; the value never leaves the one there is.
unsafe impl<T> Send for OneThread<T> {}

impl<S: futures_util::Stream + Unpin> futures_util::Stream for OneThread<S> {
    type Item = S::Item;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        self.0.poll_next_unpin(cx)
    }
}

fn response(head: HttpResponse, body: Body) -> Response<Body> {
    let mut builder = Response::builder().status(head.status);
    for (k, v) in &head.headers {
        if !forbidden_header(k) {
            builder = builder.header(k.as_str(), v.as_str());
        }
    }
    builder.body(body).unwrap_or_else(|_| {
        let mut r = Response::new(Body::from("bad response head"));
        *r.status_mut() = wstd::http::StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

/// One request, start to end: core's admission (allowed hosts, the body
/// limit, CORS on refusals), the body read up to its limit, core's
/// `serve`, its answer as the response.
pub async fn handle(server: &Arc<Server>, request: Request<Body>) -> Response<Body> {
    let (head, body) = request.into_parts();
    let headers = header_pairs(&head.headers);
    let limit = match server.admit(&headers) {
        Admission::Read { limit } => limit,
        Admission::Refuse(r) => return full(r),
    };
    let bytes = match read_capped(body, limit).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return full(server.refuse(BodyRefusal::TooLarge)),
        Err(e) => {
            let mut r = HttpResponse::json(400, Vec::new());
            r.body = format!("cannot read the request body: {e:#}").into_bytes();
            server.add_cors(&mut r);
            return full(r);
        }
    };
    let req = HttpRequest {
        method: head.method.as_str().to_string(),
        url: head.uri.to_string(),
        headers,
        body: bytes,
    };
    match crate::wasi_host::with_work(server, server.serve(req)).await {
        Reply::Full(r) => full(r),
        Reply::Stream { head, body } => {
            let frames = OneThread(body.map(wstd::http::body::Bytes::from));
            response(head, Body::from_stream(frames))
        }
    }
}

fn full(r: HttpResponse) -> Response<Body> {
    let b = Body::from(r.body.clone());
    response(r, b)
}
