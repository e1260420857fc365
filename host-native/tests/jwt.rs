//! The native JWT verifier over real HTTP: tokens minted here (RS256,
//! ES256, EdDSA, HS256) against a JWKS served on 127.0.0.1 by a stub that
//! counts its fetches. Time is a test clock: the key cache's max-age and
//! refetch interval are crossed without waiting.

mod common;

use common::Stub;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use toolnexus_core::server::auth::JwtConfig;
use toolnexus_core::HttpResponse;
use toolnexus_host_native::jwt::JwtVerifier;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jwt")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

struct Keys {
    rsa: EncodingKey,
    rsa2: EncodingKey,
    ec: EncodingKey,
    ed: EncodingKey,
}

fn keys() -> Keys {
    Keys {
        rsa: EncodingKey::from_rsa_pem(&fixture("rsa.pem")).expect("rsa"),
        rsa2: EncodingKey::from_rsa_pem(&fixture("rsa2.pem")).expect("rsa2"),
        ec: EncodingKey::from_ec_pem(&fixture("ec.pem")).expect("ec"),
        ed: EncodingKey::from_ed_pem(&fixture("ed25519.pem")).expect("ed"),
    }
}

/// The public JWK of a private key, with its `kid`.
fn jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Value {
    let mut v = serde_json::to_value(Jwk::from_encoding_key(key, alg).expect("jwk")).expect("json");
    v["kid"] = json!(kid);
    v
}

fn mint(alg: Algorithm, key: &EncodingKey, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_string);
    encode(&header, claims, key).expect("mint")
}

fn claims() -> Value {
    json!({"sub": "alice", "iss": "https://id.test", "aud": "agent", "exp": 4_000_000_000u64})
}

/// What the stub answers.
const UP: u8 = 0;
const ERROR: u8 = 1;
const GARBAGE: u8 = 2;

/// A JWKS (and OIDC discovery) endpoint on 127.0.0.1.
struct Jwks {
    stub: Stub,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicU64>,
    discoveries: Arc<AtomicU64>,
    mode: Arc<AtomicU8>,
}

impl Jwks {
    async fn start(keys: Vec<Value>) -> Jwks {
        let set = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(AtomicU64::new(0));
        let discoveries = Arc::new(AtomicU64::new(0));
        let mode = Arc::new(AtomicU8::new(UP));
        let base = Arc::new(Mutex::new(String::new()));
        let stub = {
            let (set, fetches, discoveries, mode, base) = (
                set.clone(),
                fetches.clone(),
                discoveries.clone(),
                mode.clone(),
                base.clone(),
            );
            Stub::start(move |req| {
                if req.url == "/.well-known/openid-configuration" {
                    discoveries.fetch_add(1, Ordering::SeqCst);
                    let base = base.lock().unwrap().clone();
                    return common::json_response(
                        200,
                        &json!({"issuer": base, "jwks_uri": format!("{base}/keys")}),
                    );
                }
                fetches.fetch_add(1, Ordering::SeqCst);
                match mode.load(Ordering::SeqCst) {
                    ERROR => HttpResponse::json(503, b"{}".to_vec()),
                    GARBAGE => HttpResponse::json(200, b"<html>down</html>".to_vec()),
                    _ => {
                        let mut r =
                            common::json_response(200, &json!({"keys": *set.lock().unwrap()}));
                        r.headers
                            .push(("Cache-Control".into(), "public, max-age=300".into()));
                        r
                    }
                }
            })
            .await
        };
        *base.lock().unwrap() = stub.url().to_string();
        Jwks {
            stub,
            keys: set,
            fetches,
            discoveries,
            mode,
        }
    }

    fn url(&self) -> String {
        format!("{}/keys", self.stub.url())
    }

    fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::SeqCst)
    }
}

/// A test clock in milliseconds.
#[derive(Clone, Default)]
struct Clock(Arc<AtomicU64>);

impl Clock {
    fn set_secs(&self, s: u64) {
        self.0.store(s * 1000, Ordering::SeqCst);
    }
    fn fun(&self) -> toolnexus_host_native::jwt::Clock {
        let c = self.0.clone();
        Arc::new(move || c.load(Ordering::SeqCst))
    }
}

