//! JWT signatures, natively: the `jwt` verifier's host half. The
//! `jsonwebtoken` crate (pure-Rust crypto) checks the signature and `alg`;
//! the keys are the HS256 secret of `secretEnv`, or the JWKS that core's
//! [`JwksCache`] says to fetch (from `jwksUrl`, or the issuer's OIDC
//! discovery document), fetched here with the native HTTP client. The
//! claims (`iss`, `aud`, `exp`, `nbf`, scopes) are core's to check: this
//! returns the payload as it is.
//!
//! A token whose signature checked out is remembered, so a caller sending
//! the same token again costs a map lookup instead of a signature check
//! (RS256 with pure-Rust crypto is about 190 µs): for at most
//! [`REMEMBER_MS`], never past the freshness of the key set that verified
//! it, and forgotten whenever a key set is fetched (a key rotated out stops
//! working as soon as the new set is in). Only the signature is remembered:
//! core checks the claims (`exp` included) on every request.

use crate::lock::unpoisoned as lock;
use crate::NativeTransport;
use futures_util::StreamExt;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use toolnexus_core::server::auth::{Claims, JwtConfig};
use toolnexus_core::server::jwks::{
    Fetch, Fetched, JwksCache, KeySource, Lookup, ALGORITHMS, MAX_DOCUMENT_BYTES,
};
use toolnexus_core::{HttpRequest, Transport};

/// How long one JWKS or discovery fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a verified token is remembered, at most.
pub const REMEMBER_MS: u64 = 60_000;

/// How many verified tokens are remembered, at most (each with its text
/// and claims: about 1 MB in all for typical tokens).
const REMEMBER_MAX: usize = 1024;

/// Checks JWT signatures for one `jwt` block.
pub struct JwtVerifier {
    /// The accepted algorithms.
    algorithms: Vec<Algorithm>,
    /// The HS256 key (from `secretEnv`).
    secret: Option<DecodingKey>,
    /// The asymmetric keys.
    keys: Option<Arc<KeyFetcher>>,
    /// The tokens whose signature checked out (shared with the fetcher,
    /// which forgets them all when a key set comes in).
    remembered: Arc<Mutex<Remembered>>,
    clock: Clock,
    /// Signature checks made, for benchmarks and tests.
    checks: AtomicU64,
}

/// Verified tokens, with their claims and until when they may be reused.
#[derive(Default)]
struct Remembered {
    tokens: HashMap<Box<str>, (Claims, u64)>,
    /// Counts the key sets fetched: a verification that started under an
    /// older set is not remembered.
    generation: u64,
}

impl Remembered {
    fn get(&self, token: &str, now_ms: u64) -> Option<Claims> {
        match self.tokens.get(token) {
            Some((claims, until)) if now_ms < *until => Some(claims.clone()),
            _ => None,
        }
    }

    fn put(&mut self, generation: u64, token: &str, claims: &Claims, until: u64, now_ms: u64) {
        if generation != self.generation || until <= now_ms {
            return;
        }
        if self.tokens.len() >= REMEMBER_MAX {
            self.tokens.retain(|_, (_, u)| now_ms < *u);
            if self.tokens.len() >= REMEMBER_MAX {
                self.tokens.clear();
            }
        }
        self.tokens.insert(token.into(), (claims.clone(), until));
    }

    fn forget_all(&mut self) {
        self.tokens.clear();
        self.generation += 1;
    }
}

/// A clock from now on, in milliseconds.
fn monotonic() -> Clock {
    let epoch = Instant::now();
    Arc::new(move || epoch.elapsed().as_millis() as u64)
}

/// The key cache, its one fetch and the verifications waiting for it.
struct KeyFetcher {
    cache: Mutex<JwksCache>,
    fetched: Notify,
    clock: Clock,
    transport: Arc<NativeTransport>,
    remembered: Arc<Mutex<Remembered>>,
}

/// Milliseconds on a monotonic clock (only differences matter).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("algorithms", &self.algorithms)
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

fn algorithm(name: &str) -> Option<Algorithm> {
    Some(match name {
        "HS256" => Algorithm::HS256,
        "RS256" => Algorithm::RS256,
        "ES256" => Algorithm::ES256,
        "EdDSA" => Algorithm::EdDSA,
        _ => return None,
    })
}

fn name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::HS256 => "HS256",
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        _ => "another algorithm",
    }
}

