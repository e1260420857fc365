//! A small HTTP/1.1 server on tokio/hyper that hands every request, as a
//! plain [`HttpRequest`], to one handler function. A handler may answer with
//! an event stream ([`Reply::Stream`]): each frame is sent as it comes, and a
//! stop ends open streams so shutdown never waits on them.

use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use toolnexus_core::server::{Admission, BodyRefusal, Reply};
use toolnexus_core::{HttpRequest, HttpResponse};

use crate::head_timeout::{close_when_head_late, HeadClock, Serving};

/// Turns a request into a response.
pub type Handler = Arc<dyn Fn(HttpRequest) -> BoxFuture<'static, HttpResponse> + Send + Sync>;

/// Turns a request into a whole response or an event stream.
pub type StreamHandler = Arc<dyn Fn(HttpRequest) -> BoxFuture<'static, Reply> + Send + Sync>;

/// A whole answer (most are) as it is, without a box; an event stream boxed.
type Body = http_body_util::Either<Answering<Full<Bytes>>, BoxedBody>;
type BoxedBody = UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// Which requests the server reads and how it refuses the rest. The rules
/// are the core's ([`toolnexus_core::server::A2aServer::admit`]); the HTTP
/// server only applies them.
pub trait RequestPolicy: Send + Sync + 'static {
    /// What to do with a request, from its headers, before its body is read.
    fn admit(&self, headers: &[(String, String)]) -> Admission;
    /// The answer when the body could not be read.
    fn refuse(&self, why: BodyRefusal) -> HttpResponse;
}

/// The core's rules for a plain body limit, without CORS headers.
pub struct BodyLimit(pub usize);

impl RequestPolicy for BodyLimit {
    fn admit(&self, headers: &[(String, String)]) -> Admission {
        toolnexus_core::server::admit(headers, self.0)
    }
    fn refuse(&self, why: BodyRefusal) -> HttpResponse {
        match why {
            BodyRefusal::TooLarge => toolnexus_core::server::payload_too_large(self.0),
            BodyRefusal::Malformed => toolnexus_core::server::malformed_body(),
        }
    }
}

/// How the HTTP server treats connections.
#[derive(Clone)]
pub struct HttpOptions {
    /// What bodies are read (default: [`DEFAULT_BODY_LIMIT`], no CORS).
    pub policy: Arc<dyn RequestPolicy>,
    /// A connection that has not sent a whole request head this long after
    /// it opened or after its last answer is closed: slow senders
    /// (slowloris) and idle keep-alive connections alike. Default 15 s.
    pub head_timeout: Duration,
    /// The longest a request body may take to arrive (else 408). Default 30 s.
    pub body_timeout: Duration,
    /// Connections served at once. At the cap the connection that has
    /// waited longest for a request head (at least [`EVICT_AFTER`]: an idle
    /// keep-alive or a slow sender) is closed to make room; while none
    /// has, new clients wait in the listen backlog. Default 512.
    pub max_connections: usize,
    /// A refused body (413, 400) is read and dropped up to this many bytes
    /// and [`HttpOptions::drain_time`] before the connection closes, so
    /// the client, still sending, reads the answer instead of a reset.
    /// Default 16 MiB.
    pub drain_bytes: usize,
    /// Default 5 s.
    pub drain_time: Duration,
}

/// The connection cap used when none is given.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            policy: Arc::new(BodyLimit(DEFAULT_BODY_LIMIT)),
            head_timeout: Duration::from_secs(15),
            body_timeout: Duration::from_secs(30),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            drain_bytes: 16 * 1024 * 1024,
            drain_time: Duration::from_secs(5),
        }
    }
}

impl HttpOptions {
    /// The defaults with a plain body limit.
    pub fn with_body_limit(limit: usize) -> Self {
        HttpOptions {
            policy: Arc::new(BodyLimit(limit)),
            ..Default::default()
        }
    }
}

/// A running server. Dropping it does not stop it; call [`ServerHandle::stop`].
pub struct ServerHandle {
    /// `http://HOST:PORT` with the real port.
    pub url: String,
    pub addr: SocketAddr,
    stop: watch::Sender<Option<tokio::time::Instant>>,
    done: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// A handle on a server another crate runs (the axum A/B variant).
    #[cfg(feature = "axum-ab")]
    pub(crate) fn from_parts(
        addr: SocketAddr,
        stop: watch::Sender<Option<tokio::time::Instant>>,
        done: tokio::task::JoinHandle<()>,
    ) -> Self {
        ServerHandle {
            url: format!("http://{addr}"),
            addr,
            stop,
            done,
        }
    }

