//! Conversations through the server: a task stops for input and the
//! caller's answer continues it; a context remembers its earlier turns.

use super::*;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// The question the "ask…" rule stops on.
pub(super) const CITY: &str = "Which city?";
/// The prompt the "login…" rule stops on.
pub(super) const SIGN_IN: &str = "Sign in at https://auth.example/login, then say done";

/// The rules of [`Rules`] for conversations: "ask…" stops in input-required
/// with [`CITY`] (and returns text that must be ignored), "login…" in
/// auth-required with [`SIGN_IN`]; an answer to either completes the task
/// ("booked for <answer>", "signed in"), unless it starts with "hang"; "recall"
/// answers with the turns it was given.
pub(super) fn conversation_rules(
    r: &FulfilRequest,
    progress: &Progress,
) -> Option<BoxFuture<'static, Result<String, String>>> {
    let asked = r
        .history
        .last()
        .filter(|m| m.role == Role::Agent)
        .map(Message::text);
    let progress = progress.clone();
    if r.text.starts_with("ask") {
        return Some(Box::pin(async move {
            yield_once().await;
            progress.input_required(CITY);
            Ok("this text is ignored".to_string())
        }));
    }
    if r.text.starts_with("login") {
        return Some(Box::pin(async move {
            progress.auth_required(SIGN_IN);
            Ok(String::new())
        }));
    }
    let answer = if r.text.starts_with("recall") {
        let turns: Vec<String> = r
            .history
            .iter()
            .map(|m| format!("{:?}:{}", m.role, m.text()))
            .collect();
        Ok(format!("recall [{}]", turns.join(" | ")))
    } else if r.text.starts_with("hang") {
        return None;
    } else if asked.as_deref() == Some(CITY) {
        Ok(format!("booked for {}", r.text))
    } else if asked.as_deref() == Some(SIGN_IN) {
        Ok("signed in".to_string())
    } else {
        return None;
    };
    Some(Box::pin(std::future::ready(answer)))
}

/// A message answering (or following up) with `text`, in 1.0 (`v10`) or 0.3 shapes.
fn reply(v10: bool, text: &str, task_id: Option<&str>, context_id: Option<&str>) -> Value {
    let mut m = if v10 {
        json!({"role": "ROLE_USER", "messageId": format!("m-{text}"), "parts": [{"text": text}]})
    } else {
        json!({"role": "user", "messageId": format!("m-{text}"), "parts": [{"kind": "text", "text": text}]})
    };
    if let Some(t) = task_id {
        m["taskId"] = json!(t);
    }
    if let Some(c) = context_id {
        m["contextId"] = json!(c);
    }
    json!({"message": m})
}

/// A message in a conversation, a millisecond after the last one (so the
/// context's tasks have distinct status times, as on a real clock).
fn said(f: &Fixture, text: &str, task_id: Option<&str>, context_id: Option<&str>) -> Value {
    f.host.time.advance_to(f.host.time.now() + 1);
    f.rpc(
        None,
        "message/send",
        reply(false, text, task_id, context_id),
    )
}

fn states(f: &Fixture, id: &str) -> Vec<TaskState> {
    lock(&f.store.saves)
        .iter()
        .filter(|(t, _)| t == id)
        .map(|(_, s)| *s)
        .collect()
}

