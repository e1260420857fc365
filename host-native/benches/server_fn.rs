//! CPU cost of one GetTask through the core server function, no sockets:
//! the protocol path on its own, free of wrk/TCP noise.
//!
//! `cargo bench -p toolnexus-host-native --bench server_fn`

use std::sync::Arc;
use std::time::Instant;
use toolnexus_core::server::{A2aServer, EchoFulfiller, ServerHost, ServerOptions};
use toolnexus_core::HttpRequest;
use toolnexus_host_native::{MemoryStore, NativeLocks};

struct Host;

impl toolnexus_core::HostBase for Host {
    fn new_id(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
    fn now_ms(&self) -> u64 {
        0
    }
}

impl ServerHost for Host {
    type Locks = NativeLocks;
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let card =
        toolnexus_core::server::build_agent_card(&Default::default(), &[], "http://127.0.0.1:1/");
    let options = ServerOptions {
        card: Some(card.into()),
        cors_origin: Some(toolnexus_core::server::CorsOrigin::any()),
        ..Default::default()
    };
    let server = A2aServer::new(options, MemoryStore::default(), Host, EchoFulfiller);
    tokio::spawn(server.clone().run_work(|w| drop(tokio::spawn(w))));
    let send = HttpRequest::post_json(
        "/",
        br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"Plan the release of version 1.2 in three steps"}]}}}"#.to_vec(),
    )
    .with_header("A2A-Version", "1.0");
    let created = server.handle(send).await;
    let v: serde_json::Value = serde_json::from_slice(&created.body).expect("json");
    let id = v["result"]["task"]["id"]
        .as_str()
        .expect("task id")
        .to_string();
    let get = HttpRequest::post_json(
        "/",
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"{id}"}}}}"#)
            .into_bytes(),
    )
    .with_header("Host", "127.0.0.1:8080")
    .with_header("A2A-Version", "1.0");
    let check = server.handle(get.clone()).await;
    assert!(String::from_utf8_lossy(&check.body).contains("TASK_STATE_COMPLETED"));

    let server = Arc::clone(&server);
    for round in 0..3 {
        const N: u32 = 300_000;
        let started = Instant::now();
        for _ in 0..N {
            let resp = server.handle(get.clone()).await;
            std::hint::black_box(resp);
        }
        let ns = started.elapsed().as_nanos() as f64 / N as f64;
        println!("round {round}: {ns:.0} ns per GetTask through A2aServer::handle ({:.0}k/s on one core)", 1e6 / ns);
    }
}
