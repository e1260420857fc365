//! What the server accepts and how it refuses, decided here so every host
//! applies the same rules: the CORS origin it answers browsers with, the
//! request body limit and the checks on a request's head, and the health
//! state operators read.

use crate::wire::http::{find_str, HttpResponse};
use crate::wire::json::quoted;

/// The largest request body hosts accept by default (1 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// The path of the health check (with an A2A profile): `200` while every
/// save has worked, `503` once a task state could not be saved (until a
/// later save works again).
pub const HEALTH_PATH: &str = "/healthz";

/// An option that cannot be used, found when the server is configured
/// (never at a request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidOption {
    /// The option, as a user names it (`cors origin`).
    pub option: &'static str,
    /// What is wrong and what is accepted.
    pub reason: String,
}

impl std::fmt::Display for InvalidOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid {}: {}", self.option, self.reason)
    }
}

impl std::error::Error for InvalidOption {}

/// The `Access-Control-Allow-Origin` a server sends: `*`, `null`, one
/// origin (`scheme://host[:port]`), or a list of origins (the request's
/// `Origin` is echoed when it is one of them, and nothing is sent
/// otherwise). Checked when made, so it can never turn a response into an
/// invalid one (a CR or LF would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsOrigin {
    origins: Vec<String>,
    private_network: bool,
}

impl CorsOrigin {
    /// `*`: any page may read the answers.
    pub fn any() -> CorsOrigin {
        CorsOrigin {
            origins: vec!["*".into()],
            private_network: false,
        }
    }

    /// Checks `value` (surrounding spaces and tabs ignored; a CR or LF anywhere is refused).
    pub fn parse(value: &str) -> Result<CorsOrigin, InvalidOption> {
        Ok(CorsOrigin {
            origins: vec![parse_origin(value)?],
            private_network: false,
        })
    }

    /// Several origins (each as [`CorsOrigin::parse`] checks it; `*`
    /// only alone). Empty: `None`.
    pub fn list<S: AsRef<str>>(values: &[S]) -> Result<Option<CorsOrigin>, InvalidOption> {
        let origins = values
            .iter()
            .map(|v| parse_origin(v.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if origins.len() > 1 && origins.iter().any(|o| o == "*") {
            return Err(InvalidOption {
                option: "CORS origin",
                reason: "* allows every origin: give it alone, or list origins".into(),
            });
        }
        Ok((!origins.is_empty()).then_some(CorsOrigin {
            origins,
            private_network: false,
        }))
    }

    /// Also answer Private Network Access preflights
    /// (`Access-Control-Request-Private-Network: true`) with
    /// `Access-Control-Allow-Private-Network: true`, so pages on public
    /// origins may call this server on a private address. Off by default.
    pub fn with_private_network(mut self, allow: bool) -> CorsOrigin {
        self.private_network = allow;
        self
    }

    /// Whether Private Network Access preflights are allowed.
    pub fn private_network(&self) -> bool {
        self.private_network
    }

    /// The header value for a request from `origin` (its `Origin`
    /// header): `*`, the one configured origin, or `origin` when listed;
    /// `None`: send no CORS headers.
    pub fn allow<'a>(&'a self, origin: Option<&'a str>) -> Option<&'a str> {
        match self.origins.as_slice() {
            [one] => Some(one),
            many => {
                let origin = origin?;
                many.iter()
                    .find(|o| o.eq_ignore_ascii_case(origin))
                    .map(String::as_str)
            }
        }
    }

    /// The configured origins.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// The header value when one origin (or `*`) is configured; the first
    /// of a list otherwise.
    pub fn as_str(&self) -> &str {
        self.origins.first().map_or("", String::as_str)
    }
}

fn parse_origin(value: &str) -> Result<String, InvalidOption> {
    let v = value.trim_matches([' ', '\t']);
    let origin = |v: &str| {
        find_str(v, "://").is_some_and(|at| {
            let scheme = v.get(..at).unwrap_or_default();
            let rest = v.get(at + 3..).unwrap_or_default();
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && !rest.is_empty()
                && !rest.contains(['/', '?', '#', ',', '@'])
        })
    };
    // Printable ASCII only: no space, CR or LF can reach a header.
    if v.chars().all(|c| c.is_ascii_graphic()) && (v == "*" || v == "null" || origin(v)) {
        return Ok(v.into());
    }
    Err(InvalidOption {
        option: "CORS origin",
        reason: format!(
            "{}: use *, null or one origin, scheme://host[:port], in printable ASCII (no spaces, CR, LF or path)",
            quoted(v)
        ),
    })
}

impl std::fmt::Display for CorsOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.origins.join(", "))
    }
}

