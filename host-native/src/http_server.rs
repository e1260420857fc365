//! A small HTTP/1.1 server on tokio/hyper that hands every request, as a
//! plain [`HttpRequest`], to one handler function.

use futures_util::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use toolnexus_core::{HttpRequest, HttpResponse};

/// Turns a request into a response.
pub type Handler = Arc<dyn Fn(HttpRequest) -> BoxFuture<'static, HttpResponse> + Send + Sync>;

/// A running server. Dropping it does not stop it; call [`ServerHandle::stop`].
pub struct ServerHandle {
    /// `http://HOST:PORT` with the real port.
    pub url: String,
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// Stops accepting, lets requests in flight finish (up to 5 s), then returns.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.done).await;
    }
}

/// The body limit used when none is given: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// Binds `addr` (port 0 picks a free one) and serves `handler` until stopped.
/// Bodies over `body_limit` bytes get 413 without reaching the handler.
pub async fn bind(
    addr: &str,
    body_limit: usize,
    handler: Handler,
) -> std::io::Result<ServerHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (stop, mut stopped) = watch::channel(false);
    let done = tokio::spawn(async move {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let handler = handler.clone();
                    let service = service_fn(move |req| {
                        let handler = handler.clone();
                        async move { Ok::<_, std::convert::Infallible>(handle(req, body_limit, handler).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    let conn = graceful.watch(conn);
                    tokio::spawn(async move { let _ = conn.await; });
                }
                _ = stopped.changed() => break,
            }
        }
        drop(listener);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), graceful.shutdown()).await;
    });
    Ok(ServerHandle {
        url: format!("http://{addr}"),
        addr,
        stop,
        done,
    })
}

async fn handle(
    req: hyper::Request<Incoming>,
    limit: usize,
    handler: Handler,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let declared_too_big = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|n| n > limit);
    let body = if declared_too_big {
        None
    } else {
        Limited::new(body, limit)
            .collect()
            .await
            .ok()
            .map(|b| b.to_bytes().to_vec())
    };
    let response = match body {
        Some(body) => {
            let headers = parts
                .headers
                .iter()
                .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
                .collect();
            let url = parts
                .uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into());
            handler(HttpRequest {
                method: parts.method.as_str().to_string(),
                url,
                headers,
                body,
            })
            .await
        }
        None => HttpResponse {
            status: 413,
            headers: vec![
                ("Content-Type".into(), "text/plain".into()),
                ("Connection".into(), "close".into()),
            ],
            body: format!("request body over the {limit}-byte limit\n").into_bytes(),
        },
    };
    let mut builder = hyper::Response::builder().status(response.status);
    for (k, v) in &response.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder
        .body(Full::new(Bytes::from(response.body)))
        .unwrap_or_else(|_| {
            let mut r =
                hyper::Response::new(Full::new(Bytes::from_static(b"invalid response header\n")));
            *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
}
