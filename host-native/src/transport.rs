//! The native [`Transport`]: a pooled keep-alive HTTP/1.1 client (https via
//! rustls with the webpki roots), or one you configure, and tokio timers.

use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use toolnexus_core::{HttpRequest, HttpResponse, StreamingResponse, Transport, TransportError};

/// The largest response body read (a card or a task); larger is a transport error.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// The hyper client a [`NativeTransport`] sends with: HTTP/1.1 over TCP, or
/// over rustls for `https` URLs. Build your own (other roots, client
/// certificates, pool settings) and hand it to [`NativeTransport::with_client`].
pub type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How [`NativeTransport::with_options`] builds its [`HttpClient`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    /// How long an idle keep-alive connection stays in the pool; default 30 s.
    pub pool_idle_timeout: Option<Duration>,
    /// Idle connections kept per host; default unlimited.
    pub pool_max_idle_per_host: usize,
    /// A limit on establishing a TCP connection; default none (the agent's
    /// `timeout` still bounds the whole call).
    pub connect_timeout: Option<Duration>,
    /// `TCP_NODELAY`; default on, so small requests and SSE events leave at
    /// once instead of waiting for Nagle's algorithm to pair them with an ACK.
    pub nodelay: bool,
    /// Requests in flight to one host (scheme and authority) at once; later
    /// ones wait for a place. Each holds a connection (HTTP/1.1), so this
    /// bounds the connections a burst opens to one peer or model endpoint.
    /// Default [`DEFAULT_MAX_CONNECTIONS_PER_HOST`]; `None`: no bound.
    pub max_connections_per_host: Option<usize>,
    /// More trusted root certificates (PEM, one or more per entry), besides
    /// the webpki roots: a private CA, a test CA. The default holds those of
    /// the file `SSL_CERT_FILE` names, when it is set (added, not replacing).
    pub extra_roots: Vec<Vec<u8>>,
}

/// The default bound on requests in flight to one host.
pub const DEFAULT_MAX_CONNECTIONS_PER_HOST: usize = 64;

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            pool_idle_timeout: Some(Duration::from_secs(30)),
            pool_max_idle_per_host: usize::MAX,
            connect_timeout: None,
            nodelay: true,
            max_connections_per_host: Some(DEFAULT_MAX_CONNECTIONS_PER_HOST),
            extra_roots: roots_from_env(),
        }
    }
}

/// The PEM file `SSL_CERT_FILE` names, if set and readable (else a warning).
fn roots_from_env() -> Vec<Vec<u8>> {
    let Some(path) = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty()) else {
        return Vec::new();
    };
    match std::fs::read(&path) {
        Ok(pem) => vec![pem],
        Err(e) => {
            tracing::warn!(
                "SSL_CERT_FILE {}: {e}",
                std::path::Path::new(&path).display()
            );
            Vec::new()
        }
    }
}

/// rustls with the webpki roots and `extra` (PEM); `None` when `extra` has
/// no certificate.
fn tls_config(extra: &[Vec<u8>]) -> Option<rustls::ClientConfig> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut added = 0;
    for pem in extra {
        for cert in CertificateDer::pem_slice_iter(pem) {
            match cert
                .map_err(|e| e.to_string())
                .and_then(|c| roots.add(c).map_err(|e| e.to_string()))
            {
                Ok(()) => added += 1,
                Err(e) => tracing::warn!("an extra root certificate was skipped: {e}"),
            }
        }
    }
    if added == 0 {
        return None;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(config)
}

impl ClientOptions {
    /// The client these options describe: plain HTTP, and https through
    /// rustls with the webpki roots (and [`ClientOptions::extra_roots`]).
    pub fn build(&self) -> HttpClient {
        let mut http = HttpConnector::new();
        http.set_nodelay(self.nodelay);
        http.set_connect_timeout(self.connect_timeout);
        http.enforce_http(false);
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match tls_config(&self.extra_roots) {
            Some(config) => builder.with_tls_config(config),
            None => builder.with_webpki_roots(),
        };
        let https = builder.https_or_http().enable_http1().wrap_connector(http);
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(self.pool_idle_timeout)
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .build(https)
    }
}

/// HTTP over a connection pool, tokio time, OS randomness and environment.
///
/// Clones share the pool. [`NativeTransport::shared`] is the process-wide
/// default the convenience functions ([`crate::agent_tools`],
/// [`crate::toolkit`]) use; build your own with [`NativeTransport::with_client`]
/// or [`NativeTransport::with_options`] and pass it to
/// [`crate::agent_tools_with`], [`crate::toolkit_with`] or
/// `toolnexus_core::Toolkit::new`.
#[derive(Clone)]
pub struct NativeTransport {
    client: HttpClient,
    epoch: Instant,
    per_host: Option<Arc<PerHost>>,
    /// The trace every request without its own `traceparent` carries.
    trace: Option<Arc<toolnexus_core::TraceContext>>,
}

