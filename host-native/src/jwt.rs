//! JWT signatures, natively: the `jwt` verifier's host half. The
//! `jsonwebtoken` crate (pure-Rust crypto) checks the signature and `alg`;
//! the keys are the HS256 secret of `secretEnv`, or the JWKS that core's
//! [`JwksCache`] says to fetch (from `jwksUrl`, or the issuer's OIDC
//! discovery document), fetched here with the native HTTP client. The
//! claims (`iss`, `aud`, `exp`, `nbf`, scopes) are core's to check: this
//! returns the payload as it is.

use crate::NativeTransport;
use futures_util::StreamExt;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
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

/// Checks JWT signatures for one `jwt` block.
pub struct JwtVerifier {
    /// The accepted algorithms.
    algorithms: Vec<Algorithm>,
    /// The HS256 key (from `secretEnv`).
    secret: Option<DecodingKey>,
    /// The asymmetric keys.
    keys: Option<Arc<KeyFetcher>>,
}

/// The key cache, its one fetch and the verifications waiting for it.
struct KeyFetcher {
    cache: Mutex<JwksCache>,
    fetched: Notify,
    clock: Clock,
    transport: Arc<NativeTransport>,
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
                clock: {
                    let epoch = Instant::now();
                    Arc::new(move || epoch.elapsed().as_millis() as u64)
                },
                transport: NativeTransport::shared(),
            }))
        } else {
            None
        };
        Ok(JwtVerifier {
            algorithms,
            secret,
            keys,
        })
    }

    /// The same verifier on another clock (for tests and simulations:
    /// the key cache's max-age and refetch interval follow it).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        if let Some(keys) = self.keys.take() {
            let cache = std::mem::replace(
                &mut *keys.cache.lock().unwrap_or_else(|p| p.into_inner()),
                JwksCache::new(KeySource::Jwks(String::new())),
            );
            self.keys = Some(Arc::new(KeyFetcher {
                cache: Mutex::new(cache),
                fetched: Notify::new(),
                clock,
                transport: keys.transport.clone(),
            }));
        }
        self
    }

    /// The token's claims when its signature is good, by a key configured
    /// for its `alg`; why not otherwise (never the token itself).
    pub async fn verify(&self, token: &str) -> Result<Claims, String> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| format!("the token is not a signed JWT ({e})"))?;
        let alg = header.alg;
        if !self.algorithms.contains(&alg) {
            return Err(format!("the token's alg {} is not accepted", name(alg)));
        }
        if alg == Algorithm::HS256 {
            let key = self.secret.as_ref().ok_or("no HS256 secret")?;
            return decode(token, key, alg);
        }
        let fetcher = self.keys.as_ref().ok_or("no signing keys are configured")?;
        let jwks = fetcher.keys_for(header.kid.as_deref(), name(alg)).await?;
        let mut last = String::from("no signing key fits the token");
        for jwk in jwks {
            let key = serde_json::from_value::<jsonwebtoken::jwk::Jwk>(jwk)
                .map_err(|e| e.to_string())
                .and_then(|jwk| DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string()));
            match key {
                Ok(key) => match decode(token, &key, alg) {
                    Ok(claims) => return Ok(claims),
                    Err(e) => last = e,
                },
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
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
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
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
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
