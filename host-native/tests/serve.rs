//! The inbound half over real HTTP: a served skill set answering the native
//! client, exact reference bodies, both LLM styles, stores, bad input.

mod common;

use common::{json_response, openai_stub, say, Stub, CARD_PATH};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use toolnexus_core::llm::{LlmConfig, LlmStyle};
use toolnexus_core::server::{build_agent_card, A2aConfig, CorsOrigin, Provider, TaskEvent};
use toolnexus_core::skills::{Skill, SkillSet};
use toolnexus_core::{HttpRequest, Transport};
use toolnexus_host_native::store::StoreConfig;
use toolnexus_host_native::{
    agent_tools, serve, Agent, Model, NativeTransport, ServeHandle, ServeOptions,
};

fn skills(list: &[(&str, &str, &str)]) -> SkillSet {
    let mut set = SkillSet::new();
    for (name, description, content) in list {
        set.add(Skill {
            name: name.to_string(),
            description: description.to_string(),
            content: content.to_string(),
        });
    }
    set
}

fn toolkit_with(set: SkillSet) -> Arc<toolnexus_host_native::Toolkit> {
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    tk.add_skills(set);
    Arc::new(tk)
}

fn openai(base: &str) -> Model {
    let mut cfg = LlmConfig::new(base, LlmStyle::OpenAi, "mock");
    cfg.api_key = Some("test-key".into());
    Model::Llm(cfg)
}

async fn serve_with(options: ServeOptions) -> ServeHandle {
    serve("127.0.0.1:0", options).await.expect("serve")
}

async fn post(url: &str, headers: &[(&str, &str)], body: Vec<u8>) -> toolnexus_core::HttpResponse {
    let mut req = HttpRequest::post_json(url, body);
    for (k, v) in headers {
        req = req.with_header(*k, *v);
    }
    NativeTransport::shared()
        .send(req)
        .await
        .expect("an HTTP answer")
}

async fn rpc(url: &str, version: Option<&str>, method: &str, params: Value) -> Value {
    let headers: Vec<(&str, &str)> = version.map(|v| ("A2A-Version", v)).into_iter().collect();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let resp = post(&format!("{url}/"), &headers, body.into_bytes()).await;
    assert_eq!(resp.status, 200, "JSON-RPC answers are HTTP 200");
    serde_json::from_slice(&resp.body).expect("a JSON-RPC body")
}

/// Seed 001, example 3: the card as served over HTTP is exactly
/// build_agent_card, provider block included.
#[tokio::test]
async fn the_served_card_is_build_agent_card() {
    let (llm, _) = openai_stub(|_| say("ok")).await;
    let set = skills(&[
        ("hello-world", "Greets", "Say hi."),
        ("summarize", "Summarizes", "Three bullets."),
    ]);
    let a2a = A2aConfig {
        name: Some("front-desk".into()),
        description: Some("Handles routine requests".into()),
        version: Some("2.3.0".into()),
        provider: Some(Provider {
            organization: "Acme Corp".into(),
            url: "https://acme.example".into(),
        }),
        skills: None,
        push_notifications: false,
        auth: None,
        ..Default::default()
    };
    let mut options = ServeOptions::new(toolkit_with(set.clone()), openai(llm.url()));
    options.a2a = Some(a2a.clone());
    let handle = serve_with(options).await;
    let resp = NativeTransport::shared()
        .send(HttpRequest::get(format!("{}{CARD_PATH}", handle.url)))
        .await
        .expect("card");
    let served: Value = serde_json::from_slice(&resp.body).expect("JSON");
    assert_eq!(served["name"], "front-desk");
    assert_eq!(served["version"], "2.3.0");
    assert_eq!(served["provider"]["organization"], "Acme Corp");
    assert_eq!(served["url"], format!("{}/", handle.url));
    assert_eq!(
        served,
        build_agent_card(&a2a, set.skills(), &format!("{}/", handle.url))
    );
    handle.stop().await;
}