/// The places for requests in flight, per host.
struct PerHost {
    limit: usize,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl PerHost {
    fn new(limit: usize) -> Arc<PerHost> {
        Arc::new(PerHost {
            limit: limit.max(1),
            hosts: Mutex::new(HashMap::new()),
        })
    }

    /// Hosts remembered before idle ones are forgotten.
    const REMEMBERED: usize = 256;

    /// A place for a request to `url`'s host, once one is free.
    async fn place(&self, url: &str) -> Option<OwnedSemaphorePermit> {
        // Keyed by origin (`scheme://authority`), as the pool keys its
        // connections; a URL without one is its own key.
        let host = toolnexus_core::url_origin(url).unwrap_or(url);
        let places = {
            let mut hosts = crate::lock::unpoisoned(&self.hosts);
            if hosts.len() >= Self::REMEMBERED && !hosts.contains_key(host) {
                // Forget hosts with nothing in flight (no permit out, no waiter).
                hosts.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < self.limit);
            }
            hosts
                .entry(host.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limit)))
                .clone()
        };
        places.acquire_owned().await.ok()
    }
}

impl Default for NativeTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl NativeTransport {
    /// A transport with its own connection pool and [`ClientOptions::default`].
    pub fn new() -> Self {
        Self::with_options(&ClientOptions::default())
    }

    /// A transport with its own connection pool built from `options`.
    pub fn with_options(options: &ClientOptions) -> Self {
        let mut transport = Self::with_client(options.build());
        transport.per_host = options.max_connections_per_host.map(PerHost::new);
        transport
    }

    /// A transport that sends with `client`, configured as you need it. Its
    /// pool is shared with every other clone of `client`.
    pub fn with_client(client: HttpClient) -> Self {
        NativeTransport {
            client,
            epoch: Instant::now(),
            per_host: Some(PerHost::new(DEFAULT_MAX_CONNECTIONS_PER_HOST)),
            trace: None,
        }
    }

    /// This transport (the same pool) with every request that has no
    /// `traceparent` of its own sent as a child of `trace`'s span: a
    /// command's requests in the trace it was started in (`TRACEPARENT`).
    pub fn with_trace(mut self, trace: toolnexus_core::TraceContext) -> Self {
        self.trace = Some(Arc::new(trace));
        self
    }

    /// The client this transport sends with.
    pub fn client(&self) -> &HttpClient {
        &self.client
    }

    /// The process-wide default transport (one connection pool, made on first
    /// use), behind [`crate::agent_tools`] and [`crate::toolkit`].
    pub fn shared() -> Arc<NativeTransport> {
        static SHARED: OnceLock<Arc<NativeTransport>> = OnceLock::new();
        SHARED
            .get_or_init(|| Arc::new(NativeTransport::new()))
            .clone()
    }

    /// A place for a request to `url`'s host (none when unbounded).
    async fn place(&self, url: &str) -> Option<OwnedSemaphorePermit> {
        match &self.per_host {
            Some(per_host) => per_host.place(url).await,
            None => None,
        }
    }

    /// Puts the transport's trace on a request that has none of its own.
    fn traced(&self, req: &mut HttpRequest) {
        if let Some(trace) = &self.trace {
            if req.header(toolnexus_core::TRACEPARENT).is_none() {
                trace.put_on(&mut req.headers);
            }
        }
    }

    async fn send_inner(&self, mut req: HttpRequest) -> Result<HttpResponse, TransportError> {
        self.traced(&mut req);
        #[cfg(feature = "otel")]
        let span = crate::otel::outbound(&mut req);
        #[cfg(feature = "metrics")]
        let model = (crate::metrics::enabled() && crate::metrics::is_model_call(&req.url))
            .then(|| (req.body.clone(), std::time::Instant::now()));
        let answer = self.send_whole(req).await;
        #[cfg(feature = "metrics")]
        if let Some((request, started)) = model {
            let body = answer.as_ref().ok().map(|a| a.body.as_slice());
            crate::metrics::model_call(&request, started, body);
        }
        #[cfg(feature = "otel")]
        if let Some(span) = span {
            match &answer {
                Ok(a) => span.finish(a.status, Some(&a.body)),
                Err(e) => span.fail(&e.to_string()),
            }
        }
        answer
    }

