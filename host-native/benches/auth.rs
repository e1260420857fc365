//! CPU cost of authenticating a caller: one JWT verification (the
//! signature by `jsonwebtoken` with its key cached, then core's claim
//! checks) per algorithm, and one API-key check; then GetTask through the
//! core server function (no sockets) with no auth, an API key, and a JWT.
//!
//! `cargo bench -p toolnexus-host-native --bench auth`

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use toolnexus_core::server::auth::{ApiKeys, AuthConfig, Claims, JwtConfig, KeyLocation};
use toolnexus_core::server::{
    verify, A2aConfig, A2aServer, EchoFulfiller, ServerHost, ServerOptions,
};
use toolnexus_core::{BoxFuture, HttpRequest, HttpResponse};
use toolnexus_host_native::jwt::JwtVerifier;
use toolnexus_host_native::{MemoryStore, NativeLocks};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/jwt")
            .join(name),
    )
    .expect("fixture")
}

fn claims() -> Value {
    json!({"sub": "alice", "iss": "https://id.test", "aud": "agent", "exp": 4_000_000_000u64, "scope": "a2a"})
}

fn mint(alg: Algorithm, key: &EncodingKey, kid: Option<&str>) -> String {
    mint_with(alg, key, kid, claims())
}

fn mint_with(alg: Algorithm, key: &EncodingKey, kid: Option<&str>, claims: Value) -> String {
    let mut h = Header::new(alg);
    h.kid = kid.map(str::to_string);
    encode(&h, &claims, key).expect("mint")
}

fn jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Value {
    let mut v = serde_json::to_value(Jwk::from_encoding_key(key, alg).expect("jwk")).expect("json");
    v["kid"] = json!(kid);
    v
}

fn now_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

/// Runs `f` `n` times, three rounds; prints the best µs per call.
async fn measure<F, Fut>(what: &str, n: u32, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut best = f64::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        for _ in 0..n {
            f().await;
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e6 / f64::from(n));
    }
    println!("{what:<44} {best:>9.2} µs");
}

struct Host(Option<Arc<JwtVerifier>>);

impl toolnexus_core::HostBase for Host {
    fn new_id(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
    fn unix_ms(&self) -> Option<u64> {
        now_ms()
    }
    fn now_ms(&self) -> u64 {
        0
    }
}

impl ServerHost for Host {
    type Locks = NativeLocks;
    fn verify_jwt(&self, token: &str) -> BoxFuture<'static, Result<Claims, String>> {
        let v = self.0.clone();
        let token = token.to_string();
        Box::pin(async move { v.ok_or("none")?.verify(&token).await })
    }
}

