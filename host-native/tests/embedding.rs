//! host-native embedded in a Rust program: serving on a listener the program
//! bound itself, and calling through a transport it configured.

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use toolnexus_core::skills::{Skill, SkillSet};
use toolnexus_host_native::{
    agent_tools_with, serve_on, toolkit_with, Agent, ClientOptions, Model, NativeTransport,
    ServeHandle, ServeOptions,
};

fn echo_agent(transport: Arc<NativeTransport>) -> ServeOptions {
    let mut skills = SkillSet::new();
    skills.add(Skill {
        name: "hello".into(),
        description: "Says hello".into(),
        content: "Say hello.".into(),
    });
    let mut tk = toolnexus_core::Toolkit::new(transport);
    tk.add_skills(skills);
    ServeOptions::new(Arc::new(tk), Model::Echo)
}

fn card_of(handle: &ServeHandle) -> String {
    format!("{}/.well-known/agent-card.json", handle.url)
}

/// Calls the agent's one skill through `transport` and checks the echo.
async fn check_echo(transport: &Arc<NativeTransport>, handle: &ServeHandle) {
    let tools = agent_tools_with(transport, &Agent::new(card_of(handle)))
        .await
        .expect("the served card");
    assert_eq!(tools.len(), 1);
    let r = tools[0].execute(&json!({"task": "embedded"})).await;
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(r.output, "embedded");
}

#[tokio::test]
async fn serve_on_a_std_listener_the_program_bound() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let transport = Arc::new(NativeTransport::new());
    let handle = serve_on(listener, echo_agent(transport.clone()))
        .await
        .expect("serve");
    assert_eq!(handle.url, format!("http://{addr}"));
    assert_eq!(handle.card_url, format!("http://{addr}/"));
    check_echo(&transport, &handle).await;
    handle.stop().await;
}

#[tokio::test]
async fn serve_on_a_tokio_listener_with_a_public_url() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let transport = Arc::new(NativeTransport::new());
    let mut options = echo_agent(transport.clone());
    options.public_url = Some("https://agents.example/front".into());
    let handle = serve_on(listener, options).await.expect("serve");
    assert_eq!(handle.card_url, "https://agents.example/front/");
    handle.stop().await;
}

#[tokio::test]
async fn a_transport_over_a_client_the_program_configured() {
    let mut options = ClientOptions::default();
    options.connect_timeout = Some(Duration::from_secs(5));
    options.pool_max_idle_per_host = 1;
    let client = options.build();
    // Clones of one client share its pool; so do the transports over them.
    let transport = Arc::new(NativeTransport::with_client(client.clone()));
    let handle = serve_on(
        std::net::TcpListener::bind("127.0.0.1:0").expect("bind"),
        echo_agent(transport.clone()),
    )
    .await
    .expect("serve");
    check_echo(&transport, &handle).await;

    let other = Arc::new(NativeTransport::with_options(&ClientOptions::default()));
    let tk = toolkit_with(other, &[Agent::new(card_of(&handle))], None).await;
    assert!(tk.failures().is_empty(), "{:?}", tk.failures());
    let r = tk
        .execute("toolnexus-agent_hello", json!({"task": "kit"}))
        .await;
    assert_eq!(r.output, "kit");
    handle.stop().await;
}
