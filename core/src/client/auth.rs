//! Calling protected agents: the card's security schemes, the caller's
//! credentials, where they may go, and OAuth2 client-credentials tokens.
//!
//! - [`SecurityScheme`] / [`read_schemes`] / [`read_requirements`]: what a
//!   card declares, in the 1.0 shape (`{"apiKeySecurityScheme": {location,
//!   name}}`, `securityRequirements: [{schemes: {name: {list}}}]`) and the
//!   0.3 one (`{"type": "apiKey", in, name}`, `security: [{name: [..]}]`).
//! - [`Auth`]: the caller's credential for one agent (bearer, API key,
//!   OAuth2 client credentials), `${NAME}` expanded at call time.
//! - [`credentials_may_go_to`]: credentials go to the card's own origin
//!   and the origins the user lists, nowhere else.
//! - [`TokenCache`]: the no-I/O state of an agent's token (cached, refreshed
//!   before expiry, one fetch in flight shared by concurrent calls), kept
//!   by the host behind its lock ([`TokenCell`]); [`TokenMachine`] fetches
//!   a token (RFC 6749 §4.4, after OIDC discovery if needed) on the driver.

use crate::error::{Error, TransportError};
use crate::host::driver::{Machine, ResponseHead, Step};
use crate::host::transport::{MaybeSend, MaybeSync, Transport};
use crate::wire::http::{HttpRequest, HttpResponse};
use serde_json::Value;
use std::task::Waker;

/// Where an API key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLocation {
    Header,
    Query,
    Cookie,
}

/// One security scheme a card declares (the kinds a client can satisfy;
/// others, mTLS say, are skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecurityScheme {
    /// An API key in a header, query parameter or cookie named `name`.
    ApiKey { location: KeyLocation, name: String },
    /// HTTP authentication (`scheme`: `bearer`, `basic`, …, lower-cased).
    Http { scheme: String },
    /// OAuth2; the client-credentials flow's token URL and scopes, if any.
    OAuth2 {
        token_url: Option<String>,
        scopes: Vec<String>,
    },
    /// OpenID Connect: the discovery document's URL.
    OpenIdConnect { url: String },
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn keys(v: Option<&Value>) -> Vec<String> {
    match v {
        // 1.0 scopes: {"scope": "description"}; a list is read too.
        Some(Value::Object(o)) => {
            // A plain loop, not an iterator chain (see ARCHITECTURE.md).
            let mut keys = Vec::with_capacity(o.len());
            for k in o.keys() {
                keys.push(k.clone());
            }
            keys
        }
        list => crate::wire::json::strings(list),
    }
}

fn location(s: &str) -> Option<KeyLocation> {
    match s.to_ascii_lowercase().as_str() {
        "header" => Some(KeyLocation::Header),
        "query" => Some(KeyLocation::Query),
        "cookie" => Some(KeyLocation::Cookie),
        _ => None,
    }
}

impl SecurityScheme {
    /// Reads one scheme in either shape; `None` for kinds the client
    /// cannot use or fields missing.
    pub fn from_value(v: &Value) -> Option<SecurityScheme> {
        // 1.0: a oneof, one key naming the kind.
        let (kind, body) = if let Some(b) = v.get("apiKeySecurityScheme") {
            ("apiKey", b)
        } else if let Some(b) = v.get("httpAuthSecurityScheme") {
            ("http", b)
        } else if let Some(b) = v.get("oauth2SecurityScheme") {
            ("oauth2", b)
        } else if let Some(b) = v.get("openIdConnectSecurityScheme") {
            ("openIdConnect", b)
        } else {
            // 0.3: {"type": …} with the fields beside it.
            (v.get("type").and_then(Value::as_str)?, v)
        };
        match kind {
            "apiKey" => Some(SecurityScheme::ApiKey {
                location: location(&text(body, "location").or_else(|| text(body, "in"))?)?,
                name: text(body, "name").filter(|n| !n.is_empty())?,
            }),
            "http" => Some(SecurityScheme::Http {
                scheme: text(body, "scheme")?.to_ascii_lowercase(),
            }),
            "oauth2" => {
                let flow = body.get("flows").and_then(|f| f.get("clientCredentials"));
                Some(SecurityScheme::OAuth2 {
                    token_url: flow.and_then(|f| text(f, "tokenUrl")),
                    scopes: keys(flow.and_then(|f| f.get("scopes"))),
                })
            }
            "openIdConnect" => Some(SecurityScheme::OpenIdConnect {
                url: text(body, "openIdConnectUrl")?,
            }),
            _ => None,
        }
    }
}

