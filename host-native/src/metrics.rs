//! Prometheus metrics of a served agent (`toolnexus serve --metrics`: the
//! text format at `/metrics`), with the `prometheus-client` crate. Off
//! (never [`enable`]d), every hook returns at its first line.
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

/// Whether [`enable`] was called.
pub fn enabled() -> bool {
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
    let Some(m) = on() else { return };
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
    m.request_seconds
        .get_or_create(&vec![("method", method.clone())])
        .observe(started.elapsed().as_secs_f64());
    m.requests
        .get_or_create(&vec![("method", method), ("outcome", outcome.into())])
        .inc();
}

/// An event stream opened: counted until the guard is dropped.
pub(crate) fn stream_opened() -> Option<StreamGuard> {
    let m = on()?;
    m.streams.inc();
    Some(StreamGuard)
}

/// See [`stream_opened`].
pub(crate) struct StreamGuard;

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(m) = on() {
            m.streams.dec();
        }
    }
}

/// A task was saved in `state`.
pub(crate) fn task_state(state: toolnexus_core::TaskState) {
    if let Some(m) = on() {
        m.tasks
            .get_or_create(&vec![("state", state.as_str().into())])
            .inc();
    }
}

/// A store operation ended.
pub(crate) fn store(op: &'static str, started: Instant, ok: bool) {
    let Some(m) = on() else { return };
    let labels = vec![("operation", op.to_string())];
    m.store_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    if !ok {
        m.store_errors.get_or_create(&labels).inc();
    }
}

/// Whether a request is a model call (OpenAI- or Anthropic-style path).
pub(crate) fn is_model_call(url: &str) -> bool {
    let path = url.split('?').next().unwrap_or_default();
    path.ends_with("/chat/completions") || path.ends_with("/messages")
}

/// A model call ended (`body`: the answer, whose usage is counted).
pub(crate) fn model_call(request: &[u8], started: Instant, body: Option<&[u8]>) {
    let Some(m) = on() else { return };
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
    m.model_seconds
        .get_or_create(&vec![("gen_ai_request_model", model)])
        .observe(started.elapsed().as_secs_f64());
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
                m.tokens
                    .get_or_create(&vec![("gen_ai_token_type", kind.into())])
                    .inc_by(n);
            }
        }
    }
}

/// A webhook delivery ended.
pub(crate) fn webhook(ok: bool) {
    if let Some(m) = on() {
        let outcome = if ok { "ok" } else { "error" };
        m.webhooks
            .get_or_create(&vec![("outcome", outcome.into())])
            .inc();
    }
}
