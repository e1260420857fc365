//! The server's public machine API driven by hand: each output answered
//! with a plain value, no store and no executor. The server's own store
//! stays untouched: an exchange does no I/O.

use super::*;
use crate::server::machine::tests::task;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// A JSON-RPC 1.0 request for `method` with `params`.
fn call(method: &str, params: Value) -> HttpRequest {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
    HttpRequest::post_json("/", body.to_string().into_bytes()).with_header("A2A-Version", "1.0")
}

/// Task `id` in `state` at `version`, made in 1.0.
fn stored(id: &str, state: TaskState, version: u64) -> Arc<Task> {
    let mut t = task(id);
    t.state = state;
    t.dialect = Shape::V10;
    t.updated_ms = Some(1_000);
    t.revision.version = version;
    Arc::new(t)
}

fn next(ex: &mut Exchange<'_, Arc<Recording>, Arc<TestHost>, Rules>) -> Output {
    ex.poll_output().expect("an output")
}

/// The JSON-RPC answer the exchange ended with.
fn answer(output: Output) -> Value {
    match output {
        Output::Respond(Reply::Full(resp)) => {
            assert_eq!(resp.status, 200, "{}", resp.body_snippet(300));
            serde_json::from_slice(&resp.body).expect("JSON")
        }
        other => panic!("expected the answer, got {other:?}"),
    }
}

/// The store was never called: every read and write went out as an output.
fn untouched(f: &Fixture) {
    assert_eq!(f.store.reads.load(Ordering::SeqCst), 0);
    assert!(lock(&f.store.saves).is_empty());
    assert_eq!(f.store.inner.len(), 0);
}

#[test]
fn a_get_task_is_one_shared_read_out_and_its_answer() {
    let f = fixture();
    let mut ex = f
        .server
        .handle_request(call("GetTask", json!({"id": "t1"})));
    match next(&mut ex) {
        Output::Store(StoreCall::GetShared(id)) => assert_eq!(id, "t1"),
        other => panic!("expected the read, got {other:?}"),
    }
    assert!(
        ex.poll_output().is_none(),
        "nothing until the read is given"
    );
    ex.handle_store(StoreDone::Shared(Ok(Some(stored(
        "t1",
        TaskState::Completed,
        4,
    )))));
    let v = answer(next(&mut ex));
    assert_eq!(v["id"], 3);
    assert_eq!(v["result"]["id"], "t1");
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(ex.poll_output().is_none(), "the exchange is over");

    // A task the store does not have: -32001, from the same read.
    let mut ex = f
        .server
        .handle_request(call("GetTask", json!({"id": "t2"})));
    assert!(matches!(
        next(&mut ex),
        Output::Store(StoreCall::GetShared(_))
    ));
    ex.handle_store(StoreDone::Shared(Ok(None)));
    assert_eq!(answer(next(&mut ex))["error"]["code"], -32001);
    untouched(&f);
}

#[test]
fn a_cancel_whose_save_conflicts_reads_again_and_answers_what_won() {
    let f = fixture();
    let mut ex = f
        .server
        .handle_request(call("CancelTask", json!({"id": "t1"})));
    assert!(matches!(next(&mut ex), Output::Store(StoreCall::GetShared(id)) if id == "t1"));
    ex.handle_store(StoreDone::Shared(Ok(Some(stored(
        "t1",
        TaskState::Working,
        3,
    )))));
    // The cancel is a compare-and-swap over the version read, with its event.
    match next(&mut ex) {
        Output::Store(StoreCall::Save { task, events }) => {
            assert_eq!(task.state, TaskState::Canceled);
            assert_eq!(task.revision.version, 4);
            assert_eq!(events.len(), 1, "its status event");
        }
        other => panic!("expected the save, got {other:?}"),
    }
    // Another replica completed it first.
    ex.handle_store(StoreDone::Saved(Err(StoreError::conflict(
        "t1",
        Some(4),
        4,
    ))));
    assert!(matches!(next(&mut ex), Output::Store(StoreCall::GetShared(id)) if id == "t1"));
    ex.handle_store(StoreDone::Shared(Ok(Some(stored(
        "t1",
        TaskState::Completed,
        4,
    )))));
    let v = answer(next(&mut ex));
    assert_eq!(v["error"]["code"], -32002, "{v}");
    assert!(ex.poll_output().is_none());
    untouched(&f);
}

#[test]
fn a_send_saves_through_an_output_then_starts_work_for_the_host() {
    let f = fixture();
    let params = json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]},
                        "configuration": {"returnImmediately": true}});
    let mut ex = f.server.handle_request(call("SendMessage", params));
    let saved = match next(&mut ex) {
        Output::Store(StoreCall::Save { task, events }) => {
            assert_eq!(task.state, TaskState::Submitted);
            assert!(events.is_empty());
            task
        }
        other => panic!("expected the first save, got {other:?}"),
    };
    assert!(
        f.server.take_work().is_empty(),
        "nothing starts before the save"
    );
    ex.handle_store(StoreDone::Saved(Ok(())));
    let v = answer(next(&mut ex));
    assert_eq!(v["result"]["task"]["id"], saved.id.as_str());
    assert_eq!(
        v["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    assert_eq!(
        f.server.take_work().len(),
        1,
        "the task's job, for the host"
    );
    untouched(&f);
}