    /// Stops accepting, lets requests in flight finish (up to 5 s), then returns.
    pub async fn stop(self) {
        self.stop_within(Duration::from_secs(5)).await;
    }

    /// Stops accepting, lets requests in flight finish for up to `grace`,
    /// closes what is left, then returns.
    pub async fn stop_within(self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        let _ = self.stop.send(Some(deadline));
        // The serving task itself keeps the deadline; this bound only
        // guards against it being stuck.
        let _ = tokio::time::timeout_at(deadline + Duration::from_millis(100), self.done).await;
    }
}

/// The body limit used when none is given: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = toolnexus_core::server::DEFAULT_BODY_LIMIT;

/// Binds `addr` (port 0 picks a free one) and serves `handler` until stopped.
/// Bodies over `body_limit` bytes get 413 without reaching the handler.
pub async fn bind(
    addr: &str,
    body_limit: usize,
    handler: Handler,
) -> std::io::Result<ServerHandle> {
    bind_streaming(addr, body_limit, full_replies(handler)).await
}

fn full_replies(handler: Handler) -> StreamHandler {
    Arc::new(move |req| {
        let answer = handler(req);
        Box::pin(async move { Reply::Full(answer.await) })
    })
}

/// [`bind`] for a handler that may answer with an event stream. A stop ends
/// the streams still open (after their current frame).
pub async fn bind_streaming(
    addr: &str,
    body_limit: usize,
    handler: StreamHandler,
) -> std::io::Result<ServerHandle> {
    serve_streaming_on(TcpListener::bind(addr).await?, body_limit, handler)
}

/// A socket already bound and listening, for the `*_on` functions: a tokio
/// or a std `TcpListener` (systemd socket activation, a port chosen by a
/// test, a listener shared with other code).
pub trait Listener {
    /// The listener as tokio's. Needs a tokio runtime (with I/O) to be current.
    fn into_tokio(self) -> std::io::Result<TcpListener>;
}

impl Listener for TcpListener {
    fn into_tokio(self) -> std::io::Result<TcpListener> {
        Ok(self)
    }
}

impl Listener for std::net::TcpListener {
    fn into_tokio(self) -> std::io::Result<TcpListener> {
        self.set_nonblocking(true)?;
        TcpListener::from_std(self)
    }
}

/// [`bind`] on a listener you bound. Must be called within a tokio runtime.
pub fn serve_on(
    listener: impl Listener,
    body_limit: usize,
    handler: Handler,
) -> std::io::Result<ServerHandle> {
    serve_streaming_on(listener, body_limit, full_replies(handler))
}

/// [`bind_streaming`] on a listener you bound. Must be called within a tokio runtime.
pub fn serve_streaming_on(
    listener: impl Listener,
    body_limit: usize,
    handler: StreamHandler,
) -> std::io::Result<ServerHandle> {
    serve_with(listener, HttpOptions::with_body_limit(body_limit), handler)
}

/// At the connection cap (or out of descriptors) a connection that has
/// waited this long for a request head may be closed to let a new client
/// in; one that sends its requests promptly is never closed for this.
pub const EVICT_AFTER: Duration = Duration::from_secs(1);

/// How often the accept loop, at the cap, looks again for a connection to close.
const EVICT_RETRY: Duration = Duration::from_millis(100);

/// The connections being served, as the accept loop sees them.
struct Live {
    clocks: Vec<std::sync::Weak<HeadClock>>,
    max: usize,
}

impl Live {
    fn add(&mut self, clock: &Arc<HeadClock>) {
        // Forget closed connections now and then, so the list stays
        // within twice the cap without a scan per connection.
        if self.clocks.len() >= 2 * self.max {
            self.clocks.retain(|c| c.strong_count() > 0);
        }
        self.clocks.push(Arc::downgrade(clock));
    }