/// A card's `securitySchemes`, in its order; schemes the client cannot use
/// are left out. Never fails.
pub fn read_schemes(card: &Value) -> Vec<(String, SecurityScheme)> {
    let Some(map) = card.get("securitySchemes").and_then(Value::as_object) else {
        return Vec::new();
    };
    // Plain loops here and in `read_requirements`, not `filter_map(..)
    // .collect()`: every such chain is its own iterator code in the client
    // `.wasm`.
    let mut out = Vec::new();
    for (name, v) in map {
        if let Some(scheme) = SecurityScheme::from_value(v) {
            out.push((name.clone(), scheme));
        }
    }
    out
}

/// One way to satisfy a card: every named scheme (with its scopes) at once.
pub type Requirement = Vec<(String, Vec<String>)>;

/// A card's `securityRequirements` (1.0) or `security` (0.3): any one of
/// them is enough. Never fails.
pub fn read_requirements(card: &Value) -> Vec<Requirement> {
    let list = card
        .get("securityRequirements")
        .or_else(|| card.get("security"))
        .and_then(Value::as_array);
    let mut out = Vec::new();
    for r in list.into_iter().flatten() {
        // 1.0: {"schemes": {"name": {"list": [..]}}}; 0.3: {"name": [..]}.
        let (schemes, v1) = match (r.get("schemes").and_then(Value::as_object), r) {
            (Some(s), _) => (s, true),
            (None, Value::Object(o)) => (o, false),
            _ => continue,
        };
        let mut requirement = Vec::with_capacity(schemes.len());
        for (name, scopes) in schemes {
            let scopes = if v1 { scopes.get("list") } else { Some(scopes) };
            requirement.push((name.clone(), keys(scopes)));
        }
        out.push(requirement);
    }
    out
}

/// Whether a card with these requirements needs a credential: it lists at
/// least one, and none of them is empty (an empty one allows anonymous calls).
pub fn requires_credentials(requirements: &[Requirement]) -> bool {
    !requirements.is_empty() && requirements.iter().all(|r| !r.is_empty())
}

/// OAuth2 client credentials (RFC 6749 §4.4) for one agent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuth2Client {
    pub client_id: String,
    /// The secret; `${NAME}` expands at call time. A secret: never log it.
    pub client_secret: String,
    /// The token endpoint; default: the card's client-credentials flow, or
    /// its OpenID Connect discovery document's `token_endpoint`.
    pub token_url: Option<String>,
    /// The scopes to ask for; default: those the card's requirement names.
    pub scopes: Vec<String>,
}

/// The caller's credential for one agent. Values may hold `${NAME}`,
/// expanded at every call through [`Transport::env`]. Values are secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// An API key, placed where the card's apiKey scheme says.
    ApiKey(String),
    /// Tokens from an OAuth2 token endpoint (client credentials).
    OAuth2(OAuth2Client),
    /// Bearer tokens from the host's source with this key
    /// ([`Transport::host_token`]: a JS `getToken`), asked before each call
    /// and once more after a 401. Set by hosts, never read from a config.
    HostToken(String),
}

impl Auth {
    /// Reads `{"bearer": ".."}`, `{"apiKey": ".."}` or `{"oauth2":
    /// {clientId, clientSecret, tokenUrl?, scopes?}}`; `None` otherwise.
    pub fn from_value(v: &Value) -> Option<Auth> {
        if let Some(t) = v.get("bearer").and_then(Value::as_str) {
            return Some(Auth::Bearer(t.into()));
        }
        if let Some(k) = v.get("apiKey").and_then(Value::as_str) {
            return Some(Auth::ApiKey(k.into()));
        }
        let o = v.get("oauth2")?;
        Some(Auth::OAuth2(OAuth2Client {
            client_id: text(o, "clientId")?,
            client_secret: text(o, "clientSecret").unwrap_or_default(),
            token_url: text(o, "tokenUrl"),
            scopes: keys(o.get("scopes")),
        }))
    }

    /// The kind, as messages name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Auth::Bearer(_) => "bearer",
            Auth::ApiKey(_) => "apiKey",
            Auth::OAuth2(_) => "oauth2",
            Auth::HostToken(_) => "getToken",
        }
    }
}

