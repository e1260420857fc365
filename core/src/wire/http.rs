//! Owned, plain HTTP boundary types. Hosts convert to and from these; the
//! core never sees a socket.

/// An HTTP request the core wants sent (client side) or has received (server side).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpRequest {
    pub method: String,
    /// Absolute URL on the client side; on the server side the path and query
    /// (an absolute URL is accepted too).
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// An HTTP response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The most characters of a peer's own text (an error message, a status
/// message) a result or an error quotes.
pub const MAX_PEER_TEXT: usize = 1_000;

/// Peer text for an error message: cut to `max` chars, with `…` if cut.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

pub(crate) fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl HttpRequest {
    /// A GET with no body.
    pub fn get(url: impl Into<String>) -> Self {
        HttpRequest {
            method: "GET".into(),
            url: url.into(),
            ..Default::default()
        }
    }

    /// A POST of a JSON body, with `Content-Type: application/json` (the
    /// official SDK servers reject JSON-RPC without it).
    pub fn post_json(url: impl Into<String>, body: Vec<u8>) -> Self {
        HttpRequest {
            method: "POST".into(),
            url: url.into(),
            headers: vec![("Content-Type".into(), "application/json".into())],
            body,
        }
    }

    /// Adds a header (builder style).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The first value of a header, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

impl HttpResponse {
    /// A response with a JSON body and `Content-Type: application/json`.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        HttpResponse {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body,
        }
    }

    /// The first value of a header, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text for error messages: lossy UTF-8, cut to `max` chars.
    pub fn body_snippet(&self, max: usize) -> String {
        snippet(String::from_utf8_lossy(&self.body).trim(), max)
    }
}
