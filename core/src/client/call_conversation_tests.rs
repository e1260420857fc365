//! The caller's side of a conversation: a question comes back with what is
//! needed to answer it, and the answer goes to the same task.

use super::*;
use crate::wire::rpc::MessageRefs;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn sent_message(peer: &ScriptedPeer, i: usize) -> Value {
    let (_, req) = &peer.requests()[i];
    let body: Value = serde_json::from_slice(&req.body).expect("JSON");
    body["params"]["message"].clone()
}

#[test]
fn a_question_result_names_the_task_and_context_to_answer() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(
            json!({"id": "t1", "contextId": "c1", "status": {"state": "input-required",
            "message": {"role": "agent", "parts": [{"kind": "text", "text": "Which branch?"}]}}}),
        )],
    );
    let r = run(&peer);
    assert!(r.is_error, "a question is not an answer");
    assert_eq!(r.output, "A2A task t1 input-required: Which branch?");
    assert_eq!(meta(&r)["taskId"], "t1");
    assert_eq!(meta(&r)["contextId"], "c1");
    // A settled result keeps the contract's metadata keys.
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(
            json!({"id": "t2", "contextId": "c2", "status": {"state": "completed"}}),
        )],
    );
    assert!(meta(&run(&peer)).get("contextId").is_none());
}

#[test]
fn an_answer_is_sent_in_the_task_and_context_it_names_in_every_dialect() {
    for (dialect, method) in [
        (Dialect::Toolnexus, "SendMessage"),
        (Dialect::V03, "message/send"),
        (Dialect::V10, "SendMessage"),
    ] {
        let peer = ScriptedPeer::new().on(method, vec![ok(completed("t1", "booked"))]);
        let refs = MessageRefs {
            task_id: Some("t1".into()),
            context_id: Some("c1".into()),
        };
        let r = block_on(drive(
            &mut CallMachine::new(spec(dialect)).continuing(refs),
            &peer,
            std::future::pending(),
        ));
        assert_eq!(r.output, "booked", "{dialect:?}");
        let m = sent_message(&peer, 0);
        assert_eq!(
            (m["taskId"].as_str(), m["contextId"].as_str()),
            (Some("t1"), Some("c1")),
            "{dialect:?}"
        );
        assert_eq!(m["messageId"], "m1");
    }
    // Without refs the message names neither.
    let peer = ScriptedPeer::new().on("SendMessage", vec![ok(completed("t1", "x"))]);
    run(&peer);
    let m = sent_message(&peer, 0);
    assert!(
        m.get("taskId").is_none() && m.get("contextId").is_none(),
        "{m}"
    );
}

#[test]
fn tool_arguments_name_the_task_and_context_as_optional_strings() {
    let refs = MessageRefs::from_args(&json!({"task": "x", "taskId": "t1", "contextId": "c1"}));
    assert_eq!(
        refs,
        Ok(MessageRefs {
            task_id: Some("t1".into()),
            context_id: Some("c1".into())
        })
    );
    assert_eq!(
        MessageRefs::from_args(&json!({"task": "x", "taskId": "", "contextId": null})),
        Ok(MessageRefs::default())
    );
    let bad = MessageRefs::from_args(&json!({"task": "x", "taskId": 7}));
    assert_eq!(
        bad,
        Err("the argument \"taskId\" must be a string".to_string())
    );
}

