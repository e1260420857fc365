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
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or_default()),
        None => text.to_string(),
    }
}

/// `s.parse::<u64>().ok()`, for every caller: each `parse::<u64>()` site
/// would inline its own copy of std's parser into the `.wasm`.
#[inline(never)]
pub fn parse_u64(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// Where `needle` (non-empty) first occurs in `haystack`: `str::find` for a
/// `&str` pattern, by bytes. The client path neither slices a `str` with
/// `[..]` nor searches one for a `&str` (use this and `str::get`): either
/// brings the panic message that quotes a `char` with Rust's escaping and
/// Unicode tables into the `.wasm`.
pub fn find_str(haystack: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    haystack
        .as_bytes()
        .windows(needle.len().max(1))
        .position(|w| w == needle)
}

#[cfg(feature = "spans")]
/// The authority of a URL or a `Host` header, `host[:port]`: after a
/// scheme's `://`, before a path, query or fragment, after the userinfo's
/// last `@`. On the bytes (every request's `Host` passes here); each cut is
/// at an ASCII byte, so each slice is on a char boundary.
pub(crate) fn authority(value: &str) -> &str {
    let b = value.as_bytes();
    // A bare `host:port` (nearly every `Host` header, and every request's
    // passes here twice) is its own authority: one pass over it.
    if !b.iter().any(|c| matches!(c, b'/' | b'?' | b'#' | b'@')) {
        return value;
    }
    let cut = |c: &u8| matches!(c, b'/' | b'?' | b'#');
    let start = if b.iter().any(cut) {
        find_str(value, "://").map_or(0, |at| at + 3)
    } else {
        0
    };
    let tail = b.get(start..).unwrap_or_default();
    let end = tail.iter().position(cut).map_or(b.len(), |p| start + p);
    let authority = b.get(start..end).unwrap_or_default();
    let from = authority
        .iter()
        .rposition(|&c| c == b'@')
        .map_or(start, |p| start + p + 1);
    value.get(from..end).unwrap_or_default()
}

#[cfg(feature = "server")]
/// `text` with each `needle` (non-empty) replaced by `with`, left to right:
/// `str::replace` for a `&str` pattern, through [`find_str`].
pub fn replace_str(text: &str, needle: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_str(rest, needle).filter(|_| !needle.is_empty()) {
        out.push_str(rest.get(..at).unwrap_or_default());
        out.push_str(with);
        rest = rest.get(at + needle.len()..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// Appends `bytes` as UTF-8 text, each invalid sequence as one U+FFFD: what
/// `String::from_utf8_lossy` gives, through the `str::from_utf8` check the
/// crate already has (`from_utf8_lossy` brings its own decoder and tables).
pub(crate) fn push_lossy(out: &mut String, mut bytes: &[u8]) {
    loop {
        match std::str::from_utf8(bytes) {
            Ok(text) => return out.push_str(text),
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{FFFD}');
                // `error_len` is the maximal invalid subpart, as in `from_utf8_lossy`.
                bytes = rest
                    .get(e.error_len().unwrap_or(rest.len())..)
                    .unwrap_or_default();
            }
        }
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
        let mut text = String::new();
        push_lossy(&mut text, &self.body);
        snippet(text.trim(), max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn find_str_is_str_find() {
        for (hay, needle) in [
            ("http://x/y", "://"),
            ("a${B}${C}", "${"),
            ("no", "://"),
            ("", "x"),
            ("x", "xy"),
            ("wait=30, wait", "wait"),
            ("é://", "://"),
        ] {
            assert_eq!(find_str(hay, needle), hay.find(needle), "{hay} {needle}");
        }
    }

    #[test]
    #[cfg(feature = "spans")]
    fn the_authority_is_host_and_port_without_scheme_userinfo_or_path() {
        for (value, expected) in [
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("[::1]:8080", "[::1]:8080"),
            ("https://user:pw@api.example:8443/a?b#c", "api.example:8443"),
            ("http://peer/.well-known/agent-card.json", "peer"),
            ("http://h/x@y", "h"),
            ("http://h?q=a@b", "h"),
            ("h/path", "h"),
            ("", ""),
        ] {
            assert_eq!(authority(value), expected, "{value}");
        }
    }

    #[test]
    #[cfg(feature = "server")]
    fn replace_str_is_str_replace() {
        for (text, needle) in [
            ("key sk-123 and sk-123.", "sk-123"),
            ("aaaa", "aa"),
            ("none here", "zz"),
            ("", "x"),
            ("é://x é://", "é://"),
        ] {
            assert_eq!(
                replace_str(text, needle, "[R]"),
                text.replace(needle, "[R]")
            );
        }
    }

    #[test]
    fn push_lossy_is_from_utf8_lossy() {
        let cases: [&[u8]; 10] = [
            b"",
            b"plain",
            "caf\u{e9} \u{6f22}".as_bytes(),
            b"\xff",
            b"a\xffb\xfe\xfdc",
            b"\xe6\xbc",
            b"x\xe6\xbcy",
            b"\xf0\x9f\x98",
            b"\xed\xa0\x80 surrogate",
            b"\xc0\xaf overlong \xf4\x90\x80\x80 too high",
        ];
        for bytes in cases {
            let mut out = String::from(">");
            push_lossy(&mut out, bytes);
            assert_eq!(
                out,
                format!(">{}", String::from_utf8_lossy(bytes)),
                "{bytes:?}"
            );
        }
        // Every 3-byte sequence over a few interesting bytes.
        let some = [
            0x00, 0x41, 0x7f, 0x80, 0xbf, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff,
        ];
        for a in some {
            for b in some {
                for c in some {
                    let bytes = [a, b, c, b'z'];
                    let mut out = String::new();
                    push_lossy(&mut out, &bytes);
                    assert_eq!(out, String::from_utf8_lossy(&bytes), "{bytes:?}");
                }
            }
        }
    }
}
