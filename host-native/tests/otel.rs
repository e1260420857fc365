//! OpenTelemetry export across processes over real HTTP: a real OTLP/HTTP
//! receiver (protobuf `ExportTraceServiceRequest`s, decoded with the
//! official generated messages) collects the spans of `toolnexus call`,
//! `toolnexus serve` A and `toolnexus serve` B (A's model calls B as a
//! tool), and the test walks their parent links.

mod common;

use common::traced::{calls_the_agent_tool, card, model, say, serve, skills, Seen};
use common::{run_to_end_env, temp_dir, toolnexus_bin, Stub};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use toolnexus_core::HttpResponse;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

/// One span as the receiver got it.
#[derive(Clone, Debug)]
struct Got {
    service: String,
    name: String,
    trace: String,
    id: String,
    parent: String,
    attributes: HashMap<String, String>,
    events: Vec<String>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// The metric names each service exported, as (service, name).
type Metrics = Arc<Mutex<Vec<(String, String)>>>;

/// An OTLP/HTTP receiver: decodes each POST /v1/traces and /v1/metrics.
async fn receiver() -> (Stub, Arc<Mutex<Vec<Got>>>) {
    let (stub, got, _) = receiver_with_metrics().await;
    (stub, got)
}

async fn receiver_with_metrics() -> (Stub, Arc<Mutex<Vec<Got>>>, Metrics) {
    let got: Arc<Mutex<Vec<Got>>> = Arc::default();
    let metrics: Metrics = Arc::default();
    let log = got.clone();
    let metric_log = metrics.clone();
    let stub = Stub::start(move |req| {
        assert_eq!(req.method, "POST");
        assert_eq!(
            req.header("content-type"),
            Some("application/x-protobuf"),
            "OTLP/HTTP protobuf"
        );
        let ok = HttpResponse {
            status: 200,
            headers: vec![("Content-Type".into(), "application/x-protobuf".into())],
            body: Vec::new(),
        };
        if req.url.ends_with("/v1/metrics") {
            use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
            let export = ExportMetricsServiceRequest::decode(req.body.as_slice())
                .expect("an ExportMetricsServiceRequest");
            let mut log = metric_log.lock().expect("metrics");
            for rm in export.resource_metrics {
                let service = rm
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                    .map(|a| text(&a.value))
                    .unwrap_or_default();
                for sm in rm.scope_metrics {
                    for m in sm.metrics {
                        log.push((service.clone(), m.name));
                    }
                }
            }
            return ok;
        }
        assert!(req.url.ends_with("/v1/traces"), "{}", req.url);
        let export = ExportTraceServiceRequest::decode(req.body.as_slice())
            .expect("an ExportTraceServiceRequest");
        let mut log = log.lock().expect("spans");
        for rs in export.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .map(|a| text(&a.value))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    log.push(Got {
                        service: service.clone(),
                        name: s.name.clone(),
                        trace: hex(&s.trace_id),
                        id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        attributes: s
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), text(&a.value)))
                            .collect(),
                        events: s
                            .events
                            .iter()
                            .map(|e| {
                                e.attributes
                                    .iter()
                                    .map(|a| text(&a.value))
                                    .collect::<Vec<_>>()
                                    .join(",")
                            })
                            .collect(),
                    });
                }
            }
        }
        ok
    })
    .await;
    (stub, got, metrics)
}

/// Waits (bounded) until `done` holds for the spans received.
async fn until(got: &Arc<Mutex<Vec<Got>>>, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
    for _ in 0..600 {
        {
            let spans = got.lock().expect("spans");
            if done(&spans) {
                return spans.clone();
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    got.lock().expect("spans").clone()
}

/// The environment of a process exporting to `receiver` as `service`.
fn otel_env<'a>(receiver: &'a str, service: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver),
        ("OTEL_SERVICE_NAME", service),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
    ]
}

