//! Benchmark helper: the native HTTP layer with a constant JSON answer, to
//! separate HTTP cost from protocol cost in `benches/get_task.sh`.
//! Prints `listening on http://HOST:PORT`, serves until killed.

use std::sync::Arc;
use toolnexus_core::HttpResponse;
use toolnexus_host_native::http_server::{bind, DEFAULT_BODY_LIMIT};

#[tokio::main]
async fn main() {
    let body = br#"{"jsonrpc":"2.0","id":1,"result":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}"#;
    let handle = bind(
        "127.0.0.1:0",
        DEFAULT_BODY_LIMIT,
        Arc::new(move |_| Box::pin(async move { HttpResponse::json(200, body.to_vec()) })),
    )
    .await
    .expect("bind");
    println!("listening on {}", handle.url);
    std::future::pending::<()>().await;
}