/// Seed 003, examples 1–3 (the serving half): skills given as data, served
/// with a stub LLM, resolved with agent_tools and executed to "42".
#[tokio::test]
async fn a_served_skill_set_is_called_by_the_native_client() {
    let (llm, _) = openai_stub(|_| say("42")).await;
    let set = skills(&[
        ("answer", "answers questions", "Answer tersely."),
        ("greet", "says hello", "Say hello."),
    ]);
    let mut options = ServeOptions::new(toolkit_with(set), openai(llm.url()));
    options.a2a = Some(A2aConfig {
        name: Some("oracle".into()),
        ..Default::default()
    });
    let handle = serve_with(options).await;
    let card = format!("{}{CARD_PATH}", handle.url);
    let tools =
        agent_tools(&Agent::new(&card).with_poll_every(std::time::Duration::from_millis(25)))
            .await
            .expect("tools");
    let mut names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["oracle_answer", "oracle_greet"]);
    let tool = tools
        .iter()
        .find(|t| t.spec().name == "oracle_answer")
        .expect("oracle_answer");
    assert!(tool.spec().input_schema["properties"].get("task").is_some());
    let r = tool.execute(&json!({"task": "what is the answer?"})).await;
    assert_eq!((r.output.as_str(), r.is_error), ("42", false));
    let meta = r.metadata.expect("metadata");
    assert_eq!(meta["agent"], "oracle");
    assert_eq!(meta["state"], "completed");
    assert!(meta["polls"].as_u64().is_some());
    handle.stop().await;
    // After stop, the card is gone: a direct call now fails loudly.
    assert!(agent_tools(&Agent::new(&card)).await.is_err());
}

/// The model calls the `skill` tool, reads the skill, then answers.
#[tokio::test]
async fn the_model_loads_a_skill_through_the_tool_loop() {
    let (llm, log) = openai_stub(|body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        match messages.iter().find(|m| m["role"] == "tool") {
            None => json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "skill", "arguments": "{\"name\":\"greet\"}"}}]}),
            Some(result) => say(&format!("followed: {}", result["content"].as_str().unwrap_or_default())),
        }
    })
    .await;
    let set = skills(&[("greet", "says hello", "Say a friendly hello.")]);
    let handle = serve_with(ServeOptions::new(toolkit_with(set), openai(llm.url()))).await;
    let card = format!("{}{CARD_PATH}", handle.url);
    let tools = agent_tools(&Agent::new(&card)).await.expect("tools");
    let r = tools[0].execute(&json!({"task": "hi"})).await;
    // The reference `<skill_content>` block of a skill given as data.
    assert_eq!(
        r.output,
        "followed: <skill_content name=\"greet\">\n# Skill: greet\n\nSay a friendly hello.\n\n\
         Base directory for this skill: skill://greet/\n\
         Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.\n\
         </skill_content>"
    );
    let first = log.lock().expect("log")[0].clone();
    assert_eq!(
        first["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.ends_with("## Available Skills\n- **greet**: says hello")),
        "skills prompt"
    );
    assert_eq!(first["tools"][0]["function"]["name"], "skill");
    handle.stop().await;
}

/// An Anthropic-style model endpoint fulfils tasks too.
#[tokio::test]
async fn an_anthropic_style_model_fulfils_tasks() {
    // (path, x-api-key) of every model request.
    type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let llm = Stub::start(move |req| {
        log.lock()
            .expect("log")
            .push((req.url.clone(), req.header("x-api-key").map(str::to_string)));
        json_response(
            200,
            &json!({"model": "claude-stub", "content": [{"type": "text", "text": "from claude"}],
            "usage": {"input_tokens": 3, "output_tokens": 2}}),
        )
    })
    .await;
    let mut cfg = LlmConfig::new(llm.url(), LlmStyle::Anthropic, "claude-stub");
    cfg.api_key = Some("anthropic-key".into());
    let handle = serve_with(ServeOptions::new(
        toolkit_with(SkillSet::new()),
        Model::Llm(cfg),
    ))
    .await;
    let v = rpc(
        &handle.url,
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "hi"}]}, "configuration": {"blocking": true}}),
    )
    .await;
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"],
        "from claude"
    );
    assert_eq!(
        seen.lock().expect("log")[0],
        (
            "/v1/messages".to_string(),
            Some("anthropic-key".to_string())
        )
    );
    handle.stop().await;
}