fn verifier(cfg: JwtConfig, clock: &Clock) -> Arc<JwtVerifier> {
    Arc::new(
        JwtVerifier::new(&cfg, |_| None)
            .expect("verifier")
            .with_clock(clock.fun()),
    )
}

fn asymmetric(url: &str) -> JwtConfig {
    JwtConfig {
        jwks_url: Some(url.to_string()),
        algorithms: vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
        ..Default::default()
    }
}

fn all_keys(k: &Keys) -> Vec<Value> {
    vec![
        jwk(&k.rsa, Algorithm::RS256, "rsa"),
        jwk(&k.ec, Algorithm::ES256, "ec"),
        jwk(&k.ed, Algorithm::EdDSA, "ed"),
    ]
}

#[tokio::test]
async fn rs256_es256_and_eddsa_tokens_verify_with_one_fetch() {
    let k = keys();
    let jwks = Jwks::start(all_keys(&k)).await;
    let clock = Clock::default();
    let v = verifier(asymmetric(&jwks.url()), &clock);
    // Cold cache, concurrent verifications: one fetch shared.
    let tokens = [
        mint(Algorithm::RS256, &k.rsa, Some("rsa"), &claims()),
        mint(Algorithm::ES256, &k.ec, Some("ec"), &claims()),
        mint(Algorithm::EdDSA, &k.ed, Some("ed"), &claims()),
        // No kid: every key that fits the alg is tried.
        mint(Algorithm::ES256, &k.ec, None, &claims()),
    ];
    let mut runs = Vec::new();
    for _ in 0..4 {
        for t in &tokens {
            let (v, t) = (v.clone(), t.clone());
            runs.push(tokio::spawn(async move { v.verify(&t).await }));
        }
    }
    for run in runs {
        let got = run.await.expect("no panic").expect("verified");
        assert_eq!(got["sub"], "alice");
        assert_eq!(got["aud"], "agent");
    }
    assert_eq!(jwks.fetches(), 1, "one fetch for every verification");
    // Within max-age, none more.
    clock.set_secs(299);
    v.verify(&tokens[0]).await.expect("verified");
    assert_eq!(jwks.fetches(), 1);
    // Stale: fetched again.
    clock.set_secs(300);
    v.verify(&tokens[0]).await.expect("verified");
    assert_eq!(jwks.fetches(), 2);
}

#[tokio::test]
async fn forged_tokens_are_refused_without_panicking() {
    let k = keys();
    let jwks = Jwks::start(all_keys(&k)).await;
    let clock = Clock::default();
    let v = verifier(asymmetric(&jwks.url()), &clock);
    let good = mint(Algorithm::RS256, &k.rsa, Some("rsa"), &claims());
    v.verify(&good).await.expect("the good token verifies");
    let b64 = |v: &Value| base64_url_safe(&serde_json::to_vec(v).unwrap());
    let parts: Vec<&str> = good.split('.').collect();
    // alg none, unsigned.
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT", "kid": "rsa"})),
        parts[1]
    );
    // Algorithm confusion: HS256 with the RSA public key as the secret.
    let confused = mint(
        Algorithm::HS256,
        &EncodingKey::from_secret(&fixture("rsa.pub.pem")).expect("key"),
        Some("rsa"),
        &claims(),
    );
    // Tampered payload, original signature.
    let mut evil = claims();
    evil["sub"] = json!("mallory");
    let tampered = format!("{}.{}.{}", parts[0], b64(&evil), parts[2]);
    // Signed by another key under a known kid.
    let other_key = mint(Algorithm::RS256, &k.rsa2, Some("rsa"), &claims());
    // An ES256 token naming the RSA key.
    let kty_mismatch = mint(Algorithm::ES256, &k.ec, Some("rsa"), &claims());
    // An EdDSA token naming the EC key.
    let crv_mismatch = mint(Algorithm::EdDSA, &k.ed, Some("ec"), &claims());
    let cases = [
        ("alg none", none, "not a signed JWT"),
        (
            "HS256 signed with the RSA public key",
            confused,
            "alg HS256 is not accepted",
        ),
        ("tampered payload", tampered, "bad signature"),
        ("another key's signature", other_key, "bad signature"),
        (
            "ES256 naming an RSA key",
            kty_mismatch,
            "no signing key fits",
        ),
        (
            "EdDSA naming an EC key",
            crv_mismatch,
            "no signing key fits",
        ),
        ("empty", String::new(), "not a signed JWT"),
        ("two parts", "a.b".into(), "not a signed JWT"),
        ("garbage", "!!!.???.***".into(), "not a signed JWT"),
        ("four parts", format!("{good}.x"), "not a signed JWT"),
        (
            "no signature",
            format!("{}.{}.", parts[0], parts[1]),
            "bad signature",
        ),
    ];
    for (what, token, why) in cases {
        let e = v.verify(&token).await.expect_err(what);
        assert!(e.contains(why), "{what}: {e}");
        assert!(
            token.len() < 8 || !e.contains(&token),
            "{what}: the token is not echoed"
        );
    }
    assert_eq!(jwks.fetches(), 1, "known kids: no refetch");
}

