//! The PostgreSQL task store on a real, throw-away PostgreSQL 15
//! (`common::pg`), and three replicas of `toolnexus serve --store
//! postgres://…` sharing it, over real HTTP on 127.0.0.1, with a slow stub
//! model.

mod common;

use common::pg::PgCluster;
use common::{start_listening, toolnexus_bin, Proc};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use toolnexus_core::server::{StoreError, TaskFilter, TaskStore};
use toolnexus_core::{
    Artifact, ArtifactUpdate, HttpRequest, HttpResponse, Part, StreamEvent, Task, TaskState,
    Transport,
};
use toolnexus_host_native::http_server::{bind, ServerHandle, DEFAULT_BODY_LIMIT};
use toolnexus_host_native::pg_store::PgStore;
use toolnexus_host_native::store::AnyStore;
use toolnexus_host_native::NativeTransport;

fn task(id: &str, version: u64, state: TaskState) -> Task {
    let mut t = Task {
        id: id.into(),
        context_id: "ctx".into(),
        state,
        status_message: None,
        updated_ms: Some(1_000 + version),
        artifacts: vec![],
        history: vec![],
        dialect: toolnexus_core::Shape::V03,
        owner: Some("alice".into()),
        trace: None,
        revision: Default::default(),
    };
    t.revision.version = version;
    t
}

/// Saves are a compare-and-swap on the version: a stale save is a typed
/// conflict and changes nothing; the revision and owner round-trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saves_are_a_compare_and_swap_on_the_version() {
    let pg = PgCluster::start();
    let url = pg.database("cas");
    // Replicas starting together: the migrations run once, under the lock.
    let opened = futures_util::future::join_all((0..3).map(|_| PgStore::connect(&url))).await;
    let store = AnyStore::from(opened.into_iter().next().unwrap().expect("connect"));
    assert_eq!(
        pg.sql("cas", "SELECT count(*) FROM toolnexus_migrations"),
        "3"
    );

    let mut first = task("t1", 1, TaskState::Working);
    first.revision.lease = Some(toolnexus_core::Lease {
        holder: "replica-a".into(),
        until_ms: 99,
    });
    store.save(&first).await.expect("version 1");
    let again = store.save(&first).await.expect_err("version 1 twice");
    assert!(again.is_conflict(), "{again}");
    store
        .save(&task("t1", 2, TaskState::Canceled))
        .await
        .expect("version 2 over 1");
    let late = store
        .save(&task("t1", 2, TaskState::Completed))
        .await
        .expect_err("a late completed over the canceled one");
    assert!(late.is_conflict(), "{late}");
    let stale = store
        .save(&task("t1", 5, TaskState::Completed))
        .await
        .expect_err("a version from nowhere");
    assert!(stale.is_conflict());
    let stored = store.get("t1").await.expect("get").expect("stored");
    assert_eq!(stored.state, TaskState::Canceled);
    assert_eq!(stored.revision.version, 2);
    assert_eq!(stored.owner.as_deref(), Some("alice"));
    assert_eq!(store.get("nope").await, Ok(None));

    // Expired leases are found by the lease column.
    store.save(&first_with("t2", 1, 50)).await.expect("t2");
    let expired = store.expired(60, 10).await.expect("expired");
    assert_eq!(
        expired.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["t2"]
    );
    assert_eq!(
        expired[0].revision.lease.as_ref().map(|l| l.until_ms),
        Some(50)
    );
    assert!(store.expired(40, 10).await.expect("none yet").is_empty());

    // Push configs are records of their task.
    let configs = json!([{"id": "w", "url": "https://example.com/hook"}]);
    store.save_push_configs("t1", &configs).await.expect("push");
    assert_eq!(store.get_push_configs("t1").await, Ok(Some(configs)));
    assert_eq!(store.get_push_configs("t2").await, Ok(None));
}

fn first_with(id: &str, version: u64, until_ms: u64) -> Task {
    let mut t = task(id, version, TaskState::Working);
    t.revision.lease = Some(toolnexus_core::Lease {
        holder: "dead".into(),
        until_ms,
    });
    t
}

/// ListTasks pages in SQL: newest status change first, a keyset cursor,
/// the owner filter, and the count of all that pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_read_in_sql_newest_first_after_the_cursor() {
    let pg = PgCluster::start();
    let store = AnyStore::from(PgStore::connect(&pg.database("list")).await.expect("pg"));
    for i in 0..7u64 {
        let mut t = task(&format!("t{i}"), 1, TaskState::Completed);
        t.updated_ms = Some(100 + i / 2);
        if i == 6 {
            t.owner = Some("bob".into());
        }
        store.save(&t).await.expect("save");
    }
    let alice = TaskFilter {
        owner: Some("alice".into()),
        ..TaskFilter::default()
    };
    let mut seen = Vec::new();
    let mut after: Option<(u64, String)> = None;
    for _ in 0..10 {
        let (page, total) = store
            .list_page(&alice, after.as_ref().map(|(ms, id)| (*ms, id.as_str())), 2)
            .await
            .expect("page")
            .expect("pages in SQL");
        assert_eq!(total, 6, "bob's task is not counted");
        let Some(last) = page.last() else { break };
        after = Some((last.updated_ms.unwrap_or(0), last.id.clone()));
        seen.extend(page.into_iter().map(|t| t.id));
    }
    assert_eq!(seen, ["t5", "t4", "t3", "t2", "t1", "t0"]);
}