/// Whether `host` (a host name or IP literal, without port; IPv6 in
/// brackets) is loopback: `localhost` (and `*.localhost`), `127.x.y.z`,
/// `[::1]`.
pub fn is_loopback_host(host: &str) -> bool {
    // On the bytes, with no allocation: every request's `Host` passes here.
    let mut host = host;
    while let Some(h) = host.strip_suffix('.') {
        host = h;
    }
    let b = host.as_bytes();
    let suffix = b".localhost";
    // The loopback address nearly every local client names, before the
    // general checks (an IPv4 parse).
    host == "127.0.0.1"
        || b.eq_ignore_ascii_case(b"localhost")
        || b.len()
            .checked_sub(suffix.len())
            .and_then(|at| b.get(at..))
            .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
        || host == "[::1]"
        // `parse_ip`, not std's parser (kilobytes of the npm `.wasm`): an
        // IPv4 literal is what `parse::<Ipv4Addr>` reads.
        || matches!(super::ip::parse_ip(host), Some(std::net::IpAddr::V4(ip)) if ip.is_loopback())
}

/// The `Host` headers a server answers, against DNS rebinding (a page on
/// an attacker's name that resolves to this server): loopback names
/// always, plus the names listed here (the bound address, the host of the
/// public URL). Other hosts get [`misdirected`] (421).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowedHosts {
    names: Vec<String>,
    any_ip: bool,
}

impl AllowedHosts {
    /// Loopback names only.
    pub fn loopback() -> AllowedHosts {
        AllowedHosts::default()
    }

    /// Also `host` (a name or IP literal, `[v6]` in brackets; a port or a
    /// whole URL is fine: only its host is kept).
    pub fn with(mut self, host: &str) -> AllowedHosts {
        let h = host_of(host).to_ascii_lowercase();
        if !h.is_empty() && !self.names.contains(&h) {
            self.names.push(h);
        }
        self
    }

    /// Also every IP literal (a server bound to all interfaces). An IP
    /// literal cannot be rebound: rebinding needs a name.
    pub fn with_any_ip(mut self) -> AllowedHosts {
        self.any_ip = true;
        self
    }

    /// Whether a request with this `Host` header (`None`: none) is answered.
    pub fn allows(&self, host_header: Option<&str>) -> bool {
        let Some(h) = host_header.map(str::trim).filter(|h| !h.is_empty()) else {
            return false;
        };
        let host = host_of(h);
        if is_loopback_host(host) {
            return true;
        }
        let lower = host.trim_end_matches('.').to_ascii_lowercase();
        if self.names.contains(&lower) {
            return true;
        }
        self.any_ip
            && (matches!(super::ip::parse_ip(&lower), Some(std::net::IpAddr::V4(_)))
                || lower
                    .strip_prefix('[')
                    .and_then(|v| v.strip_suffix(']'))
                    .is_some_and(|v| {
                        matches!(super::ip::parse_ip(v), Some(std::net::IpAddr::V6(_)))
                    }))
    }
}

/// The host of a `Host` header or URL: no scheme, userinfo, path or port.
fn host_of(value: &str) -> &str {
    super::jwks::host_only(crate::wire::http::authority(value))
}

/// The answer to a request whose `Host` is not this server's: 421.
pub fn misdirected() -> HttpResponse {
    HttpResponse {
        status: 421,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: b"misdirected request: this server does not answer for that Host\n".to_vec(),
    }
}

/// Whether a POST with this `Content-Type` may be a call: none at all
/// (programs often send none), or a JSON media type (`application/json`,
/// `application/a2a+json`, any `+json`). A form, multipart or `text/plain`
/// body is what a page on any origin may send without a CORS preflight (a
/// "simple request"): it is refused before it runs, so no page can start a
/// task blind, whatever the CORS settings.
pub fn call_content_type(content_type: Option<&str>) -> bool {
    let Some(v) = content_type else {
        return true;
    };
    // On the bytes, with no allocation: every POST (GetTask included) passes here.
    let media = v.as_bytes();
    let end = media.iter().position(|&b| b == b';').unwrap_or(media.len());
    let media = media.get(..end).unwrap_or_default().trim_ascii();
    let ends = |suffix: &[u8]| {
        media.len() >= suffix.len()
            && media
                .get(media.len() - suffix.len()..)
                .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
    };
    ends(b"/json") || ends(b"+json") || media.eq_ignore_ascii_case(b"application/json-rpc")
}