#[test]
fn a_question_stops_the_task_and_the_answer_continues_the_same_task_in_10() {
    let f = fixture();
    let asked = f.send(Some("1.0"), "SendMessage", "ask for a trip", true);
    let task = &asked["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], CITY);
    assert!(task["status"]["message"]["messageId"].is_string());
    assert!(
        task.get("artifacts").is_none(),
        "the ignored text is no answer: {task}"
    );
    let id = task["id"].as_str().expect("id").to_string();
    let ctx = task["contextId"].as_str().expect("ctx").to_string();
    assert!(
        lock(&f.host.events).is_empty(),
        "the hook runs on terminal states only"
    );
    assert!(
        !f.server.tasks().is_running(&id),
        "a task waiting for input holds nothing in the machine"
    );

    let done = f.rpc(
        Some("1.0"),
        "SendMessage",
        reply(true, "Paris", Some(&id), Some(&ctx)),
    );
    let task = &done["result"]["task"];
    assert_eq!(task["id"], id.as_str(), "the same task: {done}");
    assert_eq!(task["contextId"], ctx.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "booked for Paris");
    let said: Vec<(&str, &str)> = task["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or(""),
                m["parts"][0]["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        said,
        vec![
            ("ROLE_USER", "ask for a trip"),
            ("ROLE_AGENT", CITY),
            ("ROLE_USER", "Paris"),
        ]
    );
    use TaskState::*;
    assert_eq!(
        states(&f, &id),
        vec![Submitted, Working, InputRequired, Working, Completed]
    );
    let hooks = lock(&f.host.events).clone();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(hooks[0].state, Completed);
    assert_eq!(hooks[0].result.as_deref(), Some("booked for Paris"));

    // Finished: the task takes no more messages.
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        reply(true, "Rome", Some(&id), None),
    );
    assert_eq!(v["error"]["code"], -32004, "{v}");
}

#[test]
fn auth_required_stops_and_resumes_the_same_way_in_03_with_polling() {
    let f = fixture();
    let sent = f.send(None, "message/send", "login to the calendar", false);
    let id = sent["result"]["id"].as_str().expect("id").to_string();
    f.settle();
    let got = f.rpc(None, "tasks/get", json!({"id": id}));
    assert_eq!(got["result"]["kind"], "task");
    assert_eq!(got["result"]["status"]["state"], "auth-required", "{got}");
    assert_eq!(
        got["result"]["status"]["message"]["parts"][0]["text"],
        SIGN_IN
    );
    assert_eq!(got["result"]["status"]["message"]["kind"], "message");

    let v = f.rpc(
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m9", "taskId": id,
                "parts": [{"kind": "text", "text": "done"}]},
               "configuration": {"blocking": false}}),
    );
    assert_eq!(v["result"]["id"], id.as_str(), "{v}");
    assert_eq!(
        v["result"]["contextId"], got["result"]["contextId"],
        "the context is the task's when only taskId is given"
    );
    assert_eq!(v["result"]["status"]["state"], "working");
    f.settle();
    let got = f.rpc(None, "tasks/get", json!({"id": id}));
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "signed in"
    );
}

