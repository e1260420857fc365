//! The authentication step of the server: a request's credentials read
//! (an API key in a header, query parameter or cookie; a bearer token),
//! each configured verifier asked, and the refusal when none accepts
//! (401 with one `WWW-Authenticate` per declared scheme, or 403).
//!
//! Only a JSON-RPC call (`POST /`) is authenticated: the public card,
//! `/healthz` and CORS preflights stay open, as the spec's public card must.

use super::auth::{say, ApiKeys, AuthConfig, Claims, JwtConfig, KeyLocation, Principal, Verdict};
use super::ServerHost;
use crate::wire::http::HttpRequest;
use serde_json::Value;

/// The realm every challenge names.
pub const REALM: &str = "a2a";

/// Why a request was refused, and how to challenge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401 (no valid credential) or 403 (valid, not allowed).
    pub status: u16,
    /// Said to the caller; never the credential.
    pub reason: String,
    /// RFC 6750's `error` for the Bearer challenge: `invalid_token` when a
    /// token was given and refused, `insufficient_scope` for a 403.
    pub bearer_error: Option<&'static str>,
    /// The custom verifier's challenge ([`ServerHost::authenticate_challenge`]).
    pub challenge: Option<String>,
}

impl Refusal {
    fn unauthenticated(reason: impl Into<String>) -> Refusal {
        Refusal {
            status: 401,
            reason: reason.into(),
            bearer_error: None,
            challenge: None,
        }
    }

    fn invalid_token(reason: impl Into<String>) -> Refusal {
        Refusal {
            status: 401,
            reason: reason.into(),
            bearer_error: Some("invalid_token"),
            challenge: None,
        }
    }
}

/// The verifiers `auth` configures run on one request, cheapest first:
/// API keys, then a bearer JWT (its signature checked by the host, its
/// claims here), then the host's own verifier. The first to accept names
/// the caller. When none does, the refusal of the verifiers that read a
/// credential (a 403 over a 401: that caller did prove who it is), else "no
/// credentials". No host and no futures in it; [`authenticate`] is its
/// driver. Each input returns what comes next by type: [`AuthMachine::begin`]
/// the caller of a known API key; else the bearer token
/// ([`AuthMachine::token`]) checked by the host for
/// [`AuthMachine::handle_jwt`]; else the host's own verifier asked for
/// [`AuthMachine::handle_verdict`], which gives the outcome.
pub(crate) struct AuthMachine<'a> {
    auth: &'a AuthConfig,
    req: &'a HttpRequest,
    /// The bearer token being verified.
    token: Option<&'a str>,
    refused: Option<Refusal>,
}