/// The answer to a POST whose body is not JSON: 415.
pub fn not_json() -> HttpResponse {
    HttpResponse {
        status: 415,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: b"unsupported media type: send calls as application/json\n".to_vec(),
    }
}

/// What a host does with a request after [`super::A2aServer::admit`] read its head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Read the body, refusing it ([`BodyRefusal::TooLarge`]) past `limit` bytes.
    Read { limit: usize },
    /// Answer this at once; do not hand the request to the server. The
    /// body is not wanted: drain it (bounded) before closing, so the
    /// client reads this answer rather than a reset connection.
    Refuse(HttpResponse),
}

/// Why a host could not read a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRefusal {
    /// More bytes than the limit: 413.
    TooLarge,
    /// Malformed framing (a bad chunk size, a body cut short of its
    /// `Content-Length`): 400.
    Malformed,
}

/// The answer to an over-limit body: 413, and the connection closed.
pub fn payload_too_large(limit: usize) -> HttpResponse {
    HttpResponse {
        status: 413,
        headers: vec![
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("Connection".into(), "close".into()),
        ],
        body: format!("request body over the {limit}-byte limit\n").into_bytes(),
    }
}

/// The answer to a body whose framing is broken: 400, and the connection closed.
pub fn malformed_body() -> HttpResponse {
    HttpResponse {
        status: 400,
        headers: vec![
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("Connection".into(), "close".into()),
        ],
        body: b"malformed request body\n".to_vec(),
    }
}

/// Checks a request's head against the body limit: a `Content-Length`
/// that is not one number is 400, one over `limit` is 413.
pub fn admit(headers: &[(String, String)], limit: usize) -> Admission {
    let mut declared = None;
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case("content-length") {
            continue;
        }
        // `1*DIGIT` (RFC 9110 §8.6): no sign, which std's parser would take.
        let v = v.trim();
        let digits = v.bytes().all(|b| b.is_ascii_digit());
        let n = match crate::wire::http::parse_u64(v).filter(|_| digits) {
            Some(n) if declared.is_none_or(|d| d == n) => n,
            _ => return Admission::Refuse(malformed_body()),
        };
        declared = Some(n);
    }
    match declared {
        Some(n) if n > limit as u64 => Admission::Refuse(payload_too_large(limit)),
        _ => Admission::Read { limit },
    }
}

/// Whether the server's saves work (see [`HEALTH_PATH`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// `false` from a failed save until a later save works.
    pub healthy: bool,
    /// Saves that failed since the server started.
    pub store_failures: u64,
}

/// The health state. The server keeps it with its running tasks, under
/// the host's lock.
#[derive(Default)]
pub(crate) struct HealthState {
    failing: bool,
    failures: u64,
}

impl HealthState {
    /// A save failed: unhealthy. `true` if it was healthy until now.
    pub(crate) fn save_failed(&mut self) -> bool {
        self.failures += 1;
        !std::mem::replace(&mut self.failing, true)
    }

    /// A save worked: healthy again. `true` if it was unhealthy until now.
    pub(crate) fn save_worked(&mut self) -> bool {
        std::mem::replace(&mut self.failing, false)
    }

    pub(crate) fn get(&self) -> Health {
        Health {
            healthy: !self.failing,
            store_failures: self.failures,
        }
    }