fn chunk(id: &str, text: &str) -> StreamEvent {
    StreamEvent::Artifact(ArtifactUpdate {
        task_id: id.into(),
        context_id: "ctx".into(),
        artifact: Artifact {
            artifact_id: "a".into(),
            parts: vec![Part::Text(text.into())],
        },
        append: true,
        last_chunk: false,
    })
}

fn texts(events: &[(u64, StreamEvent)]) -> Vec<(u64, String)> {
    events
        .iter()
        .map(|(v, e)| match e {
            StreamEvent::Artifact(a) => (*v, a.artifact.parts[0].text().unwrap_or("").into()),
            other => (*v, format!("{:?}", other.state())),
        })
        .collect()
}

/// The event log: written in the task's transaction (a refused
/// compare-and-swap appends nothing), replayed from a version in order,
/// deleted with the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_logged_with_their_save_and_replayed_from_a_version() {
    let pg = PgCluster::start();
    let url = pg.database("events");
    let store = AnyStore::from(PgStore::connect(&url).await.expect("connect"));
    store
        .save_with_events(
            &task("t", 1, TaskState::Working),
            &[chunk("t", "one"), chunk("t", "two")],
        )
        .await
        .expect("version 1");
    let refused = store
        .save_with_events(&task("t", 1, TaskState::Working), &[chunk("t", "lost")])
        .await
        .expect_err("version 1 twice");
    assert!(refused.is_conflict());
    let mut done = task("t", 2, TaskState::Completed);
    done.updated_ms = Some(1);
    store
        .save_with_events(&done, &[chunk("t", "three")])
        .await
        .expect("version 2");
    let all = store
        .events_after("t", 0)
        .await
        .expect("read")
        .expect("a log");
    assert_eq!(
        texts(&all),
        [(1, "one".into()), (1, "two".into()), (2, "three".into())],
        "in order, the refused save's event nowhere"
    );
    let later = store
        .events_after("t", 1)
        .await
        .expect("read")
        .expect("a log");
    assert_eq!(texts(&later), [(2, "three".to_string())]);
    assert_eq!(store.delete_finished(2, 10).await, Ok(1));
    assert_eq!(
        pg.sql("events", "SELECT count(*) FROM toolnexus_task_events"),
        "0",
        "deleted with the task"
    );
}

/// A slow OpenAI-style model: a message `sleep N` is answered after N ms,
/// `hang` never; each answer is "done". A message `ask …` calls the
/// built-in `question` tool (the task stops in input-required) and the
/// caller's reply `answer X` gets "booked X". Counts the answers it
/// finished.
async fn slow_model() -> (ServerHandle, Arc<AtomicUsize>) {
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    let handle = bind(
        "127.0.0.1:0",
        DEFAULT_BODY_LIMIT,
        Arc::new(move |req: HttpRequest| {
            let count = count.clone();
            Box::pin(async move {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let text = body["messages"]
                    .as_array()
                    .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default()
                    .to_string();
                if text.contains("hang") {
                    std::future::pending::<()>().await;
                }
                let ms = text
                    .split_whitespace()
                    .skip_while(|w| *w != "sleep")
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                count.fetch_add(1, Ordering::SeqCst);
                let message = if text.starts_with("ask") {
                    let asked = json!({"questions": [{"question": "Which city?"}]});
                    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "q1",
                        "type": "function", "function": {"name": "question",
                        "arguments": asked.to_string()}}]})
                } else if let Some(city) = text.strip_prefix("answer ") {
                    json!({"role": "assistant", "content": format!("booked {city}")})
                } else {
                    json!({"role": "assistant", "content": "done"})
                };
                let answer = json!({"model": "stub", "choices": [{"message": message}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}});
                HttpResponse::json(200, serde_json::to_vec(&answer).expect("json"))
            })
        }),
    )
    .await
    .expect("bind the model stub");
    (handle, answered)
}

/// `n` replicas of `toolnexus serve` on database `url`.
async fn replicas(n: usize, url: &str, model: &str, lease_s: &str) -> Vec<Proc> {
    replicas_with(n, url, model, lease_s, &[]).await
}

