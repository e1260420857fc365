//! Conversations through the server: a task stops for input and the
//! caller's answer continues it; a context remembers its earlier turns.

use super::*;

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
    let first = f.rpc(
        None,
        "message/send",
        reply(false, "hello", None, Some("conv")),
    );
    assert_eq!(first["result"]["contextId"], "conv");
    let asked = f.rpc(
        None,
        "message/send",
        reply(false, "ask", None, Some("conv")),
    );
    let waiting = asked["result"]["id"].as_str().expect("id").to_string();
    f.rpc(
        None,
        "message/send",
        reply(false, "elsewhere", None, Some("other")),
    );

    let v = f.rpc(
        None,
        "message/send",
        reply(false, "recall", None, Some("conv")),
    );
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"],
        format!("recall [User:hello | Agent:done: hello | User:ask | Agent:{CITY}]"),
        "{v}"
    );
    // The answer to the question sees the turns before it too.
    let v = f.rpc(
        None,
        "message/send",
        reply(false, "recall", Some(&waiting), Some("conv")),
    );
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"],
        format!(
            "recall [User:hello | Agent:done: hello | User:recall | Agent:recall [User:hello | Agent:done: hello | User:ask | Agent:{CITY}] | User:ask | Agent:{CITY}]"
        ),
        "{v}"
    );
    let v = f.rpc(None, "message/send", reply(false, "recall", None, None));
    assert_eq!(v["result"]["artifacts"][0]["parts"][0]["text"], "recall []");
}

#[test]
fn a_context_remembers_at_most_the_latest_turns() {
    let f = fixture();
    for i in 0..30 {
        f.rpc(
            None,
            "message/send",
            reply(false, &format!("turn {i}"), None, Some("long")),
        );
    }
    let v = f.rpc(
        None,
        "message/send",
        reply(false, "recall", None, Some("long")),
    );
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
