//! The outbound call against hostile or overloaded peers (issue 11, client
//! half): another task's answer, a long-poll that is not one, 429/503, one
//! deadline for the whole call, megabytes of peer text.

use super::*;
use crate::testing::{completed, task, task_with_message, Reply, ScriptedPeer};
use serde_json::{json, Value};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::test_support::{meta, ok, run_with, spec};

/// When each request with this JSON-RPC method was sent.
fn times(peer: &ScriptedPeer, method: &str) -> Vec<u64> {
    peer.requests()
        .iter()
        .filter(|(_, r)| {
            serde_json::from_slice::<Value>(&r.body).is_ok_and(|v| v["method"] == method)
        })
        .map(|(t, _)| *t)
        .collect()
}

fn message_ids(peer: &ScriptedPeer) -> Vec<String> {
    peer.requests()
        .iter()
        .filter_map(|(_, r)| serde_json::from_slice::<Value>(&r.body).ok())
        .filter_map(|v| {
            v["params"]["message"]["messageId"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

// §11

#[test]
fn a_get_task_answer_about_another_task_is_a_protocol_error_not_the_result() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![ok(completed("t2", "someone else's answer"))],
        );
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert!(r.is_error, "{}", r.output);
    assert_eq!(
        r.output,
        "A2A GetTask t1 failed: protocol error: the answer is about task t2, not t1"
    );
    assert_eq!(meta(&r)["taskId"], "t1");
}

#[test]
fn a_stream_event_about_another_task_is_a_protocol_error() {
    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![Reply::Stream(vec![
            (0, json!({"task": {"id": "t1", "status": {"state": "TASK_STATE_WORKING"}}})),
            (5, json!({"statusUpdate": {"taskId": "t2", "status": {"state": "TASK_STATE_COMPLETED"}}})),
        ])],
    );
    let r = run_with(
        &peer,
        CallSpec {
            streaming: true,
            ..spec(Dialect::V10)
        },
    );
    assert!(r.is_error, "{}", r.output);
    assert!(
        r.output
            .contains("protocol error: the answer is about task t2, not t1"),
        "{}",
        r.output
    );
}

// §12

#[test]
fn a_long_poll_peer_that_answers_at_once_is_still_polled_on_schedule() {
    // The card lists the long-poll extension, and each GetTask says it
    // waited (Preference-Applied) but answers at once, forever.
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![Reply::LongPolled(Box::new(ok(task("t1", "working"))))],
        );
    let r = run_with(
        &peer,
        CallSpec {
            timeout_ms: 2_000,
            poll_every_ms: 1_000,
            long_poll: true,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert!(r.output.contains("timed out after 2000ms"), "{}", r.output);
    let polls = times(&peer, "GetTask");
    // The first GetTask goes at once (the peer is trusted to hold it); every
    // next one waits its interval: a quarter of the time so far, at least 25 ms.
    assert_eq!(polls[..2], [0, 25]);
    for pair in polls.windows(2).skip(1) {
        let interval = (pair[0] / 4).clamp(FIRST_POLL_DELAY_MS, 1_000);
        assert!(pair[1] - pair[0] >= interval, "{polls:?}");
    }
    assert!(
        polls.len() < 20,
        "{} GetTasks in 2 s: {polls:?}",
        polls.len()
    );
}

// §13

#[test]
fn a_429_send_is_sent_again_after_retry_after_with_the_same_message_id() {
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![Reply::Busy(429, Some("2")), ok(completed("t1", "done"))],
    );
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert_eq!((r.output.as_str(), r.is_error), ("done", false));
    assert_eq!(
        times(&peer, "SendMessage"),
        [0, 2_000],
        "Retry-After: 2 honoured"
    );
    assert_eq!(
        message_ids(&peer),
        ["m1", "m1"],
        "the same messageId: the peer may dedupe"
    );
}

#[test]
fn a_503_without_retry_after_backs_off_with_jitter_from_the_hosts_seed() {
    let script = || {
        ScriptedPeer::new().on(
            "SendMessage",
            vec![
                Reply::Busy(503, None),
                Reply::Busy(503, None),
                Reply::Busy(503, None),
                ok(completed("t1", "done")),
            ],
        )
    };
    let mut seen = Vec::new();
    for seed in [1, 2, 3, 4] {
        let peer = script();
        let r = run_with(
            &peer,
            CallSpec {
                jitter_seed: seed,
                ..spec(Dialect::Toolnexus)
            },
        );
        assert_eq!((r.output.as_str(), r.is_error), ("done", false));
        let sent = times(&peer, "SendMessage");
        let gaps: Vec<u64> = sent.windows(2).map(|w| w[1] - w[0]).collect();
        // Doubling from 250 ms, each pause between half and all of it.
        for (gap, full) in gaps.iter().zip([250, 500, 1_000]) {
            assert!((full / 2..=full).contains(gap), "{gaps:?}");
        }
        seen.push(gaps);
    }
    seen.dedup();
    assert!(seen.len() > 1, "the jitter differs between seeds: {seen:?}");
}

/// Found by `fuzz_the_outbound_call_against_random_replies`: a peer that
/// answers every SendMessage `429, Retry-After: 0` made the call resend it in
/// a loop that took no time at all, until the deadline.
#[test]
fn a_retry_after_of_zero_still_backs_off() {
    let peer = ScriptedPeer::new().on("SendMessage", vec![Reply::Busy(429, Some("0"))]);
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert!(r.is_error);
    let sent = times(&peer, "SendMessage");
    assert!(sent.len() <= 8, "{sent:?}");
    for (i, gap) in sent.windows(2).map(|w| w[1] - w[0]).enumerate() {
        let full = (RETRY_BASE_MS << i).min(RETRY_MAX_MS);
        assert!(gap >= full / 2, "{sent:?}");
    }
}

#[test]
fn a_retry_after_past_the_deadline_fails_at_once_with_the_peers_answer() {
    let peer = ScriptedPeer::new().on("SendMessage", vec![Reply::Busy(429, Some("60"))]);
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A SendMessage to http://peer/ failed: HTTP 429 from http://peer/"
    );
    assert_eq!(peer.now(), 0, "no waiting for a retry that cannot happen");
    assert_eq!(times(&peer, "SendMessage"), [0]);
}