fn span_id(traceparent: &str) -> String {
    traceparent
        .split('-')
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

/// The span `id` and its ancestors, nearest first.
fn ancestors<'a>(spans: &'a [Got], id: &str) -> Vec<&'a Got> {
    let by_id: HashMap<&str, &Got> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut out = Vec::new();
    let mut at = by_id.get(id).copied();
    while let Some(s) = at {
        if out.len() > spans.len() {
            panic!("a parent loop at {}", s.id);
        }
        out.push(s);
        at = by_id.get(s.parent.as_str()).copied();
    }
    out
}

#[tokio::test]
async fn one_trace_with_parent_links_across_the_cli_two_agents_and_a_model() {
    let (rx, got, metrics) = receiver_with_metrics().await;
    let rx_url = rx.url().trim_end_matches('/').to_string();

    let (model_b, _) = model(|_| say("found it")).await;
    let b = serve(
        model_b.url(),
        &skills("lookup"),
        &["--name", "agent-b"],
        &otel_env(&rx_url, "agent-b"),
    )
    .await;
    let (model_a, seen_a) = model(calls_the_agent_tool).await;
    let config = temp_dir("otel-config-a");
    std::fs::create_dir_all(&config).expect("mkdir");
    let config_file = config.join("a.json");
    std::fs::write(
        &config_file,
        json!({"agents": {"b": {"card": card(&b)}}}).to_string(),
    )
    .expect("write");
    let config_arg = config_file.display().to_string();
    let a = serve(
        model_a.url(),
        &skills("ask"),
        &["--name", "agent-a", "--config", &config_arg],
        &otel_env(&rx_url, "agent-a"),
    )
    .await;

    let mut env = otel_env(&rx_url, "cli");
    env.push(("TRACEPARENT", PARENT));
    let (code, stdout, stderr) =
        run_to_end_env(&toolnexus_bin(), &["call", &card(&a), "ask", "hello"], &env).await;
    assert_eq!(code, 0, "{stdout} {stderr}");
    let out: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(out["output"], "done: found it", "{out}");

    // B's task span ends when its task completes; A's once A's task does.
    let ended = |spans: &[Got], service: &str, name: &str| {
        spans.iter().any(|s| s.service == service && s.name == name)
    };
    let spans = until(&got, |s| {
        ended(s, "agent-b", "a2a.task")
            && ended(s, "agent-a", "a2a.task")
            && ended(s, "cli", "toolnexus call")
            && s.iter().filter(|x| x.name.starts_with("chat ")).count() >= 3
    })
    .await;
    let names: Vec<String> = spans
        .iter()
        .map(|s| format!("{}:{} {}<-{}", s.service, s.name, s.id, s.parent))
        .collect();
    // One trace across all, but for the card A read from B when it started
    // (no request in a trace asked for it: a trace of its own).
    let (inside, outside): (Vec<&Got>, Vec<&Got>) = spans.iter().partition(|s| s.trace == TRACE_ID);
    assert!(inside.len() >= 15, "{names:#?}");
    assert!(
        outside.iter().all(|s| s.service == "agent-b"
            && s.name.ends_with("agent-card.json")
            && s.parent.is_empty()),
        "one trace across all: {names:#?}"
    );

    // B's task, walked up to the caller's TRACEPARENT span.
    let b_task = spans
        .iter()
        .find(|s| s.service == "agent-b" && s.name == "a2a.task")
        .unwrap_or_else(|| panic!("B's task span: {names:#?}"));
    assert_eq!(b_task.attributes["a2a.task.state"], "completed");
    assert!(
        b_task.events.iter().any(|e| e == "submitted")
            && b_task.events.iter().any(|e| e == "completed"),
        "{:?}",
        b_task.events
    );
    let chain = ancestors(&spans, &b_task.id);
    let path: Vec<String> = chain
        .iter()
        .map(|s| format!("{}:{}", s.service, s.name))
        .collect();
    let wanted = [
        ("agent-b", "a2a.task"),
        ("agent-b", "a2a.server "),
        ("agent-a", "a2a.client "),
        ("agent-a", "execute_tool"),
        ("agent-a", "chat m"),
        ("agent-a", "a2a.task"),
        ("agent-a", "a2a.server "),
        ("cli", "a2a.client "),
        ("cli", "toolnexus call"),
    ];
    let mut at = 0;
    for s in &chain {
        if at < wanted.len() && s.service == wanted[at].0 && s.name.starts_with(wanted[at].1) {
            at += 1;
        }
    }
    assert_eq!(at, wanted.len(), "the ancestors of B's task: {path:#?}");
    // Each link is a direct parent, the caller's span at the top.
    assert_eq!(chain.len(), wanted.len(), "{path:#?}");
    let top = chain.last().expect("a top span");
    assert_eq!(top.parent, PARENT_SPAN, "the CLI continues TRACEPARENT");

    // The model call spans are the ids A's model saw, with the usage.
    let seen = seen_a.lock().expect("seen").clone();
    assert_eq!(seen.len(), 2);
    for t in &seen {
        let t = t.as_deref().expect("traceparent on the model call");
        let span = spans
            .iter()
            .find(|s| s.id == span_id(t))
            .unwrap_or_else(|| panic!("no span {t}: {names:#?}"));
        assert_eq!(span.service, "agent-a");
        assert_eq!(span.name, "chat m");
        assert_eq!(span.attributes["gen_ai.provider.name"], "openai");
        assert_eq!(span.attributes["gen_ai.request.model"], "m");
        assert_eq!(span.attributes["gen_ai.response.model"], "stub-1");
        assert_eq!(span.attributes["gen_ai.usage.input_tokens"], "11");
        assert_eq!(span.attributes["gen_ai.usage.output_tokens"], "7");
    }
    // The server spans say what was called and how it went.
    let a_request = chain[6];
    assert_eq!(
        a_request.attributes["a2a.binding"], "jsonrpc",
        "{a_request:?}"
    );
    // `toolnexus call` streams: the request's answer is an event stream.
    assert_eq!(
        a_request.attributes["a2a.outcome"], "stream",
        "{a_request:?}"
    );

    // The metrics went out over OTLP too.
    let exported = |name: &str| {
        metrics
            .lock()
            .expect("metrics")
            .iter()
            .any(|(service, n)| service == "agent-a" && n == name)
    };
    for _ in 0..500 {
        if exported("gen_ai.client.token.usage") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for name in [
        "a2a.server.requests",
        "a2a.server.request.duration",
        "a2a.tasks",
        "a2a.store.operation.duration",
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
    ] {
        assert!(
            exported(name),
            "{name}: {:?}",
            metrics.lock().expect("metrics")
        );
    }
    drop((a, b));
}

#[tokio::test]
async fn a_follow_up_a_push_delivery_and_a_resubscribe_stay_in_the_tasks_trace() {
    let (rx, got) = receiver().await;
    let rx_url = rx.url().trim_end_matches('/').to_string();
    let (model_a, _) = model(|body| {
        if body["messages"].to_string().contains("Paris") {
            return say("booked");
        }
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "q1", "type": "function",
            "function": {"name": "question", "arguments": "{\"question\":\"Which city?\"}"}}]})
    })
    .await;
    let hooks: Seen = Arc::default();
    let log = hooks.clone();
    let webhook = Stub::start(move |req| {
        log.lock()
            .expect("hooks")
            .push(req.header("traceparent").map(str::to_string));
        HttpResponse {
            status: 204,
            headers: Vec::new(),
            body: Vec::new(),
        }
    })
    .await;
    let a = serve(
        model_a.url(),
        &skills("ask"),
        &["--push-notifications", "--allow-private-webhooks"],
        &otel_env(&rx_url, "agent-a"),
    )
    .await;
    let first = rpc(
        &a.url,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": "book a trip"}]},
            "configuration": {"pushNotificationConfig": {"url": webhook.url()}}}),
        Some(PARENT),
    )
    .await;
    assert_eq!(
        first["result"]["status"]["state"], "input-required",
        "{first}"
    );
    let id = first["result"]["id"].as_str().expect("task id").to_string();
    let ctx = first["result"]["contextId"]
        .as_str()
        .expect("ctx")
        .to_string();
    // The follow-up and the resubscribe come with no traceparent.
    let second = rpc(
        &a.url,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m2", "taskId": id, "contextId": ctx,
            "parts": [{"kind": "text", "text": "Paris"}]}}),
        None,
    )
    .await;
    assert_eq!(second["result"]["status"]["state"], "completed", "{second}");
    let _ = rpc(&a.url, "tasks/resubscribe", json!({"id": id}), None).await;

    let spans = until(&got, |s| {
        s.iter().filter(|x| x.name == "a2a.task").count() >= 2
            && s.iter().filter(|x| x.name == "a2a.webhook").count() >= 2
            && s.iter().any(|x| x.name.contains("resubscribe"))
    })
    .await;
    let names: Vec<String> = spans
        .iter()
        .map(|s| format!("{} {} {}<-{}", s.name, s.trace, s.id, s.parent))
        .collect();
    let turns: Vec<&Got> = spans.iter().filter(|s| s.name == "a2a.task").collect();
    assert_eq!(turns.len(), 2, "two turns: {names:#?}");
    for turn in &turns {
        assert_eq!(
            turn.trace, TRACE_ID,
            "each turn in the task's trace: {names:#?}"
        );
        assert_eq!(turn.attributes["a2a.task.id"], id);
    }
    // The follow-up's turn is the child of the first.
    let ids: Vec<&str> = turns.iter().map(|t| t.id.as_str()).collect();
    assert!(
        turns.iter().any(|t| ids.contains(&t.parent.as_str())),
        "the follow-up continues the first turn: {names:#?}"
    );
    // Every delivery is a span of a turn, and the webhook saw that span.
    let hooks = hooks.lock().expect("hooks").clone();
    assert!(hooks.len() >= 2, "{hooks:?}");
    for h in &hooks {
        let h = h.as_deref().expect("traceparent on the delivery");
        let delivery = spans
            .iter()
            .find(|s| s.id == span_id(h))
            .unwrap_or_else(|| panic!("no span {h}: {names:#?}"));
        assert_eq!(delivery.name, "a2a.webhook");
        assert_eq!(delivery.trace, TRACE_ID);
        assert!(ids.contains(&delivery.parent.as_str()), "{names:#?}");
    }
    // The resubscribe's request span links the task's trace.
    let resub = spans
        .iter()
        .find(|s| s.name.contains("resubscribe"))
        .expect("the resubscribe's span");
    assert_eq!(resub.attributes["a2a.task.trace_id"], TRACE_ID, "{resub:?}");
    drop(a);
}