impl<'a> AuthMachine<'a> {
    pub(crate) fn new(auth: &'a AuthConfig, req: &'a HttpRequest) -> AuthMachine<'a> {
        AuthMachine {
            auth,
            req,
            token: None,
            refused: None,
        }
    }

    /// Keeps `r` unless a 403 is kept already.
    fn keep(&mut self, r: Refusal) {
        if self.refused.as_ref().is_none_or(|kept| kept.status != 403) {
            self.refused = Some(r);
        }
    }

    /// The first step: an API key is checked at once (`Some`: its caller);
    /// a bearer token is kept when a JWT verifier is configured.
    #[must_use = "Some is the caller; None asks for the next verifier"]
    pub(crate) fn begin(&mut self) -> Option<Principal> {
        if let Some(keys) = &self.auth.api_keys {
            if let Some(given) = api_key(self.req, keys) {
                match key_owner(keys, given.as_bytes()) {
                    Some(subject) => {
                        return Some(Principal {
                            subject: subject.to_string(),
                            ..Principal::default()
                        })
                    }
                    None => self.keep(Refusal::unauthenticated(key_place(keys))),
                }
            }
        }
        if self.auth.jwt.is_some() {
            self.token = bearer(self.req);
        }
        None
    }

    /// The bearer token for the host to check ([`ServerHost::verify_jwt`]),
    /// then [`AuthMachine::handle_jwt`]; `None`: on to the host's own verifier.
    pub(crate) fn token(&self) -> Option<&'a str> {
        self.token
    }

    /// The host's check of the bearer token: its claims (then checked
    /// against the policy at `unix_ms`), or why it was refused. `Some`: the
    /// caller; `None`: on to the host's own verifier.
    #[must_use = "Some is the caller; None asks for the next verifier"]
    pub(crate) fn handle_jwt(
        &mut self,
        verified: Result<Claims, String>,
        unix_ms: Option<u64>,
    ) -> Option<Principal> {
        let token = self.token.take().unwrap_or_default();
        match (verified, &self.auth.jwt) {
            (Ok(claims), Some(jwt)) => match check_claims(jwt, &claims, unix_ms) {
                Ok(principal) => return Some(principal),
                Err(r) => self.keep(r),
            },
            (Ok(_), None) => {}
            (Err(why), _) => {
                // The host's reason, unless it would echo the token.
                // `find_str`, not `contains`: no two-way searcher in the `.wasm`.
                let why = if !token.is_empty() && crate::wire::http::find_str(&why, token).is_some()
                {
                    "its signature or algorithm was not accepted".to_string()
                } else {
                    why
                };
                self.keep(Refusal::invalid_token(say(&[
                    "the bearer token was refused: ",
                    &why,
                ])))
            }
        }
        None
    }

    /// The host's own verifier's verdict (`None`: it has none): the
    /// outcome. A refusal carries the `challenge`
    /// ([`ServerHost::authenticate_challenge`]) when a custom verifier is
    /// configured.
    pub(crate) fn handle_verdict(
        &mut self,
        verdict: Option<Verdict>,
        challenge: impl FnOnce() -> Option<String>,
    ) -> Result<Principal, Refusal> {
        match verdict {
            Some(Verdict::Accepted(principal)) => return Ok(principal),
            Some(Verdict::NotMine) | None => {}
            Some(Verdict::Rejected { status, reason }) => self.keep(Refusal {
                status: if status == 403 { 403 } else { 401 },
                reason,
                bearer_error: None,
                challenge: None,
            }),
        }
        let mut refusal = self.refused.take().unwrap_or_else(|| {
            Refusal::unauthenticated("this agent needs credentials: none were given")
        });
        if self.auth.custom {
            // Not a header's end: the challenge is one header value.
            refusal.challenge =
                challenge().filter(|c| !c.trim().is_empty() && !c.contains(['\r', '\n']));
        }
        Err(refusal)
    }
}

/// Runs the verifiers `auth` configures on `req` ([`AuthMachine`]): the
/// caller they name, or the refusal.
pub(super) async fn authenticate<H: ServerHost>(
    io: &super::Io<H>,
    auth: &AuthConfig,
    host: &H,
    req: &HttpRequest,
) -> Result<Principal, Refusal> {
    let mut m = AuthMachine::new(auth, req);
    if let Some(caller) = m.begin() {
        return Ok(caller);
    }
    if let Some(token) = m.token() {
        let verified = io.verify_jwt(token).await;
        if let Some(caller) = m.handle_jwt(verified, host.unix_ms()) {
            return Ok(caller);
        }
    }
    let verdict = match host.authenticate(req) {
        Some(verdict) => Some(io.verdict(verdict).await),
        None => None,
    };
    m.handle_verdict(verdict, || host.authenticate_challenge())
}

/// The refusal of an unknown API key, naming where it went.
fn key_place(keys: &ApiKeys) -> String {
    let kind = match keys.location {
        KeyLocation::Header => "header",
        KeyLocation::Query => "query parameter",
        KeyLocation::Cookie => "cookie",
    };
    say(&[
        "the API key in the ",
        kind,
        " ",
        &keys.name,
        " is not one this agent knows",
    ])
}

/// The API key a request carries where `keys` says it travels; `None`
/// when it carries none (an empty one counts as none).
pub fn api_key(req: &HttpRequest, keys: &ApiKeys) -> Option<String> {
    let key = match keys.location {
        KeyLocation::Header => req.header(&keys.name).map(|v| v.trim().to_string()),
        KeyLocation::Query => query_param(&req.url, &keys.name),
        KeyLocation::Cookie => req
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("Cookie"))
            .find_map(|(_, v)| cookie(v, &keys.name)),
    };
    key.filter(|k| !k.is_empty())
}

