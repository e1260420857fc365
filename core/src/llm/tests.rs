//! The LLM loop against a scripted model endpoint with virtual time.

use super::*;
use crate::testing::{block_on, VirtualTime};
use crate::HostBase;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Poll;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// What the scripted endpoint does with the next request.
enum Canned {
    /// A JSON body with this status.
    Json(u16, Value),
    /// A raw body with this status.
    Raw(u16, &'static str),
    /// No HTTP answer at all.
    Fail(String),
    /// Never answers.
    Hang,
}

/// A model endpoint answering requests from a queue, on virtual time.
#[derive(Default)]
struct ModelEndpoint {
    time: VirtualTime,
    replies: Mutex<VecDeque<Canned>>,
    log: Mutex<Vec<HttpRequest>>,
}

impl ModelEndpoint {
    fn new(replies: Vec<Canned>) -> Self {
        ModelEndpoint {
            replies: Mutex::new(replies.into()),
            ..Default::default()
        }
    }

    fn requests(&self) -> Vec<HttpRequest> {
        self.log.lock().expect("log lock").clone()
    }

    fn body(&self, i: usize) -> Value {
        let req = &self.requests()[i];
        serde_json::from_slice(&req.body).expect("request bodies are JSON")
    }
}

impl crate::HostBase for ModelEndpoint {
    fn now_ms(&self) -> u64 {
        self.time.now()
    }
    fn new_id(&self) -> String {
        "id".into()
    }
}

impl Transport for ModelEndpoint {
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> + crate::MaybeSend {
        self.log.lock().expect("log lock").push(request);
        let next = self.replies.lock().expect("replies lock").pop_front();
        let mut out = match next {
            Some(Canned::Json(status, v)) => {
                Some(Ok(HttpResponse::json(status, v.to_string().into_bytes())))
            }
            Some(Canned::Raw(status, text)) => Some(Ok(HttpResponse {
                status,
                headers: vec![],
                body: text.as_bytes().to_vec(),
            })),
            Some(Canned::Fail(e)) => Some(Err(TransportError::new(e))),
            Some(Canned::Hang) => None,
            None => Some(Err(TransportError::new("no reply scripted"))),
        };
        std::future::poll_fn(move |_| match out.take() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        })
    }

    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + crate::MaybeSend {
        self.time.sleep_until(at_ms)
    }
}

const KEY: &str = "sk-test-0123456789";

fn openai() -> LlmConfig {
    let mut cfg = LlmConfig::new("http://llm.test/v1/", LlmStyle::OpenAi, "gpt-test");
    cfg.api_key = Some(KEY.into());
    cfg
}

fn anthropic(base: &str) -> LlmConfig {
    let mut cfg = LlmConfig::new(base, LlmStyle::Anthropic, "claude-test");
    cfg.api_key = Some(KEY.into());
    cfg
}

fn lookup_tool() -> ToolSpec {
    ToolSpec {
        name: "lookup".into(),
        description: "Look something up".into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        source: crate::ToolSource::Host,
    }
}

fn say(text: &str) -> Canned {
    Canned::Json(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": text}}]}),
    )
}

fn openai_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

fn ask_tools(calls: Vec<Value>) -> Canned {
    Canned::Json(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}),
    )
}

/// A tool that echoes its call: `"<name>(<arguments>)"`.
async fn echo(call: ToolCall) -> ToolResult {
    ToolResult::ok(format!("{}({})", call.name, call.arguments))
}

fn go(endpoint: &ModelEndpoint, cfg: &LlmConfig, tools: Vec<ToolSpec>) -> Result<RunResult, Error> {
    block_on(run(endpoint, cfg, "what is new?".into(), tools, echo))
}

fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.header(name)
}

