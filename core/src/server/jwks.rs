//! The JWT signing keys a server fetches: which keys verify a token, and
//! when to fetch the JSON Web Key Set again. A machine with no I/O: the
//! host asks [`JwksCache::lookup`] with the time and the token's `kid` and
//! `alg`, fetches what it is told to ([`Lookup::Fetch`]: the JWKS, or first
//! the issuer's OIDC discovery document), hands the answer back
//! ([`JwksCache::fetched`]) and asks again. The native host drives it with
//! its HTTP client and verifies with the `jsonwebtoken` crate; the npm host
//! with `fetch` and WebCrypto. Keys stay parsed JWK JSON objects.
//!
//! The rules:
//! - A key set is used for its response's `Cache-Control: max-age`
//!   ([`DEFAULT_MAX_AGE`] without one), kept between [`REFETCH_INTERVAL`]
//!   and [`MAX_MAX_AGE`].
//! - A token whose `kid` is not in the set causes one fetch, unless a
//!   fetch started less than [`REFETCH_INTERVAL`] ago: then it is refused
//!   (any fetch since then would have brought a key published before it,
//!   and a stream of invented `kid`s cannot hammer the endpoint).
//! - A fetch that fails (down, an error status, garbage) keeps the last
//!   good set, and the next try waits [`REFETCH_INTERVAL`].
//! - One fetch at a time: while it runs, tokens whose key is known use the
//!   current set, the others wait for it ([`Lookup::Wait`]).

use serde_json::Value;
use std::time::Duration;

/// How long a key set is used when its response says nothing (10 min).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(600);
/// The longest a key set is used, whatever its response says (24 h).
pub const MAX_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// The least time between two fetches (30 s): after an unknown `kid`, a
/// failure, or a response that says not to cache.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// The largest JWKS or discovery document a host reads (256 KiB).
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Where the keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A JWKS URL.
    Jwks(String),
    /// An OIDC issuer: its `/.well-known/openid-configuration` names the
    /// JWKS (`jwks_uri`).
    Issuer(String),
}

impl KeySource {
    /// The source of a `jwt` block: its `jwksUrl`, else its `issuer`'s
    /// discovery document; `None` when it has neither (HS256 only). The URL
    /// must be https or loopback http.
    pub fn of(cfg: &super::auth::JwtConfig) -> Option<Result<KeySource, String>> {
        let source = match (&cfg.jwks_url, &cfg.issuer) {
            (Some(url), _) => KeySource::Jwks(url.clone()),
            (None, Some(iss)) if cfg.algorithms.iter().any(|a| a != "HS256") => {
                KeySource::Issuer(iss.clone())
            }
            _ => return None,
        };
        let url = source.first_url();
        Some(if key_url_allowed(&url) {
            Ok(source)
        } else {
            Err(format!(
                "the JWT keys' URL {url} must be https (or http on a loopback host)"
            ))
        })
    }

    fn first_url(&self) -> String {
        match self {
            KeySource::Jwks(url) => url.clone(),
            KeySource::Issuer(iss) => discovery_url(iss),
        }
    }
}

/// The OIDC discovery document of `issuer`.
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

/// Whether keys may be fetched from `url`: https, or http on a loopback
/// host (`localhost`, `127.x.y.z`, `[::1]`), with no userinfo.
pub fn key_url_allowed(url: &str) -> bool {
    let Some(origin) = crate::wire::url::origin(url) else {
        return false;
    };
    let lower = origin.to_ascii_lowercase();
    if lower.contains('@') {
        return false;
    }
    if lower.starts_with("https://") {
        return true;
    }
    lower
        .strip_prefix("http://")
        .is_some_and(|host| super::policy::is_loopback_host(host_only(host)))
}

/// `host[:port]` without its port (`[::1]` keeps its brackets).
pub(crate) fn host_only(host_port: &str) -> &str {
    // On the bytes: every request's `Host` passes here.
    let end = match host_port.strip_prefix('[') {
        Some(v6) => v6
            .bytes()
            .position(|c| c == b']')
            .map_or(host_port.len(), |i| i + 2),
        None => host_port
            .bytes()
            .rposition(|c| c == b':')
            .unwrap_or(host_port.len()),
    };
    host_port.get(..end).unwrap_or(host_port)
}