impl JwtVerifier {
    /// The verifier of `cfg`, reading the HS256 secret with `env`. Errors
    /// say what is wrong with the block: an algorithm that is not one of
    /// HS256, RS256, ES256, EdDSA; HS256 without a secret; an asymmetric
    /// algorithm without `jwksUrl` or `issuer`; a key URL that is neither
    /// https nor loopback http. With no `algorithms`, HS256 when
    /// `secretEnv` is set, else RS256, ES256 and EdDSA.
    pub fn new(cfg: &JwtConfig, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut algorithms = Vec::new();
        for a in &cfg.algorithms {
            let alg = algorithm(a).ok_or_else(|| {
                format!(
                    "a2a.auth.jwt.algorithms: {a:?} is not one of {}",
                    ALGORITHMS.join(", ")
                )
            })?;
            if !algorithms.contains(&alg) {
                algorithms.push(alg);
            }
        }
        if algorithms.is_empty() {
            algorithms = if cfg.secret_env.is_some() {
                vec![Algorithm::HS256]
            } else {
                vec![Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA]
            };
        }
        let secret = if algorithms.contains(&Algorithm::HS256) {
            let var = cfg.secret_env.as_deref().ok_or(
                "a2a.auth.jwt: HS256 needs secretEnv, the environment variable holding the secret",
            )?;
            let secret = env(var).filter(|s| !s.is_empty()).ok_or_else(|| {
                format!("a2a.auth.jwt.secretEnv: the environment variable {var} is not set")
            })?;
            Some(
                DecodingKey::from_secret(secret.as_bytes())
                    .map_err(|e| format!("a2a.auth.jwt.secretEnv: {e}"))?,
            )
        } else {
            None
        };
        let remembered = Arc::new(Mutex::new(Remembered::default()));
        let clock = monotonic();
        let asymmetric = algorithms.iter().any(|a| *a != Algorithm::HS256);
        let keys = if asymmetric {
            let with_algs = JwtConfig {
                algorithms: algorithms.iter().map(|a| name(*a).to_string()).collect(),
                ..cfg.clone()
            };
            let source = KeySource::of(&with_algs)
                .ok_or("a2a.auth.jwt: RS256, ES256 and EdDSA need jwksUrl or an OIDC issuer")?
                .map_err(|e| format!("a2a.auth.jwt: {e}"))?;
            Some(Arc::new(KeyFetcher {
                cache: Mutex::new(JwksCache::new(source)),
                fetched: Notify::new(),
                clock: clock.clone(),
                transport: NativeTransport::shared(),
                remembered: remembered.clone(),
            }))
        } else {
            None
        };
        Ok(JwtVerifier {
            algorithms,
            secret,
            keys,
            remembered,
            clock,
            checks: AtomicU64::new(0),
        })
    }

    /// The same verifier on another clock (for tests and simulations:
    /// the key cache's max-age and refetch interval follow it).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        if let Some(keys) = self.keys.take() {
            let cache = std::mem::replace(
                &mut *lock(&keys.cache),
                JwksCache::new(KeySource::Jwks(String::new())),
            );
            self.keys = Some(Arc::new(KeyFetcher {
                cache: Mutex::new(cache),
                fetched: Notify::new(),
                clock: clock.clone(),
                transport: keys.transport.clone(),
                remembered: self.remembered.clone(),
            }));
        }
        lock(&self.remembered).forget_all();
        self.clock = clock;
        self
    }

    /// How many signatures this verifier has checked (a remembered token
    /// costs none).
    pub fn signatures_checked(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// The token's claims when its signature is good, by a key configured
    /// for its `alg`; why not otherwise (never the token itself).
    pub async fn verify(&self, token: &str) -> Result<Claims, String> {
        let now = (self.clock)();
        if let Some(claims) = lock(&self.remembered).get(token, now) {
            return Ok(claims);
        }
        let (claims, until, generation) = self.check(token, now).await?;
        lock(&self.remembered).put(generation, token, &claims, until, now);
        Ok(claims)
    }

    /// The signature check of [`JwtVerifier::verify`]: the claims, until
    /// when they may be remembered, and the generation of the key set that
    /// verified them.
    async fn check(&self, token: &str, now: u64) -> Result<(Claims, u64, u64), String> {
        let remember_until = now.saturating_add(REMEMBER_MS);
        let generation = || lock(&self.remembered).generation;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| format!("the token is not a signed JWT ({e})"))?;
        let alg = header.alg;
        if !self.algorithms.contains(&alg) {
            return Err(format!("the token's alg {} is not accepted", name(alg)));
        }
        if alg == Algorithm::HS256 {
            let key = self.secret.as_ref().ok_or("no HS256 secret")?;
            self.checks.fetch_add(1, Ordering::Relaxed);
            return Ok((decode(token, key, alg)?, remember_until, generation()));
        }
        let fetcher = self.keys.as_ref().ok_or("no signing keys are configured")?;
        let jwks = fetcher.keys_for(header.kid.as_deref(), name(alg)).await?;
        let until = remember_until.min(lock(&fetcher.cache).fresh_until());
        let generation = generation();
        let mut last = String::from("no signing key fits the token");
        for jwk in jwks {
            let key = serde_json::from_value::<jsonwebtoken::jwk::Jwk>(jwk)
                .map_err(|e| e.to_string())
                .and_then(|jwk| DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string()));
            match key {
                Ok(key) => {
                    self.checks.fetch_add(1, Ordering::Relaxed);
                    match decode(token, &key, alg) {
                        Ok(claims) => return Ok((claims, until, generation)),
                        Err(e) => last = e,
                    }
                }
                Err(e) => last = format!("a signing key cannot be used: {e}"),
            }
        }
        Err(last)
    }
}