fn token_alg(token: &str) -> Algorithm {
    jsonwebtoken::decode_header(token).expect("header").alg
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let rsa = EncodingKey::from_rsa_pem(&fixture("rsa.pem")).expect("rsa");
    let ec = EncodingKey::from_ec_pem(&fixture("ec.pem")).expect("ec");
    let ed = EncodingKey::from_ed_pem(&fixture("ed25519.pem")).expect("ed");
    let jwks = json!({"keys": [
        jwk(&rsa, Algorithm::RS256, "rsa"),
        jwk(&ec, Algorithm::ES256, "ec"),
        jwk(&ed, Algorithm::EdDSA, "ed"),
    ]})
    .to_string();
    // The JWKS on 127.0.0.1, fetched once: the measured verifications hit the cache.
    let served = toolnexus_host_native::http_server::bind(
        "127.0.0.1:0",
        1024,
        Arc::new(move |_req| {
            let body = jwks.clone().into_bytes();
            Box::pin(async move { HttpResponse::json(200, body) })
        }),
    )
    .await
    .expect("jwks server");
    let jwt_cfg = JwtConfig {
        issuer: Some("https://id.test".into()),
        audience: Some("agent".into()),
        jwks_url: Some(format!("{}/keys", served.url)),
        algorithms: vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
        ..Default::default()
    };
    let asym = Arc::new(JwtVerifier::new(&jwt_cfg, |_| None).expect("verifier"));
    let hs_cfg = JwtConfig {
        secret_env: Some("BENCH_SECRET".into()),
        algorithms: vec!["HS256".into()],
        ..jwt_cfg.clone()
    };
    let secret = "a bench secret, long enough for HS256";
    let hs =
        Arc::new(JwtVerifier::new(&hs_cfg, |_| Some(secret.to_string())).expect("hs verifier"));
    let hs_key = EncodingKey::from_secret(secret.as_bytes()).expect("secret");

    println!("one verification: signature (key cached) + core's claim checks");
    println!("  first sight: each token new to the verifier (its signature is checked)");
    println!("  again: the same token (remembered: no signature check)");
    for (what, verifier, cfg, token, n) in [
        (
            "JWT RS256 (2048-bit)",
            &asym,
            &jwt_cfg,
            mint(Algorithm::RS256, &rsa, Some("rsa")),
            5_000,
        ),
        (
            "JWT ES256",
            &asym,
            &jwt_cfg,
            mint(Algorithm::ES256, &ec, Some("ec")),
            2_000,
        ),
        (
            "JWT EdDSA",
            &asym,
            &jwt_cfg,
            mint(Algorithm::EdDSA, &ed, Some("ed")),
            5_000,
        ),
        (
            "JWT HS256",
            &hs,
            &hs_cfg,
            mint(Algorithm::HS256, &hs_key, None),
            50_000,
        ),
    ] {
        let first = verifier.verify(&token).await.expect("verifies");
        verify::check_claims(cfg, &first, now_ms()).expect("claims");
        // New tokens (a jti each), of the same key: every one is checked.
        let key = match token_alg(&token) {
            Algorithm::RS256 => &rsa,
            Algorithm::ES256 => &ec,
            Algorithm::EdDSA => &ed,
            _ => &hs_key,
        };
        let kid = jsonwebtoken::decode_header(&token).expect("header").kid;
        let fresh: Vec<String> = (0..(n / 10).max(100))
            .map(|i| {
                let mut c = claims();
                c["jti"] = json!(i);
                mint_with(token_alg(&token), key, kid.as_deref(), c)
            })
            .collect();
        let before = verifier.signatures_checked();
        let started = Instant::now();
        for t in &fresh {
            let claims = verifier.verify(t).await.expect("verifies");
            std::hint::black_box(verify::check_claims(cfg, &claims, now_ms()).is_ok());
        }
        let per = started.elapsed().as_secs_f64() * 1e6 / fresh.len() as f64;
        assert_eq!(
            verifier.signatures_checked() - before,
            fresh.len() as u64,
            "each new token checked"
        );
        println!("{:<44} {per:>9.2} µs", format!("{what}, first sight"));
        measure(&format!("{what}, again"), n, || async {
            let claims = verifier.verify(&token).await.expect("verifies");
            std::hint::black_box(verify::check_claims(cfg, &claims, now_ms()).is_ok());
        })
        .await;
    }
    for count in [2usize, 100] {
        let keys = ApiKeys {
            location: KeyLocation::Header,
            name: "X-API-Key".into(),
            keys: (0..count)
                .map(|i| {
                    (
                        format!("user{i}"),
                        format!("key-{i:04}-0123456789abcdef0123456789"),
                    )
                })
                .collect(),
        };
        let req = HttpRequest::post_json("/", b"{}".to_vec()).with_header(
            "X-API-Key",
            format!("key-{:04}-0123456789abcdef0123456789", count - 1),
        );
        measure(
            &format!("API key (header, {count} keys)"),
            500_000,
            || async {
                let given = verify::api_key(&req, &keys).expect("a key");
                std::hint::black_box(verify::key_owner(&keys, given.as_bytes()).is_some());
            },
        )
        .await;
    }

    println!("\nGetTask through the core server function (no sockets)");
    let key = "key-0001-0123456789abcdef0123456789";
    let api_keys = ApiKeys {
        location: KeyLocation::Header,
        name: "X-API-Key".into(),
        keys: vec![("alice".into(), key.into())],
    };
    let rs_token = mint(Algorithm::RS256, &rsa, Some("rsa"));
    let es_token = mint(Algorithm::ES256, &ec, Some("ec"));
    for (what, auth, header, n) in [
        ("no auth", None, None, 100_000),
        (
            "API key",
            Some(AuthConfig {
                api_keys: Some(api_keys.clone()),
                ..Default::default()
            }),
            Some(("X-API-Key", key.to_string())),
            100_000,
        ),
        (
            "JWT RS256",
            Some(AuthConfig {
                jwt: Some(jwt_cfg.clone()),
                ..Default::default()
            }),
            Some(("Authorization", format!("Bearer {rs_token}"))),
            5_000,
        ),
        (
            "JWT ES256",
            Some(AuthConfig {
                jwt: Some(jwt_cfg.clone()),
                ..Default::default()
            }),
            Some(("Authorization", format!("Bearer {es_token}"))),
            2_000,
        ),
    ] {
        let cfg = A2aConfig {
            auth: auth.clone(),
            ..Default::default()
        };
        let card = toolnexus_core::server::build_agent_card(&cfg, &[], "http://127.0.0.1:1/");
        let options = ServerOptions {
            card: Some(card.into()),
            auth,
            ..Default::default()
        };
        let server = A2aServer::new(
            options,
            MemoryStore::default(),
            Host(Some(asym.clone())),
            EchoFulfiller,
        );
        let runner = tokio::spawn(server.clone().run_work(|w| drop(tokio::spawn(w))));
        let with = |req: HttpRequest| match &header {
            Some((k, v)) => req.with_header(*k, v.as_str()),
            None => req,
        };
        let send = with(HttpRequest::post_json(
            "/",
            br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hi"}]}}}"#.to_vec(),
        ))
        .with_header("A2A-Version", "1.0");
        let created = server.handle(send).await;
        let v: Value = serde_json::from_slice(&created.body).expect("json");
        let id = v["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: {v}"))
            .to_string();
        let get = with(HttpRequest::post_json(
            "/",
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"{id}"}}}}"#)
                .into_bytes(),
        ))
        .with_header("A2A-Version", "1.0");
        let check = server.handle(get.clone()).await;
        assert!(
            String::from_utf8_lossy(&check.body).contains("TASK_STATE_COMPLETED"),
            "{what}"
        );
        measure(&format!("GetTask, {what}"), n, || async {
            std::hint::black_box(server.handle(get.clone()).await.status);
        })
        .await;
        runner.abort();
    }
}
