//! The spans core records for a request served: request → task → model
//! call → tool call (another agent) → that call's requests, one trace,
//! each the child of the one before.

use super::*;
use crate::testing::{completed, Reply as Scripted, ScriptedPeer};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const MODEL_URL: &str = "http://model.test/v1/chat/completions";

type Server = Arc<A2aServer<Arc<Recording>, Arc<TestHost>, LlmFulfiller<Arc<ScriptedPeer>>>>;
type Log = Arc<Mutex<Vec<crate::SpanRecord>>>;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attr<'a>(span: &'a crate::SpanRecord, key: &str) -> Option<&'a str> {
    span.attributes
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
}

/// A server whose model (scripted) asks for the tool of agent `weather`
/// (scripted too, on the same transport), then answers; every span core
/// records goes to one log.
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn traced_server(hooked: bool) -> (Server, Arc<TestHost>, Arc<ScriptedPeer>, Log) {
    let card = crate::AgentCard::from_value(&json!({"name": "weather",
        "url": "http://agent.test/", "skills": [{"id": "forecast"}]}))
    .expect("a card");
    let agent = crate::Agent::new("http://agent.test/.well-known/agent-card.json");
    let tool = crate::card_tools(&agent, &card).remove(0);
    let asks: &'static str = Box::leak(
        json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call-1", "type": "function", "function": {"name": tool.spec.name,
             "arguments": "{\"task\":\"rain in Paris?\"}"}}]}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7}, "model": "m-2025"})
        .to_string()
        .into_boxed_str(),
    );
    let says = r#"{"choices":[{"message":{"role":"assistant","content":"no rain"}}]}"#;
    let peer = Arc::new(
        ScriptedPeer::new()
            .on_url(
                MODEL_URL,
                vec![Scripted::Http(200, asks), Scripted::Http(200, says)],
            )
            .on(
                "SendMessage",
                vec![Scripted::Result(completed("t-b", "dry"))],
            ),
    );
    let log: Log = Arc::default();
    let sink = log.clone();
    let hook: crate::SpanHook = Arc::new(move |s: &crate::SpanRecord| lock(&sink).push(s.clone()));
    let mut tk = crate::Toolkit::new(peer.clone());
    let _ = tk.add_resolved(&agent, Ok(vec![tool]));
    if hooked {
        tk = tk.with_span_hook(hook.clone());
    }
    let host = Arc::new(TestHost::default());
    if hooked {
        let _ = host.spans.set(hook);
    }
    let fulfiller = LlmFulfiller {
        toolkit: Arc::new(tk),
        llm: crate::llm::LlmConfig::new("http://model.test/v1", crate::llm::LlmStyle::OpenAi, "m"),
    };
    let options = ServerOptions {
        card: Some(card_value().into()),
        ..Default::default()
    };
    let server = A2aServer::new(
        options,
        Arc::new(Recording::default()),
        host.clone(),
        fulfiller,
    );
    (server, host, peer, log)
}

fn card_value() -> Value {
    build_agent_card(&A2aConfig::default(), &[], "http://h:1/")
}

fn send(server: &Server, host: &TestHost, traceparent: Option<&str>) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message":
        {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "will it rain?"}]}}});
    let mut req = HttpRequest::post_json("/", body.to_string().into_bytes());
    if let Some(t) = traceparent {
        req = req.with_header("traceparent", t);
    }
    let resp = run_with_work(server.handle(req), &host.jobs, || server.take_work());
    serde_json::from_slice(&resp.body).expect("JSON")
}