/// Whether credentials given for the card at `card_url` may go to `url`:
/// the card's own origin, or one the user listed in `allowed` (origins,
/// `scheme://host[:port]`, compared case-insensitively). Same rule for
/// https and http.
pub fn credentials_may_go_to(card_url: &str, url: &str, allowed: &[String]) -> bool {
    let Some(to) = crate::wire::url::origin(url) else {
        return false;
    };
    let same = |o: &str| {
        let o = o.strip_suffix('/').unwrap_or(o);
        o.eq_ignore_ascii_case(to)
    };
    crate::wire::url::origin(card_url).is_some_and(same) || allowed.iter().any(|a| same(a))
}

/// Whether a token endpoint (or an OIDC discovery URL) may be used: https,
/// or plain http to a loopback host (a test or a local provider).
pub fn token_url_allowed(url: &str) -> bool {
    let Some(origin) = crate::wire::url::origin(url) else {
        return false;
    };
    let lower = origin.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return true;
    }
    let Some(host) = lower.strip_prefix("http://") else {
        return false;
    };
    if host.as_bytes().contains(&b'@') {
        return false;
    }
    let end = match host.strip_prefix('[') {
        Some(v6) => v6.find(']').map_or(0, |i| i + 2),
        None => host.find(':').unwrap_or(host.len()),
    };
    let host = host.get(..end).unwrap_or_default();
    host == "localhost"
        || host == "[::1]"
        || (host.starts_with("127.") && host.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// Where a credential goes on each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A header; the value is `prefix` + the credential.
    Header { name: String, prefix: &'static str },
    /// A query parameter.
    Query(String),
    /// A cookie.
    Cookie(String),
}

impl Placement {
    /// `request` carrying `credential`.
    pub fn apply(&self, mut request: HttpRequest, credential: &str) -> HttpRequest {
        match self {
            Placement::Header { name, prefix } => {
                request
                    .headers
                    .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
                request
                    .headers
                    .push((name.clone(), format!("{prefix}{credential}")));
            }
            Placement::Query(name) => {
                let bytes = request.url.as_bytes();
                // A `&str`, not a `char`: `{char}` would bring `char`'s
                // `Display` into the client `.wasm` for this one use.
                let sep = if bytes.contains(&b'?') { "&" } else { "?" };
                // Before any fragment (a request URL has none in practice).
                // `split_at_checked`, not `split_at`: see `find_str`.
                let at = bytes.iter().position(|&b| b == b'#').unwrap_or(bytes.len());
                let (base, frag) = request.url.split_at_checked(at).unwrap_or_default();
                request.url = format!(
                    "{base}{sep}{}={}{frag}",
                    form_encode(name),
                    form_encode(credential)
                );
            }
            Placement::Cookie(name) => {
                request
                    .headers
                    .push(("Cookie".into(), format!("{name}={credential}")));
            }
        }
        request
    }
}

/// How a call authenticates to an agent, resolved from the agent's
/// [`Auth`] and the card's schemes (see [`plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPlan {
    /// The card's scheme name (or the kind, when the card names none), for messages.
    pub scheme: String,
    pub placement: Placement,
    pub credential: PlanCredential,
}

/// The credential of an [`AuthPlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanCredential {
    /// A fixed value (`${NAME}` expanded at call time).
    Static(String),
    /// Tokens from this source.
    Token(TokenSource),
}

/// Where an agent's tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSource {
    /// The token endpoint, or how to find it.
    pub endpoint: TokenEndpoint,
    pub client_id: String,
    /// `${NAME}` expanded at fetch time. A secret.
    pub client_secret: String,
    pub scopes: Vec<String>,
}

/// The token endpoint, known or to discover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenEndpoint {
    Url(String),
    /// An OpenID Connect discovery document naming `token_endpoint`.
    Discover(String),
    /// The host's own source ([`Transport::host_token`]); never cached:
    /// the host is asked each time.
    Host(String),
}