/// [`replicas`], with more `serve` flags.
async fn replicas_with(
    n: usize,
    url: &str,
    model: &str,
    lease_s: &str,
    more: &[&str],
) -> Vec<Proc> {
    let mut procs = Vec::new();
    for _ in 0..n {
        let args = [
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            url,
            "--llm",
            "openai",
            "--model",
            "m",
            "--llm-base-url",
            model,
            "--task-lease-seconds",
            lease_s,
            "--store-poll-ms",
            "200",
        ];
        let args: Vec<&str> = args.iter().chain(more).copied().collect();
        procs.push(start_listening(&toolnexus_bin(), &args).await);
    }
    procs
}

async fn post(url: &str, method: &str, params: Value, wait: Option<u64>) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
    if let Some(s) = wait {
        req = req.with_header("Prefer", format!("wait={s}"));
    }
    let resp = NativeTransport::shared()
        .send(req)
        .await
        .expect("the replica answers");
    serde_json::from_slice(&resp.body).expect("JSON")
}

async fn send(url: &str, text: &str) -> String {
    let v = post(
        url,
        "message/send",
        json!({"message": {"role": "user", "messageId": uuid(), "parts": [{"kind": "text", "text": text}]},
               "configuration": {"blocking": false}}),
        None,
    )
    .await;
    v["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("not acknowledged: {v}"))
        .to_string()
}

fn uuid() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("m{}", N.fetch_add(1, Ordering::SeqCst))
}

