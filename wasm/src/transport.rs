//! The core's `Transport` over what every JS runtime has on its global scope:
//! `fetch`, `setTimeout`, `performance.now()`, `crypto.randomUUID()` and, in
//! Node, `process.env`. Nothing here assumes `window` (Node and workerd have none).

use crate::convert::{error_text, get, pairs_to_js, set};
use js_sys::{Object, Promise, Uint8Array};
use std::future::Future;
use toolnexus_core::{
    HttpRequest, HttpResponse, MaybeSend, StreamingResponse, Transport, TransportError,
};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// The largest response body read (a card or a task), as in the native host.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (looked up at call time, so a polyfill installed
    /// after loading is used too).
    #[wasm_bindgen(js_name = fetch, catch)]
    fn global_fetch(url: &str, init: &Object) -> Result<Promise, JsValue>;

    type FetchResponse;
    #[wasm_bindgen(method, getter)]
    fn status(this: &FetchResponse) -> u16;
    #[wasm_bindgen(method, getter)]
    fn headers(this: &FetchResponse) -> JsValue;
    #[wasm_bindgen(method, catch, js_name = arrayBuffer)]
    fn array_buffer(this: &FetchResponse) -> Result<Promise, JsValue>;
    /// The body as a `ReadableStream`, or null (no body).
    #[wasm_bindgen(method, getter)]
    fn body(this: &FetchResponse) -> JsValue;

    type ReadableBody;
    #[wasm_bindgen(method, catch, js_name = getReader)]
    fn get_reader(this: &ReadableBody) -> Result<BodyReader, JsValue>;

    type BodyReader;
    #[wasm_bindgen(method, catch)]
    fn read(this: &BodyReader) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, js_name = cancel)]
    fn cancel_reader(this: &BodyReader) -> Promise;

    #[wasm_bindgen(js_name = AbortController)]
    type Controller;
    #[wasm_bindgen(constructor, js_class = "AbortController", catch)]
    fn new() -> Result<Controller, JsValue>;
    #[wasm_bindgen(method, getter)]
    fn signal(this: &Controller) -> JsValue;
    #[wasm_bindgen(method)]
    fn abort(this: &Controller);

    #[wasm_bindgen(js_name = setTimeout, catch)]
    fn set_timeout(handler: &js_sys::Function, ms: i32) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);

    #[wasm_bindgen(js_namespace = performance, js_name = now, catch)]
    fn performance_now() -> Result<f64, JsValue>;
    #[wasm_bindgen(js_namespace = crypto, js_name = randomUUID, catch)]
    fn random_uuid() -> Result<String, JsValue>;
}

/// HTTP over the global `fetch`, timers over `setTimeout`. Stateless: every
/// toolkit, tool and handler shares the runtime's own connection handling.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsTransport;

/// Aborts the request when the call stops waiting for it (the core dropped
/// the future on a timeout or an abort), so no fetch outlives its call.
struct AbortOnDrop(Option<Controller>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.abort();
        }
    }
}

/// Header names are tokens; values have no CR, LF or NUL. Checked here so
/// that the runtime's error (which may quote the value, a secret) never shows.
fn check_header(name: &str, value: &str) -> Result<(), TransportError> {
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    // By bytes: in UTF-8 these three are never part of another character
    // (and a char-array pattern is its own searcher in the .wasm).
    let value_ok = !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0));
    if name_ok && value_ok {
        Ok(())
    } else {
        let name = toolnexus_core::quoted(name);
        Err(TransportError::new(format!(
            "the header {name} has an invalid name or value"
        )))
    }
}

/// Starts a fetch: the response head, and the guard that aborts it when dropped.
async fn fetch_head(req: HttpRequest) -> Result<(FetchResponse, AbortOnDrop), TransportError> {
    for (name, value) in &req.headers {
        check_header(name, value)?;
    }
    let init = Object::new();
    set(&init, "method", &req.method.as_str().into());
    set(&init, "headers", &pairs_to_js(&req.headers));
    if !req.body.is_empty() {
        set(&init, "body", &Uint8Array::from(&req.body[..]).into());
    }
    let guard = AbortOnDrop(Controller::new().ok());
    if let Some(c) = &guard.0 {
        set(&init, "signal", &c.signal());
    }
    let promise = global_fetch(&req.url, &init).map_err(|e| TransportError::new(error_text(&e)))?;
    let resp: FetchResponse = JsFuture::from(promise)
        .await
        .map_err(|e| TransportError::new(error_text(&e)))?
        .unchecked_into();
    Ok((resp, guard))
}

