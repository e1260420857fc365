//! W3C Trace Context (`traceparent`, `tracestate`): read, checked and
//! written, with no I/O. New span ids are made from the host's ids
//! ([`crate::HostBase::new_id`]), never from a random source of core's.
//!
//! One trace follows a task across agents: a server takes the caller's
//! context from the request that makes a task, keeps it with the task (its
//! stored form, never the wire), and every request that work sends carries
//! it on: each model call as a span of its own ([`crate::llm::LlmConfig`]'s
//! `trace`), each A2A tool call as one ([`crate::A2aTool::execute_traced`]),
//! each webhook delivery as the task's.

use crate::wire::http::find_header;

/// The header that names the trace and the caller's span.
pub const TRACEPARENT: &str = "traceparent";
/// The header of vendor-specific trace data, passed on as it came.
pub const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` passed on (W3C: at least 512 characters must be
/// propagated; longer ones may be dropped).
const MAX_TRACESTATE: usize = 512;

/// One position in a trace: the trace, the span that is the parent of what
/// comes next, the flags (bit 0: sampled), and the vendors' `tracestate`.
#[derive(Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: [u8; 16],
    /// The span whose children the next requests are (`parent-id` on the wire).
    pub span_id: [u8; 8],
    pub flags: u8,
    pub state: Option<String>,
}

/// Shown as its `traceparent` (a derived `Debug` of the byte arrays would
/// cost the npm `.wasm` the slice formatter).
impl core::fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.traceparent())
    }
}

/// `s` without the spaces and tabs around it (OWS), searched on bytes.
fn trim_ows(s: &str) -> &str {
    let ows = |c: &u8| *c == b' ' || *c == b'\t';
    let b = s.as_bytes();
    let start = b.iter().position(|c| !ows(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ows(c)).map_or(start, |i| i + 1);
    s.get(start..end).unwrap_or_default()
}

impl TraceContext {
    /// Reads a `traceparent` value (and the `tracestate` beside it).
    /// `None` for a value the W3C rules make invalid: not lowercase hex, an
    /// all-zero trace or span id, version `ff`, or a version-00 value of
    /// another length. A later version is read by its first four fields.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let b = trim_ows(traceparent).as_bytes();
        let version = hex_byte(b.get(0..2)?)?;
        let fits = match version {
            0xff => false,
            0 => b.len() == 55,
            // A later version may append fields after a dash.
            _ => b.len() == 55 || b.get(55) == Some(&b'-'),
        };
        let dash = |i: usize| b.get(i) == Some(&b'-');
        if !fits || !dash(2) || !dash(35) || !dash(52) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex_into(b.get(3..35)?, &mut trace_id)?;
        hex_into(b.get(36..52)?, &mut span_id)?;
        let flags = hex_byte(b.get(53..55)?)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let state = tracestate
            .map(trim_ows)
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE)
            .filter(|s| s.bytes().all(|c| (0x20..0x7f).contains(&c)))
            .map(str::to_string);
        Some(TraceContext {
            trace_id,
            span_id,
            // Version 00 defines bits 0 (sampled) and 1 (random trace id).
            flags: if version == 0 { flags & 0x03 } else { flags },
            state,
        })
    }

    /// The context a request carries in its headers, if it carries a valid
    /// one.
    pub fn from_headers(headers: &[(String, String)]) -> Option<TraceContext> {
        let parent = find_header(headers, TRACEPARENT)?;
        TraceContext::parse(parent, find_header(headers, TRACESTATE))
    }

    /// A new trace, sampled, whose first span is made from the host id `id`
    /// (a trace started where none came in).
    pub fn root(id: &str) -> TraceContext {
        let a = mix(id, 0x9e37_79b9_7f4a_7c15);
        let b = mix(id, 0xc2b2_ae3d_27d4_eb4f);
        let mut trace_id = [0u8; 16];
        trace_id[..8].copy_from_slice(&a.to_be_bytes());
        trace_id[8..].copy_from_slice(&b.to_be_bytes());
        TraceContext {
            trace_id,
            span_id: span_id(id),
            flags: 0x01,
            state: None,
        }
    }

    /// A span of this trace whose parent is this one, its id made from the
    /// host id `id`: what a new piece of work (a task, a request) is.
    pub fn child(&self, id: &str) -> TraceContext {
        TraceContext {
            span_id: span_id(id),
            ..self.clone()
        }
    }

    /// The `n`th span under this one, its id made from this span's and `n`
    /// (the turns of one model run): no host id needed, distinct for each `n`.
    pub fn nth_child(&self, n: u32) -> TraceContext {
        let seed =
            u64::from_be_bytes(self.span_id) ^ u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        TraceContext {
            span_id: finish(seed).max(1).to_be_bytes(),
            ..self.clone()
        }
    }

    /// The `traceparent` value (version 00).
    pub fn traceparent(&self) -> String {
        let mut out = String::with_capacity(55);
        out.push_str("00-");
        push_hex(&mut out, &self.trace_id);
        out.push('-');
        push_hex(&mut out, &self.span_id);
        out.push('-');
        push_hex(&mut out, &[self.flags]);
        out
    }

    /// The trace id as 32 hex digits.
    pub fn trace_id_hex(&self) -> String {
        let mut out = String::with_capacity(32);
        push_hex(&mut out, &self.trace_id);
        out
    }

    /// Puts this context on `headers` (replacing any `traceparent` and
    /// `tracestate` there).
    pub fn put_on(&self, headers: &mut Vec<(String, String)>) {
        headers.retain(|(k, _)| {
            !k.eq_ignore_ascii_case(TRACEPARENT) && !k.eq_ignore_ascii_case(TRACESTATE)
        });
        headers.push((TRACEPARENT.into(), self.traceparent()));
        if let Some(state) = &self.state {
            headers.push((TRACESTATE.into(), state.clone()));
        }
    }
}

/// A span core saw happen, for the host to export (core has no exporter
/// and no clock of its own): the native host turns it into an
/// OpenTelemetry span, the npm package hands it to the JS `onSpan` hook.
/// Every span core records is built in this module, with the attribute
/// names of the draft A2A and GenAI semantic conventions:
///
/// - `a2a.server {method}`: a request served (kind server), the child of
///   the caller's `traceparent` or the root of a new trace
///   ([`crate::server::ServerHost::span_hook`]);
/// - `a2a.task`: one turn of a task, created → each state (its `events`),
///   the child of the request that made or continued it;
/// - `chat {model}`: a model call (kind client), the `n`th child of the task;
/// - `execute_tool {tool}`: a tool call, local (a skill, a host function)
///   or remote (an A2A agent), the child of the model call that asked;
/// - `a2a.client {method}`: each request of an A2A call (send, stream,
///   poll, cancel; `card` for a card fetch), kind client, the child of the
///   tool call: its id is the `traceparent` the peer sees.
///
/// Nothing is built when no hook is set.
#[derive(Clone)]
pub struct SpanRecord {
    pub name: String,
    pub kind: SpanKind,
    /// The trace, and this span's own id.
    pub context: TraceContext,
    /// The parent span's id (in the same trace; all zero for a root).
    pub parent_span_id: [u8; 8],
    /// Start and end on the transport's clock ([`crate::Transport::now_ms`]).
    pub start_ms: u64,
    pub end_ms: u64,
    /// OpenTelemetry attributes, as strings.
    pub attributes: Vec<(&'static str, String)>,
    /// A task's states as they came (`a2a.task.state` events): when, which.
    pub events: Vec<(u64, &'static str)>,
    /// Whether the work failed.
    pub error: bool,
}

/// What a span is to OpenTelemetry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal,
    Server,
    Client,
}

impl SpanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Internal => "internal",
            SpanKind::Server => "server",
            SpanKind::Client => "client",
        }
    }
}

/// Where core hands the spans it records ([`SpanRecord`]), for the host to
/// export: a toolkit's ([`crate::Toolkit::with_span_hook`]: model calls,
/// tool calls, A2A requests) and a server host's
/// ([`crate::server::ServerHost::span_hook`]: requests, task turns).
#[cfg(not(target_arch = "wasm32"))]
pub type SpanHook = std::sync::Arc<dyn Fn(&SpanRecord) + Send + Sync>;
/// Where core hands the spans it records.
#[cfg(target_arch = "wasm32")]
pub type SpanHook = std::sync::Arc<dyn Fn(&SpanRecord)>;

impl SpanRecord {
    #[cfg(feature = "spans")]
    /// A span of `context` under `parent`, started at `start_ms` (ended
    /// there too until [`SpanRecord::end`]).
    pub(crate) fn new(
        name: String,
        kind: SpanKind,
        context: TraceContext,
        parent: [u8; 8],
        start_ms: u64,
    ) -> SpanRecord {
        SpanRecord {
            name,
            kind,
            context,
            parent_span_id: parent,
            start_ms,
            end_ms: start_ms,
            attributes: Vec::new(),
            events: Vec::new(),
            error: false,
        }
    }

    #[cfg(feature = "spans")]
    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<String>) {
        self.attributes.push((key, value.into()));
    }

    #[cfg(feature = "spans")]
    /// Ends the span at `end_ms` and hands it to `hook`.
    pub(crate) fn end(mut self, hook: &SpanHook, end_ms: u64) {
        self.end_ms = end_ms;
        hook(&self);
    }

    /// This span's id and its parent's, as 16 hex digits each.
    pub fn ids_hex(&self) -> (String, String) {
        let mut own = String::with_capacity(16);
        push_hex(&mut own, &self.context.span_id);
        let mut parent = String::with_capacity(16);
        push_hex(&mut parent, &self.parent_span_id);
        (own, parent)
    }
}

#[cfg(feature = "spans")]
/// `prefix` and `rest` as one name, without the formatter.
pub(crate) fn joined(prefix: &str, rest: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + rest.len());
    out.push_str(prefix);
    out.push_str(rest);
    out
}

#[cfg(feature = "spans")]
/// `n` in decimal (not `to_string`, whose integer fast paths are code of
/// their own for each type).
pub(crate) fn decimal(mut n: u64) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[at..].iter().map(|&d| char::from(d)).collect()
}

#[cfg(feature = "spans")]
/// The `method` of a JSON-RPC request body core wrote (`"method":"…"`
/// comes before the params, and a string's own quotes are escaped).
fn rpc_method(body: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = text.get(crate::wire::http::find_str(text, "\"method\":\"")? + 10..)?;
    rest.get(..rest.find('"')?)
}

#[cfg(feature = "spans")]
/// The JSON-RPC error code of an answer, if it is an error: the number
/// after its `"error"` member's `"code":` (read without a JSON parser).
/// A quoted `"error"` or `"result"` inside a string is escaped, so each is
/// a key; an answer is an error when `"error"` comes before any `"result"`
/// (a result may hold objects with an `"error"` key of their own).
pub(crate) fn rpc_error(body: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(body).ok()?;
    let at = crate::wire::http::find_str(text, "\"error\"")?;
    if crate::wire::http::find_str(text, "\"result\"").is_some_and(|r| r < at) {
        return None;
    }
    let error = text.get(at..)?;
    let code = error.get(crate::wire::http::find_str(error, "\"code\"")? + 6..)?;
    let code = code.trim_start_matches([' ', ':']);
    let end = code
        .bytes()
        .position(|c| !(c == b'-' || c.is_ascii_digit()))
        .unwrap_or(code.len());
    code.get(..end).filter(|c| !c.is_empty())
}

#[cfg(feature = "spans")]
/// The `a2a.client` spans of one A2A call's requests, children of the call's
/// span: each request carries its own span as the peer's parent.
pub(crate) struct CallSpans<'a> {
    pub(crate) hook: &'a SpanHook,
    /// The call's span.
    pub(crate) call: TraceContext,
    sent: u32,
    open: Option<SpanRecord>,
}

#[cfg(feature = "spans")]
impl<'a> CallSpans<'a> {
    pub(crate) fn new(hook: &'a SpanHook, call: TraceContext) -> CallSpans<'a> {
        CallSpans {
            hook,
            call,
            sent: 0,
            open: None,
        }
    }
}

#[cfg(feature = "spans")]
impl crate::host::driver::Watch for CallSpans<'_> {
    fn sent(&mut self, req: &mut crate::HttpRequest, now_ms: u64) {
        self.sent += 1;
        let context = self.call.nth_child(self.sent);
        context.put_on(&mut req.headers);
        let method = if req.method == "POST" {
            rpc_method(&req.body)
        } else {
            None
        };
        let op = match method {
            Some(m) => m,
            None if crate::wire::http::find_str(&req.url, "/.well-known/").is_some() => "card",
            None => req.method.as_str(),
        };
        let mut span = SpanRecord::new(
            joined("a2a.client ", op),
            SpanKind::Client,
            context,
            self.call.span_id,
            now_ms,
        );
        if let Some(m) = method {
            span.set("rpc.system", "jsonrpc");
            span.set("rpc.method", m);
        }
        span.set("http.request.method", req.method.as_str());
        span.set("server.address", crate::wire::http::authority(&req.url));
        self.open = Some(span);
    }

    fn answered(&mut self, now_ms: u64, status: u16, body: &[u8]) {
        let Some(mut span) = self.open.take() else {
            return;
        };
        if status == 0 {
            span.set("error.type", "transport");
            span.error = true;
        } else {
            span.set("http.response.status_code", decimal(status.into()));
            if status >= 400 {
                span.set("error.type", decimal(status.into()));
                span.error = true;
            } else if let Some(code) = rpc_error(body) {
                span.set("rpc.jsonrpc.error_code", code);
                span.error = true;
            }
        }
        span.end(self.hook, now_ms);
    }
}

/// A span id from a host id: FNV-1a of its bytes, finished with
/// SplitMix64's mixer (ids that differ in one character differ in every
/// bit); never zero.
fn span_id(id: &str) -> [u8; 8] {
    mix(id, 0).max(1).to_be_bytes()
}

fn mix(id: &str, seed: u64) -> u64 {
    finish(super::fnv1a(super::FNV_OFFSET ^ seed, id.as_bytes()))
}

/// SplitMix64's finaliser.
fn finish(mut h: u64) -> u64 {
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
}

/// One lowercase hex digit (W3C: uppercase is invalid).
fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn hex_byte(two: &[u8]) -> Option<u8> {
    Some(nibble(*two.first()?)? << 4 | nibble(*two.get(1)?)?)
}

fn hex_into(text: &[u8], out: &mut [u8]) -> Option<()> {
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = hex_byte(text.get(2 * i..2 * i + 2)?)?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    #[cfg(feature = "spans")]
    fn an_error_code_is_read_from_an_error_answer_only() {
        let error = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no such task"}}"#;
        assert_eq!(rpc_error(error), Some("-32001"));
        let first = br#"{"error": {"code": -32602, "data": {"result": 1}}, "id": "x"}"#;
        assert_eq!(rpc_error(first), Some("-32602"));
        // A result whose data has an "error" member is no error.
        let result = br#"{"jsonrpc":"2.0","id":1,"result":{"kind":"task","artifacts":[{"parts":[{"data":{"error":{"code":5}}}]}]}}"#;
        assert_eq!(rpc_error(result), None);
        assert_eq!(
            rpc_error(br#"{"jsonrpc":"2.0","id":"error","result":{}}"#),
            None
        );
        assert_eq!(rpc_error(b"not json"), None);
    }

    #[test]
    fn a_valid_traceparent_reads_and_writes_back_the_same() {
        let t = TraceContext::parse(GOOD, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"))
            .expect("valid");
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.flags, 1);
        assert_eq!(t.traceparent(), GOOD);
        let mut headers = vec![("TraceParent".to_string(), "old".to_string())];
        t.put_on(&mut headers);
        assert_eq!(
            headers,
            [
                ("traceparent".to_string(), GOOD.to_string()),
                (
                    "tracestate".to_string(),
                    "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE".to_string()
                )
            ]
        );
        assert_eq!(TraceContext::from_headers(&headers), Some(t));
    }

    #[test]
    fn invalid_traceparents_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0e47é6-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad}");
        }
        // A later version is read by its first fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future";
        assert!(TraceContext::parse(later, None).is_some());
        // A tracestate too long, or not printable, is dropped, not the trace.
        let long = "k=".to_string() + &"v".repeat(600);
        let t = TraceContext::parse(GOOD, Some(&long)).expect("valid");
        assert_eq!(t.state, None);
    }

    #[test]
    fn a_child_keeps_the_trace_and_gets_a_span_of_its_own() {
        let t = TraceContext::parse(GOOD, None).expect("valid");
        let a = t.child("id-1");
        let b = t.child("id-2");
        assert_eq!((a.trace_id, b.trace_id), (t.trace_id, t.trace_id));
        assert_ne!(a.span_id, b.span_id);
        assert_ne!(a.span_id, t.span_id);
        assert_eq!(a, t.child("id-1"), "the same host id, the same span");
        let turns: Vec<[u8; 8]> = (0..3).map(|n| t.nth_child(n).span_id).collect();
        assert!(turns[0] != turns[1] && turns[1] != turns[2] && turns[0] != t.span_id);
        let root = TraceContext::root("id-3");
        assert_ne!(root.trace_id, [0; 16]);
        assert_eq!(
            TraceContext::parse(&root.traceparent(), None),
            Some(root.clone())
        );
    }

    #[test]
    fn a_tasks_trace_is_stored_but_never_on_the_wire() {
        use crate::model::task::{Shape, Task, TaskState};
        let trace = TraceContext::parse(GOOD, Some("k=v")).expect("valid");
        let task = Task {
            id: "t".into(),
            context_id: "c".into(),
            state: TaskState::Working,
            status_message: None,
            updated_ms: None,
            artifacts: Vec::new(),
            history: Vec::new(),
            dialect: Shape::V10,
            owner: None,
            trace: Some(Box::new(trace.clone())),
            revision: Default::default(),
        };
        let stored = serde_json::to_value(task.stored()).expect("stored");
        assert_eq!(stored[TRACEPARENT], GOOD);
        assert_eq!(stored[TRACESTATE], "k=v");
        assert_eq!(
            Task::from_stored(&stored).and_then(|t| t.trace),
            Some(Box::new(trace))
        );
        // Peer data never brings one, and answers never carry one.
        assert_eq!(Task::from_value(&stored).and_then(|t| t.trace), None);
        for shape in [Shape::V03, Shape::V10] {
            let wire = serde_json::to_string(&task.shaped(shape, None)).expect("wire");
            assert!(!wire.contains("trace"), "{wire}");
        }
    }
}