#[test]
fn busy_polls_and_busy_stream_requests_are_retried_too() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on(
            "GetTask",
            vec![Reply::Busy(503, Some("1")), ok(completed("t1", "done"))],
        );
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert_eq!((r.output.as_str(), r.is_error), ("done", false));
    assert_eq!(times(&peer, "GetTask"), [25, 1_025]);

    let peer = ScriptedPeer::new().on(
        "SendStreamingMessage",
        vec![
            Reply::Busy(429, Some("1")),
            Reply::Stream(vec![(
                0,
                json!({"task": {"id": "t1", "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "a", "parts": [{"text": "streamed"}]}]}}),
            )]),
        ],
    );
    let r = run_with(
        &peer,
        CallSpec {
            streaming: true,
            ..spec(Dialect::V10)
        },
    );
    assert_eq!((r.output.as_str(), r.is_error), ("streamed", false));
    assert_eq!(times(&peer, "SendStreamingMessage"), [0, 1_000]);
    assert_eq!(message_ids(&peer), ["m1", "m1"]);
}

#[test]
fn a_500_or_a_broken_connection_on_send_is_never_retried() {
    // The peer may have taken the task: sending it again could run it twice.
    for reply in [Reply::Http(500, "boom"), Reply::Unreachable] {
        let peer = ScriptedPeer::new().on("SendMessage", vec![reply, ok(completed("t1", "x"))]);
        let r = run_with(&peer, spec(Dialect::Toolnexus));
        assert!(r.is_error, "{}", r.output);
        assert_eq!(times(&peer, "SendMessage"), [0]);
    }
}

// §14

#[test]
fn one_deadline_covers_the_card_fetch_and_a_timeout_cancels_the_task() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(task("t1", "working"))])
        .on("CancelTask", vec![ok(task("t1", "canceled"))]);
    // The card fetch took 2.5 s of a 3 s timeout.
    peer.time().advance_to(2_500);
    let r = run_with(
        &peer,
        CallSpec {
            timeout_ms: 3_000,
            started_ms: Some(0),
            ..spec(Dialect::Toolnexus)
        },
    );
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A task t1 timed out after 3000ms (state=working)"
    );
    assert_eq!(
        meta(&r)["ms"],
        3_000,
        "counted from the start of the whole call"
    );
    assert_eq!(meta(&r)["state"], "working");
    let cancels = times(&peer, "CancelTask");
    assert_eq!(
        cancels,
        [3_000],
        "CancelTask sent at the deadline, as on abort"
    );
    assert!(times(&peer, "GetTask").iter().all(|t| *t < 3_000));
}

