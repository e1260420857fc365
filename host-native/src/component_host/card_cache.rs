//! A host cache under the component's Agent Card requests: the component
//! still asks for its card over wasi:http, and the host answers from its
//! cache while the card is fresh, revalidates it when stale, and stores
//! what the server allows, as it does for the native engine (the CLI's card
//! cache). Only a GET of the one card URL is looked at; every other request
//! goes out untouched.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::http::{HeaderName, HeaderValue, Method, Response, StatusCode, Uri};
use std::future::Future;
use std::sync::Arc;
use toolnexus_core::HttpResponse;
use wasmtime_wasi_http::{
    default_send_request, Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks,
};

/// Where cached cards live (the CLI's card cache implements it).
pub trait CardStore: Send + Sync {
    /// The stored card of `url` while it is fresh (and still readable).
    fn fresh(&self, url: &str) -> Option<Vec<u8>>;
    /// The conditional headers (`If-None-Match`, `If-Modified-Since`) of
    /// the stored card of `url`, to revalidate it.
    fn validators(&self, url: &str) -> Vec<(String, String)>;
    /// The server's answer to a card GET: stores, renews or drops the entry.
    /// On a 304, returns the stored card to answer with.
    fn update(&self, url: &str, response: &HttpResponse) -> Option<Vec<u8>>;
}

/// The hooks of one instance: the card URL it caches, and the store.
pub(super) struct CardHook {
    pub(super) card: String,
    pub(super) uri: Uri,
    pub(super) store: Arc<dyn CardStore>,
    /// The most card bytes worth reading (the agent's limit, plus one so the
    /// component sees that a card is over it).
    pub(super) max_bytes: u64,
}

type Io = Box<dyn Future<Output = Result<(), HttpError>> + Send>;
type Sent = Box<dyn Future<Output = Result<(Response<WasiBody>, Io), HttpError>> + Send>;

fn full(status: u16, headers: &[(String, String)], body: Vec<u8>) -> Response<WasiBody> {
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    for (k, v) in headers {
        // The body is whole now: its framing headers no longer apply.
        if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding") {
            continue;
        }
        if let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v)) {
            resp.headers_mut().append(k, v);
        }
    }
    resp
}

fn done() -> Io {
    Box::new(async { Ok(()) })
}

impl WasiHttpHooks for CardHook {
    fn send_request(
        &mut self,
        mut request: hyper::http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Sent {
        if request.method() != Method::GET || request.uri() != &self.uri {
            return Box::new(async move {
                let (resp, io) = default_send_request(request, options).await?;
                Ok((resp.map(BodyExt::boxed_unsync), Box::new(io) as Io))
            });
        }
        let (card, store, max_bytes) = (self.card.clone(), self.store.clone(), self.max_bytes);
        Box::new(async move {
            let json = [("content-type".to_string(), "application/json".to_string())];
            if let Some(body) = store.fresh(&card) {
                return Ok((full(200, &json, body), done()));
            }
            for (k, v) in store.validators(&card) {
                if let (Ok(k), Ok(v)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
                    request.headers_mut().insert(k, v);
                }
            }
            let (resp, io) = default_send_request(request, options).await?;
            // The connection's I/O runs beside the body read it feeds.
            let io = tokio::spawn(io);
            let (head, body) = resp.into_parts();
            let mut body = body.boxed_unsync();
            let mut bytes = Vec::new();
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame?.into_data() {
                    bytes.extend_from_slice(&data);
                }
                if bytes.len() as u64 > max_bytes {
                    break;
                }
            }
            let io: Io = Box::new(async move { io.await.unwrap_or(Ok(())) });
            let headers: Vec<(String, String)> = head
                .headers
                .iter()
                .filter_map(|(k, v)| Some((k.to_string(), v.to_str().ok()?.to_string())))
                .collect();
            let seen = HttpResponse {
                status: head.status.as_u16(),
                headers: headers.clone(),
                body: bytes,
            };
            if bytes_over(&seen, max_bytes) {
                return Ok((full(seen.status, &headers, seen.body), io));
            }
            match store.update(&card, &seen) {
                Some(stored) if seen.status == 304 => Ok((full(200, &json, stored), io)),
                _ => Ok((full(seen.status, &headers, seen.body), io)),
            }
        })
    }
}

/// A card over the limit is neither stored nor looked at: the component says so.
fn bytes_over(resp: &HttpResponse, max_bytes: u64) -> bool {
    resp.body.len() as u64 > max_bytes
}