/// How `auth` is used with a card that declares `schemes` and
/// `requirements`: `Ok(None)` without `auth`; an error when the credential
/// cannot be placed (an API key with no apiKey scheme on the card, OAuth2
/// with no token URL anywhere).
pub fn plan(
    auth: Option<&Auth>,
    card_url: &str,
    schemes: &[(String, SecurityScheme)],
    requirements: &[Requirement],
) -> Result<Option<AuthPlan>, Error> {
    let Some(auth) = auth else {
        return Ok(None);
    };
    let bearer = || Placement::Header {
        name: "Authorization".into(),
        prefix: "Bearer ",
    };
    let named = |want: fn(&SecurityScheme) -> bool| {
        schemes
            .iter()
            .find(|(_, s)| want(s))
            .map(|(n, s)| (n.clone(), s.clone()))
    };
    match auth {
        Auth::Bearer(_) | Auth::HostToken(_) => {
            let scheme =
                named(|s| matches!(s, SecurityScheme::Http { scheme } if scheme == "bearer"))
                    .or_else(|| {
                        named(|s| {
                            matches!(
                                s,
                                SecurityScheme::OAuth2 { .. }
                                    | SecurityScheme::OpenIdConnect { .. }
                            )
                        })
                    })
                    .map_or_else(|| "bearer".to_string(), |(n, _)| n);
            let credential = if let Auth::Bearer(token) = auth {
                PlanCredential::Static(token.clone())
            } else {
                // The host's token source (`HostToken`): asked each call.
                let key = if let Auth::HostToken(key) = auth {
                    key
                } else {
                    ""
                };
                PlanCredential::Token(TokenSource {
                    endpoint: TokenEndpoint::Host(key.to_string()),
                    client_id: String::new(),
                    client_secret: String::new(),
                    scopes: Vec::new(),
                })
            };
            Ok(Some(AuthPlan {
                scheme,
                placement: bearer(),
                credential,
            }))
        }
        Auth::ApiKey(key) => {
            let Some((scheme, SecurityScheme::ApiKey { location, name })) =
                named(|s| matches!(s, SecurityScheme::ApiKey { .. }))
            else {
                return Err(Error::Misuse(format!(
                    "an API key is configured for {}, but its card declares no apiKey security scheme saying where it goes",
                    crate::wire::url::redact(card_url)
                )));
            };
            let placement = match location {
                KeyLocation::Header => Placement::Header { name, prefix: "" },
                KeyLocation::Query => Placement::Query(name),
                KeyLocation::Cookie => Placement::Cookie(name),
            };
            Ok(Some(AuthPlan {
                scheme,
                placement,
                credential: PlanCredential::Static(key.clone()),
            }))
        }
        Auth::OAuth2(client) => {
            let oauth = named(|s| matches!(s, SecurityScheme::OAuth2 { .. }));
            let oidc = named(|s| matches!(s, SecurityScheme::OpenIdConnect { .. }));
            let scheme = oauth
                .as_ref()
                .or(oidc.as_ref())
                .map_or_else(|| "oauth2".to_string(), |(n, _)| n.clone());
            let card_url_token = match &oauth {
                Some((_, SecurityScheme::OAuth2 { token_url, .. })) => token_url.clone(),
                _ => None,
            };
            let endpoint = match (&client.token_url, card_url_token, &oidc) {
                (Some(u), _, _) => TokenEndpoint::Url(u.clone()),
                (None, Some(u), _) => TokenEndpoint::Url(crate::wire::url::resolve(card_url, &u)),
                (None, None, Some((_, SecurityScheme::OpenIdConnect { url }))) => {
                    TokenEndpoint::Discover(crate::wire::url::resolve(card_url, url))
                }
                _ => {
                    return Err(Error::Misuse(format!(
                        "OAuth2 client credentials are configured for {}, but neither the configuration (tokenUrl, --oauth-token-url) nor the card (an oauth2 clientCredentials flow, an openIdConnect scheme) names a token URL",
                        crate::wire::url::redact(card_url)
                    )))
                }
            };
            // The scopes asked for: the caller's, else the requirement's for
            // this scheme, else none (the card's flow lists what exists, not
            // what is needed).
            let scopes = if client.scopes.is_empty() {
                let mut scopes = Vec::new();
                // A plain loop, not an iterator chain (see ARCHITECTURE.md).
                'found: for r in requirements {
                    for (n, s) in r {
                        if *n == scheme {
                            scopes = s.clone();
                            break 'found;
                        }
                    }
                }
                scopes
            } else {
                client.scopes.clone()
            };
            Ok(Some(AuthPlan {
                scheme,
                placement: bearer(),
                credential: PlanCredential::Token(TokenSource {
                    endpoint,
                    client_id: client.client_id.clone(),
                    client_secret: client.client_secret.clone(),
                    scopes,
                }),
            }))
        }
    }
}

/// `application/x-www-form-urlencoded` of `s` (unreserved bytes kept,
/// space as `+`).
pub fn form_encode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => {
                out.push('%');
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 15)] as char);
            }
        }
    }
    out
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A bearer token and when it stops being good, on the transport's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token. A secret: never log it.
    pub value: String,
    /// When it expires (`expires_in` after it was fetched); `None`: unknown.
    pub expires_ms: Option<u64>,
    /// When it was fetched.
    pub fetched_ms: u64,
}