    /// Asks the connection that has waited longest for a request head, if
    /// at least [`EVICT_AFTER`], to close. Asking the same one again
    /// before it has closed changes nothing.
    fn evict_longest_waiting(&mut self) {
        self.clocks.retain(|c| c.strong_count() > 0);
        let now = tokio::time::Instant::now();
        let longest = self
            .clocks
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter_map(|c| Some((c.waiting_for(now)?, c)))
            .filter(|(waited, _)| *waited >= EVICT_AFTER)
            .max_by_key(|(waited, _)| *waited);
        if let Some((_, clock)) = longest {
            clock.evict();
        }
    }
}

/// The first wait after a failed accept; it doubles up to [`ACCEPT_BACKOFF_MAX`].
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// [`serve_streaming_on`] with every connection option. Must be called
/// within a tokio runtime.
pub fn serve_with(
    listener: impl Listener,
    options: HttpOptions,
    handler: StreamHandler,
) -> std::io::Result<ServerHandle> {
    let listener = listener.into_tokio()?;
    let addr = listener.local_addr()?;
    let (stop, mut stopped) = watch::channel(None::<tokio::time::Instant>);
    let options = Arc::new(options);
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let done = tokio::spawn(async move {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut backoff = ACCEPT_BACKOFF_MIN;
        let mut at_cap_logged = false;
        let mut live = Live {
            clocks: Vec::new(),
            max: options.max_connections.max(1),
        };
        'accept: loop {
            // A free connection slot first: at the cap, new clients wait
            // in the kernel's backlog instead of costing a descriptor here,
            // and the connection idle longest is closed to make room (else
            // a flood of idle connections would lock every client out
            // until the head timeout).
            let slot = match slots.clone().try_acquire_owned() {
                Ok(slot) => slot,
                Err(_) => {
                    if !at_cap_logged {
                        tracing::warn!(
                            "at the connection cap ({}): closing the longest idle connections to make room",
                            options.max_connections
                        );
                        at_cap_logged = true;
                    }
                    loop {
                        live.evict_longest_waiting();
                        tokio::select! {
                            slot = slots.clone().acquire_owned() => match slot {
                                Ok(slot) => break slot,
                                Err(_) => break 'accept,
                            },
                            _ = tokio::time::sleep(EVICT_RETRY) => {}
                            _ = stopped.changed() => break 'accept,
                        }
                    }
                }
            };
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stopped.changed() => break,
            };
            let stream = match accepted {
                Ok((stream, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    stream
                }
                Err(e) => {
                    // Out of descriptors (EMFILE) and the like: retrying at
                    // once would spin. Wait, longer each time, until
                    // connections close.
                    if backoff == ACCEPT_BACKOFF_MIN {
                        tracing::warn!("accepting a connection failed: {e}; backing off");
                    }
                    drop(slot);
                    // Out of descriptors, an idle connection's is the one to free.
                    live.evict_longest_waiting();
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stopped.changed() => break,
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            };
            at_cap_logged = false;
            let _ = stream.set_nodelay(true);
            let clock = HeadClock::new();
            live.add(&clock);
            // Cloned once per connection: a request then clones only this
            // connection's own Arc, not counters every core shares.
            let shared = Arc::new(Connection {
                options: options.clone(),
                handler: handler.clone(),
                stopping: stopped.clone(),
                clock: clock.clone(),
            });
            let service = service_fn(move |req| {
                let conn = shared.clone();
                async move {
                    let serving = conn.clock.serving();
                    Ok::<_, std::convert::Infallible>(handle(req, &conn, serving).await)
                }
            });
            // The head timeout is kept per connection (head_timeout.rs), not by
            // hyper's per-request timer.
            let conn = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(None)
                .serve_connection(TokioIo::new(stream), service);
            let conn = graceful.watch(conn);
            let head_timeout = options.head_timeout;
            tokio::spawn(async move {
                let _slot = slot;
                close_when_head_late(conn, clock, head_timeout).await;
            });
        }
        drop(listener);
        let deadline = *stopped.borrow();
        let deadline =
            deadline.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(5));
        let _ = tokio::time::timeout_at(deadline, graceful.shutdown()).await;
    });
    Ok(ServerHandle {
        url: format!("http://{addr}"),
        addr,
        stop,
        done,
    })
}