/// base64url without padding (the test's own, for hand-made tokens).
fn base64_url_safe(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test]
async fn an_unknown_kid_fetches_at_most_once_per_interval() {
    let k = keys();
    let jwks = Jwks::start(vec![jwk(&k.rsa, Algorithm::RS256, "rsa")]).await;
    let clock = Clock::default();
    let v = verifier(asymmetric(&jwks.url()), &clock);
    v.verify(&mint(Algorithm::RS256, &k.rsa, Some("rsa"), &claims()))
        .await
        .expect("verified");
    assert_eq!(jwks.fetches(), 1);
    // A new key, not yet published; its tokens, under many invented kids too.
    let rotated = mint(Algorithm::RS256, &k.rsa2, Some("rsa2"), &claims());
    let invented: Vec<String> = (0..20)
        .map(|i| {
            mint(
                Algorithm::RS256,
                &k.rsa2,
                Some(&format!("kid-{i}")),
                &claims(),
            )
        })
        .collect();
    clock.set_secs(10);
    let e = v.verify(&rotated).await.expect_err("unknown kid");
    assert!(e.contains("kid"), "{e}");
    for t in &invented {
        v.verify(t).await.expect_err("unknown kid");
    }
    assert_eq!(jwks.fetches(), 1, "within the interval: no fetch");
    // Past the interval, concurrent unknown kids share one fetch.
    clock.set_secs(30);
    let mut runs = Vec::new();
    for t in invented.iter().chain([&rotated]) {
        let (v, t) = (v.clone(), t.clone());
        runs.push(tokio::spawn(async move { v.verify(&t).await }));
    }
    for run in runs {
        run.await.expect("no panic").expect_err("still unknown");
    }
    assert_eq!(jwks.fetches(), 2);
    // The key is published: found at the next allowed fetch.
    jwks.keys
        .lock()
        .unwrap()
        .push(jwk(&k.rsa2, Algorithm::RS256, "rsa2"));
    clock.set_secs(45);
    v.verify(&rotated).await.expect_err("within the interval");
    assert_eq!(jwks.fetches(), 2);
    clock.set_secs(60);
    v.verify(&rotated).await.expect("rotated in");
    assert_eq!(jwks.fetches(), 3);
}

