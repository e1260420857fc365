//! Every outcome of the outbound call, on the scripted peer with virtual time.

use super::test_support::drive;
use super::*;
use crate::model::event::StreamEvent;
use crate::testing::{block_on, completed, task, task_with_message, Reply, ScriptedPeer};
use serde_json::{json, Value};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::test_support::{meta, ok, run_with};

/// The shared `test_support::spec`, with a header to carry and fast polls.
fn spec(dialect: Dialect) -> CallSpec {
    CallSpec {
        headers: vec![("X-Trace".into(), "abc".into())],
        poll_every_ms: 10,
        ..super::test_support::spec(dialect)
    }
}

fn run(peer: &ScriptedPeer) -> ToolResult {
    run_with(peer, spec(Dialect::Toolnexus))
}

#[test]
fn completed_after_polling_joins_artifact_text() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![
                ok(task("t1", "working")),
                ok(
                    json!({"id": "t1", "status": {"state": "completed"}, "artifacts": [
                {"parts": [{"kind": "text", "text": "3 steps"}, {"kind": "data", "data": {}}]},
                {"parts": [{"kind": "text", "text": "planned"}]}]}),
                ),
            ],
        );
    let r = run(&peer);
    assert_eq!((r.output.as_str(), r.is_error), ("3 steps\nplanned", false));
    assert_eq!(meta(&r)["state"], "completed");
    assert_eq!(meta(&r)["taskId"], "t1");
    assert_eq!(meta(&r)["agent"], "planner");
    assert_eq!(meta(&r)["polls"], 2);
    assert_eq!(peer.methods(), ["SendMessage", "GetTask", "GetTask"]);
}

#[test]
fn completed_without_artifacts_uses_the_last_agent_message() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(json!({"id": "t1",
        "status": {"state": "completed"}, "history": [
            {"role": "user", "parts": [{"kind": "text", "text": "q"}]},
            {"role": "agent", "parts": [{"kind": "text", "text": "from history"}]}]}))],
    );
    let r = run(&peer);
    assert_eq!((r.output.as_str(), r.is_error), ("from history", false));
    assert_eq!(meta(&r)["polls"], 0);
}

#[test]
fn failed_carries_the_remote_status_message() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "submitted"))])
        .on(
            "GetTask",
            vec![ok(task_with_message(
                "t1",
                "failed",
                "diff would not apply",
            ))],
        );
    let r = run(&peer);
    assert!(r.is_error);
    assert_eq!(r.output, "A2A task t1 failed: diff would not apply");
    assert_eq!(meta(&r)["state"], "failed");
}

#[test]
fn canceled_and_rejected_are_errors_with_or_without_a_message() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(task("t1", "canceled"))]);
    let r = run(&peer);
    assert_eq!(
        (r.output.as_str(), r.is_error),
        ("A2A task t1 canceled", true)
    );

    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(task_with_message(
            "t2",
            "TASK_STATE_REJECTED",
            "not my job",
        ))],
    );
    let r = run(&peer);
    assert_eq!(
        (r.output.as_str(), r.is_error),
        ("A2A task t2 rejected: not my job", true)
    );
    assert_eq!(meta(&r)["state"], "rejected");
}

#[test]
fn input_required_stops_polling_and_returns_the_question() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![ok(task_with_message(
                "t1",
                "input-required",
                "Which branch?",
            ))],
        );
    let r = run(&peer);
    assert!(r.is_error);
    assert_eq!(r.output, "A2A task t1 input-required: Which branch?");
    assert_eq!(meta(&r)["state"], "input-required");
    assert_eq!(meta(&r)["polls"], 1);
    assert!(
        peer.now() < 100,
        "stopped at once, not at the timeout: {}",
        peer.now()
    );
}

#[test]
fn auth_required_stops_polling_too() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(task_with_message(
            "t1",
            "TASK_STATE_AUTH_REQUIRED",
            "Log in first",
        ))],
    );
    let r = run(&peer);
    assert_eq!(r.output, "A2A task t1 auth-required: Log in first");
    assert_eq!(meta(&r)["state"], "auth-required");
}