/// A response body that, once sent (or abandoned), lets its connection
/// wait for the next request head again.
struct Answering<B> {
    body: B,
    _serving: Serving,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Answering<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Reads and drops what is left of a refused body, bounded in bytes and
/// time, so the client, still sending, gets to read the answer (a close
/// with unread data would reset the connection under it).
async fn drain(mut body: Incoming, options: &HttpOptions) {
    let mut left = options.drain_bytes;
    let read = async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return };
            if let Some(data) = frame.data_ref() {
                if data.len() >= left {
                    return;
                }
                left -= data.len();
            }
        }
    };
    let _ = tokio::time::timeout(options.drain_time, read).await;
}

/// Reads a whole body under the limit; `Err` says why it was refused.
async fn read_body(
    body: Incoming,
    limit: usize,
) -> Result<Vec<u8>, (BodyRefusal, Option<Incoming>)> {
    let mut body = body;
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| (BodyRefusal::Malformed, None))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err((BodyRefusal::TooLarge, Some(body)));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// What every request on one connection needs.
struct Connection {
    options: Arc<HttpOptions>,
    handler: StreamHandler,
    stopping: watch::Receiver<Option<tokio::time::Instant>>,
    clock: Arc<HeadClock>,
}

async fn handle(
    req: hyper::Request<Incoming>,
    conn: &Connection,
    serving: Serving,
) -> hyper::Response<Body> {
    let options = &*conn.options;
    let (parts, body) = req.into_parts();
    let mut headers = Vec::with_capacity(parts.headers.len());
    headers.extend(
        parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string()))),
    );
    let body = match options.policy.admit(&headers) {
        Admission::Refuse(answer) => {
            drain(body, options).await;
            Err(answer)
        }
        Admission::Read { limit } => {
            let mut read = std::pin::pin!(read_body(body, limit));
            // A small body has usually arrived with its head: it is read
            // without arming (and then removing) a timer.
            let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
            let read = match first {
                Poll::Ready(read) => Ok(read),
                Poll::Pending => tokio::time::timeout(options.body_timeout, read).await,
            };
            match read {
                Ok(Ok(body)) => Ok(body),
                Ok(Err((why, rest))) => {
                    if let Some(rest) = rest {
                        drain(rest, options).await;
                    }
                    Err(options.policy.refuse(why))
                }
                Err(_) => Err(request_timeout()),
            }
        }
    };
    let response = match body {
        Ok(body) => {
            let url = parts
                .uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into());
            (conn.handler)(HttpRequest {
                method: parts.method.as_str().to_string(),
                url,
                headers,
                body,
            })
            .await
        }
        Err(answer) => Reply::Full(answer),
    };
    let (head, body): (HttpResponse, Body) = match response {
        Reply::Full(mut r) => {
            let mut bytes = std::mem::take(&mut r.body);
            // Exactly its length: `Bytes` then takes the buffer as it is,
            // without a shared header of its own to allocate (the shrink
            // stays in place when the allocator's block still fits).
            bytes.shrink_to_fit();
            let body = Answering {
                body: Full::new(Bytes::from(bytes)),
                _serving: serving,
            };
            (r, http_body_util::Either::Left(body))
        }
        Reply::Stream { head, body } => {
            // Ends with the server: a stop must not wait on an open stream.
            let mut stopping = conn.stopping.clone();
            let stop = async move {
                let _ = stopping.wait_for(|stopped| stopped.is_some()).await;
            };
            let frames = body
                .take_until(stop)
                .map(|frame| Ok(Frame::data(Bytes::from(frame))));
            let body = Answering {
                body: StreamBody::new(frames).boxed_unsync(),
                _serving: serving,
            };
            (head, http_body_util::Either::Right(body.boxed_unsync()))
        }
    };
    with_head(head, body).unwrap_or_else(|| {
        let mut r = hyper::Response::new(http_body_util::Either::Right(
            Full::new(Bytes::from_static(b"invalid response header\n")).boxed_unsync(),
        ));
        *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

/// The hyper response with `head`'s status and headers; `None` if one of
/// them is invalid. Header values move into the response (no copy).
fn with_head(head: HttpResponse, body: Body) -> Option<hyper::Response<Body>> {
    let mut r = hyper::Response::new(body);
    *r.status_mut() = hyper::StatusCode::from_u16(head.status).ok()?;
    let headers = r.headers_mut();
    headers.reserve(head.headers.len());
    for (k, v) in head.headers {
        // The header of nearly every answer without parsing its name,
        // copying its value or checking it.
        let (name, value) = if k == "Content-Type" && v == "application/json" {
            (
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            )
        } else {
            (
                hyper::header::HeaderName::from_bytes(k.as_bytes()).ok()?,
                hyper::header::HeaderValue::from_maybe_shared(Bytes::from(v)).ok()?,
            )
        };
        headers.append(name, value);
    }
    Some(r)
}

/// 408: the body did not arrive in time; the connection is closed.
fn request_timeout() -> HttpResponse {
    HttpResponse {
        status: 408,
        headers: vec![
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("Connection".into(), "close".into()),
        ],
        body: b"the request body did not arrive in time\n".to_vec(),
    }
}

/// The files of one folder, served read-only on GET and HEAD (the browser UI
/// beside an agent: `toolnexus serve --ui DIR`).
///
/// A request only ever reaches a file under the folder: `..` segments,
/// backslashes, colons, NULs and malformed percent-encodings are refused with
/// 400, dot-files are 404, and a symlink leading out of the folder is 404. A
/// folder path serves its `index.html`.
///
/// Every file is sent with a validator (`ETag` from its size and
/// modification time, `Last-Modified`) and `Cache-Control: no-cache`: a
/// reload revalidates, and an unchanged file is answered 304 without being
/// read (`If-None-Match`, else `If-Modified-Since`; RFC 9110 §13.2.2).
#[derive(Clone, Debug)]
pub struct StaticFiles {
    root: PathBuf,
}

/// A request's conditions (RFC 9110 §13.1.2 and §13.1.3).
struct Conditions {
    if_none_match: Option<String>,
    if_modified_since: Option<std::time::SystemTime>,
}

/// What a file request found.
enum Found {
    Modified {
        name: PathBuf,
        validators: Vec<(String, String)>,
        body: Vec<u8>,
    },
    NotModified {
        validators: Vec<(String, String)>,
    },
}

impl StaticFiles {
    /// Opens `dir`; fails unless it is an existing folder (`NotADirectory`
    /// when it is something else).
    pub fn open(dir: impl AsRef<Path>) -> std::io::Result<Self> {
        let root = dir.as_ref().canonicalize()?;
        if !root.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        Ok(StaticFiles { root })
    }

    /// The folder, canonicalised.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Answers a GET or HEAD of `req.url` (origin-form `/path?query`, or
    /// absolute), 304 when its conditional headers name the current file.
    pub async fn respond(&self, req: &HttpRequest) -> HttpResponse {
        let rel = match request_path(&req.url) {
            Ok(rel) => rel,
            Err(status) => return plain_text(status),
        };
        let conditions = Conditions {
            if_none_match: req.header("if-none-match").map(str::to_string),
            if_modified_since: req
                .header("if-modified-since")
                .and_then(|d| httpdate::parse_http_date(d).ok()),
        };
        let root = self.root.clone();
        let found = tokio::task::spawn_blocking(move || read_under(&root, &rel, &conditions))
            .await
            .ok()
            .flatten();
        let mut headers = vec![
            ("X-Content-Type-Options".into(), "nosniff".into()),
            // Rebuilt pages show at the next reload: always revalidated.
            ("Cache-Control".into(), "no-cache".into()),
        ];
        match found {
            Some(Found::Modified {
                name,
                validators,
                body,
            }) => {
                headers.push(("Content-Type".into(), content_type(&name)));
                headers.extend(validators);
                HttpResponse {
                    status: 200,
                    headers,
                    body,
                }
            }
            Some(Found::NotModified { validators }) => {
                headers.extend(validators);
                HttpResponse {
                    status: 304,
                    headers,
                    body: Vec::new(),
                }
            }
            None => plain_text(404),
        }
    }
}

fn plain_text(status: u16) -> HttpResponse {
    let text: &[u8] = match status {
        400 => b"bad path\n",
        _ => b"not found\n",
    };
    HttpResponse {
        status,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: text.to_vec(),
    }
}

/// The path of a request URL without origin, query or fragment.
pub fn url_path(url: &str) -> &str {
    let path = match url.find("://") {
        Some(i) if !url.starts_with('/') => {
            let rest = &url[i + 3..];
            rest.find('/').map(|j| &rest[j..]).unwrap_or("/")
        }
        _ => url,
    };
    path.split(['?', '#']).next().unwrap_or("/")
}

/// The file a URL names, relative to the served folder; `Err(400)` for a path
/// that could leave the folder or is not well percent-encoded, `Err(404)` for
/// dot-files.
fn request_path(url: &str) -> Result<PathBuf, u16> {
    let path = url_path(url);
    // A `%` must start an escape: the decoder would pass a stray one through.
    let bytes = path.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return Err(400);
    }
    let text = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| 400u16)?;
    if text.contains(['\\', '\0', ':']) {
        return Err(400);
    }
    let mut rel = PathBuf::new();
    for segment in text.split('/') {
        match segment {
            "" | "." => {}
            ".." => return Err(400),
            s if s.starts_with('.') => return Err(404),
            s => rel.push(s),
        }
    }
    Ok(rel)
}