#[tokio::test]
async fn a_verified_token_is_remembered_until_its_key_set_changes() {
    let k = keys();
    let jwks = Jwks::start(vec![jwk(&k.rsa, Algorithm::RS256, "rsa")]).await;
    let clock = Clock::default();
    let v = verifier(asymmetric(&jwks.url()), &clock);
    let token = mint(Algorithm::RS256, &k.rsa, Some("rsa"), &claims());
    // Concurrent and repeated: each distinct token's signature is checked
    // once.
    let mut runs = Vec::new();
    for _ in 0..8 {
        let (v, t) = (v.clone(), token.clone());
        runs.push(tokio::spawn(async move { v.verify(&t).await }));
    }
    for run in runs {
        run.await.expect("no panic").expect("verified");
    }
    let first = v.signatures_checked();
    assert!((1..=8).contains(&first), "{first}");
    for _ in 0..50 {
        let got = v.verify(&token).await.expect("remembered");
        assert_eq!(got["sub"], "alice");
    }
    assert_eq!(
        v.signatures_checked(),
        first,
        "no check for a remembered token"
    );
    // A token that differs from a remembered one only in its signature is
    // checked, and refused.
    let (head, sig) = token.rsplit_once('.').expect("three parts");
    let flipped = if sig.starts_with('A') { "B" } else { "A" };
    let forged = format!("{head}.{flipped}{}", &sig[1..]);
    v.verify(&forged).await.expect_err("forged");
    assert_eq!(v.signatures_checked(), first + 1);
    // Remembered for at most REMEMBER_MS: then checked again.
    let remember = toolnexus_host_native::jwt::REMEMBER_MS;
    clock.0.store(remember - 1, Ordering::SeqCst);
    v.verify(&token).await.expect("remembered");
    assert_eq!(v.signatures_checked(), first + 1);
    clock.0.store(remember, Ordering::SeqCst);
    v.verify(&token).await.expect("checked again");
    assert_eq!(v.signatures_checked(), first + 2);
    // The key is rotated out: once the new set is fetched (the old one is
    // stale at 300 s), the remembered token is refused.
    *jwks.keys.lock().unwrap() = vec![jwk(&k.rsa2, Algorithm::RS256, "rsa2")];
    clock.set_secs(299);
    v.verify(&token).await.expect("still the old set");
    clock.set_secs(300);
    let e = v.verify(&token).await.expect_err("its key is gone");
    assert!(e.contains("kid"), "{e}");
    assert_eq!(jwks.fetches(), 2);
    let rotated = mint(Algorithm::RS256, &k.rsa2, Some("rsa2"), &claims());
    v.verify(&rotated).await.expect("the new key");
}

#[tokio::test]
async fn the_last_good_set_is_kept_when_the_endpoint_fails_or_goes_down() {
    let k = keys();
    let jwks = Jwks::start(vec![jwk(&k.rsa, Algorithm::RS256, "rsa")]).await;
    let clock = Clock::default();
    let v = verifier(asymmetric(&jwks.url()), &clock);
    let token = mint(Algorithm::RS256, &k.rsa, Some("rsa"), &claims());
    v.verify(&token).await.expect("verified");
    let mut fetches = 1;
    let mut now = 300; // max-age=300: stale from here
    for mode in [ERROR, GARBAGE] {
        jwks.mode.store(mode, Ordering::SeqCst);
        clock.set_secs(now);
        v.verify(&token).await.expect("the last good set");
        fetches += 1;
        assert_eq!(jwks.fetches(), fetches, "one try");
        clock.set_secs(now + 29);
        v.verify(&token).await.expect("the last good set");
        assert_eq!(jwks.fetches(), fetches, "no retry within the interval");
        now += 30;
    }
    // The endpoint is gone altogether: connection refused.
    let Jwks { stub, .. } = jwks;
    stub.handle.stop().await;
    clock.set_secs(now);
    v.verify(&token).await.expect("the last good set");
}

#[tokio::test]
async fn the_keys_are_found_through_oidc_discovery() {
    let k = keys();
    let jwks = Jwks::start(vec![jwk(&k.ec, Algorithm::ES256, "ec")]).await;
    let clock = Clock::default();
    let cfg = JwtConfig {
        issuer: Some(jwks.stub.url().to_string()),
        algorithms: vec!["ES256".into()],
        ..Default::default()
    };
    let v = verifier(cfg, &clock);
    let token = mint(Algorithm::ES256, &k.ec, Some("ec"), &claims());
    v.verify(&token).await.expect("verified");
    v.verify(&token).await.expect("verified");
    assert_eq!(jwks.discoveries.load(Ordering::SeqCst), 1);
    assert_eq!(jwks.fetches(), 1);
    // RS256 is not among this verifier's algorithms.
    let rs = mint(Algorithm::RS256, &k.rsa, Some("ec"), &claims());
    let e = v.verify(&rs).await.expect_err("alg not accepted");
    assert!(e.contains("RS256"), "{e}");
}