#[test]
fn openai_plain_answer() {
    let mut cfg = openai();
    cfg.system_prompt = Some("Be terse.".into());
    cfg.headers = vec![("X-Org".into(), "acme".into())];
    let endpoint = ModelEndpoint::new(vec![Canned::Json(
        200,
        json!({"model": "gpt-test-2024",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Nothing much."}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}),
    )]);
    let r = go(&endpoint, &cfg, vec![lookup_tool()]).expect("answer");
    assert_eq!(r.text, "Nothing much.");
    assert_eq!((r.turns, r.tool_call_count, r.tool_calls.len()), (1, 0, 0));
    assert_eq!(
        r.usage,
        Usage {
            prompt_tokens: 7,
            completion_tokens: 3,
            total_tokens: 10
        }
    );
    assert_eq!(r.model, "gpt-test-2024");

    let req = &endpoint.requests()[0];
    assert_eq!(
        (req.method.as_str(), req.url.as_str()),
        ("POST", "http://llm.test/v1/chat/completions")
    );
    assert_eq!(
        header(req, "authorization"),
        Some("Bearer sk-test-0123456789")
    );
    assert_eq!(header(req, "content-type"), Some("application/json"));
    assert_eq!(header(req, "x-org"), Some("acme"));
    assert_eq!(
        endpoint.body(0),
        json!({"model": "gpt-test", "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "what is new?"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "Look something up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]})
    );
}

#[test]
fn openai_seed_reply_without_usage_or_model() {
    // The reference examples' stub: no usage, no model; no key, no tools.
    let cfg = LlmConfig::new("http://127.0.0.1:9", LlmStyle::OpenAi, "test-model");
    let endpoint = ModelEndpoint::new(vec![Canned::Json(
        200,
        json!({"choices": [{"message": {"content": "ok"}}]}),
    )]);
    let r = go(&endpoint, &cfg, vec![]).expect("answer");
    assert_eq!((r.text.as_str(), r.model.as_str()), ("ok", "test-model"));
    assert_eq!(r.usage, Usage::default());
    let req = &endpoint.requests()[0];
    assert_eq!(req.url, "http://127.0.0.1:9/chat/completions");
    assert_eq!(header(req, "authorization"), None);
    assert!(
        endpoint.body(0).get("tools").is_none(),
        "no tools key when there are no tools"
    );
}

#[test]
fn openai_tool_loop() {
    let endpoint = ModelEndpoint::new(vec![
        ask_tools(vec![openai_call("call_1", "lookup", r#"{"q":"rust"}"#)]),
        Canned::Json(
            200,
            json!({"choices": [{"message": {"content": "Rust 2024 is out."}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}),
        ),
    ]);
    let seen = Mutex::new(Vec::new());
    let execute = |call: ToolCall| {
        seen.lock().expect("seen lock").push(call.clone());
        async { ToolResult::ok("edition 2024 released") }
    };
    let r = block_on(run(
        &endpoint,
        &openai(),
        "what is new?".into(),
        vec![lookup_tool()],
        execute,
    ))
    .expect("answer");

    let seen = seen.into_inner().expect("seen lock");
    let expected = ToolCall {
        id: "call_1".into(),
        name: "lookup".into(),
        arguments: json!({"q": "rust"}),
        // Asked for by the first model call.
        turn: 1,
    };
    assert_eq!(seen, [expected]);
    assert_eq!(
        (r.text.as_str(), r.turns, r.tool_call_count),
        ("Rust 2024 is out.", 2, 1)
    );
    assert_eq!(
        r.tool_calls,
        [ToolCallRecord {
            name: "lookup".into(),
            arguments: json!({"q": "rust"}),
            output: "edition 2024 released".into(),
            is_error: false,
        }]
    );
    assert_eq!(
        r.usage,
        Usage {
            prompt_tokens: 30,
            completion_tokens: 7,
            total_tokens: 37
        }
    );
    assert_eq!(
        endpoint.body(1)["messages"],
        json!([
            {"role": "user", "content": "what is new?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"rust\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "edition 2024 released"},
        ])
    );
}

#[test]
fn two_tool_calls_in_one_turn_run_concurrently() {
    let endpoint = ModelEndpoint::new(vec![
        ask_tools(vec![
            openai_call("a", "lookup", r#"{"q":"a"}"#),
            openai_call("b", "lookup", r#"{"q":"b"}"#),
        ]),
        say("both done"),
    ]);
    // Each call starts, then waits for the other to have started: run one
    // after the other, the first would give up and report it ran alone.
    let started = AtomicUsize::new(0);
    let execute = |call: ToolCall| {
        let started = &started;
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            let mut spins = 0;
            let together = std::future::poll_fn(|cx| {
                if started.load(Ordering::SeqCst) >= 2 {
                    return Poll::Ready(true);
                }
                spins += 1;
                if spins > 1_000 {
                    return Poll::Ready(false);
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            })
            .await;
            match together {
                true => ToolResult::ok(format!("{} ran alongside", call.id)),
                false => ToolResult::error(format!("{} ran alone", call.id)),
            }
        }
    };
    let r = block_on(run(
        &endpoint,
        &openai(),
        "go".into(),
        vec![lookup_tool()],
        execute,
    ))
    .expect("answer");
    let outputs: Vec<&str> = r.tool_calls.iter().map(|c| c.output.as_str()).collect();
    assert_eq!(outputs, ["a ran alongside", "b ran alongside"]);
    let tool_messages: Vec<Value> = endpoint.body(1)["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].clone())
        .collect();
    assert_eq!(
        tool_messages,
        [json!("a"), json!("b")],
        "results go back in the order of the calls"
    );
}

#[test]
fn bad_json_arguments_are_fed_back_as_an_error() {
    let endpoint = ModelEndpoint::new(vec![
        ask_tools(vec![
            openai_call("bad", "lookup", "{q: rust"),
            openai_call("good", "lookup", r#"{"q":"ok"}"#),
        ]),
        say("retrying later"),
    ]);
    let calls = AtomicUsize::new(0);
    let execute = |call: ToolCall| {
        calls.fetch_add(1, Ordering::SeqCst);
        echo(call)
    };
    let r = block_on(run(
        &endpoint,
        &openai(),
        "go".into(),
        vec![lookup_tool()],
        execute,
    ))
    .expect("answer");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the tool is never called with garbage"
    );
    assert_eq!(r.tool_call_count, 2);
    let bad = &r.tool_calls[0];
    assert!(bad.is_error);
    assert_eq!(bad.arguments, json!("{q: rust"), "the raw text is recorded");
    assert!(bad.output.contains("not valid JSON"), "{}", bad.output);
    assert_eq!(
        (r.tool_calls[1].output.as_str(), r.tool_calls[1].is_error),
        (r#"lookup({"q":"ok"})"#, false)
    );

    let messages = endpoint.body(1)["messages"].clone();
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"], "{q: rust",
        "echoed verbatim"
    );
    assert_eq!(messages[2]["tool_call_id"], "bad");
    assert_eq!(messages[2]["content"], json!(bad.output));
    assert_eq!(messages[3]["tool_call_id"], "good");
}

#[test]
fn only_bad_arguments_skip_the_tool_round() {
    let endpoint = ModelEndpoint::new(vec![
        ask_tools(vec![openai_call("x", "lookup", "[1, 2]")]),
        say("ok"),
    ]);
    let mut m = RunMachine::new(openai(), "go".into(), vec![lookup_tool()]);
    let LlmStep::Send { request, .. } = m.start(0) else {
        panic!("expected a request")
    };
    let first = block_on(endpoint.send(request));
    // No CallTools: the rejection goes straight back to the model.
    let LlmStep::Send { request, .. } = m.handle_response(1, first) else {
        panic!("expected a request")
    };
    let second = block_on(endpoint.send(request));
    let LlmStep::Done(Ok(r)) = m.handle_response(2, second) else {
        panic!("expected a result")
    };
    assert_eq!(r.turns, 2);
    assert!(r.tool_calls[0].is_error);
    assert!(
        r.tool_calls[0].output.contains("not a JSON object"),
        "{}",
        r.tool_calls[0].output
    );
}

#[test]
fn anthropic_plain_answer() {
    let mut cfg = anthropic("https://api.anthropic.test");
    cfg.system_prompt = Some("Be terse.".into());
    let endpoint = ModelEndpoint::new(vec![Canned::Json(
        200,
        json!({"id": "msg_1", "type": "message",
        "model": "claude-test-1", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": " there"}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 9, "output_tokens": 4}}),
    )]);
    let r = go(&endpoint, &cfg, vec![lookup_tool()]).expect("answer");
    assert_eq!(
        (r.text.as_str(), r.turns, r.model.as_str()),
        ("Hello there", 1, "claude-test-1")
    );
    assert_eq!(
        r.usage,
        Usage {
            prompt_tokens: 9,
            completion_tokens: 4,
            total_tokens: 13
        }
    );

    let req = &endpoint.requests()[0];
    assert_eq!(req.url, "https://api.anthropic.test/v1/messages");
    assert_eq!(header(req, "x-api-key"), Some(KEY));
    assert_eq!(header(req, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(req, "content-type"), Some("application/json"));
    assert_eq!(header(req, "authorization"), None);
    assert_eq!(
        endpoint.body(0),
        json!({"model": "claude-test", "max_tokens": 4096, "system": "Be terse.",
            "messages": [{"role": "user", "content": "what is new?"}],
            "tools": [{"name": "lookup", "description": "Look something up",
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]})
    );
}

#[test]
fn anthropic_tool_use_loop() {
    let first = json!([
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "rust"}},
        {"type": "tool_use", "id": "toolu_2", "name": "missing", "input": {}},
    ]);
    let endpoint = ModelEndpoint::new(vec![
        Canned::Json(
            200,
            json!({"content": first, "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5}}),
        ),
        Canned::Json(
            200,
            json!({"content": [{"type": "text", "text": "Found it."}],
            "usage": {"input_tokens": 30, "output_tokens": 3}}),
        ),
    ]);
    let execute = |call: ToolCall| async move {
        match call.name.as_str() {
            "lookup" => ToolResult::ok("edition 2024"),
            other => ToolResult::error(format!("Unknown tool: {other}")),
        }
    };
    let r = block_on(run(
        &endpoint,
        &anthropic("https://api.anthropic.test/"),
        "q".into(),
        vec![lookup_tool()],
        execute,
    ))
    .expect("answer");
    assert_eq!(
        (r.text.as_str(), r.turns, r.tool_call_count),
        ("Found it.", 2, 2)
    );
    assert_eq!(
        r.usage,
        Usage {
            prompt_tokens: 40,
            completion_tokens: 8,
            total_tokens: 48
        }
    );
    assert_eq!(r.model, "claude-test");
    assert_eq!(
        endpoint.requests()[1].url,
        "https://api.anthropic.test/v1/messages"
    );
    assert_eq!(
        endpoint.body(1)["messages"],
        json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": first},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "edition 2024"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Unknown tool: missing", "is_error": true},
            ]},
        ])
    );
}

#[test]
fn base_url_already_ending_in_v1_is_not_doubled() {
    for base in ["http://llm/v1", "http://llm/v1/", "http://llm"] {
        assert_eq!(
            anthropic(base).endpoint(),
            "http://llm/v1/messages",
            "{base}"
        );
    }
    for (base, url) in [
        ("http://llm/", "http://llm/chat/completions"),
        ("http://llm/v1//", "http://llm/v1/chat/completions"),
        ("http://llm/api/v1", "http://llm/api/v1/chat/completions"),
    ] {
        assert_eq!(LlmConfig::new(base, LlmStyle::OpenAi, "m").endpoint(), url);
    }
    let endpoint = ModelEndpoint::new(vec![Canned::Json(200, json!({"content": []}))]);
    let r = go(&endpoint, &anthropic("http://llm/v1"), vec![]).expect("answer");
    assert_eq!(r.text, "");
    assert_eq!(endpoint.requests()[0].url, "http://llm/v1/messages");
    assert!(endpoint.body(0).get("system").is_none());
}

#[test]
fn configured_headers_replace_defaults() {
    let mut cfg = anthropic("http://llm");
    cfg.headers = vec![("Anthropic-Version".into(), "2024-01-01".into())];
    let endpoint = ModelEndpoint::new(vec![Canned::Json(200, json!({"content": []}))]);
    go(&endpoint, &cfg, vec![]).expect("answer");
    let req = &endpoint.requests()[0];
    let versions: Vec<&str> = req
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("anthropic-version"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(versions, ["2024-01-01"]);
}

#[test]
fn max_turns_reached_ends_with_the_last_text() {
    let mut cfg = openai();
    cfg.max_turns = 2;
    let endpoint = ModelEndpoint::new(vec![
        ask_tools(vec![openai_call("1", "lookup", "{}")]),
        Canned::Json(
            200,
            json!({"choices": [{"message": {"content": "still digging",
            "tool_calls": [openai_call("2", "lookup", "{}")]}}]}),
        ),
        say("never asked for"),
    ]);
    let calls = AtomicUsize::new(0);
    let execute = |call: ToolCall| {
        calls.fetch_add(1, Ordering::SeqCst);
        echo(call)
    };
    let r = block_on(run(
        &endpoint,
        &cfg,
        "go".into(),
        vec![lookup_tool()],
        execute,
    ))
    .expect("answer");
    assert_eq!(
        (r.text.as_str(), r.turns, r.tool_call_count),
        ("still digging", 2, 1)
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the last turn's calls are not run"
    );
    assert_eq!(endpoint.requests().len(), 2);
}

#[test]
fn http_500_is_a_status_error() {
    let endpoint = ModelEndpoint::new(vec![Canned::Raw(500, "upstream exploded")]);
    let err = go(&endpoint, &openai(), vec![]).expect_err("a 500 fails the run");
    assert_eq!(
        err,
        Error::Status {
            status: 500,
            url: "http://llm.test/v1/chat/completions".into(),
            body: "upstream exploded".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "HTTP 500 from http://llm.test/v1/chat/completions: upstream exploded"
    );
}

#[test]
fn non_json_reply_is_malformed() {
    let endpoint = ModelEndpoint::new(vec![Canned::Raw(200, "<html>gateway</html>")]);
    let err = go(&endpoint, &openai(), vec![]).expect_err("not JSON");
    assert_eq!(err.kind(), "malformed");
    assert!(
        err.to_string()
            .contains("is not JSON: <html>gateway</html>"),
        "{err}"
    );
}

#[test]
fn shapeless_replies_are_malformed() {
    let cases = [
        (
            openai(),
            json!({"object": "list"}),
            "has no choices[0].message",
        ),
        (
            openai(),
            json!({"choices": []}),
            "has no choices[0].message",
        ),
        (
            openai(),
            json!({"choices": [{"message": {"tool_calls": {}}}]}),
            "not an array",
        ),
        (
            openai(),
            json!({"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]}),
            "without a function.name",
        ),
        (
            openai(),
            json!({"error": {"message": "model overloaded"}}),
            "is an error: model overloaded",
        ),
        (
            anthropic("http://llm"),
            json!({"type": "message"}),
            "has no content[] array",
        ),
        (
            anthropic("http://llm"),
            json!({"content": [{"type": "tool_use", "name": "x"}]}),
            "without an id",
        ),
    ];
    for (cfg, reply, expected) in cases {
        let endpoint = ModelEndpoint::new(vec![Canned::Json(200, reply.clone())]);
        let err = go(&endpoint, &cfg, vec![]).expect_err("malformed");
        assert_eq!(err.kind(), "malformed", "{reply}");
        assert!(err.to_string().contains(expected), "{reply}: {err}");
    }
}

#[test]
fn odd_replies_never_panic() {
    let odd = [
        json!(null),
        json!([1, 2]),
        json!("text"),
        json!({"choices": "x"}),
        json!({"choices": [{"message": "hi"}]}),
        json!({"choices": [{"message": {"content": 5, "tool_calls": [null, 3]}}]}),
        json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, 7]}}], "usage": "lots"}),
        json!({"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": 7}}]}}]}),
        json!({"content": [null, {"type": "text"}, {"type": "tool_use", "id": "i", "name": "n", "input": "s"}]}),
        json!({"content": [], "usage": {"input_tokens": -1, "output_tokens": 1.5}}),
        json!({"error": "plain string error"}),
    ];
    for style in [LlmStyle::OpenAi, LlmStyle::Anthropic] {
        for reply in &odd {
            let mut cfg = LlmConfig::new("http://llm", style, "m");
            cfg.max_turns = 2;
            let endpoint = ModelEndpoint::new(vec![
                Canned::Json(200, reply.clone()),
                Canned::Json(200, reply.clone()),
            ]);
            // Either outcome is fine; the point is an answer rather than a panic.
            let _ = go(&endpoint, &cfg, vec![]);
        }
    }
}

#[test]
fn timeout_fails_the_run() {
    let mut cfg = openai();
    cfg.timeout = Duration::from_millis(5_000);
    let endpoint = ModelEndpoint::new(vec![Canned::Hang]);
    let err = go(&endpoint, &cfg, vec![]).expect_err("no answer");
    assert_eq!(
        err,
        Error::transport(
            "LLM request to http://llm.test/v1/chat/completions timed out after 5000ms"
        )
    );
    assert_eq!(endpoint.now_ms(), 5_000);
}

#[test]
fn each_model_request_gets_its_own_deadline() {
    let mut cfg = openai();
    cfg.timeout = Duration::from_millis(1_000);
    let mut m = RunMachine::new(cfg, "go".into(), vec![lookup_tool()]);
    let LlmStep::Send { deadline_ms, .. } = m.start(100) else {
        panic!("expected a request")
    };
    assert_eq!(deadline_ms, 1_100);
    let reply = HttpResponse::json(
        200,
        ask_tools(vec![openai_call("1", "lookup", "{}")]).body(),
    );
    let LlmStep::Work(calls) = m.handle_response(200, Ok(reply)) else {
        panic!("expected tool calls")
    };
    assert_eq!(calls.len(), 1);
    let LlmStep::Send { deadline_ms, .. } = m.handle_tool_results(5_000, vec![ToolResult::ok("x")])
    else {
        panic!("expected a request")
    };
    assert_eq!(deadline_ms, 6_000);
}

#[test]
fn transport_failure_fails_the_run() {
    let endpoint = ModelEndpoint::new(vec![Canned::Fail("connection refused".into())]);
    let err = go(&endpoint, &openai(), vec![]).expect_err("no answer");
    assert_eq!(
        err,
        Error::transport(
            "LLM request to http://llm.test/v1/chat/completions failed: connection refused"
        )
    );
}

#[test]
fn the_api_key_never_appears_in_errors_or_debug_output() {
    let mut cfg = openai();
    cfg.headers = vec![("X-Secret".into(), "hdr-secret-value".into())];
    let echoes = [
        Canned::Raw(
            401,
            "invalid key sk-test-0123456789 (header hdr-secret-value)",
        ),
        Canned::Raw(200, "not json, key=sk-test-0123456789"),
        Canned::Fail("proxy refused Bearer sk-test-0123456789".into()),
        Canned::Json(200, json!({"weird": "sk-test-0123456789"})),
    ];
    for canned in echoes {
        let endpoint = ModelEndpoint::new(vec![canned]);
        let err = go(&endpoint, &cfg, vec![]).expect_err("fails");
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(
                !text.contains(KEY) && !text.contains("hdr-secret-value"),
                "{text}"
            );
            assert!(text.contains("[redacted]"), "{text}");
        }
    }
    let mut m = RunMachine::new(cfg.clone(), "go".into(), vec![]);
    let step = m.start(0);
    for text in [format!("{cfg:?}"), format!("{step:?}"), format!("{m:?}")] {
        assert!(
            !text.contains(KEY) && !text.contains("hdr-secret-value"),
            "{text}"
        );
    }
}