/// `root/rel` (its `index.html` for a folder) when the real file, symlinks
/// resolved, is inside `root`: 304 when `conditions` name it as it is now
/// (it is not read), else its bytes.
fn read_under(root: &Path, rel: &Path, conditions: &Conditions) -> Option<Found> {
    let mut path = root.join(rel);
    if path.is_dir() {
        path.push("index.html");
    }
    let real = path.canonicalize().ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    if !real.starts_with(root) || !meta.is_file() {
        return None;
    }
    let modified = meta.modified().ok();
    let since_epoch = modified
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    // Weak: size and time tell a change, not byte equality.
    let etag = format!("W/\"{:x}-{:x}\"", meta.len(), since_epoch.as_nanos());
    let unchanged = match (&conditions.if_none_match, conditions.if_modified_since) {
        // If-None-Match decides when present (RFC 9110 §13.2.2); weak comparison.
        (Some(tags), _) => tags
            .split(',')
            .map(str::trim)
            .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag.trim_start_matches("W/")),
        // Dates have whole seconds: the file's time is rounded down to one.
        (None, Some(since)) => {
            modified.is_some()
                && std::time::UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs()) <= since
        }
        (None, None) => false,
    };
    let mut validators = vec![("ETag".to_string(), etag)];
    if let Some(m) = modified {
        validators.push(("Last-Modified".to_string(), httpdate::fmt_http_date(m)));
    }
    if unchanged {
        return Some(Found::NotModified { validators });
    }
    let body = std::fs::read(&real).ok()?;
    Some(Found::Modified {
        name: path,
        validators,
        body,
    })
}

