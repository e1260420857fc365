//! The only door to the world: hosts implement [`Transport`].

use crate::error::TransportError;
use crate::wire::http::{HttpRequest, HttpResponse};
use futures_util::Stream;
use std::future::Future;

/// `Send` on native targets (so servers can spawn the futures on a
/// multi-threaded runtime); nothing on wasm32, where `fetch` futures are not `Send`.
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSend: Send {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Send + ?Sized> MaybeSend for T {}
#[cfg(target_arch = "wasm32")]
pub trait MaybeSend {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSend for T {}

/// `Sync` on native targets, nothing on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSync: Sync {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Sync + ?Sized> MaybeSync for T {}
#[cfg(target_arch = "wasm32")]
pub trait MaybeSync {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSync for T {}

/// Everything the core needs from its host: HTTP, time, fresh ids and
/// environment lookups. Implementations stay thin; no protocol logic here.
/// What every host gives every machine, client and server alike: ids and
/// the clocks. [`Transport`] (the client's host) and
/// [`ServerHost`](crate::server::ServerHost) both build on it, so a host
/// implements these once, with one shape. Times are `u64` milliseconds
/// everywhere (the one time type of core's machines).
pub trait HostBase: MaybeSend + MaybeSync {
    /// A fresh unique id (message ids, task ids).
    fn new_id(&self) -> String;

    /// Milliseconds on a monotonic clock; only differences matter.
    fn now_ms(&self) -> u64;

    /// The wall clock in Unix milliseconds, for status timestamps (and
    /// ListTasks' `statusTimestampAfter`). Hosts without one keep the
    /// default: tasks then carry no timestamps.
    fn unix_ms(&self) -> Option<u64> {
        None
    }
}

/// Shared hosts are hosts.
impl<T: HostBase + ?Sized> HostBase for std::sync::Arc<T> {
    fn new_id(&self) -> String {
        (**self).new_id()
    }
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
    fn unix_ms(&self) -> Option<u64> {
        (**self).unix_ms()
    }
}

pub trait Transport: HostBase {
    /// Sends one HTTP request and returns the whole response. A non-2xx status
    /// is a response, not an error; only "no answer at all" is an error.
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> + MaybeSend;

    /// Sends one HTTP request and returns the response as soon as its head
    /// arrives; the body follows in chunks (an SSE stream is read as it comes).
    /// Hosts that can only deliver whole bodies keep the default: the body is
    /// then one chunk.
    fn send_streaming(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<StreamingResponse, TransportError>> + MaybeSend {
        let whole = self.send(request);
        async move { whole.await.map(StreamingResponse::whole) }
    }

    /// Completes at (or soon after) the instant `at_ms` of [`HostBase::now_ms`].
    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + MaybeSend;

    /// An environment variable, for `${NAME}` expansion in header values.
    /// Hosts without an environment keep the default (unset).
    fn env(&self, _name: &str) -> Option<String> {
        None
    }

    /// A bearer token from the host's own source `key` (an
    /// [`crate::Auth::HostToken`], e.g. a JS `getToken`), asked before each
    /// call and, with `refused`, once more after the agent answered 401 to
    /// the previous one. Hosts without such sources keep the default.
    fn host_token(
        &self,
        key: &str,
        refused: bool,
    ) -> impl Future<Output = Result<String, crate::Error>> + MaybeSend {
        let _ = refused;
        let why = format!("this host has no token source {key:?}");
        async move { Err(crate::Error::Misuse(why)) }
    }
}

/// Shared transports are transports.
impl<T: Transport + ?Sized> Transport for std::sync::Arc<T> {
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> + MaybeSend {
        (**self).send(request)
    }
    fn send_streaming(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<StreamingResponse, TransportError>> + MaybeSend {
        (**self).send_streaming(request)
    }
    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + MaybeSend {
        (**self).sleep_until(at_ms)
    }
    fn env(&self, name: &str) -> Option<String> {
        (**self).env(name)
    }
    fn host_token(
        &self,
        key: &str,
        refused: bool,
    ) -> impl Future<Output = Result<String, crate::Error>> + MaybeSend {
        (**self).host_token(key, refused)
    }
}

/// A boxed future: `Send` on native targets, not on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// A boxed future: `Send` on native targets, not on wasm32.
#[cfg(target_arch = "wasm32")]
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + 'a>>;

/// A boxed stream: `Send` on native targets, not on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type BoxStream<'a, T> = std::pin::Pin<Box<dyn Stream<Item = T> + Send + 'a>>;
/// A boxed stream: `Send` on native targets, not on wasm32.
#[cfg(target_arch = "wasm32")]
pub type BoxStream<'a, T> = std::pin::Pin<Box<dyn Stream<Item = T> + 'a>>;

/// A response body arriving in chunks; an `Err` ends it (the connection broke).
pub type BodyStream = BoxStream<'static, Result<Vec<u8>, TransportError>>;

/// A response whose body is read as it arrives ([`Transport::send_streaming`]).
pub struct StreamingResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: BodyStream,
}

impl StreamingResponse {
    /// A whole response as a stream of one chunk (none if the body is empty).
    pub fn whole(response: HttpResponse) -> Self {
        let chunk = (!response.body.is_empty()).then_some(Ok(response.body));
        StreamingResponse {
            status: response.status,
            headers: response.headers,
            body: Box::pin(futures_util::stream::iter(chunk)),
        }
    }

    /// The first value of a header, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::wire::http::find_header(&self.headers, name)
    }
}

impl std::fmt::Debug for StreamingResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamingResponse")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}