/// LLM 500 ⇒ the task fails with an agent message; the server keeps serving.
#[tokio::test]
async fn a_model_error_fails_the_task_and_the_server_keeps_serving() {
    let calls = Arc::new(Mutex::new(0));
    let counter = calls.clone();
    let llm = Stub::start(move |_| {
        let mut n = counter.lock().expect("count");
        *n += 1;
        if *n == 1 {
            toolnexus_core::HttpResponse {
                status: 500,
                headers: vec![],
                body: b"model exploded".to_vec(),
            }
        } else {
            json_response(
                200,
                &json!({"choices": [{"message": {"content": "recovered"}}]}),
            )
        }
    })
    .await;
    let events: Arc<Mutex<Vec<TaskEvent>>> = Arc::default();
    let sink = events.clone();
    let mut options = ServeOptions::new(toolkit_with(SkillSet::new()), openai(llm.url()));
    options.on_task = Some(Arc::new(move |e| {
        sink.lock().expect("events").push(e.clone())
    }));
    let handle = serve_with(options).await;
    let send = |text: &str| json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": text}]}});
    let v = rpc(&handle.url, Some("1.0"), "SendMessage", send("first")).await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{v}");
    let m = &task["status"]["message"];
    assert_eq!(m["role"], "ROLE_AGENT");
    assert!(m["messageId"].is_string());
    assert!(
        m["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("500") && t.contains("model exploded")),
        "{m}"
    );
    let model_host = llm.url().trim_start_matches("http://").to_string();
    assert!(
        !v.to_string().contains(&model_host),
        "the model's address reached the caller: {m}"
    );
    let v = rpc(&handle.url, Some("1.0"), "SendMessage", send("second")).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let states: Vec<String> = events
        .lock()
        .expect("events")
        .iter()
        .map(|e| e.state.to_string())
        .collect();
    assert_eq!(states, ["failed", "completed"]);
    handle.stop().await;
}

/// The toolnexus reference's exact bodies: SendMessage with 0.3 parts and
/// blocking:false and no version header, then GetTask. Every port sends a
/// fresh `messageId` (toolnexus 0.16: `js/src/a2a.ts`, `A2A.java`, …),
/// which A2A requires; a message without one is -32602.
#[tokio::test]
async fn the_reference_bodies_work() {
    let handle = serve_with(ServeOptions::new(
        toolkit_with(SkillSet::new()),
        Model::Echo,
    ))
    .await;
    let sent = post(&format!("{}/", handle.url), &[], br#"{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"role":"user","messageId":"9b2c6a51-2f4e-4d1c-8a57-3f1e0c9d7b42","parts":[{"kind":"text","text":"ping"}]},"configuration":{"blocking":false}}}"#.to_vec()).await;
    let v: Value = serde_json::from_slice(&sent.body).expect("json");
    assert_eq!(v["id"], "1");
    let id = v["result"]["id"]
        .as_str()
        .expect("a bare task with an id")
        .to_string();
    assert!(v["result"]["contextId"].is_string());
    assert_eq!(v["result"]["kind"], "task");
    let mut state = String::new();
    for _ in 0..100 {
        let got = rpc(&handle.url, None, "GetTask", json!({"id": id})).await;
        state = got["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if state == "completed" {
            assert_eq!(
                got["result"]["artifacts"][0]["parts"][0],
                json!({"kind": "text", "text": "ping"})
            );
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(state, "completed");
    handle.stop().await;
}

/// Bad input gets the right error, and the server stays up after each.
#[tokio::test]
async fn bad_input_gets_the_right_error_and_the_server_stays_up() {
    let handle = serve_with(ServeOptions::new(
        toolkit_with(SkillSet::new()),
        Model::Echo,
    ))
    .await;
    let url = format!("{}/", handle.url);
    let code = |resp: &toolnexus_core::HttpResponse| -> i64 {
        assert_eq!(resp.status, 200);
        serde_json::from_slice::<Value>(&resp.body).expect("json")["error"]["code"]
            .as_i64()
            .expect("code")
    };
    assert_eq!(
        code(&post(&url, &[], b"this is not json".to_vec()).await),
        -32700
    );
    assert_eq!(code(&post(&url, &[], b"[]".to_vec()).await), -32600);
    assert_eq!(code(&post(&url, &[], b"42".to_vec()).await), -32600);
    let wrong_types = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"parts": 5}}});
    assert_eq!(
        code(&post(&url, &[], wrong_types.to_string().into_bytes()).await),
        -32602
    );
    let v = rpc(
        &handle.url,
        None,
        "tasks/get",
        json!({"id": "no-such-task"}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32001);
    let v = rpc(&handle.url, Some("1.0"), "GetTask", json!({"id": 12})).await;
    assert_eq!(v["error"]["code"], -32602);
    let huge = vec![b'x'; 10 * 1024 * 1024];
    let resp = post(&url, &[], huge).await;
    assert_eq!(resp.status, 413);
    // Still serving.
    let v = rpc(
        &handle.url,
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "still here"}]}}),
    )
    .await;
    assert_eq!(v["result"]["status"]["state"], "completed");
    handle.stop().await;
}