/// What the host does next for a token.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// Try these keys (JWK objects that fit the token's `alg` and `kid`).
    Keys(Vec<Value>),
    /// GET this URL (a body of at most [`MAX_DOCUMENT_BYTES`]), hand the
    /// answer to [`JwksCache::fetched`], and look up again. Other tokens
    /// meanwhile get [`Lookup::Wait`] or the current keys.
    Fetch(Fetch),
    /// A fetch is running: wait for it to end, and look up again.
    Wait,
    /// Refuse the token, for this reason.
    Refuse(String),
}

/// A fetch the machine asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    pub url: String,
    discovery: bool,
}

/// What a fetch brought back.
#[derive(Debug, Clone, Copy)]
pub struct Fetched<'a> {
    pub status: u16,
    /// The `Cache-Control` header, if any.
    pub cache_control: Option<&'a str>,
    pub body: &'a [u8],
}

/// The key cache of one `jwt` verifier.
#[derive(Debug)]
pub struct JwksCache {
    source: KeySource,
    /// The JWKS URL, once known (at once for [`KeySource::Jwks`]).
    jwks_url: Option<String>,
    /// The last good key set.
    keys: Option<Vec<Value>>,
    fresh_until: u64,
    last_fetch: Option<u64>,
    fetching: bool,
    /// Why the last fetch failed, for the refusal's reason.
    last_error: Option<String>,
}

fn ms(d: Duration) -> u64 {
    crate::model::time::millis(d)
}

impl JwksCache {
    pub fn new(source: KeySource) -> JwksCache {
        let jwks_url = match &source {
            KeySource::Jwks(url) => Some(url.clone()),
            KeySource::Issuer(_) => None,
        };
        JwksCache {
            source,
            jwks_url,
            keys: None,
            fresh_until: 0,
            last_fetch: None,
            fetching: false,
            last_error: None,
        }
    }

    /// Until when (the clock of [`JwksCache::lookup`]) the current key set
    /// is used without asking for a new one: a signature verified with it
    /// may be remembered until then, not longer.
    pub fn fresh_until(&self) -> u64 {
        self.fresh_until
    }

    /// Whether a fetch has started and not yet been handed back.
    pub fn is_fetching(&self) -> bool {
        self.fetching
    }

    /// The keys for a token whose header has `kid` and `alg`, at `now_ms`
    /// (any monotonic milliseconds), or what to do first.
    pub fn lookup(&mut self, now_ms: u64, kid: Option<&str>, alg: &str) -> Lookup {
        let known = self.keys.as_ref().map(|keys| {
            // A plain loop, not an iterator chain (see ARCHITECTURE.md).
            let mut fit = Vec::new();
            for k in keys {
                if kid.is_none_or(|kid| k.get("kid").and_then(Value::as_str) == Some(kid))
                    && key_fits(k, alg)
                {
                    fit.push(k.clone());
                }
            }
            fit
        });
        let kid_known = self.keys.as_ref().is_some_and(|keys| {
            kid.is_none_or(|kid| {
                keys.iter()
                    .any(|k| k.get("kid").and_then(Value::as_str) == Some(kid))
            })
        });
        if self.fetching {
            return match known {
                Some(keys) if kid_known => Lookup::Keys(keys),
                _ => Lookup::Wait,
            };
        }
        let may_fetch = self
            .last_fetch
            .is_none_or(|at| now_ms >= at.saturating_add(ms(REFETCH_INTERVAL)));
        let stale = now_ms >= self.fresh_until;
        let Some(keys) = known else {
            return if may_fetch {
                self.start(now_ms)
            } else {
                Lookup::Refuse(self.unavailable())
            };
        };
        if (stale || !kid_known) && may_fetch {
            return self.start(now_ms);
        }
        if !kid_known {
            return Lookup::Refuse(format!(
                "no signing key has the token's kid {}",
                crate::wire::json::quoted(kid.unwrap_or_default())
            ));
        }
        if keys.is_empty() {
            return Lookup::Refuse(format!("no signing key fits the token's alg {alg}"));
        }
        Lookup::Keys(keys)
    }