fn state(v: &Value) -> String {
    v["result"]["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Polls GetTask until the task is `working` (bounded).
async fn until_working(url: &str, id: &str) {
    until_state(url, id, "working").await;
}

/// Polls GetTask on `url` until task `id` is stored as `want` (bounded):
/// the task as read then.
async fn until_state(url: &str, id: &str, want: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = post(url, "tasks/get", json!({"id": id}), None).await;
        if state(&last) == want {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {id} never stored as {want}: {last}");
}

/// The caller's reply `text` to task `id`, through `url`.
async fn reply(url: &str, id: &str, text: &str, blocking: bool) -> Value {
    post(
        url,
        "message/send",
        json!({"message": {"role": "user", "messageId": uuid(), "taskId": id,
                "parts": [{"kind": "text", "text": text}]},
               "configuration": {"blocking": blocking}}),
        None,
    )
    .await
}

/// The text of a task's first artifact.
fn answer_text(v: &Value) -> &str {
    v["result"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// A task that stopped in input-required on one replica is answered
/// through another, and two replies racing on two other replicas: exactly
/// one continues the task, the other is refused, and the model hears the
/// winner only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_on_another_replica_and_of_two_racing_replies_one_wins() {
    let pg = PgCluster::start();
    let url = pg.database("answers");
    let (model, answered) = slow_model().await;
    let r = replicas(3, &url, &model.url, "30").await;

    let id = send(&r[0].url, "ask where to").await;
    let asked = until_state(&r[1].url, &id, "input-required").await;
    assert_eq!(
        asked["result"]["status"]["message"]["parts"][0]["text"], "Which city?",
        "{asked}"
    );
    let done = reply(&r[1].url, &id, "answer Paris", true).await;
    assert_eq!(state(&done), "completed", "{done}");
    assert_eq!(answer_text(&done), "booked Paris", "{done}");
    let read = post(&r[2].url, "tasks/get", json!({"id": id}), None).await;
    assert_eq!(answer_text(&read), "booked Paris", "{read}");

    const ROUNDS: usize = 12;
    let mut refusals = Vec::new();
    for round in 0..ROUNDS {
        let asker = round % 3;
        let (b, c) = ((asker + 1) % 3, (asker + 2) % 3);
        let id = send(&r[asker].url, "ask again").await;
        until_state(&r[asker].url, &id, "input-required").await;
        let (to_b, to_c) = tokio::join!(
            reply(&r[b].url, &id, "answer Rome", false),
            reply(&r[c].url, &id, "answer Oslo", false)
        );
        let took = |v: &Value| v["result"]["id"] == json!(id);
        assert!(
            took(&to_b) != took(&to_c),
            "round {round}: exactly one reply continues the task: {to_b} {to_c}"
        );
        let (winner, lost) = if took(&to_b) {
            ("booked Rome", &to_c)
        } else {
            ("booked Oslo", &to_b)
        };
        assert!(lost["error"]["code"].is_i64(), "round {round}: {lost}");
        refusals.push(lost["error"]["code"].clone());
        let last = post(&r[asker].url, "tasks/get", json!({"id": id}), Some(20)).await;
        assert_eq!(state(&last), "completed", "round {round}: {last}");
        assert_eq!(answer_text(&last), winner, "round {round}: {last}");
        let history = last["result"]["history"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let replies = history
            .iter()
            .filter(|m| m["role"] == "user")
            .filter(|m| {
                let text = m["parts"][0]["text"].as_str().unwrap_or_default();
                text.starts_with("answer ")
            })
            .count();
        assert_eq!(replies, 1, "round {round}: one reply kept: {last}");
    }
    // Each task's question once and its one reply once; Paris's task too.
    assert_eq!(answered.load(Ordering::SeqCst), 2 * (ROUNDS + 1));
    eprintln!("racing replies: {ROUNDS} rounds, one winner each, the losers' errors {refusals:?}");
}

/// ListTasks paged through the three replicas in turn while more tasks
/// are sent: every task finished before the paging began is listed exactly
/// once, and no task is listed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_across_replicas_while_tasks_are_added_miss_and_repeat_nothing() {
    let pg = PgCluster::start();
    let url = pg.database("pages");
    let (model, _) = slow_model().await;
    let r = replicas(3, &url, &model.url, "30").await;
    let mut finished = std::collections::BTreeSet::new();
    for i in 0..30 {
        let v = post(
            &r[i % 3].url,
            "message/send",
            json!({"message": {"role": "user", "messageId": uuid(),
                    "parts": [{"kind": "text", "text": "sleep 0"}]},
                   "configuration": {"blocking": true}}),
            None,
        )
        .await;
        assert_eq!(state(&v), "completed", "{v}");
        finished.insert(v["result"]["id"].as_str().expect("id").to_string());
    }
    let urls: Vec<String> = r.iter().map(|p| p.url.clone()).collect();
    let adder = tokio::spawn(async move {
        let mut added = 0;
        for i in 0..40 {
            send(&urls[i % 3], "sleep 30").await;
            added += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        added
    });
    let (mut seen, mut token, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let page = post(
            &r[pages % 3].url,
            "ListTasks",
            json!({"pageSize": 4, "pageToken": token}),
            None,
        )
        .await;
        pages += 1;
        let page = &page["result"];
        let tasks = page["tasks"].as_array().unwrap_or_else(|| panic!("{page}"));
        seen.extend(
            tasks
                .iter()
                .map(|t| t["id"].as_str().unwrap_or_default().to_string()),
        );
        token = page["nextPageToken"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if token.is_empty() {
            break;
        }
        assert!(pages < 100, "the paging ends");
        // Let the adder interleave with the pages.
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let added = adder.await.expect("adder");
    let unique: std::collections::BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "a task listed twice: {seen:?}");
    let missing: Vec<&String> = finished.iter().filter(|id| !unique.contains(*id)).collect();
    assert!(missing.is_empty(), "finished tasks not listed: {missing:?}");
    eprintln!(
        "ListTasks across replicas: {} pages, {} tasks listed ({} finished before, {added} sent meanwhile)",
        pages,
        seen.len(),
        finished.len()
    );
}

/// A GetTask long-poll on replica B returns when the task settles on
/// replica A (told by NOTIFY), long before its wait would end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_on_one_replica_wakes_when_the_task_settles_on_another() {
    let pg = PgCluster::start();
    let url = pg.database("wake");
    let (model, _) = slow_model().await;
    let r = replicas(3, &url, &model.url, "30").await;
    for (a, b) in [(0, 1), (1, 2), (2, 0)] {
        let id = send(&r[a].url, "sleep 800").await;
        let polled = tokio::time::timeout(
            // Well inside the 30 s the long-poll would otherwise wait.
            Duration::from_secs(20),
            post(&r[b].url, "tasks/get", json!({"id": id}), Some(30)),
        )
        .await
        .expect("the long-poll on another replica woke when the task settled");
        assert_eq!(state(&polled), "completed", "{polled}");
        assert_eq!(
            polled["result"]["artifacts"][0]["parts"][0]["text"], "done",
            "{polled}"
        );
    }
}

/// CancelTask on B for tasks running on A: the stored state is canceled
/// and stays so after A's model answers; races of cancels with the answer
/// (at every delay) never leave an answer and the store disagreeing, and
/// leave no task unfinished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_on_another_replica_win_or_lose_cleanly() {
    let pg = PgCluster::start();
    let url = pg.database("cancel");
    let (model, answered) = slow_model().await;
    let r = replicas(3, &url, &model.url, "30").await;

    let id = send(&r[0].url, "sleep 1500").await;
    until_working(&r[0].url, &id).await;
    let canceled = post(&r[1].url, "tasks/cancel", json!({"id": id}), None).await;
    assert_eq!(state(&canceled), "canceled", "{canceled}");
    // The model answers A later: the stored state is still canceled.
    for _ in 0..300 {
        if answered.load(Ordering::SeqCst) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for replica in &r {
        let got = post(&replica.url, "tasks/get", json!({"id": id}), None).await;
        assert_eq!(state(&got), "canceled", "{got}");
    }

    // Races: the cancel lands before, during or after the answer.
    let mut races = Vec::new();
    for k in 0..30u64 {
        let (a, b) = (
            &r[(k % 3) as usize].url,
            r[((k + 1) % 3) as usize].url.clone(),
        );
        let id = send(a, "sleep 300").await;
        races.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(k * 20)).await;
            let answer = post(&b, "tasks/cancel", json!({"id": id}), None).await;
            (id, answer)
        }));
    }
    let (mut won, mut lost) = (0, 0);
    for race in races {
        let (id, answer) = race.await.expect("race");
        // The final state, from a long-poll on a third replica.
        let last = post(&r[2].url, "tasks/get", json!({"id": id}), Some(20)).await;
        let last = state(&last);
        if state(&answer) == "canceled" {
            won += 1;
            assert_eq!(
                last, "canceled",
                "task {id}: a canceled answer was overwritten"
            );
        } else {
            lost += 1;
            assert_eq!(answer["error"]["code"], -32002, "{answer}");
            assert_eq!(last, "completed", "task {id}");
        }
    }
    assert_eq!(won + lost, 30);
    eprintln!("cancel races: {won} canceled, {lost} completed first, 0 overwritten, 0 stuck");
}

/// kill -9 of a replica with tasks working: a survivor fails them as
/// interrupted once their lease runs out; long-polls on the survivors see
/// it, and new requests keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_tasks_are_failed_by_the_survivors_after_the_lease() {
    let pg = PgCluster::start();
    let url = pg.database("failover");
    let (model, _) = slow_model().await;
    let mut r = replicas(3, &url, &model.url, "2").await;
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(send(&r[0].url, "hang").await);
    }
    for id in &ids {
        until_working(&r[0].url, id).await;
    }
    r[0].child.start_kill().expect("kill -9");
    let _ = r[0].child.wait().await;
    let killed = std::time::Instant::now();
    for (i, id) in ids.iter().enumerate() {
        let survivor = &r[1 + i % 2].url;
        let got = tokio::time::timeout(
            Duration::from_secs(25),
            post(survivor, "tasks/get", json!({"id": id}), Some(30)),
        )
        .await
        .expect("settled before the long-poll's wait ended");
        assert_eq!(state(&got), "failed", "{got}");
        let text = got["result"]["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("stopped before this task finished"), "{text}");
    }
    eprintln!(
        "fail-over: 10 tasks of the killed replica settled {} ms after the kill (lease 2 s)",
        killed.elapsed().as_millis()
    );
    let id = send(&r[1].url, "sleep 10").await;
    let done = post(&r[2].url, "tasks/get", json!({"id": id}), Some(20)).await;
    assert_eq!(state(&done), "completed", "{done}");
    let stuck = pg.sql(
        "failover",
        "SELECT count(*) FROM toolnexus_tasks WHERE state IN ('submitted', 'working')",
    );
    assert_eq!(stuck, "0");
}