#[test]
fn timeout_has_the_exact_text_and_stops_at_the_deadline() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "submitted"))])
        .on("GetTask", vec![ok(task("t1", "working"))]);
    let r = run_with(
        &peer,
        CallSpec {
            timeout_ms: 100,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A task t1 timed out after 100ms (state=working)"
    );
    assert_eq!(meta(&r)["ms"], 100);
    assert_eq!(peer.now(), 100);
}

#[test]
fn a_send_slower_than_the_timeout_times_out() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![Reply::Delay(10_000, Box::new(ok(task("t1", "working"))))],
    );
    let r = run_with(
        &peer,
        CallSpec {
            timeout_ms: 300,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert_eq!(
        r.output,
        "A2A task (not created) timed out after 300ms (state=unknown)"
    );
    assert_eq!(meta(&r)["taskId"], Value::Null);
}

#[test]
fn abort_stops_before_the_next_get_task_and_cancels_remotely() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(task("t1", "working"))])
        .on("CancelTask", vec![ok(task("t1", "canceled"))]);
    let spec = CallSpec {
        poll_every_ms: 1_000,
        ..spec(Dialect::Toolnexus)
    };
    let r = block_on(drive(
        &mut CallMachine::new(spec),
        &peer,
        peer.abort_at(500),
    ));
    assert!(r.is_error);
    assert_eq!(r.output, "A2A task t1 canceled");
    assert_eq!(meta(&r)["state"], "canceled");
    let methods = peer.methods();
    assert_eq!(methods.last().map(String::as_str), Some("CancelTask"));
    let after_abort = peer.requests().iter().filter(|(t, _)| *t >= 500).count();
    assert_eq!(
        after_abort, 1,
        "only the CancelTask after the abort: {methods:?}"
    );
}

#[test]
fn abort_of_a_peer_that_ignores_cancel_still_returns_promptly() {
    let peer = ScriptedPeer::new()
        .on("message/send", vec![ok(task("t1", "working"))])
        .on("tasks/get", vec![ok(task("t1", "working"))])
        .on(
            "tasks/cancel",
            vec![Reply::Delay(60_000, Box::new(ok(task("t1", "canceled"))))],
        );
    let r = block_on(drive(
        &mut CallMachine::new(spec(Dialect::V03)),
        &peer,
        peer.abort_at(100),
    ));
    assert_eq!(r.output, "A2A task t1 canceled");
    assert_eq!(peer.now(), 100 + CANCEL_GRACE_MS);
    assert_eq!(
        peer.methods().last().map(String::as_str),
        Some("tasks/cancel")
    );
}

#[test]
fn abort_before_the_task_exists_returns_canceled() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![Reply::Delay(1_000, Box::new(ok(task("t1", "working"))))],
    );
    let r = block_on(drive(
        &mut CallMachine::new(spec(Dialect::Toolnexus)),
        &peer,
        peer.abort_at(50),
    ));
    assert_eq!(r.output, "A2A task (not created) canceled");
    assert_eq!(meta(&r)["state"], "canceled");
    assert_eq!(peer.methods(), ["SendMessage"]);
}

#[test]
fn json_rpc_errors_are_results_with_the_error_text() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![Reply::RpcError(-32001, "Task not found")]);
    let r = run(&peer);
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A GetTask t1 failed: JSON-RPC error -32001: Task not found"
    );
    assert_eq!(meta(&r)["taskId"], "t1");

    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![Reply::RpcError(-32602, "Invalid params")],
    );
    let r = run(&peer);
    assert_eq!(
        r.output,
        "A2A SendMessage to http://peer/ failed: JSON-RPC error -32602: Invalid params"
    );
    assert_eq!(meta(&r)["state"], "unknown");
}

#[test]
fn transport_errors_are_results() {
    let peer = ScriptedPeer::new().on("SendMessage", vec![Reply::Unreachable]);
    let r = run(&peer);
    assert_eq!(
        (r.output.as_str(), r.is_error),
        (
            "A2A SendMessage to http://peer/ failed: connection refused",
            true
        )
    );
}