/// The body read chunk by chunk from its `ReadableStream` reader.
///
/// Dropped before its end (the call had its terminal event), the rest is
/// read in the background for a moment — [`DRAIN_MS`], [`DRAIN_BYTES`] — so
/// a peer that ends its stream just after the last event (the Python SDK
/// server) leaves the runtime a reusable keep-alive connection; past that
/// bound the reader is canceled and the fetch aborted, so no fetch outlives
/// its call by more than the bound.
struct Reader {
    reader: Option<BodyReader>,
    guard: AbortOnDrop,
}

/// How long and how much a dropped stream is read to save its connection.
const DRAIN_MS: u32 = 500;
const DRAIN_BYTES: usize = 64 * 1024;

impl Drop for Reader {
    fn drop(&mut self) {
        let Some(reader) = self.reader.take() else {
            return;
        };
        let mut guard = AbortOnDrop(self.guard.0.take());
        wasm_bindgen_futures::spawn_local(async move {
            let rest = async {
                let mut read = 0;
                loop {
                    let Ok(p) = reader.read() else { return false };
                    match JsFuture::from(p).await {
                        Ok(chunk) if get(&chunk, "done").is_truthy() => return true,
                        Ok(chunk) => {
                            read += Uint8Array::new(&get(&chunk, "value")).length() as usize;
                            if read > DRAIN_BYTES {
                                return false;
                            }
                        }
                        Err(_) => return false,
                    }
                }
            };
            let timer = Timer::new(DRAIN_MS);
            let ended = match futures_util::future::select(Box::pin(rest), timer).await {
                futures_util::future::Either::Left((ended, _)) => ended,
                futures_util::future::Either::Right(_) => false,
            };
            if ended {
                // Ended cleanly: nothing to abort; the connection is the runtime's to reuse.
                drop(guard.0.take());
            } else {
                // The promise only says when the cancel finished; nobody waits for it.
                let _ = reader.cancel_reader();
                drop(guard);
            }
        });
    }
}

/// The body as a stream of chunks: one `read()` of the reader at a time.
/// Written out rather than with `futures_util::stream::unfold`, whose async
/// step is a state machine of its own.
struct Body {
    /// The `read()` under way.
    pending: Option<JsFuture>,
    state: Reader,
}

impl futures_util::Stream for Body {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        let Some(reader) = this.state.reader.as_ref() else {
            // Ended by an error: the fetch is aborted (when still going).
            this.state.guard = AbortOnDrop(None);
            return Poll::Ready(None);
        };
        let read = match this.pending.as_mut() {
            Some(p) => std::pin::Pin::new(p).poll(cx),
            None => match reader.read() {
                Ok(p) => std::pin::Pin::new(this.pending.insert(JsFuture::from(p))).poll(cx),
                Err(e) => Poll::Ready(Err(e)),
            },
        };
        let Poll::Ready(read) = read else {
            return Poll::Pending;
        };
        this.pending = None;
        Poll::Ready(match read {
            Err(e) => {
                this.state.reader = None;
                Some(Err(TransportError::new(format!(
                    "reading the answer failed: {}",
                    error_text(&e)
                ))))
            }
            Ok(chunk) if get(&chunk, "done").is_truthy() => {
                // Ended cleanly: nothing left to cancel or abort.
                drop(this.state.reader.take());
                drop(this.state.guard.0.take());
                None
            }
            Ok(chunk) => Some(Ok(Uint8Array::new(&get(&chunk, "value")).to_vec())),
        })
    }
}

async fn send_streaming(req: HttpRequest) -> Result<StreamingResponse, TransportError> {
    let (resp, guard) = fetch_head(req).await?;
    let status = resp.status();
    let headers = crate::convert::header_pairs(&resp.headers());
    let stream = resp.body();
    let reader = if stream.is_null() || stream.is_undefined() {
        None
    } else {
        let stream: ReadableBody = stream.unchecked_into();
        Some(
            stream
                .get_reader()
                .map_err(|e| TransportError::new(error_text(&e)))?,
        )
    };
    let body = Body {
        pending: None,
        state: Reader { reader, guard },
    };
    Ok(StreamingResponse {
        status,
        headers,
        body: Box::pin(body),
    })
}