/// A store error is an error, not a panic: a database that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_a_clear_error() {
    let port = common::free_port();
    let url = format!("postgres://tnx@127.0.0.1:{port}/nothing");
    let e: StoreError = match PgStore::connect(&url).await {
        Ok(_) => panic!("connected to nothing"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("PostgreSQL"), "{e}");
}

/// SubscribeToTask on replica B for a task running on replica A: the task
/// as stored, then the rest of its events from the store, each once, to
/// its terminal state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_on_another_replica_gets_the_rest() {
    let pg = PgCluster::start();
    let url = pg.database("follow");
    let (model, _) = slow_model().await;
    let r = replicas(2, &url, &model.url, "30").await;
    let id = send(&r[0].url, "sleep 1500").await;
    until_working(&r[0].url, &id).await;
    let body =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/resubscribe", "params": {"id": id}});
    let req = HttpRequest::post_json(format!("{}/", r[1].url), body.to_string().into_bytes())
        .with_header("Accept", "text/event-stream");
    let resp = tokio::time::timeout(Duration::from_secs(20), NativeTransport::shared().send(req))
        .await
        .expect("the stream ended with the task")
        .expect("answer");
    let text = String::from_utf8_lossy(&resp.body).to_string();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .map(|v| v["result"].clone())
        .collect();
    assert_eq!(events[0]["kind"], "task", "{text}");
    assert_eq!(events[0]["status"]["state"], "working", "{text}");
    let answers: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .collect();
    assert_eq!(answers.len(), 1, "the answer once: {text}");
    assert_eq!(answers[0]["artifact"]["parts"][0]["text"], "done");
    let last = events.last().expect("events");
    assert_eq!(last["status"]["state"], "completed", "{text}");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "status-update")
            .count(),
        1,
        "one status change after the snapshot: {text}"
    );
    // Logged on A with its saves: working, the answer, completed.
    assert_eq!(
        pg.sql(
            "follow",
            &format!("SELECT count(*) FROM toolnexus_task_events WHERE task_id = '{id}'")
        ),
        "3"
    );
}