/// The first `name` parameter of `url`'s query, percent-decoded.
fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split('#').next()?.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k)? == name).then(|| percent_decode(v))?
    })
}

/// `text` with `%XX` escapes and `+` (a space, in a query) decoded; `None`
/// when an escape is malformed or the bytes are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                // What `u8::from_str_radix(&text[i + 1..i + 3], 16)` reads (a
                // leading `+` too), by hand: the npm `.wasm` keeps no
                // integer parser for this.
                let (hi, lo) = (*bytes.get(i + 1)?, hex_digit(*bytes.get(i + 2)?)?);
                out.push(if hi == b'+' {
                    lo
                } else {
                    hex_digit(hi)? * 16 + lo
                });
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The value of an ASCII hex digit.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The value of cookie `name` in a `Cookie` header (`a=1; b=2`), its
/// optional double quotes removed.
fn cookie(header: &str, name: &str) -> Option<String> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == name).then(|| {
            let v = v.trim();
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
                .to_string()
        })
    })
}

/// The token of an `Authorization: Bearer <token>` header (the scheme
/// case-insensitive); `None` without one.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.header("Authorization")?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("Bearer") && !token.is_empty()).then_some(token)
}

/// Whether `a` and `b` are equal, in time that depends only on their
/// lengths: every byte of `b` is looked at whatever differs first.
pub fn same_key(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, &y) in b.iter().enumerate() {
        let x = a.get(i).copied().unwrap_or(!y);
        diff |= x ^ y;
    }
    // Keep the optimizer from turning the loop back into an early exit.
    std::hint::black_box(diff) == 0
}

/// The principal whose key `given` is: compared with every key, in
/// constant time each, without stopping at the first match.
pub fn key_owner<'a>(keys: &'a ApiKeys, given: &[u8]) -> Option<&'a str> {
    let mut found = None;
    for (subject, key) in &keys.keys {
        let matched = same_key(given, key.as_bytes());
        // Keys are distinct (the config reader refuses two alike): at most one matches.
        if matched {
            found = Some(subject.as_str());
        }
    }
    found
}

/// A numeric date claim (`exp`, `nbf`) in seconds; `Err` when present but
/// not a number.
fn date_claim(claims: &Claims, name: &str) -> Result<Option<f64>, Refusal> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|n| n.is_finite())
            .map(Some)
            .ok_or_else(|| Refusal::invalid_token(say(&["the token's ", name, " is not a date"]))),
    }
}

