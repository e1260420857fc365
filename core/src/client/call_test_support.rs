//! What the call's test files share: a call spec, running it on a scripted
//! peer in virtual time, and reading the result's metadata.

use super::{CallMachine, CallSpec};
use crate::model::tool::ToolResult;
use crate::testing::{block_on, Reply, ScriptedPeer};
use crate::wire::rpc::Dialect;
use serde_json::Value;

/// A call to agent `planner` at `http://peer/` in `dialect`: no headers,
/// 5 s timeout, polls every 100 ms, no long-poll, no streaming.
pub fn spec(dialect: Dialect) -> CallSpec {
    CallSpec {
        agent: "planner".into(),
        endpoint: "http://peer/".into(),
        dialect,
        headers: vec![],
        timeout_ms: 5_000,
        poll_every_ms: 100,
        message_id: "m1".into(),
        text: "ship the release".into(),
        long_poll: false,
        streaming: false,
        started_ms: None,
        jitter_seed: 7,
        auth: None,
    }
}

/// Drives a call that asks for no token (a request for one fails it).
pub async fn drive<T: crate::Transport>(
    m: &mut CallMachine,
    transport: &T,
    abort: impl std::future::Future<Output = ()>,
) -> ToolResult {
    drive_with_events(m, transport, abort, |_| {}).await
}

/// [`drive`] handing each event to `on_event`.
pub async fn drive_with_events<T: crate::Transport>(
    m: &mut CallMachine,
    transport: &T,
    abort: impl std::future::Future<Output = ()>,
    on_event: impl FnMut(crate::StreamEvent),
) -> ToolResult {
    let no_tokens =
        |_| std::future::ready(Err(crate::Error::Misuse("no tokens in this test".into())));
    crate::host::driver::drive_with_work(m, transport, abort, on_event, no_tokens).await
}

/// Runs the call to its result against `peer`, never aborted.
pub fn run_with(peer: &ScriptedPeer, spec: CallSpec) -> ToolResult {
    block_on(drive(
        &mut CallMachine::new(spec),
        peer,
        std::future::pending(),
    ))
}

/// The peer answers with this JSON-RPC `result`.
pub fn ok(v: Value) -> Reply {
    Reply::Result(v)
}

/// The result's metadata, which every call result carries.
pub fn meta(r: &ToolResult) -> &Value {
    r.metadata.as_ref().expect("metadata on every result")
}
