//! OpenTelemetry spans, exported over OTLP/HTTP (protobuf) when an endpoint
//! is configured: `--otlp-endpoint`, or the standard `OTEL_EXPORTER_OTLP_*`
//! variables. Off (no endpoint), nothing is installed and every hook below
//! returns at its first line (one atomic load).
//!
//! Core records the spans of a task's work itself ([`toolnexus_core::SpanRecord`],
//! handed to the fulfiller's toolkit hook and exported by [`core_span`]),
//! with the ids it sends to the peers: each model call the `n`th child of
//! the task, each tool call the child of the model call that asked, each
//! A2A request of a tool call the child of that call. The host builds the
//! spans only it sees, with the ids core computed (W3C trace context,
//! [`toolnexus_core::TraceContext`]), so what a peer saw as its parent is a
//! span in the collector:
//!
//! - `a2a.server …`: each request served (kind server), the child of the
//!   caller's `traceparent`, or the root of a new trace when none came in;
//!   the request core sees names this span as its parent.
//! - `a2a.task`: one turn of a task (created → each state, until a terminal
//!   or interrupted state), the child of the request that made or continued
//!   it; each state is an event.
//! - from core: `chat {model}` (a model call, kind client, child of the
//!   task), `execute_tool {tool}` (a tool call, local or an agent, child of
//!   the model call that asked for it) and `a2a.client {method}` (each
//!   request of an agent's call, kind client, child of the tool call).
//! - `a2a.store {op}`: a store operation, child of the task or the request.
//! - `a2a.webhook`: a push delivery, child of the task.
//! - `a2a.client {method}`: a request of the CLI, child of its command.
//! - `toolnexus {command}`: a CLI command, the child of `TRACEPARENT`.
//!
//! The batch queue is bounded ([`DEFAULT_QUEUE`] spans): past it spans are
//! dropped and counted ([`dropped_spans`]), never waited for; a dead
//! collector costs each batch one failed connection, on the exporter's own
//! thread.

use crate::lock::unpoisoned as lock;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider, Span, SpanData, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};
use toolnexus_core::{HttpRequest, Task, TaskState, TraceContext};

/// Spans waiting for export, at most (`OTEL_BSP_MAX_QUEUE_SIZE`).
pub const DEFAULT_QUEUE: usize = 2048;
/// Spans per export request, at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
const DEFAULT_BATCH: usize = 512;
/// How long spans wait for a full batch (`OTEL_BSP_SCHEDULE_DELAY`, ms).
const DEFAULT_DELAY: Duration = Duration::from_millis(1000);
/// How long one export may take (`OTEL_BSP_EXPORT_TIMEOUT`, ms).
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Open task turns remembered, at most: past it, new tasks get no span.
const MAX_OPEN_TASKS: usize = 65_536;

struct Telemetry {
    tracer: SdkTracer,
    provider: SdkTracerProvider,
    /// The OTLP metrics (`None`: `OTEL_METRICS_EXPORTER=none`).
    meters: Option<opentelemetry_sdk::metrics::SdkMeterProvider>,
    counts: Arc<Counts>,
    open: Mutex<Open>,
    /// The CLI command's span, ended by [`shutdown`].
    command: Mutex<Option<Span>>,
}

#[derive(Default)]
struct Counts {
    /// Spans dropped because the queue was full.
    dropped: AtomicU64,
    /// Spans whose export failed (the collector refused or was unreachable).
    failed: AtomicU64,
    /// Spans exported.
    exported: AtomicU64,
}

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

fn on() -> Option<&'static Telemetry> {
    TELEMETRY.get()
}

/// Whether spans are exported (an endpoint was configured at [`init`]).
pub fn enabled() -> bool {
    on().is_some()
}

/// Spans dropped so far because the export queue was full.
pub fn dropped_spans() -> u64 {
    on().map_or(0, |t| t.counts.dropped.load(Ordering::Relaxed))
}

/// Spans whose export failed so far (collector unreachable or refusing).
pub fn failed_spans() -> u64 {
    on().map_or(0, |t| t.counts.failed.load(Ordering::Relaxed))
}

