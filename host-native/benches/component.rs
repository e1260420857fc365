//! The component's costs, printed (a benchmark, not a test):
//! - instantiating the library component from its `InstancePre`, per call;
//! - one quick `call` (the echo agent of a native `serve`, keep-alive
//!   loopback) through the component vs natively, p50 and mean.
//!
//! ```text
//! cargo bench -p toolnexus-host-native --features component --profile component-bench --bench component [-- ROUNDS]
//! ```
//!
//! (`host-native/benches/component.sh` runs it with the sizes and GetTask
//! throughput.) Needs `bash wasm/component/build.sh`.

use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolnexus_host_native::component_host::ComponentHost;
use toolnexus_host_native::{agent_tools, serve, Agent, Model, NativeTransport, ServeOptions};

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let p50 = samples[samples.len() / 2];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "  {name:<34} p50 {:>8.3} ms   mean {:>8.3} ms   ({} runs)",
        p50.as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3,
        samples.len()
    );
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50);
    let wasm = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wasm/component/dist/toolnexus-a2a.wasm");
    let started = Instant::now();
    let host = ComponentHost::load(&wasm).expect("run bash wasm/component/build.sh first");
    println!(
        "component: load + link (compiled, or from wasmtime's cache) {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    host.instantiate().await.expect("instantiate");
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        host.instantiate().await.expect("instantiate");
        samples.push(t.elapsed());
    }
    summary("instantiate (InstancePre)", samples);

    // An agent with skills (the examples), so it has tools to call.
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    let skills = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/skills");
    tk.add_skills(toolnexus_host_native::skills_dir::load_skill_dirs(&[skills]).expect("skills"));
    let peer = serve("127.0.0.1:0", ServeOptions::new(Arc::new(tk), Model::Echo))
        .await
        .expect("serve");
    let agent = Agent::new(format!("{}/.well-known/agent-card.json", peer.url));
    let tools = agent_tools(&agent).await.expect("tools");
    let tool = &tools[0];
    let name = tool.spec().name.clone();

    let mut native = Vec::with_capacity(rounds);
    let mut component = Vec::with_capacity(rounds);
    // Interleaved, so both see the same machine.
    for i in 0..rounds + 5 {
        let t = Instant::now();
        let r = tool.execute(&json!({"task": "bench"})).await;
        let n = t.elapsed();
        assert!(!r.is_error, "{}", r.output);
        let t = Instant::now();
        let out = host
            .call(&agent, &name, "bench", false, None)
            .await
            .expect("call");
        let c = t.elapsed();
        assert!(!out.result.is_error, "{}", out.result.output);
        if i >= 5 {
            native.push(n);
            component.push(c);
        }
    }
    println!(
        "call, echo agent of a native serve on loopback (the component also fetches the card):"
    );
    summary("native (RemoteTool::execute)", native);
    summary("component (card + call, new instance)", component);
    peer.stop().await;
}