    async fn send_whole(&self, req: HttpRequest) -> Result<HttpResponse, TransportError> {
        let url = toolnexus_core::redact_url(&req.url);
        let _place = self.place(&req.url).await;
        let resp = self.request(req).await?;
        let status = resp.status().as_u16();
        let headers = response_headers(&resp);
        let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| {
                TransportError::with_source(format!("reading the answer from {url} failed: {e}"), e)
            })?
            .to_bytes()
            .to_vec();
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }

    /// The head of the answer at once; the body as hyper delivers its frames.
    async fn send_streaming_inner(
        &self,
        mut req: HttpRequest,
    ) -> Result<StreamingResponse, TransportError> {
        self.traced(&mut req);
        #[cfg(feature = "otel")]
        let span = crate::otel::outbound(&mut req);
        let url = toolnexus_core::redact_url(&req.url);
        let place = self.place(&req.url).await;
        let resp = self.request(req).await;
        // A stream's span ends with its head: the events are the task's.
        #[cfg(feature = "otel")]
        if let Some(span) = span {
            match &resp {
                Ok(r) => span.finish(r.status().as_u16(), None),
                Err(e) => span.fail(&e.to_string()),
            }
        }
        let resp = resp?;
        let status = resp.status().as_u16();
        let headers = response_headers(&resp);
        let body = Drained {
            data: Some(resp.into_body().into_data_stream()),
            place,
        }
        .map(move |frame| {
            frame.map(|bytes| bytes.to_vec()).map_err(|e| {
                TransportError::with_source(format!("reading the answer from {url} failed: {e}"), e)
            })
        });
        Ok(StreamingResponse {
            status,
            headers,
            body: Box::pin(body),
        })
    }

    async fn request(
        &self,
        req: HttpRequest,
    ) -> Result<hyper::Response<hyper::body::Incoming>, TransportError> {
        let mut builder = hyper::Request::builder()
            .method(req.method.as_str())
            .uri(req.url.as_str());
        for (name, value) in &req.headers {
            // Header values may be secrets: name the header, never the value.
            let valid = hyper::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && hyper::header::HeaderValue::from_str(value).is_ok();
            if !valid {
                return Err(TransportError::new(format!(
                    "the header {name:?} has an invalid name or value"
                )));
            }
            builder = builder.header(name.as_str(), value.as_str());
        }
        let request = builder
            .body(Full::new(Bytes::from(req.body)))
            .map_err(|e| {
                let text = format!(
                    "cannot send to {}: {e}",
                    toolnexus_core::redact_url(&req.url)
                );
                TransportError::with_source(text, e)
            })?;
        self.client.request(request).await.map_err(|e| {
            // hyper-util's error text alone ("client error (Connect)") hides the cause.
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            TransportError::with_source(text, e)
        })
    }
}

fn response_headers<B>(resp: &hyper::Response<B>) -> Vec<(String, String)> {
    resp.headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// A streamed body that, dropped before its end (the call had its terminal
/// event), is read to its end in the background — bounded in time and
/// bytes — so its keep-alive connection goes back to the pool instead of
/// being closed. Peers that end a stream a moment after its last event
/// (the Python SDK's) then cost no new connection on the next call.
struct Drained {
    /// `None` once read to its end or failed: nothing left to drain.
    data: Option<http_body_util::BodyDataStream<hyper::body::Incoming>>,
    /// The request's place among its host's, held while its connection is busy.
    place: Option<OwnedSemaphorePermit>,
}

/// How long and how much a dropped stream is read to save its connection.
const DRAIN_FOR: Duration = Duration::from_secs(2);
const DRAIN_BYTES: usize = 64 * 1024;

impl futures_util::Stream for Drained {
    type Item = Result<Bytes, hyper::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let Some(data) = self.data.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        let next = data.poll_next_unpin(cx);
        if matches!(next, std::task::Poll::Ready(None | Some(Err(_)))) {
            self.data = None;
            self.place = None;
        }
        next
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        let Some(mut data) = self.data.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let place = self.place.take();
        runtime.spawn(async move {
            let _place = place;
            let rest = async {
                let mut read = 0;
                while let Some(Ok(bytes)) = data.next().await {
                    read += bytes.len();
                    if read > DRAIN_BYTES {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_FOR, rest).await;
        });
    }
}

impl toolnexus_core::HostBase for NativeTransport {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
    fn new_id(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
}

impl Transport for NativeTransport {
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> + Send {
        self.send_inner(request)
    }

    fn send_streaming(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<StreamingResponse, TransportError>> + Send {
        self.send_streaming_inner(request)
    }

    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until((self.epoch + Duration::from_millis(at_ms)).into())
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}
