//! The A2A protocol core of toolnexus: Agent Cards, the outbound call, the
//! toolkit, the LLM tool loop and the server function.
//!
//! **Architecture invariant:** this crate does no I/O. It never opens a
//! socket or a file, never reads the clock, the environment or a random
//! source. Everything from the outside world comes in through the
//! [`Transport`] trait (send an HTTP request, sleep, read the clock, make an
//! id, look up an environment variable) or, for the server,
//! [`server::ServerHost`] and [`server::TaskStore`], so the same code runs
//! natively, in browsers, in edge workers and under wasmtime.
//!
//! Every protocol flow is a machine of one shape ([`Machine`]): card
//! resolution ([`CardMachine`]), the outbound call ([`CallMachine`]), the LLM
//! tool loop ([`llm::RunMachine`]), run by one generic driver ([`drive`]).
//!
//! The folders follow the architecture; the modules are private and what a
//! host or a user needs is re-exported here:
//!
//! | folder | what |
//! |---|---|
//! | `model/` | tasks, messages, stream events, tools and results, the agent descriptor |
//! | `wire/` | HTTP values, JSON-RPC and the dialects, SSE, URLs |
//! | `client/` | the Agent Card, the call machine, `agent_tools`, the `Toolkit` |
//! | `host/` | the `Transport` trait and the driver |
//! | [`llm`] | the OpenAI/Anthropic tool loop (feature `server`) |
//! | [`skills`] | skills and the `skill` tool (feature `server`); SKILL.md texts (feature `skill-md`) |
//! | [`server`] | the server function, its task machine and stores (feature `server`) |

mod client;
mod error;
mod host;
mod model;
mod wire;

#[cfg(feature = "server")]
pub mod llm;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod skills;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod fuzz_tests;

#[cfg(not(feature = "oauth2"))]
pub use client::auth::NO_OAUTH2;
pub use client::auth::{
    credentials_may_go_to, read_requirements, read_schemes, read_token_response,
    requires_credentials, token, token_url_allowed, Acquire, Auth, AuthPlan, KeyLocation,
    OAuth2Client, Placement, PlanCredential, Requirement, SecurityScheme, SharedTokenCell, Token,
    TokenCache, TokenCell, TokenEndpoint, TokenMachine, TokenSource,
};
pub use client::call::{CallAuth, CallMachine, CallSpec, TokenRequest};
pub use client::card::{
    AgentCard, CardInterface, CardMachine, CardSkill, CardSummary, SchemeSummary, SkillSummary,
    LONG_POLL_EXTENSION,
};
pub use client::config::parse_agents_config;
pub use client::list::{list_tasks, ListFilter, TaskList};
pub use client::sanitize::sanitize;
#[cfg(feature = "server")]
pub use client::toolkit::ToolCallHook;
pub use client::toolkit::{
    agent_tools, card_tools, fetch_card, find_tool, find_tool_by, route as credential_route_for,
    A2aTool, AgentFailure, AgentTokens, CredentialRoute, HostFn, Toolkit,
};
pub use error::{Cause, Error, Reason, TransportError};
pub use host::driver::{drive, drive_with_events, drive_with_work, Machine, ResponseHead, Step};
#[cfg(target_arch = "wasm32")]
pub use host::lock::CellLock;
pub use host::lock::Lock;
pub use host::transport::{
    BodyStream, BoxFuture, BoxStream, HostBase, MaybeSend, MaybeSync, StreamingResponse, Transport,
};
pub use model::agent::{
    expand_env, Agent, DEFAULT_MAX_CARD_BYTES, DEFAULT_MAX_SKILLS, DEFAULT_POLL_EVERY_MS,
    DEFAULT_TIMEOUT_MS,
};
pub use model::event::{ArtifactUpdate, ShapedEvent, StatusUpdate, StreamEvent};
pub use model::part::Part;
pub use model::task::{
    Artifact, Lease, Message, Revision, Role, SendResult, Shape, Task, TaskState,
};
pub use model::time::{format_rfc3339, millis, parse_rfc3339};
pub use model::tool::{ToolResult, ToolSource, ToolSpec};
pub use wire::http::{find_str, parse_u64, HttpRequest, HttpResponse};
pub use wire::json::{object as json_object, quoted, text as json_text};
pub use wire::rest::Binding;
pub use wire::rpc::{Dialect, MessageRefs};
pub use wire::stable_hash;
pub use wire::trace::{SpanHook, SpanKind, SpanRecord, TraceContext, TRACEPARENT, TRACESTATE};
pub use wire::url::{origin as url_origin, redact as redact_url};

/// The JSON-RPC and A2A error codes, one table for both halves: the client
/// reads them in a peer's error (`Error::Rpc`), the server sends them.
pub mod codes {
    pub use crate::wire::rpc::{
        EXTENDED_CARD_NOT_CONFIGURED, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
        METHOD_NOT_FOUND, PARSE_ERROR, PUSH_NOTIFICATION_NOT_SUPPORTED, TASK_NOT_CANCELABLE,
        TASK_NOT_FOUND, UNSUPPORTED_OPERATION, VERSION_NOT_SUPPORTED,
    };
}