/// Browsers: preflight answered, the origin configurable.
#[tokio::test]
async fn cors_preflight_and_a_configured_origin() {
    let mut options = ServeOptions::new(toolkit_with(SkillSet::new()), Model::Echo);
    options.cors_origin = Some(CorsOrigin::parse("http://localhost:5173").expect("origin"));
    let handle = serve_with(options).await;
    let req = HttpRequest {
        method: "OPTIONS".into(),
        url: format!("{}/", handle.url),
        headers: vec![
            ("Origin".into(), "http://localhost:5173".into()),
            ("Access-Control-Request-Method".into(), "POST".into()),
            (
                "Access-Control-Request-Headers".into(),
                "content-type".into(),
            ),
        ],
        body: vec![],
    };
    let resp = NativeTransport::shared()
        .send(req)
        .await
        .expect("preflight");
    assert_eq!(resp.status, 204);
    assert_eq!(
        resp.header("access-control-allow-origin"),
        Some("http://localhost:5173")
    );
    assert!(resp
        .header("access-control-allow-methods")
        .is_some_and(|m| m.contains("POST")));
    let card = NativeTransport::shared()
        .send(HttpRequest::get(format!("{}{CARD_PATH}", handle.url)))
        .await
        .expect("card");
    assert_eq!(
        card.header("access-control-allow-origin"),
        Some("http://localhost:5173")
    );
    handle.stop().await;
}

/// Without an A2A profile every route is 404.
#[tokio::test]
async fn no_profile_means_404_everywhere() {
    let mut options = ServeOptions::new(toolkit_with(SkillSet::new()), Model::Echo);
    options.a2a = None;
    let handle = serve_with(options).await;
    let card = NativeTransport::shared()
        .send(HttpRequest::get(format!("{}{CARD_PATH}", handle.url)))
        .await
        .expect("answer");
    assert_eq!(card.status, 404);
    assert_eq!(
        post(&format!("{}/", handle.url), &[], b"{}".to_vec())
            .await
            .status,
        404
    );
    handle.stop().await;
}

#[tokio::test]
async fn an_unknown_store_selector_is_an_error() {
    let err = StoreConfig::parse("redis://localhost").expect_err("an error");
    assert!(err.to_string().contains("unknown task store"), "{err}");
}

/// The file store keeps tasks across a restart of the server.
#[tokio::test]
async fn the_file_store_round_trips_across_a_restart() {
    let dir = common::temp_dir("store");
    let mut options = ServeOptions::new(toolkit_with(SkillSet::new()), Model::Echo);
    options.store = StoreConfig::File(dir.clone());
    let handle = serve_with(options.clone()).await;
    let v = rpc(
        &handle.url,
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "keep me"}]}}),
    )
    .await;
    let id = v["result"]["id"].as_str().expect("id").to_string();
    handle.stop().await;
    // Files only: the store also keeps its index by context in `contexts/`.
    let files: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        // The lock taken around each save (compare and swap).
        .filter(|e| e.file_name() != toolnexus_host_native::store::LOCK_FILE)
        .collect();
    assert_eq!(files.len(), 1, "one file per task, no temp files left");
    let handle = serve_with(options).await;
    let got = rpc(&handle.url, None, "tasks/get", json!({"id": id})).await;
    assert_eq!(got["result"]["status"]["state"], "completed");
    assert_eq!(got["result"]["artifacts"][0]["parts"][0]["text"], "keep me");
    assert!(
        got["result"]["status"]["timestamp"].is_string(),
        "stamped and kept: {got}"
    );
    // ListTasks reads the folder: the task from before the restart, then a new one first.
    let ctx = got["result"]["contextId"]
        .as_str()
        .expect("ctx")
        .to_string();
    rpc(
        &handle.url,
        Some("1.0"),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m2", "parts": [{"text": "again"}]}}),
    )
    .await;
    let listed = rpc(&handle.url, Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 2, "{listed}");
    assert_eq!(listed["result"]["tasks"][1]["id"], id.as_str());
    let same_ctx = rpc(
        &handle.url,
        Some("1.0"),
        "ListTasks",
        json!({"contextId": ctx}),
    )
    .await;
    assert_eq!(same_ctx["result"]["totalSize"], 1, "{same_ctx}");
    // Ids no file can hold, or that sanitise to a stored task's file name,
    // are unknown tasks (-32001) and no answer names the store's folder.
    let folder = dir.display().to_string();
    let twin = id.replacen('-', ".", 1);
    for odd in ["x".repeat(300), twin] {
        let v = rpc(&handle.url, None, "tasks/get", json!({"id": odd})).await;
        assert_eq!(v["error"]["code"], -32001, "{v}");
        assert!(!v.to_string().contains(&folder), "{v}");
    }
    handle.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fulfiller that takes `ms` before answering "slow done".
