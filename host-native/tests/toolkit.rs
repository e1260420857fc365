//! The native toolkit: concurrent resolution, per-peer isolation, first name
//! wins, unknown tools, adding an agent at run time.

mod common;

use common::{text_task, Stub};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolnexus_host_native::{toolkit, Agent};

const DEAD_CARD: &str = "http://127.0.0.1:1/.well-known/agent-card.json";

async fn answering(name: &str, answer: &'static str) -> Stub {
    Stub::a2a(
        json!({"name": name, "skills": [{"id": "plan", "description": "Plan"}]}),
        move |_, _| text_task("t1", "completed", Some(answer)),
    )
    .await
}

#[tokio::test]
async fn a_failing_peer_is_isolated_and_the_others_still_work() {
    let good = answering("planner", "planned").await;
    let tk = toolkit(&[Agent::new(DEAD_CARD), Agent::new(good.card_url())], None).await;
    let names: Vec<String> = tk.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["planner_plan"]);
    assert_eq!(tk.failures().len(), 1);
    assert_eq!(tk.failures()[0].card, DEAD_CARD);
    assert_eq!(tk.failures()[0].error.kind(), "transport");
    let r = tk.execute("planner_plan", json!({"task": "x"})).await;
    assert_eq!((r.output.as_str(), r.is_error), ("planned", false));
    good.handle.stop().await;
}

#[tokio::test]
async fn the_first_tool_of_a_name_wins() {
    let first = answering("planner", "from the first").await;
    let second = answering("planner", "from the second").await;
    let tk = toolkit(
        &[Agent::new(first.card_url()), Agent::new(second.card_url())],
        None,
    )
    .await;
    assert_eq!(tk.tools().len(), 1);
    let r = tk.execute("planner_plan", json!({"task": "x"})).await;
    assert_eq!(r.output, "from the first");
    first.handle.stop().await;
    second.handle.stop().await;
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_are_error_results() {
    let good = answering("planner", "planned").await;
    let tk = toolkit(&[Agent::new(good.card_url())], None).await;
    let r = tk.execute("nope", json!({"task": "x"})).await;
    assert_eq!(
        (r.output.as_str(), r.is_error),
        ("Unknown tool: nope", true)
    );
    let r = tk.execute("planner_plan", json!({"task": 5})).await;
    assert!(r.is_error && r.output.contains("\"task\""), "{}", r.output);
    good.handle.stop().await;
}

#[tokio::test]
async fn add_agent_at_run_time() {
    let good = answering("planner", "planned").await;
    let mut tk = toolkit(&[], None).await;
    assert!(tk.tools().is_empty());
    let added = tk
        .add_agent(Agent::new(good.card_url()))
        .await
        .expect("added");
    assert_eq!(added, ["planner_plan"]);
    assert!(tk.add_agent(Agent::new(DEAD_CARD)).await.is_err());
    assert_eq!(tk.tools().len(), 1);
    assert_eq!(tk.to_openai()[0]["function"]["name"], "planner_plan");
    assert_eq!(tk.to_anthropic()[0]["name"], "planner_plan");
    assert_eq!(tk.to_gemini()[0]["name"], "planner_plan");
    good.handle.stop().await;
}

/// Each card handler waits (bounded) until both card requests have arrived:
/// only a concurrent resolution lets both see the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_resolve_concurrently() {
    let arrived = Arc::new(AtomicUsize::new(0));
    let saw_both = Arc::new(AtomicUsize::new(0));
    let mut peers = Vec::new();
    for name in ["a", "b"] {
        let (arrived, saw_both) = (arrived.clone(), saw_both.clone());
        peers.push(
            Stub::start(move |_| {
                arrived.fetch_add(1, Ordering::SeqCst);
                let until = Instant::now() + Duration::from_secs(3);
                // The handler runs on one of the runtime's workers: waiting
                // in place hands that worker's queued tasks to another
                // thread, so the toolkit's second fetch is not stuck behind
                // this wait (a task in a worker's LIFO slot cannot be stolen).
                tokio::task::block_in_place(|| {
                    while arrived.load(Ordering::SeqCst) < 2 && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                });
                if arrived.load(Ordering::SeqCst) >= 2 {
                    saw_both.fetch_add(1, Ordering::SeqCst);
                }
                common::json_response(200, &json!({"name": name, "skills": [{"id": "s"}]}))
            })
            .await,
        );
    }
    let agents: Vec<Agent> = peers.iter().map(|p| Agent::new(p.card_url())).collect();
    let tk = toolkit(&agents, None).await;
    assert_eq!(tk.tools().len(), 2);
    assert_eq!(
        saw_both.load(Ordering::SeqCst),
        2,
        "the two card fetches overlapped"
    );
    for p in peers {
        p.handle.stop().await;
    }
}