/// Spans exported so far.
pub fn exported_spans() -> u64 {
    on().map_or(0, |t| t.counts.exported.load(Ordering::Relaxed))
}

/// Why [`init`] did not start the exporter.
#[derive(Debug)]
pub struct InitError(String);

impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpenTelemetry export: {}", self.0)
    }
}

impl std::error::Error for InitError {}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Starts span export when an endpoint is configured: `endpoint` (the base
/// URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`: `/v1/traces` is appended), or
/// else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`.
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep it off.
/// `OTEL_SERVICE_NAME` (default `service`), `OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_EXPORTER_OTLP(_TRACES)_HEADERS` and
/// the `OTEL_BSP_*` queue settings apply. Returns whether export is on;
/// call it once per process (later calls change nothing).
pub fn init(endpoint: Option<&str>, service: &str) -> Result<bool, InitError> {
    if on().is_some() {
        return Ok(true);
    }
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    let endpoint = endpoint.map(str::trim).filter(|e| !e.is_empty());
    let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    if disabled || (endpoint.is_none() && !from_env) {
        return Ok(false);
    }
    use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(Hyper::default());
    if let Some(base) = endpoint {
        builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    let mut exporter = builder.build().map_err(|e| InitError(e.to_string()))?;
    let mut resource = Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service.to_string());
    }
    let resource = resource.build();
    use opentelemetry_sdk::trace::SpanExporter as _;
    exporter.set_resource(&resource);
    let ms = |name: &str, default: Duration| {
        env(name)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(default, Duration::from_millis)
    };
    let count = |name: &str, default: usize| {
        env(name)
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(default)
    };
    let queue = count("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE);
    let settings = Batching {
        batch: count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH).min(queue),
        delay: ms("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_DELAY),
        timeout: ms("OTEL_BSP_EXPORT_TIMEOUT", DEFAULT_EXPORT_TIMEOUT),
    };
    let meters = if env("OTEL_METRICS_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none")) {
        None
    } else {
        let mut builder = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(Hyper::default());
        if let Some(base) = endpoint {
            builder = builder.with_endpoint(format!("{}/v1/metrics", base.trim_end_matches('/')));
        }
        let exporter = builder.build().map_err(|e| InitError(e.to_string()))?;
        // OTEL_METRIC_EXPORT_INTERVAL (default 60 s) paces it.
        let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter).build();
        Some(
            opentelemetry_sdk::metrics::SdkMeterProvider::builder()
                .with_reader(reader)
                .with_resource(resource.clone())
                .build(),
        )
    };
    let counts = Arc::new(Counts::default());
    let processor = Bounded::start(exporter, queue, settings, counts.clone())
        .map_err(|e| InitError(format!("cannot start the export thread: {e}")))?;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_id_generator(Ids::default())
        .with_resource(resource)
        .build();
    use opentelemetry::trace::TracerProvider as _;
    let tracer = provider.tracer("toolnexus");
    #[cfg(feature = "metrics")]
    if let Some(meters) = &meters {
        use opentelemetry::metrics::MeterProvider as _;
        crate::metrics::enable_otlp(&meters.meter("toolnexus"));
    }
    let _ = TELEMETRY.set(Telemetry {
        tracer,
        provider,
        meters,
        counts,
        open: Mutex::new(Open::default()),
        command: Mutex::new(None),
    });
    Ok(true)
}

/// Ends the CLI command's span, exports what is queued (waiting up to the
/// export timeout) and stops the exporter. A no-op when export is off.
pub fn shutdown() {
    let Some(t) = on() else { return };
    if let Some(mut span) = lock(&t.command).take() {
        span.end();
    }
    let _ = t.provider.force_flush();
    let _ = t.provider.shutdown();
    if let Some(meters) = &t.meters {
        let _ = meters.shutdown();
    }
    let (dropped, failed) = (
        t.counts.dropped.load(Ordering::Relaxed),
        t.counts.failed.load(Ordering::Relaxed),
    );
    if dropped > 0 || failed > 0 {
        tracing::warn!(
            dropped_spans = dropped,
            failed_spans = failed,
            "OpenTelemetry export: {dropped} spans dropped (queue full), {failed} not accepted by the collector"
        );
    }
}