/// `--store` takes both URL schemes; the password never shows in `Debug`.
#[test]
fn store_selectors_name_postgres_by_url() {
    use toolnexus_host_native::store::StoreConfig;
    for url in [
        "postgres://u:pw@127.0.0.1:5432/db",
        "postgresql://u:pw@127.0.0.1/db",
    ] {
        let config = StoreConfig::parse(url).expect("a postgres URL");
        let shown = format!("{config:?}");
        assert!(
            shown.starts_with("Postgres(") && !shown.contains("pw"),
            "{shown}"
        );
    }
    let err = StoreConfig::parse("mysql://u@h/db").expect_err("not a store");
    assert!(err.to_string().contains("postgres://"), "{err}");
}

/// A webhook receiver: records (path, task id, state) of each notification.
async fn webhooks() -> (
    ServerHandle,
    Arc<std::sync::Mutex<Vec<(String, String, String)>>>,
) {
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = got.clone();
    let handle = bind(
        "127.0.0.1:0",
        DEFAULT_BODY_LIMIT,
        Arc::new(move |req: HttpRequest| {
            let seen = seen.clone();
            Box::pin(async move {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let path = if req.url.contains("/hook1") {
                    "hook1"
                } else {
                    "hook2"
                };
                seen.lock().unwrap().push((
                    path.to_string(),
                    body["id"].as_str().unwrap_or_default().to_string(),
                    body["status"]["state"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ));
                HttpResponse::json(204, Vec::new())
            })
        }),
    )
    .await
    .expect("bind the webhook receiver");
    (handle, got)
}

async fn set_hook(replica: &str, task: &str, hook: &str, url: &str) {
    let set = post(
        replica,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task, "pushNotificationConfig": {"id": hook, "url": format!("{url}/{hook}")}}),
        None,
    )
    .await;
    assert_eq!(set["result"]["pushNotificationConfig"]["id"], hook, "{set}");
}

/// Push configs are read through the store at each delivery, never cached
/// per replica: a webhook set through replica B is used by replica A's
/// delivery, and one deleted through A gets nothing more from B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_set_or_deleted_on_one_replica_count_on_the_others() {
    let pg = PgCluster::start();
    let url = pg.database("push");
    let (model, _) = slow_model().await;
    let (hooks, got) = webhooks().await;
    let r = replicas_with(2, &url, &model.url, "30", &["--allow-private-webhooks"]).await;
    let delivered = |hook: &str, task: &str, state: &str| {
        got.lock()
            .unwrap()
            .iter()
            .any(|(h, t, s)| h == hook && t == task && s == state)
    };

    // Running on A, its webhook set through B: A delivers the answer to it.
    let on_a = send(&r[0].url, "sleep 1500").await;
    until_working(&r[0].url, &on_a).await;
    set_hook(&r[1].url, &on_a, "hook1", &hooks.url).await;
    let listed = post(
        &r[0].url,
        "tasks/pushNotificationConfig/list",
        json!({"id": on_a}),
        None,
    )
    .await;
    assert_eq!(
        listed["result"][0]["pushNotificationConfig"]["id"], "hook1",
        "{listed}"
    );
    for _ in 0..500 {
        if delivered("hook1", &on_a, "completed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        delivered("hook1", &on_a, "completed"),
        "A never delivered to the webhook set through B: {:?}",
        got.lock().unwrap()
    );

    // Running on B with two webhooks; hook1 deleted through A: B's answer
    // goes to hook2 only (each state goes to the webhooks in order, so
    // hook1 would have had it first).
    let on_b = send(&r[1].url, "sleep 1500").await;
    until_working(&r[1].url, &on_b).await;
    set_hook(&r[0].url, &on_b, "hook1", &hooks.url).await;
    set_hook(&r[1].url, &on_b, "hook2", &hooks.url).await;
    let deleted = post(
        &r[0].url,
        "tasks/pushNotificationConfig/delete",
        json!({"id": on_b, "pushNotificationConfigId": "hook1"}),
        None,
    )
    .await;
    assert!(deleted.get("error").is_none(), "{deleted}");
    let gone = post(
        &r[1].url,
        "tasks/pushNotificationConfig/get",
        json!({"id": on_b, "pushNotificationConfigId": "hook1"}),
        None,
    )
    .await;
    assert!(gone.get("error").is_some(), "B still has it: {gone}");
    for _ in 0..500 {
        if delivered("hook2", &on_b, "completed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        delivered("hook2", &on_b, "completed"),
        "{:?}",
        got.lock().unwrap()
    );
    assert!(
        !delivered("hook1", &on_b, "completed"),
        "B delivered to a webhook deleted through A: {:?}",
        got.lock().unwrap()
    );
    assert_eq!(
        pg.sql("push", "SELECT count(*) FROM toolnexus_push_configs"),
        "2",
        "one row per config"
    );
}

/// The cap of configs per task holds across replicas adding at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_configs_are_rows_and_the_cap_holds_under_racing_puts() {
    let pg = PgCluster::start();
    let store = PgStore::connect(&pg.database("pushcap")).await.expect("pg");
    let other = PgStore::connect(&pg.url("pushcap")).await.expect("pg");
    let any = AnyStore::from(store.clone());
    any.save(&task("t1", 1, TaskState::Working))
        .await
        .expect("t1");
    let puts = (0..30).map(|i| {
        let s = if i % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        async move {
            s.put_push_owned(
                "t1",
                &json!({"id": format!("c{i}"), "url": "https://example.com/h", "owner": "alice"}),
                10,
            )
            .await
            .expect("put")
        }
    });
    let took = futures_util::future::join_all(puts)
        .await
        .into_iter()
        .filter(|p| *p)
        .count();
    assert_eq!(took, 10, "exactly the cap");
    assert_eq!(
        pg.sql(
            "pushcap",
            "SELECT count(*) FROM toolnexus_push_configs WHERE owner = 'alice'"
        ),
        "10"
    );
    // Replacing one that took (same id) is no new one; which ones took is
    // the race's to decide.
    let kept = pg.sql(
        "pushcap",
        "SELECT id FROM toolnexus_push_configs ORDER BY seq LIMIT 1",
    );
    let again = json!({"id": kept, "url": "https://example.com/other"});
    assert_eq!(any.put_push_config("t1", &again, 10).await, Ok(true));
    assert_eq!(any.delete_push_config("t1", &kept).await, Ok(true));
    assert_eq!(any.delete_push_config("t1", &kept).await, Ok(false));
    // A task's configs go with it.
    let mut done = task("t1", 2, TaskState::Completed);
    done.updated_ms = Some(5_000);
    any.save(&done).await.expect("done");
    assert_eq!(any.delete_finished(5_000, 10).await, Ok(0), "not older");
    assert_eq!(any.delete_finished(5_001, 10).await, Ok(1));
    assert_eq!(any.get("t1").await, Ok(None));
    assert_eq!(
        pg.sql("pushcap", "SELECT count(*) FROM toolnexus_push_configs"),
        "0"
    );
}

