//! The README's Rust snippets are compiled here: every ```rust block of
//! README.md must appear, line for line (indentation aside), in this file,
//! inside a function the compiler checks. Edit both together.

use std::error::Error;

#[test]
fn every_rust_block_of_the_readme_is_compiled_here() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let here = lines(include_str!("readme_snippets.rs"));
    let mut blocks = 0;
    let mut inside: Option<Vec<&str>> = None;
    for line in readme.lines() {
        match (&mut inside, line.trim()) {
            (None, "```rust") => inside = Some(Vec::new()),
            (Some(block), "```") => {
                let block = lines(&block.join("\n"));
                assert!(
                    here.windows(block.len()).any(|w| w == block.as_slice()),
                    "this README block is not in tests/readme_snippets.rs:\n{}",
                    block.join("\n")
                );
                blocks += 1;
                inside = None;
            }
            (Some(block), _) => block.push(line),
            (None, _) => {}
        }
    }
    assert!(
        blocks >= 2,
        "the README's Rust blocks were found ({blocks})"
    );
}

/// Non-empty lines, trimmed.
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

// "From Rust": calling agents, and a toolkit from an `agents` config.
#[allow(dead_code, unused_variables)]
#[rustfmt::skip]
async fn from_rust() -> Result<(), Box<dyn Error>> {
    use serde_json::json;
    use toolnexus_host_native::{agent_tools, toolkit, Agent};

    let tools = agent_tools(&Agent::new("http://127.0.0.1:8080/.well-known/agent-card.json")).await?;
    let result = tools[0].execute(&json!({"task": "review this diff"})).await; // never fails: see result.is_error
    // A question (state input-required) names its task: answer on it.
    let meta = result.metadata.unwrap_or_default();
    let answer = json!({"task": "the main branch", "taskId": meta["taskId"], "contextId": meta["contextId"]});
    // The same, with each event of the task as it happens (stream events, or the task as polls see it):
    let result = tools[0]
        .execute_with_events(&json!({"task": "review"}), std::future::pending(), |e| println!("{e:?}"))
        .await;

    // Many agents, failures isolated, names unique (first wins):
    let config = json!({"agents": {"planner": {"card": "http://127.0.0.1:9001/.well-known/agent-card.json"}}});
    let tk = toolkit(&[], Some(&config)).await;
    let r = tk.execute("planner_plan", json!({"task": "ship it"})).await;  // unknown name ⇒ "Unknown tool: …"
    let openai_tools = tk.to_openai();                                      // also to_anthropic(), to_gemini()
    Ok(())
}

// "Security": calling a protected agent.
#[allow(dead_code, unused_variables)]
#[rustfmt::skip]
async fn calling_protected_agents() -> Result<(), Box<dyn Error>> {
    use toolnexus_host_native::{agent_tools, core::{Auth, OAuth2Client}, Agent};
    let agent = Agent::new("https://agent.example/.well-known/agent-card.json")
        .with_auth(Auth::OAuth2(OAuth2Client { client_id: "my-app".into(),
            client_secret: "${APP_SECRET}".into(), ..Default::default() }))
        .with_allowed_origin("https://api.agent.example");  // only if the card's endpoint is there
    let tools = agent_tools(&agent).await?;
    Ok(())
}

// "From Rust": your own HTTP client and sockets.
#[allow(dead_code, unused_variables)]
#[rustfmt::skip]
async fn own_client_and_sockets(card_url: &str, config: serde_json::Value) -> Result<(), Box<dyn Error>> {
    use std::{sync::Arc, time::Duration};
    use toolnexus_host_native::{agent_tools_with, serve_on, toolkit_with, Agent, ClientOptions, Model,
                                NativeTransport, ServeOptions};

    let mut options = ClientOptions::default();            // or any hyper client: NativeTransport::with_client
    options.connect_timeout = Some(Duration::from_secs(3));
    let transport = Arc::new(NativeTransport::with_options(&options));
    let tools = agent_tools_with(&transport, &Agent::new(card_url)).await?;
    let tk = toolkit_with(transport.clone(), &[], Some(&config)).await;

    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;   // or a tokio::net::TcpListener
    let handle = serve_on(listener, ServeOptions::new(Arc::new(tk), Model::Echo)).await?;
    Ok(())
}

// "The WebAssembly component": the library component from Rust.
#[cfg(feature = "component")]
#[allow(dead_code, unused_variables)]
#[rustfmt::skip]
async fn component_from_rust(card_url: &str) -> Result<(), Box<dyn Error>> {
    use toolnexus_core::MessageRefs;
    use toolnexus_host_native::component_host::LiveListener;
    use toolnexus_host_native::Agent;
    let agent = Agent::new(card_url);
    let abort = std::future::pending::<()>();
    // Rust, in toolnexus-host-native with the `component` feature (wasmtime 48):
    let host = toolnexus_host_native::component_host::ComponentHost::load("toolnexus-a2a.wasm")?; // linked once (InstancePre)
    let tools = host.agent_tools(&Agent::new(card_url)).await?;                                  // a fresh instance per call
    let outcome = host.call(&agent, &tools[0].name, "hello", true, None).await?;                  // .result, .events
    // call-live: each event as it happens; `abort` completing cancels the remote task
    let listener = LiveListener { on_tools: Box::new(|_| {}), on_event: Box::new(|json| eprintln!("{json}")) };
    let result = host.call_live(&agent, "echo", "hello", MessageRefs::default(), abort, listener).await?;
    Ok(())
}

// "Security": your own verifier, the `authenticate` hook of ServeOptions.
#[allow(dead_code, unused_variables)]
#[rustfmt::skip]
fn security_authenticate_hook(mut options: toolnexus_host_native::ServeOptions) {
    use std::sync::Arc;
    use toolnexus_host_native::Authenticate;
    use toolnexus_host_native::core::server::auth::{Principal, Verdict};

    let hook: Authenticate = Arc::new(|req| {
        let user = req.header("X-User").map(str::to_string); // e.g. set by your proxy
        Box::pin(async move {
            match user {
                Some(subject) => Verdict::Accepted(Principal { subject, ..Default::default() }),
                None => Verdict::NotMine,
            }
        })
    });
    // options.authenticate = Some(hook);
    options.authenticate = Some(hook);
}