/// Checks the signature only: claims are core's.
fn decode(token: &str, key: &DecodingKey, alg: Algorithm) -> Result<Claims, String> {
    let mut validation = Validation::new(alg);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    jsonwebtoken::decode::<Claims>(token, key, &validation)
        .map(|data| data.claims)
        .map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => "bad signature".to_string(),
            _ => format!("the token cannot be verified ({e})"),
        })
}

impl KeyFetcher {
    fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    /// The keys for a token, fetching as core's cache says; a bounded
    /// number of steps (a discovery document, a JWKS, a wait).
    async fn keys_for(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: &str,
    ) -> Result<Vec<serde_json::Value>, String> {
        for _ in 0..6 {
            let fetched = self.fetched.notified();
            tokio::pin!(fetched);
            fetched.as_mut().enable();
            let step = {
                let mut cache = lock(&self.cache);
                cache.lookup(self.now_ms(), kid, alg)
            };
            match step {
                Lookup::Keys(keys) => return Ok(keys),
                Lookup::Refuse(why) => return Err(why),
                Lookup::Wait => {
                    let _ = tokio::time::timeout(FETCH_TIMEOUT * 2, fetched).await;
                }
                Lookup::Fetch(fetch) => {
                    // Its own task: a verification given up on (its
                    // request dropped) does not leave the fetch half done.
                    let this = self.clone();
                    let _ = tokio::spawn(async move { this.fetch(fetch).await }).await;
                }
            }
        }
        Err("the signing keys could not be fetched".into())
    }

    async fn fetch(&self, fetch: Fetch) {
        let answer = tokio::time::timeout(FETCH_TIMEOUT, get(&self.transport, &fetch.url)).await;
        let answer = answer.unwrap_or_else(|_| {
            Err(format!(
                "{} did not answer within {} s",
                fetch.url,
                FETCH_TIMEOUT.as_secs()
            ))
        });
        {
            let mut cache = lock(&self.cache);
            let now = self.now_ms();
            match &answer {
                Ok((status, cache_control, body)) => cache.fetched(
                    now,
                    &fetch,
                    Ok(Fetched {
                        status: *status,
                        cache_control: cache_control.as_deref(),
                        body,
                    }),
                ),
                Err(e) => cache.fetched(now, &fetch, Err(e.clone())),
            }
            if let Some(e) = cache.last_error() {
                tracing::warn!("JWT signing keys: {e}");
            }
        }
        // Whatever came back, a token verified before is checked again.
        lock(&self.remembered).forget_all();
        self.fetched.notify_waiters();
    }
}

/// GETs a key document: its status, `Cache-Control` and at most
/// [`MAX_DOCUMENT_BYTES`] of body (more is an error).
async fn get(
    transport: &NativeTransport,
    url: &str,
) -> Result<(u16, Option<String>, Vec<u8>), String> {
    let req = HttpRequest {
        method: "GET".into(),
        url: url.to_string(),
        headers: vec![("Accept".into(), "application/json".into())],
        body: Vec::new(),
    };
    let mut resp = transport
        .send_streaming(req)
        .await
        .map_err(|e| format!("fetching {url} failed: {e}"))?;
    let mut body = Vec::new();
    while let Some(chunk) = resp.body.next().await {
        let chunk = chunk.map_err(|e| format!("reading {url} failed: {e}"))?;
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("{url} sent over {MAX_DOCUMENT_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((
        resp.status,
        resp.header("Cache-Control").map(str::to_string),
        body,
    ))
}
