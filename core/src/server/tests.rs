//! The server function, request by request, with no sockets.

use super::*;
use crate::skills::Skill;
use serde_json::json;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[derive(Default)]
struct TestHost {
    ids: AtomicU64,
    jobs: Mutex<Vec<BoxFuture<'static, ()>>>,
    events: Mutex<Vec<TaskEvent>>,
}

impl ServerHost for Arc<TestHost> {
    fn new_id(&self) -> String {
        format!("id{}", self.ids.fetch_add(1, Ordering::SeqCst) + 1)
    }
    fn spawn(&self, job: BoxFuture<'static, ()>) {
        lock(&self.jobs).push(job);
    }
    fn on_task(&self, event: TaskEvent) {
        lock(&self.events).push(event);
    }
}

/// Answers by rule: "fail…" fails, "hang…" never finishes, else "done: <text>".
struct Rules;
impl Fulfiller for Rules {
    fn fulfil(&self, r: FulfilRequest) -> BoxFuture<'static, Result<String, String>> {
        if r.text.starts_with("fail") {
            Box::pin(std::future::ready(Err("LLM HTTP 500: boom".to_string())))
        } else if r.text.starts_with("hang") {
            Box::pin(std::future::pending())
        } else {
            Box::pin(std::future::ready(Ok(format!("done: {}", r.text))))
        }
    }
}

/// A memory store that records every saved state.
#[derive(Default)]
struct Recording {
    inner: MemoryStore,
    saves: Mutex<Vec<(String, TaskState)>>,
}
impl TaskStore for Arc<Recording> {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        self.inner.get(id)
    }
    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        lock(&self.saves).push((task.id.clone(), task.state));
        self.inner.save(task)
    }
}

type TestServer = Arc<A2aServer<Arc<Recording>, Arc<TestHost>, Rules>>;

struct Fixture {
    server: TestServer,
    host: Arc<TestHost>,
    store: Arc<Recording>,
}

fn card() -> Value {
    let skills = [Skill {
        name: "greet".into(),
        description: "says hello".into(),
        content: String::new(),
    }];
    build_agent_card(
        &A2aConfig {
            name: Some("desk".into()),
            ..Default::default()
        },
        &skills,
        "http://h:1/",
    )
}

// On wasm32 the queued jobs are not Send, so neither is the host; that is fine there.
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn fixture_with(card: Option<Value>) -> Fixture {
    let host = Arc::new(TestHost::default());
    let store = Arc::new(Recording::default());
    let options = ServerOptions {
        card,
        cors_origin: Some("*".into()),
    };
    Fixture {
        server: A2aServer::new(options, store.clone(), host.clone(), Rules),
        host,
        store,
    }
}

fn fixture() -> Fixture {
    fixture_with(Some(card()))
}

impl Fixture {
    /// Polls `fut` and every spawned job until `fut` is done.
    fn run<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut jobs: Vec<BoxFuture<'static, ()>> = Vec::new();
        for _ in 0..10_000 {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            jobs.extend(lock(&self.host.jobs).drain(..));
            jobs.retain_mut(|j| j.as_mut().poll(&mut cx).is_pending());
        }
        panic!("the request never finished")
    }

    /// Runs every queued job as far as it goes.
    fn settle(&self) {
        self.run(std::future::ready(()));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut jobs: Vec<BoxFuture<'static, ()>> = lock(&self.host.jobs).drain(..).collect();
        for _ in 0..100 {
            jobs.retain_mut(|j| j.as_mut().poll(&mut cx).is_pending());
        }
        lock(&self.host.jobs).extend(jobs);
    }

    fn post(&self, version: Option<&str>, body: &str) -> HttpResponse {
        let mut req = HttpRequest::post_json("/", body.as_bytes().to_vec());
        if let Some(v) = version {
            req = req.with_header("A2A-Version", v);
        }
        self.run(self.server.handle(req))
    }

    fn rpc(&self, version: Option<&str>, method: &str, params: Value) -> Value {
        let body =
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
        let resp = self.post(version, &body);
        assert_eq!(resp.status, 200, "JSON-RPC answers use HTTP 200");
        let v: Value = serde_json::from_slice(&resp.body).expect("JSON body");
        assert_eq!(v["jsonrpc"], "2.0");
        v
    }

    fn error_code(&self, version: Option<&str>, method: &str, params: Value) -> i64 {
        let v = self.rpc(version, method, params);
        v["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("an error, got {v}"))
    }

    fn send(&self, version: Option<&str>, method: &str, text: &str, blocking: bool) -> Value {
        let params = match version {
            Some(_) => {
                json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]},
                              "configuration": {"returnImmediately": !blocking}})
            }
            None => {
                json!({"message": {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": text}]},
                           "configuration": {"blocking": blocking}})
            }
        };
        self.rpc(version, method, params)
    }
}

