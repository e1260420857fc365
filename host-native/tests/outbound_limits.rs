//! Issue 11 §6: a burst of requests to one host opens a bounded number of
//! connections (each request in flight holds one), not one per request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use toolnexus_core::{HttpRequest, Transport};
use toolnexus_host_native::transport::ClientOptions;
use toolnexus_host_native::NativeTransport;

/// A peer that answers each request 50 ms late, counting connections open at once.
async fn slow_peer() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let (open, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let seen = most.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let (open, most) = (open.clone(), most.clone());
            most.fetch_max(open.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // One request per read is enough for these small GETs.
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if conn.write_all(answer.as_bytes()).await.is_err() {
                        break;
                    }
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (url, seen)
}

async fn burst(transport: Arc<NativeTransport>, url: &str, n: usize) -> usize {
    let sends = (0..n).map(|_| {
        let (t, url) = (transport.clone(), url.to_string());
        tokio::spawn(async move { t.send(HttpRequest::get(&url)).await })
    });
    let mut ok = 0;
    for send in sends.collect::<Vec<_>>() {
        if matches!(send.await, Ok(Ok(r)) if r.status == 200) {
            ok += 1;
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_to_one_host_opens_at_most_the_bound_of_connections() {
    let (url, most) = slow_peer().await;
    let mut options = ClientOptions::default();
    options.max_connections_per_host = Some(4);
    let transport = Arc::new(NativeTransport::with_options(&options));
    assert_eq!(
        burst(transport, &url, 40).await,
        40,
        "every request answered"
    );
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 4, "{most} connections at once for a bound of 4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbounded_a_burst_opens_a_connection_per_request_in_flight() {
    // The same burst without the bound: what the bound prevents.
    let (url, most) = slow_peer().await;
    let mut options = ClientOptions::default();
    options.max_connections_per_host = None;
    let transport = Arc::new(NativeTransport::with_options(&options));
    assert_eq!(burst(transport, &url, 40).await, 40);
    assert!(most.load(Ordering::SeqCst) > 4);
}
