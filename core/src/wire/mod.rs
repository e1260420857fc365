//! What crosses the wire: plain HTTP requests and responses, JSON-RPC and the
//! three dialects (toolnexus, A2A 0.3, A2A 1.0), Server-Sent Events, URLs.

pub(crate) mod http;
pub(crate) mod json;
pub(crate) mod rest;
pub(crate) mod rpc;
pub(crate) mod sse;
pub(crate) mod trace;
pub(crate) mod url;