#[test]
fn a_transient_poll_failure_is_retried_but_not_forever() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![Reply::Unreachable, ok(completed("t1", "done"))],
        );
    let r = run(&peer);
    assert_eq!((r.output.as_str(), r.is_error), ("done", false));

    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![Reply::Unreachable]);
    let r = run(&peer);
    assert_eq!(r.output, "A2A GetTask t1 failed: connection refused");
    assert_eq!(meta(&r)["polls"], MAX_POLL_FAILURES);
    assert_eq!(meta(&r)["state"], "working");
}

#[test]
fn malformed_replies_are_errors_never_panics() {
    for (reply, needle) in [
        (Reply::Http(200, "<html>hello</html>"), "is not JSON"),
        (Reply::Http(500, "boom"), "HTTP 500 from http://peer/: boom"),
        (
            Reply::Http(200, "{\"jsonrpc\":\"2.0\"}"),
            "not a JSON-RPC response",
        ),
        (ok(json!({"no": "id"})), "neither a task nor a message"),
        (ok(json!(42)), "neither a task nor a message"),
    ] {
        let peer = ScriptedPeer::new().on("SendMessage", vec![reply]);
        let r = run(&peer);
        assert!(
            r.is_error && r.output.contains(needle),
            "{needle}: {}",
            r.output
        );
    }
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(json!(["not", "a", "task"]))]);
    let r = run(&peer);
    assert!(
        r.is_error
            && r.output
                .starts_with("A2A GetTask t1 failed: the reply is not a task"),
        "{}",
        r.output
    );
}

#[test]
fn a_direct_message_reply_completes_without_a_task() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(json!({"message": {
        "role": "ROLE_AGENT", "messageId": "x", "parts": [{"text": "right away"}]}}))],
    );
    let r = run_with(&peer, spec(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("right away", false));
    assert_eq!(meta(&r)["state"], "completed");
}

#[test]
fn version_mismatch_retries_once_in_the_other_dialect() {
    // A 0.3-only peer answers 1.0 with -32009; the call switches for good.
    let peer = ScriptedPeer::new()
        .on(
            "SendMessage",
            vec![Reply::RpcError(-32009, "Version not supported")],
        )
        .on("message/send", vec![ok(task("t1", "working"))])
        .on("tasks/get", vec![ok(completed("t1", "ok in 0.3"))]);
    let r = run_with(&peer, spec(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("ok in 0.3", false));
    assert_eq!(peer.methods(), ["SendMessage", "message/send", "tasks/get"]);
    let first = &peer.requests()[0].1;
    assert_eq!(first.header("A2A-Version"), Some("1.0"));
    assert_eq!(peer.requests()[1].1.header("A2A-Version"), None);
}

#[test]
fn method_not_found_on_the_first_call_retries_once_only() {
    let peer = ScriptedPeer::new()
        .on(
            "SendMessage",
            vec![Reply::RpcError(-32601, "Method not found")],
        )
        .on(
            "message/send",
            vec![Reply::RpcError(-32601, "Method not found")],
        );
    let r = run(&peer);
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A SendMessage to http://peer/ failed: JSON-RPC error -32601: Method not found"
    );
    assert_eq!(peer.methods(), ["SendMessage", "message/send"]);
}

