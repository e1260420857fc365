//! The `toolnexus tools` / `toolnexus call` contract, run as a user would:
//! the real binary against real HTTP peers on 127.0.0.1.

mod common;

use common::{json_response, method_of, Stub, CARD_PATH};
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use toolnexus_core::HttpRequest;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn toolnexus(args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolnexus"));
    cmd.args(args)
        .env("TN_TEST_SECRET", "s3cr3t-value")
        .env("TOOLNEXUS_CACHE_DIR", common::test_cache_dir())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run toolnexus");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).await.expect("write stdin");
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("toolnexus finished within 60 s")
        .expect("toolnexus output");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

type Log = Arc<Mutex<Vec<HttpRequest>>>;

/// A reviewer agent: `review` completes with "looks good: <task>" after one
/// poll; a task starting with "fail" fails; one starting with "slow" never ends.
async fn reviewer() -> (Stub, Log) {
    let log: Log = Arc::default();
    let seen = log.clone();
    let task_text = Arc::new(Mutex::new(String::new()));
    let stub = Stub::start(move |req| {
        seen.lock().expect("log").push(req.clone());
        if req.url == CARD_PATH {
            return json_response(200, &json!({"name": "reviewer", "skills": [
                {"id": "review", "description": "Review some code"}, {"id": "fail", "description": "Fails"}]}));
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = match body["method"].as_str().unwrap_or_default() {
            "SendMessage" => {
                let text = body["params"]["message"]["parts"][0]["text"].as_str().unwrap_or_default();
                *task_text.lock().expect("task") = text.to_string();
                json!({"id": "t1", "status": {"state": "working"}})
            }
            "CancelTask" => json!({"id": "t1", "status": {"state": "canceled"}}),
            _ => {
                let text = task_text.lock().expect("task").clone();
                if text.starts_with("fail") {
                    json!({"id": "t1", "status": {"state": "failed",
                        "message": {"role": "agent", "parts": [{"kind": "text", "text": "diff would not apply"}]}}})
                } else if text.starts_with("slow") {
                    json!({"id": "t1", "status": {"state": "working"}})
                } else {
                    json!({"id": "t1", "status": {"state": "completed"},
                        "artifacts": [{"parts": [{"kind": "text", "text": format!("looks good: {text}")}]}]})
                }
            }
        };
        json_response(200, &json!({"jsonrpc": "2.0", "id": body["id"], "result": result}))
    })
    .await;
    (stub, log)
}

fn one_line(stderr: &str) {
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line on stderr: {stderr:?}"
    );
}

#[tokio::test]
async fn tools_prints_the_tools_as_json() {
    let (peer, _) = reviewer().await;
    let run = toolnexus(&["tools", &peer.card_url()], None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tools: Value = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    assert_eq!(tools.as_array().map(Vec::len), Some(2));
    assert_eq!(tools[0]["name"], "reviewer_review");
    assert_eq!(tools[0]["description"], "Review some code");
    assert_eq!(tools[0]["source"], "a2a");
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["task"]));
    peer.handle.stop().await;
}

#[tokio::test]
async fn tools_fails_with_one_line_and_exit_1_on_a_bad_card() {
    let run = toolnexus(
        &["tools", "http://127.0.0.1:1/.well-known/agent-card.json"],
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    one_line(&run.stderr);
    assert!(run.stdout.is_empty());

    let html = Stub::start(|req| match req.url.as_str() {
        "/404" => toolnexus_core::HttpResponse {
            status: 404,
            headers: vec![],
            body: b"nope".to_vec(),
        },
        _ => toolnexus_core::HttpResponse {
            status: 200,
            headers: vec![],
            body: b"<html>hi</html>".to_vec(),
        },
    })
    .await;
    for path in ["/404", "/page.html"] {
        let run = toolnexus(&["tools", &format!("{}{path}", html.url())], None).await;
        assert_eq!(run.code, 1, "{path}");
        one_line(&run.stderr);
    }
    html.handle.stop().await;
}

#[tokio::test]
async fn call_prints_one_result_object_and_exits_0() {
    let (peer, _) = reviewer().await;
    let run = toolnexus(
        &[
            "call",
            &peer.card_url(),
            "reviewer_review",
            "fn main() {}",
            "--poll-every",
            "20",
        ],
        None,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim_end().lines().count(), 1);
    let r: Value = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    assert_eq!(r["output"], "looks good: fn main() {}");
    assert_eq!(r["isError"], false);
    let meta = r["metadata"].as_object().expect("metadata");
    let mut keys: Vec<&str> = meta.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["agent", "ms", "polls", "state", "taskId"]);
    assert_eq!(meta["state"], "completed");
    peer.handle.stop().await;
}

