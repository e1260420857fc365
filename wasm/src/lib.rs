//! toolnexus for JavaScript: the wasm-bindgen adapter behind the npm package
//! `toolnexus-wasm` (browsers, edge workers on workerd, Node.js).
//!
//! **Architecture invariant:** no protocol logic lives here. This crate
//! converts JS values, implements the core's `Transport` over the global
//! `fetch` and `setTimeout` ([`transport`]), maps `AbortSignal`s ([`abort`]),
//! `Request`/`Response` and `ctx.waitUntil` ([`handler`]); everything else is
//! `toolnexus-core`. The public JS names are camelCase; the TypeScript types
//! are hand-written in `wasm/js/*.d.ts`.
//!
//! Code map:
//! - [`convert`]: JS values <-> JSON, `Error`s with a `kind`, option readers.
//! - [`transport`]: `JsTransport` (fetch, timers, clock, ids, `process.env`).
//! - [`agent`]: `agent`, `parseAgentsConfig`, `agentTools` and the `Tool` class.
//! - [`toolkit`]: `createToolkit` and the `Toolkit` class.
//! - [`client`], [`handler`], [`store`], [`skills`] (feature `server`):
//!   `createClient`, `createA2AHandler`, `buildAgentCard`.
//! - [`skill_md`] (feature `skill-md`, the `toolnexus-wasm/skills` entry):
//!   `parseSkillMd`.
//!
//! The whole crate is empty on non-wasm targets, so workspace-wide native
//! builds never compile the bindings.
#![cfg(target_arch = "wasm32")]

#[cfg(feature = "client")]
mod abort;
#[cfg(feature = "client")]
mod agent;
#[cfg(feature = "server")]
mod client;
#[cfg(feature = "client")]
mod credentials;
// The skills entry alone uses only its error constructor.
#[cfg(feature = "server")]
mod auth;
#[cfg(feature = "server")]
mod bound;
#[cfg_attr(not(feature = "client"), allow(dead_code))]
mod convert;
#[cfg(feature = "server")]
mod handler;
// Only the full build looks handles up (`run({toolkit})`, `createA2AHandler`).
#[cfg(feature = "client")]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
mod handles;
#[cfg(feature = "skill-md")]
mod skill_md;
#[cfg(feature = "server")]
mod skills;
#[cfg(feature = "server")]
mod store;
#[cfg(feature = "client")]
mod toolkit;
#[cfg(feature = "client")]
mod transport;

use wasm_bindgen::prelude::*;

/// The allocator: talc's WebAssembly configuration instead of the default
/// dlmalloc. The same job (it grows linear memory with `memory.grow` as
/// needed) in about 7 KB less of the `.wasm` (~3 KB gzip), and faster.
#[cfg(not(target_feature = "atomics"))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

/// Runs when the module is instantiated: panics (bugs) are logged with their
/// message before the instance traps.
#[wasm_bindgen(start)]
fn start() {
    std::panic::set_hook(Box::new(|info| {
        convert::console_error(&format!("toolnexus-wasm panicked: {info}"));
    }));
}

/// `sanitize(s)`: every character outside `[a-zA-Z0-9_-]` becomes `_`.
#[cfg(feature = "client")]
#[wasm_bindgen]
pub fn sanitize(s: &str) -> JsValue {
    // A `JsValue` (a string, as the .d.ts says): no return shim copying it out.
    toolnexus_core::sanitize(s).into()
}