// ---- ids: the span ids core computed ---------------------------------------

thread_local! {
    /// The id the next span built on this thread takes (then random again).
    static NEXT_SPAN: Cell<Option<[u8; 8]>> = const { Cell::new(None) };
    /// The trace id the next root span built on this thread takes.
    static NEXT_TRACE: Cell<Option<[u8; 16]>> = const { Cell::new(None) };
}

/// Random ids, except the ones core already sent on the wire.
#[derive(Debug, Default)]
struct Ids(RandomIdGenerator);

impl IdGenerator for Ids {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE
            .take()
            .map_or_else(|| self.0.new_trace_id(), TraceId::from_bytes)
    }

    fn new_span_id(&self) -> SpanId {
        NEXT_SPAN
            .take()
            .map_or_else(|| self.0.new_span_id(), SpanId::from_bytes)
    }
}

/// Starts a span: the child of `parent` (a remote or local span context),
/// or a root; with the span id `id` and, as a root, the trace id `trace`
/// when given.
fn start(
    t: &Telemetry,
    name: String,
    kind: SpanKind,
    parent: Option<SpanContext>,
    id: Option<([u8; 16], [u8; 8])>,
    attributes: Vec<KeyValue>,
) -> Span {
    start_at(t, name, kind, parent, id, attributes, None)
}

/// [`start`] at the time `at` (now when `None`).
fn start_at(
    t: &Telemetry,
    name: String,
    kind: SpanKind,
    parent: Option<SpanContext>,
    id: Option<([u8; 16], [u8; 8])>,
    attributes: Vec<KeyValue>,
    at: Option<SystemTime>,
) -> Span {
    let cx = match parent {
        Some(sc) => Context::new().with_remote_span_context(sc),
        None => Context::new(),
    };
    if let Some((trace, span)) = id {
        NEXT_TRACE.set(Some(trace));
        NEXT_SPAN.set(Some(span));
    }
    let mut builder = t
        .tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes);
    builder.start_time = at;
    let span = builder.start_with_context(&t.tracer, &cx);
    NEXT_TRACE.set(None);
    NEXT_SPAN.set(None);
    span
}

fn span_context(tc: &TraceContext) -> SpanContext {
    let state = tc
        .state
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    SpanContext::new(
        TraceId::from_bytes(tc.trace_id),
        SpanId::from_bytes(tc.span_id),
        TraceFlags::new(tc.flags),
        true,
        state,
    )
}

/// The wire form of `sc`, with `state` (the caller's `tracestate`) kept.
fn trace_context(sc: &SpanContext, state: Option<String>) -> TraceContext {
    TraceContext {
        trace_id: sc.trace_id().to_bytes(),
        span_id: sc.span_id().to_bytes(),
        flags: sc.trace_flags().to_u8(),
        state,
    }
}

// ---- server requests --------------------------------------------------------

tokio::task_local! {
    /// The request being served on this task: the parent of the task it
    /// makes, and the trace of the first task it read (a resubscribe's,
    /// a GetTask's), which its span then links.
    static REQUEST: (SpanContext, Arc<Mutex<Option<TraceContext>>>);
}

/// The trace id of the request being served on this task, if any (for
/// log lines).
pub fn current_trace_id() -> Option<String> {
    REQUEST.try_with(|r| r.0.trace_id().to_string()).ok()
}

fn request_parent() -> Option<SpanContext> {
    REQUEST.try_with(|r| r.0.clone()).ok()
}

/// The span of one request served; end it with [`ServerSpan::finish`].
pub(crate) struct ServerSpan {
    span: Span,
    context: SpanContext,
    task: Arc<Mutex<Option<TraceContext>>>,
}

/// The A2A method of a JSON-RPC body (`message/send`, `SendMessage`), read
/// only as far as its `method` member.
fn rpc_method(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Call {
        method: Option<String>,
    }
    serde_json::from_slice::<Call>(body).ok()?.method
}

