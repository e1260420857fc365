//! Seed 000 (A2A.agentTools, Java), each example against a real HTTP peer.

mod common;

use common::{text_task, Stub};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use toolnexus_host_native::{agent_tools, Agent};

/// Example 1: the smallest useful call — one skill, one tool.
#[tokio::test]
async fn one_skill_one_tool() {
    let peer = Stub::a2a(
        json!({"name": "reviewer", "skills": [{"id": "review", "description": "Review some code"}]}),
        |_, _| json!(null),
    )
    .await;
    let tools = agent_tools(&Agent::new(peer.card_url()))
        .await
        .expect("tools");
    assert_eq!(tools.len(), 1);
    let review = tools[0].spec();
    assert_eq!(review.name, "reviewer_review");
    assert_eq!(review.source, "a2a");
    assert_eq!(review.description, "Review some code");
    assert_eq!(review.input_schema["required"], json!(["task"]));
    assert_eq!(review.input_schema["properties"]["task"]["type"], "string");
    peer.handle.stop().await;
}

/// Example 2: a full submit→poll round trip; completed on the second poll.
#[tokio::test]
async fn submit_then_poll_until_completed() {
    let polls = Arc::new(AtomicUsize::new(0));
    let counter = polls.clone();
    let peer = Stub::a2a(
        json!({"name": "planner", "skills": [{"id": "plan", "description": "Plan a task"}]}),
        move |method, _| {
            if method == "SendMessage" {
                return text_task("t1", "working", None);
            }
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            if n < 2 {
                text_task("t1", "working", None)
            } else {
                text_task("t1", "completed", Some("3 steps planned"))
            }
        },
    )
    .await;
    let agent = Agent::new(peer.card_url())
        .with_timeout(std::time::Duration::from_millis(5_000))
        .with_poll_every(std::time::Duration::from_millis(10));
    let tools = agent_tools(&agent).await.expect("tools");
    let r = tools[0].execute(&json!({"task": "ship the release"})).await;
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(r.output, "3 steps planned");
    assert!(
        polls.load(Ordering::SeqCst) >= 2,
        "expected at least 2 polls"
    );
    let meta = r.metadata.expect("metadata");
    assert_eq!(meta["state"], "completed");
    assert_eq!(meta["agent"], "planner");
    assert_eq!(meta["taskId"], "t1");
    assert!(meta["polls"].as_u64().expect("polls") >= 2);
    assert!(meta["ms"].is_u64());
    peer.handle.stop().await;
}

/// Example 3: two skills give two tools, and a failed task is isError with
/// the remote's own status message.
#[tokio::test]
async fn two_skills_and_a_failed_task() {
    let peer = Stub::a2a(
        json!({"name": "reviewer", "skills": [
            {"id": "review", "description": "Review some code"},
            {"id": "fail", "description": "Always fails"}]}),
        |method, _| {
            if method == "SendMessage" {
                json!({"id": "t1", "status": {"state": "submitted"}})
            } else {
                json!({"id": "t1", "status": {"state": "failed", "message":
                    {"role": "agent", "parts": [{"kind": "text", "text": "diff would not apply"}]}}})
            }
        },
    )
    .await;
    let agent = Agent::new(peer.card_url())
        .with_timeout(std::time::Duration::from_millis(5_000))
        .with_poll_every(std::time::Duration::from_millis(5));
    let tools = agent_tools(&agent).await.expect("tools");
    assert_eq!(tools.len(), 2);
    let fail = tools
        .iter()
        .find(|t| t.spec().name == "reviewer_fail")
        .expect("reviewer_fail");
    let r = fail.execute(&json!({"task": "please fail"})).await;
    assert!(r.is_error);
    assert!(r.output.contains("diff would not apply"), "{}", r.output);
    assert_eq!(r.metadata.expect("metadata")["state"], "failed");
    peer.handle.stop().await;
}