#[test]
fn a_request_served_records_request_task_model_tool_and_a2a_spans_in_one_trace() {
    let (server, host, peer, log) = traced_server(true);
    let v = send(&server, &host, Some(CALLER));
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    let spans = lock(&log).clone();
    let names: Vec<String> = spans
        .iter()
        .map(|s| {
            let (id, parent) = s.ids_hex();
            format!("{} {id}<-{parent}", s.name)
        })
        .collect();
    let find = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {names:#?}"))
    };
    let request = find("a2a.server message/send");
    let task = find("a2a.task");
    let models: Vec<&crate::SpanRecord> = spans.iter().filter(|s| s.name == "chat m").collect();
    let tool_name = crate::wire::trace::joined("execute_tool ", &spans_tool_name(&spans));
    let tool = find(&tool_name);
    let call = find("a2a.client SendMessage");
    assert_eq!(spans.len(), 6, "{names:#?}");
    assert_eq!(models.len(), 2, "{names:#?}");
    // One trace, the caller's.
    for s in &spans {
        assert_eq!(
            hex(&s.context.trace_id),
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "{}",
            s.name
        );
        assert!(s.start_ms <= s.end_ms, "{}", s.name);
    }
    // The parent links: caller → request → task → model → tool → A2A call.
    assert_eq!(hex(&request.parent_span_id), "00f067aa0ba902b7");
    assert_eq!(request.kind, crate::SpanKind::Server);
    assert_eq!(task.parent_span_id, request.context.span_id, "{names:#?}");
    for m in &models {
        assert_eq!(m.parent_span_id, task.context.span_id, "{names:#?}");
        assert_eq!(m.kind, crate::SpanKind::Client);
    }
    assert_eq!(tool.parent_span_id, models[0].context.span_id, "{names:#?}");
    assert_eq!(call.parent_span_id, tool.context.span_id, "{names:#?}");
    // Each span id is the one its request carried on the wire.
    let sent: Vec<(String, Option<String>)> = peer
        .requests()
        .into_iter()
        .map(|(_, r)| (r.url.clone(), r.header("traceparent").map(str::to_string)))
        .collect();
    let wire = |url: &str, n: usize| {
        let t = sent
            .iter()
            .filter(|(u, _)| u == url)
            .nth(n)
            .and_then(|(_, t)| t.as_deref())
            .unwrap_or_else(|| panic!("no traced request {n} to {url}: {sent:?}"));
        crate::TraceContext::parse(t, None).expect("valid").span_id
    };
    assert_eq!(wire(MODEL_URL, 0), models[0].context.span_id);
    assert_eq!(wire(MODEL_URL, 1), models[1].context.span_id);
    assert_eq!(wire("http://agent.test/", 0), call.context.span_id);
    // The attributes hosts export.
    assert_eq!(attr(request, "a2a.outcome"), Some("ok"));
    assert_eq!(attr(request, "a2a.dialect"), Some("0.3"));
    assert_eq!(attr(request, "a2a.binding"), Some("jsonrpc"));
    assert_eq!(attr(task, "a2a.task.state"), Some("completed"));
    assert_eq!(attr(task, "a2a.task.id"), v["result"]["id"].as_str());
    let states: Vec<&str> = task.events.iter().map(|e| e.1).collect();
    assert_eq!(states.first(), Some(&"submitted"), "{states:?}");
    assert_eq!(states.last(), Some(&"completed"), "{states:?}");
    assert_eq!(attr(models[0], "gen_ai.usage.input_tokens"), Some("11"));
    assert_eq!(attr(models[0], "gen_ai.usage.output_tokens"), Some("7"));
    assert_eq!(attr(models[0], "gen_ai.response.model"), Some("m-2025"));
    assert_eq!(attr(models[0], "gen_ai.provider.name"), Some("openai"));
    assert_eq!(
        attr(models[1], "gen_ai.usage.input_tokens"),
        None,
        "not reported"
    );
    assert_eq!(attr(tool, "gen_ai.tool.type"), Some("agent"));
    assert_eq!(attr(call, "rpc.method"), Some("SendMessage"));
    assert_eq!(attr(call, "http.response.status_code"), Some("200"));
    assert!(spans.iter().all(|s| !s.error), "{names:#?}");
}

fn spans_tool_name(spans: &[crate::SpanRecord]) -> String {
    spans
        .iter()
        .find_map(|s| attr(s, "gen_ai.tool.name"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_request_with_no_traceparent_starts_a_trace_and_no_hook_records_nothing() {
    let (server, host, _peer, log) = traced_server(true);
    let v = send(&server, &host, None);
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    let spans = lock(&log).clone();
    let request = spans
        .iter()
        .find(|s| s.name == "a2a.server message/send")
        .expect("the request's span");
    assert_eq!(request.parent_span_id, [0; 8], "a root");
    assert!(spans.len() >= 6);
    assert!(spans
        .iter()
        .all(|s| s.context.trace_id == request.context.trace_id));

    // Without a hook: no span, and no trace on the wire.
    let (server, host, peer, log) = traced_server(false);
    let v = send(&server, &host, None);
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    assert!(lock(&log).is_empty());
    assert!(peer
        .requests()
        .iter()
        .all(|(_, r)| r.header("traceparent").is_none()));
}