#[test]
fn llm_style_parses_from_its_name() {
    assert_eq!("openai".parse::<LlmStyle>(), Ok(LlmStyle::OpenAi));
    assert_eq!(" Anthropic ".parse::<LlmStyle>(), Ok(LlmStyle::Anthropic));
    let err = "gemini".parse::<LlmStyle>().expect_err("unknown");
    assert_eq!(err.kind(), "misuse");
    assert!(
        err.to_string().contains("\"openai\" or \"anthropic\""),
        "{err}"
    );
    assert_eq!(LlmStyle::Anthropic.to_string(), "anthropic");
}

#[test]
fn config_defaults() {
    let cfg = LlmConfig::new("http://llm", LlmStyle::OpenAi, "m");
    assert_eq!(
        (
            cfg.max_turns,
            cfg.max_tokens,
            cfg.timeout.as_millis() as u64
        ),
        (10, 4096, 120_000)
    );
    assert_eq!(
        (cfg.api_key, cfg.system_prompt, cfg.headers.len()),
        (None, None, 0)
    );
}

#[test]
fn inputs_out_of_order_are_misuse_and_done_repeats() {
    let mut m = RunMachine::new(openai(), "go".into(), vec![lookup_tool()]);
    let LlmStep::Send { .. } = m.start(0) else {
        panic!("expected a request")
    };
    let reply = HttpResponse::json(
        200,
        ask_tools(vec![openai_call("1", "lookup", "{}")]).body(),
    );
    let LlmStep::Work(_) = m.handle_response(1, Ok(reply)) else {
        panic!("expected tool calls")
    };
    let LlmStep::Done(Err(err)) = m.handle_tool_results(2, vec![]) else {
        panic!("expected misuse")
    };
    assert_eq!(
        err,
        Error::Misuse("handle_tool_results got 0 results for 1 tool calls".into())
    );
    // Finished: every input answers the same outcome.
    let LlmStep::Done(again) = m.handle_timeout(3) else {
        panic!("expected done")
    };
    assert_eq!(again, Err(err));

    let mut m = RunMachine::new(openai(), "go".into(), vec![]);
    let LlmStep::Done(Err(err)) = m.handle_tool_results(0, vec![]) else {
        panic!("expected misuse")
    };
    assert_eq!(err.kind(), "misuse");
}