/// Whether a request body sends a message to an existing task
/// (`message.taskId`, in JSON-RPC `params` or an HTTP+JSON body).
fn continues_a_task(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Body {
        params: Option<Params>,
        message: Option<Message>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        message: Option<Message>,
    }
    #[derive(serde::Deserialize)]
    struct Message {
        #[serde(rename = "taskId", alias = "task_id")]
        task_id: Option<String>,
    }
    let Ok(body) = serde_json::from_slice::<Body>(body) else {
        return false;
    };
    let message = body.params.and_then(|p| p.message).or(body.message);
    message
        .and_then(|m| m.task_id)
        .is_some_and(|id| !id.is_empty())
}

/// The JSON-RPC error code of an answer, if it is an error.
fn rpc_error(body: &[u8]) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Option<Code>,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    Some(serde_json::from_slice::<Answer>(body).ok()?.error?.code)
}

/// Starts the span of a request served, and makes it the parent the
/// request names to core (its `traceparent`; a new trace when none came).
/// `None` when export is off.
pub(crate) fn server_request(req: &mut HttpRequest) -> Option<ServerSpan> {
    let t = on()?;
    let caller = TraceContext::from_headers(&req.headers);
    let path = crate::http_server::url_path(&req.url).to_string();
    let rest = path.starts_with(toolnexus_core::server::rest::REST_PATH);
    let method = if req.method == "POST" && !rest {
        rpc_method(&req.body)
    } else {
        None
    };
    let (binding, operation) = match (&method, rest) {
        (Some(m), _) => ("jsonrpc", m.clone()),
        (None, true) => ("http+json", format!("{} {path}", req.method)),
        (None, false) => ("http", format!("{} {path}", req.method)),
    };
    let mut attributes = vec![
        KeyValue::new("http.request.method", req.method.clone()),
        KeyValue::new("url.path", path),
        KeyValue::new("a2a.binding", binding),
    ];
    if let Some(m) = &method {
        attributes.push(KeyValue::new("rpc.system", "jsonrpc"));
        attributes.push(KeyValue::new("rpc.method", m.clone()));
        // A2A 0.3 names methods with a slash (message/send), 1.0 without.
        let dialect = if m.contains('/') { "0.3" } else { "1.0" };
        attributes.push(KeyValue::new("a2a.dialect", dialect));
    }
    let span = start(
        t,
        format!("a2a.server {operation}"),
        SpanKind::Server,
        caller.as_ref().map(span_context),
        None,
        attributes,
    );
    let context = span.span_context().clone();
    // A new trace is not handed to a follow-up of a task: with no caller's
    // context, core continues the task's own trace.
    if caller.is_some() || !continues_a_task(&req.body) {
        trace_context(&context, caller.and_then(|c| c.state)).put_on(&mut req.headers);
    }
    Some(ServerSpan {
        span,
        context,
        task: Arc::default(),
    })
}

impl ServerSpan {
    /// Runs `serving` with this span as the parent of the task it makes.
    pub(crate) async fn scope<F: std::future::Future>(&mut self, serving: F) -> F::Output {
        REQUEST
            .scope((self.context.clone(), self.task.clone()), serving)
            .await
    }

    /// Ends the span with the answer's outcome.
    pub(crate) fn finish(mut self, status: u16, body: Option<&[u8]>) {
        if let Some(task) = lock(&self.task).take() {
            // A task of another trace (a resubscribe, a read): linked.
            if task.trace_id != self.context.trace_id().to_bytes() {
                self.span
                    .set_attribute(KeyValue::new("a2a.task.trace_id", task.trace_id_hex()));
                self.span.add_link(span_context(&task), Vec::new());
            }
        }
        self.span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        let code = body.filter(|_| status < 400).and_then(rpc_error);
        let outcome = match (status, code, body) {
            (400.., _, _) | (_, Some(_), _) => "error",
            (_, None, None) => "stream",
            _ => "ok",
        };
        self.span
            .set_attribute(KeyValue::new("a2a.outcome", outcome));
        if let Some(code) = code {
            self.span
                .set_attribute(KeyValue::new("rpc.jsonrpc.error_code", code));
            self.span
                .set_attribute(KeyValue::new("error.type", code.to_string()));
            self.span
                .set_status(Status::error(format!("JSON-RPC error {code}")));
        } else if status >= 500 {
            self.span
                .set_attribute(KeyValue::new("error.type", status.to_string()));
            self.span
                .set_status(Status::error(format!("HTTP {status}")));
        }
        self.span.end();
    }
}