#[test]
fn a_peer_that_ignores_the_timeout_cancel_delays_the_result_by_the_grace_only() {
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task("t1", "working"))])
        .on("GetTask", vec![ok(task("t1", "working"))])
        .on(
            "CancelTask",
            vec![Reply::Delay(60_000, Box::new(ok(task("t1", "canceled"))))],
        );
    let r = run_with(
        &peer,
        CallSpec {
            timeout_ms: 1_000,
            ..spec(Dialect::Toolnexus)
        },
    );
    assert_eq!(
        r.output,
        "A2A task t1 timed out after 1000ms (state=working)"
    );
    assert_eq!(peer.now(), 1_000 + TIMEOUT_CANCEL_GRACE_MS);
}

#[test]
fn a_card_fetch_that_used_the_whole_timeout_sends_nothing() {
    let peer = ScriptedPeer::new().on("SendMessage", vec![ok(completed("t1", "x"))]);
    peer.time().advance_to(3_000);
    let r = run_with(
        &peer,
        CallSpec {
            timeout_ms: 3_000,
            started_ms: Some(0),
            ..spec(Dialect::Toolnexus)
        },
    );
    assert_eq!(
        r.output,
        "A2A task (not created) timed out after 3000ms (state=unknown)"
    );
    assert!(peer.requests().is_empty());
}

// §15

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

#[test]
fn megabytes_of_peer_text_are_quoted_not_copied() {
    let huge = "E".repeat(10 * 1024 * 1024);
    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![Reply::RpcError(-32000, leak(huge.clone()))],
    );
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert!(r.is_error);
    assert!(r.output.len() < 2_000, "{} bytes", r.output.len());
    assert!(r.output.ends_with("EEE…"), "cut, and says so");

    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(task_with_message("t1", "failed", &huge))],
    );
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert!(
        r.output.starts_with("A2A task t1 failed: EEE"),
        "{}",
        &r.output[..40]
    );
    assert!(r.output.len() < 2_000, "{} bytes", r.output.len());

    let peer = ScriptedPeer::new().on(
        "SendMessage",
        vec![ok(json!({"not": "a task", "blob": huge}))],
    );
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert!(
        r.output.contains("neither a task nor a message"),
        "{}",
        &r.output[..80]
    );
    assert!(r.output.len() < 2_000, "{} bytes", r.output.len());

    let long_id = "i".repeat(1024 * 1024);
    let peer = ScriptedPeer::new()
        .on("SendMessage", vec![ok(task(&long_id, "working"))])
        .on("GetTask", vec![ok(task("other", "working"))]);
    let r = run_with(&peer, spec(Dialect::Toolnexus));
    assert!(r.output.len() < 2_000, "{} bytes", r.output.len());
}

#[test]
fn urls_in_results_never_show_their_secrets() {
    let peer = ScriptedPeer::new().on("SendMessage", vec![Reply::Http(500, "boom")]);
    let r = run_with(
        &peer,
        CallSpec {
            endpoint: "http://user:pw@peer/rpc?key=s3cret".into(),
            ..spec(Dialect::Toolnexus)
        },
    );
    assert_eq!(
        r.output,
        "A2A SendMessage to http://peer/rpc?… failed: HTTP 500 from http://peer/rpc?…: boom"
    );
    let sent = &peer.requests()[0].1.url;
    assert_eq!(sent, "http://user:pw@peer/rpc?key=s3cret", "sent as given");
}
