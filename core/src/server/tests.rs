//! The server function, request by request, with no sockets.

use super::*;
use crate::skills::Skill;
use crate::testing::{run_with_work, Jobs, TestLocks, VirtualTime};
use crate::HostBase;
use crate::ToolSource;
use serde_json::json;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap()
}

/// A server host on the core harness: spawned jobs queue in `jobs`, and
/// timers run on manual virtual time that the test moves.
struct TestHost {
    ids: AtomicU64,
    jobs: Jobs,
    events: Mutex<Vec<TaskEvent>>,
    /// What the server reported to the host's log.
    reports: Mutex<Vec<String>>,
    time: VirtualTime,
    /// The timers handed out: (ms, due at).
    timers: Mutex<Vec<(u64, u64)>>,
    /// The requests sent (push notifications); each answered 204.
    sent: Mutex<Vec<HttpRequest>>,
    /// The tokens whose signature this host accepts, and their claims.
    jwts: Mutex<Vec<(String, auth::Claims)>>,
    /// The user's own verifier, when one is configured.
    custom: Mutex<Option<CustomVerifier>>,
    /// Its challenge ([`ServerHost::authenticate_challenge`]).
    challenge: Mutex<Option<String>>,
    /// Where the server's spans go, when the test records them.
    spans: std::sync::OnceLock<crate::SpanHook>,
}

/// A test's own verifier ([`ServerHost::authenticate`]).
type CustomVerifier = fn(&HttpRequest) -> auth::Verdict;

impl Default for TestHost {
    fn default() -> Self {
        TestHost {
            ids: AtomicU64::new(0),
            jobs: Jobs::default(),
            events: Mutex::default(),
            reports: Mutex::default(),
            time: VirtualTime::manual(),
            timers: Mutex::default(),
            sent: Mutex::default(),
            jwts: Mutex::default(),
            custom: Mutex::default(),
            challenge: Mutex::default(),
            spans: std::sync::OnceLock::new(),
        }
    }
}

impl TestHost {
    /// Moves the clock so every timer handed out so far fires; returns their durations.
    fn fire_timers(&self) -> Vec<u64> {
        let timers: Vec<(u64, u64)> = lock(&self.timers).drain(..).collect();
        if let Some(last) = timers.iter().map(|(_, at)| *at).max() {
            self.time.advance_to(last);
        }
        timers.into_iter().map(|(ms, _)| ms).collect()
    }
}

impl crate::HostBase for Arc<TestHost> {
    fn new_id(&self) -> String {
        format!("id{}", self.ids.fetch_add(1, Ordering::SeqCst) + 1)
    }
    /// The wall clock: 2025-12-01T00:00:00Z plus the test's virtual time.
    fn unix_ms(&self) -> Option<u64> {
        Some(1_764_547_200_000 + self.time.now())
    }
    /// A timer on the test's clock: done when the test moves it far enough.
    fn now_ms(&self) -> u64 {
        self.time.now()
    }
}

impl ServerHost for Arc<TestHost> {
    type Locks = TestLocks;
    fn on_task(&self, event: TaskEvent) {
        lock(&self.events).push(event);
    }
    fn report(&self, problem: &str) {
        lock(&self.reports).push(problem.to_string());
    }
    fn sleep_until(&self, at: u64) -> Option<BoxFuture<'static, ()>> {
        lock(&self.timers).push((at - self.time.now(), at));
        Some(Box::pin(self.time.sleep_until(at)))
    }
    fn send(
        &self,
        req: HttpRequest,
    ) -> Option<BoxFuture<'static, Result<HttpResponse, crate::TransportError>>> {
        lock(&self.sent).push(req);
        let answer = HttpResponse {
            status: 204,
            headers: Vec::new(),
            body: Vec::new(),
        };
        Some(Box::pin(std::future::ready(Ok(answer))))
    }
    /// A token "signed" when the test registered it: its claims as given.
    fn verify_jwt(&self, token: &str) -> BoxFuture<'static, Result<auth::Claims, String>> {
        let found = lock(&self.jwts)
            .iter()
            .find(|(t, _)| t == token)
            .map(|(_, c)| c.clone());
        Box::pin(std::future::ready(
            found.ok_or_else(|| "InvalidSignature".to_string()),
        ))
    }
    fn authenticate(&self, req: &HttpRequest) -> Option<BoxFuture<'static, auth::Verdict>> {
        let verdict = (*lock(&self.custom))?(req);
        Some(Box::pin(std::future::ready(verdict)))
    }
    fn authenticate_challenge(&self) -> Option<String> {
        lock(&self.challenge).clone()
    }
    fn span_hook(&self) -> Option<&crate::SpanHook> {
        self.spans.get()
    }
}

/// Answers by rule: "fail…" fails, "hang…" never finishes, "chunks…" sends
/// two chunks and "tail" as its answer, "progress…" says "thinking" and then
/// waits one poll, else "done: <text>".
struct Rules;
impl Fulfiller for Rules {
    fn fulfil(
        &self,
        r: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        if let Some(answer) = conversation_rules(&r, &progress) {
            answer
        } else if r.text.starts_with("fail") {
            Box::pin(std::future::ready(Err("LLM HTTP 500: boom".to_string())))
        } else if r.text.starts_with("hang") {
            progress.status("hanging on");
            Box::pin(std::future::pending())
        } else if r.text.starts_with("chunks") {
            Box::pin(async move {
                progress.artifact_chunk("one", false);
                yield_once().await;
                progress.artifact_chunk("two", false);
                yield_once().await;
                Ok("tail".to_string())
            })
        } else if r.text.starts_with("progress") {
            Box::pin(async move {
                progress.status("thinking");
                yield_once().await;
                Ok(format!("done: {}", r.text))
            })
        } else {
            Box::pin(std::future::ready(Ok(format!("done: {}", r.text))))
        }
    }
}

/// Pending once, then ready.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|_| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            Poll::Pending
        }
    })
    .await
}