/// The longest time before expiry at which a token is refreshed.
pub const REFRESH_LEEWAY_MS: u64 = 30_000;

impl Token {
    /// Whether it may still be sent at `now_ms`: before its expiry less a
    /// leeway (30 s, or a tenth of its lifetime when that is shorter).
    pub fn usable(&self, now_ms: u64) -> bool {
        match self.expires_ms {
            None => true,
            Some(exp) => {
                let life = exp.saturating_sub(self.fetched_ms);
                now_ms.saturating_add(REFRESH_LEEWAY_MS.min(life / 10)) < exp
            }
        }
    }
}

/// Reads a token endpoint's answer (RFC 6749 §5.1, §5.2) received at `now_ms`.
pub fn read_token_response(resp: &HttpResponse, url: &str, now_ms: u64) -> Result<Token, Error> {
    let shown = crate::wire::url::redact(url);
    let v: Option<Value> = serde_json::from_slice(&resp.body).ok();
    if !resp.is_success() {
        let why = v
            .as_ref()
            .and_then(|v| {
                let code = text(v, "error")?;
                Some(match text(v, "error_description") {
                    Some(d) => format!("{code}: {d}"),
                    None => code,
                })
            })
            .unwrap_or_else(|| resp.body_snippet(200));
        return Err(Error::Status {
            status: resp.status,
            url: shown,
            body: crate::wire::http::snippet(&why, 200),
        });
    }
    let Some(v) = v.filter(Value::is_object) else {
        return Err(Error::malformed(format!(
            "the token endpoint {shown} did not answer a JSON object"
        )));
    };
    let value = text(&v, "access_token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Error::malformed(format!(
                "the token endpoint {shown} answered no access_token"
            ))
        })?;
    if let Some(kind) = text(&v, "token_type").filter(|t| !t.eq_ignore_ascii_case("bearer")) {
        return Err(Error::malformed(format!(
            "the token endpoint {shown} gave a token of type {}, not Bearer",
            crate::wire::json::quoted(&crate::wire::http::snippet(&kind, 40))
        )));
    }
    // A number, or a string of digits as some servers send.
    let expires_in = match v.get("expires_in") {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Some(Value::String(s)) => crate::wire::http::parse_u64(s.trim()),
        _ => None,
    };
    Ok(Token {
        value,
        expires_ms: expires_in.map(|s| now_ms.saturating_add(s.saturating_mul(1000))),
        fetched_ms: now_ms,
    })
}

/// What [`TokenCache::acquire`] tells a call to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// Send this token.
    Use(Token),
    /// Fetch one: this call is the one fetch in flight; it must
    /// [`TokenCache::settle`] it, whatever happens.
    Fetch,
    /// Another call is fetching: wait until the generation moves past this one.
    Wait(u64),
}

/// The token of one agent, shared by its concurrent calls: no I/O, kept by
/// the host behind its lock ([`TokenCell`]).
#[derive(Debug, Default)]
pub struct TokenCache {
    token: Option<Token>,
    fetching: bool,
    /// Moves on at every settled fetch.
    generation: u64,
    /// The last fetch's failure, for the calls that waited for it.
    failed: Option<Error>,
    waiters: Vec<Waker>,
    /// Token fetches started, ever.
    fetches: u64,
}

impl TokenCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The token to send at `now_ms`, or whether to fetch or wait.
    pub fn acquire(&mut self, now_ms: u64) -> Acquire {
        if let Some(t) = self.token.as_ref().filter(|t| t.usable(now_ms)) {
            return Acquire::Use(t.clone());
        }
        if self.fetching {
            return Acquire::Wait(self.generation);
        }
        self.fetching = true;
        self.fetches += 1;
        Acquire::Fetch
    }

    /// The fetch in flight ended (with a token, or an error; `Err` of
    /// `None`: abandoned). Wakes the calls waiting for it.
    pub fn settle(&mut self, result: Result<Token, Option<Error>>) {
        self.fetching = false;
        self.generation += 1;
        match result {
            Ok(t) => {
                self.token = Some(t);
                self.failed = None;
            }
            Err(e) => self.failed = e,
        }
        for w in self.waiters.drain(..) {
            w.wake();
        }
    }

    /// Forgets `stale` (the agent refused it), unless a newer token already replaced it.
    pub fn drop_token(&mut self, stale: &str) {
        if self.token.as_ref().is_some_and(|t| t.value == stale) {
            self.token = None;
        }
    }

    /// After waiting on `generation`: `None` while the fetch is still in
    /// flight (the waker is kept), else what it gave.
    pub fn outcome(
        &mut self,
        generation: u64,
        now_ms: u64,
        waker: &Waker,
    ) -> Option<Result<Option<Token>, Error>> {
        if self.generation == generation && self.fetching {
            if !self.waiters.iter().any(|w| w.will_wake(waker)) {
                self.waiters.push(waker.clone());
            }
            return None;
        }
        if let Some(e) = &self.failed {
            return Some(Err(e.clone()));
        }
        // A token (or none: the fetch was abandoned, try again).
        Some(Ok(self
            .token
            .as_ref()
            .filter(|t| t.usable(now_ms))
            .cloned()))
    }

    /// How many token fetches were started through this cache.
    pub fn fetches(&self) -> u64 {
        self.fetches
    }
}