struct Slow(u64);

impl toolnexus_core::server::Fulfiller for Slow {
    fn fulfil(
        &self,
        _: toolnexus_core::server::FulfilRequest,
        _: toolnexus_core::server::Progress,
    ) -> toolnexus_core::BoxFuture<'static, Result<String, String>> {
        let ms = self.0;
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Ok("slow done".to_string())
        })
    }
}

/// Our card says streaming, so the native client follows the task's events
/// (SSE) and has the answer the moment the task settles: a 1.5 s task needs
/// no GetTask poll at all. (Servers without streaming get a held GetTask:
/// `get_task_honours_prefer_wait`.)
#[tokio::test]
async fn a_slow_task_is_followed_by_its_stream_without_polls() {
    let set = skills(&[("work", "works slowly", "Work.")]);
    let handle = serve_with(ServeOptions::new(
        toolkit_with(set),
        Model::Custom(Arc::new(Slow(1_500))),
    ))
    .await;
    let card = format!("{}{CARD_PATH}", handle.url);
    let tools = agent_tools(&Agent::new(&card)).await.expect("tools");
    let r = tools[0].execute(&json!({"task": "go"})).await;
    assert_eq!((r.output.as_str(), r.is_error), ("slow done", false));
    assert_eq!(
        r.metadata.expect("metadata")["polls"],
        0,
        "the stream brought the end"
    );
    handle.stop().await;
}

/// The served card advertises the long-poll extension, and a GetTask with
/// `Prefer: wait` says `Preference-Applied`.
#[tokio::test]
async fn get_task_honours_prefer_wait() {
    let handle = serve_with(ServeOptions::new(
        toolkit_with(SkillSet::new()),
        Model::Custom(Arc::new(Slow(300))),
    ))
    .await;
    let card = NativeTransport::shared()
        .send(HttpRequest::get(format!("{}{CARD_PATH}", handle.url)))
        .await
        .expect("card");
    let card: Value = serde_json::from_slice(&card.body).expect("json");
    assert_eq!(
        card["capabilities"]["extensions"][0]["uri"],
        toolnexus_core::LONG_POLL_EXTENSION
    );
    let v = rpc(
        &handle.url,
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "x"}]}, "configuration": {"blocking": false}}),
    )
    .await;
    let id = v["result"]["id"].as_str().expect("id");
    let body =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": id}}).to_string();
    let resp = post(
        &format!("{}/", handle.url),
        &[("Prefer", "wait=5")],
        body.into_bytes(),
    )
    .await;
    assert_eq!(resp.header("preference-applied"), Some("wait=5"));
    let got: Value = serde_json::from_slice(&resp.body).expect("json");
    assert_eq!(
        got["result"]["status"]["state"], "completed",
        "held until the task settled"
    );
    handle.stop().await;
}

/// A fulfiller that panics on "boom" and answers "fine" otherwise.
struct Panics;

impl toolnexus_core::server::Fulfiller for Panics {
    fn fulfil(
        &self,
        r: toolnexus_core::server::FulfilRequest,
        _: toolnexus_core::server::Progress,
    ) -> toolnexus_core::BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            if r.text == "boom" {
                panic!("a bug in the fulfiller");
            }
            Ok("fine".to_string())
        })
    }
}