/// The scopes of a token: `scope` (space-separated) or `scp` (an array,
/// or a space-separated string).
pub fn token_scopes(claims: &Claims) -> Vec<String> {
    let mut scopes = Vec::new();
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(s)) => {
                for s in s.split(' ') {
                    if !s.is_empty() {
                        scopes.push(s.to_string());
                    }
                }
            }
            Some(Value::Array(list)) => {
                for s in list {
                    if let Some(s) = s.as_str() {
                        scopes.push(s.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    scopes
}

/// Checks the claims of a token whose signature the host accepted:
/// `exp` (required) and `nbf` against `now_ms` (the host's wall clock)
/// with the configured leeway, `iss` and `aud` when configured, a `sub`,
/// then the required scopes (missing ones: 403). The principal is `sub`
/// with `iss`.
pub fn check_claims(
    jwt: &JwtConfig,
    claims: &Claims,
    now_ms: Option<u64>,
) -> Result<Principal, Refusal> {
    let Some(now_ms) = now_ms else {
        return Err(Refusal::invalid_token(
            "this host has no clock to check the token's expiry with",
        ));
    };
    let now = now_ms as f64 / 1000.0;
    let leeway = jwt.leeway_seconds as f64;
    match date_claim(claims, "exp")? {
        None => return Err(Refusal::invalid_token("the token has no exp")),
        Some(exp) if now > exp + leeway => {
            return Err(Refusal::invalid_token("the token has expired"))
        }
        Some(_) => {}
    }
    if let Some(nbf) = date_claim(claims, "nbf")? {
        if now + leeway < nbf {
            return Err(Refusal::invalid_token("the token is not valid yet (nbf)"));
        }
    }
    let issuer = claims.get("iss").and_then(Value::as_str);
    if let Some(want) = &jwt.issuer {
        if issuer != Some(want.as_str()) {
            return Err(Refusal::invalid_token(
                "the token's issuer (iss) is not the one this agent trusts",
            ));
        }
    }
    if let Some(want) = &jwt.audience {
        let ok = match claims.get("aud") {
            Some(Value::String(aud)) => aud == want,
            Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(want.as_str())),
            _ => false,
        };
        if !ok {
            return Err(Refusal::invalid_token(
                "the token's audience (aud) is not this agent",
            ));
        }
    }
    let subject = match claims.get("sub").and_then(Value::as_str) {
        Some(sub) if !sub.is_empty() => sub.to_string(),
        _ => return Err(Refusal::invalid_token("the token names no subject (sub)")),
    };
    let scopes = token_scopes(claims);
    let mut missing: Vec<&str> = Vec::new();
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for s in &jwt.required_scopes {
        if !scopes.contains(s) {
            missing.push(s);
        }
    }
    if !missing.is_empty() {
        return Err(Refusal {
            status: 403,
            reason: say(&[
                "the token lacks the scopes this agent requires: ",
                &missing.join(" "),
            ]),
            bearer_error: Some("insufficient_scope"),
            challenge: None,
        });
    }
    Ok(Principal {
        subject,
        issuer: issuer.map(str::to_string),
        tenant: None,
        scopes,
    })
}

/// A challenge parameter's value: quotes and backslashes dropped, so it
/// cannot end its quoted string.
fn param(text: &str) -> String {
    text.chars().filter(|c| !matches!(c, '"' | '\\')).collect()
}

/// The `WWW-Authenticate` values of a refusal, one per declared scheme:
/// `ApiKey realm="a2a", in="header", name="X-API-Key"` for API keys and
/// `Bearer realm="a2a"` for JWTs (with RFC 6750's `error`, and the
/// required `scope` for `insufficient_scope`), and the custom verifier's
/// own (see [`ServerHost::authenticate_challenge`]). A 403 challenges only
/// the bearer scheme that refused.
pub fn challenges(auth: &AuthConfig, refusal: &Refusal) -> Vec<String> {
    let mut out = Vec::new();
    if refusal.status == 401 {
        if let Some(keys) = &auth.api_keys {
            let location = match keys.location {
                KeyLocation::Header => "header",
                KeyLocation::Query => "query",
                KeyLocation::Cookie => "cookie",
            };
            // Pieces pushed, not `format!`: the npm `.wasm` (see ARCHITECTURE.md).
            let mut c = String::from("ApiKey realm=\"a2a\", in=\"");
            for piece in [location, "\", name=\"", &param(&keys.name), "\""] {
                c.push_str(piece);
            }
            out.push(c);
        }
    }
    if let Some(jwt) = &auth.jwt {
        let mut c = String::from("Bearer realm=\"a2a\"");
        if let Some(error) = refusal.bearer_error {
            for piece in [", error=\"", error, "\""] {
                c.push_str(piece);
            }
            if error == "insufficient_scope" {
                for piece in [", scope=\"", &param(&jwt.required_scopes.join(" ")), "\""] {
                    c.push_str(piece);
                }
            }
        }
        if refusal.status == 401 || refusal.bearer_error.is_some() {
            out.push(c);
        }
    }
    // The custom verifier's scheme: its own challenge, else Bearer when no
    // other scheme challenges (a 401 must name one).
    if refusal.status == 401 && auth.custom {
        match &refusal.challenge {
            Some(c) => out.push(c.clone()),
            None if out.is_empty() => out.push(String::from("Bearer realm=\"a2a\"")),
            None => {}
        }
    }
    out
}

/// The JSON-RPC error code of a refused request (the implementation-defined
/// server error; the HTTP status says 401 or 403).
pub const UNAUTHORIZED: i64 = -32000;

/// The answer to a refused request: its status (401 or 403), the
/// [`challenges`], and a JSON-RPC error saying why (with, for a 1.0 caller,
/// a `google.rpc.ErrorInfo` whose reason is `UNAUTHENTICATED` or
/// `PERMISSION_DENIED`). The body names the verifier's reason, never the
/// credential.
pub(crate) fn refusal_response(
    auth: &AuthConfig,
    refusal: &Refusal,
    v10: bool,
) -> crate::wire::http::HttpResponse {
    use crate::wire::json::object;
    let (title, reason) = match refusal.status {
        403 => ("Forbidden", "PERMISSION_DENIED"),
        _ => ("Unauthorized", "UNAUTHENTICATED"),
    };
    let mut error = serde_json::Map::new();
    error.insert("code".into(), UNAUTHORIZED.into());
    error.insert(
        "message".into(),
        say(&[title, ": ", &refusal.reason]).into(),
    );
    if v10 {
        error.insert(
            "data".into(),
            Value::Array(vec![object([
                ("@type", "type.googleapis.com/google.rpc.ErrorInfo".into()),
                ("reason", reason.into()),
                ("domain", "a2a-protocol.org".into()),
                ("metadata", Value::Object(serde_json::Map::new())),
            ])]),
        );
    }
    let body = object([
        ("jsonrpc", "2.0".into()),
        ("id", Value::Null),
        ("error", Value::Object(error)),
    ]);
    let mut resp = crate::wire::http::HttpResponse::json(
        refusal.status,
        crate::wire::json::text(&body).into_bytes(),
    );
    for c in challenges(auth, refusal) {
        resp.headers.push(("WWW-Authenticate".into(), c));
    }
    resp
}

#[cfg(test)]
mod machine_tests {
    //! The authentication machine alone: its steps for given requests,
    //! host checks and verdicts, with no host.
    use super::super::auth::JwtConfig;
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn config(custom: bool) -> AuthConfig {
        AuthConfig {
            api_keys: Some(ApiKeys {
                location: KeyLocation::Header,
                name: "X-API-Key".into(),
                keys: vec![("alice".into(), "k-alice".into())],
            }),
            jwt: Some(JwtConfig {
                issuer: Some("https://idp.example".into()),
                audience: None,
                jwks_url: None,
                algorithms: vec!["HS256".into()],
                secret_env: Some("S".into()),
                leeway_seconds: 30,
                required_scopes: vec!["a2a".into()],
            }),
            custom,
        }
    }

    fn request(headers: &[(&str, &str)]) -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            url: "/".into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }

    fn claims(v: Value) -> Claims {
        match v {
            Value::Object(map) => map,
            _ => panic!("claims are an object"),
        }
    }

    #[test]
    fn a_known_api_key_names_the_caller_at_once() {
        let (auth, req) = (config(false), request(&[("X-API-Key", "k-alice")]));
        let mut m = AuthMachine::new(&auth, &req);
        assert_eq!(m.begin().expect("accepted").subject, "alice");
    }

    #[test]
    fn a_bearer_token_is_checked_by_the_host_then_its_claims_here() {
        let auth = config(false);
        let req = request(&[("X-API-Key", "wrong"), ("Authorization", "Bearer tok.en")]);
        let mut m = AuthMachine::new(&auth, &req);
        assert!(m.begin().is_none(), "an unknown key names nobody");
        assert_eq!(m.token(), Some("tok.en"));
        let good = claims(json!({"sub": "bob", "iss": "https://idp.example",
            "exp": 2_000_000_000u64, "scope": "a2a"}));
        let caller = m.handle_jwt(Ok(good), Some(1_000_000_000_000));
        assert_eq!(caller.expect("accepted").subject, "bob");
        // Claims that fail the policy (a missing scope): a 403 that a later
        // 401 does not replace.
        let mut m = AuthMachine::new(&auth, &req);
        assert!(m.begin().is_none());
        let narrow = claims(json!({"sub": "bob", "iss": "https://idp.example",
            "exp": 2_000_000_000u64, "scope": "other"}));
        assert!(m.handle_jwt(Ok(narrow), Some(1_000_000_000_000)).is_none());
        let rejected = Verdict::Rejected {
            status: 401,
            reason: "no".into(),
        };
        let refusal = m
            .handle_verdict(Some(rejected), || None)
            .expect_err("refused");
        assert_eq!(refusal.status, 403, "{refusal:?}");
        // No JWT verifier configured: a bearer token is not for this step.
        let keys_only = AuthConfig {
            jwt: None,
            ..config(false)
        };
        let mut m = AuthMachine::new(&keys_only, &req);
        assert!(m.begin().is_none());
        assert_eq!(m.token(), None);
    }

    #[test]
    fn a_hosts_reason_that_echoes_the_token_is_not_repeated() {
        let auth = config(false);
        let req = request(&[("Authorization", "Bearer s3cret")]);
        let mut m = AuthMachine::new(&auth, &req);
        assert!(m.begin().is_none());
        assert!(m.handle_jwt(Err("bad token s3cret".into()), None).is_none());
        let refusal = m.handle_verdict(None, || None).expect_err("refused");
        assert!(!refusal.reason.contains("s3cret"), "{}", refusal.reason);
        assert_eq!(refusal.bearer_error, Some("invalid_token"));
    }

    #[test]
    fn the_hosts_verifier_decides_last_and_its_challenge_goes_on_a_refusal() {
        let req = request(&[]);
        let auth = config(true);
        let mut m = AuthMachine::new(&auth, &req);
        assert!(m.begin().is_none());
        assert_eq!(m.token(), None, "no bearer token given");
        let accepted = Verdict::Accepted(Principal {
            subject: "carol".into(),
            ..Principal::default()
        });
        let caller = m.handle_verdict(Some(accepted), || panic!("no challenge when accepted"));
        assert_eq!(caller.expect("accepted").subject, "carol");
        let mut m = AuthMachine::new(&auth, &req);
        assert!(m.begin().is_none());
        let challenge = || Some("Session realm=\"corp\"".to_string());
        let refusal = m
            .handle_verdict(Some(Verdict::NotMine), challenge)
            .expect_err("no credentials");
        assert_eq!(refusal.status, 401);
        assert!(
            refusal.reason.contains("none were given"),
            "{}",
            refusal.reason
        );
        assert_eq!(refusal.challenge.as_deref(), Some("Session realm=\"corp\""));
        // A challenge that would end the header is dropped; without a custom
        // verifier configured, none is asked.
        let mut m = AuthMachine::new(&auth, &req);
        assert!(m.begin().is_none());
        let split = || Some("a\r\nSet-Cookie: x".to_string());
        let refusal = m.handle_verdict(None, split).expect_err("refused");
        assert_eq!(refusal.challenge, None);
        let plain = config(false);
        let mut m = AuthMachine::new(&plain, &req);
        assert!(m.begin().is_none());
        let refusal = m
            .handle_verdict(None, || Some("x".into()))
            .expect_err("refused");
        assert_eq!(refusal.challenge, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// The decoder before it read hex digits by hand.
    fn by_from_str_radix(text: &str) -> Option<String> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' => {
                    out.push(u8::from_str_radix(text.get(i + 1..i + 3)?, 16).ok()?);
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8(out).ok()
    }

    #[test]
    fn percent_decode_reads_every_escape_as_from_str_radix_does() {
        let mut samples: Vec<char> = (0u8..128).map(char::from).collect();
        samples.extend(['é', '€', '😀']);
        for a in &samples {
            for b in &samples {
                for text in [format!("%{a}{b}"), format!("x%{a}{b}y"), format!("%{a}")] {
                    assert_eq!(percent_decode(&text), by_from_str_radix(&text), "{text:?}");
                }
            }
        }
        assert_eq!(percent_decode("a%20b+c%2b%+5"), Some("a b c+\u{5}".into()));
    }
}