pub(crate) async fn send(req: HttpRequest) -> Result<HttpResponse, TransportError> {
    let (resp, mut guard) = fetch_head(req).await?;
    let status = resp.status();
    let headers = crate::convert::header_pairs(&resp.headers());
    let declared = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| crate::convert::parse_usize(v.trim()));
    let too_large = || {
        TransportError::new(format!(
            "the answer is larger than {MAX_RESPONSE_BYTES} bytes"
        ))
    };
    if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES) {
        return Err(too_large());
    }
    let read = resp
        .array_buffer()
        .map_err(|e| TransportError::new(error_text(&e)))?;
    let buffer = JsFuture::from(read).await.map_err(|e| {
        TransportError::new(format!("reading the answer failed: {}", error_text(&e)))
    })?;
    let body = Uint8Array::new(&buffer).to_vec();
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(too_large());
    }
    // Finished: nothing left to abort.
    guard.0 = None;
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Milliseconds from `performance.now()` (monotonic), else `Date.now()`.
/// A `setTimeout` that fires at `at_ms` of [`now_ms`]. setTimeout takes a
/// signed 32-bit delay; longer waits wake early and the core simply sleeps
/// again. Dropping the future clears the timer, so an abandoned sleep never
/// keeps Node's event loop alive.
pub fn timer_until(at_ms: u64) -> Timer {
    let delay = at_ms.saturating_sub(now_ms()).min(i32::MAX as u64) as u32;
    Timer::new(delay)
}

/// A `setTimeout` as a future: ready when it fires; dropped, it clears the
/// timer. It waits on a promise the timer resolves (the `JsFuture` every
/// fetch already uses), not on a channel and a closure of its own.
pub struct Timer {
    id: JsValue,
    fired: JsFuture,
}

impl Timer {
    /// Starts the timer now (`setTimeout(resolve, ms)`).
    pub fn new(ms: u32) -> Timer {
        let mut resolve = None;
        let fired = Promise::new(&mut |res, _rej| resolve = Some(res));
        // The executor runs synchronously, so `resolve` is set.
        let id = match &resolve {
            Some(resolve) => set_timeout(resolve, ms as i32).unwrap_throw(),
            None => JsValue::UNDEFINED,
        };
        Timer {
            id,
            fired: JsFuture::from(fired),
        }
    }
}

impl Future for Timer {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        std::pin::Pin::new(&mut self.fired).poll(cx).map(|_| ())
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        clear_timeout(&self.id);
    }
}

pub fn now_ms() -> u64 {
    performance_now().unwrap_or_else(|_| js_sys::Date::now()) as u64
}

/// `crypto.randomUUID()`, or a version-4 UUID from `Math.random()` where the
/// runtime has no Web Crypto (Node 18 without the global, old browsers).
pub fn new_id() -> String {
    random_uuid().unwrap_or_else(|_| {
        let mut b = [0u8; 16];
        for byte in &mut b {
            *byte = (js_sys::Math::random() * 256.0) as u8;
        }
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let mut id = String::with_capacity(36);
        for (i, x) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                id.push('-');
            }
            for nibble in [x >> 4, x & 0xf] {
                id.push(char::from(b"0123456789abcdef"[usize::from(nibble)]));
            }
        }
        id
    })
}

impl toolnexus_core::HostBase for JsTransport {
    fn now_ms(&self) -> u64 {
        now_ms()
    }
    fn new_id(&self) -> String {
        new_id()
    }
}

impl Transport for JsTransport {
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> + MaybeSend {
        send(request)
    }

    fn send_streaming(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<StreamingResponse, TransportError>> + MaybeSend {
        send_streaming(request)
    }

    fn sleep_until(&self, at_ms: u64) -> impl Future<Output = ()> + MaybeSend {
        timer_until(at_ms)
    }

    /// `process.env[name]` where there is a `process` (Node, workerd with
    /// `nodejs_compat`); browsers have no environment.
    fn env(&self, name: &str) -> Option<String> {
        let process = get(&js_sys::global(), "process");
        get(&get(&process, "env"), name).as_string()
    }

    /// The agent's `getToken` (see `credentials`).
    fn host_token(
        &self,
        key: &str,
        refused: bool,
    ) -> impl Future<Output = Result<String, toolnexus_core::Error>> + MaybeSend {
        crate::credentials::host_token(key.to_string(), refused)
    }
}