#[test]
fn a_stream_ends_at_the_question_and_the_answer_streams_on_the_same_task() {
    let f = fixture();
    let (_, mut body) = f.stream_send(None, "ask me");
    let events = f.all_events(&mut body);
    let r: Vec<&Value> = events.iter().map(|e| &e["result"]).collect();
    let last = r.last().expect("events");
    assert_eq!(last["kind"], "status-update", "{events:?}");
    assert_eq!(last["status"]["state"], "input-required");
    assert_eq!(last["status"]["message"]["parts"][0]["text"], CITY);
    assert_eq!(last["final"], true, "the stream ends at the question");
    let id = r[0]["id"].as_str().expect("id").to_string();
    assert_eq!(f.subscribers(&id), 0);

    let (_, mut body) = f.stream(
        Some("1.0"),
        "SendStreamingMessage",
        reply(true, "Lyon", Some(&id), None),
    );
    let events = f.all_events(&mut body);
    let r: Vec<&Value> = events.iter().map(|e| &e["result"]).collect();
    assert_eq!(r[0]["task"]["id"], id.as_str(), "{events:?}");
    assert_eq!(r[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
    let art = r
        .iter()
        .find_map(|e| e.get("artifactUpdate"))
        .expect("artifact");
    assert_eq!(art["artifact"]["parts"][0]["text"], "booked for Lyon");
    assert_eq!(
        r.last().expect("last")["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

/// Read your writes: a stream tells of its last state (a question, an
/// outcome) only once that state is stored, so a follow-up sent at once
/// finds it in the store, on this replica or any other.
#[test]
fn a_stream_tells_its_last_state_only_once_it_is_stored() {
    let f = fixture();
    // Saves take a while: each stream below waits for its last one.
    f.store.slow.store(30, Ordering::SeqCst);
    let (_, mut body) = f.stream_send(None, "ask me");
    let events = f.all_events(&mut body);
    let last = &events.last().expect("events")["result"];
    assert_eq!(last["status"]["state"], "input-required", "{events:?}");
    let id = events[0]["result"]["id"].as_str().expect("id").to_string();
    assert_eq!(
        f.run(f.store.inner.get(&id))
            .ok()
            .flatten()
            .map(|t| t.state),
        Some(TaskState::InputRequired),
        "the question is stored before the stream tells it"
    );

    let (_, mut body) = f.stream(
        Some("1.0"),
        "SendStreamingMessage",
        reply(true, "Lyon", Some(&id), None),
    );
    let events = f.all_events(&mut body);
    assert_eq!(
        events.last().expect("events")["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "the answer continued the task: {events:?}"
    );
    assert_eq!(
        f.run(f.store.inner.get(&id))
            .ok()
            .flatten()
            .map(|t| t.state),
        Some(TaskState::Completed),
        "the outcome is stored before the stream tells it"
    );

    let v = f.rpc(None, "message/send", reply(false, "Rome", Some(&id), None));
    assert_eq!(v["error"]["code"], -32004, "{v}");
    let said = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("is completed") && said.contains("terminal"),
        "{v}"
    );
}

/// Read your writes, for every event: a stream tells of a state only once
/// it is stored, so what a caller heard is never ahead of the store (a
/// stream resumed from the store, on any replica, repeats nothing).
#[test]
fn every_state_a_stream_tells_is_stored_before_it_is_told() {
    let f = fixture();
    f.store.slow.store(30, Ordering::SeqCst);
    let (_, mut body) = f.stream_send(None, "ask me");
    let mut told = Vec::new();
    while let Some(event) = f.next_event(&mut body) {
        let r = &event["result"];
        let id = r["taskId"].as_str().or(r["id"].as_str()).expect("id");
        let stored = f
            .run(f.store.inner.get(id))
            .ok()
            .flatten()
            .map(|t| t.state.as_str().to_string());
        let state = r["status"]["state"].as_str().map(str::to_string);
        told.push((state, stored));
    }
    let states: Vec<&str> = told.iter().filter_map(|(s, _)| s.as_deref()).collect();
    assert_eq!(
        states,
        ["submitted", "working", "input-required"],
        "{told:?}"
    );
    for (i, (state, stored)) in told.iter().enumerate() {
        let Some(state) = state else { continue };
        // Stored as told, or already a state told after it.
        let later: Vec<&str> = told[i..].iter().filter_map(|(s, _)| s.as_deref()).collect();
        let stored = stored.as_deref().expect("stored when told");
        assert!(
            later.contains(&stored),
            "{state} was told while the store had {stored}: {told:?}"
        );
    }
}

#[test]
fn only_a_task_waiting_for_input_takes_an_answer_and_a_waiting_one_can_be_canceled() {
    let f = fixture();
    let asked = f.send(None, "message/send", "ask", true);
    let id = asked["result"]["id"].as_str().expect("id").to_string();
    // This answer hangs: the task is working again, and takes no other answer.
    let v = f.rpc(None, "message/send", {
        let mut p = reply(false, "hang on", Some(&id), None);
        p["configuration"] = json!({"blocking": false});
        p
    });
    assert_eq!(v["result"]["status"]["state"], "working", "{v}");
    let v = f.rpc(None, "message/send", reply(false, "Oslo", Some(&id), None));
    assert_eq!(v["error"]["code"], -32004, "{v}");
    let v = f.rpc(None, "tasks/cancel", json!({"id": id}));
    assert_eq!(v["result"]["status"]["state"], "canceled", "{v}");

    // A task waiting for input is canceled from the store.
    let asked = f.send(None, "message/send", "ask again", true);
    let id = asked["result"]["id"].as_str().expect("id").to_string();
    assert_eq!(asked["result"]["status"]["state"], "input-required");
    let v = f.rpc(None, "tasks/cancel", json!({"id": id}));
    assert_eq!(v["result"]["status"]["state"], "canceled", "{v}");
    let v = f.rpc(None, "message/send", reply(false, "Oslo", Some(&id), None));
    assert_eq!(v["error"]["code"], -32004, "{v}");
}

#[test]
fn follow_up_tasks_in_a_context_see_its_earlier_turns_and_no_others() {
    let f = fixture();
    let first = said(&f, "hello", None, Some("conv"));
    assert_eq!(first["result"]["contextId"], "conv");
    let asked = said(&f, "ask", None, Some("conv"));
    let waiting = asked["result"]["id"].as_str().expect("id").to_string();
    said(&f, "elsewhere", None, Some("other"));

    let v = said(&f, "recall", None, Some("conv"));
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"],
        format!("recall [User:hello | Agent:done: hello | User:ask | Agent:{CITY}]"),
        "{v}"
    );
    // The answer to the question sees the turns before it too.
    let v = said(&f, "recall", Some(&waiting), Some("conv"));
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"],
        format!(
            "recall [User:hello | Agent:done: hello | User:recall | Agent:recall [User:hello | Agent:done: hello | User:ask | Agent:{CITY}] | User:ask | Agent:{CITY}]"
        ),
        "{v}"
    );
    let v = said(&f, "recall", None, None);
    assert_eq!(v["result"]["artifacts"][0]["parts"][0]["text"], "recall []");
    // Empty ids (protobuf defaults) name nothing.
    let v = said(&f, "recall", Some(""), Some(""));
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"], "recall []",
        "{v}"
    );
    assert_ne!(v["result"]["contextId"], "");
}

#[test]
fn a_context_remembers_at_most_the_latest_turns() {
    let f = fixture();
    for i in 0..30 {
        said(&f, &format!("turn {i}"), None, Some("long"));
    }
    let v = said(&f, "recall", None, Some("long"));
    let text = v["result"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .expect("text");
    assert_eq!(
        text.matches(" | ").count() + 1,
        MAX_CONTEXT_MESSAGES,
        "{text}"
    );
    assert!(
        text.ends_with("User:turn 29 | Agent:done: turn 29]"),
        "{text}"
    );
    assert!(
        !text.contains("turn 9 "),
        "the oldest turns are left out: {text}"
    );
}

/// A model endpoint answering from a script (OpenAI shapes), logging requests.
#[derive(Default)]
struct ScriptedModel {
    replies: Mutex<std::collections::VecDeque<Value>>,
    asked: Mutex<Vec<Value>>,
}

impl crate::HostBase for ScriptedModel {
    fn now_ms(&self) -> u64 {
        0
    }
    fn new_id(&self) -> String {
        "q-1".into()
    }
}

impl crate::Transport for ScriptedModel {
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, crate::TransportError>> + MaybeSend {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        lock(&self.asked).push(body);
        let reply = lock(&self.replies).pop_front();
        std::future::ready(match reply {
            Some(v) => Ok(HttpResponse::json(200, v.to_string().into_bytes())),
            None => Err(crate::TransportError::new("no reply scripted")),
        })
    }
    fn sleep_until(&self, _at_ms: u64) -> impl Future<Output = ()> + MaybeSend {
        std::future::pending()
    }
}

fn model_says(text: &str) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": text}}]})
}

fn model_calls(name: &str, arguments: Value) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call-1", "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}}]})
}

