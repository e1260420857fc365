//! toolnexus A2A as a WebAssembly component (wasm32-wasip2): the third
//! adapter of `toolnexus-core`, beside the wasm-bindgen npm package and the
//! native host. The WIT package `toolnexus:a2a` (wit/a2a.wit) has two worlds:
//! `library` (this crate's cdylib, feature `library`) and `agent` (the
//! `toolnexus-agent` binary, feature `agent`).
//!
//! Everything is for `wasm32-wasip2` only: on other targets the crate is empty.

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
pub mod wasi_host;

#[cfg(all(target_arch = "wasm32", target_os = "wasi", feature = "library"))]
mod library;

#[cfg(all(target_arch = "wasm32", target_os = "wasi", feature = "agent"))]
pub mod agent;

#[cfg(all(target_arch = "wasm32", target_os = "wasi", feature = "agent"))]
pub mod dir_store;