    /// The health check's answer. No store error text: callers never see
    /// server internals (the host's log has them).
    pub(crate) fn respond(&self) -> HttpResponse {
        let h = self.get();
        let (status, text) = if h.healthy {
            (200, "ok")
        } else {
            (503, "unhealthy")
        };
        let body = format!(
            "{{\"status\":\"{text}\",\"storeFailures\":{}}}",
            h.store_failures
        );
        let mut resp = HttpResponse::json(status, body.into_bytes());
        resp.headers
            .push(("Cache-Control".into(), "no-store".into()));
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn cors_origins_are_one_printable_origin() {
        for ok in [
            "*",
            "null",
            "http://localhost:5173",
            "https://app.example",
            " https://a.b ",
        ] {
            assert!(CorsOrigin::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "http://a\r\nX-Evil: 1",
            "http://a\n",
            "http://a b",
            "https://app.example/path",
            "app.example",
            "http://a,http://b",
            "http://é.example",
        ] {
            let e = CorsOrigin::parse(bad).expect_err(bad);
            assert!(e.to_string().starts_with("invalid CORS origin: "), "{e}");
        }
    }

    #[test]
    fn a_cors_list_echoes_listed_origins_only() {
        let list = CorsOrigin::list(&["http://a.test", "https://b.test:8443"])
            .unwrap()
            .unwrap();
        assert_eq!(list.allow(Some("http://a.test")), Some("http://a.test"));
        assert_eq!(
            list.allow(Some("https://b.test:8443")),
            Some("https://b.test:8443")
        );
        assert_eq!(list.allow(Some("http://evil.test")), None);
        assert_eq!(list.allow(None), None);
        let one = CorsOrigin::parse("http://a.test").unwrap();
        assert_eq!(one.allow(Some("http://evil.test")), Some("http://a.test"));
        assert_eq!(CorsOrigin::any().allow(None), Some("*"));
        assert_eq!(CorsOrigin::list::<&str>(&[]), Ok(None));
        assert!(CorsOrigin::list(&["*", "http://a.test"]).is_err());
        assert!(CorsOrigin::list(&["http://a.test", "x\ny"]).is_err());
        assert!(!one.private_network());
        assert!(one.with_private_network(true).private_network());
    }

    #[test]
    fn hosts_are_loopback_or_listed() {
        let loopback = AllowedHosts::loopback();
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "app.localhost:1",
            "127.0.0.1:9",
            "127.1.2.3",
            "[::1]:8080",
            "[::1]",
        ] {
            assert!(loopback.allows(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "10.0.0.1:80",
            "[::2]:80",
            "",
        ] {
            assert!(!loopback.allows(Some(bad)), "{bad}");
        }
        assert!(!loopback.allows(None));
        let public = AllowedHosts::loopback()
            .with("https://agent.example/a2a")
            .with("10.0.0.5:8080");
        assert!(public.allows(Some("agent.example")));
        assert!(public.allows(Some("Agent.Example:443")));
        assert!(public.allows(Some("10.0.0.5:8080")));
        assert!(!public.allows(Some("10.0.0.6:8080")));
        assert!(!public.allows(Some("evil.example")));
        let any = AllowedHosts::loopback().with_any_ip();
        assert!(any.allows(Some("192.168.1.9:80")) && any.allows(Some("[fe80::1]:80")));
        assert!(!any.allows(Some("rebind.evil.example:80")));
        assert_eq!(misdirected().status, 421);
    }

    #[test]
    fn a_head_is_admitted_by_its_declared_length() {
        let h = |v: &str| vec![("Content-Length".to_string(), v.to_string())];
        assert_eq!(admit(&[], 10), Admission::Read { limit: 10 });
        assert_eq!(admit(&h("10"), 10), Admission::Read { limit: 10 });
        assert!(matches!(admit(&h("11"), 10), Admission::Refuse(r) if r.status == 413));
        assert!(matches!(admit(&h("x"), 10), Admission::Refuse(r) if r.status == 400));
        // Digits only: std's parser would read `+5` as 5.
        assert!(matches!(admit(&h("+5"), 10), Admission::Refuse(r) if r.status == 400));
        assert!(matches!(admit(&h("-0"), 10), Admission::Refuse(r) if r.status == 400));
        assert_eq!(admit(&h(" 5 "), 10), Admission::Read { limit: 10 });
        let twice = vec![
            ("content-length".to_string(), "1".to_string()),
            ("Content-Length".to_string(), "2".to_string()),
        ];
        assert!(matches!(admit(&twice, 10), Admission::Refuse(r) if r.status == 400));
    }

    #[test]
    fn health_turns_on_a_failed_save_and_back_on_a_working_one() {
        let mut h = HealthState::default();
        assert!(h.get().healthy);
        assert_eq!(h.respond().status, 200);
        assert!(h.save_failed());
        assert!(!h.save_failed(), "already unhealthy");
        assert_eq!(h.respond().status, 503);
        assert_eq!(h.get().store_failures, 2);
        assert!(h.save_worked());
        assert!(!h.save_worked());
        assert!(h.get().healthy);
    }
}
