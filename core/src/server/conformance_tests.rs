//! A2A 1.0 / 0.3 conformance of the server function: required fields,
//! `historyLength` on SendMessage, versions, error details, and the shape
//! of answers to calls that name no `A2A-Version`.

use super::*;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn msg_03(text: &str) -> Value {
    json!({"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": text}]})
}

fn msg_10(text: &str) -> Value {
    json!({"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]})
}

/// `message` with `key` removed or replaced.
fn with(mut message: Value, key: &str, value: Option<Value>) -> Value {
    let obj = message.as_object_mut().expect("object");
    match value {
        Some(v) => obj.insert(key.into(), v),
        None => obj.remove(key),
    };
    message
}

#[test]
fn a_message_without_a_required_field_is_invalid_params_in_both_dialects() {
    let f = fixture();
    for (version, method, message) in [
        (Some("1.0"), "SendMessage", msg_10("hi")),
        (None, "message/send", msg_03("hi")),
        (Some("0.3"), "message/stream", msg_03("hi")),
        (Some("1.0"), "SendStreamingMessage", msg_10("hi")),
    ] {
        let cases = [
            (
                "message.messageId",
                with(message.clone(), "messageId", None),
            ),
            (
                "message.messageId",
                with(message.clone(), "messageId", Some(json!(""))),
            ),
            ("message.role", with(message.clone(), "role", None)),
            (
                "message.role",
                with(message.clone(), "role", Some(json!("robot"))),
            ),
            ("message.parts", with(message.clone(), "parts", None)),
            (
                "message.parts",
                with(message.clone(), "parts", Some(json!([]))),
            ),
            (
                "message.parts",
                with(message.clone(), "parts", Some(json!([{"kind": "text"}]))),
            ),
            (
                "message.taskId",
                with(message.clone(), "taskId", Some(json!(5))),
            ),
        ];
        for (field, bad) in cases {
            let v = f.rpc(version, method, json!({"message": bad}));
            assert_eq!(v["error"]["code"], -32602, "{method} {field}: {v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(field),
                "{v}"
            );
        }
        let v = f.rpc(
            version,
            method,
            json!({"message": message, "configuration": {"historyLength": -1}}),
        );
        assert_eq!(v["error"]["code"], -32602, "{v}");
    }
    assert!(
        lock(&f.store.saves).is_empty(),
        "no invalid message made a task"
    );
}

#[test]
fn the_toolnexus_reference_request_is_accepted_as_it_is() {
    // What every toolnexus port sends (js/src/a2a.ts, A2A.java, ...): no
    // version header, no `kind` on the message, a non-blocking send.
    let f = fixture();
    let v = f.rpc(
        None,
        "SendMessage",
        json!({"message": {"role": "user", "messageId": "u-1",
                "parts": [{"kind": "text", "text": "hello"}]},
               "configuration": {"blocking": false}}),
    );
    assert_eq!(v["result"]["kind"], "task", "{v}");
    assert_eq!(v["result"]["status"]["state"], "submitted");
    let got = f.rpc(None, "GetTask", json!({"id": v["result"]["id"]}));
    assert_eq!(got["result"]["kind"], "task");
}

#[test]
fn history_length_is_honoured_on_send_message() {
    let f = fixture();
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        json!({"message": msg_10("hi"), "configuration": {"historyLength": 0}}),
    );
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert!(task.get("history").is_none(), "{v}");
    let v = f.rpc(
        None,
        "message/send",
        json!({"message": msg_03("hi"), "configuration": {"historyLength": 1}}),
    );
    assert_eq!(v["result"]["history"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        f.error_code(None, "GetTask", json!({"id": "x", "historyLength": "all"})),
        -32602
    );
}

#[test]
fn only_supported_versions_are_served_and_a_patch_is_ignored() {
    let f = fixture();
    for v in ["1.0", "1", "1.0.2", " 1.0 "] {
        let got = f.rpc(Some(v), "SendMessage", json!({"message": msg_10("x")}));
        assert_eq!(
            got["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{v}: {got}"
        );
    }
    for v in ["0.3", "0.3.0"] {
        let got = f.rpc(Some(v), "message/send", json!({"message": msg_03("x")}));
        assert_eq!(got["result"]["status"]["state"], "completed", "{v}: {got}");
    }
    for v in ["1.1", "2.0", "0.2", "10", "x"] {
        let got = f.rpc(Some(v), "SendMessage", json!({"message": msg_10("x")}));
        assert_eq!(got["error"]["code"], -32009, "{v}: {got}");
        assert_eq!(got["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    }
}

#[test]
fn v10_errors_carry_error_info_and_bad_request_details() {
    let f = fixture();
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        json!({"message": with(msg_10("x"), "parts", Some(json!([])))}),
    );
    let data = &v["error"]["data"];
    assert_eq!(data[0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
    assert_eq!(data[0]["reason"], "INVALID_PARAMS");
    assert_eq!(data[0]["domain"], "a2a-protocol.org");
    assert_eq!(
        data[1]["@type"],
        "type.googleapis.com/google.rpc.BadRequest"
    );
    assert_eq!(data[1]["fieldViolations"][0]["field"], "message.parts");
    for (method, params, reason) in [
        ("GetTask", json!({"id": "nope"}), "TASK_NOT_FOUND"),
        ("CancelTask", json!({"id": "nope"}), "TASK_NOT_FOUND"),
        ("GetExtendedAgentCard", json!({}), "UNSUPPORTED_OPERATION"),
        ("NoSuchMethod", json!({}), "METHOD_NOT_FOUND"),
    ] {
        let v = f.rpc(Some("1.0"), method, params);
        assert_eq!(v["error"]["data"][0]["reason"], reason, "{v}");
        assert_eq!(v["error"]["data"].as_array().map(Vec::len), Some(1));
    }
    // 0.3 and the toolnexus dialect keep their plain errors.
    let v = f.rpc(None, "GetTask", json!({"id": "nope"}));
    assert!(v["error"].get("data").is_none(), "{v}");
}

#[test]
fn an_unversioned_10_shaped_message_is_answered_in_10_shapes() {
    let f = fixture();
    let shapes = [
        msg_10("a"),
        // Any one hint is enough: a 1.0 role, a part without `kind`,
        json!({"role": "ROLE_USER", "messageId": "m", "parts": [{"kind": "text", "text": "b"}]}),
        json!({"role": "user", "messageId": "m", "parts": [{"text": "c"}]}),
    ];
    for message in shapes {
        let v = f.rpc(None, "SendMessage", json!({"message": message}));
        assert_eq!(
            v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{v}"
        );
    }
    // or `returnImmediately`.
    let v = f.rpc(
        None,
        "SendMessage",
        json!({"message": msg_03("d"), "configuration": {"returnImmediately": true}}),
    );
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{v}"
    );
    // A 1.0 stream too.
    let (_, mut body) = f.stream(
        None,
        "SendStreamingMessage",
        json!({"message": msg_10("e")}),
    );
    let events = f.all_events(&mut body);
    assert_eq!(
        events[0]["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    assert!(events.last().expect("events")["result"]["statusUpdate"].is_object());
}

#[test]
fn unversioned_calls_about_a_task_answer_in_the_dialect_it_was_made_in() {
    let f = fixture();
    let v10 = f.rpc(
        None,
        "SendMessage",
        json!({"message": msg_10("hang on"),
        "configuration": {"returnImmediately": true}}),
    );
    let id10 = v10["result"]["task"]["id"].clone();
    let v03 = f.send(None, "SendMessage", "hang in", false);
    let id03 = v03["result"]["id"].clone();
    f.settle();

    let got = f.rpc(None, "GetTask", json!({"id": id10}));
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_WORKING",
        "{got}"
    );
    assert!(got["result"].get("kind").is_none());
    let got = f.rpc(None, "GetTask", json!({"id": id03}));
    assert_eq!(got["result"]["status"]["state"], "working", "{got}");
    assert_eq!(got["result"]["kind"], "task");
    // A version named wins over the task's.
    let got = f.rpc(Some("0.3"), "GetTask", json!({"id": id10}));
    assert_eq!(got["result"]["status"]["state"], "working", "{got}");

    let (_, mut body) = f.stream(None, "SubscribeToTask", json!({"id": id10}));
    let first = f.next_event(&mut body).expect("the task");
    assert_eq!(
        first["result"]["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{first}"
    );
    drop(body);

    let got = f.rpc(None, "CancelTask", json!({"id": id10}));
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{got}"
    );
    let got = f.rpc(None, "tasks/cancel", json!({"id": id03}));
    assert_eq!(got["result"]["status"]["state"], "canceled", "{got}");

    // ListTasks exists only in 1.0: answered in 1.0 shapes.
    let got = f.rpc(None, "ListTasks", json!({}));
    let states: Vec<&str> = got["result"]["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["status"]["state"].as_str())
        .collect();
    assert_eq!(
        states,
        ["TASK_STATE_CANCELED", "TASK_STATE_CANCELED"],
        "{got}"
    );
}

/// A message with a file (by URL and inline) and a data part, in 1.0 shapes.
fn rich_10() -> Value {
    json!({"role": "ROLE_USER", "messageId": "m1", "parts": [
        {"text": "summarise these"},
        {"url": "https://files.example/r.pdf", "mediaType": "application/pdf", "filename": "r.pdf"},
        {"raw": "aGVsbG8=", "mediaType": "text/plain", "filename": "hello.txt"},
        {"data": {"quarter": 3, "rows": [1, 2]}, "mediaType": "application/json"}]})
}

#[test]
fn file_and_data_parts_are_kept_end_to_end_in_both_shapes() {
    let f = fixture();
    let v = f.rpc(Some("1.0"), "SendMessage", json!({"message": rich_10()}));
    let task = &v["result"]["task"];
    assert_eq!(task["history"][0]["parts"], rich_10()["parts"], "{v}");
    let id = task["id"].clone();
    // Stored, and read back in either shape.
    let got = f.rpc(Some("1.0"), "GetTask", json!({"id": id}));
    assert_eq!(got["result"]["history"][0]["parts"], rich_10()["parts"]);
    let got = f.rpc(Some("0.3"), "tasks/get", json!({"id": id}));
    assert_eq!(
        got["result"]["history"][0]["parts"],
        json!([
            {"kind": "text", "text": "summarise these"},
            {"kind": "file", "file": {"uri": "https://files.example/r.pdf", "mimeType": "application/pdf", "name": "r.pdf"}},
            {"kind": "file", "file": {"bytes": "aGVsbG8=", "mimeType": "text/plain", "name": "hello.txt"}},
            {"kind": "data", "data": {"quarter": 3, "rows": [1, 2]}}
        ])
    );
    let listed = f.rpc(Some("1.0"), "ListTasks", json!({}));
    assert_eq!(
        listed["result"]["tasks"][0]["history"][0]["parts"],
        rich_10()["parts"]
    );
    // The fulfiller reads each non-text part as one line.
    assert_eq!(
        lock(&f.host.events)[0].task,
        "summarise these\n[file r.pdf application/pdf https://files.example/r.pdf]\n\
         [file hello.txt text/plain (inline)]\n[data {\"quarter\":3,\"rows\":[1,2]}]"
    );
    // A 0.3 message with only a file is taken too, and streams keep its part.
    let file_only = json!({"role": "user", "messageId": "m2", "parts": [
        {"kind": "file", "file": {"uri": "https://files.example/a.png", "mimeType": "image/png"}}]});
    let (_, mut body) = f.stream(None, "message/stream", json!({"message": file_only}));
    let first = f.next_event(&mut body).expect("the task");
    assert_eq!(
        first["result"]["history"][0]["parts"][0]["file"]["uri"], "https://files.example/a.png",
        "{first}"
    );
}

#[test]
fn card_modes_are_media_types() {
    let c = card();
    assert_eq!(
        c["defaultInputModes"],
        json!(["text/plain", "application/json"])
    );
    assert_eq!(c["defaultOutputModes"], json!(["text/plain"]));
}

// ---- Push notifications ----

#[cfg(feature = "push")]
fn push_fixture() -> Fixture {
    push_fixture_on(Arc::new(Recording::default()))
}

#[cfg(feature = "push")]
#[test]
fn push_configs_are_set_read_listed_deleted_and_deliver_each_saved_state() {
    let f = push_fixture();
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        json!({"message": msg_10("hang on"),
        "configuration": {"returnImmediately": true}}),
    );
    let id = v["result"]["task"]["id"].as_str().expect("id").to_string();
    f.settle();
    let config = json!({"taskId": id, "url": "https://hooks.example/a2a", "token": "tk",
        "authentication": {"scheme": "Bearer", "credentials": "s3cret"}});
    let set = f.rpc(
        Some("1.0"),
        "CreateTaskPushNotificationConfig",
        config.clone(),
    );
    let cid = set["result"]["id"]
        .as_str()
        .expect("an id is given")
        .to_string();
    assert_eq!(set["result"]["url"], "https://hooks.example/a2a", "{set}");
    assert_eq!(set["result"]["authentication"], json!({"scheme": "Bearer"}));
    assert!(
        !set.to_string().contains("s3cret"),
        "credentials never echoed"
    );
    // SSRF: internal addresses are refused.
    for url in [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/",
        "http://10.0.0.1/",
    ] {
        let bad = f.rpc(
            Some("1.0"),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        );
        assert_eq!(bad["error"]["code"], -32602, "{url}: {bad}");
    }
    assert_eq!(
        f.error_code(
            Some("1.0"),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "nope", "url": "https://hooks.example/a2a"})
        ),
        -32001
    );
    let got = f.rpc(
        Some("1.0"),
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": cid}),
    );
    assert_eq!(got["result"]["id"], cid.as_str(), "{got}");
    let listed = f.rpc(
        Some("1.0"),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    );
    assert_eq!(
        listed["result"]["configs"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let listed03 = f.rpc(None, "tasks/pushNotificationConfig/list", json!({"id": id}));
    assert_eq!(
        listed03["result"][0]["pushNotificationConfig"]["id"],
        cid.as_str(),
        "{listed03}"
    );
    let got03 = f.rpc(
        None,
        "tasks/pushNotificationConfig/get",
        json!({"id": id, "pushNotificationConfigId": cid}),
    );
    assert_eq!(got03["result"]["taskId"], id.as_str(), "{got03}");

    // The next saved state goes to the webhook, with its credentials.
    assert!(lock(&f.host.sent).is_empty());
    f.rpc(Some("1.0"), "CancelTask", json!({"id": id}));
    f.settle();
    let sent = lock(&f.host.sent).clone();
    assert_eq!(sent.len(), 1, "one notification for the one change");
    assert_eq!(sent[0].url, "https://hooks.example/a2a");
    assert_eq!(sent[0].method, "POST");
    assert_eq!(sent[0].header("Authorization"), Some("Bearer s3cret"));
    assert_eq!(sent[0].header("X-A2A-Notification-Token"), Some("tk"));
    let body: Value = serde_json::from_slice(&sent[0].body).expect("json");
    assert_eq!(body["task"]["id"], id.as_str());
    assert_eq!(body["task"]["status"]["state"], "TASK_STATE_CANCELED");

    let del = f.rpc(
        Some("1.0"),
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": cid}),
    );
    assert_eq!(del["result"], json!({}), "{del}");
    let listed = f.rpc(
        Some("1.0"),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    );
    assert_eq!(listed["result"]["configs"], json!([]));
}

#[cfg(feature = "push")]
#[test]
fn a_send_with_a_webhook_gets_each_state_in_its_dialect() {
    let f = push_fixture();
    // 0.3: the config on message/send, the bare 0.3 task delivered.
    let v = f.rpc(None, "message/send", json!({"message": msg_03("progress please"),
        "configuration": {"blocking": false, "pushNotificationConfig": {"url": "https://hooks.example/03"}}}));
    assert_eq!(v["result"]["status"]["state"], "submitted", "{v}");
    f.settle();
    let states: Vec<String> = lock(&f.host.sent)
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).expect("json")["status"]["state"].to_string()
        })
        .collect();
    // Each saved state: working, working saying "thinking", completed.
    assert_eq!(states, ["\"working\"", "\"working\"", "\"completed\""]);
    // A private webhook on send is refused before any task is made.
    let bad = f.rpc(
        Some("1.0"),
        "SendMessage",
        json!({"message": msg_10("x"),
        "configuration": {"taskPushNotificationConfig": {"url": "http://localhost/x"}}}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    // Without push the same send is PushNotificationNotSupported.
    let plain = fixture();
    let v = plain.rpc(
        Some("1.0"),
        "SendMessage",
        json!({"message": msg_10("x"),
        "configuration": {"taskPushNotificationConfig": {"url": "https://hooks.example/x"}}}),
    );
    assert_eq!(v["error"]["code"], -32003, "{v}");
}

/// A push-enabled server with one settled 1.0 task, and that task's id.
#[cfg(feature = "push")]
fn push_fixture_with_a_settled_task() -> (Fixture, String) {
    let f = push_fixture();
    let v = f.send(Some("1.0"), "SendMessage", "hang on", false);
    let id = v["result"]["task"]["id"].as_str().expect("id").to_string();
    f.settle();
    (f, id)
}

/// A push fixture over `store`: a server as a restart makes it, with
/// nothing in memory but what the store kept.
#[cfg(feature = "push")]
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn push_fixture_on(store: Arc<Recording>) -> Fixture {
    let host = Arc::new(TestHost::default());
    let options = ServerOptions {
        card: Some(card().into()),
        push: Some(PushOptions::default()),
        ..Default::default()
    };
    Fixture {
        server: A2aServer::new(options, store.clone(), host.clone(), Rules),
        host,
        store,
    }
}

#[cfg(feature = "push")]
#[test]
fn push_configs_are_stored_with_the_task_and_outlive_a_restart() {
    let f = push_fixture();
    let asked = f.send(Some("1.0"), "SendMessage", "ask for a trip", true);
    let task = &asked["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let id = task["id"].as_str().expect("id").to_string();
    let set = f.rpc(
        Some("1.0"),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": "https://hooks.example/a2a", "token": "tk",
            "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}),
    );
    let cid = set["result"]["id"].as_str().expect("config id").to_string();
    // 0.3 names too: a second webhook, delivered in 0.3 shapes.
    f.rpc(
        None,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "w03", "url": "https://hooks.example/03"}}),
    );

    // The restart: a new server on the same store, nothing else kept.
    let g = push_fixture_on(f.store.clone());
    drop(f);
    let got = g.rpc(
        Some("1.0"),
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": cid}),
    );
    assert_eq!(got["result"]["url"], "https://hooks.example/a2a", "{got}");
    assert!(!got.to_string().contains("s3cret"), "{got}");
    let listed = g.rpc(None, "tasks/pushNotificationConfig/list", json!({"id": id}));
    let ids: Vec<&str> = listed["result"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|c| c["pushNotificationConfig"]["id"].as_str())
        .collect();
    assert_eq!(ids, [cid.as_str(), "w03"], "{listed}");

    // The answer resumes the task: each state goes to both webhooks, in order,
    // with the stored credentials.
    let mut answer = json!({"message": {"role": "ROLE_USER", "messageId": "m2",
        "parts": [{"text": "Paris"}], "taskId": id}});
    answer["configuration"] = json!({"returnImmediately": false});
    let done = g.rpc(Some("1.0"), "SendMessage", answer);
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    g.settle();
    let sent = lock(&g.host.sent).clone();
    let to =
        |url: &str| -> Vec<HttpRequest> { sent.iter().filter(|r| r.url == url).cloned().collect() };
    let v10 = to("https://hooks.example/a2a");
    assert!(!v10.is_empty(), "delivery continues after the restart");
    assert!(v10
        .iter()
        .all(|r| r.header("Authorization") == Some("Bearer s3cret")));
    assert!(v10
        .iter()
        .all(|r| r.header("X-A2A-Notification-Token") == Some("tk")));
    let last: Value = serde_json::from_slice(&v10[v10.len() - 1].body).expect("json");
    assert_eq!(last["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let v03 = to("https://hooks.example/03");
    let last: Value = serde_json::from_slice(&v03[v03.len() - 1].body).expect("json");
    assert_eq!(
        last["status"]["state"], "completed",
        "0.3 webhooks get the bare 0.3 task"
    );

    // A delete is stored too: a second restart no longer has it.
    g.rpc(
        Some("1.0"),
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": "w03"}),
    );
    let h = push_fixture_on(g.store.clone());
    let listed = h.rpc(
        Some("1.0"),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    );
    assert_eq!(
        listed["result"]["configs"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
}

#[cfg(feature = "push")]
#[test]
fn a_webhook_set_on_send_is_stored_once_the_task_is() {
    let f = push_fixture();
    let v = f.rpc(
        None,
        "message/send",
        json!({"message": msg_03("ask for a trip"),
            "configuration": {"pushNotificationConfig": {"id": "w", "url": "https://hooks.example/03"}}}),
    );
    assert_eq!(v["result"]["status"]["state"], "input-required", "{v}");
    let id = v["result"]["id"].as_str().expect("id").to_string();
    let g = push_fixture_on(f.store.clone());
    let listed = g.rpc(None, "tasks/pushNotificationConfig/list", json!({"id": id}));
    assert_eq!(
        listed["result"][0]["pushNotificationConfig"]["id"], "w",
        "{listed}"
    );
    // A send whose task is never stored leaves no webhook behind.
    *lock(&f.store.refuse) = Some(TaskState::Submitted);
    let refused = f.rpc(
        None,
        "message/send",
        json!({"message": msg_03("ask again"),
            "configuration": {"pushNotificationConfig": {"url": "https://hooks.example/03"}}}),
    );
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(
        f.store.inner.list_now(&TaskFilter::default()).len(),
        1,
        "only the first task is stored"
    );
    let kept: Vec<String> = (1..=20)
        .map(|i| format!("id{i}"))
        .filter(|t| {
            crate::testing::block_on(f.store.inner.get_push_configs(t))
                .ok()
                .flatten()
                .is_some()
        })
        .collect();
    assert_eq!(kept, [id], "webhooks are kept for the stored task only");
}

// ---- Gaps found by the MUST list (CONFORMANCE.md) ----

#[test]
fn get_extended_agent_card_is_unsupported_while_the_card_does_not_declare_it() {
    // A2A 1.0 §3.3.4 and §13.3: `capabilities.extendedAgentCard` false or
    // absent ⇒ UnsupportedOperationError (-32004); -32007 is only for an agent
    // that declares one and has none configured. Both official SDKs agree.
    assert!(card()["capabilities"].get("extendedAgentCard").is_none());
    let f = fixture();
    for (version, method) in [
        (Some("1.0"), "GetExtendedAgentCard"),
        (None, "GetExtendedAgentCard"),
        (Some("0.3"), "agent/getAuthenticatedExtendedCard"),
        (None, "agent/getAuthenticatedExtendedCard"),
    ] {
        let v = f.rpc(version, method, json!({}));
        assert_eq!(v["error"]["code"], -32004, "{method}: {v}");
    }
    let v = f.rpc(Some("1.0"), "GetExtendedAgentCard", json!({}));
    assert_eq!(v["error"]["data"][0]["reason"], "UNSUPPORTED_OPERATION");
}

#[test]
fn list_tasks_status_timestamp_after_includes_that_very_instant() {
    // a2a.proto ListTasksRequest.status_timestamp_after: "Only tasks with a
    // status timestamp time greater than or equal to this value".
    let f = fixture();
    f.host.time.advance_to(2_000);
    let v = f.send(Some("1.0"), "SendMessage", "hello", true);
    let task = &v["result"]["task"];
    assert_eq!(
        task["status"]["timestamp"], "2025-12-01T00:00:02.000Z",
        "{v}"
    );
    let listed = |after: &str| -> Vec<Value> {
        let page = f.rpc(
            Some("1.0"),
            "ListTasks",
            json!({"statusTimestampAfter": after}),
        );
        page["result"]["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].clone())
            .collect()
    };
    assert_eq!(listed("2025-12-01T00:00:02.000Z"), [task["id"].clone()]);
    assert_eq!(listed("2025-12-01T00:00:02.001Z"), Vec::<Value>::new());
}

#[test]
fn a_message_naming_a_task_gets_the_same_errors_in_03_and_on_streams() {
    // A2A 1.0 §3.4.2 (unknown taskId ⇒ TaskNotFoundError), §3.4.3 (a
    // mismatching contextId is rejected), §3.1.1/§3.1.2 (a terminal task ⇒
    // UnsupportedOperationError); the 0.3 names and the streaming methods too.
    let f = fixture();
    let naming = |message: Value, task: &str, ctx: Option<&str>| -> Value {
        let mut m = with(message, "taskId", Some(json!(task)));
        if let Some(c) = ctx {
            m = with(m, "contextId", Some(json!(c)));
        }
        json!({"message": m})
    };
    for (version, method, message) in [
        (None, "message/send", msg_03("more")),
        (Some("0.3"), "message/stream", msg_03("more")),
        (Some("1.0"), "SendStreamingMessage", msg_10("more")),
    ] {
        assert_eq!(
            f.error_code(version, method, naming(message.clone(), "nope", None)),
            -32001,
            "{method}"
        );
    }
    let done = f.send(None, "message/send", "first", true);
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    let id = done["result"]["id"].as_str().expect("id").to_string();
    let ctx = done["result"]["contextId"]
        .as_str()
        .expect("ctx")
        .to_string();
    let saves = lock(&f.store.saves).len();
    for (version, method, message) in [
        (None, "message/send", msg_03("more")),
        (Some("0.3"), "message/stream", msg_03("more")),
        (Some("1.0"), "SendStreamingMessage", msg_10("more")),
    ] {
        let v = f.rpc(version, method, naming(message.clone(), &id, Some("other")));
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
        let v = f.rpc(version, method, naming(message, &id, Some(&ctx)));
        assert_eq!(v["error"]["code"], -32004, "{method}: {v}");
    }
    assert_eq!(lock(&f.store.saves).len(), saves, "nothing was saved");
}

#[test]
fn list_tasks_trims_each_history_and_refuses_the_specs_bad_parameters() {
    let f = fixture();
    let asked = f.send(Some("1.0"), "SendMessage", "ask for a trip", true);
    let id = asked["result"]["task"]["id"].clone();
    let answer = json!({"message": {"role": "ROLE_USER", "messageId": "m2",
        "taskId": id, "parts": [{"text": "Paris"}]}});
    let done = f.rpc(Some("1.0"), "SendMessage", answer);
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    let history = |params: Value| -> Vec<String> {
        let page = f.rpc(Some("1.0"), "ListTasks", params);
        page["result"]["tasks"][0]["history"]
            .as_array()
            .map(|h| {
                h.iter()
                    .map(|m| m["parts"][0]["text"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(history(json!({})).len(), 3);
    // §3.2.4: "> 0: Return at most this many recent messages".
    assert_eq!(history(json!({"historyLength": 1})), ["Paris"]);
    assert_eq!(history(json!({"historyLength": 0})), Vec::<String>::new());
    // §6.5 "Validation Error Example", one bad parameter at a time.
    for params in [
        json!({"pageSize": 150}),
        json!({"historyLength": -5}),
        json!({"status": "TASK_STATE_RUNNING"}),
    ] {
        assert_eq!(
            f.error_code(Some("1.0"), "ListTasks", params.clone()),
            -32602,
            "{params}"
        );
    }
}

#[test]
fn every_v10_error_detail_names_its_type() {
    // A2A 1.0 §3.3.2 and §9.5: each object in `error.data` MUST include `@type`.
    let f = fixture();
    let done = f.send(Some("1.0"), "SendMessage", "first", true);
    let id = done["result"]["task"]["id"].clone();
    let cases = [
        (
            Some("1.0"),
            "SendMessage",
            json!({"message": {"role": "ROLE_USER"}}),
        ),
        (Some("1.0"), "GetTask", json!({"id": "nope"})),
        (Some("1.0"), "CancelTask", json!({"id": id})),
        (Some("1.0"), "ListTasks", json!({"pageSize": 0})),
        (
            Some("1.0"),
            "ListTaskPushNotificationConfigs",
            json!({"taskId": id}),
        ),
        (Some("1.0"), "GetExtendedAgentCard", json!({})),
        (Some("1.0"), "NoSuchMethod", json!({})),
        (Some("9.9"), "GetTask", json!({"id": id})),
    ];
    let mut codes = Vec::new();
    for (version, method, params) in cases {
        let v = f.rpc(version, method, params);
        let data = v["error"]["data"].as_array().expect("details");
        assert!(!data.is_empty(), "{method}: {v}");
        for d in data {
            assert!(
                d["@type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("type.googleapis.com/google.rpc.")),
                "{method}: {v}"
            );
        }
        codes.push(v["error"]["code"].as_i64().expect("code"));
    }
    assert_eq!(
        codes,
        [-32602, -32001, -32002, -32602, -32003, -32004, -32601, -32009]
    );
}

#[cfg(feature = "push")]
#[test]
fn push_config_lookups_of_unknown_configs_are_not_found_and_deletes_are_idempotent() {
    // A2A 1.0 §3.1.8 (Get MUST fail if the config does not exist: the
    // TaskNotFoundError), §3.1.10 (Delete MUST be idempotent), a2a.proto
    // TaskPushNotificationConfig.url REQUIRED.
    let (f, id) = push_fixture_with_a_settled_task();
    assert_eq!(
        f.error_code(
            Some("1.0"),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "token": "tk"})
        ),
        -32602
    );
    let set = f.rpc(
        Some("1.0"),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": "https://hooks.example/a2a"}),
    );
    let cid = set["result"]["id"].as_str().expect("config id").to_string();
    assert_eq!(
        f.error_code(
            Some("1.0"),
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "nope"})
        ),
        -32001
    );
    assert_eq!(
        f.error_code(
            None,
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": "nope"})
        ),
        -32001
    );
    for _ in 0..2 {
        let del = f.rpc(
            Some("1.0"),
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": cid}),
        );
        assert_eq!(del["result"], json!({}), "{del}");
        let del03 = f.rpc(
            None,
            "tasks/pushNotificationConfig/delete",
            json!({"id": id, "pushNotificationConfigId": cid}),
        );
        assert!(del03.get("error").is_none(), "{del03}");
        assert_eq!(del03["result"], Value::Null, "{del03}");
    }
    assert_eq!(
        f.error_code(
            Some("1.0"),
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": cid})
        ),
        -32001
    );
}

#[test]
fn history_length_keeps_the_latest_messages_on_send_message_and_get_task() {
    // a2a.proto SendMessageConfiguration / GetTaskRequest.history_length:
    // "The server MUST NOT return more messages than the provided value", on a
    // task with more history than that (ask, question, answer).
    let f = fixture();
    let texts = |task: &Value| -> Vec<String> {
        task["history"]
            .as_array()
            .map(|h| {
                h.iter()
                    .map(|m| m["parts"][0]["text"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let asked = f.send(Some("1.0"), "SendMessage", "ask for a trip", true);
    let id = asked["result"]["task"]["id"].clone();
    let answer = json!({"message": {"role": "ROLE_USER", "messageId": "m2",
        "taskId": id, "parts": [{"text": "Paris"}]},
        "configuration": {"historyLength": 1}});
    let done = f.rpc(Some("1.0"), "SendMessage", answer);
    assert_eq!(texts(&done["result"]["task"]), ["Paris"], "{done}");
    // §3.4.3: the context is the task's when only the taskId is given.
    assert_eq!(
        done["result"]["task"]["contextId"],
        asked["result"]["task"]["contextId"]
    );
    let got = f.rpc(
        Some("1.0"),
        "GetTask",
        json!({"id": id, "historyLength": 2}),
    );
    assert_eq!(
        texts(&got["result"]),
        [super::conversation_tests::CITY, "Paris"],
        "{got}"
    );
    let got = f.rpc(None, "tasks/get", json!({"id": id, "historyLength": 1}));
    assert_eq!(texts(&got["result"]), ["Paris"], "{got}");
    let all = f.rpc(None, "tasks/get", json!({"id": id}));
    assert_eq!(texts(&all["result"]).len(), 3, "{all}");
}

#[cfg(feature = "push")]
#[test]
fn a_webhook_that_never_answers_times_out_on_each_attempt_then_is_given_up() {
    // A2A 1.0 §4.3.3 / §13.2 (SHOULD): a timeout on webhook requests
    // (recommended 10-30 s) and retries with exponential backoff.
    // The delivery machine on virtual time: every attempt's deadline
    // passes, every pause ends.
    use crate::host::driver::{Machine, Step};
    use crate::server::delivery::{PushDelivery, PushWork, PushWorked};
    use crate::server::push::{DELIVERY_TIMEOUT_MS, RETRY_BACKOFF_MS};
    let task =
        Task::from_value(&json!({"id": "t1", "status": {"state": "completed"}})).expect("task");
    let hook = json!([{"id": "a", "url": "https://hooks.example/a2a", "dialect": "1.0"}]);
    let mut m = PushDelivery::new("t1".into());
    assert!(matches!(m.start(0), Step::Work(PushWork::Next)));
    let _ = m.handle_work(0, PushWorked::Next(Some((task, None))));
    let mut step = m.handle_work(0, PushWorked::Configs(Ok(Some(hook))));
    let (mut now, mut timers) = (0, Vec::new());
    loop {
        let until = match step {
            Step::Send { deadline_ms, .. } => deadline_ms,
            Step::Sleep { until_ms } => until_ms,
            Step::Work(PushWork::Next) => break,
            _ => panic!("unexpected step"),
        };
        timers.push(until - now);
        now = until;
        step = m.handle_timeout(now);
    }
    assert_eq!(DELIVERY_TIMEOUT_MS, 10_000);
    assert_eq!(RETRY_BACKOFF_MS, [500, 2_000, 8_000]);
    assert_eq!(
        timers,
        [10_000, 500, 10_000, 2_000, 10_000, 8_000, 10_000],
        "four attempts, each bounded, with growing pauses between"
    );
    assert_eq!(
        m.poll_event().as_deref(),
        Some("push notification for task t1 to https://hooks.example/a2a failed: no answer within 10000 ms")
    );
}

#[test]
fn a_send_naming_a_webhook_is_push_not_supported_on_an_agent_without_push() {
    // A2A 1.0 §3.3.4: pushNotifications false ⇒ PushNotificationNotSupportedError.
    // Runs with and without the `push` feature (the npm package has it off).
    let f = fixture();
    assert_eq!(card()["capabilities"]["pushNotifications"], false);
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        json!({"message": msg_10("x"),
            "configuration": {"taskPushNotificationConfig": {"url": "https://hooks.example/x"}}}),
    );
    assert_eq!(v["error"]["code"], -32003, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"],
        "PUSH_NOTIFICATION_NOT_SUPPORTED"
    );
    let v = f.rpc(
        None,
        "message/send",
        json!({"message": msg_03("x"),
            "configuration": {"pushNotificationConfig": {"url": "https://hooks.example/x"}}}),
    );
    assert_eq!(v["error"]["code"], -32003, "{v}");
    assert!(lock(&f.store.saves).is_empty(), "no task was made");
}

#[test]
fn auth_required_in_10_is_a_task_state_with_a_message_saying_why() {
    // A2A 1.0 §7.6.1: the agent "MUST use a Task", "MUST transition the
    // TaskState to TASK_STATE_AUTH_REQUIRED", "MUST include a TaskStatus
    // message explaining the required authorization"; a blocking send ends there.
    use super::conversation_tests::SIGN_IN;
    let f = fixture();
    let v = f.send(Some("1.0"), "SendMessage", "login to the calendar", true);
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{v}");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], SIGN_IN);
    let answer = json!({"message": {"role": "ROLE_USER", "messageId": "m2",
        "taskId": task["id"], "parts": [{"text": "done"}]}});
    let done = f.rpc(Some("1.0"), "SendMessage", answer);
    assert_eq!(done["result"]["task"]["id"], task["id"], "{done}");
    assert_eq!(
        done["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[cfg(feature = "push")]
#[test]
fn push_configs_missing_required_fields_are_invalid_params_in_each_dialect() {
    // a2a.proto: GetTaskPushNotificationConfigRequest.id and
    // AuthenticationInfo.scheme are REQUIRED (1.0); 0.3's
    // PushNotificationAuthenticationInfo.schemes is required, while its
    // tasks/pushNotificationConfig/get also takes the bare TaskIdParams.
    let (f, id) = push_fixture_with_a_settled_task();
    let set = f.rpc(
        Some("1.0"),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": "https://hooks.example/a2a"}),
    );
    assert!(set["result"]["id"].is_string(), "{set}");
    let no_id = f.rpc(
        Some("1.0"),
        "GetTaskPushNotificationConfig",
        json!({"taskId": id}),
    );
    assert_eq!(no_id["error"]["code"], -32602, "{no_id}");
    assert_eq!(
        no_id["error"]["data"][1]["fieldViolations"][0]["field"], "id",
        "{no_id}"
    );
    // 0.3: the task's id alone answers its config.
    let bare = f.rpc(None, "tasks/pushNotificationConfig/get", json!({"id": id}));
    assert_eq!(
        bare["result"]["pushNotificationConfig"]["url"], "https://hooks.example/a2a",
        "{bare}"
    );
    for (version, method, params, field) in [
        (
            Some("1.0"),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": "https://hooks.example/b",
                   "authentication": {"credentials": "s3cret"}}),
            "pushNotificationConfig.authentication.scheme",
        ),
        (
            None,
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"url": "https://hooks.example/b",
                   "authentication": {"credentials": "s3cret"}}}),
            "pushNotificationConfig.authentication.schemes",
        ),
    ] {
        let v = f.rpc(version, method, params);
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap_or("").contains(field),
            "{method}: {v}"
        );
        assert!(!v.to_string().contains("s3cret"), "{method}: {v}");
    }
    // Without `authentication` at all (or null) a config is fine.
    let plain = f.rpc(
        Some("1.0"),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": "https://hooks.example/c", "authentication": null}),
    );
    assert!(plain["result"]["id"].is_string(), "{plain}");
}