#[test]
fn run_result_serialises_in_camel_case() {
    let r = RunResult {
        text: "t".into(),
        tool_calls: vec![ToolCallRecord {
            name: "n".into(),
            arguments: json!({}),
            output: "o".into(),
            is_error: true,
        }],
        tool_call_count: 1,
        turns: 2,
        usage: Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            total_tokens: 3,
        },
        model: "m".into(),
        pending: None,
    };
    assert_eq!(
        serde_json::to_value(&r).expect("json"),
        json!({"text": "t", "toolCalls": [{"name": "n", "arguments": {}, "output": "o", "isError": true}],
            "toolCallCount": 1, "turns": 2, "usage": {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3},
            "model": "m"})
    );
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn run_is_send_for_native_servers() {
    fn assert_send<T: Send>(_: &T) {}
    let endpoint = ModelEndpoint::new(vec![]);
    let cfg = openai();
    assert_send(&run(&endpoint, &cfg, "go".into(), vec![], echo));
}

impl Canned {
    /// The body bytes of a JSON reply, for feeding a machine by hand.
    fn body(self) -> Vec<u8> {
        match self {
            Canned::Json(_, v) => v.to_string().into_bytes(),
            _ => Vec::new(),
        }
    }
}

#[test]
fn the_run_is_a_machine_on_the_one_driver_and_an_abort_fails_it() {
    let endpoint = ModelEndpoint::new(vec![Canned::Hang]);
    let mut m = RunMachine::new(openai(), "go".into(), vec![]);
    let no_tools = |_: Vec<ToolCall>| std::future::ready(Vec::new());
    let aborted = block_on(crate::host::driver::drive_with_work(
        &mut m,
        &endpoint,
        std::future::ready(()),
        |_| {},
        no_tools,
    ));
    assert_eq!(
        aborted,
        Err(Error::transport(
            "the LLM run was aborted (model calls made: 1)"
        ))
    );
}