#[tokio::test]
async fn hs256_uses_the_secret_of_its_environment_variable() {
    let cfg = JwtConfig {
        secret_env: Some("JWT_SECRET".into()),
        algorithms: vec!["HS256".into()],
        ..Default::default()
    };
    let env = |n: &str| (n == "JWT_SECRET").then(|| "a test secret of some length".to_string());
    let v = JwtVerifier::new(&cfg, env).expect("verifier");
    let secret = EncodingKey::from_secret(b"a test secret of some length").expect("key");
    let good = mint(Algorithm::HS256, &secret, None, &claims());
    assert_eq!(v.verify(&good).await.expect("verified")["sub"], "alice");
    let wrong = mint(
        Algorithm::HS256,
        &EncodingKey::from_secret(b"guess").expect("key"),
        None,
        &claims(),
    );
    v.verify(&wrong).await.expect_err("wrong secret");
    // An RS256 token never reaches the HMAC check.
    let k = keys();
    let rs = mint(Algorithm::RS256, &k.rsa, None, &claims());
    assert!(v
        .verify(&rs)
        .await
        .expect_err("alg")
        .contains("not accepted"));
    // Unset secret, and key URLs that are not https or loopback: refused up front.
    let e = JwtVerifier::new(&cfg, |_| None).expect_err("unset");
    assert!(e.contains("JWT_SECRET"), "{e}");
    let e = JwtVerifier::new(&asymmetric("http://keys.example/jwks"), |_| None).expect_err("http");
    assert!(e.contains("https"), "{e}");
    let e = JwtVerifier::new(
        &JwtConfig {
            algorithms: vec!["PS256".into()],
            ..asymmetric("https://keys.example/jwks")
        },
        |_| None,
    )
    .expect_err("PS256");
    assert!(e.contains("PS256"), "{e}");
}

// ---- Through `serve`: the verifier behind a real agent, claims checked by core.

mod through_serve {
    use super::*;
    use toolnexus_core::server::auth::{AuthConfig, Principal, Verdict};
    use toolnexus_core::server::A2aConfig;
    use toolnexus_core::{HttpRequest, Transport};
    use toolnexus_host_native::{serve, Model, NativeTransport, ServeHandle, ServeOptions};

    const ISS: &str = "https://id.test";

