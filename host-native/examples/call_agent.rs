//! Call a remote A2A agent's skill as a tool, printing its events as they
//! happen (stream events from a peer that streams, else the task as the
//! blocking answer or each poll shows it), then the result.
//!
//! ```sh
//! cargo run -p toolnexus-host-native --example call_agent -- \
//!     http://127.0.0.1:8080/.well-known/agent-card.json hello-world "Say hi"
//! ```

use serde_json::json;
use toolnexus_core::Shape;
use toolnexus_host_native::{agent_tools, Agent};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(card), Some(skill), Some(task)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: call_agent CARD_URL SKILL TASK");
        std::process::exit(1);
    };
    let tools = match agent_tools(&Agent::new(&card)).await {
        Ok(tools) => tools,
        Err(e) => {
            eprintln!("cannot resolve {card}: {e}");
            std::process::exit(1);
        }
    };
    let Some(tool) = tools
        .iter()
        .find(|t| t.skill() == skill || t.spec().name == skill)
    else {
        eprintln!("the agent has no skill {skill:?}");
        std::process::exit(1);
    };
    let result = tool
        .execute_with_events(&json!({ "task": task }), std::future::pending(), |event| {
            // The A2A 0.3 shape: {"kind": "status-update", "status": {"state": "working"}, …}
            let line = serde_json::to_string(&event.shaped(Shape::V03)).unwrap_or_default();
            println!("event  {line}");
        })
        .await;
    println!("result {}", json!(result));
}
