//! How long after a task settles at the peer the caller has its result.
//!
//! `cargo bench -p toolnexus-host-native --bench latency`
//!
//! A local `serve` whose fulfiller sleeps for the number of ms in the task
//! text; the native client (default settings: pollEvery 1000 ms) calls it
//! (a) as it is, with the card's long-poll extension, and (b) with long-poll
//! off, which is how it polls any peer without the extension (the official
//! SDK servers). lag = time to result − task duration.

use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use toolnexus_core::server::{FulfilRequest, Fulfiller, Progress};
use toolnexus_core::skills::{Skill, SkillSet};
use toolnexus_core::transport::BoxFuture;
use toolnexus_host_native::{serve, Agent, Model, NativeTransport, ServeOptions};

struct SleepsForText;

impl Fulfiller for SleepsForText {
    fn fulfil(&self, r: FulfilRequest, _: Progress) -> BoxFuture<'static, Result<String, String>> {
        let ms: u64 = r.text.parse().unwrap_or(0);
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Ok(format!("slept {ms}"))
        })
    }
}

#[tokio::main]
async fn main() {
    let mut skills = SkillSet::new();
    skills.add(Skill {
        name: "sleep".into(),
        description: "sleeps".into(),
        content: String::new(),
    });
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    tk.add_skills(skills);
    let handle = serve(
        "127.0.0.1:0",
        ServeOptions::new(Arc::new(tk), Model::Custom(Arc::new(SleepsForText))),
    )
    .await
    .expect("serve");
    let card = format!("{}/.well-known/agent-card.json", handle.url);
    let transport = NativeTransport::shared();
    let tools = toolnexus_core::agent_tools(&transport, &Agent::new(&card))
        .await
        .expect("tools");
    let with_long_poll = tools[0].clone();
    let mut plain = tools[0].clone();
    plain.long_poll = false;

    println!("lag after the task settles, default settings (pollEvery 1000 ms), 5 calls each");
    println!(
        "{:>10}  {:>22}  {:>22}",
        "task ms", "long-poll: median/max", "polling: median/max"
    );
    for duration in [0u64, 100, 500, 2_000, 5_000] {
        let mut row = Vec::new();
        for tool in [&with_long_poll, &plain] {
            let mut lags = Vec::new();
            for _ in 0..5 {
                let started = Instant::now();
                let r = tool
                    .execute(
                        &transport,
                        &json!({"task": duration.to_string()}),
                        std::future::pending(),
                    )
                    .await;
                assert!(!r.is_error, "{}", r.output);
                lags.push(started.elapsed().as_millis() as i64 - duration as i64);
            }
            lags.sort();
            row.push(format!("{} / {} ms", lags[2], lags[4]));
        }
        println!("{duration:>10}  {:>22}  {:>22}", row[0], row[1]);
    }
    handle.stop().await;
}