// ---- tasks -----------------------------------------------------------------

/// The spans of the tasks being worked on in this process, by the span id
/// of their turn (the task's stored `traceparent`).
#[derive(Default)]
struct Open {
    tasks: HashMap<[u8; 8], OpenTask>,
    /// The last turn of each task waiting for an answer (input-required,
    /// auth-required): the parent of the turn its follow-up starts.
    waiting: HashMap<String, SpanContext>,
    /// Turns ended lately, whose webhook deliveries may still be under way.
    ended: std::collections::VecDeque<[u8; 8]>,
}

/// Ended turns remembered for their deliveries.
const ENDED: usize = 1024;

struct OpenTask {
    trace: TraceContext,
    span: Span,
    state: TaskState,
    opened: Instant,
}

/// Whether a task's turn is over in `state`: nothing more happens until
/// someone answers it, or ever.
fn turn_ends(state: TaskState) -> bool {
    state.is_terminal() || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// A task was saved: its turn's span starts (the child of the request
/// being served), records the state, or ends.
pub(crate) fn task_saved(task: &Task) {
    let Some(t) = on() else { return };
    let Some(trace) = task.trace.as_deref() else {
        return;
    };
    let mut open = lock(&t.open);
    let state_event = |span: &mut Span, state: TaskState| {
        span.add_event(
            "a2a.task.state",
            vec![KeyValue::new("a2a.task.state", state.as_str())],
        );
    };
    if let Some(turn) = open.tasks.get_mut(&trace.span_id) {
        if turn.state != task.state {
            turn.state = task.state;
            state_event(&mut turn.span, task.state);
            turn.span
                .set_attribute(KeyValue::new("a2a.task.state", task.state.as_str()));
        }
    } else {
        if open.tasks.len() >= MAX_OPEN_TASKS {
            // Forget the oldest turn rather than grow.
            let oldest = open
                .tasks
                .iter()
                .min_by_key(|(_, o)| o.opened)
                .map(|(k, _)| *k);
            if let Some(mut gone) = oldest.and_then(|k| open.tasks.remove(&k)) {
                gone.span.end();
            }
        }
        // The request that made or continued it, when in the same trace (a
        // follow-up with no caller's context continues the task's trace).
        let earlier = open.waiting.remove(&task.id);
        let parent = request_parent()
            .filter(|p| p.trace_id().to_bytes() == trace.trace_id)
            .or(earlier.filter(|p| p.trace_id().to_bytes() == trace.trace_id));
        let mut span = start(
            t,
            "a2a.task".into(),
            SpanKind::Internal,
            parent,
            Some((trace.trace_id, trace.span_id)),
            vec![
                KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                KeyValue::new("a2a.task.id", task.id.clone()),
                KeyValue::new("a2a.context.id", task.context_id.clone()),
                KeyValue::new("gen_ai.conversation.id", task.context_id.clone()),
                KeyValue::new("a2a.task.state", task.state.as_str()),
            ],
        );
        state_event(&mut span, task.state);
        open.tasks.insert(
            trace.span_id,
            OpenTask {
                trace: trace.clone(),
                span,
                state: task.state,
                opened: Instant::now(),
            },
        );
    }
    if turn_ends(task.state) {
        if let Some(mut turn) = open.tasks.remove(&trace.span_id) {
            if task.state.is_terminal() {
                open.waiting.remove(&task.id);
            } else if open.waiting.len() < MAX_OPEN_TASKS {
                open.waiting
                    .insert(task.id.clone(), turn.span.span_context().clone());
            }
            if open.ended.len() >= ENDED {
                open.ended.pop_front();
            }
            open.ended.push_back(trace.span_id);
            if matches!(task.state, TaskState::Failed | TaskState::Rejected) {
                turn.span.set_status(Status::error(task.state.as_str()));
            }
            turn.span.end();
        }
    }
}

/// A task was read while serving a request: remembered for its span.
pub(crate) fn task_read(task: &Task) {
    if on().is_none() {
        return;
    }
    if let Some(trace) = task.trace.as_deref() {
        let _ = REQUEST.try_with(|r| {
            lock(&r.1).get_or_insert_with(|| trace.clone());
        });
    }
}

/// The span of one store operation, the child of the request served or of
/// the task saved; `None` when export is off or outside both.
pub(crate) fn store_op(op: &'static str, task: Option<&Task>) -> Option<StoreSpan> {
    let t = on()?;
    let turn = task
        .and_then(|task| task.trace.as_deref())
        .and_then(|trace| {
            lock(&t.open)
                .tasks
                .get(&trace.span_id)
                .map(|o| o.span.span_context().clone())
        });
    let parent = turn.or_else(request_parent)?;
    Some(StoreSpan(start(
        t,
        format!("a2a.store {op}"),
        SpanKind::Internal,
        Some(parent),
        None,
        vec![KeyValue::new("db.operation.name", op)],
    )))
}

/// See [`store_op`].
pub(crate) struct StoreSpan(Span);

impl StoreSpan {
    pub(crate) fn finish<T>(mut self, result: &Result<T, toolnexus_core::server::StoreError>) {
        if let Err(e) = result {
            self.0.set_attribute(KeyValue::new("error.type", "store"));
            self.0.set_status(Status::error(e.to_string()));
        }
        self.0.end();
    }
}

// ---- outbound requests -------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Outward {
    A2a,
    Webhook,
}