#[tokio::test]
async fn a_local_skill_call_is_a_span_under_the_model_call_that_asked_for_it() {
    let (rx, got) = receiver().await;
    let rx_url = rx.url().trim_end_matches('/').to_string();
    // The model loads the skill `lookup` (the local `skill` tool), then answers.
    let (model_a, seen) = model(|body| {
        if body["messages"].to_string().contains("\"role\":\"tool\"") {
            return say("done");
        }
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "s1", "type": "function",
            "function": {"name": "skill", "arguments": "{\"name\":\"lookup\"}"}}]})
    })
    .await;
    let a = serve(
        model_a.url(),
        &skills("lookup"),
        &[],
        &otel_env(&rx_url, "agent-a"),
    )
    .await;
    let answer = rpc(
        &a.url,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": "look it up"}]}}),
        Some(PARENT),
    )
    .await;
    assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
    let spans = until(&got, |s| {
        s.iter().any(|x| x.name == "execute_tool skill")
            && s.iter().filter(|x| x.name.starts_with("chat")).count() >= 2
            && s.iter().any(|x| x.name == "a2a.task")
    })
    .await;
    let names: Vec<String> = spans
        .iter()
        .map(|s| format!("{} {} {}<-{}", s.name, s.trace, s.id, s.parent))
        .collect();
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool skill")
        .unwrap_or_else(|| panic!("no local tool span: {names:#?}"));
    assert_eq!(tool.trace, TRACE_ID, "{names:#?}");
    assert_eq!(tool.service, "agent-a");
    assert_eq!(tool.attributes["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool.attributes["gen_ai.tool.name"], "skill");
    assert_eq!(tool.attributes["gen_ai.tool.call.id"], "s1");
    assert_eq!(tool.attributes["toolnexus.tool.source"], "skill");
    // Its parent is the first model call: the span the model saw as its
    // parent on the request that asked for the tool.
    let seen = seen.lock().expect("seen").clone();
    let first = seen[0].as_deref().expect("a traceparent on the model call");
    assert_eq!(tool.parent, span_id(first), "{names:#?}");
    // Up the chain: model call -> task -> A's request -> the caller's span.
    let chain: Vec<&str> = ancestors(&spans, &tool.id)
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        chain,
        [
            "execute_tool skill",
            "chat m",
            "a2a.task",
            "a2a.server message/send"
        ],
        "{names:#?}"
    );
    assert_eq!(
        ancestors(&spans, &tool.id)
            .last()
            .map(|s| s.parent.as_str()),
        Some(PARENT_SPAN)
    );
    // The second model call, which read the tool's result, is not its parent.
    let second = seen[1]
        .as_deref()
        .expect("a traceparent on the second call");
    assert_ne!(tool.parent, span_id(second));
    drop(a);
}