type LlmServer = Arc<A2aServer<Arc<Recording>, Arc<TestHost>, LlmFulfiller<Arc<ScriptedModel>>>>;

#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn llm_server(
    replies: Vec<Value>,
    toolkit: impl FnOnce(&mut crate::client::toolkit::Toolkit<Arc<ScriptedModel>>),
) -> (LlmServer, Arc<TestHost>, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel {
        replies: Mutex::new(replies.into()),
        ..Default::default()
    });
    let mut tk = crate::client::toolkit::Toolkit::new(model.clone());
    toolkit(&mut tk);
    let host = Arc::new(TestHost::default());
    let fulfiller = LlmFulfiller {
        toolkit: Arc::new(tk),
        llm: crate::llm::LlmConfig::new("http://model.test/v1", crate::llm::LlmStyle::OpenAi, "m"),
    };
    let options = ServerOptions {
        card: Some(card().into()),
        ..Default::default()
    };
    let server = A2aServer::new(
        options,
        Arc::new(Recording::default()),
        host.clone(),
        fulfiller,
    );
    (server, host, model)
}

fn rpc_on<S: TaskStore, F: Fulfiller>(
    server: &Arc<A2aServer<S, Arc<TestHost>, F>>,
    host: &TestHost,
    params: Value,
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params});
    let req = HttpRequest::post_json("/", body.to_string().into_bytes());
    let resp = run_with_work(server.handle(req), &host.jobs, || server.take_work());
    serde_json::from_slice(&resp.body).expect("JSON")
}

