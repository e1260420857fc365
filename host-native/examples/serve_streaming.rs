//! Serve a skill as an A2A agent with your own fulfiller, which streams: a
//! working status, then the answer in chunks. Callers that stream (the
//! official SDK clients, `toolnexus call --events`) see each step as it
//! happens; the stored task ends with one artifact holding every chunk.
//!
//! ```sh
//! cargo run -p toolnexus-host-native --example serve_streaming
//! # in another shell, with the printed card URL:
//! toolnexus call --events http://127.0.0.1:PORT/.well-known/agent-card.json countdown "3"
//! ```

use std::sync::Arc;
use std::time::Duration;
use toolnexus_core::server::{A2aConfig, FulfilRequest, Fulfiller, Progress};
use toolnexus_core::skills::{Skill, SkillSet};
use toolnexus_core::BoxFuture;
use toolnexus_host_native::{serve, Model, NativeTransport, ServeOptions};

/// Counts down from the number in the task, one chunk a second.
struct Countdown;

impl Fulfiller for Countdown {
    fn fulfil(
        &self,
        request: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(async move {
            let Ok(from) = request.text.trim().parse::<u32>() else {
                // An error fails the task, with this text as its status message.
                return Err(format!("not a number: {:?}", request.text));
            };
            progress.status(format!("counting down from {from}"));
            for n in (1..=from.min(60)).rev() {
                progress.artifact_chunk(format!("{n}…"), false);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            // The final text becomes the last chunk of the answer.
            Ok("liftoff".into())
        })
    }
}

#[tokio::main]
async fn main() {
    let mut skills = SkillSet::new();
    skills.add(Skill {
        name: "countdown".into(),
        description: "Counts down from a number, one step a second".into(),
        content: String::new(),
    });
    let mut toolkit = toolnexus_core::Toolkit::new(NativeTransport::shared());
    toolkit.add_skills(skills);
    let mut options = ServeOptions::new(Arc::new(toolkit), Model::Custom(Arc::new(Countdown)));
    options.a2a = Some(A2aConfig {
        name: Some("countdown".into()),
        ..Default::default()
    });
    let handle = match serve("127.0.0.1:0", options).await {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("cannot serve: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "Agent Card at {}/.well-known/agent-card.json (Ctrl-C stops)",
        handle.url
    );
    let _ = tokio::signal::ctrl_c().await;
    handle.stop().await;
}