#[test]
fn a_step_shows_header_names_never_their_values() {
    let mut m = RunMachine::new(openai(), "go".into(), vec![]);
    let shown = format!("{:?}", m.start(0));
    assert!(shown.contains("Authorization"), "{shown}");
    assert!(!shown.contains(KEY), "the API key leaked: {shown}");
}

/// A tool that suspends (SPEC §10) when called with `{"q":"login"}`, else echoes.
async fn suspends_on_login(call: ToolCall) -> ToolResult {
    if call.arguments["q"] == "login" {
        return ToolResult {
            output: "Login required: https://auth.test/go".into(),
            is_error: true,
            metadata: Some(json!({"pending": {"id": "r1", "kind": "authorization",
                "prompt": "Sign in to the calendar", "url": "https://auth.test/go"}})),
        };
    }
    echo(call).await
}

#[test]
fn a_suspending_tool_halts_the_run_with_its_request_on_the_first_in_call_order() {
    let endpoint = ModelEndpoint::new(vec![
        ask_tools(vec![
            openai_call("c1", "lookup", r#"{"q":"news"}"#),
            openai_call("c2", "lookup", r#"{"q":"login"}"#),
        ]),
        say("never asked"),
    ]);
    let r = block_on(run(
        &endpoint,
        &openai(),
        "what is new?".into(),
        vec![lookup_tool()],
        suspends_on_login,
    ))
    .expect("a pending run is not an error");
    assert_eq!(
        endpoint.requests().len(),
        1,
        "no model call after the suspension"
    );
    let pending = r.pending.as_ref().expect("pending");
    assert_eq!(pending["id"], "r1");
    assert_eq!(pending["kind"], "authorization");
    assert_eq!(r.text, "Sign in to the calendar");
    let v = serde_json::to_value(&r).expect("json");
    assert_eq!(v["pending"]["url"], "https://auth.test/go");
    // A result whose metadata.pending is not a request is a plain error.
    let plain = ToolResult {
        output: "x".into(),
        is_error: true,
        metadata: Some(json!({"pending": true})),
    };
    assert!(pending_request(&plain).is_none());
}

#[test]
fn a_conversation_puts_the_earlier_turns_before_the_prompt_alternating() {
    let endpoint = ModelEndpoint::new(vec![say("booked")]);
    let msg = |role: crate::Role, text: &str| crate::Message {
        role,
        message_id: String::new(),
        parts: vec![text.into()],
        context_id: None,
        task_id: None,
    };
    use crate::Role::{Agent, User};
    let history = [
        msg(User, "book a trip"),
        msg(Agent, "Which city?"),
        msg(Agent, "And which day?"),
        msg(User, ""),
        msg(User, "Paris"),
    ];
    let mut cfg = openai();
    cfg.system_prompt = Some("be brief".into());
    let r = block_on(run_conversation(
        &endpoint,
        &cfg,
        &history,
        "on Friday".into(),
        vec![],
        echo,
    ))
    .expect("run");
    assert_eq!(r.text, "booked");
    assert_eq!(
        endpoint.body(0)["messages"],
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "book a trip"},
            {"role": "assistant", "content": "Which city?\n\nAnd which day?"},
            {"role": "user", "content": "Paris\n\non Friday"},
        ])
    );
}