#[test]
fn every_get_task_asks_for_a_long_poll_within_the_time_left() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![ok(task("t1", "working")), ok(completed("t1", "x"))],
        );
    run_with(
        &peer,
        CallSpec {
            timeout_ms: 60_000,
            long_poll: true,
            ..spec(Dialect::Toolnexus)
        },
    );
    let prefer: Vec<Option<String>> = peer
        .requests()
        .iter()
        .skip(1)
        .map(|(_, r)| r.header("Prefer").map(str::to_string))
        .collect();
    assert_eq!(
        prefer,
        [Some("wait=10".to_string()), Some("wait=10".to_string())]
    );
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(completed("t1", "x"))]);
    run_with(
        &peer,
        CallSpec {
            timeout_ms: 900,
            long_poll: true,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert_eq!(
        peer.requests()[1].1.header("Prefer"),
        None,
        "under a second left: no wait asked"
    );
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(completed("t1", "x"))]);
    run_with(
        &peer,
        CallSpec {
            long_poll: false,
            streaming: false,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert_eq!(
        peer.requests()[1].1.header("Prefer"),
        None,
        "a card without the extension: no header"
    );
}

#[test]
fn a_honoured_long_poll_is_followed_at_once_by_the_next() {
    // The peer holds each GetTask 10 s (virtual) and says so; the task settles on the third.
    let held = |r: Reply| Reply::LongPolled(Box::new(Reply::Delay(10_000, Box::new(r))));
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![
                held(ok(task("t1", "working"))),
                held(ok(task("t1", "working"))),
                Reply::LongPolled(Box::new(Reply::Delay(
                    3_000,
                    Box::new(ok(completed("t1", "done"))),
                ))),
            ],
        );
    let r = run_with(
        &peer,
        CallSpec {
            timeout_ms: 60_000,
            poll_every_ms: 1_000,
            long_poll: true,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert_eq!((r.output.as_str(), r.is_error), ("done", false));
    let times: Vec<u64> = peer.requests().iter().skip(1).map(|(t, _)| *t).collect();
    assert_eq!(
        times,
        [0, 10_000, 20_000],
        "no sleep before or between honoured long-polls"
    );
    assert_eq!(
        peer.now(),
        23_000,
        "the result arrives the moment the peer answers"
    );
}

#[test]
fn polls_start_fast_and_back_off_to_poll_every() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![
                ok(task("t1", "working")),
                ok(task("t1", "working")),
                ok(task("t1", "working")),
                ok(task("t1", "working")),
                ok(task("t1", "working")),
                ok(completed("t1", "x")),
            ],
        );
    let r = run_with(
        &peer,
        CallSpec {
            poll_every_ms: 100,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert!(!r.is_error);
    let times: Vec<u64> = peer.requests().iter().skip(1).map(|(t, _)| *t).collect();
    // A quarter of the elapsed time, at least 25 ms, at most poll_every.
    assert_eq!(times, [25, 50, 75, 100, 125, 156]);
}

#[test]
fn every_request_carries_the_headers_and_json_content_type() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(completed("t1", "x"))]);
    run(&peer);
    for (_, req) in peer.requests() {
        assert_eq!(req.header("x-trace"), Some("abc"));
        assert_eq!(req.header("Content-Type"), Some("application/json"));
        assert_eq!(req.url, "http://peer/");
    }
}

// ---- Streaming peers, blocking sends, and events (virtual time) ----

fn streaming(dialect: Dialect) -> CallSpec {
    CallSpec {
        streaming: true,
        ..spec(dialect)
    }
}

fn status10(id: &str, state: &str) -> Value {
    json!({"statusUpdate": {"taskId": id, "contextId": "c1", "status": {"state": state}}})
}

fn chunk10(id: &str, text: &str, append: bool, last: bool) -> Value {
    json!({"artifactUpdate": {"taskId": id, "contextId": "c1", "append": append, "lastChunk": last,
        "artifact": {"artifactId": "a1", "parts": [{"text": text}]}}})
}

fn task10(id: &str, state: &str) -> Value {
    json!({"task": {"id": id, "contextId": "c1", "status": {"state": state}}})
}

fn run_events(peer: &ScriptedPeer, spec: CallSpec) -> (ToolResult, Vec<(u64, StreamEvent)>) {
    let mut events = Vec::new();
    let r = block_on(super::test_support::drive_with_events(
        &mut CallMachine::new(spec),
        peer,
        std::future::pending(),
        |e| events.push((peer.now(), e)),
    ));
    (r, events)
}

#[test]
fn a_streaming_peer_is_followed_event_by_event_to_the_end() {
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![
            (1, task10("t1", "TASK_STATE_SUBMITTED")),
            (1, status10("t1", "TASK_STATE_WORKING")),
            (100, chunk10("t1", "chunk 0", false, false)),
            (100, chunk10("t1", "chunk 1", true, true)),
            (1, status10("t1", "TASK_STATE_COMPLETED")),
        ])],
    );
    let (r, events) = run_events(&peer, streaming(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("chunk 0\nchunk 1", false));
    assert_eq!(meta(&r)["state"], "completed");
    assert_eq!(meta(&r)["polls"], 0);
    assert_eq!(meta(&r)["taskId"], "t1");
    assert_eq!(peer.methods(), ["SendStreamingMessage"]);
    let req = &peer.requests()[0].1;
    assert_eq!(req.header("Accept"), Some("text/event-stream"));
    assert_eq!(req.header("A2A-Version"), Some("1.0"));
    // Each event reached the caller when it arrived, not at the end.
    let times: Vec<u64> = events.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, [1, 2, 102, 202, 203]);
    assert!(matches!(events[0].1, StreamEvent::Task(_)));
    assert_eq!(events[4].1.state(), Some(TaskState::Completed));
    // The result is handed over the moment the terminal event arrives.
    assert_eq!(meta(&r)["ms"], 203);
}

