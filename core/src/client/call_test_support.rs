//! What the call's test files share: a call spec, running it on a scripted
//! peer in virtual time, and reading the result's metadata.

use super::{CallMachine, CallSpec};
use crate::host::driver::drive;
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
    }
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
