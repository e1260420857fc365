//! The wasmtime host of the component (feature `component`): the library
//! component (`toolnexus-a2a.wasm`) through `ComponentHost` gives what the
//! native client gives, and `toolnexus serve --component` serves the agent
//! component (`toolnexus-agent.wasm`) to the official SDK clients.
//!
//! Needs `bash wasm/component/build.sh` and `bash tests/peers/setup.sh`
//! (tests/run.sh runs both, then this with `--features component`).
#![cfg(feature = "component")]

mod common;

use common::sdk::{official_client, Sdk, CLIENT_MODES};
use common::{repo_root, run_to_end, start_listening, toolnexus_bin};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use toolnexus_host_native::component_host::ComponentHost;
use toolnexus_host_native::{agent_tools, serve, Agent, Model, NativeTransport, ServeOptions};

fn dist(name: &str) -> PathBuf {
    let wasm = repo_root().join("wasm/component/dist").join(name);
    assert!(
        wasm.exists(),
        "{} is missing: run `bash wasm/component/build.sh` (tests/run.sh does)",
        wasm.display()
    );
    wasm
}

/// The same call through the component and natively: the same tools, the
/// same result (but for the fresh task ids), the same events.
#[tokio::test]
async fn the_library_component_gives_what_the_native_client_gives() {
    // An agent with skills (the examples), so it has tools to call.
    let mut tk = toolnexus_core::Toolkit::new(NativeTransport::shared());
    let skills = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/skills");
    tk.add_skills(toolnexus_host_native::skills_dir::load_skill_dirs(&[skills]).expect("skills"));
    let peer = serve(
        "127.0.0.1:0",
        ServeOptions::new(Arc::new(tk), Model::Custom(Arc::new(common::Steps))),
    )
    .await
    .expect("serve");
    let agent = Agent::new(format!("{}/.well-known/agent-card.json", peer.url));
    let host = ComponentHost::load(dist("toolnexus-a2a.wasm")).expect("load");

    let native = agent_tools(&agent).await.expect("native tools");
    let native: Vec<_> = native.iter().map(|t| t.spec().clone()).collect();
    let wasm = host.agent_tools(&agent).await.expect("component tools");
    assert_eq!(wasm, native);

    let name = native[0].name.clone();
    let outcome = host
        .call(&agent, &name, "go slowly", true, None)
        .await
        .expect("component call");
    let tools = agent_tools(&agent).await.expect("tools");
    let mut native_events = Vec::new();
    let native_result = tools[0]
        .execute_with_events(&json!({"task": "go slowly"}), std::future::pending(), |e| {
            native_events.push(e)
        })
        .await;
    assert_eq!(outcome.result.output, native_result.output);
    assert_eq!(outcome.result.is_error, native_result.is_error);
    let keys = |m: &Option<Value>| {
        m.as_ref()
            .and_then(Value::as_object)
            .map(|o| o.keys().cloned().collect::<Vec<_>>())
    };
    assert_eq!(
        keys(&outcome.result.metadata),
        keys(&native_result.metadata)
    );
    assert_eq!(
        outcome.result.metadata.as_ref().unwrap()["state"],
        "completed"
    );
    let kinds = |events: Vec<Value>| -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| {
                let state = e["status"]["state"].as_str().unwrap_or("-").to_string();
                (e["kind"].as_str().unwrap_or("?").to_string(), state)
            })
            .collect()
    };
    let wasm_events: Vec<Value> = outcome
        .events
        .iter()
        .map(|e| serde_json::from_str(e).expect("event JSON"))
        .collect();
    let native_events: Vec<Value> = native_events
        .iter()
        .map(|e| serde_json::to_value(e.shaped(toolnexus_core::Shape::V03)).expect("json"))
        .collect();
    assert_eq!(kinds(wasm_events), kinds(native_events));

    // A tool the agent does not have: the misuse error `toolnexus call` prints.
    let err = host
        .call(&agent, "nope", "x", false, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "misuse");
    assert!(
        err.to_string()
            .starts_with("the agent has no tool \"nope\""),
        "{err}"
    );

    // No answer at all: a transport error, as natively.
    let dead = Agent::new("http://127.0.0.1:9/.well-known/agent-card.json");
    let err = host.agent_tools(&dead).await.unwrap_err();
    assert_eq!(err.kind(), "transport", "{err}");
    peer.stop().await;
}

/// `toolnexus serve --component toolnexus-agent.wasm`: an instance per
/// request, tasks in a file store they share; the official clients complete
/// tasks in every mode.
#[tokio::test]
async fn serve_component_serves_the_agent_world_to_the_official_clients() {
    let store = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("component-serve-{}", std::process::id()));
    let agent_wasm = dist("toolnexus-agent.wasm").display().to_string();
    let store_arg = format!("file:{}", store.display());
    let server = start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--component",
            &agent_wasm,
            "--addr",
            "127.0.0.1:0",
            "--store",
            &store_arg,
            "--name",
            "wasm-served",
        ],
    )
    .await;
    let card = format!("{}/.well-known/agent-card.json", server.url);
    let (code, v, stderr) = run_to_end(&toolnexus_bin(), &["tools", &card, "--no-cache"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v.trim(), "[]", "the echo agent without skills has no tools");
    let got = NativeTransport::shared();
    let card_body = toolnexus_core::Transport::send(&got, toolnexus_core::HttpRequest::get(&card))
        .await
        .expect("card");
    let card_json: Value = serde_json::from_slice(&card_body.body).expect("card JSON");
    assert_eq!(card_json["name"], "wasm-served");
    for sdk in [Sdk::Python, Sdk::Js] {
        for mode in CLIENT_MODES {
            let text = format!("hello from {sdk:?} {mode:?}");
            let (code, v, stderr) = official_client(sdk, &card, &text, mode).await;
            assert_eq!(code, 0, "{sdk:?} {mode:?}: {v} {stderr}");
            assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
            assert_eq!(v["text"], text.as_str(), "{sdk:?} {mode:?}");
        }
    }
    assert!(
        std::fs::read_dir(&store).expect("store").count() >= 12,
        "every task is in the shared store"
    );
}
