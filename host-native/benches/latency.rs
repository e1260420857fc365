//! How long after a task settles at the peer the caller has its result.
//!
//! `cargo bench -p toolnexus-host-native --bench latency`
//!
//! A local `serve` whose fulfiller sleeps for the number of ms in the task
//! text; the native client (default settings: pollEvery 1000 ms) calls it
//! (a) as it is: the card streams, so the call follows the SSE events;
//! (b) with streaming off: one blocking SendMessage; (c) in the toolnexus
//! dialect: a non-blocking send, then GetTask long-polls (the card's
//! extension); (d) the same without long-poll: interval polling, as for a
//! toolnexus-reference peer. Then the official SDK servers
//! (`sdk_peers.rs`): per-call latency beside their own clients, and the lag.
//! lag = time to result − task duration.
//!
//! `cargo bench -p toolnexus-host-native --bench latency -- [serve] [calls] [lag]`
//! runs only those parts (default: all three); `TOOLNEXUS_BENCH_SAMPLES=1`
//! prints every lag sample of the SDK servers on stderr (epoch ms of the
//! peer's settled timestamp and of the result); `TOOLNEXUS_BENCH_BIN=PATH`
//! measures another `toolnexus` binary.

#[path = "sdk_peers.rs"]
mod sdk_peers;

use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use toolnexus_core::server::{FulfilRequest, Fulfiller, Progress};
use toolnexus_core::skills::{Skill, SkillSet};
use toolnexus_core::BoxFuture;
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

fn main() {
    if sdk_peers::one_shot_floor() {
        return;
    }
    tokio::runtime::Runtime::new()
        .expect("a tokio runtime")
        .block_on(async {
            let parts: Vec<String> = std::env::args()
                .skip(1)
                .filter(|a| !a.starts_with('-'))
                .collect();
            let wants = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
            if wants("serve") {
                local_serve().await;
            }
            if wants("calls") || wants("lag") {
                sdk_peers::run(wants("calls"), wants("lag")).await;
            }
        });
}

/// A local `serve`: the lag by how the call follows the task.
async fn local_serve() {
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
    // The served card streams and lists the long-poll extension; switch each
    // off to see how a peer without them is followed.
    let streamed = tools[0].clone();
    let mut blocking = tools[0].clone();
    blocking.streaming = false;
    let mut with_long_poll = blocking.clone();
    with_long_poll.dialect = toolnexus_core::Dialect::Toolnexus;
    let mut plain = with_long_poll.clone();
    plain.long_poll = false;

    println!("toolnexus serve: lag after the task settles (median / max of 5 calls), by how the call follows it");
    println!(
        "{:>10}  {:>20}  {:>20}  {:>20}  {:>20}",
        "task ms", "stream", "blocking send", "long-poll", "polling"
    );
    for duration in [0u64, 100, 500, 2_000, 5_000] {
        let mut row = Vec::new();
        for tool in [&streamed, &blocking, &with_long_poll, &plain] {
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
        println!(
            "{duration:>10}  {:>20}  {:>20}  {:>20}  {:>20}",
            row[0], row[1], row[2], row[3]
        );
    }
    handle.stop().await;
}