#[test]
fn a_long_poll_waits_as_an_output_and_wakes_on_a_store_change_or_its_timeout() {
    let f = fixture();
    let req = call("GetTask", json!({"id": "t1"})).with_header("Prefer", "wait=5");
    let mut ex = f.server.handle_request(req);
    let working = || StoreDone::Shared(Ok(Some(stored("t1", TaskState::Working, 2))));
    assert!(matches!(
        next(&mut ex),
        Output::Store(StoreCall::GetShared(_))
    ));
    ex.handle_store(working());
    match next(&mut ex) {
        Output::Wait(wait) => assert_eq!(wait.until_ms(), Some(5_000)),
        other => panic!("expected a wait, got {other:?}"),
    }
    // Changed elsewhere, but still working: read again, wait again.
    ex.handle_store_change();
    assert!(matches!(
        next(&mut ex),
        Output::Store(StoreCall::GetShared(_))
    ));
    ex.handle_store(working());
    assert!(matches!(next(&mut ex), Output::Wait(_)));
    // The caller's wait is over: the task as it is now.
    ex.handle_timeout(5_000);
    assert!(matches!(
        next(&mut ex),
        Output::Store(StoreCall::GetShared(_))
    ));
    ex.handle_store(working());
    match next(&mut ex) {
        Output::Respond(Reply::Full(resp)) => {
            assert_eq!(resp.header("Preference-Applied"), Some("wait=5"));
            let v: Value = serde_json::from_slice(&resp.body).expect("JSON");
            assert_eq!(v["result"]["status"]["state"], "TASK_STATE_WORKING");
        }
        other => panic!("expected the answer, got {other:?}"),
    }
    untouched(&f);
}

#[test]
fn inputs_out_of_turn_are_ignored_and_a_wrong_one_is_an_error_not_a_panic() {
    let f = fixture();
    // GetTask, the explicit path.
    let mut ex = f
        .server
        .handle_request(call("GetTask", json!({"id": "t1"})));
    ex.handle_store(StoreDone::Shared(Ok(None)));
    assert!(
        matches!(next(&mut ex), Output::Store(StoreCall::GetShared(_))),
        "an input before its output is ignored"
    );
    ex.handle_jwt(Err("no".into()));
    assert!(
        ex.poll_output().is_none(),
        "an input of another kind is ignored"
    );
    ex.handle_store(StoreDone::Saved(Ok(())));
    assert_eq!(answer(next(&mut ex))["error"]["code"], -32603);

    // CancelTask, a coroutine's flow.
    let mut ex = f
        .server
        .handle_request(call("CancelTask", json!({"id": "t1"})));
    assert!(matches!(
        next(&mut ex),
        Output::Store(StoreCall::GetShared(_))
    ));
    ex.handle_verdict(auth::Verdict::NotMine);
    assert_eq!(answer(next(&mut ex))["error"]["code"], -32603);
    assert!(ex.poll_output().is_none());
    untouched(&f);
}

#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
#[test]
fn a_bearer_token_goes_out_to_the_host_and_its_claims_come_back() {
    let mut f = fixture();
    let jwt = auth::JwtConfig {
        issuer: Some("https://id.example".into()),
        algorithms: vec!["HS256".into()],
        secret_env: Some("SECRET".into()),
        ..auth::JwtConfig::default()
    };
    let options = ServerOptions {
        card: Some(card().into()),
        auth: Some(auth::AuthConfig {
            jwt: Some(jwt),
            ..Default::default()
        }),
        ..Default::default()
    };
    f.server = A2aServer::new(options, f.store.clone(), f.host.clone(), Rules);
    let now_s = f.host.unix_ms().expect("a wall clock") / 1000;
    // Carol's task, then another caller's: the second is not found.
    for (owner, found) in [("carol", true), ("dave", false)] {
        let req = call("GetTask", json!({"id": "t1"})).with_header("Authorization", "Bearer abc");
        let mut ex = f.server.handle_request(req);
        match next(&mut ex) {
            Output::VerifyJwt(token) => assert_eq!(token, "abc"),
            other => panic!("expected the token, got {other:?}"),
        }
        let claims = json!({"iss": "https://id.example", "sub": "carol", "exp": now_s + 600});
        ex.handle_jwt(Ok(claims.as_object().cloned().expect("claims")));
        assert!(matches!(
            next(&mut ex),
            Output::Store(StoreCall::GetShared(_))
        ));
        let mut t = Arc::unwrap_or_clone(stored("t1", TaskState::Completed, 1));
        t.owner = Some(format!("https://id.example\u{1f}{owner}"));
        ex.handle_store(StoreDone::Shared(Ok(Some(Arc::new(t)))));
        let v = answer(next(&mut ex));
        if found {
            assert_eq!(v["result"]["id"], "t1", "{v}");
        } else {
            assert_eq!(v["error"]["code"], -32001, "{v}");
        }
    }
    // A token the host refuses: 401, and nothing read.
    let req = call("GetTask", json!({"id": "t1"})).with_header("Authorization", "Bearer abc");
    let mut ex = f.server.handle_request(req);
    assert!(matches!(next(&mut ex), Output::VerifyJwt(_)));
    ex.handle_jwt(Err("InvalidSignature".into()));
    match next(&mut ex) {
        Output::Respond(Reply::Full(resp)) => assert_eq!(resp.status, 401),
        other => panic!("expected the refusal, got {other:?}"),
    }
    untouched(&f);
}
