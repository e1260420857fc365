//! Metrics of a served agent: Prometheus text at `/metrics` (`toolnexus
//! serve --metrics`, the `prometheus-client` crate), and the same measures
//! over OTLP when span export is on ([`crate::otel`]; dotted names:
//! `a2a.server.requests`, `a2a.server.request.duration`, …). Off (neither),
//! every hook returns at its first line.
//!
//! | name | type | labels |
//! | --- | --- | --- |
//! | `a2a_server_requests_total` | counter | `method`, `outcome` (ok, error, stream) |
//! | `a2a_server_request_duration_seconds` | histogram | `method` |
//! | `a2a_server_active_streams` | gauge | |
//! | `a2a_tasks_total` | counter | `state` (each state a task was saved in) |
//! | `a2a_store_operation_duration_seconds` | histogram | `operation` (get, save) |
//! | `a2a_store_errors_total` | counter | `operation` |
//! | `gen_ai_client_operation_duration_seconds` | histogram | `gen_ai_request_model` |
//! | `gen_ai_client_token_usage_total` | counter | `gen_ai_token_type` (input, output) |
//! | `a2a_webhook_deliveries_total` | counter | `outcome` (ok, error) |

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::OnceLock;
use std::time::Instant;

type Labels = Vec<(&'static str, String)>;

fn seconds() -> Histogram {
    // 100 µs … ~52 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    request_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    streams: Gauge,
    tasks: Family<Labels, Counter>,
    store_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    store_errors: Family<Labels, Counter>,
    model_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    tokens: Family<Labels, Counter>,
    webhooks: Family<Labels, Counter>,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

fn on() -> Option<&'static Metrics> {
    METRICS.get()
}

/// The same measures as OpenTelemetry instruments, exported over OTLP with
/// the spans (`a2a.server.requests`, …; see the README).
#[cfg(feature = "otel")]
struct Otlp {
    requests: opentelemetry::metrics::Counter<u64>,
    request_seconds: opentelemetry::metrics::Histogram<f64>,
    streams: opentelemetry::metrics::UpDownCounter<i64>,
    tasks: opentelemetry::metrics::Counter<u64>,
    store_seconds: opentelemetry::metrics::Histogram<f64>,
    store_errors: opentelemetry::metrics::Counter<u64>,
    model_seconds: opentelemetry::metrics::Histogram<f64>,
    tokens: opentelemetry::metrics::Counter<u64>,
    webhooks: opentelemetry::metrics::Counter<u64>,
}

#[cfg(feature = "otel")]
static OTLP: OnceLock<Otlp> = OnceLock::new();

#[cfg(feature = "otel")]
fn otlp() -> Option<&'static Otlp> {
    OTLP.get()
}

/// Records the metrics on `meter` too (the OTLP export of [`crate::otel`]).
#[cfg(feature = "otel")]
pub(crate) fn enable_otlp(meter: &opentelemetry::metrics::Meter) {
    OTLP.get_or_init(|| Otlp {
        requests: meter.u64_counter("a2a.server.requests").build(),
        request_seconds: meter
            .f64_histogram("a2a.server.request.duration")
            .with_unit("s")
            .build(),
        streams: meter
            .i64_up_down_counter("a2a.server.active_streams")
            .build(),
        tasks: meter.u64_counter("a2a.tasks").build(),
        store_seconds: meter
            .f64_histogram("a2a.store.operation.duration")
            .with_unit("s")
            .build(),
        store_errors: meter.u64_counter("a2a.store.errors").build(),
        model_seconds: meter
            .f64_histogram("gen_ai.client.operation.duration")
            .with_unit("s")
            .build(),
        tokens: meter
            .u64_counter("gen_ai.client.token.usage")
            .with_unit("{token}")
            .build(),
        webhooks: meter.u64_counter("a2a.webhook.deliveries").build(),
    });
}

#[cfg(feature = "otel")]
fn kv(labels: &Labels) -> Vec<opentelemetry::KeyValue> {
    labels
        .iter()
        .map(|(k, v)| opentelemetry::KeyValue::new(*k, v.clone()))
        .collect()
}