#[test]
fn the_model_asks_the_caller_with_the_question_tool_and_reads_the_answer_as_the_next_turn() {
    let (server, host, model) = llm_server(
        vec![
            model_calls(
                "question",
                json!({"questions": [{"question": "Which city?", "options": ["Paris", "Rome"]}]}),
            ),
            model_says("Booked: Rome"),
        ],
        |_| {},
    );
    let asked = rpc_on(&server, &host, reply(false, "book a trip", None, None));
    let task = &asked["result"];
    assert_eq!(task["status"]["state"], "input-required", "{asked}");
    let question = "Which city? (options: Paris, Rome)";
    assert_eq!(task["status"]["message"]["parts"][0]["text"], question);
    let first = lock(&model.asked)[0].clone();
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(offered, vec!["question"]);

    let id = task["id"].as_str().expect("id");
    let done = rpc_on(&server, &host, reply(false, "Rome", Some(id), None));
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    assert_eq!(
        done["result"]["artifacts"][0]["parts"][0]["text"],
        "Booked: Rome"
    );
    let resumed = lock(&model.asked)[1]["messages"].clone();
    assert_eq!(
        resumed,
        json!([
            {"role": "user", "content": "book a trip"},
            {"role": "assistant", "content": question},
            {"role": "user", "content": "Rome"},
        ])
    );
}

#[test]
fn a_suspending_host_tool_stops_the_task_in_auth_required_never_completed() {
    let (server, host, _model) = llm_server(vec![model_calls("calendar", json!({}))], |tk| {
        let spec = crate::model::tool::ToolSpec {
            name: "calendar".into(),
            description: "Reads the calendar".into(),
            input_schema: json!({"type": "object"}),
            source: crate::ToolSource::Host,
        };
        tk.add_host_tool(
            spec,
            Arc::new(|_| {
                Box::pin(std::future::ready(crate::model::tool::ToolResult {
                    output: "Login required".into(),
                    is_error: true,
                    metadata: Some(json!({"pending": {"id": "r1", "kind": "authorization",
                            "prompt": "Sign in to the calendar", "url": "https://auth.test/go"}})),
                }))
            }),
        );
    });
    let v = rpc_on(
        &server,
        &host,
        reply(false, "what is on today?", None, None),
    );
    assert_eq!(v["result"]["status"]["state"], "auth-required", "{v}");
    assert_eq!(
        v["result"]["status"]["message"]["parts"][0]["text"],
        "Sign in to the calendar\nhttps://auth.test/go"
    );
    assert!(v["result"].get("artifacts").is_none());
}
