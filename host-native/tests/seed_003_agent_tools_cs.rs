//! Seed 003 (A2A.AgentTools, C#), the outbound half: each example against a
//! real HTTP peer that answers like a served toolnexus agent (card from the
//! server's URL, SendMessage then GetTask). The serving half lives with the
//! server tests.

mod common;

use common::Stub;
use serde_json::json;
use toolnexus_host_native::{agent_tools, Agent};

/// A toolnexus-dialect agent: `{name, url, skills}` card; tasks complete with
/// `answer` on the first poll.
async fn served(name: &str, skills: &[(&str, &str)], answer: &'static str) -> Stub {
    let skills: Vec<_> = skills
        .iter()
        .map(|(n, d)| json!({"id": n, "name": n, "description": d}))
        .collect();
    let name = name.to_string();
    let card = std::sync::Arc::new(std::sync::Mutex::new(json!(null)));
    let card_for_handler = card.clone();
    let stub = Stub::start(move |req| {
        if req.url == common::CARD_PATH {
            let card = card_for_handler.lock().expect("card").clone();
            return common::json_response(200, &card);
        }
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = match body["method"].as_str() {
            Some("SendMessage") => json!({"id": "t1", "contextId": "c1", "status": {"state": "submitted"}}),
            _ => json!({"id": "t1", "contextId": "c1", "status": {"state": "completed"},
                        "artifacts": [{"artifactId": "a1", "parts": [{"kind": "text", "text": answer}]}]}),
        };
        common::json_response(200, &json!({"jsonrpc": "2.0", "id": body["id"], "result": result}))
    })
    .await;
    *card.lock().expect("card") = json!({"name": name, "description": "", "version": "0.1.0",
        "protocolVersion": "0.3.0", "url": format!("{}/", stub.url()), "skills": skills});
    stub
}

/// Example 1: list a peer's tools.
#[tokio::test]
async fn list_a_peers_tools() {
    let peer = served("desk", &[("greet", "says hello")], "ok").await;
    let tools = agent_tools(&Agent::new(peer.card_url()))
        .await
        .expect("tools");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].spec().name, "desk_greet");
    assert_eq!(tools[0].spec().source, "a2a");
    assert!(tools[0].spec().input_schema["properties"]
        .get("task")
        .is_some());
    peer.handle.stop().await;
}

/// Example 2: execute the resolved tool (SendMessage + poll GetTask).
#[tokio::test]
async fn execute_the_resolved_tool() {
    let peer = served("oracle", &[("answer", "answers questions")], "42").await;
    let agent = Agent::new(peer.card_url()).with_poll_every(std::time::Duration::from_millis(25));
    let tools = agent_tools(&agent).await.expect("tools");
    let tool = tools
        .iter()
        .find(|t| t.spec().name == "oracle_answer")
        .expect("oracle_answer");
    let r = tool.execute(&json!({"task": "what is the answer?"})).await;
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(r.output, "42");
    let meta = r.metadata.expect("metadata");
    assert_eq!(meta["agent"], "oracle");
    assert_eq!(meta["state"], "completed");
    assert!(meta["polls"].as_u64().is_some());
    peer.handle.stop().await;
}

/// Example 3: multiple skills, and a bad card throws when called directly.
#[tokio::test]
async fn multiple_skills_and_a_bad_card_throws() {
    let peer = served(
        "desk",
        &[("greet", "says hello"), ("farewell", "says goodbye")],
        "ok",
    )
    .await;
    let tools = agent_tools(&Agent::new(peer.card_url()))
        .await
        .expect("tools");
    let mut names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["desk_farewell", "desk_greet"]);
    peer.handle.stop().await;

    let err = agent_tools(&Agent::new(
        "http://127.0.0.1:1/.well-known/agent-card.json",
    ))
    .await;
    assert!(
        err.is_err(),
        "a direct call on an unreachable card must fail"
    );
}