/// Retention over real PostgreSQL: only finished tasks older than the
/// cut are deleted; running and recent ones stay; each goes once even
/// with two replicas sweeping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_only_old_finished_tasks() {
    let pg = PgCluster::start();
    let a = AnyStore::from(PgStore::connect(&pg.database("keep")).await.expect("pg"));
    let b = AnyStore::from(PgStore::connect(&pg.url("keep")).await.expect("pg"));
    for i in 0..20u64 {
        let state = match i % 4 {
            0 => TaskState::Completed,
            1 => TaskState::Failed,
            2 => TaskState::Working,
            _ => TaskState::InputRequired,
        };
        let mut t = task(&format!("t{i}"), 1, state);
        t.updated_ms = Some(if i < 10 { 1_000 } else { 9_000 });
        a.save(&t).await.expect("save");
    }
    let (x, y) = tokio::join!(a.delete_finished(5_000, 100), b.delete_finished(5_000, 100));
    assert_eq!(
        x.expect("a") + y.expect("b"),
        6,
        "the old finished ones, once"
    );
    let left = pg.sql(
        "keep",
        "SELECT string_agg(id, ',' ORDER BY id) FROM toolnexus_tasks WHERE updated_ms < 5000",
    );
    assert_eq!(left, "t2,t3,t6,t7", "running and waiting tasks stay");
    assert_eq!(
        pg.sql(
            "keep",
            "SELECT count(*) FROM toolnexus_tasks WHERE updated_ms >= 5000"
        ),
        "10"
    );
}

/// `--store` with a URL that is not one says so, and never that the
/// database cannot be reached.
#[test]
fn an_invalid_postgres_url_is_called_invalid() {
    let out = std::process::Command::new(toolnexus_bin())
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--store",
            "postgres://%%%",
        ])
        .output()
        .expect("run toolnexus");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("invalid PostgreSQL URL"), "{err}");
    assert!(!err.contains("cannot connect"), "{err}");
}

/// A SendMessage's whole answer (a result or an error).
async fn try_send(url: &str, text: &str) -> Value {
    post(
        url,
        "message/send",
        json!({"message": {"role": "user", "messageId": uuid(), "parts": [{"kind": "text", "text": text}]},
               "configuration": {"blocking": false}}),
        None,
    )
    .await
}

async fn healthz(url: &str) -> u16 {
    let req = HttpRequest {
        method: "GET".into(),
        url: format!("{url}/healthz"),
        headers: Vec::new(),
        body: Vec::new(),
    };
    NativeTransport::shared()
        .send(req)
        .await
        .map(|r| r.status)
        .unwrap_or(0)
}