/// A [`TokenCache`] behind the host's lock, shared by an agent's calls.
/// Every [`crate::Lock`] of a `TokenCache` is one (natively the host's
/// mutex, on wasm32 core's `CellLock`).
pub trait TokenCell: MaybeSend + MaybeSync {
    /// Runs `f` on the cache, under the lock (never held across an `.await`).
    fn with_cache(&self, f: &mut dyn FnMut(&mut TokenCache));
}

impl<L: crate::host::lock::Lock<TokenCache>> TokenCell for L {
    fn with_cache(&self, f: &mut dyn FnMut(&mut TokenCache)) {
        f(&mut self.lock())
    }
}

/// A shared [`TokenCell`].
#[cfg(not(target_arch = "wasm32"))]
pub type SharedTokenCell = std::sync::Arc<dyn TokenCell + Send + Sync>;
/// A shared [`TokenCell`].
#[cfg(target_arch = "wasm32")]
pub type SharedTokenCell = std::sync::Arc<dyn TokenCell>;

#[cfg(feature = "oauth2")]
fn cache<R>(cell: &dyn TokenCell, mut f: impl FnMut(&mut TokenCache) -> R) -> R {
    let mut out = None;
    cell.with_cache(&mut |c| out = Some(f(c)));
    // `with_cache` runs `f` exactly once; a cell that does not is a host bug.
    out.unwrap_or_else(|| f(&mut TokenCache::new()))
}

/// Settles the fetch in flight as abandoned if its future is dropped first
/// (the call was aborted), so the calls waiting on it do not wait forever.
#[cfg(feature = "oauth2")]
struct FetchGuard<'a> {
    cell: &'a dyn TokenCell,
    settled: bool,
}

#[cfg(feature = "oauth2")]
impl Drop for FetchGuard<'_> {
    fn drop(&mut self) {
        if !self.settled {
            cache(self.cell, |c| c.settle(Err(None)));
        }
    }
}

/// A token for a call: the cached one while usable, else a fetch (one in
/// flight per cell; concurrent calls wait for it). `stale` is a token the
/// agent just refused (HTTP 401): dropped first, so a new one is fetched.
/// Without a cell, every call fetches its own. The fetch gives up at
/// `deadline_ms`.
pub fn token<'a, T: Transport>(
    transport: &'a T,
    cell: Option<&'a dyn TokenCell>,
    source: &'a TokenSource,
    stale: Option<&'a str>,
    deadline_ms: u64,
) -> crate::host::transport::BoxFuture<'a, Result<Token, Error>> {
    // Boxed: one copy of it in a build, not one inlined in each caller.
    Box::pin(token_inner(transport, cell, source, stale, deadline_ms))
}

async fn token_inner<T: Transport>(
    transport: &T,
    cell: Option<&dyn TokenCell>,
    source: &TokenSource,
    stale: Option<&str>,
    deadline_ms: u64,
) -> Result<Token, Error> {
    if let TokenEndpoint::Host(key) = &source.endpoint {
        let value = transport.host_token(key, stale.is_some()).await?;
        let fetched_ms = transport.now_ms();
        return Ok(Token {
            value,
            expires_ms: None,
            fetched_ms,
        });
    }
    #[cfg(feature = "oauth2")]
    return fetch_token(transport, cell, source, stale, deadline_ms).await;
    // Hosts without the feature refuse OAuth2 agents before any call (the
    // npm client entry, whose callers are browsers: no client secrets there).
    #[cfg(not(feature = "oauth2"))]
    {
        let _ = (cell, deadline_ms);
        Err(Error::Misuse(NO_OAUTH2.into()))
    }
}

