//! The A2A protocol core of toolnexus: Agent Cards, the outbound call, the
//! toolkit and (soon) the server function.
//!
//! **Architecture invariant:** this crate does no I/O. It never opens a
//! socket or a file, never reads the clock, the environment or a random
//! source. Everything from the outside world comes in through the
//! [`Transport`] trait (send an HTTP request, sleep, read the clock, make an
//! id, look up an environment variable), so the same code runs natively, in
//! browsers, in edge workers and under wasmtime.
//!
//! The outbound call is a plain state machine ([`call::CallMachine`]) driven by
//! one small generic driver ([`driver::drive`]).

pub mod agent;
pub mod call;
pub mod card;
pub mod config;
pub mod driver;
pub mod error;
pub mod event;
pub mod http;
pub mod json;
pub mod list;
#[cfg(feature = "server")]
pub mod llm;
pub mod part;
pub mod rpc;
pub mod sanitize;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod skills;
pub mod sse;
pub mod task;
pub mod time;
pub mod tool;
pub mod toolkit;
pub mod transport;
pub mod url;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use agent::{expand_env, Agent, DEFAULT_POLL_EVERY_MS, DEFAULT_TIMEOUT_MS};
pub use card::{AgentCard, CardSkill, CardSummary};
pub use config::parse_agents_config;
pub use error::{Error, TransportError};
pub use event::{ArtifactUpdate, StatusUpdate, StreamEvent};
pub use http::{HttpRequest, HttpResponse};
pub use part::Part;
pub use rpc::Dialect;
pub use sanitize::sanitize;
pub use task::{Task, TaskState};
pub use tool::{ToolResult, ToolSpec};
pub use toolkit::{agent_tools, A2aTool, Toolkit};
pub use transport::{BodyStream, BoxStream, MaybeSend, MaybeSync, StreamingResponse, Transport};