/// A traced run hands the toolkit's span hook one span per local tool call,
/// the child of the model call that asked for it: the span id that call's
/// request carried in its `traceparent`.
#[cfg(feature = "server")]
#[test]
fn a_traced_run_hands_each_local_tool_call_to_the_span_hook_under_its_model_call() {
    use crate::client::toolkit::Toolkit;
    use std::sync::Arc;
    let endpoint = Arc::new(ModelEndpoint::new(vec![
        ask_tools(vec![openai_call("call_1", "lookup", r#"{"q":"rust"}"#)]),
        ask_tools(vec![openai_call("call_2", "lookup", r#"{"q":"wasm"}"#)]),
        say("done"),
    ]));
    let spans: Arc<Mutex<Vec<crate::SpanRecord>>> = Arc::default();
    let log = spans.clone();
    let mut tk = Toolkit::new(endpoint.clone()).with_span_hook(Arc::new(move |s| {
        log.lock().expect("spans").push(s.clone())
    }));
    tk.add_host_tool(
        lookup_tool(),
        Arc::new(|args| {
            let failed = args["q"] == "wasm";
            Box::pin(std::future::ready(if failed {
                ToolResult::error("no such thing")
            } else {
                ToolResult::ok("found")
            }))
        }),
    );
    let trace = crate::TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        None,
    )
    .expect("a traceparent");
    let r = block_on(tk.run_llm_traced(&openai(), &[], "look", false, &|_, _| {}, Some(&trace)))
        .expect("answer");
    assert_eq!(r.text, "done");
    let all = spans.lock().expect("spans").clone();
    let spans: Vec<&crate::SpanRecord> = all
        .iter()
        .filter(|s| s.name.starts_with("execute_tool"))
        .collect();
    assert_eq!(spans.len(), 2, "one span per tool call");
    let requests = endpoint.requests();
    // And one per model call, the children of the run's span, with the ids
    // their requests carried.
    let models: Vec<&crate::SpanRecord> =
        all.iter().filter(|s| s.name == "chat gpt-test").collect();
    assert_eq!(models.len(), 3);
    for (i, m) in models.iter().enumerate() {
        let sent = header(&requests[i], "traceparent").expect("a traced model call");
        let sent = crate::TraceContext::parse(sent, None).expect("valid");
        assert_eq!(m.context.span_id, sent.span_id, "model call {i}");
        assert_eq!(m.parent_span_id, trace.span_id);
    }
    for (i, span) in spans.iter().enumerate() {
        let sent = header(&requests[i], "traceparent").expect("a traced model call");
        let model_call = crate::TraceContext::parse(sent, None).expect("valid");
        assert_eq!(span.context.trace_id, trace.trace_id);
        assert_eq!(span.parent_span_id, model_call.span_id, "span {i}");
        assert_ne!(span.context.span_id, model_call.span_id);
        assert_eq!(span.name, "execute_tool lookup");
        let attr = |k: &str| {
            span.attributes
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(attr("gen_ai.tool.name"), Some("lookup"));
        assert_eq!(attr("gen_ai.tool.call.id"), Some(["call_1", "call_2"][i]));
        assert_eq!(attr("toolnexus.tool.source"), Some("host"));
        assert_eq!(span.error, i == 1, "the second call failed");
        assert!(span.start_ms <= span.end_ms);
    }
}