/// A memory store that records every saved state and counts reads; with
/// `slow`, each save takes that many polls (as a file store's does), and
/// with `refuse`, saves of that state fail (a full disk).
#[derive(Default)]
struct Recording {
    inner: MemoryStore<TestLocks>,
    saves: Mutex<Vec<(String, TaskState)>>,
    reads: AtomicU64,
    slow: AtomicU64,
    refuse: Mutex<Option<TaskState>>,
}
impl TaskStore for Arc<Recording> {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.get(id)
    }
    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        self.inner.list(filter)
    }
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<Value>, StoreError>> + MaybeSend {
        self.inner.get_push_configs(task_id)
    }
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        self.inner.save_push_configs(task_id, configs)
    }
    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        lock(&self.saves).push((task.id.clone(), task.state));
        let (this, task) = (self.clone(), task.clone());
        async move {
            for _ in 0..this.slow.load(Ordering::SeqCst) {
                yield_once().await;
            }
            if *lock(&this.refuse) == Some(task.state) {
                return Err(StoreError::new("no space left on device"));
            }
            this.inner.save_now(&task)
        }
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
        card: card.map(Into::into),
        cors_origin: Some(CorsOrigin::any()),
        ..Default::default()
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
        run_with_work(fut, &self.host.jobs, || self.server.take_work())
    }

    /// Runs every queued job as far as it goes.
    fn settle(&self) {
        let mut rounds = 0;
        self.run(std::future::poll_fn(|_| {
            rounds += 1;
            if rounds > 100 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }));
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

impl Fixture {
    /// A streaming call (id 9): the head and the event body.
    fn stream(
        &self,
        version: Option<&str>,
        method: &str,
        params: Value,
    ) -> (HttpResponse, EventBody) {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        let mut req = HttpRequest::post_json("/", body.to_string().into_bytes());
        if let Some(v) = version {
            req = req.with_header("A2A-Version", v);
        }
        match self.run(self.server.serve(req)) {
            Reply::Stream { head, body } => (head, body),
            Reply::Full(r) => panic!("not a stream: {}", r.body_snippet(300)),
        }
    }

    /// A streaming send of `text` in 1.0 (`version` Some) or 0.3 shapes.
    fn stream_send(&self, version: Option<&str>, text: &str) -> (HttpResponse, EventBody) {
        let (method, params) = match version {
            Some(_) => (
                "SendStreamingMessage",
                json!({"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]}}),
            ),
            None => (
                "message/stream",
                json!({"message": {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": text}]},
                       "configuration": {"blocking": true}}),
            ),
        };
        self.stream(version, method, params)
    }

    /// The next frame if one comes while every job runs as far as it can;
    /// `Ready(None)` at the end of the stream.
    fn try_frame(&self, body: &mut EventBody) -> Poll<Option<String>> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..50 {
            if let Poll::Ready(frame) = body.as_mut().poll_next(&mut cx) {
                return Poll::Ready(frame.map(|b| String::from_utf8(b).expect("UTF-8 frame")));
            }
            self.settle();
        }
        Poll::Pending
    }

    /// The next event's JSON-RPC response; `None` at the end of the stream.
    fn next_event(&self, body: &mut EventBody) -> Option<Value> {
        match self.try_frame(body) {
            Poll::Ready(frame) => frame.map(|f| parse_frame(&f)),
            Poll::Pending => panic!("no event came"),
        }
    }

    /// Every event until the stream ends.
    fn all_events(&self, body: &mut EventBody) -> Vec<Value> {
        std::iter::from_fn(|| self.next_event(body)).collect()
    }

    /// The live task's number of streams (0 once it is no longer running).
    fn subscribers(&self, id: &str) -> usize {
        self.server.tasks().stream_count(id)
    }
}

/// One SSE frame: exactly `data: <one JSON line>` and a blank line.
fn parse_frame(frame: &str) -> Value {
    let json = frame
        .strip_prefix("data: ")
        .and_then(|f| f.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not one data line: {frame:?}"));
    assert!(!json.contains('\n'), "one line: {frame:?}");
    let v: Value = serde_json::from_str(json).expect("JSON data");
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], 9, "the request's id");
    v
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
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn the_card_has_an_entity_tag_and_a_matching_request_gets_304() {
    let f = fixture();
    let first = get(&f, CARD_PATH, "GET");
    let etag = first.header("etag").expect("an ETag").to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert_eq!(first.header("cache-control"), Some("no-cache"));
    let again = |tags: &str| {
        let req = HttpRequest::get(CARD_PATH).with_header("If-None-Match", tags);
        f.run(f.server.handle(req))
    };
    let same = again(&etag);
    assert_eq!(same.status, 304);
    assert!(same.body.is_empty());
    assert_eq!(same.header("etag"), Some(etag.as_str()));
    assert_eq!(again(&format!("\"other\", W/{etag}")).status, 304);
    assert_eq!(again("\"stale\"").status, 200);

    // A max-age, when configured.
    let options = ServerOptions {
        card: Some(card().into()),
        card_max_age: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let host = Arc::new(TestHost::default());
    let server = A2aServer::new(options, Arc::new(Recording::default()), host.clone(), Rules);
    let resp = run_with_work(
        server.handle(HttpRequest::get(CARD_PATH)),
        &host.jobs,
        || server.take_work(),
    );
    assert_eq!(resp.header("cache-control"), Some("public, max-age=60"));
}

#[test]
fn push_config_and_extended_card_methods_get_the_spec_errors() {
    let f = fixture();
    for method in [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    ] {
        assert_eq!(
            f.error_code(Some("1.0"), method, json!({"id": "t"})),
            -32003,
            "{method}"
        );
    }
    assert_eq!(
        f.error_code(Some("1.0"), "GetExtendedAgentCard", json!({})),
        -32004
    );
    assert_eq!(
        f.error_code(None, "agent/getAuthenticatedExtendedCard", json!({})),
        -32004
    );
}

#[test]
fn a_message_naming_a_task_is_checked_against_that_task_never_silently_made_new() {
    let f = fixture();
    let msg = |extra: Value| {
        let mut m = json!({"role": "ROLE_USER", "messageId": "m2", "parts": [{"text": "more"}]});
        m.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"message": m})
    };
    assert_eq!(
        f.error_code(Some("1.0"), "SendMessage", msg(json!({"taskId": "nope"}))),
        -32001
    );
    let done = f.send(Some("1.0"), "SendMessage", "first", true);
    let id = done["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let ctx = done["result"]["task"]["contextId"]
        .as_str()
        .expect("ctx")
        .to_string();
    let saves = lock(&f.store.saves).len();
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        msg(json!({"taskId": id, "contextId": "other"})),
    );
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let v = f.rpc(
        Some("1.0"),
        "SendMessage",
        msg(json!({"taskId": id, "contextId": ctx})),
    );
    assert_eq!(v["error"]["code"], -32004, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("terminal"),
        "{v}"
    );
    let hanging = f.send(None, "message/send", "hang on", false);
    let running = hanging["result"]["id"].as_str().expect("id").to_string();
    let v = f.rpc(None, "message/send", msg(json!({"taskId": running})));
    assert_eq!(v["error"]["code"], -32004, "{v}");
    // Only the second task's saves: no task was made for the refused messages.
    let made: Vec<String> = lock(&f.store.saves)[saves..]
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    assert!(made.iter().all(|t| *t == running), "{made:?}");
}

#[test]
fn every_state_change_is_stamped_and_the_stamp_is_served() {
    let f = fixture();
    let v = f.send(Some("1.0"), "SendMessage", "hello", false);
    let id = v["result"]["task"]["id"].as_str().expect("id").to_string();
    assert_eq!(
        v["result"]["task"]["status"]["timestamp"], "2025-12-01T00:00:00.000Z",
        "{v}"
    );
    f.host.time.advance_to(1_500);
    f.settle();
    let got = f.rpc(None, "tasks/get", json!({"id": id}));
    assert_eq!(got["result"]["status"]["state"], "completed");
    assert_eq!(
        got["result"]["status"]["timestamp"],
        "2025-12-01T00:00:01.500Z"
    );
    let (_, mut body) = f.stream_send(Some("1.0"), "progress please");
    let stamped: Vec<Value> = f
        .all_events(&mut body)
        .into_iter()
        .filter_map(|e| {
            e["result"]["statusUpdate"]["status"]
                .get("timestamp")
                .cloned()
        })
        .collect();
    assert!(
        stamped.len() >= 2,
        "working and completed are stamped: {stamped:?}"
    );
}

#[test]
fn list_tasks_pages_newest_first_with_filters() {
    let f = fixture();
    let mut ids = Vec::new();
    for (i, ctx) in ["a", "b", "a", "a", "b"].iter().enumerate() {
        f.host.time.advance_to(1000 * (i as u64 + 1));
        let text = if i == 3 { "hang on" } else { "hello" };
        let params = json!({"message": {"role": "ROLE_USER", "messageId": format!("m{i}"),
            "contextId": ctx, "parts": [{"text": text}]}, "configuration": {"returnImmediately": true}});
        let v = f.rpc(Some("1.0"), "SendMessage", params);
        ids.push(v["result"]["task"]["id"].as_str().expect("id").to_string());
        f.settle();
    }
    let list = |params: Value| f.rpc(Some("1.0"), "ListTasks", params)["result"].clone();
    let ids_of = |page: &Value| -> Vec<String> {
        page["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = list(json!({}));
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(ids_of(&all), newest_first);
    assert_eq!(
        (all["totalSize"].as_u64(), all["pageSize"].as_u64()),
        (Some(5), Some(50))
    );
    assert_eq!(all["nextPageToken"], "");
    assert!(
        all["tasks"][2].get("artifacts").is_none(),
        "artifacts only when asked"
    );
    assert_eq!(all["tasks"][2]["status"]["state"], "TASK_STATE_COMPLETED");
    let with = list(json!({"includeArtifacts": true, "historyLength": 0}));
    assert!(with["tasks"][2]["artifacts"].is_array());
    assert!(with["tasks"][2].get("history").is_none());

    let in_a = list(json!({"contextId": "a"}));
    assert_eq!(
        ids_of(&in_a),
        [ids[3].clone(), ids[2].clone(), ids[0].clone()]
    );
    let working = list(json!({"status": "TASK_STATE_WORKING"}));
    assert_eq!(ids_of(&working), [ids[3].clone()]);
    // Inclusive: the task stamped at 3.000 is in.
    let recent = list(json!({"statusTimestampAfter": "2025-12-01T00:00:03.000Z"}));
    assert_eq!(
        ids_of(&recent),
        [ids[4].clone(), ids[3].clone(), ids[2].clone()]
    );

    // Pages of two, followed by their tokens, give every task once.
    let mut seen = Vec::new();
    let mut token = String::new();
    for _ in 0..5 {
        let page = list(json!({"pageSize": 2, "pageToken": token}));
        assert_eq!(page["totalSize"], 5);
        seen.extend(ids_of(&page));
        token = page["nextPageToken"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen, newest_first);
    assert_eq!(
        f.error_code(Some("1.0"), "ListTasks", json!({"pageSize": 500})),
        -32602
    );
    assert_eq!(
        f.error_code(Some("1.0"), "ListTasks", json!({"pageToken": "zz"})),
        -32602
    );
}

#[test]
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn list_tasks_on_a_store_that_cannot_list_is_unsupported() {
    struct GetOnly(MemoryStore<TestLocks>);
    impl TaskStore for GetOnly {
        fn get(
            &self,
            id: &str,
        ) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
            self.0.get(id)
        }
        fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
            self.0.save(task)
        }
    }
    let host = Arc::new(TestHost::default());
    let options = ServerOptions {
        card: Some(card().into()),
        ..Default::default()
    };
    let server = A2aServer::new(
        options,
        GetOnly(MemoryStore::default()),
        host.clone(),
        Rules,
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    let req = HttpRequest::post_json("/", body.to_string().into_bytes())
        .with_header("A2A-Version", "1.0");
    let resp = run_with_work(server.handle(req), &host.jobs, || server.take_work());
    let v: Value = serde_json::from_slice(&resp.body).expect("json");
    assert_eq!(v["error"]["code"], -32004, "{v}");
}

#[test]
fn the_version_may_come_as_a_query_parameter() {
    let f = fixture();
    let send = |url: &str| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}}});
        let mut req = HttpRequest::post_json("/", body.to_string().into_bytes());
        req.url = url.into();
        serde_json::from_slice(&f.run(f.server.handle(req)).body).expect("json")
    };
    let v = send("/?A2A-Version=1.0");
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    assert_eq!(send("/?a2a-version=9.9")["error"]["code"], -32009);
    // No version: the 1.0-shaped message says 1.0 (see conformance.rs).
    assert_eq!(
        send("/?other=1")["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
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
fn a_job_never_reads_back_the_states_it_saved() {
    let f = fixture();
    let v = f.send(Some("1.0"), "SendMessage", "chunks please", false);
    let id = v["result"]["task"]["id"]
        .as_str()
        .expect("task id")
        .to_string();
    f.settle();
    let saves = lock(&f.store.saves)
        .iter()
        .filter(|(i, _)| *i == id)
        .count();
    assert!(
        saves >= 3,
        "submitted, working and chunks, completed: {saves}"
    );
    assert_eq!(
        f.store.reads.load(Ordering::SeqCst),
        0,
        "its own saves are no change elsewhere"
    );
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
    assert_eq!(f.server.tasks().wakers_kept(), 0, "the waiters are gone");
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
        "TASK_STATE_CANCELED",
        "unversioned: in the dialect the task was made in"
    );
    assert_eq!(
        lock(&f.host.events).last().map(|e| e.state.to_string()),
        Some("canceled".into())
    );
    assert!(f.host.jobs.is_empty(), "the aborted job finished");
    assert_eq!(
        f.error_code(None, "tasks/cancel", json!({"id": id})),
        -32002
    );
}

/// Cancels racing progress on a slow store: one save at a time, nothing
/// after the terminal state, the CancelTask answer is what is stored, and
/// the hook runs once.
#[test]
fn a_cancel_racing_progress_on_a_slow_store_is_ordered() {
    let f = fixture();
    f.store.slow.store(3, Ordering::SeqCst);
    let v = f.send(Some("1.0"), "SendMessage", "chunks, slowly", false);
    let id = v["result"]["task"]["id"].as_str().expect("id").to_string();
    let c = f.rpc(Some("1.0"), "CancelTask", json!({"id": id}));
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED");
    f.settle();
    let saves: Vec<TaskState> = lock(&f.store.saves).iter().map(|(_, s)| *s).collect();
    assert_eq!(saves.first(), Some(&TaskState::Submitted));
    assert_eq!(saves.last(), Some(&TaskState::Canceled), "saves: {saves:?}");
    assert_eq!(
        saves.iter().filter(|s| s.is_terminal()).count(),
        1,
        "saves: {saves:?}"
    );
    assert_eq!(
        f.rpc(None, "GetTask", json!({"id": id}))["result"]["status"]["state"],
        "TASK_STATE_CANCELED",
        "unversioned: in the dialect the task was made in"
    );
    let hooks: Vec<String> = lock(&f.host.events)
        .iter()
        .map(|e| e.state.to_string())
        .collect();
    assert_eq!(hooks, vec!["canceled".to_string()]);
    assert!(f.host.jobs.is_empty(), "the job ended");
}

/// A state the store refused is never acknowledged: the blocking caller
/// gets -32603, and the hook does not report it.
#[test]
fn a_refused_terminal_save_is_an_error_to_the_caller_not_a_result() {
    let f = fixture();
    *lock(&f.store.refuse) = Some(TaskState::Completed);
    let v = f.send(Some("1.0"), "SendMessage", "hello", true);
    assert_eq!(v["error"]["code"], -32603, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no space left"), "{message}");
    assert!(
        lock(&f.host.events).is_empty(),
        "no hook for a state never stored"
    );
}

/// The store refuses a new task's first save: the caller gets -32603
/// naming it, nothing starts, the server reports itself unhealthy, and the
/// next send the store takes works.
#[test]
fn a_refused_first_save_is_an_error_and_starts_nothing() {
    let f = fixture();
    *lock(&f.store.refuse) = Some(TaskState::Submitted);
    let v = f.send(Some("1.0"), "SendMessage", "hello", true);
    assert_eq!(v["error"]["code"], -32603, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("could not be stored"), "{message}");
    assert_eq!(get(&f, HEALTH_PATH, "GET").status, 503);
    assert!(
        lock(&f.host.reports)
            .iter()
            .any(|r| r.contains("saving state submitted failed")),
        "reported"
    );
    assert!(f.host.jobs.is_empty(), "no job started");
    *lock(&f.store.refuse) = None;
    let ok = f.send(Some("1.0"), "SendMessage", "hello", true);
    assert_eq!(
        ok["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{ok}"
    );
    assert_eq!(get(&f, HEALTH_PATH, "GET").status, 200);
}

/// A full disk after the first save: the blocking caller gets -32603
/// naming the failure, the server reports itself unhealthy (the health
/// check and the host's log), reads go on, and once the store takes saves
/// again it is healthy.
#[test]
fn a_failing_store_marks_the_server_unhealthy_and_reads_go_on() {
    let f = fixture();
    let health = |f: &Fixture| {
        let r = get(f, HEALTH_PATH, "GET");
        let v: Value = serde_json::from_slice(&r.body).expect("JSON health");
        (r.status, v)
    };
    assert_eq!(health(&f).0, 200);
    let ok = f.send(Some("1.0"), "SendMessage", "hello", true);
    let done = ok["result"]["task"]["id"].as_str().expect("id").to_string();

    *lock(&f.store.refuse) = Some(TaskState::Completed);
    let v = f.send(Some("1.0"), "SendMessage", "hello", true);
    assert_eq!(v["error"]["code"], -32603, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("could not be stored") && message.contains("no space left"),
        "{message}"
    );
    let (status, body) = health(&f);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unhealthy");
    assert_eq!(body["storeFailures"], 1);
    assert!(
        lock(&f.host.reports)
            .iter()
            .any(|r| r.contains("unhealthy") && r.contains("no space left")),
        "{:?}",
        lock(&f.host.reports)
    );
    // Reads go on while unhealthy.
    let got = f.rpc(None, "tasks/get", json!({"id": done}));
    assert_eq!(got["result"]["status"]["state"], "completed");

    // The store works again: so does the server.
    *lock(&f.store.refuse) = None;
    let v = f.send(Some("1.0"), "SendMessage", "hello", true);
    assert_eq!(
        v["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(health(&f).0, 200);
    assert!(lock(&f.host.reports).iter().any(|r| r.contains("healthy")));
}

/// A read-only store from the start of a cancel: CancelTask of a task
/// the server no longer runs answers -32603, never `canceled`.
#[test]
fn a_cancel_the_store_refuses_is_an_error_not_canceled() {
    let f = fixture();
    // A task stored as working by an earlier run of the server.
    let t = Task {
        id: "old".into(),
        context_id: "c".into(),
        state: TaskState::Working,
        status_message: None,
        updated_ms: None,
        artifacts: vec![],
        history: vec![],
        dialect: Shape::V03,
        owner: None,
        trace: None,
        revision: Default::default(),
    };
    f.store.inner.save_now(&t).expect("seed");
    *lock(&f.store.refuse) = Some(TaskState::Canceled);
    let v = f.rpc(Some("1.0"), "CancelTask", json!({"id": "old"}));
    assert_eq!(v["error"]["code"], -32603, "{v}");
    assert!(
        lock(&f.host.events).is_empty(),
        "no hook for a state never stored"
    );
    assert_eq!(get(&f, HEALTH_PATH, "GET").status, 503);
    assert_eq!(
        f.rpc(None, "GetTask", json!({"id": "old"}))["result"]["status"]["state"],
        "working"
    );
}

/// Hosts ask the server how to treat a body, and its refusals carry the
/// CORS headers so a page can read them.
#[test]
fn body_refusals_come_from_the_server_with_cors_headers() {
    let f = fixture();
    let head = |n: &str| vec![("Content-Length".to_string(), n.to_string())];
    assert_eq!(
        f.server.admit(&head("10")),
        Admission::Read {
            limit: DEFAULT_BODY_LIMIT
        }
    );
    let Admission::Refuse(r) = f.server.admit(&head(&(DEFAULT_BODY_LIMIT + 1).to_string())) else {
        panic!("over the limit")
    };
    assert_eq!(r.status, 413);
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    let r = f.server.refuse(BodyRefusal::Malformed);
    assert_eq!(r.status, 400);
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    assert_eq!(
        f.server
            .refuse(BodyRefusal::TooLarge)
            .header("Access-Control-Allow-Origin"),
        Some("*")
    );
}

/// At most `max_running` fulfilments at once: later tasks wait as
/// `submitted` in order, a full queue refuses a new task at once with a
/// clear error, a queued task can be canceled, and a freed place lets the
/// next one run.
#[test]
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn fulfilments_past_the_cap_wait_submitted_and_a_full_queue_refuses() {
    let host = Arc::new(TestHost::default());
    let store = Arc::new(Recording::default());
    let options = ServerOptions {
        card: Some(card().into()),
        max_running: 1,
        max_queued: 1,
        ..Default::default()
    };
    let f = Fixture {
        server: A2aServer::new(options, store.clone(), host.clone(), Rules),
        host,
        store,
    };
    let id_of = |v: &Value| v["result"]["task"]["id"].as_str().expect("id").to_string();
    let state = |f: &Fixture, id: &str| {
        f.rpc(None, "tasks/get", json!({"id": id}))["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let a = id_of(&f.send(Some("1.0"), "SendMessage", "hang on", false));
    let b = id_of(&f.send(Some("1.0"), "SendMessage", "hello", false));
    f.settle();
    assert_eq!(state(&f, &a), "working");
    assert_eq!(state(&f, &b), "submitted", "b waits for a's place");
    let busy = f.send(Some("1.0"), "SendMessage", "one too many", false);
    assert_eq!(busy["error"]["code"], -32603, "{busy}");
    let text = busy["error"]["message"].as_str().unwrap_or_default();
    assert!(
        text.contains("busy") && text.contains("try again later"),
        "{text}"
    );

    // a ends: b runs.
    f.rpc(Some("1.0"), "CancelTask", json!({"id": a}));
    f.settle();
    assert_eq!(state(&f, &b), "completed");

    // A queued task canceled never runs, and frees its place in the queue.
    let c = id_of(&f.send(Some("1.0"), "SendMessage", "hang on", false));
    let d = id_of(&f.send(Some("1.0"), "SendMessage", "hello", false));
    f.settle();
    let canceled = f.rpc(Some("1.0"), "CancelTask", json!({"id": d}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    f.settle();
    assert_eq!(state(&f, &d), "canceled");
    let saves: Vec<TaskState> = lock(&f.store.saves)
        .iter()
        .filter(|(id, _)| *id == d)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(saves, vec![TaskState::Submitted, TaskState::Canceled]);
    let e = id_of(&f.send(Some("1.0"), "SendMessage", "hello", false));
    f.rpc(Some("1.0"), "CancelTask", json!({"id": c}));
    f.settle();
    assert_eq!(state(&f, &e), "completed");
    assert!(f.host.jobs.is_empty(), "every job ended");
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
        -32602
    );
    assert_eq!(
        f.error_code(None, "tasks/resubscribe", json!({"id": "nope"})),
        -32001
    );
    assert_eq!(f.error_code(None, "SubscribeToTask", json!({})), -32602);
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

/// `(kind, state)` of 0.3 events: kind, and the state of tasks and status updates.
fn kinds_03(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            let r = &e["result"];
            let state = r["status"]["state"].as_str().unwrap_or("-");
            (
                r["kind"].as_str().unwrap_or("?").to_string(),
                state.to_string(),
            )
        })
        .collect()
}

#[test]
fn a_10_stream_sends_task_working_progress_artifact_completed() {
    let f = fixture();
    let (head, mut body) = f.stream_send(Some("1.0"), "progress report");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("Content-Type"), Some("text/event-stream"));
    assert_eq!(head.header("Access-Control-Allow-Origin"), Some("*"));
    assert!(head.body.is_empty());
    let events = f.all_events(&mut body);
    let r: Vec<&Value> = events.iter().map(|e| &e["result"]).collect();
    assert_eq!(r.len(), 5, "{events:?}");
    let task = &r[0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED");
    assert_eq!(
        task["history"][0]["parts"][0],
        json!({"text": "progress report"})
    );
    let id = task["id"].as_str().expect("task id");
    let ctx = task["contextId"].as_str().expect("context id");
    assert_eq!(
        r[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert!(r[1]["statusUpdate"]["status"].get("message").is_none());
    let said = &r[2]["statusUpdate"]["status"];
    assert_eq!(said["state"], "TASK_STATE_WORKING");
    assert_eq!(said["message"]["role"], "ROLE_AGENT");
    assert_eq!(said["message"]["parts"][0], json!({"text": "thinking"}));
    let art = &r[3]["artifactUpdate"];
    assert_eq!(
        art["artifact"]["parts"],
        json!([{"text": "done: progress report"}])
    );
    assert_eq!(art["lastChunk"], true);
    assert_eq!(
        r[4]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    for u in [
        &r[1]["statusUpdate"],
        &r[3]["artifactUpdate"],
        &r[4]["statusUpdate"],
    ] {
        assert_eq!(
            (u["taskId"].as_str(), u["contextId"].as_str()),
            (Some(id), Some(ctx))
        );
        assert!(u.get("kind").is_none() && u.get("final").is_none(), "{u}");
    }
    assert_eq!(f.subscribers(id), 0);
    // The stored task is what the stream said.
    let got = f.rpc(Some("1.0"), "GetTask", json!({"id": id}));
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        got["result"]["artifacts"][0]["artifactId"],
        art["artifact"]["artifactId"]
    );
}

#[test]
fn a_03_stream_has_kinds_lowercase_states_and_final_on_the_last_only() {
    let f = fixture();
    // `handle` reads the whole stream.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "message/stream",
        "params": {"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hello"}]}}});
    let resp = f.run(
        f.server
            .handle(HttpRequest::post_json("/", body.to_string().into_bytes())),
    );
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let text = String::from_utf8(resp.body).expect("utf-8");
    let events: Vec<Value> = text.split_inclusive("\n\n").map(parse_frame).collect();
    let k = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        kinds_03(&events),
        [
            k("task", "submitted"),
            k("status-update", "working"),
            k("artifact-update", "-"),
            k("status-update", "completed")
        ]
    );
    let finals: Vec<Value> = events
        .iter()
        .map(|e| e["result"]["final"].clone())
        .collect();
    assert_eq!(
        finals,
        [Value::Null, json!(false), Value::Null, json!(true)]
    );
    let art = &events[2]["result"];
    assert_eq!(
        art["artifact"]["parts"],
        json!([{"kind": "text", "text": "done: hello"}])
    );
    assert_eq!(
        (art["append"].clone(), art["lastChunk"].clone()),
        (json!(false), json!(true))
    );
}

#[test]
fn a_failed_task_streams_its_error_last() {
    let f = fixture();
    let (_, mut body) = f.stream_send(None, "fail please");
    let events = f.all_events(&mut body);
    let last = &events.last().expect("events")["result"];
    assert_eq!(last["status"]["state"], "failed");
    assert_eq!(last["final"], true);
    assert_eq!(
        last["status"]["message"]["parts"][0]["text"],
        "LLM HTTP 500: boom"
    );
    assert_eq!(events.len(), 3);
}

#[test]
fn progress_chunks_stream_in_order_and_store_one_artifact() {
    let f = fixture();
    let (_, mut body) = f.stream_send(Some("1.0"), "chunks");
    let events = f.all_events(&mut body);
    let chunks: Vec<(Value, bool, bool)> = events
        .iter()
        .filter_map(|e| e["result"].get("artifactUpdate"))
        .map(|a| {
            (
                a["artifact"]["parts"][0]["text"].clone(),
                a["append"] == true,
                a["lastChunk"] == true,
            )
        })
        .collect();
    assert_eq!(
        chunks,
        [
            (json!("one"), false, false),
            (json!("two"), true, false),
            (json!("tail"), true, true)
        ]
    );
    let ids: Vec<&Value> = events
        .iter()
        .filter_map(|e| e["result"].get("artifactUpdate"))
        .map(|a| &a["artifact"]["artifactId"])
        .collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "one artifact: {ids:?}");
    let id = events[0]["result"]["task"]["id"].clone();
    let got = f.rpc(None, "GetTask", json!({"id": id}));
    let artifacts = got["result"]["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 1, "{got}");
    let parts: Vec<&Value> = artifacts[0]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .map(|p| &p["text"])
        .collect();
    assert_eq!(parts, [&json!("one"), &json!("two"), &json!("tail")]);
    // Progress was saved as it came, then the end.
    let states: Vec<TaskState> = lock(&f.store.saves)
        .iter()
        .filter(|(i, _)| Some(i.as_str()) == id.as_str())
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(states.first(), Some(&TaskState::Submitted));
    assert_eq!(states.last(), Some(&TaskState::Completed));
    assert!(states.len() >= 4, "{states:?}");
    // A blocking send answers the same one artifact.
    let v = f.send(None, "SendMessage", "chunks", true);
    assert_eq!(v["result"]["artifacts"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        v["result"]["artifacts"][0]["parts"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
}

#[test]
fn subscribing_to_a_running_task_sends_it_then_its_live_events() {
    let f = fixture();
    let v = f.send(Some("1.0"), "SendMessage", "hang on", false);
    let id = v["result"]["task"]["id"].as_str().expect("id").to_string();
    f.settle();
    let (head, mut body) = f.stream(Some("1.0"), "SubscribeToTask", json!({"id": id}));
    assert_eq!(head.header("Content-Type"), Some("text/event-stream"));
    let first = f.next_event(&mut body).expect("the task");
    let task = &first["result"]["task"];
    assert_eq!(task["id"], id.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_WORKING");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "hanging on");
    assert!(f.try_frame(&mut body).is_pending(), "nothing new yet");
    assert_eq!(f.subscribers(&id), 1);
    // A second follower, in 0.3, hears the same end.
    let (_, mut other) = f.stream(None, "tasks/resubscribe", json!({"id": id}));
    assert_eq!(
        f.next_event(&mut other).expect("task")["result"]["kind"],
        "task"
    );
    assert_eq!(f.subscribers(&id), 2);

    f.rpc(None, "tasks/cancel", json!({"id": id}));
    let end = f.next_event(&mut body).expect("the end");
    assert_eq!(
        end["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    assert_eq!(f.next_event(&mut body), None);
    let end03 = f.next_event(&mut other).expect("the end");
    assert_eq!(
        (
            end03["result"]["status"]["state"].clone(),
            end03["result"]["final"].clone()
        ),
        (json!("canceled"), json!(true))
    );
    assert_eq!(f.next_event(&mut other), None);
}

#[test]
fn subscribing_to_a_finished_or_unknown_task_is_an_error() {
    let f = fixture();
    let v = f.send(None, "SendMessage", "hello", true);
    let id = v["result"]["id"].clone();
    for (version, method) in [
        (Some("1.0"), "SubscribeToTask"),
        (None, "tasks/resubscribe"),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"id": id}});
        let mut req = HttpRequest::post_json("/", body.to_string().into_bytes());
        if let Some(v) = version {
            req = req.with_header("A2A-Version", v);
        }
        let resp = f.run(f.server.handle(req));
        assert_eq!(resp.header("content-type"), Some("application/json"));
        let v: Value = serde_json::from_slice(&resp.body).expect("json");
        assert_eq!(v["error"]["code"], -32004, "{v}");
        assert_eq!(v["id"], 3);
        assert_eq!(
            f.error_code(version, method, json!({"id": "missing"})),
            -32001
        );
    }
}

#[test]
fn cancel_ends_an_open_stream_and_leaves_no_subscriber() {
    let f = fixture();
    let (_, mut body) = f.stream_send(Some("1.0"), "hang in there");
    let first = f.next_event(&mut body).expect("task");
    let id = first["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let working = f.next_event(&mut body).expect("working");
    assert_eq!(
        working["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    let said = f.next_event(&mut body).expect("progress");
    assert_eq!(
        said["result"]["statusUpdate"]["status"]["message"]["parts"][0]["text"],
        "hanging on"
    );
    assert!(f.try_frame(&mut body).is_pending());
    assert_eq!(
        f.server.tasks().wakers_kept(),
        2,
        "the pending stream's and the job's"
    );
    let c = f.rpc(Some("1.0"), "CancelTask", json!({"id": id}));
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED");
    let end = f.next_event(&mut body).expect("canceled");
    assert_eq!(
        end["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    assert_eq!(f.next_event(&mut body), None);
    f.settle();
    assert!(!f.server.tasks().is_running(&id));
    assert!(f.host.jobs.is_empty(), "the job ended");
    assert_eq!(
        f.server.tasks().wakers_kept(),
        0,
        "nothing kept for futures that are gone"
    );
    assert_eq!(
        f.rpc(None, "GetTask", json!({"id": id}))["result"]["status"]["state"],
        "TASK_STATE_CANCELED",
        "unversioned: in the dialect the task was made in"
    );
}

#[test]
fn an_idle_stream_gets_a_heartbeat_and_dropping_it_unsubscribes() {
    let f = fixture();
    let (_, mut body) = f.stream_send(None, "hang around");
    let first = f.next_event(&mut body).expect("task");
    let id = first["result"]["id"].as_str().expect("id").to_string();
    f.next_event(&mut body).expect("working");
    f.next_event(&mut body).expect("progress");
    lock(&f.host.timers).clear();
    assert!(f.try_frame(&mut body).is_pending());
    assert_eq!(f.host.fire_timers(), [15_000], "one 15 s timer");
    assert_eq!(
        f.try_frame(&mut body),
        Poll::Ready(Some(": ping\n\n".to_string()))
    );
    // Idle again: a fresh timer, another ping.
    assert!(f.try_frame(&mut body).is_pending());
    assert_eq!(f.host.fire_timers(), [15_000]);
    assert_eq!(
        f.try_frame(&mut body),
        Poll::Ready(Some(": ping\n\n".to_string()))
    );
    assert_eq!(f.subscribers(&id), 1);
    drop(body);
    assert_eq!(f.subscribers(&id), 0, "dropped = unsubscribed");
    assert_eq!(f.server.tasks().wakers_kept(), 1, "the running job's only");
    // The task itself runs on.
    assert_eq!(
        f.rpc(None, "GetTask", json!({"id": id}))["result"]["status"]["state"],
        "working"
    );
}

#[test]
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn the_heartbeat_follows_the_options() {
    let host = Arc::new(TestHost::default());
    let store = Arc::new(Recording::default());
    let options = ServerOptions {
        card: Some(card().into()),
        cors_origin: None,
        heartbeat: Some(Duration::from_millis(250)),
        ..Default::default()
    };
    let f = Fixture {
        server: A2aServer::new(options, store.clone(), host.clone(), Rules),
        host,
        store,
    };
    let (head, mut body) = f.stream_send(Some("1.0"), "hang");
    assert_eq!(head.header("Access-Control-Allow-Origin"), None);
    for _ in 0..3 {
        f.next_event(&mut body).expect("event");
    }
    lock(&f.host.timers).clear();
    assert!(f.try_frame(&mut body).is_pending());
    assert_eq!(f.host.fire_timers(), [250]);
    assert_eq!(
        f.try_frame(&mut body),
        Poll::Ready(Some(": ping\n\n".to_string()))
    );
}

#[test]
fn a_detached_progress_reports_nowhere() {
    let p = Progress::detached();
    p.status("x");
    p.artifact_chunk("y", true);
    let f = fixture();
    let out = f.run(Rules.fulfil(
        FulfilRequest {
            task_id: "t".into(),
            context_id: "c".into(),
            text: "chunks".into(),
            skill: None,
            history: Vec::new(),
            trace: None,
        },
        p,
    ));
    assert_eq!(out, Ok("tail".to_string()));
}

#[test]
fn tool_calls_are_reported_naming_the_tool_and_its_kind() {
    let call = |name: &str, args: Value| crate::llm::ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: args,
        turn: 1,
    };
    assert_eq!(
        tool_call_status(
            &call("planner_plan", json!({"task": "x"})),
            Some(ToolSource::A2a)
        ),
        "Asking the A2A agent tool planner_plan"
    );
    assert_eq!(
        tool_call_status(
            &call("skill", json!({"name": "greet"})),
            Some(ToolSource::Skill)
        ),
        "Loading the skill greet"
    );
    assert_eq!(
        tool_call_status(&call("search", json!({})), Some(ToolSource::Host)),
        "Calling the tool search"
    );
    assert_eq!(
        tool_call_status(&call("nope", json!({})), None),
        "Calling the tool nope"
    );
}

#[test]
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn a_request_origin_card_advertises_the_origin_each_request_came_to() {
    let host = Arc::new(TestHost::default());
    let config = A2aConfig {
        name: Some("edge".into()),
        ..Default::default()
    };
    let options = ServerOptions {
        card: Some(CardSpec::RequestOrigin {
            config,
            skills: Vec::new(),
        }),
        ..Default::default()
    };
    let server = A2aServer::new(options, Arc::new(Recording::default()), host.clone(), Rules);
    let card_at = |req: HttpRequest| -> Value {
        let resp = run_with_work(server.handle(req), &host.jobs, || server.take_work());
        assert_eq!(resp.status, 200);
        serde_json::from_slice(&resp.body).expect("json")
    };
    let absolute =
        HttpRequest::get("https://agent.example.workers.dev/.well-known/agent-card.json");
    assert_eq!(
        card_at(absolute)["url"],
        "https://agent.example.workers.dev/"
    );
    let by_host = HttpRequest::get(CARD_PATH).with_header("Host", "127.0.0.1:8787");
    let card = card_at(by_host);
    assert_eq!(card["url"], "http://127.0.0.1:8787/");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "http://127.0.0.1:8787/"
    );
    let odd_host = HttpRequest::get(CARD_PATH).with_header("Host", "a/b\"c");
    assert_eq!(card_at(odd_host)["url"], "http://localhost/");
}

#[test]
fn a_task_abandoned_by_a_gone_instance_is_failed_when_read() {
    let mut f = fixture();
    let stale_after = Duration::from_secs(600);
    let options = ServerOptions {
        card: Some(card().into()),
        interrupted_after: Some(stale_after),
        ..Default::default()
    };
    f.server = A2aServer::new(options, f.store.clone(), f.host.clone(), Rules);
    let now = f.host.unix_ms().expect("clock");
    let stored = |id: &str, state: TaskState, age: Duration| {
        let task = Task {
            id: id.into(),
            context_id: "c".into(),
            state,
            status_message: None,
            updated_ms: Some(now - age.as_millis() as u64),
            artifacts: vec![],
            history: vec![],
            dialect: Shape::V03,
            owner: None,
            trace: None,
            revision: Default::default(),
        };
        f.store.inner.save_now(&task).expect("seed");
    };
    // Left `working` 11 minutes ago by an instance that went away.
    stored("gone", TaskState::Working, Duration::from_secs(660));
    // Still making progress elsewhere: its last change is recent.
    stored("busy", TaskState::Working, Duration::from_secs(60));
    // A task waiting for its caller is paused, not abandoned.
    stored("asks", TaskState::InputRequired, Duration::from_secs(3600));

    let got = f.rpc(None, "tasks/get", json!({"id": "gone"}));
    assert_eq!(got["result"]["status"]["state"], "failed", "{got}");
    let text = &got["result"]["status"]["message"]["parts"][0]["text"];
    assert_eq!(text, INTERRUPTED, "{got}");
    let saved = f.store.inner.get_now("gone").expect("kept");
    assert_eq!(
        (saved.state, saved.updated_ms),
        (TaskState::Failed, Some(now))
    );

    for (id, state) in [("busy", "working"), ("asks", "input-required")] {
        let got = f.rpc(None, "tasks/get", json!({"id": id}));
        assert_eq!(got["result"]["status"]["state"], state, "{got}");
    }
}

#[test]
fn without_interrupted_after_a_stored_working_task_is_left_alone() {
    let f = fixture();
    let task = Task {
        id: "old".into(),
        context_id: "c".into(),
        state: TaskState::Working,
        status_message: None,
        updated_ms: Some(0),
        artifacts: vec![],
        history: vec![],
        dialect: Shape::V03,
        owner: None,
        trace: None,
        revision: Default::default(),
    };
    f.store.inner.save_now(&task).expect("seed");
    let got = f.rpc(None, "tasks/get", json!({"id": "old"}));
    assert_eq!(got["result"]["status"]["state"], "working", "{got}");
}

#[test]
fn a_task_running_here_is_never_failed_as_abandoned() {
    let mut f = fixture();
    let options = ServerOptions {
        card: Some(card().into()),
        interrupted_after: Some(Duration::from_millis(1)),
        ..Default::default()
    };
    f.server = A2aServer::new(options, f.store.clone(), f.host.clone(), Rules);
    let sent = f.rpc(
        None,
        "message/send",
        json!({"message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hang"}]},
               "configuration": {"blocking": false}}),
    );
    let id = sent["result"]["id"].as_str().expect("id").to_string();
    f.host.time.advance_to(5_000);
    let got = f.rpc(None, "tasks/get", json!({"id": id}));
    assert_ne!(got["result"]["status"]["state"], "failed", "{got}");
}

#[path = "conversation_tests.rs"]
mod conversation_tests;

#[path = "span_tests.rs"]
mod span_tests;

/// Who calls: authentication, owners, scoping (issue 18).
#[path = "auth_tests.rs"]
mod auth_tests;
use conversation_tests::conversation_rules;

/// Required fields, error details, dialect inference (issue 9).
#[path = "conformance_tests.rs"]
mod conformance;

#[path = "rest_tests.rs"]
mod rest_tests;

/// The public machine API, driven by hand (issue 19).
#[path = "exchange_tests.rs"]
mod exchange_tests;

#[test]
fn a_post_a_page_may_send_without_a_preflight_starts_nothing() {
    let f = fixture();
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}}})
    .to_string();
    // The content types of a CORS "simple request": refused before anything runs.
    for blind in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let mut req = HttpRequest::post_json("/", send.as_bytes().to_vec());
        req.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("Content-Type"));
        req = req.with_header("Content-Type", blind);
        let resp = f.run(f.server.handle(req));
        assert_eq!(resp.status, 415, "{blind}");
    }
    let listed = f.rpc(None, "ListTasks", json!({}));
    assert_eq!(listed["result"]["tasks"], json!([]), "no task was made");
    // JSON in any spelling, or no type at all, is a call.
    for json_type in [
        Some("application/json"),
        Some("application/a2a+json; charset=utf-8"),
        None,
    ] {
        let mut req = HttpRequest::post_json("/", send.as_bytes().to_vec());
        req.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("Content-Type"));
        if let Some(t) = json_type {
            req = req.with_header("Content-Type", t);
        }
        let resp = f.run(f.server.handle(req));
        assert_eq!(resp.status, 200, "{json_type:?}");
    }
}