fn get(f: &Fixture, path: &str, method: &str) -> HttpResponse {
    let req = HttpRequest {
        method: method.into(),
        url: path.into(),
        ..Default::default()
    };
    f.run(f.server.handle(req))
}

#[test]
fn serves_the_card_at_both_well_known_paths() {
    let f = fixture();
    for path in [
        CARD_PATH,
        LEGACY_CARD_PATH,
        "http://h:1/.well-known/agent-card.json?x=1",
    ] {
        let resp = get(&f, path, "GET");
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(
            serde_json::from_slice::<Value>(&resp.body).expect("card"),
            card()
        );
        assert_eq!(resp.header("access-control-allow-origin"), Some("*"));
    }
}

#[test]
fn without_an_a2a_profile_every_route_is_404() {
    let f = fixture_with(None);
    assert_eq!(get(&f, CARD_PATH, "GET").status, 404);
    assert_eq!(
        f.post(
            None,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#
        )
        .status,
        404
    );
    assert_eq!(get(&f, "/", "OPTIONS").status, 404);
}

#[test]
fn unknown_paths_are_404_and_wrong_methods_405() {
    let f = fixture();
    assert_eq!(get(&f, "/nope", "GET").status, 404);
    assert_eq!(get(&f, "/", "GET").status, 405);
    assert_eq!(get(&f, CARD_PATH, "DELETE").status, 405);
}

#[test]
fn answers_cors_preflight() {
    let f = fixture();
    let req = HttpRequest {
        method: "OPTIONS".into(),
        url: "/".into(),
        headers: vec![(
            "Access-Control-Request-Headers".into(),
            "content-type,a2a-version".into(),
        )],
        body: vec![],
    };
    let resp = f.run(f.server.handle(req));
    assert_eq!(resp.status, 204);
    assert_eq!(resp.header("Access-Control-Allow-Origin"), Some("*"));
    assert_eq!(
        resp.header("Access-Control-Allow-Headers"),
        Some("content-type,a2a-version")
    );
    assert!(resp
        .header("Access-Control-Allow-Methods")
        .is_some_and(|m| m.contains("POST")));
}

#[test]
fn toolnexus_send_answers_a_bare_03_task_at_once() {
    let f = fixture();
    let v = f.send(None, "SendMessage", "hello", false);
    let t = &v["result"];
    assert_eq!(v["id"], 7);
    assert_eq!(t["kind"], "task");
    assert_eq!(t["status"]["state"], "submitted");
    assert!(t["contextId"].is_string());
    assert_eq!(t["history"][0]["messageId"], "m1");
    assert_eq!(
        t["history"][0]["parts"][0],
        json!({"kind": "text", "text": "hello"})
    );
}

#[test]
fn v10_send_answers_a_wrapped_10_task() {
    let f = fixture();
    let v = f.send(Some("1.0"), "SendMessage", "hello", false);
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_SUBMITTED");
    assert!(t.get("kind").is_none());
    assert_eq!(t["history"][0]["role"], "ROLE_USER");
    assert_eq!(t["history"][0]["parts"][0], json!({"text": "hello"}));
}

#[test]
fn saves_submitted_then_working_then_completed_and_serves_the_result() {
    let f = fixture();
    let v = f.send(None, "message/send", "hello", false);
    let id = v["result"]["id"].as_str().expect("task id").to_string();
    f.settle();
    let states: Vec<TaskState> = lock(&f.store.saves)
        .iter()
        .filter(|(i, _)| *i == id)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(
        states,
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed
        ]
    );

    let got = f.rpc(None, "tasks/get", json!({"id": id}));
    assert_eq!(got["result"]["status"]["state"], "completed");
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "done: hello"
    );
    assert!(got["result"]["artifacts"][0]["artifactId"].is_string());
    let got10 = f.rpc(Some("1.0"), "GetTask", json!({"id": id}));
    assert_eq!(got10["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        got10["result"]["artifacts"][0]["parts"][0],
        json!({"text": "done: hello"})
    );
    let events = lock(&f.host.events).clone();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].state.as_str(), events[0].result.as_deref()),
        ("completed", Some("done: hello"))
    );
}