/// Records one measure in whichever of Prometheus and OTLP is on.
macro_rules! record {
    ($field:ident, $labels:expr, |$m:ident| $prom:expr, |$o:ident, $a:ident| $otlp:expr) => {{
        let labels: Labels = $labels;
        if let Some($m) = on().map(|m| m.$field.get_or_create(&labels)) {
            $prom;
        }
        #[cfg(feature = "otel")]
        if let Some(o) = otlp() {
            let $o = &o.$field;
            let $a = kv(&labels);
            $otlp;
        }
    }};
}

/// Turns the metrics on for this process (idempotent).
pub fn enable() {
    METRICS.get_or_init(|| {
        let mut registry = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(seconds),
            streams: Gauge::default(),
            tasks: Family::default(),
            store_seconds: Family::new_with_constructor(seconds),
            store_errors: Family::default(),
            model_seconds: Family::new_with_constructor(seconds),
            tokens: Family::default(),
            webhooks: Family::default(),
        };
        registry.register(
            "a2a_server_requests",
            "Requests served, by A2A method and outcome",
            m.requests.clone(),
        );
        registry.register(
            "a2a_server_request_duration_seconds",
            "Time to answer a request (to the head of a stream)",
            m.request_seconds.clone(),
        );
        registry.register(
            "a2a_server_active_streams",
            "Event streams open",
            m.streams.clone(),
        );
        registry.register(
            "a2a_tasks",
            "Task saves, by the state saved",
            m.tasks.clone(),
        );
        registry.register(
            "a2a_store_operation_duration_seconds",
            "Task store operations",
            m.store_seconds.clone(),
        );
        registry.register(
            "a2a_store_errors",
            "Task store operations that failed",
            m.store_errors.clone(),
        );
        registry.register(
            "gen_ai_client_operation_duration_seconds",
            "Model calls",
            m.model_seconds.clone(),
        );
        registry.register(
            "gen_ai_client_token_usage",
            "Tokens the model reported, in and out",
            m.tokens.clone(),
        );
        registry.register(
            "a2a_webhook_deliveries",
            "Push notification deliveries, by outcome",
            m.webhooks.clone(),
        );
        Metrics { registry, ..m }
    });
}

/// Whether metrics are recorded ([`enable`], or OTLP export on).
pub fn enabled() -> bool {
    #[cfg(feature = "otel")]
    if otlp().is_some() {
        return true;
    }
    on().is_some()
}

/// The metrics in the Prometheus text format (`None` when off).
pub fn render() -> Option<String> {
    let m = on()?;
    let mut out = String::new();
    encode(&mut out, &m.registry).ok()?;
    Some(out)
}

/// A request's method, for the labels: the JSON-RPC method, or `GET /path`.
pub(crate) fn request_method(req: &toolnexus_core::HttpRequest) -> String {
    #[derive(serde::Deserialize)]
    struct Call {
        method: Option<String>,
    }
    let path = crate::http_server::url_path(&req.url);
    if req.method == "POST" && path == "/" {
        if let Some(m) = serde_json::from_slice::<Call>(&req.body)
            .ok()
            .and_then(|c| c.method)
        {
            // Bounded label values: only names of A2A methods' shape.
            if m.len() <= 64 && m.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'/') {
                return m;
            }
            return "other".into();
        }
    }
    if path.starts_with(toolnexus_core::server::rest::REST_PATH) {
        // REST paths carry task ids: the route's shape only.
        return format!("{} {}", req.method, toolnexus_core::server::rest::REST_PATH);
    }
    format!(
        "{} {}",
        req.method,
        path.split('?').next().unwrap_or_default()
    )
}