#[cfg(feature = "replicas")]
#[path = "replica_tests.rs"]
mod replica_tests;

/// Core spawns nothing: a task's job is work the host takes. Until it is
/// taken the task does not move; `poll_work` wakes the host's runner when
/// work is started; taken and run, the task completes.
#[test]
fn a_tasks_job_is_work_the_host_takes_and_nothing_runs_until_it_does() {
    use std::sync::atomic::AtomicUsize;
    struct Count(AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let f = fixture();
    let woken = Arc::new(Count(AtomicUsize::new(0)));
    let waker = std::task::Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(f.server.poll_work(&mut cx).is_pending(), "no work yet");

    // A non-blocking send, served without taking any work.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]},
        "configuration": {"returnImmediately": true}}});
    let req = HttpRequest::post_json("/", body.to_string().into_bytes())
        .with_header("A2A-Version", "1.0");
    let resp = crate::testing::block_on(f.server.handle(req));
    let v: Value = serde_json::from_slice(&resp.body).expect("JSON");
    let id = v["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_string();
    assert_eq!(
        woken.0.load(Ordering::SeqCst),
        1,
        "the runner was woken once"
    );
    let stored = crate::testing::block_on(f.store.get(&id)).expect("read");
    assert_eq!(
        stored.expect("stored").state,
        TaskState::Submitted,
        "no work ran: the task waits for its job to store `working`"
    );

    // The host takes the one job and runs it: the task completes.
    let Poll::Ready(work) = f.server.poll_work(&mut cx) else {
        panic!("the job is ready to take")
    };
    assert_eq!(work.len(), 1, "one job");
    assert!(f.server.take_work().is_empty(), "taken once");
    for job in work {
        crate::testing::block_on(job);
    }
    let stored = crate::testing::block_on(f.store.get(&id)).expect("read");
    assert_eq!(stored.expect("stored").state, TaskState::Completed);
    assert_eq!(lock(&f.host.events).len(), 1, "the hook ran once");
}

/// `run_work` keeps no hold on the server: dropped, the runner wakes and ends.
#[test]
fn the_work_runner_ends_when_the_server_is_dropped() {
    struct Woken(std::sync::atomic::AtomicBool);
    impl std::task::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let f = fixture();
    let mut ran = 0;
    let mut runner = Box::pin(f.server.clone().run_work(|_| ran += 1));
    let woken = Arc::new(Woken(Default::default()));
    let waker = std::task::Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(runner.as_mut().poll(&mut cx).is_pending(), "waits for work");
    let Fixture { server, .. } = f;
    drop(server);
    assert!(woken.0.load(Ordering::SeqCst), "woken by the drop");
    assert!(runner.as_mut().poll(&mut cx).is_ready(), "ended");
    drop(runner);
    assert_eq!(ran, 0);
}