#[test]
fn a_blocking_send_waits_for_the_task() {
    let f = fixture();
    let v = f.send(None, "message/send", "hello", true);
    assert_eq!(v["result"]["status"]["state"], "completed");
    assert_eq!(
        v["result"]["artifacts"][0]["parts"][0]["text"],
        "done: hello"
    );
    // 1.0 blocks by default when returnImmediately is absent.
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]}}),
    );
    assert_eq!(
        v["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn a_fulfilment_error_fails_the_task_with_an_agent_message() {
    let f = fixture();
    let v = f.send(None, "SendMessage", "fail now", true);
    let t = &v["result"];
    assert_eq!(t["status"]["state"], "failed");
    let m = &t["status"]["message"];
    assert_eq!(m["role"], "agent");
    assert_eq!(m["parts"][0]["text"], "LLM HTTP 500: boom");
    assert!(m["messageId"].is_string() && m["contextId"].is_string());
    // The server keeps serving.
    assert_eq!(
        f.send(None, "SendMessage", "again", true)["result"]["status"]["state"],
        "completed"
    );
}

#[test]
fn cancel_stops_a_running_task_and_refuses_a_finished_one() {
    let f = fixture();
    let v = f.send(Some("1.0"), "SendMessage", "hang on", false);
    let id = v["result"]["task"]["id"].as_str().expect("id").to_string();
    f.settle();
    assert_eq!(
        f.rpc(None, "tasks/get", json!({"id": id}))["result"]["status"]["state"],
        "working"
    );
    let c = f.rpc(Some("1.0"), "CancelTask", json!({"id": id}));
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED");
    f.settle();
    assert_eq!(
        f.rpc(None, "GetTask", json!({"id": id}))["result"]["status"]["state"],
        "canceled"
    );
    assert_eq!(
        lock(&f.host.events).last().map(|e| e.state.clone()),
        Some("canceled".into())
    );
    assert!(lock(&f.host.jobs).is_empty(), "the aborted job finished");
    assert_eq!(
        f.error_code(None, "tasks/cancel", json!({"id": id})),
        -32002
    );
}

#[test]
fn every_error_code() {
    let f = fixture();
    let code = |resp: HttpResponse| -> i64 {
        assert_eq!(resp.status, 200);
        serde_json::from_slice::<Value>(&resp.body).expect("json")["error"]["code"]
            .as_i64()
            .expect("code")
    };
    assert_eq!(code(f.post(None, "{not json")), -32700);
    assert_eq!(code(f.post(None, "[1,2]")), -32600);
    assert_eq!(code(f.post(None, "\"text\"")), -32600);
    assert_eq!(code(f.post(None, r#"{"jsonrpc":"2.0","id":1}"#)), -32600);
    assert_eq!(
        code(f.post(None, r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#)),
        -32600
    );
    assert_eq!(
        code(f.post(
            Some("2.0"),
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#
        )),
        -32009
    );
    assert_eq!(f.error_code(None, "tasks/list", json!({})), -32601);
    assert_eq!(f.error_code(None, "GetTask", json!({})), -32602);
    assert_eq!(f.error_code(None, "GetTask", json!({"id": 5})), -32602);
    assert_eq!(
        f.error_code(None, "SendMessage", json!({"message": "hi"})),
        -32602
    );
    assert_eq!(
        f.error_code(None, "SendMessage", json!({"message": {"parts": "hi"}})),
        -32602
    );
    assert_eq!(
        f.error_code(None, "SendMessage", json!({"message": {"parts": []}})),
        -32602
    );
    assert_eq!(
        code(f.post(
            None,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#
        )),
        -32602
    );
    assert_eq!(f.error_code(None, "GetTask", json!({"id": "nope"})), -32001);
    assert_eq!(
        f.error_code(Some("1.0"), "CancelTask", json!({"id": "nope"})),
        -32001
    );
    assert_eq!(
        f.error_code(Some("1.0"), "SendStreamingMessage", json!({})),
        -32004
    );
}

#[test]
fn the_request_id_is_echoed_whatever_its_type() {
    let f = fixture();
    for id in [json!("abc"), json!(42), json!(null)] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "GetTask", "params": {"id": "x"}})
            .to_string();
        let v: Value = serde_json::from_slice(&f.post(None, &body).body).expect("json");
        assert_eq!(v["id"], id);
    }
}

#[test]
fn history_length_trims_the_history() {
    let f = fixture();
    let v = f.send(None, "SendMessage", "hello", true);
    let id = v["result"]["id"].clone();
    let got = f.rpc(None, "GetTask", json!({"id": id, "historyLength": 0}));
    assert!(got["result"].get("history").is_none());
}

#[test]
fn the_skill_in_message_metadata_reaches_on_task() {
    let f = fixture();
    f.rpc(None, "SendMessage", json!({"message": {"role": "user", "messageId": "m",
        "parts": [{"kind": "text", "text": "hi"}], "metadata": {"skill": "greet"}}, "configuration": {"blocking": true}}));
    assert_eq!(lock(&f.host.events)[0].skill.as_deref(), Some("greet"));
}
