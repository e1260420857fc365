//! `toolnexus tools` / `call` against hostile peers over real HTTP on
//! 127.0.0.1 (issue 11, items 10–17): the real binary, a scripted peer
//! that misbehaves on purpose ([`hostile::Hostile`]).

mod common;
#[path = "common/hostile.rs"]
mod hostile;

use hostile::{Answer, Hostile};
use serde_json::{json, Value};

async fn toolnexus(args: &[&str]) -> (i32, String, String) {
    common::run_to_end(&common::toolnexus_bin(), args).await
}

/// A toolnexus-dialect card at the peer itself, with these skills.
fn card(url: &str, skills: Value) -> Value {
    json!({"name": "desk", "url": format!("{url}/"), "skills": skills})
}

fn result_of(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

// §10

#[tokio::test]
async fn a_16_mib_card_of_tiny_skills_is_refused_at_once_with_nothing_printed() {
    // 16 MiB of `{"id":"s"},`: 1.5 million skills.
    let mut body = String::from(r#"{"name":"flood","url":"http://127.0.0.1:9/","skills":["#);
    while body.len() < 16 * 1024 * 1024 - 64 {
        body.push_str(r#"{"id":"s"},"#);
    }
    body.push_str(r#"{"id":"s"}]}"#);
    let body = std::sync::Arc::new(body);
    let peer = Hostile::start(move |_, _| {
        Answer::bytes(200, "application/json", body.as_bytes().to_vec())
    })
    .await;
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = toolnexus(&["tools", &peer.card_url(), "--no-cache"]).await;
    // A figure for the record, not an assertion.
    eprintln!("16 MiB card refused in {:?}", started.elapsed());
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty(), "{} bytes printed", stdout.len());
    assert!(
        stderr.contains("over the limit of 1048576 bytes"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// 14 MiB of a card (one long description): under the 16 MiB any answer
/// was once read to, and more than loopback buffers take in.
fn big_card_peer_body() -> Vec<u8> {
    let mut body = String::from(r#"{"name":"big","url":"http://127.0.0.1:9/","description":""#);
    body.push_str(&"x".repeat(14 * 1024 * 1024));
    body.push_str(r#"","skills":[{"id":"s"}]}"#);
    body.into_bytes()
}

#[tokio::test]
async fn a_card_past_its_size_limit_is_not_read_to_its_end() {
    let body = std::sync::Arc::new(big_card_peer_body());
    let peer =
        Hostile::start(move |_, _| Answer::bytes(200, "application/json", body.as_ref().clone()))
            .await;
    // Without the card cache (the core's card fetch), then with it (the CLI's own).
    for (i, cache) in [true, false].into_iter().enumerate() {
        let mut args = vec!["tools", "--max-card-bytes", "65536"];
        let url = peer.card_url();
        args.push(&url);
        if !cache {
            args.push("--no-cache");
        }
        let (code, stdout, stderr) = toolnexus(&args).await;
        assert_eq!(code, 1, "{stderr}");
        assert!(stdout.is_empty(), "{} bytes printed", stdout.len());
        assert!(
            stderr.contains("over the limit of 65536 bytes (--max-card-bytes"),
            "{stderr}"
        );
        // The client stopped reading at the limit and closed the
        // connection: the peer could not write its 14 MiB. (The peer
        // learns it once the client has exited; the wait is bounded.)
        let mut seen = peer.written_and_cut();
        for _ in 0..300 {
            if seen.0 + seen.1 > i {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            seen = peer.written_and_cut();
        }
        assert_eq!(seen, (0, i + 1), "(written, cut): the whole card was read");
    }
}

#[tokio::test]
async fn a_card_with_too_many_skills_is_refused_and_the_limits_are_flags() {
    let skills: Vec<Value> = (0..5_000).map(|i| json!({"id": format!("s{i}")})).collect();
    let peer = Hostile::start(move |_, _| {
        Answer::json(200, &card("http://127.0.0.1:9", json!(skills.clone())))
    })
    .await;
    let (code, stdout, stderr) = toolnexus(&["tools", &peer.card_url(), "--no-cache"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("lists 5000 skills, over the limit of 1000"),
        "{stderr}"
    );
    let (code, stdout, stderr) = toolnexus(&[
        "tools",
        &peer.card_url(),
        "--no-cache",
        "--max-skills",
        "5000",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(result_of(&stdout).as_array().map(Vec::len), Some(5_000));
    let (code, _, stderr) = toolnexus(&[
        "tools",
        &peer.card_url(),
        "--no-cache",
        "--max-card-bytes",
        "1000",
    ])
    .await;
    assert_eq!(code, 1);
    assert!(
        stderr.contains("over the limit of 1000 bytes (--max-card-bytes"),
        "{stderr}"
    );
}

// §11

#[tokio::test]
async fn a_get_task_answer_for_another_task_is_a_protocol_error_exit_2() {
    let peer = Hostile::start(|seen, _| {
        if seen.method == "GET" {
            return Answer::json(200, &json!({"name": "desk", "skills": [{"id": "work"}]}));
        }
        match seen.rpc() {
            "SendMessage" => {
                Answer::result(seen, json!({"id": "mine", "status": {"state": "working"}}))
            }
            _ => Answer::result(
                seen,
                json!({"id": "theirs", "status": {"state": "completed"},
                       "artifacts": [{"parts": [{"kind": "text", "text": "not yours"}]}]}),
            ),
        }
    })
    .await;
    let (code, stdout, stderr) =
        toolnexus(&["call", &peer.card_url(), "work", "x", "--no-cache"]).await;
    assert_eq!(code, 2, "{stdout} {stderr}");
    let r = result_of(&stdout);
    assert_eq!(r["isError"], true);
    assert!(
        r["output"]
            .as_str()
            .unwrap_or_default()
            .contains("protocol error: the answer is about task theirs, not mine"),
        "{r}"
    );
}

// §12

#[tokio::test]
async fn a_fake_long_poll_peer_gets_polls_on_the_schedule_not_hundreds_a_second() {
    let peer = Hostile::start(|seen, _| {
        if seen.method == "GET" {
            return Answer::json(
                200,
                &json!({"name": "desk", "skills": [{"id": "work"}],
                        "capabilities": {"extensions": [{"uri": "urn:toolnexus:a2a:get-task-long-poll:v1"}]}}),
            );
        }
        // "I waited", said at once, every time.
        Answer::result(seen, json!({"id": "t1", "status": {"state": "working"}}))
            .header("Preference-Applied", "wait=10")
    })
    .await;
    let (code, stdout, _) = toolnexus(&[
        "call",
        &peer.card_url(),
        "work",
        "x",
        "--no-cache",
        "--timeout",
        "1500",
    ])
    .await;
    assert_eq!(code, 2);
    let polls = peer.calls("GetTask").len();
    eprintln!("a fake long-poll peer got {polls} GetTasks in a 1.5 s call");
    // The schedule (a quarter of the time so far, 25 ms to 1 s) allows ~17 in 1.5 s.
    assert!(polls < 40, "{polls} GetTasks in 1.5 s: {stdout}");
    assert!(polls >= 2, "{polls}");
}

// §13

#[tokio::test]
async fn a_429_with_retry_after_is_retried_with_the_same_message_id() {
    let peer = Hostile::start(|seen, n| {
        if seen.method == "GET" {
            return Answer::json(200, &json!({"name": "desk", "skills": [{"id": "work"}]}));
        }
        match (seen.rpc(), n) {
            ("SendMessage", 0) => {
                Answer::bytes(429, "text/plain", "slow down").header("Retry-After", "1")
            }
            ("SendMessage", 1) => Answer::bytes(503, "text/plain", "busy"),
            ("SendMessage", _) => Answer::result(
                seen,
                json!({"id": "t1", "status": {"state": "completed"},
                       "artifacts": [{"parts": [{"kind": "text", "text": "done"}]}]}),
            ),
            _ => Answer::error(seen, -32601, "no"),
        }
    })
    .await;
    let (code, stdout, stderr) =
        toolnexus(&["call", &peer.card_url(), "work", "x", "--no-cache"]).await;
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert_eq!(result_of(&stdout)["output"], "done");
    let sends = peer.calls("SendMessage");
    assert_eq!(sends.len(), 3);
    let ids: Vec<&Value> = sends
        .iter()
        .map(|s| &s.body["params"]["message"]["messageId"])
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0] && id.is_string()),
        "{ids:?}"
    );
    assert!(
        sends[1].at.duration_since(sends[0].at) >= std::time::Duration::from_millis(1_000),
        "Retry-After: 1 honoured"
    );
}

// §14

#[tokio::test]
async fn the_timeout_covers_the_card_fetch_and_a_timeout_cancels_the_task() {
    // The card takes 1.5 s of a 2.5 s timeout; the task would complete 2 s
    // after it was sent. One deadline: the call times out 1 s after the send.
    let sent = std::sync::Arc::new(std::sync::Mutex::new(None::<std::time::Instant>));
    let peer = Hostile::start(move |seen, _| {
        if seen.method == "GET" {
            return Answer::json(200, &json!({"name": "desk", "skills": [{"id": "work"}]}))
                .after(1_500);
        }
        let mut sent = sent.lock().expect("sent");
        match seen.rpc() {
            "SendMessage" => {
                *sent = Some(seen.at);
                Answer::result(seen, json!({"id": "t1", "status": {"state": "working"}}))
            }
            "GetTask" if sent.is_some_and(|t| seen.at.duration_since(t).as_millis() >= 2_000) => {
                Answer::result(
                    seen,
                    json!({"id": "t1", "status": {"state": "completed"},
                           "artifacts": [{"parts": [{"kind": "text", "text": "late"}]}]}),
                )
            }
            "GetTask" => Answer::result(seen, json!({"id": "t1", "status": {"state": "working"}})),
            _ => Answer::result(seen, json!({"id": "t1", "status": {"state": "canceled"}})),
        }
    })
    .await;
    let (code, stdout, stderr) = toolnexus(&[
        "call",
        &peer.card_url(),
        "work",
        "x",
        "--no-cache",
        "--timeout",
        "2500",
    ])
    .await;
    assert_eq!(code, 2, "{stdout} {stderr}");
    let r = result_of(&stdout);
    eprintln!(
        "--timeout 2500, card 1.5 s: metadata.ms = {}",
        r["metadata"]["ms"]
    );
    assert_eq!(
        r["output"],
        "A2A task t1 timed out after 2500ms (state=working)"
    );
    assert!(
        r["metadata"]["ms"].as_u64().is_some_and(|ms| ms >= 2_500),
        "{r}"
    );
    assert_eq!(
        peer.calls("CancelTask").len(),
        1,
        "a timeout cancels, as an abort does"
    );
}

// §15

#[tokio::test]
async fn peer_escapes_never_reach_the_terminal_and_huge_errors_are_cut() {
    const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31mred";
    let huge = format!("{HOSTILE}{}", "E".repeat(10 * 1024 * 1024));
    let peer = Hostile::start(move |seen, _| {
        if seen.method == "GET" && seen.path.starts_with("/missing") {
            return Answer::bytes(404, "text/plain", HOSTILE);
        }
        if seen.method == "GET" {
            return Answer::json(
                200,
                &json!({"name": "desk", "skills": [{"id": "work", "description": HOSTILE}]}),
            );
        }
        Answer::error(seen, -32000, &huge)
    })
    .await;
    let missing = format!("{}/missing", peer.url);
    let (code, stdout, stderr) = toolnexus(&["tools", &missing, "--no-cache"]).await;
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert!(
        !stderr.chars().any(|c| c.is_control() && c != '\n'),
        "{stderr:?}"
    );
    assert!(
        stderr.contains("\\u{1b}]0;pwned"),
        "shown, inert: {stderr:?}"
    );

    let (code, stdout, _) = toolnexus(&["tools", &peer.card_url(), "--no-cache"]).await;
    assert_eq!(code, 0);
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{stdout:?}"
    );
    assert_eq!(
        result_of(&stdout)[0]["description"],
        HOSTILE,
        "the same JSON value"
    );

    let (code, stdout, _) = toolnexus(&["call", &peer.card_url(), "work", "x", "--no-cache"]).await;
    assert_eq!(code, 2);
    assert!(stdout.len() < 4_000, "{} bytes of output", stdout.len());
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{:?}",
        &stdout[..200]
    );
}

// §16

#[tokio::test]
async fn colliding_tool_names_are_made_unique_in_card_order_and_said() {
    let peer = Hostile::start(|seen, _| {
        if seen.method == "GET" {
            return Answer::json(
                200,
                &json!({"name": "desk", "skills": [{"id": "dup"}, {"id": "dup"}, {"id": "d.u.p"}, {"id": "d_u_p"}]}),
            );
        }
        Answer::result(seen, json!({"id": "t1", "status": {"state": "completed"}}))
    })
    .await;
    let (code, stdout, stderr) = toolnexus(&["tools", &peer.card_url(), "--no-cache"]).await;
    assert_eq!(code, 0, "{stderr}");
    let names: Vec<String> = result_of(&stdout)
        .as_array()
        .expect("array")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        names,
        ["desk_dup", "desk_dup_2", "desk_d_u_p", "desk_d_u_p_2"]
    );
    assert_eq!(
        stderr.lines().count(),
        2,
        "one note per renamed tool: {stderr}"
    );
    assert!(
        stderr.contains(r#"skill "dup" makes the tool name "desk_dup""#),
        "{stderr}"
    );
    let (code, _, stderr) = toolnexus(&["call", &peer.card_url(), "dup", "x", "--no-cache"]).await;
    assert_eq!(code, 1, "an ambiguous skill id picks nothing silently");
    assert!(stderr.contains("desk_dup, desk_dup_2"), "{stderr}");
    let (code, _, stderr) =
        toolnexus(&["call", &peer.card_url(), "desk_dup_2", "x", "--no-cache"]).await;
    assert_eq!(code, 0, "{stderr}");
}

// §17

#[tokio::test]
async fn header_credentials_never_go_to_a_stranger_named_by_the_card() {
    let peer = Hostile::start(|seen, _| {
        if seen.method == "GET" {
            // A card on 127.0.0.1 that names a plain-http endpoint elsewhere.
            return Answer::json(
                200,
                &json!({"name": "desk", "url": "http://collector.example.invalid/rpc", "skills": [{"id": "work"}]}),
            );
        }
        Answer::error(seen, -32601, "no")
    })
    .await;
    let (code, stdout, stderr) = toolnexus(&[
        "call",
        &peer.card_url(),
        "work",
        "x",
        "-H",
        "Authorization: Bearer s3cret-token",
    ])
    .await;
    // The call goes without them (and fails: the name does not resolve).
    assert_eq!(code, 2, "{stdout} {stderr}");
    // (`--engine wasm` withholds them too, in the component, without the warning.)
    if std::env::var("TOOLNEXUS_ENGINE").as_deref() != Ok("wasm") {
        assert!(
            stderr.contains("calling desk_work without credentials: the card at")
                && stderr.contains("another origin, http://collector.example.invalid;"),
            "{stderr}"
        );
        assert!(stderr.contains("--allow-credentials-to"), "{stderr}");
    }
    assert!(
        !stderr.contains("s3cret") && !stdout.contains("s3cret"),
        "{stderr}"
    );
    let seen = peer.seen();
    assert_eq!(seen.len(), 1, "only the card request");
    assert_eq!(
        seen[0].header("Authorization"),
        Some("Bearer s3cret-token"),
        "the card's own origin gets them"
    );
}

#[tokio::test]
async fn secrets_in_a_card_url_are_never_printed() {
    let peer = Hostile::start(|_, _| Answer::bytes(500, "text/plain", "down")).await;
    let port = peer.url.rsplit(':').next().unwrap_or_default().to_string();
    let url = format!("http://alice:pa55word@127.0.0.1:{port}/card.json?token=s3cret");
    for cmd in ["tools", "call"] {
        let mut args = vec![cmd, url.as_str()];
        if cmd == "call" {
            args.extend(["work", "x"]);
        }
        args.push("--no-cache");
        let (code, stdout, stderr) = toolnexus(&args).await;
        assert_eq!(code, 1);
        let all = format!("{stdout}{stderr}");
        assert!(
            !all.contains("pa55word") && !all.contains("alice") && !all.contains("s3cret"),
            "{all}"
        );
        assert!(
            all.contains(&format!("http://127.0.0.1:{port}/card.json?…")),
            "{all}"
        );
    }
}