/// The span of one request sent; end it with [`ClientSpan::finish`] or
/// [`ClientSpan::fail`].
pub(crate) struct ClientSpan {
    span: Span,
    kind: Outward,
}

/// Starts the span of a request sent in a trace (one with a
/// `traceparent`), and names it as the request's parent. `None` when
/// export is off, the request is in no trace, or it is the work of a task
/// served here: its model calls and tool calls are spans core recorded
/// ([`core_span`]), their ids already on the wire.
pub(crate) fn outbound(req: &mut HttpRequest) -> Option<ClientSpan> {
    let t = on()?;
    let tc = TraceContext::from_headers(&req.headers)?;
    let open = lock(&t.open);
    let kind = if open.tasks.contains_key(&tc.span_id) || open.ended.contains(&tc.span_id) {
        // The task's own span: a push delivery.
        Outward::Webhook
    } else if open.tasks.values().any(|o| o.trace.trace_id == tc.trace_id) {
        return None;
    } else {
        Outward::A2a
    };
    drop(open);
    let mut attributes = vec![
        KeyValue::new("http.request.method", req.method.clone()),
        KeyValue::new("url.full", toolnexus_core::redact_url(&req.url)),
    ];
    let name = match kind {
        Outward::Webhook => "a2a.webhook".to_string(),
        Outward::A2a => {
            let method = (req.method == "POST")
                .then(|| rpc_method(&req.body))
                .flatten();
            let op = match &method {
                Some(m) => m.clone(),
                None if req.url.contains("/.well-known/") => "card".to_string(),
                None => format!("{} {}", req.method, crate::http_server::url_path(&req.url)),
            };
            if let Some(m) = method {
                attributes.push(KeyValue::new("rpc.system", "jsonrpc"));
                attributes.push(KeyValue::new("rpc.method", m));
            }
            attributes.push(KeyValue::new("server.address", host_of(&req.url)));
            format!("a2a.client {op}")
        }
    };
    let span = start(
        t,
        name,
        SpanKind::Client,
        Some(span_context(&tc)),
        None,
        attributes,
    );
    trace_context(span.span_context(), tc.state).put_on(&mut req.headers);
    Some(ClientSpan { span, kind })
}

fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .to_string()
}