#[test]
fn a_0_3_stream_uses_message_stream_and_kind_shaped_events() {
    let peer = ScriptedPeer::new().on(
        "message/stream",
        vec![Reply::Stream(vec![
            (0, json!({"kind": "task", "id": "t1", "contextId": "c1", "status": {"state": "submitted"}})),
            (5, json!({"kind": "artifact-update", "taskId": "t1", "contextId": "c1",
                "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "done"}]},
                "append": false, "lastChunk": true})),
            (5, json!({"kind": "status-update", "taskId": "t1", "contextId": "c1",
                "status": {"state": "completed"}, "final": true})),
        ])],
    );
    let (r, events) = run_events(&peer, streaming(Dialect::V03));
    assert_eq!((r.output.as_str(), r.is_error), ("done", false));
    assert_eq!(peer.methods(), ["message/stream"]);
    assert_eq!(events.len(), 3);
}

#[test]
fn a_dropped_stream_is_resubscribed_and_the_result_comes_once() {
    let peer = ScriptedPeer::new()
        .on(
            "SendStreamingMessage",
            vec![Reply::StreamBroken(vec![
                (1, task10("t1", "TASK_STATE_SUBMITTED")),
                (1, status10("t1", "TASK_STATE_WORKING")),
            ])],
        )
        .on(
            "SubscribeToTask",
            vec![Reply::Stream(vec![
                (1, task10("t1", "TASK_STATE_WORKING")),
                (300, chunk10("t1", "answer", false, true)),
                (1, status10("t1", "TASK_STATE_COMPLETED")),
            ])],
        );
    let (r, events) = run_events(&peer, streaming(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("answer", false));
    assert_eq!(peer.methods(), ["SendStreamingMessage", "SubscribeToTask"]);
    let body: Value = serde_json::from_slice(&peer.requests()[1].1.body).expect("json");
    assert_eq!(body["params"], json!({"id": "t1"}));
    let terminal = events
        .iter()
        .filter(|(_, e)| e.state() == Some(TaskState::Completed))
        .count();
    assert_eq!(terminal, 1);
}

#[test]
fn a_refused_resubscription_falls_back_to_polling() {
    let peer = ScriptedPeer::new()
        .on(
            "SendStreamingMessage",
            vec![Reply::StreamBroken(vec![(
                1,
                task10("t1", "TASK_STATE_WORKING"),
            )])],
        )
        .on("SubscribeToTask", vec![Reply::RpcError(-32004, "no")])
        .on(
            "GetTask",
            vec![
                ok(json!({"id": "t1", "status": {"state": "TASK_STATE_WORKING"}})),
                ok(completed("t1", "polled")),
            ],
        );
    let (r, _) = run_events(&peer, streaming(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("polled", false));
    assert_eq!(
        peer.methods(),
        [
            "SendStreamingMessage",
            "SubscribeToTask",
            "GetTask",
            "GetTask"
        ]
    );
}

#[test]
fn a_stream_that_keeps_dropping_is_resubscribed_a_bounded_number_of_times() {
    let broken = || Reply::StreamBroken(vec![(1, task10("t1", "TASK_STATE_WORKING"))]);
    let peer = ScriptedPeer::new()
        .on("SendStreamingMessage", vec![broken()])
        .on("SubscribeToTask", vec![broken()])
        .on("GetTask", vec![ok(completed("t1", "at last"))]);
    let (r, _) = run_events(&peer, streaming(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("at last", false));
    let methods = peer.methods();
    let resubscribes = methods.iter().filter(|m| *m == "SubscribeToTask").count();
    assert_eq!(resubscribes as u32, MAX_RESUBSCRIBES);
    assert_eq!(methods.last().map(String::as_str), Some("GetTask"));
    // Pauses grow: 50, 200, 800 ms between the attempts.
    let at: Vec<u64> = peer
        .requests()
        .iter()
        .filter(|(_, r)| String::from_utf8_lossy(&r.body).contains("SubscribeToTask"))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(at, [51, 252, 1053]);
}

#[test]
fn a_stream_that_ends_before_any_task_is_an_error() {
    let peer = ScriptedPeer::new().on("SendStreamingMessage", vec![Reply::Stream(vec![])]);
    let (r, _) = run_events(&peer, streaming(Dialect::V10));
    assert!(r.is_error);
    assert!(
        r.output.contains("ended before the task was created"),
        "{}",
        r.output
    );
}

#[test]
fn a_stream_request_answered_in_plain_json_is_read_as_the_answer() {
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![ok(
            json!({"task": {"id": "t1", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "whole"}]}]}}),
        )],
    );
    let (r, events) = run_events(&peer, streaming(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("whole", false));
    assert_eq!(events.len(), 1);
}

