//! `toolnexus demo`: both halves of the library meet on this machine, offline.

use super::remote::print_json;
use super::Fail;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use toolnexus_core::server::A2aConfig;
use toolnexus_core::skills::SkillSet;
use toolnexus_core::{AgentCard, HttpRequest, Part, StreamEvent, Task, Transport};
use toolnexus_host_native::{agent_tools, serve, Agent, Model, NativeTransport, ServeOptions};

/// The example skills, built into the binary so the demo runs from anywhere.
const SKILLS: [(&str, &str); 2] = [
    (
        "examples/skills/hello-world/SKILL.md",
        include_str!("../../../examples/skills/hello-world/SKILL.md"),
    ),
    (
        "examples/skills/summarize/SKILL.md",
        include_str!("../../../examples/skills/summarize/SKILL.md"),
    ),
];

const TASK: &str = "Hello! I am trying the toolnexus demo.";

pub async fn run() -> Result<i32, Fail> {
    let fail = |what: &str, e: String| Fail(1, format!("demo: {what}: {e}"));
    let skills = SkillSet::from_files(SKILLS.iter().map(|(p, t)| (p.to_string(), t.to_string())));
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared())
        .with_token_cells(|_| toolnexus_host_native::token_cell());
    tk.add_skills(skills);

    let started = Instant::now();
    let mut options = ServeOptions::new(Arc::new(tk), Model::Echo);
    options.a2a = Some(A2aConfig {
        name: Some("toolnexus-demo".into()),
        description: Some("Two example skills, answered offline by the echo model.".into()),
        ..Default::default()
    });
    options.on_state = Some(Arc::new(move |t: &Task| {
        println!(
            "  +{:>4} ms  server saved the task as {:<10} {}",
            started.elapsed().as_millis(),
            t.state.as_str(),
            t.id
        );
    }));
    let handle = serve("127.0.0.1:0", options)
        .await
        .map_err(|e| fail("cannot start the agent", e.to_string()))?;
    println!("toolnexus demo: an A2A agent and its caller on this machine, offline.");
    println!(
        "Serving the example skills at {} with the echo model (it answers with the task's text).\n",
        handle.url
    );

    let card_url = format!("{}/.well-known/agent-card.json", handle.url);
    println!("== The Agent Card (GET {card_url})");
    let resp = NativeTransport::shared()
        .send(HttpRequest::get(&card_url))
        .await
        .map_err(|e| fail("cannot fetch the card", e.to_string()))?;
    let card: serde_json::Value = serde_json::from_slice(&resp.body)
        .map_err(|e| fail("the card is not JSON", e.to_string()))?;
    print_json(&card);

    println!("\n== Its skills as tools (agentTools)");
    let tools = agent_tools(&Agent::new(&card_url))
        .await
        .map_err(|e| fail("agentTools failed", e.to_string()))?;
    for t in &tools {
        println!("  {:<28} {}", t.spec().name, t.spec().description);
    }
    let tool = tools
        .iter()
        .find(|t| t.skill() == "hello-world")
        .ok_or_else(|| fail("no hello-world tool", String::new()))?;

    let how = AgentCard::from_value(&card)
        .map(|c| match c.summary(&card_url).follow {
            "stream" => "SendStreamingMessage and reads the task's events as they come",
            "block" => "a blocking SendMessage",
            _ => "SendMessage, then polls GetTask",
        })
        .unwrap_or("SendMessage");
    println!("\n== Calling {} with {TASK:?}", tool.spec().name);
    println!(
        "  +{:>4} ms  client sends {how}",
        started.elapsed().as_millis()
    );
    let result = tool
        .execute_with_events(&json!({"task": TASK}), std::future::pending(), |e| {
            println!(
                "  +{:>4} ms  client got {}",
                started.elapsed().as_millis(),
                describe(&e)
            );
        })
        .await;
    println!(
        "  +{:>4} ms  client has the result",
        started.elapsed().as_millis()
    );

    println!("\n== The result");
    print_json(&json!(result));
    handle.stop().await;
    Ok(if result.is_error { 2 } else { 0 })
}

/// One event, in a line.
fn describe(event: &StreamEvent) -> String {
    let cut = |text: String| match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    };
    match event {
        StreamEvent::Task(t) => format!("the task, {}", t.state.as_str()),
        StreamEvent::Status(s) => match &s.message {
            Some(m) => format!("a status update, {}: {}", s.state.as_str(), cut(m.text())),
            None => format!("a status update, {}", s.state.as_str()),
        },
        StreamEvent::Artifact(a) => {
            let parts: Vec<String> = a.artifact.parts.iter().map(Part::describe).collect();
            format!("an artifact chunk: {:?}", cut(parts.join("\n")))
        }
        StreamEvent::Message(m) => format!("a message: {:?}", cut(m.text())),
    }
}
