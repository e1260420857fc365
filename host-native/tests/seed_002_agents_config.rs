//! Seed 002 (A2A.parseAgentsConfig, Java). Examples 1 and 2 are pure and live
//! in core's unit tests (config.rs); example 3 needs a peer and a toolkit.

mod common;

use common::{text_task, Stub};
use serde_json::json;
use toolnexus_core::parse_agents_config;
use toolnexus_host_native::toolkit;

/// Example 3: headers/timeout/pollEvery parsed, then the same block under a
/// top-level `agents` key wired into a toolkit and executed.
#[tokio::test]
async fn config_block_parsed_and_wired_into_a_toolkit() {
    let peer = Stub::a2a(
        json!({"name": "planner", "skills": [{"id": "plan", "description": "Plan"}]}),
        |_, _| text_task("t1", "completed", Some("planned")),
    )
    .await;
    let block = json!({"planner": {"card": peer.card_url(), "timeout": 5000, "pollEvery": 10,
                                   "headers": {"X-Trace": "abc"}}});
    let parsed = parse_agents_config(&block);
    assert_eq!(
        parsed[0].timeout,
        Some(std::time::Duration::from_millis(5000))
    );
    assert_eq!(
        parsed[0].headers,
        vec![("X-Trace".to_string(), "abc".to_string())]
    );

    let config = json!({"agents": block});
    let tk = toolkit(&[], Some(&config)).await;
    let r = tk.execute("planner_plan", json!({"task": "ship it"})).await;
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(r.output, "planned");
    peer.handle.stop().await;
}