/// Why an OAuth2 client-credentials agent cannot be called in a build
/// without the feature `oauth2`.
#[cfg(not(feature = "oauth2"))]
pub const NO_OAUTH2: &str =
    "OAuth2 client credentials are not in this build: give the agent a token source (a bearer token from the host) instead";

/// The token of an OAuth2 client-credentials source: from the cell's
/// cache, or fetched ([`TokenMachine`]).
#[cfg(feature = "oauth2")]
async fn fetch_token<T: Transport>(
    transport: &T,
    cell: Option<&dyn TokenCell>,
    source: &TokenSource,
    stale: Option<&str>,
    deadline_ms: u64,
) -> Result<Token, Error> {
    // The machine, run where it is made (an async block around its run
    // would be a state machine of its own).
    let machine = || {
        let mut source = source.clone();
        source.client_secret =
            crate::model::agent::expand_env(&source.client_secret, |n| transport.env(n));
        TokenMachine::new(source, deadline_ms)
    };
    let Some(cell) = cell else {
        return machine().run(transport).await;
    };
    if let Some(stale) = stale {
        cache(cell, |c| c.drop_token(stale));
    }
    // A few rounds: a waiter whose fetch was abandoned tries again.
    for _ in 0..4 {
        let now = transport.now_ms();
        match cache(cell, |c| c.acquire(now)) {
            Acquire::Use(token) => return Ok(token),
            Acquire::Fetch => {
                let mut guard = FetchGuard {
                    cell,
                    settled: false,
                };
                let got = machine().run(transport).await;
                guard.settled = true;
                let settled = got.clone().map_err(Some);
                cache(cell, |c| c.settle(settled.clone()));
                return got;
            }
            Acquire::Wait(generation) => {
                let outcome = std::future::poll_fn(|cx| {
                    let now = transport.now_ms();
                    match cache(cell, |c| c.outcome(generation, now, cx.waker())) {
                        Some(out) => std::task::Poll::Ready(out),
                        None => std::task::Poll::Pending,
                    }
                })
                .await?;
                if let Some(token) = outcome {
                    return Ok(token);
                }
            }
        }
    }
    Err(Error::transport(
        "no token: every fetch in flight was abandoned",
    ))
}

/// Fetches one token: OIDC discovery first when the endpoint is to be
/// discovered, then the client-credentials POST (RFC 6749 §4.4: form body
/// `grant_type=client_credentials` and `scope`, the client authenticated by
/// HTTP Basic). Token and discovery URLs must be https or loopback http.
#[derive(Debug)]
pub struct TokenMachine {
    source: TokenSource,
    deadline_ms: u64,
    /// The URL of the request in flight.
    url: String,
    discovering: bool,
}

impl TokenMachine {
    /// `source` with its secret already expanded.
    pub fn new(source: TokenSource, deadline_ms: u64) -> Self {
        TokenMachine {
            source,
            deadline_ms,
            url: String::new(),
            discovering: false,
        }
    }

    /// Runs the machine over `transport`: its steps are plain sends with a
    /// deadline, so this small loop does what the generic driver would,
    /// without another copy of the driver in every build.
    pub async fn run<T: Transport>(&mut self, transport: &T) -> Result<Token, Error> {
        use std::future::Future;
        use std::task::Poll;
        let mut step = self.start(transport.now_ms());
        // Discovery and the POST: two sends at most.
        for _ in 0..3 {
            let (request, deadline_ms) = match step {
                Step::Send {
                    request,
                    deadline_ms,
                } => (request, deadline_ms),
                Step::Done(out) => return out,
                _ => break,
            };
            let mut send = std::pin::pin!(transport.send(request));
            let mut timer = std::pin::pin!(transport.sleep_until(deadline_ms));
            let answer = std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = send.as_mut().poll(cx) {
                    return Poll::Ready(Some(r));
                }
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(None),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            let now = transport.now_ms();
            step = match answer {
                Some(r) => self.handle_response(now, r),
                None => self.handle_timeout(now),
            };
        }
        match step {
            Step::Done(out) => out,
            _ => Err(Error::Misuse("the token fetch took too many steps".into())),
        }
    }

    fn refused(url: &str) -> Error {
        Error::Misuse(format!(
            "refusing the token URL {}: credentials go to a token endpoint only over https (or plain http to a loopback host)",
            crate::wire::url::redact(url)
        ))
    }