    async fn agent(
        jwt: Option<JwtConfig>,
        hook: Option<toolnexus_host_native::Authenticate>,
    ) -> ServeHandle {
        let mut toolkit = toolnexus_core::Toolkit::new(NativeTransport::shared());
        toolkit.add_skills(toolnexus_core::skills::SkillSet::new());
        let mut options = ServeOptions::new(Arc::new(toolkit), Model::Echo);
        options.a2a = Some(A2aConfig {
            auth: jwt.map(|jwt| AuthConfig {
                jwt: Some(jwt),
                ..Default::default()
            }),
            ..Default::default()
        });
        options.authenticate = hook;
        serve("127.0.0.1:0", options).await.expect("serve")
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    /// message/send with these headers: (status, WWW-Authenticate, body).
    async fn send(url: &str, headers: &[(&str, String)]) -> (u16, Option<String>, Value) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
            "params": {"message": {"role": "user", "messageId": "m",
            "parts": [{"kind": "text", "text": "hi"}]}}});
        let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
        for (k, v) in headers {
            req = req.with_header(*k, v.as_str());
        }
        let resp = NativeTransport::shared().send(req).await.expect("answer");
        let challenge = resp.header("WWW-Authenticate").map(str::to_string);
        let v = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
        (resp.status, challenge, v)
    }

    fn bearer(t: &str) -> Vec<(&'static str, String)> {
        vec![("Authorization", format!("Bearer {t}"))]
    }

    #[tokio::test]
    async fn every_bad_token_gets_401_and_one_fetch_serves_them_all() {
        let k = keys();
        let jwks = Jwks::start(all_keys(&k)).await;
        let server = agent(
            Some(JwtConfig {
                issuer: Some(ISS.into()),
                audience: Some("agent".into()),
                leeway_seconds: 30,
                ..asymmetric(&jwks.url())
            }),
            None,
        )
        .await;
        let t = now();
        let with = |changes: Value| {
            let mut c = json!({"sub": "alice", "iss": ISS, "aud": "agent", "exp": t + 600});
            for (k, v) in changes.as_object().unwrap() {
                c[k] = v.clone();
            }
            c
        };
        let rs = |c: &Value| mint(Algorithm::RS256, &k.rsa, Some("rsa"), c);
        for (alg, key, kid) in [
            (Algorithm::RS256, &k.rsa, "rsa"),
            (Algorithm::ES256, &k.ec, "ec"),
            (Algorithm::EdDSA, &k.ed, "ed"),
        ] {
            let (status, _, v) = send(
                &server.url,
                &bearer(&mint(alg, key, Some(kid), &with(json!({})))),
            )
            .await;
            assert_eq!(status, 200, "{alg:?}: {v}");
            assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
        }
        let good = rs(&with(json!({})));
        let parts: Vec<&str> = good.split('.').collect();
        let tampered = format!(
            "{}.{}.{}",
            parts[0],
            base64_url_safe(&serde_json::to_vec(&with(json!({"sub": "mallory"}))).unwrap()),
            parts[2]
        );
        let none = format!(
            "{}.{}.",
            base64_url_safe(br#"{"alg":"none","typ":"JWT"}"#),
            parts[1]
        );
        let confused = mint(
            Algorithm::HS256,
            &EncodingKey::from_secret(&fixture("rsa.pub.pem")).expect("key"),
            Some("rsa"),
            &with(json!({})),
        );
        let cases = [
            ("expired", rs(&with(json!({"exp": t - 120})))),
            ("not yet valid", rs(&with(json!({"nbf": t + 300})))),
            ("wrong iss", rs(&with(json!({"iss": "https://other.test"})))),
            ("wrong aud", rs(&with(json!({"aud": "another-agent"})))),
            (
                "no exp",
                rs(&json!({"sub": "alice", "iss": ISS, "aud": "agent"})),
            ),
            ("alg none", none),
            ("HS256 signed with the RSA public key", confused),
            ("tampered payload", tampered),
            (
                "unknown kid",
                mint(Algorithm::RS256, &k.rsa2, Some("rsa2"), &with(json!({}))),
            ),
            ("not a JWT", "hello".to_string()),
        ];
        for (what, token) in cases {
            let (status, challenge, _) = send(&server.url, &bearer(&token)).await;
            assert_eq!(status, 401, "{what}");
            let challenge = challenge.unwrap_or_else(|| panic!("{what}: a challenge"));
            assert!(challenge.starts_with("Bearer"), "{what}: {challenge}");
            assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
        }
        // No credentials at all: 401, challenged.
        let (status, challenge, _) = send(&server.url, &[]).await;
        assert_eq!(status, 401);
        assert!(challenge.is_some_and(|c| c.starts_with("Bearer")));
        // The unknown kid came right after a fetch: refused without another.
        assert_eq!(jwks.fetches(), 1);
        // The public card needs no token.
        let card = NativeTransport::shared()
            .send(HttpRequest::get(format!(
                "{}/.well-known/agent-card.json",
                server.url
            )))
            .await
            .expect("card");
        assert_eq!(card.status, 200);
        server.stop().await;
    }

    #[tokio::test]
    async fn a_custom_verifier_names_the_caller_or_refuses() {
        let hook: toolnexus_host_native::Authenticate = Arc::new(|req| {
            let user = req.header("X-User").map(str::to_string);
            Box::pin(async move {
                match user.as_deref() {
                    Some("banned") => Verdict::Rejected {
                        status: 403,
                        reason: "banned".into(),
                    },
                    Some(subject) => Verdict::Accepted(Principal {
                        subject: subject.to_string(),
                        ..Default::default()
                    }),
                    None => Verdict::NotMine,
                }
            })
        });
        let server = agent(None, Some(hook)).await;
        let (status, _, v) = send(&server.url, &[("X-User", "alice".into())]).await;
        assert_eq!(status, 200, "{v}");
        let task = v["result"]["id"].as_str().expect("task id").to_string();
        let (status, _, _) = send(&server.url, &[("X-User", "banned".into())]).await;
        assert_eq!(status, 403);
        // A 401 challenges (RFC 9110 §15.5.2): Bearer, unless the hook names its scheme.
        let (status, challenge, _) = send(&server.url, &[]).await;
        assert_eq!(status, 401);
        assert_eq!(challenge.as_deref(), Some("Bearer realm=\"a2a\""));
        // Each caller sees its own tasks only.
        let get = |user: &'static str| {
            let url = server.url.clone();
            let task = task.clone();
            async move {
                let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task}});
                let req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes())
                    .with_header("X-User", user);
                let resp = NativeTransport::shared().send(req).await.expect("answer");
                serde_json::from_slice::<Value>(&resp.body).expect("json")
            }
        };
        assert_eq!(get("alice").await["result"]["id"], task.as_str());
        assert!(
            get("bob").await["error"].is_object(),
            "bob does not see alice's task"
        );
        server.stop().await;
    }

    #[tokio::test]
    async fn a_custom_verifier_may_name_its_own_challenge() {
        let hook: toolnexus_host_native::Authenticate =
            Arc::new(|_| Box::pin(async { Verdict::NotMine }));
        let mut toolkit = toolnexus_core::Toolkit::new(NativeTransport::shared());
        toolkit.add_skills(toolnexus_core::skills::SkillSet::new());
        let mut options = ServeOptions::new(Arc::new(toolkit), Model::Echo);
        options.a2a = Some(A2aConfig::default());
        options.authenticate = Some(hook);
        options.authenticate_challenge = Some("Session realm=\"corp\", login=\"/login\"".into());
        let server = serve("127.0.0.1:0", options).await.expect("serve");
        let (status, challenge, v) = send(&server.url, &[]).await;
        assert_eq!(status, 401, "{v}");
        assert_eq!(
            challenge.as_deref(),
            Some("Session realm=\"corp\", login=\"/login\"")
        );
        server.stop().await;
        // With a configured scheme too, each scheme challenges.
        let hook: toolnexus_host_native::Authenticate =
            Arc::new(|_| Box::pin(async { Verdict::NotMine }));
        let mut toolkit = toolnexus_core::Toolkit::new(NativeTransport::shared());
        toolkit.add_skills(toolnexus_core::skills::SkillSet::new());
        let mut options = ServeOptions::new(Arc::new(toolkit), Model::Echo);
        options.a2a = Some(A2aConfig {
            auth: Some(AuthConfig {
                api_keys: Some(toolnexus_core::server::auth::ApiKeys {
                    location: toolnexus_core::server::auth::KeyLocation::Header,
                    name: "X-API-Key".into(),
                    keys: vec![("alice".into(), "alice-key-0123456789".into())],
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        options.authenticate = Some(hook);
        options.authenticate_challenge = Some("Session realm=\"corp\"".into());
        let server = serve("127.0.0.1:0", options).await.expect("serve");
        let req = HttpRequest::post_json(format!("{}/", server.url), b"{}".to_vec());
        let resp = NativeTransport::shared().send(req).await.expect("answer");
        assert_eq!(resp.status, 401);
        let all: Vec<&str> = resp
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("WWW-Authenticate"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(
            all,
            [
                "ApiKey realm=\"a2a\", in=\"header\", name=\"X-API-Key\"",
                "Session realm=\"corp\""
            ]
        );
        server.stop().await;
    }

    #[tokio::test]
    async fn a_jwt_block_that_cannot_work_stops_serve_before_it_listens() {
        let mut toolkit = toolnexus_core::Toolkit::new(NativeTransport::shared());
        toolkit.add_skills(toolnexus_core::skills::SkillSet::new());
        let mut options = ServeOptions::new(Arc::new(toolkit), Model::Echo);
        options.a2a = Some(A2aConfig {
            auth: Some(AuthConfig {
                jwt: Some(JwtConfig {
                    secret_env: Some("TOOLNEXUS_TEST_UNSET_SECRET".into()),
                    algorithms: vec!["HS256".into()],
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        let e = serve("127.0.0.1:0", options).await.err().expect("refused");
        assert!(e.to_string().contains("TOOLNEXUS_TEST_UNSET_SECRET"), "{e}");
    }
}