#[tokio::test]
async fn call_accepts_the_skill_id_and_stdin() {
    let (peer, _) = reviewer().await;
    let run = toolnexus(
        &["call", &peer.card_url(), "review", "-"],
        Some("from stdin\n"),
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(r["output"], "looks good: from stdin");
    peer.handle.stop().await;
}

#[tokio::test]
async fn call_exits_2_on_a_failed_task_and_1_on_an_unknown_tool() {
    let (peer, _) = reviewer().await;
    let run = toolnexus(&["call", &peer.card_url(), "review", "fail please"], None).await;
    assert_eq!(run.code, 2);
    let r: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(r["isError"], true);
    assert_eq!(r["output"], "A2A task t1 failed: diff would not apply");

    let run = toolnexus(&["call", &peer.card_url(), "nope", "x"], None).await;
    assert_eq!(run.code, 1);
    one_line(&run.stderr);
    assert!(
        run.stderr.contains("reviewer_review"),
        "lists the tools: {}",
        run.stderr
    );
    peer.handle.stop().await;
}

#[tokio::test]
async fn header_values_expand_from_the_environment_and_never_leak() {
    let (peer, log) = reviewer().await;
    let run = toolnexus(
        &[
            "call",
            &peer.card_url(),
            "review",
            "x",
            "-H",
            "Authorization: Bearer ${TN_TEST_SECRET}",
            "-H",
            "X-Empty: ${TN_UNSET_VAR}",
        ],
        None,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = log.lock().expect("log").clone();
    assert!(requests.len() >= 3);
    for req in &requests {
        assert_eq!(
            req.header("authorization"),
            Some("Bearer s3cr3t-value"),
            "{} {}",
            req.method,
            req.url
        );
        assert_eq!(req.header("x-empty"), Some(""));
    }
    assert!(!run.stdout.contains("s3cr3t") && !run.stderr.contains("s3cr3t"));

    // A failing call does not echo the secret either.
    let run = toolnexus(
        &[
            "tools",
            "http://127.0.0.1:1/card",
            "-H",
            "X-Key: ${TN_TEST_SECRET}",
        ],
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(!run.stderr.contains("s3cr3t"), "{}", run.stderr);
    peer.handle.stop().await;
}

#[tokio::test]
async fn bad_arguments_are_one_line_and_exit_1() {
    for args in [
        vec!["call", "http://127.0.0.1:1/card"],
        vec!["tools"],
        vec!["tools", "http://x/card", "--timeout", "soon"],
        vec!["tools", "http://x/card", "-H", "no colon"],
        vec!["frobnicate"],
    ] {
        let run = toolnexus(&args, None).await;
        assert_eq!(run.code, 1, "{args:?}");
        one_line(&run.stderr);
    }
    let run = toolnexus(&["--help"], None).await;
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("call"));
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_during_a_call_cancels_the_task_and_exits_2() {
    let (peer, log) = reviewer().await;
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolnexus"))
        .args([
            "call",
            &peer.card_url(),
            "review",
            "slow work",
            "--poll-every",
            "50",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let polled = || {
        log.lock()
            .expect("log")
            .iter()
            .any(|r| method_of(r) == "GetTask")
    };
    let until = Instant::now() + Duration::from_secs(20);
    while !polled() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(polled(), "the call started polling");
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("exited after SIGTERM")
        .expect("output");
    assert_eq!(out.status.code(), Some(2));
    let r: Value = serde_json::from_slice(&out.stdout).expect("the canceled result on stdout");
    assert_eq!(r["output"], "A2A task t1 canceled");
    assert_eq!(r["metadata"]["state"], "canceled");
    assert!(
        log.lock()
            .expect("log")
            .iter()
            .any(|r| method_of(r) == "CancelTask"),
        "CancelTask reached the peer"
    );
    peer.handle.stop().await;
}

/// Whether this run is the `--engine wasm` pass (tests/run.sh sets
/// TOOLNEXUS_ENGINE=wasm and TOOLNEXUS_COMPONENT for the whole suite).
fn wasm_engine() -> bool {
    std::env::var("TOOLNEXUS_ENGINE").as_deref() == Ok("wasm")
}

/// The JSON-RPC requests of `method` the peer saw, as JSON.
fn requests_of(log: &Log, method: &str) -> Vec<Value> {
    log.lock()
        .expect("log")
        .iter()
        .filter(|r| method_of(r) == method)
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}

#[tokio::test]
async fn task_id_and_context_id_go_on_the_message() {
    let (peer, log) = reviewer().await;
    let run = toolnexus(
        &[
            "call",
            &peer.card_url(),
            "review",
            "the answer",
            "--task-id",
            "t-asked",
            "--context-id",
            "c-7",
            "--poll-every",
            "20",
        ],
        None,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sent = requests_of(&log, "SendMessage");
    assert_eq!(sent.len(), 1);
    let message = &sent[0]["params"]["message"];
    assert_eq!(message["taskId"], "t-asked", "{message}");
    assert_eq!(message["contextId"], "c-7", "{message}");
    peer.handle.stop().await;
}

#[tokio::test]
async fn card_limits_are_enforced() {
    let (peer, log) = reviewer().await;
    let card = peer.card_url();
    for (flag, value) in [("--max-skills", "1"), ("--max-card-bytes", "20")] {
        let tools = ["tools", &card, flag, value];
        let call = ["call", &card, "review", "x", flag, value];
        for args in [&tools[..], &call[..]] {
            let run = toolnexus(args, None).await;
            assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
            one_line(&run.stderr);
            assert!(run.stderr.contains(flag), "{args:?}: {}", run.stderr);
        }
    }
    assert!(requests_of(&log, "SendMessage").is_empty());
    peer.handle.stop().await;
}

/// A card on 127.0.0.1 whose endpoint is another origin over plain http.
async fn elsewhere() -> Stub {
    Stub::start(|_| {
        json_response(
            200,
            &json!({"name": "away", "url": "http://toolnexus-test.invalid/rpc",
                "skills": [{"id": "work", "description": "Works elsewhere"}]}),
        )
    })
    .await
}

#[tokio::test]
async fn headers_are_not_sent_to_another_origin_unless_allowed() {
    let peer = elsewhere().await;
    let card = peer.card_url();
    let args = [
        "call",
        &card,
        "work",
        "x",
        "-H",
        "X-Key: k",
        "--timeout",
        "5000",
    ];
    // The call goes without the header, with a warning (and fails: the name
    // does not resolve).
    let run = toolnexus(&args, None).await;
    assert_eq!(run.code, 2, "{}", run.stdout);
    // (`--engine wasm` withholds it too, in the component, without the warning.)
    assert!(
        wasm_engine()
            || (run.stderr.contains("without credentials")
                && run
                    .stderr
                    .contains("--allow-credentials-to http://toolnexus-test.invalid")),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("X-Key: k") && !run.stderr.contains(": k"));

    // Allowed (or, deprecated, any origin): no warning.
    for extra in [
        &["--allow-credentials-to", "http://toolnexus-test.invalid"][..],
        &["--allow-insecure-headers"][..],
    ] {
        if wasm_engine() && extra[0] == "--allow-credentials-to" {
            continue; // the component takes no credential options yet
        }
        let mut allowed = args.to_vec();
        allowed.extend(extra);
        let run = toolnexus(&allowed, None).await;
        assert_eq!(run.code, 2, "{} {}", run.stdout, run.stderr);
        assert!(
            !run.stderr.contains("without credentials"),
            "{}",
            run.stderr
        );
        let r: Value = serde_json::from_str(&run.stdout).expect("JSON");
        assert_eq!(r["isError"], true);
    }
    peer.handle.stop().await;
}

#[tokio::test]
async fn renamed_tools_are_named_on_stderr() {
    let peer = Stub::a2a(
        json!({"name": "desk", "skills": [{"id": "dup"}, {"id": "dup"}]}),
        |_, _| json!({"id": "t1", "status": {"state": "completed"}}),
    )
    .await;
    let card = peer.card_url();
    let run = toolnexus(&["tools", &card], None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    one_line(&run.stderr);
    assert!(
        run.stderr
            .contains(r#"skill "dup" makes the tool name "desk_dup", which an earlier skill of the card took: it is "desk_dup_2""#),
        "{}",
        run.stderr
    );
    // The skill id names two tools: the call names neither.
    let run = toolnexus(&["call", &card, "dup", "x"], None).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            r#"the card lists the skill "dup" 2 times: name the tool (desk_dup, desk_dup_2)"#
        ),
        "{}",
        run.stderr
    );
    let run = toolnexus(&["call", &card, "desk_dup_2", "x"], None).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    peer.handle.stop().await;
}

/// `--events` prints each event when it happens, not when the call ends: the
/// first line is on stderr while the task is still working.
#[cfg(unix)]
#[tokio::test]
async fn events_are_printed_as_they_happen() {
    use tokio::io::AsyncBufReadExt;
    let (peer, log) = reviewer().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolnexus"))
        .args([
            "call",
            &peer.card_url(),
            "review",
            "slow work",
            "--poll-every",
            "50",
            "--events",
        ])
        .env("TOOLNEXUS_CACHE_DIR", common::test_cache_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("an event line while the task works")
        .expect("read stderr")
        .expect("a line");
    assert!(
        child.try_wait().expect("child").is_none(),
        "the call is still running"
    );
    let event: Value = serde_json::from_str(&first).expect("one JSON event");
    assert_eq!(event["status"]["state"], "working", "{first}");
    assert!(requests_of(&log, "CancelTask").is_empty());
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let mut rest = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        rest.push(line);
    }
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("exited after SIGINT")
        .expect("output");
    assert_eq!(out.status.code(), Some(2), "{rest:?}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("the canceled result");
    assert_eq!(r["metadata"]["state"], "canceled");
    assert_eq!(
        requests_of(&log, "CancelTask").len(),
        1,
        "Ctrl-C cancels the task"
    );
    peer.handle.stop().await;
}

/// The same call under both engines prints the same event lines and the same
/// result (but for its timing). Only in the `--engine wasm` pass, which has
/// the component.
#[tokio::test]
async fn both_engines_print_the_same_lines() {
    if !wasm_engine() {
        return;
    }
    let (peer, _) = reviewer().await;
    let card = peer.card_url();
    let mut runs = Vec::new();
    for engine in ["native", "wasm"] {
        let args = [
            "call",
            &card,
            "review",
            "same",
            "--events",
            "--poll-every",
            "20",
            "--engine",
            engine,
        ];
        let run = toolnexus(&args, None).await;
        assert_eq!(run.code, 0, "{engine}: {}", run.stderr);
        let mut r: Value = serde_json::from_str(&run.stdout).expect("JSON");
        r["metadata"]["ms"] = json!(0);
        runs.push((r, run.stderr));
    }
    assert!(runs[0].1.lines().count() >= 2, "{}", runs[0].1);
    assert_eq!(runs[0], runs[1]);
    peer.handle.stop().await;
}

#[tokio::test]
async fn tasks_under_the_wasm_engine_is_a_clear_error() {
    let run = toolnexus(
        &["tasks", "http://127.0.0.1:9/card", "--engine", "wasm"],
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    one_line(&run.stderr);
    assert!(run.stderr.contains("--engine wasm"), "{}", run.stderr);
}