impl ClientSpan {
    /// Ends the span with the answer (its body when it was read whole).
    pub(crate) fn finish(mut self, status: u16, body: Option<&[u8]>) {
        self.span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if status >= 400 {
            self.span
                .set_attribute(KeyValue::new("error.type", status.to_string()));
            self.span
                .set_status(Status::error(format!("HTTP {status}")));
        }
        if let (Outward::A2a, Some(body)) = (self.kind, body) {
            if let Some(code) = rpc_error(body) {
                self.span
                    .set_attribute(KeyValue::new("rpc.jsonrpc.error_code", code));
                self.span
                    .set_status(Status::error(format!("JSON-RPC error {code}")));
            }
        }
        self.span.end();
    }

    /// Ends the span of a request that got no answer.
    pub(crate) fn fail(mut self, error: &str) {
        self.span
            .set_attribute(KeyValue::new("error.type", "transport"));
        self.span.set_status(Status::error(error.to_string()));
        self.span.end();
    }
}

// ---- spans core recorded -----------------------------------------------------

/// Exports a span core recorded (a model call, a tool call, an A2A
/// request of a task served here): its ids, parent, kind, attributes and
/// events as core gave them; its times, on the transport's clock, end now.
pub(crate) fn core_span(record: &toolnexus_core::SpanRecord) {
    let Some(t) = on() else { return };
    let parent = (record.parent_span_id != [0; 8]).then(|| {
        SpanContext::new(
            TraceId::from_bytes(record.context.trace_id),
            SpanId::from_bytes(record.parent_span_id),
            TraceFlags::new(record.context.flags),
            false,
            TraceState::default(),
        )
    });
    let attributes = record
        .attributes
        .iter()
        .map(|(k, v)| KeyValue::new(*k, v.clone()))
        .collect();
    let end = SystemTime::now();
    let at = |ms: u64| {
        end.checked_sub(Duration::from_millis(record.end_ms.saturating_sub(ms)))
            .unwrap_or(end)
    };
    let kind = match record.kind {
        toolnexus_core::SpanKind::Server => SpanKind::Server,
        toolnexus_core::SpanKind::Client => SpanKind::Client,
        toolnexus_core::SpanKind::Internal => SpanKind::Internal,
    };
    let mut span = start_at(
        t,
        record.name.clone(),
        kind,
        parent,
        Some((record.context.trace_id, record.context.span_id)),
        attributes,
        Some(at(record.start_ms)),
    );
    for (ms, state) in &record.events {
        span.add_event_with_timestamp(
            "a2a.task.state",
            at(*ms),
            vec![KeyValue::new("a2a.task.state", *state)],
        );
    }
    if record.error {
        if !record.attributes.iter().any(|(k, _)| *k == "error.type") {
            span.set_attribute(KeyValue::new("error.type", "tool_error"));
        }
        span.set_status(Status::error("failed"));
    }
    span.end_with_timestamp(end);
}

// ---- the CLI command ------------------------------------------------------

/// Starts the span of a CLI command: `command` is the context its requests
/// carry (its span id is the span's), `caller` the `TRACEPARENT` it
/// continues (a root when `None`).
pub fn start_command(name: &str, command: &TraceContext, caller: Option<&TraceContext>) {
    let Some(t) = on() else { return };
    let span = start(
        t,
        format!("toolnexus {name}"),
        SpanKind::Client,
        caller.map(span_context),
        Some((command.trace_id, command.span_id)),
        vec![KeyValue::new("process.command", name.to_string())],
    );
    *lock(&t.command) = Some(span);
}

// ---- export: a bounded queue and one thread ----------------------------------

struct Batching {
    batch: usize,
    delay: Duration,
    timeout: Duration,
}

enum Msg {
    Span(Box<SpanData>),
    Flush(mpsc::Sender<()>),
}

/// A batch span processor whose queue is bounded: `on_end` never waits;
/// a full queue drops the span and counts it.
struct Bounded {
    queue: SyncSender<Msg>,
    counts: Arc<Counts>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    timeout: Duration,
}

impl std::fmt::Debug for Bounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bounded")
    }
}