    fn post(&mut self, url: String) -> Step<Result<Token, Error>> {
        if !token_url_allowed(&url) {
            return Step::Done(Err(Self::refused(&url)));
        }
        let mut body = String::from("grant_type=client_credentials");
        if !self.source.scopes.is_empty() {
            body.push_str("&scope=");
            body.push_str(&form_encode(&self.source.scopes.join(" ")));
        }
        let basic = format!(
            "{}:{}",
            form_encode(&self.source.client_id),
            form_encode(&self.source.client_secret)
        );
        let request = HttpRequest {
            method: "POST".into(),
            url: url.clone(),
            headers: vec![
                (
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded".into(),
                ),
                ("Accept".into(), "application/json".into()),
                (
                    "Authorization".into(),
                    format!("Basic {}", base64(basic.as_bytes())),
                ),
            ],
            body: body.into_bytes(),
        };
        self.url = url;
        self.discovering = false;
        Step::Send {
            request,
            deadline_ms: self.deadline_ms,
        }
    }

    fn discovered(&mut self, resp: HttpResponse) -> Step<Result<Token, Error>> {
        let shown = crate::wire::url::redact(&self.url);
        if !resp.is_success() {
            return Step::Done(Err(Error::Status {
                status: resp.status,
                url: shown,
                body: resp.body_snippet(200),
            }));
        }
        let endpoint = serde_json::from_slice::<Value>(&resp.body)
            .ok()
            .and_then(|v| text(&v, "token_endpoint"));
        match endpoint {
            Some(url) => {
                let url = crate::wire::url::resolve(&self.url, &url);
                self.post(url)
            }
            None => Step::Done(Err(Error::malformed(format!(
                "the OpenID Connect discovery document {shown} names no token_endpoint"
            )))),
        }
    }
}

impl Machine for TokenMachine {
    type Output = Result<Token, Error>;
    type Event = std::convert::Infallible;
    type Work = std::convert::Infallible;
    type Worked = std::convert::Infallible;

    fn start(&mut self, _now_ms: u64) -> Step<Self::Output> {
        match self.source.endpoint.clone() {
            TokenEndpoint::Url(url) => self.post(url),
            // Answered by the host before any machine starts (`token`).
            TokenEndpoint::Host(key) => Step::Done(Err(Error::Misuse(format!(
                "the token source {} is the host's, not a token endpoint",
                crate::wire::json::quoted(&key)
            )))),
            TokenEndpoint::Discover(url) => {
                if !token_url_allowed(&url) {
                    return Step::Done(Err(Self::refused(&url)));
                }
                self.discovering = true;
                self.url = url.clone();
                Step::Send {
                    request: HttpRequest::get(url).with_header("Accept", "application/json"),
                    deadline_ms: self.deadline_ms,
                }
            }
        }
    }

    fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> Step<Self::Output> {
        let what = if self.discovering {
            "OpenID Connect discovery"
        } else {
            "the token request"
        };
        match response {
            Err(e) => Step::Done(Err(Error::Transport(TransportError::with_source(
                format!(
                    "{what} to {} failed: {e}",
                    crate::wire::url::redact(&self.url)
                ),
                e,
            )))),
            Ok(resp) if self.discovering => self.discovered(resp),
            Ok(resp) => Step::Done(read_token_response(&resp, &self.url, now_ms)),
        }
    }

    fn handle_head(
        &mut self,
        _now_ms: u64,
        _head: Result<ResponseHead, TransportError>,
    ) -> Step<Self::Output> {
        Step::Done(Err(Error::Misuse("TokenMachine streams nothing".into())))
    }

    fn handle_body(
        &mut self,
        _now_ms: u64,
        _chunk: Result<Option<Vec<u8>>, TransportError>,
    ) -> Step<Self::Output> {
        Step::Done(Err(Error::Misuse("TokenMachine streams nothing".into())))
    }

    fn handle_timeout(&mut self, _now_ms: u64) -> Step<Self::Output> {
        Step::Done(Err(Error::transport(format!(
            "the token request to {} timed out",
            crate::wire::url::redact(&self.url)
        ))))
    }

    fn handle_abort(&mut self, _now_ms: u64) -> Step<Self::Output> {
        Step::Done(Err(Error::transport("the token request was aborted")))
    }

    fn handle_work(
        &mut self,
        _now_ms: u64,
        worked: std::convert::Infallible,
    ) -> Step<Self::Output> {
        match worked {}
    }

    fn poll_event(&mut self) -> Option<Self::Event> {
        None
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
