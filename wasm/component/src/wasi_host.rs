//! The core's `Transport` and `ServerHost` over WASI 0.2: wasi:http's
//! outgoing handler (through `wstd`), the monotonic and wall clocks, and
//! wasi:random for ids. Conversions only.

use futures_util::StreamExt;
use std::future::Future;
use toolnexus_core::BoxFuture;
use toolnexus_core::{HttpRequest, HttpResponse, StreamingResponse, Transport, TransportError};
use wstd::http::{Body, BodyExt, Client, Request};

/// Headers wasi:http refuses to carry (hop-by-hop: the host's HTTP stack
/// owns them). Sending one would fail the whole request, so they are left out.
pub fn forbidden_header(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
        "http2-settings",
        "te",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

/// Milliseconds on wasi's monotonic clock.
pub fn now_ms() -> u64 {
    wasip2::clocks::monotonic_clock::now() / 1_000_000
}

/// A fresh random id in the UUID v4 text form (as the native host's ids).
pub fn new_id() -> String {
    let mut b = wasip2::random::random::get_random_bytes(16);
    b.resize(16, 0);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Completes at `at_ms` of [`now_ms`].
pub fn sleep_until(at_ms: u64) -> impl Future<Output = ()> {
    let wait = at_ms.saturating_sub(now_ms());
    let timer = wstd::task::sleep(wstd::time::Duration::from_millis(wait));
    async move {
        timer.await;
    }
}

/// A body read chunk by chunk up to `limit` bytes: `None` as soon as it
/// goes over (the rest is never read).
pub async fn read_capped(body: Body, limit: usize) -> Result<Option<Vec<u8>>, wstd::http::Error> {
    let mut chunks = body.into_boxed_body().into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if bytes.len() + chunk.len() > limit {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}

/// The largest answer a component reads (a model, a peer, a webhook):
/// as the native and npm transports' caps.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// The transport of a component: wasi:http for requests, wasi clocks for time.
#[derive(Clone, Copy, Default)]
pub struct WasiTransport;

fn to_wasi(request: HttpRequest) -> Result<Request<Body>, TransportError> {
    let mut builder = Request::builder()
        .method(request.method.as_str())
        .uri(request.url.as_str());
    for (k, v) in &request.headers {
        if !forbidden_header(k) && !k.eq_ignore_ascii_case("content-length") {
            builder = builder.header(k.as_str(), v.as_str());
        }
    }
    // A body with its length, as the native client sends it: without one
    // wasi:http sends it chunked, which some servers cannot read.
    if !request.body.is_empty() {
        builder = builder.header("content-length", request.body.len());
    }
    builder.body(Body::from(request.body)).map_err(|e| {
        let url = toolnexus_core::redact_url(&request.url);
        TransportError::new(format!("cannot build the request to {url}: {e}"))
    })
}

fn error_text(url: &str, e: &wstd::http::Error) -> TransportError {
    // The URL may hold credentials (user:password@, ?token=): never shown.
    let url = toolnexus_core::redact_url(url);
    TransportError::new(format!("request to {url} failed: {e:#}"))
}

fn too_large(url: &str) -> TransportError {
    let url = toolnexus_core::redact_url(url);
    TransportError::new(format!(
        "the answer of {url} is larger than {MAX_RESPONSE_BYTES} bytes"
    ))
}

impl toolnexus_core::HostBase for WasiTransport {
    fn now_ms(&self) -> u64 {
        now_ms()
    }
    fn new_id(&self) -> String {
        new_id()
    }
}

impl Transport for WasiTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let url = request.url.clone();
        let response = Client::new()
            .send(to_wasi(request)?)
            .await
            .map_err(|e| error_text(&url, &e))?;
        let (head, body) = response.into_parts();
        let declared = body.content_length();
        if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES as u64) {
            return Err(too_large(&url));
        }
        let body = read_capped(body, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| error_text(&url, &e))?
            .ok_or_else(|| too_large(&url))?;
        Ok(HttpResponse {
            status: head.status.as_u16(),
            headers: header_pairs(&head.headers),
            body,
        })
    }

    async fn send_streaming(
        &self,
        request: HttpRequest,
    ) -> Result<StreamingResponse, TransportError> {
        let url = request.url.clone();
        let response = Client::new()
            .send(to_wasi(request)?)
            .await
            .map_err(|e| error_text(&url, &e))?;
        let (head, body) = response.into_parts();
        let chunks = body
            .into_boxed_body()
            .into_data_stream()
            .map(move |chunk| match chunk {
                Ok(bytes) => Ok(bytes.to_vec()),
                Err(e) => Err(error_text(&url, &e)),
            });
        Ok(StreamingResponse {
            status: head.status.as_u16(),
            headers: header_pairs(&head.headers),
            body: Box::pin(chunks),
        })
    }

    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> {
        sleep_until(at_ms)
    }

    /// wasi:cli/environment: what the host chose to show the component.
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// Header pairs, values that are not text skipped.
pub fn header_pairs(headers: &wstd::http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// Polls `fut` (a request being served); after each poll, the work the
/// server started in it (a task's job, its push deliveries) goes on wstd's
/// executor, polled the same way. Work runs until it finishes, before the
/// export call or the request handler returns.
pub fn with_work<S, F, Fut>(
    server: &std::sync::Arc<toolnexus_core::server::A2aServer<S, WasiHost, F>>,
    fut: Fut,
) -> WithWork<Fut>
where
    S: toolnexus_core::server::TaskStore,
    F: toolnexus_core::server::Fulfiller,
    Fut: Future,
{
    let server = server.clone();
    WithWork {
        take: std::rc::Rc::new(move || server.take_work()),
        fut: Box::pin(fut),
    }
}

/// See [`with_work`].
pub struct WithWork<F: ?Sized> {
    take: std::rc::Rc<dyn Fn() -> Vec<toolnexus_core::server::Work>>,
    fut: std::pin::Pin<Box<F>>,
}

impl<F: Future + ?Sized> Future for WithWork<F> {
    type Output = F::Output;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let polled = self.fut.as_mut().poll(cx);
        for work in (self.take)() {
            let work = WithWork {
                take: self.take.clone(),
                fut: work,
            };
            wstd::runtime::spawn(work).detach();
        }
        polled
    }
}

/// The server's host: wasi clocks, problems to stderr (its work runs on
/// wstd's executor, through [`with_work`]); in the agent world, HS256 signatures
/// of the `jwt` verifier (`hmac` + `sha2`, the secret from the environment).
#[derive(Clone, Default)]
pub struct WasiHost {
    /// The `jwt` verifier whose HS256 signatures this host checks.
    #[cfg(feature = "agent")]
    pub jwt: Option<toolnexus_core::server::auth::JwtConfig>,
}

/// The memory store of a component.
pub type MemoryStore = toolnexus_core::server::MemoryStore<toolnexus_core::server::CellLocks>;

impl toolnexus_core::HostBase for WasiHost {
    fn new_id(&self) -> String {
        new_id()
    }
    fn unix_ms(&self) -> Option<u64> {
        let now = wasip2::clocks::wall_clock::now();
        Some(now.seconds * 1000 + u64::from(now.nanoseconds) / 1_000_000)
    }
    fn now_ms(&self) -> u64 {
        now_ms()
    }
}

impl toolnexus_core::server::ServerHost for WasiHost {
    type Locks = toolnexus_core::server::CellLocks;

    fn report(&self, problem: &str) {
        eprintln!("toolnexus: {problem}");
    }

    fn sleep_until(&self, at_ms: u64) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(sleep_until(at_ms)))
    }

    #[cfg(feature = "agent")]
    fn verify_jwt(
        &self,
        token: &str,
    ) -> BoxFuture<'static, Result<toolnexus_core::server::auth::Claims, String>> {
        Box::pin(std::future::ready(verify_hs256(self.jwt.as_ref(), token)))
    }
}

/// A JWT's claims when it is HS256, accepted by `jwt`, and signed with the
/// secret in `jwt.secret_env` (compared in constant time by `hmac`).
#[cfg(feature = "agent")]
pub fn verify_hs256(
    jwt: Option<&toolnexus_core::server::auth::JwtConfig>,
    token: &str,
) -> Result<toolnexus_core::server::auth::Claims, String> {
    use hmac::{Hmac, KeyInit, Mac};
    let jwt = jwt.ok_or("no jwt verifier is configured")?;
    let jws = toolnexus_core::server::jws::parse(token)?;
    if jws.alg != "HS256" || !jwt.algorithms.iter().any(|a| a == "HS256") {
        return Err(format!("alg {} is not accepted", jws.alg));
    }
    let name = jwt.secret_env.as_deref().unwrap_or_default();
    let secret = std::env::var(name)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("the HS256 secret ({name}) is not set"))?;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .map_err(|_| "the HS256 secret is unusable".to_string())?;
    mac.update(jws.signing_input.as_bytes());
    mac.verify_slice(&jws.signature)
        .map_err(|_| "the token's signature does not verify".to_string())?;
    Ok(jws.claims)
}