/// A request was answered.
pub(crate) fn request(method: String, started: Instant, status: u16, body: Option<&[u8]>) {
    if !enabled() {
        return;
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Option<serde::de::IgnoredAny>,
    }
    let error = status >= 400
        || body
            .is_some_and(|b| serde_json::from_slice::<Answer>(b).is_ok_and(|a| a.error.is_some()));
    let outcome = match (error, body) {
        (true, _) => "error",
        (false, None) => "stream",
        (false, Some(_)) => "ok",
    };
    let took = started.elapsed().as_secs_f64();
    record!(
        request_seconds,
        vec![("method", method.clone())],
        |h| h.observe(took),
        |h, a| h.record(took, &a)
    );
    record!(
        requests,
        vec![("method", method), ("outcome", outcome.into())],
        |c| c.inc(),
        |c, a| c.add(1, &a)
    );
}

/// An event stream opened: counted until the guard is dropped.
pub(crate) fn stream_opened() -> Option<StreamGuard> {
    if !enabled() {
        return None;
    }
    if let Some(m) = on() {
        m.streams.inc();
    }
    #[cfg(feature = "otel")]
    if let Some(o) = otlp() {
        o.streams.add(1, &[]);
    }
    Some(StreamGuard)
}

/// See [`stream_opened`].
pub(crate) struct StreamGuard;

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(m) = on() {
            m.streams.dec();
        }
        #[cfg(feature = "otel")]
        if let Some(o) = otlp() {
            o.streams.add(-1, &[]);
        }
    }
}

/// A task was saved in `state`.
pub(crate) fn task_state(state: toolnexus_core::TaskState) {
    if enabled() {
        record!(
            tasks,
            vec![("state", state.as_str().into())],
            |c| c.inc(),
            |c, a| c.add(1, &a)
        );
    }
}

/// A store operation ended.
pub(crate) fn store(op: &'static str, started: Instant, ok: bool) {
    if !enabled() {
        return;
    }
    let took = started.elapsed().as_secs_f64();
    record!(
        store_seconds,
        vec![("operation", op.to_string())],
        |h| h.observe(took),
        |h, a| h.record(took, &a)
    );
    if !ok {
        record!(
            store_errors,
            vec![("operation", op.to_string())],
            |c| c.inc(),
            |c, a| c.add(1, &a)
        );
    }
}

/// Whether a request is a model call (OpenAI- or Anthropic-style path).
pub(crate) fn is_model_call(url: &str) -> bool {
    let path = url.split('?').next().unwrap_or_default();
    path.ends_with("/chat/completions") || path.ends_with("/messages")
}

/// A model call ended (`body`: the answer, whose usage is counted).
pub(crate) fn model_call(request: &[u8], started: Instant, body: Option<&[u8]>) {
    if !enabled() {
        return;
    }
    #[derive(serde::Deserialize)]
    struct Req {
        model: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        usage: Option<Usage>,
    }
    #[derive(serde::Deserialize)]
    struct Usage {
        prompt_tokens: Option<u64>,
        completion_tokens: Option<u64>,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
    }
    let model = serde_json::from_slice::<Req>(request)
        .ok()
        .and_then(|r| r.model)
        .filter(|m| m.len() <= 128)
        .unwrap_or_default();
    let took = started.elapsed().as_secs_f64();
    record!(
        model_seconds,
        vec![("gen_ai_request_model", model)],
        |h| h.observe(took),
        |h, a| h.record(took, &a)
    );
    let usage = body
        .and_then(|b| serde_json::from_slice::<Answer>(b).ok())
        .and_then(|a| a.usage);
    if let Some(u) = usage {
        let counts = [
            ("input", u.prompt_tokens.or(u.input_tokens)),
            ("output", u.completion_tokens.or(u.output_tokens)),
        ];
        for (kind, n) in counts {
            if let Some(n) = n {
                record!(
                    tokens,
                    vec![("gen_ai_token_type", kind.into())],
                    |c| c.inc_by(n),
                    |c, a| c.add(n, &a)
                );
            }
        }
    }
}

/// A webhook delivery ended.
pub(crate) fn webhook(ok: bool) {
    if enabled() {
        let outcome = if ok { "ok" } else { "error" };
        record!(
            webhooks,
            vec![("outcome", outcome.into())],
            |c| c.inc(),
            |c, a| c.add(1, &a)
        );
    }
}