async fn rpc(url: &str, method: &str, params: Value, traceparent: Option<&str>) -> Value {
    use toolnexus_core::Transport;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req =
        toolnexus_core::HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
    if let Some(t) = traceparent {
        req = req.with_header("traceparent", t);
    }
    let resp = toolnexus_host_native::NativeTransport::new()
        .send(req)
        .await
        .expect("an answer");
    let text = String::from_utf8_lossy(&resp.body).to_string();
    // A stream's first event, for the resubscribe.
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap_or(&text);
    serde_json::from_str(json.trim()).unwrap_or(Value::Null)
}

#[tokio::test]
async fn ten_thousand_requests_succeed_with_a_dead_collector_and_the_lost_spans_are_counted() {
    use tokio::io::AsyncBufReadExt;
    // A port nothing listens on: every export is refused.
    let dead = format!("http://127.0.0.1:{}", common::free_port());
    let (model_a, _) = model(|_| say("hi")).await;
    let skill = skills("ask").display().to_string();
    let mut child = tokio::process::Command::new(toolnexus_bin())
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--skills",
            &skill,
            "--llm",
            "openai",
            "--model",
            "m",
            "--llm-base-url",
            model_a.url(),
        ])
        .envs([
            ("OTEL_EXPORTER_OTLP_ENDPOINT", dead.as_str()),
            // A small queue, so that it fills too.
            ("OTEL_BSP_MAX_QUEUE_SIZE", "64"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn serve");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next_line().await.expect("stdout").expect("a line");
    let url = first
        .strip_prefix("listening on ")
        .expect("listening")
        .trim()
        .to_string();
    let made = rpc(
        &url,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": "hello"}]}}),
        None,
    )
    .await;
    let id = made["result"]["id"].as_str().expect("a task").to_string();
    const REQUESTS: usize = 10_000;
    const AT_ONCE: usize = 8;
    let transport = toolnexus_host_native::NativeTransport::new();
    let ok = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..AT_ONCE {
        let (transport, url, id, ok) = (transport.clone(), url.clone(), id.clone(), ok.clone());
        workers.push(tokio::spawn(async move {
            use toolnexus_core::Transport;
            for i in (w..REQUESTS).step_by(AT_ONCE) {
                let body =
                    json!({"jsonrpc": "2.0", "id": i, "method": "tasks/get", "params": {"id": id}});
                let req = toolnexus_core::HttpRequest::post_json(
                    format!("{url}/"),
                    body.to_string().into_bytes(),
                );
                let resp = transport.send(req).await.expect("an answer");
                let v: Value = serde_json::from_slice(&resp.body).expect("JSON");
                assert_eq!(v["result"]["id"], id.as_str(), "{v}");
                ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    }
    for w in workers {
        w.await.expect("worker");
    }
    assert_eq!(ok.load(std::sync::atomic::Ordering::Relaxed), REQUESTS);
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("exited after SIGTERM")
        .expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Each GetTask is a request span and a store read span: every one of
    // them was dropped (queue full) or refused, and counted.
    let count = |after: &str| -> u64 {
        let at = stderr
            .find(after)
            .unwrap_or_else(|| panic!("{after:?} in {stderr}"));
        let before = stderr[..at].trim_end();
        let digits: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        digits.parse().expect("a count")
    };
    let dropped = count("spans dropped");
    let failed = count("not accepted by the collector");
    assert!(
        dropped + failed >= 2 * REQUESTS as u64,
        "dropped {dropped} + failed {failed}: {stderr}"
    );
}

/// `/metrics` as the official Python client's parser reads it: each
/// sample as `(name, labels, value)`.
fn parse_prometheus(text: &str) -> Vec<(String, HashMap<String, String>, f64)> {
    use std::io::Write;
    let python = common::repo_root().join("tests/peers/.venv/bin/python");
    assert!(
        python.exists(),
        "the Python peers are not installed: run `bash tests/peers/setup.sh`"
    );
    let script = "import sys, json\nfrom prometheus_client.parser import text_string_to_metric_families\n\
        out = [[s.name, s.labels, s.value] for f in text_string_to_metric_families(sys.stdin.read()) for s in f.samples]\n\
        print(json.dumps(out))";
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("parser");
    assert!(
        out.status.success(),
        "the parser refused /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<(String, HashMap<String, String>, f64)>>(&out.stdout)
        .expect("samples")
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text_and_count_the_requests_sent() {
    use toolnexus_core::Transport;
    let (model_a, _) = model(|_| say("hi")).await;
    let config = temp_dir("otel-metrics-config");
    std::fs::create_dir_all(&config).expect("mkdir");
    let config_file = config.join("a.json");
    std::fs::write(
        &config_file,
        r#"{"a2a":{"auth":{"apiKeys":{"in":"header","name":"X-API-Key","keys":{"t":"${METRICS_KEY}"}}}}}"#,
    )
    .expect("write");
    let config_arg = config_file.display().to_string();
    let a = serve(
        model_a.url(),
        &skills("ask"),
        &["--metrics", "--config", &config_arg],
        &[("METRICS_KEY", "metrics-key-0123456789")],
    )
    .await;
    let transport = toolnexus_host_native::NativeTransport::new();
    let call = |method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        toolnexus_core::HttpRequest::post_json(format!("{}/", a.url), body.to_string().into_bytes())
            .with_header("X-API-Key", "metrics-key-0123456789")
    };
    let mut ids = Vec::new();
    for i in 0..3 {
        let resp = transport
            .send(call(
                "message/send",
                json!({"message": {"role": "user", "messageId": format!("m{i}"),
                    "parts": [{"kind": "text", "text": "hello"}]}}),
            ))
            .await
            .expect("an answer");
        let v: Value = serde_json::from_slice(&resp.body).expect("JSON");
        assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
        ids.push(v["result"]["id"].as_str().expect("id").to_string());
    }
    for i in 0..5 {
        let resp = transport
            .send(call("tasks/get", json!({"id": ids[i % 3]})))
            .await
            .expect("an answer");
        assert_eq!(resp.status, 200);
    }
    let resp = transport
        .send(call("tasks/get", json!({"id": "no-such-task"})))
        .await
        .expect("an answer");
    assert!(String::from_utf8_lossy(&resp.body).contains("error"));

    // Without the key: refused as a call would be.
    let page = |key: Option<&str>| {
        let mut req = toolnexus_core::HttpRequest {
            method: "GET".into(),
            url: format!("{}/metrics", a.url),
            headers: Vec::new(),
            body: Vec::new(),
        };
        if let Some(k) = key {
            req = req.with_header("X-API-Key", k);
        }
        req
    };
    let refused = transport.send(page(None)).await.expect("an answer");
    assert_eq!(refused.status, 401);
    let resp = transport
        .send(page(Some("metrics-key-0123456789")))
        .await
        .expect("an answer");
    assert_eq!(resp.status, 200);
    let text = String::from_utf8(resp.body).expect("UTF-8");
    let samples = parse_prometheus(&text);
    let value = |name: &str, labels: &[(&str, &str)]| -> f64 {
        samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| *v)
            .sum()
    };
    let requests = "a2a_server_requests_total";
    assert_eq!(
        value(requests, &[("method", "message/send"), ("outcome", "ok")]),
        3.0,
        "{text}"
    );
    assert_eq!(
        value(requests, &[("method", "tasks/get"), ("outcome", "ok")]),
        5.0,
        "{text}"
    );
    assert_eq!(
        value(requests, &[("method", "tasks/get"), ("outcome", "error")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(
            "a2a_server_request_duration_seconds_count",
            &[("method", "tasks/get")]
        ),
        6.0,
        "{text}"
    );
    assert_eq!(
        value("a2a_tasks_total", &[("state", "completed")]),
        3.0,
        "{text}"
    );
    assert_eq!(
        value(
            "gen_ai_client_token_usage_total",
            &[("gen_ai_token_type", "input")]
        ),
        33.0
    );
    assert_eq!(
        value(
            "gen_ai_client_token_usage_total",
            &[("gen_ai_token_type", "output")]
        ),
        21.0
    );
    assert_eq!(
        value("gen_ai_client_operation_duration_seconds_count", &[]),
        3.0,
        "{text}"
    );
    assert!(
        value(
            "a2a_store_operation_duration_seconds_count",
            &[("operation", "save")]
        ) >= 6.0
    );
    assert_eq!(value("a2a_server_active_streams", &[]), 0.0, "{text}");
    drop(a);
}

/// Runs `serve --llm echo` with `args` and `env`, sends one message with
/// the test's `traceparent`, stops it; returns its stderr.
async fn serve_once_stderr(args: &[&str], env: &[(&str, &str)]) -> String {
    use tokio::io::AsyncBufReadExt;
    let mut all = vec!["serve", "--addr", "127.0.0.1:0", "--llm", "echo"];
    all.extend_from_slice(args);
    let mut child = tokio::process::Command::new(toolnexus_bin())
        .args(&all)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn serve");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next_line().await.expect("stdout").expect("a line");
    let url = first
        .strip_prefix("listening on ")
        .expect("listening")
        .trim()
        .to_string();
    let made = rpc(
        &url,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": "hello"}]}}),
        Some(PARENT),
    )
    .await;
    assert_eq!(made["result"]["status"]["state"], "completed", "{made}");
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("exited after SIGTERM")
        .expect("output");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn serve_logs_json_lines_with_the_trace_id_and_keeps_its_short_lines_by_default() {
    let json_lines = serve_once_stderr(&["--log-format", "json"], &[]).await;
    let lines: Vec<Value> = json_lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(lines
        .iter()
        .all(|l| l["timestamp"].is_string() && l["level"].is_string() && l["message"].is_string()));
    let task = lines
        .iter()
        .find(|l| l["state"] == "completed")
        .unwrap_or_else(|| panic!("{json_lines}"));
    assert_eq!(task["trace_id"], TRACE_ID, "{task}");
    assert_eq!(task["level"], "INFO");

    // RUST_LOG filters: warnings only, so none of these lines.
    let quiet = serve_once_stderr(&["--log-format", "text"], &[("RUST_LOG", "warn")]).await;
    assert_eq!(quiet.trim(), "", "{quiet}");

    let short = serve_once_stderr(&[], &[]).await;
    assert!(
        short.lines().all(|l| l.starts_with("toolnexus: ")),
        "{short}"
    );
    assert!(
        short.contains(&format!("completed (trace {TRACE_ID})")),
        "{short}"
    );
}