    fn unavailable(&self) -> String {
        match &self.last_error {
            Some(e) => format!("the signing keys are unavailable: {e}"),
            None => "the signing keys are unavailable".into(),
        }
    }

    fn start(&mut self, now_ms: u64) -> Lookup {
        self.fetching = true;
        self.last_fetch = Some(now_ms);
        Lookup::Fetch(match &self.jwks_url {
            Some(url) => Fetch {
                url: url.clone(),
                discovery: false,
            },
            None => Fetch {
                url: self.source.first_url(),
                discovery: true,
            },
        })
    }

    /// The answer to `fetch` (`Err`: it could not be made: refused,
    /// unreachable, over the size limit), at `now_ms`.
    pub fn fetched(&mut self, now_ms: u64, fetch: &Fetch, answer: Result<Fetched<'_>, String>) {
        if !self.fetching {
            return;
        }
        self.fetching = false;
        let read = answer.and_then(|a| {
            if a.status != 200 {
                return Err(format!("{} answered HTTP {}", fetch.url, a.status));
            }
            if a.body.len() > MAX_DOCUMENT_BYTES {
                return Err(format!(
                    "{} sent over {MAX_DOCUMENT_BYTES} bytes",
                    fetch.url
                ));
            }
            let doc: Value = serde_json::from_slice(a.body)
                .map_err(|e| format!("{} sent no JSON: {e}", fetch.url))?;
            Ok((doc, a.cache_control))
        });
        let outcome = read.and_then(|(doc, cache_control)| {
            if fetch.discovery {
                let uri = doc
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("{} names no jwks_uri", fetch.url))?;
                if !key_url_allowed(uri) {
                    return Err(format!(
                        "{} names the jwks_uri {uri}, which is neither https nor loopback http",
                        fetch.url
                    ));
                }
                self.jwks_url = Some(uri.to_string());
                // The JWKS itself is fetched at the next lookup.
                self.last_fetch = None;
                return Ok(());
            }
            let keys = parse_jwks(&doc)
                .ok_or_else(|| format!("{} sent no JWK set with a signing key", fetch.url))?;
            let age = cache_control
                .and_then(max_age)
                .unwrap_or(DEFAULT_MAX_AGE)
                .clamp(REFETCH_INTERVAL, MAX_MAX_AGE);
            self.keys = Some(keys);
            self.fresh_until = now_ms.saturating_add(ms(age));
            Ok(())
        });
        self.last_error = outcome.err();
    }

    /// Why the last fetch failed, if it did.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}

/// The signing keys of a JWK set (`{"keys": [...]}`): objects with a
/// `kty`, not marked for encryption only. `None` when there is none.
pub fn parse_jwks(doc: &Value) -> Option<Vec<Value>> {
    let mut keys: Vec<Value> = Vec::new();
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for k in doc.get("keys")?.as_array()? {
        if k.get("kty").and_then(Value::as_str).is_some()
            && k.get("use").is_none_or(|u| u.as_str() == Some("sig"))
        {
            keys.push(k.clone());
        }
    }
    (!keys.is_empty()).then_some(keys)
}

/// Whether a JWK may verify a token signed with `alg`: its `kty` (and
/// curve) fit the algorithm, and its own `alg`, when it names one, is the
/// same. Symmetric (`oct`) keys never come from a JWKS: an HS256 token is
/// checked only with the configured secret, so a public key can never be
/// used as an HMAC secret.
pub fn key_fits(jwk: &Value, alg: &str) -> bool {
    let s = |name: &str| jwk.get(name).and_then(Value::as_str);
    if jwk.get("alg").is_some_and(|a| a.as_str() != Some(alg)) {
        return false;
    }
    match alg {
        "RS256" => s("kty") == Some("RSA"),
        "ES256" => s("kty") == Some("EC") && s("crv") == Some("P-256"),
        "EdDSA" => s("kty") == Some("OKP") && s("crv") == Some("Ed25519"),
        _ => false,
    }
}

/// The algorithms a `jwt` verifier may accept.
pub const ALGORITHMS: [&str; 4] = ["HS256", "RS256", "ES256", "EdDSA"];