/// A panicking fulfilment never hangs a blocking caller or leaves the task
/// `working`: it ends failed, and the server keeps serving.
#[tokio::test]
async fn a_panicking_fulfilment_fails_the_task_and_frees_the_caller() {
    let handle = serve_with(ServeOptions::new(
        toolkit_with(SkillSet::new()),
        Model::Custom(Arc::new(Panics)),
    ))
    .await;
    let send = |text: &str| json!({"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": text}]}});
    let v = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        rpc(&handle.url, None, "message/send", send("boom")),
    )
    .await
    .expect("the blocking caller got an answer");
    let id = v["result"]["id"].as_str().expect("id").to_string();
    let mut state = String::new();
    for _ in 0..200 {
        let got = rpc(&handle.url, None, "tasks/get", json!({"id": id})).await;
        state = got["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if state == "failed" {
            let text = got["result"]["status"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert_eq!(text, toolnexus_core::server::CRASHED);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(state, "failed");
    let v = rpc(&handle.url, None, "message/send", send("again")).await;
    assert_eq!(v["result"]["status"]["state"], "completed");
    handle.stop().await;
}

/// Progress every millisecond or so for ~30 steps, then an answer.
struct Chatty;

impl toolnexus_core::server::Fulfiller for Chatty {
    fn fulfil(
        &self,
        _r: toolnexus_core::server::FulfilRequest,
        progress: toolnexus_core::server::Progress,
    ) -> toolnexus_core::BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            for i in 0..30 {
                progress.artifact_chunk(format!("chunk {i} "), false);
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            Ok("done".into())
        })
    }
}

/// Cancels racing progress on the file store (each save a real atomic write):
/// whatever wins, every task ends in one terminal state, the hook runs once
/// with it, and a CancelTask that said "canceled" is what is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_racing_progress_on_the_file_store_stay_consistent() {
    let dir = common::temp_dir("race");
    let tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    let mut options = ServeOptions::new(Arc::new(tk), Model::Custom(Arc::new(Chatty)));
    options.store = StoreConfig::File(dir.clone());
    let hooks: Arc<Mutex<Vec<TaskEvent>>> = Arc::default();
    let seen = hooks.clone();
    options.on_task = Some(Arc::new(move |e: &TaskEvent| {
        seen.lock().unwrap().push(e.clone())
    }));
    let handle = serve_with(options).await;
    let url = handle.url.clone();
    let send = json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "go"}]}, "configuration": {"blocking": false}});
    let mut ids = Vec::new();
    for _ in 0..40 {
        let v = rpc(&url, None, "message/send", send.clone()).await;
        ids.push(v["result"]["id"].as_str().expect("id").to_string());
    }
    let cancels = ids.iter().map(|id| {
        let url = url.clone();
        let id = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(id.len() as u64 % 7)).await;
            let v = rpc(&url, None, "tasks/cancel", json!({"id": id})).await;
            (id, v)
        })
    });
    let answers: Vec<(String, Value)> = futures_util::future::join_all(cancels)
        .await
        .into_iter()
        .map(|r| r.expect("cancel task"))
        .collect();
    // Every task settles (bounded wait), then the invariants.
    for (id, answer) in &answers {
        let mut stored = Value::Null;
        for _ in 0..500 {
            stored = rpc(&url, None, "tasks/get", json!({"id": id})).await;
            let state = stored["result"]["status"]["state"]
                .as_str()
                .unwrap_or_default();
            if state == "canceled" || state == "completed" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let state = stored["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            state == "canceled" || state == "completed",
            "{id} ended {state}"
        );
        match answer["result"]["status"]["state"].as_str() {
            Some(said) => assert_eq!(
                said, state,
                "{id}: CancelTask said {said}, the store says {state}"
            ),
            // Refused because it was already finishing: it completed.
            None => {
                assert_eq!(answer["error"]["code"], -32002, "{answer}");
                assert_eq!(state, "completed");
            }
        }
    }
    // The hook runs after the terminal save; give the last ones a moment.
    for _ in 0..200 {
        if hooks.lock().unwrap().len() >= ids.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let hooks = hooks.lock().unwrap().clone();
    for id in &ids {
        let mine: Vec<&TaskEvent> = hooks.iter().filter(|e| &e.id == id).collect();
        assert_eq!(mine.len(), 1, "one hook call for {id}: {mine:?}");
        let stored = rpc(&url, None, "tasks/get", json!({"id": id})).await;
        assert_eq!(
            mine[0].state.as_str(),
            stored["result"]["status"]["state"],
            "{id}"
        );
    }
    handle.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