/// The database restarts while requests flow: sends during the outage get
/// an error and no task id (never acknowledged), `/healthz` says 503; once
/// it is back, service resumes by itself (no replica restarted), and every
/// task acknowledged before, during (none) or after the outage is stored
/// and settles: nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_load_loses_nothing_acknowledged() {
    let mut pg = PgCluster::start();
    let url = pg.database("restart");
    let (model, _) = slow_model().await;
    let r = replicas(2, &url, &model.url, "30").await;
    let mut acked = Vec::new();
    for i in 0..10 {
        // Half still running when the database goes: their outcome is saved
        // after it is back (the terminal save is retried).
        let text = if i % 2 == 0 { "sleep 10" } else { "sleep 1500" };
        acked.push(send(&r[i % 2].url, text).await);
    }
    for replica in &r {
        assert_eq!(healthz(&replica.url).await, 200);
    }
    tokio::task::block_in_place(|| pg.stop());
    let down = std::time::Instant::now();
    let mut refused = 0;
    for i in 0..8 {
        let v = try_send(&r[i % 2].url, "sleep 10").await;
        assert!(
            v["result"].is_null() && v["error"]["code"].is_i64(),
            "acknowledged while the database is down: {v}"
        );
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("could not be stored"), "{message}");
        refused += 1;
        let got = post(&r[i % 2].url, "tasks/get", json!({"id": acked[0]}), None).await;
        assert!(got["error"]["code"].is_i64(), "read while down: {got}");
    }
    for replica in &r {
        assert_eq!(
            healthz(&replica.url).await,
            503,
            "unhealthy while saves fail"
        );
    }
    tokio::task::block_in_place(|| pg.restart());
    let restarted = std::time::Instant::now();
    // Service resumes by itself: each replica acknowledges again (bounded).
    for replica in &r {
        let mut id = None;
        for _ in 0..300 {
            let v = try_send(&replica.url, "sleep 10").await;
            if let Some(got) = v["result"]["id"].as_str() {
                id = Some(got.to_string());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        acked.push(id.expect("the replica never acknowledged again after the restart"));
        assert_eq!(healthz(&replica.url).await, 200, "healthy again");
    }
    let resumed = restarted.elapsed();
    // Nothing acknowledged is lost: each is stored and settles.
    for (i, id) in acked.iter().enumerate() {
        let got = post(&r[i % 2].url, "tasks/get", json!({"id": id}), Some(30)).await;
        assert_eq!(state(&got), "completed", "task {id}: {got}");
    }
    let stored = pg.sql(
        "restart",
        "SELECT count(*) FROM toolnexus_tasks WHERE state = 'completed'",
    );
    assert_eq!(
        stored,
        acked.len().to_string(),
        "exactly the acknowledged tasks"
    );
    eprintln!(
        "database restart: {refused} sends refused during the outage ({} ms), \
         service back {} ms after the restart, {} acknowledged tasks all completed",
        restarted.duration_since(down).as_millis(),
        resumed.as_millis(),
        acked.len()
    );
}

/// The acceptance "stream then resubscribe": the official Python and JS
/// SDK clients stream a slow task from replica A, drop the connection after
/// the first two events (the task, `working`), and SubscribeToTask on
/// replica B (its own card). B sends the task as stored, then the rest from
/// the event log: the answer once and the terminal state, none missing and
/// none told twice across the two connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_clients_stream_from_one_replica_and_resubscribe_on_another() {
    use common::sdk::{official_client, Sdk};
    let pg = PgCluster::start();
    let url = pg.database("resub");
    let (model, _) = slow_model().await;
    let r = replicas(3, &url, &model.url, "30").await;
    let card = |i: usize| format!("{}/.well-known/agent-card.json", r[i].url);
    for (sdk, a, b) in [(Sdk::Python, 0, 1), (Sdk::Js, 1, 2)] {
        let (code, out, stderr) = official_client(
            sdk,
            &card(a),
            "sleep 1500",
            &["--stream", "--drop-after", "2", "--resubscribe", &card(b)],
        )
        .await;
        assert_eq!(code, 0, "{sdk:?}: {out} {stderr}");
        assert_eq!(out["state"], "completed", "{sdk:?}: {out}");
        assert_eq!(out["text"], "done", "{sdk:?}: the answer once: {out}");
        let events = out["events"].as_array().expect("events");
        let kinds: Vec<String> = events
            .iter()
            .map(|e| match e["kind"].as_str().unwrap_or_default() {
                "artifact-update" => format!("artifact:{}", e["text"].as_str().unwrap_or("")),
                kind => match e["state"].as_str() {
                    Some(state) => format!("{kind}:{state}"),
                    None => kind.to_string(),
                },
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "task:submitted",
                "status-update:working",
                "dropped",
                "task:working",
                "artifact:done",
                "status-update:completed"
            ],
            "{sdk:?}: A told the start, B the snapshot then the rest, in order: {out}"
        );
    }
}