#[test]
fn the_schema_is_the_fixed_task_one_unless_the_agent_is_conversational() {
    let card =
        crate::client::card::AgentCard::from_value(&json!({"name": "desk", "url": "http://peer/",
        "skills": [{"id": "book", "description": "Books trips"}]}))
        .expect("card");
    let plain = crate::client::toolkit::card_tools(
        &crate::model::agent::Agent::new("http://peer/card"),
        &card,
    );
    assert_eq!(
        plain[0].spec.input_schema,
        json!({"type": "object", "properties": {"task": {"type": "string", "description": "Books trips"}},
               "required": ["task"]})
    );
    let agent = crate::model::agent::Agent {
        conversational: true,
        ..crate::model::agent::Agent::new("http://peer/card")
    };
    let tools = crate::client::toolkit::card_tools(&agent, &card);
    let schema = &tools[0].spec.input_schema;
    assert_eq!(schema["required"], json!(["task"]));
    assert_eq!(schema["properties"]["taskId"]["type"], "string");
    assert_eq!(schema["properties"]["contextId"]["type"], "string");

    // Either way, execute takes the ids (and refuses ids that are not strings).
    let peer = ScriptedPeer::new().on("SendMessage", vec![ok(completed("t1", "booked"))]);
    let args = json!({"task": "Rome", "taskId": "t1", "contextId": "c1"});
    let r = block_on(plain[0].execute(&peer, &args, std::future::pending()));
    assert_eq!(r.output, "booked");
    let m = sent_message(&peer, 0);
    assert_eq!(
        (m["taskId"].as_str(), m["contextId"].as_str()),
        (Some("t1"), Some("c1"))
    );
    let r = block_on(plain[0].execute(
        &peer,
        &json!({"task": "x", "contextId": 1}),
        std::future::pending(),
    ));
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "desk_book: the argument \"contextId\" must be a string"
    );
}

fn answering(dialect: Dialect, streaming: bool) -> CallMachine {
    let spec = CallSpec {
        streaming,
        ..spec(dialect)
    };
    CallMachine::new(spec).continuing(MessageRefs {
        task_id: Some("t1".into()),
        context_id: Some("c1".into()),
    })
}

fn question10(id: &str, message_id: &str, text: &str) -> Value {
    json!({"statusUpdate": {"taskId": id, "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"role": "ROLE_AGENT", "messageId": message_id, "parts": [{"text": text}]}}}})
}

#[test]
fn an_answer_is_not_settled_by_the_question_it_answers_but_by_the_next_one() {
    // The official JS server streams the task as it was (still asking) first.
    let stale = json!({"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"role": "ROLE_AGENT", "messageId": "q1", "parts": [{"text": "Which city?"}]}}}});
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![
            (1, stale.clone()),
            (1, status10("t1", "TASK_STATE_WORKING")),
            (1, chunk10("t1", "booked for Paris", false, true)),
            (1, status10("t1", "TASK_STATE_COMPLETED")),
        ])],
    );
    let r = block_on(drive(
        &mut answering(Dialect::V10, true),
        &peer,
        std::future::pending(),
    ));
    assert_eq!(r.output, "booked for Paris", "{r:?}");

    // A new question (after work, or with another message) is returned.
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![
            (1, stale.clone()),
            (1, question10("t1", "q2", "Which day?")),
            (10_000, status10("t1", "TASK_STATE_COMPLETED")),
        ])],
    );
    let r = block_on(drive(
        &mut answering(Dialect::V10, true),
        &peer,
        std::future::pending(),
    ));
    assert_eq!(r.output, "A2A task t1 input-required: Which day?");
    assert_eq!(meta(&r)["contextId"], "c1");

    // Polling: the send's echo of the old question is followed by polls.
    let peer = ScriptedPeer::new()
        .on(
            "SendMessage",
            vec![ok(task_with_message("t1", "input-required", "Which city?"))],
        )
        .on(
            "GetTask",
            vec![
                ok(task_with_message("t1", "input-required", "Which city?")),
                ok(task("t1", "working")),
                ok(task_with_message("t1", "input-required", "Which city?")),
            ],
        );
    let r = block_on(drive(
        &mut answering(Dialect::Toolnexus, false),
        &peer,
        std::future::pending(),
    ));
    assert_eq!(
        r.output, "A2A task t1 input-required: Which city?",
        "asked again after work"
    );
    assert_eq!(meta(&r)["polls"], 3);
}