#[test]
fn a_peer_that_cannot_stream_after_all_gets_a_blocking_send() {
    let peer = ScriptedPeer::new()
        .on(
            "SendStreamingMessage",
            vec![Reply::RpcError(-32004, "Streaming is not supported")],
        )
        .on(
            "SendMessage",
            vec![ok(json!({"task": completed("t1", "blocked")}))],
        );
    let (r, _) = run_events(&peer, streaming(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("blocked", false));
    assert_eq!(peer.methods(), ["SendStreamingMessage", "SendMessage"]);
    let body: Value = serde_json::from_slice(&peer.requests()[1].1.body).expect("json");
    assert_eq!(body["params"].get("configuration"), None);
}

#[test]
fn a2a_peers_without_streaming_get_one_blocking_send() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(json!({"task": completed("t1", "x")}))],
    );
    let (r, events) = run_events(&peer, spec(Dialect::V10));
    assert_eq!((r.output.as_str(), r.is_error), ("x", false));
    assert_eq!(peer.methods(), ["SendMessage"]);
    let body: Value = serde_json::from_slice(&peer.requests()[0].1.body).expect("json");
    assert_eq!(
        body["params"].get("configuration"),
        None,
        "1.0 blocks by default"
    );
    assert_eq!(events.len(), 1);

    let peer = ScriptedPeer::new().on("message/send", vec![ok(completed("t1", "y"))]);
    let (r, _) = run_events(&peer, spec(Dialect::V03));
    assert_eq!(r.output, "y");
    let body: Value = serde_json::from_slice(&peer.requests()[0].1.body).expect("json");
    assert_eq!(body["params"]["configuration"]["blocking"], true);
    // The toolnexus dialect keeps the non-blocking send its servers expect.
    let peer = ScriptedPeer::new().on("SendMessage", vec![ok(completed("t1", "z"))]);
    run_events(&peer, spec(Dialect::Toolnexus));
    let body: Value = serde_json::from_slice(&peer.requests()[0].1.body).expect("json");
    assert_eq!(body["params"]["configuration"]["blocking"], false);
}

#[test]
fn a_blocking_send_answered_unsettled_is_polled() {
    let peer = ScriptedPeer::new()
        .on(
            "SendMessage",
            vec![ok(
                json!({"task": {"id": "t1", "status": {"state": "TASK_STATE_WORKING"}}}),
            )],
        )
        .on("GetTask", vec![ok(completed("t1", "later"))]);
    let (r, events) = run_events(&peer, spec(Dialect::V10));
    assert_eq!(r.output, "later");
    assert_eq!(peer.methods(), ["SendMessage", "GetTask"]);
    assert_eq!(events.len(), 2, "working, then completed");
}

#[test]
fn abort_mid_stream_cancels_the_task() {
    let peer = ScriptedPeer::new()
        .on(
            "SendStreamingMessage",
            vec![Reply::Stream(vec![
                (1, task10("t1", "TASK_STATE_WORKING")),
                (5_000, status10("t1", "TASK_STATE_COMPLETED")),
            ])],
        )
        .on("CancelTask", vec![ok(task("t1", "canceled"))]);
    let r = block_on(drive(
        &mut CallMachine::new(streaming(Dialect::V10)),
        &peer,
        peer.abort_at(100),
    ));
    assert!(r.is_error);
    assert_eq!(r.output, "A2A task t1 canceled");
    assert_eq!(peer.methods(), ["SendStreamingMessage", "CancelTask"]);
}