/// The Content-Type for a file name's extension (`mime_guess`), with UTF-8
/// named for text and scripts.
pub fn content_type(name: &Path) -> String {
    let mime = mime_guess::from_path(name)
        .first_raw()
        .unwrap_or("application/octet-stream");
    if mime.starts_with("text/") || mime == "application/javascript" {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_stay_inside_the_folder() {
        assert_eq!(request_path("/"), Ok(PathBuf::new()));
        assert_eq!(request_path("/app.js?v=1"), Ok(PathBuf::from("app.js")));
        assert_eq!(
            request_path("http://h:1/a/./b.css"),
            Ok(PathBuf::from("a/b.css"))
        );
        assert_eq!(request_path("/a%20b.txt"), Ok(PathBuf::from("a b.txt")));
        for bad in [
            "/../Cargo.toml",
            "/a/../../x",
            "/%2e%2e/Cargo.toml",
            "/%2E%2E%2FCargo.toml",
            "/..%5cCargo.toml",
            "/a%00b",
            "/%zz",
            "/%2",
            "/c:/x",
            "/%ff",
        ] {
            assert_eq!(request_path(bad), Err(400), "{bad}");
        }
        assert_eq!(request_path("/.git/config"), Err(404));
        assert_eq!(request_path("/%252e%252e/x"), Ok(PathBuf::from("%2e%2e/x")));
    }

    #[test]
    fn content_types_by_extension() {
        assert_eq!(content_type(Path::new("a.wasm")), "application/wasm");
        assert_eq!(
            content_type(Path::new("index.HTML")),
            "text/html; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("x")), "application/octet-stream");
        assert_eq!(
            content_type(Path::new("app.js")),
            "text/javascript; charset=utf-8"
        );
    }
}