/// `max-age` of a `Cache-Control` value; `no-store` / `no-cache` count as 0.
pub fn max_age(cache_control: &str) -> Option<Duration> {
    let mut age = None;
    for directive in cache_control.split(',') {
        let d = directive.trim();
        let lower = d.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(v) = lower.strip_prefix("max-age=") {
            age = crate::wire::http::parse_u64(v.trim_matches('"')).map(Duration::from_secs);
        }
    }
    age
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::VirtualTime;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const URL: &str = "https://id.example/jwks";

    fn set(kids: &[&str]) -> Vec<u8> {
        let keys: Vec<Value> = kids
            .iter()
            .map(|k| json!({"kty": "RSA", "kid": k, "n": "AQAB", "e": "AQAB"}))
            .collect();
        serde_json::to_vec(&json!({ "keys": keys })).unwrap()
    }

    fn ok<'a>(body: &'a [u8], cc: Option<&'a str>) -> Result<Fetched<'a>, String> {
        Ok(Fetched {
            status: 200,
            cache_control: cc,
            body,
        })
    }

    /// Looks `kid` up, answering each fetch with `answer` (counted); the keys' kids.
    fn verify(
        cache: &mut JwksCache,
        now: u64,
        kid: &str,
        fetches: &mut u32,
        answer: Result<Fetched<'_>, String>,
    ) -> Result<Vec<String>, String> {
        for _ in 0..4 {
            match cache.lookup(now, Some(kid), "RS256") {
                Lookup::Keys(keys) => {
                    return Ok(keys
                        .iter()
                        .map(|k| k["kid"].as_str().unwrap().to_string())
                        .collect())
                }
                Lookup::Fetch(f) => {
                    *fetches += 1;
                    cache.fetched(now, &f, answer.clone());
                }
                Lookup::Wait => return Err("wait".into()),
                Lookup::Refuse(r) => return Err(r),
            }
        }
        Err("loop".into())
    }

    #[test]
    fn keys_are_cached_for_max_age_then_fetched_again() {
        let clock = VirtualTime::manual();
        let mut cache = JwksCache::new(KeySource::Jwks(URL.into()));
        let body = set(&["a"]);
        let mut n = 0;
        let cc = Some("public, max-age=120");
        assert_eq!(
            verify(&mut cache, clock.now(), "a", &mut n, ok(&body, cc)).unwrap(),
            ["a"]
        );
        assert_eq!(n, 1);
        clock.advance_to(119_999);
        verify(&mut cache, clock.now(), "a", &mut n, ok(&body, cc)).unwrap();
        assert_eq!(n, 1, "fresh for 120 s");
        clock.advance_to(120_000);
        verify(&mut cache, clock.now(), "a", &mut n, ok(&body, cc)).unwrap();
        assert_eq!(n, 2, "stale: fetched again");
    }

    #[test]
    fn max_age_has_a_default_a_floor_and_a_cap() {
        assert_eq!(max_age("max-age=60"), Some(Duration::from_secs(60)));
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        for (cc, fresh_s) in [
            (None, 600),
            (Some("no-cache"), 30),
            (Some("max-age=999999999"), 24 * 3600),
        ] {
            let mut cache = JwksCache::new(KeySource::Jwks(URL.into()));
            let body = set(&["a"]);
            let mut n = 0;
            verify(&mut cache, 0, "a", &mut n, ok(&body, cc)).unwrap();
            verify(&mut cache, fresh_s * 1000 - 1, "a", &mut n, ok(&body, cc)).unwrap();
            assert_eq!(n, 1, "{cc:?}");
            verify(&mut cache, fresh_s * 1000, "a", &mut n, ok(&body, cc)).unwrap();
            assert_eq!(n, 2, "{cc:?}");
        }
    }

    #[test]
    fn an_unknown_kid_fetches_once_per_interval() {
        let mut cache = JwksCache::new(KeySource::Jwks(URL.into()));
        let body = set(&["a"]);
        let mut n = 0;
        verify(&mut cache, 0, "a", &mut n, ok(&body, None)).unwrap();
        // A fetch started at 0: an unknown kid within 30 s is refused at once.
        let e = verify(&mut cache, 1_000, "x", &mut n, ok(&body, None)).unwrap_err();
        assert!(e.contains("kid \"x\""), "{e}");
        assert_eq!(n, 1);
        // Invented kids cannot make it fetch either.
        for (i, kid) in ["y", "z", "w"].iter().enumerate() {
            verify(&mut cache, 2_000 + i as u64, kid, &mut n, ok(&body, None)).unwrap_err();
        }
        assert_eq!(n, 1);
        // After the interval, one fetch; the key is still unknown: refused.
        verify(&mut cache, 30_000, "x", &mut n, ok(&body, None)).unwrap_err();
        assert_eq!(n, 2);
        verify(&mut cache, 30_001, "x", &mut n, ok(&body, None)).unwrap_err();
        assert_eq!(n, 2);
        // A rotated-in key is found by the next allowed fetch.
        let rotated = set(&["a", "x"]);
        assert_eq!(
            verify(&mut cache, 60_000, "x", &mut n, ok(&rotated, None)).unwrap(),
            ["x"]
        );
        assert_eq!(n, 3);
        assert_eq!(
            verify(&mut cache, 60_001, "a", &mut n, ok(&rotated, None)).unwrap(),
            ["a"]
        );
        assert_eq!(n, 3);
    }

    #[test]
    fn the_last_good_set_survives_a_down_or_garbled_endpoint() {
        let mut cache = JwksCache::new(KeySource::Jwks(URL.into()));
        let body = set(&["a"]);
        let mut n = 0;
        let cc = Some("max-age=60");
        verify(&mut cache, 0, "a", &mut n, ok(&body, cc)).unwrap();
        let garbage = [
            Err("connection refused".to_string()),
            Ok(Fetched {
                status: 500,
                cache_control: None,
                body: b"oops",
            }),
            Ok(Fetched {
                status: 200,
                cache_control: None,
                body: b"<html>",
            }),
            Ok(Fetched {
                status: 200,
                cache_control: None,
                body: b"{\"keys\":[]}",
            }),
            Ok(Fetched {
                status: 200,
                cache_control: None,
                body: b"{\"keys\":[{\"kty\":\"RSA\",\"use\":\"enc\"}]}",
            }),
        ];
        let mut now = 60_000;
        for answer in garbage {
            let before = n;
            assert_eq!(verify(&mut cache, now, "a", &mut n, answer).unwrap(), ["a"]);
            assert_eq!(n, before + 1, "stale: one try");
            assert!(cache.last_error().is_some());
            // No new try within the interval.
            verify(&mut cache, now + 29_999, "a", &mut n, Err("down".into())).unwrap();
            assert_eq!(n, before + 1);
            now += 30_000;
        }
        // Back up: the new set is used.
        verify(&mut cache, now, "a", &mut n, ok(&set(&["a", "b"]), cc)).unwrap();
        assert!(cache.last_error().is_none());
        assert_eq!(
            verify(&mut cache, now + 1, "b", &mut n, Err("x".into())).unwrap(),
            ["b"]
        );
    }

    #[test]
    fn with_no_set_yet_a_failure_refuses_until_the_interval() {
        let mut cache = JwksCache::new(KeySource::Jwks(URL.into()));
        let mut n = 0;
        let e = verify(&mut cache, 0, "a", &mut n, Err("refused".into())).unwrap_err();
        assert!(e.contains("unavailable: refused"), "{e}");
        verify(&mut cache, 10_000, "a", &mut n, Err("refused".into())).unwrap_err();
        assert_eq!(n, 1);
        let body = set(&["a"]);
        verify(&mut cache, 30_000, "a", &mut n, ok(&body, None)).unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn one_fetch_in_flight_is_shared() {
        let mut cache = JwksCache::new(KeySource::Jwks(URL.into()));
        let Lookup::Fetch(f) = cache.lookup(0, Some("a"), "RS256") else {
            panic!("fetch first")
        };
        assert!(cache.is_fetching());
        assert_eq!(cache.lookup(0, Some("a"), "RS256"), Lookup::Wait);
        let body = set(&["a"]);
        cache.fetched(5, &f, ok(&body, Some("max-age=60")));
        assert!(matches!(cache.lookup(5, Some("a"), "RS256"), Lookup::Keys(k) if k.len() == 1));
        // Refreshing a stale set: known kids keep verifying meanwhile; an
        // unknown one waits for the fetch.
        let Lookup::Fetch(f) = cache.lookup(60_005, Some("a"), "RS256") else {
            panic!("stale")
        };
        assert!(matches!(
            cache.lookup(60_006, Some("a"), "RS256"),
            Lookup::Keys(_)
        ));
        assert_eq!(cache.lookup(60_006, Some("b"), "RS256"), Lookup::Wait);
        cache.fetched(60_010, &f, Err("down".into()));
        assert!(!cache.is_fetching());
        // A stray second answer changes nothing.
        cache.fetched(60_011, &f, ok(b"{}", None));
        assert!(matches!(
            cache.lookup(60_012, Some("a"), "RS256"),
            Lookup::Keys(_)
        ));
    }

    #[test]
    fn discovery_names_the_jwks() {
        let mut cache = JwksCache::new(KeySource::Issuer("https://id.example/".into()));
        let Lookup::Fetch(f) = cache.lookup(0, Some("a"), "RS256") else {
            panic!()
        };
        assert_eq!(f.url, "https://id.example/.well-known/openid-configuration");
        let doc = br#"{"issuer":"https://id.example","jwks_uri":"https://id.example/keys"}"#;
        cache.fetched(1, &f, ok(doc, None));
        let Lookup::Fetch(f) = cache.lookup(1, Some("a"), "RS256") else {
            panic!("the JWKS next")
        };
        assert_eq!(f.url, "https://id.example/keys");
        cache.fetched(2, &f, ok(&set(&["a"]), None));
        assert!(matches!(
            cache.lookup(2, Some("a"), "RS256"),
            Lookup::Keys(_)
        ));

        // A discovery document pointing at plain http elsewhere is refused.
        let mut cache = JwksCache::new(KeySource::Issuer("https://id.example".into()));
        let Lookup::Fetch(f) = cache.lookup(0, None, "RS256") else {
            panic!()
        };
        cache.fetched(1, &f, ok(br#"{"jwks_uri":"http://evil.example/k"}"#, None));
        assert!(cache.last_error().unwrap().contains("neither https"));
        assert!(matches!(cache.lookup(2, None, "RS256"), Lookup::Refuse(_)));
    }

    #[test]
    fn keys_fit_their_algorithm_only() {
        let rsa = json!({"kty": "RSA", "n": "x", "e": "AQAB"});
        let ec = json!({"kty": "EC", "crv": "P-256", "x": "x", "y": "y"});
        let ec384 = json!({"kty": "EC", "crv": "P-384", "x": "x", "y": "y"});
        let ed = json!({"kty": "OKP", "crv": "Ed25519", "x": "x"});
        let oct = json!({"kty": "oct", "k": "c2VjcmV0"});
        let rsa_ps = json!({"kty": "RSA", "alg": "PS256", "n": "x", "e": "AQAB"});
        assert!(key_fits(&rsa, "RS256") && !key_fits(&rsa, "ES256") && !key_fits(&rsa, "HS256"));
        assert!(key_fits(&ec, "ES256") && !key_fits(&ec384, "ES256"));
        assert!(key_fits(&ed, "EdDSA") && !key_fits(&ed, "RS256"));
        for alg in ALGORITHMS {
            assert!(!key_fits(&oct, alg), "oct never fits {alg}");
        }
        assert!(!key_fits(&rsa_ps, "RS256"));
        assert!(!key_fits(&rsa, "none"));
        // A token without kid gets every key fitting its alg.
        let mut cache = JwksCache::new(KeySource::Jwks(URL.into()));
        let Lookup::Fetch(f) = cache.lookup(0, None, "ES256") else {
            panic!()
        };
        let doc = serde_json::to_vec(&json!({"keys": [rsa, ec, ed, oct]})).unwrap();
        cache.fetched(0, &f, ok(&doc, None));
        assert_eq!(
            cache.lookup(1, None, "ES256"),
            Lookup::Keys(vec![ec.clone()])
        );
        assert!(
            matches!(cache.lookup(1, None, "HS256"), Lookup::Refuse(r) if r.contains("alg HS256"))
        );
    }

    #[test]
    fn key_urls_are_https_or_loopback() {
        for ok in [
            "https://id.example/jwks",
            "http://127.0.0.1:8080/jwks",
            "http://localhost/jwks",
            "http://[::1]:9/k",
        ] {
            assert!(key_url_allowed(ok), "{ok}");
        }
        for bad in [
            "http://id.example/jwks",
            "http://127.0.0.1.evil.example/k",
            "http://localhost@evil.example/k",
            "ftp://x/y",
            "jwks",
        ] {
            assert!(!key_url_allowed(bad), "{bad}");
        }
        let cfg =
            |jwks: Option<&str>, iss: Option<&str>, algs: &[&str]| super::super::auth::JwtConfig {
                jwks_url: jwks.map(Into::into),
                issuer: iss.map(Into::into),
                algorithms: algs.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            };
        assert_eq!(
            KeySource::of(&cfg(None, Some("https://i"), &["RS256"])),
            Some(Ok(KeySource::Issuer("https://i".into())))
        );
        assert_eq!(
            KeySource::of(&cfg(None, Some("https://i"), &["HS256"])),
            None
        );
        assert!(matches!(
            KeySource::of(&cfg(Some("http://x.example/k"), None, &["RS256"])),
            Some(Err(_))
        ));
    }

    /// Hostile key documents, `Cache-Control` values, kids and `Host`
    /// headers, from a seeded generator: nothing panics, keys handed out
    /// always fit the token's alg, and the machine is never left fetching.
    #[test]
    fn fuzz_hostile_key_documents_and_hosts() {
        let mut seed = 0x5eed_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let atoms = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"keys\"",
            "\"kty\"",
            "\"RSA\"",
            "\"EC\"",
            "\"OKP\"",
            "\"oct\"",
            "\"kid\"",
            "\"a\"",
            "\"alg\"",
            "\"RS256\"",
            "\"use\"",
            "\"sig\"",
            "\"crv\"",
            "\"P-256\"",
            "\"Ed25519\"",
            "null",
            "1e999",
            "\"jwks_uri\"",
            "\"https://k/j\"",
            "\"http://x/j\"",
            "\u{0}",
            "\u{fffd}",
            "-1",
        ];
        let algs = ["RS256", "ES256", "EdDSA", "HS256", "none", ""];
        let hosts = [
            "localhost",
            "127.0.0.1",
            "[::1]",
            ":",
            "[",
            "]",
            ".",
            "@",
            "a",
            "%",
            "9",
        ];
        let mut cache = JwksCache::new(KeySource::Issuer("https://k".into()));
        for i in 0..20_000u64 {
            let mut doc = String::new();
            for _ in 0..(next() % 24) {
                doc.push_str(atoms[(next() % atoms.len() as u64) as usize]);
            }
            if i % 3 == 0 {
                doc = format!(
                    "{{\"jwks_uri\":\"https://k/j\",\"keys\":[{{\"kty\":\"RSA\",\"kid\":\"{}\"}},{doc}]}}",
                    next() % 4
                );
            }
            let kid = (next() % 5 != 0).then(|| format!("{}", next() % 4));
            let alg = algs[(next() % algs.len() as u64) as usize];
            let now = i * (next() % 40_000);
            match cache.lookup(now, kid.as_deref(), alg) {
                Lookup::Keys(keys) => assert!(keys.iter().all(|k| key_fits(k, alg))),
                Lookup::Fetch(f) => {
                    let cc = format!("max-age={}", next() as i64);
                    let status = [200, 200, 500, 304][(next() % 4) as usize];
                    cache.fetched(
                        now,
                        &f,
                        Ok(Fetched {
                            status,
                            cache_control: Some(&cc),
                            body: doc.as_bytes(),
                        }),
                    );
                    assert!(!cache.is_fetching());
                }
                Lookup::Wait => panic!("nothing is in flight"),
                Lookup::Refuse(_) => {}
            }
            let _ = max_age(&doc);
            let mut host = String::new();
            for _ in 0..(next() % 6) {
                host.push_str(hosts[(next() % hosts.len() as u64) as usize]);
            }
            let allowed = super::super::policy::AllowedHosts::loopback()
                .with(&host)
                .with_any_ip();
            let _ = allowed.allows(Some(&host));
            let _ = key_url_allowed(&format!("http://{host}/k"));
        }
    }
}