#[test]
fn a_stream_that_outlives_the_timeout_times_out() {
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![
            (1, task10("t1", "TASK_STATE_WORKING")),
            (60_000, status10("t1", "TASK_STATE_COMPLETED")),
        ])],
    );
    let (r, _) = run_events(&peer, streaming(Dialect::V10));
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A task t1 timed out after 5000ms (state=working)"
    );
    assert_eq!(peer.now(), 5_000);
}

#[test]
fn an_input_required_event_ends_the_stream_call_with_the_question() {
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![
            (1, task10("t1", "TASK_STATE_WORKING")),
            (1, json!({"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"role": "ROLE_AGENT", "messageId": "q", "parts": [{"text": "Which city?"}]}}}})),
            (10_000, status10("t1", "TASK_STATE_COMPLETED")),
        ])],
    );
    let (r, _) = run_events(&peer, streaming(Dialect::V10));
    assert!(r.is_error);
    assert_eq!(r.output, "A2A task t1 input-required: Which city?");
    assert_eq!(peer.now(), 2);
}

#[test]
fn a_json_rpc_error_event_and_junk_events_are_errors_not_panics() {
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![(1, json!(42))])],
    );
    let (r, _) = run_events(&peer, streaming(Dialect::V10));
    assert!(r.is_error);
    assert!(r.output.contains("none of task, message"), "{}", r.output);
}

// ---- Parts beyond text (issue 9) ----

#[test]
fn file_and_data_parts_of_the_answer_come_in_metadata_parts_and_the_output_keeps_the_text() {
    let png = json!({"raw": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "chart.png"});
    let data = json!({"data": {"rows": 3}, "mediaType": "application/json"});
    // A 0.3 peer answering by polls, and a 1.0 peer streaming.
    let peer03 = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(json!({"id": "t1", "status": {"state": "completed"}, "artifacts": [{"parts": [
            {"kind": "text", "text": "see the chart"},
            {"kind": "file", "file": {"bytes": "iVBORw0KGgo=", "mimeType": "image/png", "name": "chart.png"}},
            {"kind": "data", "data": {"rows": 3}}]}]}))],
    );
    let r = run(&peer03);
    assert_eq!((r.output.as_str(), r.is_error), ("see the chart", false));
    assert_eq!(
        meta(&r)["parts"],
        json!([png, {"data": {"rows": 3}}]),
        "1.0 shapes"
    );
    let peer10 = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![
            (1, task10("t1", "TASK_STATE_SUBMITTED")),
            (
                1,
                json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1",
                "artifact": {"artifactId": "a1", "parts": [{"text": "see"}, png.clone()]}}}),
            ),
            (
                1,
                json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1", "append": true,
                "artifact": {"artifactId": "a1", "parts": [data.clone()]}}}),
            ),
            (1, status10("t1", "TASK_STATE_COMPLETED")),
        ])],
    );
    let r = run_with(&peer10, streaming(Dialect::V10));
    assert_eq!(r.output, "see");
    assert_eq!(meta(&r)["parts"], json!([png, data]));
    // A text-only answer has no `parts` key.
    let peer = ScriptedPeer::new().on("SendMessage", vec![ok(completed("t1", "plain"))]);
    assert!(meta(&run(&peer)).get("parts").is_none());
}

#[test]
fn a_direct_message_with_a_file_keeps_it_in_metadata_parts() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(
            json!({"message": {"role": "ROLE_AGENT", "messageId": "m", "parts": [
            {"text": "here"}, {"url": "https://x/r.pdf", "mediaType": "application/pdf"}]}}),
        )],
    );
    let r = run_with(&peer, spec(Dialect::V10));
    assert_eq!(r.output, "here");
    assert_eq!(
        meta(&r)["parts"],
        json!([{"url": "https://x/r.pdf", "mediaType": "application/pdf"}])
    );
}

#[path = "call_conversation_tests.rs"]
mod conversation;
