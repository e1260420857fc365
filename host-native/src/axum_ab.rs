//! The A/B variant of the HTTP server (feature `axum-ab`, off by default):
//! the same [`StreamHandler`] (the `A2aServer` behind `toolnexus serve`)
//! served by axum on hyper-util, with tower-http layers for the body limit
//! and the timeout. Chosen at run time by `TOOLNEXUS_HTTP_SERVER=axum`, so
//! one binary measures both (host-native/benches/get_task_axum.sh). Issue
//! 22 asked to adopt axum if GetTask req/s stays within 5% of the native
//! server; the figures are in README.md (Observability) whatever they say.
//!
//! What it leaves out, measured or not: the native server's head timeout
//! (slowloris), its connection cap with eviction, and the drain of refused
//! bodies.

use crate::http_server::{HttpOptions, Listener, ServerHandle, StreamHandler};
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use futures_util::StreamExt;
use toolnexus_core::server::{Admission, Reply};
use toolnexus_core::{HttpRequest, HttpResponse};

/// Whether `TOOLNEXUS_HTTP_SERVER=axum` (or `axum-bare`: without the
/// tower-http layers, to tell their cost from axum's) asks for this server.
pub fn wanted() -> bool {
    std::env::var("TOOLNEXUS_HTTP_SERVER").is_ok_and(|v| v.starts_with("axum"))
}

fn bare() -> bool {
    std::env::var("TOOLNEXUS_HTTP_SERVER").is_ok_and(|v| v == "axum-bare")
}

/// [`crate::http_server::serve_with`] on axum.
pub fn serve_with(
    listener: impl Listener,
    options: HttpOptions,
    handler: StreamHandler,
) -> std::io::Result<ServerHandle> {
    let listener = listener.into_tokio()?;
    let addr = listener.local_addr()?;
    let limit = match options.policy.admit(&[]) {
        Admission::Read { limit } => limit,
        Admission::Refuse(_) => crate::http_server::DEFAULT_BODY_LIMIT,
    };
    let policy = options.policy.clone();
    let mut app = axum::Router::new().fallback(move |req: Request| {
        let (handler, policy) = (handler.clone(), policy.clone());
        async move { answer(req, &handler, &*policy, limit).await }
    });
    if !bare() {
        app = app
            .layer(tower_http::limit::RequestBodyLimitLayer::new(limit))
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                options.body_timeout,
            ));
    }
    // As the native server: answers are not held back by Nagle's algorithm.
    use axum::serve::ListenerExt as _;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let (stop, mut stopped) = tokio::sync::watch::channel(None::<tokio::time::Instant>);
    let done = tokio::spawn(async move {
        let stopping = async move {
            let _ = stopped.wait_for(|s| s.is_some()).await;
        };
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stopping)
            .await;
    });
    Ok(ServerHandle::from_parts(addr, stop, done))
}

async fn answer(
    req: Request,
    handler: &StreamHandler,
    policy: &dyn crate::http_server::RequestPolicy,
    limit: usize,
) -> Response {
    let (parts, body) = req.into_parts();
    let mut headers = Vec::with_capacity(parts.headers.len());
    headers.extend(
        parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string()))),
    );
    let limit = match policy.admit(&headers) {
        Admission::Refuse(answer) => return whole(answer),
        Admission::Read { limit: own } => own.min(limit),
    };
    let body = match axum::body::to_bytes(body, limit).await {
        Ok(body) => body.to_vec(),
        Err(_) => return whole(policy.refuse(toolnexus_core::server::BodyRefusal::TooLarge)),
    };
    let url = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let reply = handler(HttpRequest {
        method: parts.method.as_str().to_string(),
        url,
        headers,
        body,
    })
    .await;
    match reply {
        Reply::Full(r) => whole(r),
        Reply::Stream { head, body } => {
            let frames = body.map(|frame| Ok::<_, std::convert::Infallible>(Bytes::from(frame)));
            with_head(head, Body::from_stream(frames))
        }
    }
}

fn whole(mut r: HttpResponse) -> Response {
    let body = Body::from(std::mem::take(&mut r.body));
    with_head(r, body)
}

fn with_head(head: HttpResponse, body: Body) -> Response {
    let mut builder = Response::builder().status(head.status);
    for (k, v) in head.headers {
        builder = builder.header(k, v);
    }
    builder.body(body).unwrap_or_else(|_| {
        let mut r = Response::new(Body::from("invalid response header\n"));
        *r.status_mut() = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}