impl Bounded {
    fn start(
        exporter: opentelemetry_otlp::SpanExporter,
        queue: usize,
        settings: Batching,
        counts: Arc<Counts>,
    ) -> std::io::Result<Bounded> {
        let (tx, rx) = mpsc::sync_channel(queue);
        let timeout = settings.timeout;
        let thread_counts = counts.clone();
        let thread = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || export_loop(exporter, rx, settings, thread_counts))?;
        Ok(Bounded {
            queue: tx,
            counts,
            thread: Mutex::new(Some(thread)),
            timeout,
        })
    }
}

fn export_loop(
    exporter: opentelemetry_otlp::SpanExporter,
    rx: Receiver<Msg>,
    settings: Batching,
    counts: Arc<Counts>,
) {
    use opentelemetry_sdk::trace::SpanExporter as _;
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let mut batch: Vec<SpanData> = Vec::with_capacity(settings.batch);
    let export = |batch: &mut Vec<SpanData>| {
        if batch.is_empty() {
            return;
        }
        let spans = std::mem::take(batch);
        let n = spans.len() as u64;
        // The timer is made inside the runtime it needs.
        let sent = rt.block_on(async {
            tokio::time::timeout(settings.timeout, exporter.export(spans)).await
        });
        match sent {
            Ok(Ok(())) => counts.exported.fetch_add(n, Ordering::Relaxed),
            _ => counts.failed.fetch_add(n, Ordering::Relaxed),
        };
    };
    let mut deadline = Instant::now() + settings.delay;
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(Msg::Span(span)) => {
                batch.push(*span);
                if batch.len() >= settings.batch {
                    export(&mut batch);
                    deadline = Instant::now() + settings.delay;
                }
            }
            Ok(Msg::Flush(done)) => {
                // Everything queued before the flush is in the batch now.
                export(&mut batch);
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => {
                export(&mut batch);
                deadline = Instant::now() + settings.delay;
            }
            Err(RecvTimeoutError::Disconnected) => {
                export(&mut batch);
                let _ = exporter.shutdown();
                return;
            }
        }
    }
}

impl SpanProcessor for Bounded {
    fn on_start(&self, _: &mut Span, _: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        match self.queue.try_send(Msg::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        let (done, wait) = mpsc::channel();
        // Waits for room in the queue: the thread drains it within one
        // export timeout per batch.
        self.queue
            .send(Msg::Flush(done))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        wait.recv_timeout(self.timeout + Duration::from_secs(1))
            .map_err(|_| OTelSdkError::Timeout(self.timeout))
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.force_flush()?;
        // The thread ends once every sender is gone (the provider drops
        // this processor); it does not have to be waited for here.
        drop(lock(&self.thread).take());
        Ok(())
    }
}

// ---- the exporter's HTTP client: this crate's hyper client ---------------------

/// OTLP requests over hyper (the client the rest of the crate uses), on the
/// export thread's own runtime.
#[derive(Debug, Default)]
struct Hyper(
    OnceLock<crate::transport::HttpClient>,
    OnceLock<Option<tokio::runtime::Runtime>>,
);

impl Hyper {
    async fn send(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        use http_body_util::BodyExt as _;
        let client = self
            .0
            .get_or_init(|| crate::ClientOptions::default().build());
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, http_body_util::Full::new(body));
        let response = tokio::time::timeout(DEFAULT_EXPORT_TIMEOUT, client.request(request))
            .await
            .map_err(|_| "the OTLP request timed out")??;
        let (parts, body) = response.into_parts();
        let body = http_body_util::Limited::new(body, 1 << 20)
            .collect()
            .await?
            .to_bytes();
        Ok(opentelemetry_http::Response::from_parts(parts, body))
    }
}

impl opentelemetry_http::HttpClient for Hyper {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<
                        opentelemetry_http::Response<opentelemetry_http::Bytes>,
                        opentelemetry_http::HttpError,
                    >,
                > + Send
                + 'b,
        >,
    >
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            if tokio::runtime::Handle::try_current().is_ok() {
                return self.send(request).await;
            }
            // The metric reader's thread runs no tokio runtime: one of its own.
            let rt = self.1.get_or_init(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()
            });
            match rt {
                Some(rt) => rt.block_on(self.send(request)),
                None => Err("no runtime for the OTLP request".into()),
            }
        })
    }
}
