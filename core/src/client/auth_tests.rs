//! Calling protected agents: the card's schemes in both shapes, where each
//! credential goes, the token reader and cache, and whole calls on the
//! scripted peer in virtual time (tokens cached, refreshed, shared, 401s).

use super::*;
use crate::client::toolkit::{card_tools, A2aTool};
use crate::testing::{block_on, completed, Reply, ScriptedPeer};
#[cfg(feature = "oauth2")]
use crate::testing::{task_with_message, TestLock};
use crate::{Agent, AgentCard};
use serde_json::json;
#[cfg(feature = "oauth2")]
use std::sync::Arc;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

const CARD_URL: &str = "http://127.0.0.1:9/.well-known/agent-card.json";
const TOKEN_URL: &str = "http://127.0.0.1:9/token";

#[cfg(feature = "oauth2")]
fn token_json(token: &'static str) -> Reply {
    let body: &'static str = match token {
        "t1" => r#"{"access_token":"t1","token_type":"Bearer","expires_in":100}"#,
        "t2" => r#"{"access_token":"t2","token_type":"bearer","expires_in":100}"#,
        "t3" => r#"{"access_token":"t3","token_type":"Bearer","expires_in":100}"#,
        _ => r#"{"access_token":"other","token_type":"Bearer"}"#,
    };
    Reply::Http(200, body)
}

/// A 1.0 card at [`CARD_URL`] whose oauth2 scheme names [`TOKEN_URL`].
fn oauth_card() -> AgentCard {
    AgentCard::from_value(&json!({
        "name": "desk", "url": "http://127.0.0.1:9/", "skills": [{"id": "s"}],
        "securitySchemes": {"oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
            "tokenUrl": TOKEN_URL, "scopes": {"a2a.call": "call", "a2a.admin": "admin"}}}}}},
        "securityRequirements": [{"schemes": {"oauth": {"list": ["a2a.call"]}}}]
    }))
    .expect("a card")
}

fn oauth_agent() -> Agent {
    Agent::new(CARD_URL).with_auth(Auth::OAuth2(OAuth2Client {
        client_id: "app one".into(),
        client_secret: "${SECRET}".into(),
        token_url: None,
        scopes: vec![],
    }))
}

/// The desk's tool with a shared token cache.
#[cfg(feature = "oauth2")]
fn oauth_tool() -> A2aTool {
    let cell: SharedTokenCell = Arc::new(<TestLock<TokenCache> as crate::Lock<_>>::new(
        TokenCache::new(),
    ));
    card_tools(&oauth_agent(), &oauth_card())[0]
        .clone()
        .with_tokens(cell)
}

fn peer() -> ScriptedPeer {
    ScriptedPeer::new().env_var("SECRET", "s3cret:&")
}

fn run(tool: &A2aTool, peer: &ScriptedPeer) -> crate::ToolResult {
    block_on(tool.execute(peer, &json!({"task": "x"}), std::future::pending()))
}

fn auth_headers(peer: &ScriptedPeer) -> Vec<Option<String>> {
    peer.requests()
        .iter()
        .filter(|(_, r)| r.url != TOKEN_URL)
        .map(|(_, r)| r.header("Authorization").map(str::to_string))
        .collect()
}

#[test]
fn schemes_are_read_in_the_10_shape() {
    let card = json!({"securitySchemes": {
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
        "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials":
            {"tokenUrl": "https://auth.example/token", "scopes": {"read": "r"}}}}},
        "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://auth.example/.well-known/openid-configuration"}},
        "mtls": {"mtlsSecurityScheme": {}},
        "junk": 7
    }, "securityRequirements": [{"schemes": {"oauth": {"list": ["read"]}, "key": {"list": []}}}, {}]});
    let schemes = read_schemes(&card);
    assert_eq!(
        schemes,
        vec![
            (
                "key".to_string(),
                SecurityScheme::ApiKey {
                    location: KeyLocation::Header,
                    name: "X-API-Key".into()
                }
            ),
            (
                "bearer".to_string(),
                SecurityScheme::Http {
                    scheme: "bearer".into()
                }
            ),
            (
                "oauth".to_string(),
                SecurityScheme::OAuth2 {
                    token_url: Some("https://auth.example/token".into()),
                    scopes: vec!["read".into()]
                }
            ),
            (
                "oidc".to_string(),
                SecurityScheme::OpenIdConnect {
                    url: "https://auth.example/.well-known/openid-configuration".into()
                }
            ),
        ]
    );
    let reqs = read_requirements(&card);
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0],
        vec![
            ("oauth".to_string(), vec!["read".to_string()]),
            ("key".to_string(), vec![])
        ]
    );
    assert!(reqs[1].is_empty());
    assert!(
        !requires_credentials(&reqs),
        "an empty requirement allows anonymous calls"
    );
    assert!(requires_credentials(&reqs[..1]));
}

#[test]
fn schemes_are_read_in_the_03_shape() {
    let card = json!({"securitySchemes": {
        "key": {"type": "apiKey", "in": "query", "name": "api_key"},
        "cookie": {"type": "apiKey", "in": "cookie", "name": "sid"},
        "basic": {"type": "http", "scheme": "basic"},
        "oauth": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "/token", "scopes": {}}}},
        "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://id.example/"},
        "odd": {"type": "apiKey", "in": "body", "name": "k"},
        "noname": {"type": "apiKey", "in": "header"},
        "future": {"type": "mutualTLS"}
    }, "security": [{"oauth": ["a2a"]}]});
    let names: Vec<String> = read_schemes(&card).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["key", "cookie", "basic", "oauth", "oidc"]);
    assert_eq!(
        read_requirements(&card),
        vec![vec![("oauth".to_string(), vec!["a2a".to_string()])]]
    );
    let c =
        AgentCard::from_value(&json!({"name": "n", "security": [{"oauth": []}]})).expect("card");
    assert!(c.requires_credentials());
    let none = AgentCard::from_value(&json!({"name": "n", "securitySchemes": [], "security": "x"}))
        .expect("card");
    assert!(none.security_schemes.is_empty() && !none.requires_credentials());
}

#[test]
fn each_credential_goes_where_the_card_says() {
    let req = || HttpRequest::post_json("http://127.0.0.1:9/rpc?v=1", b"{}".to_vec());
    for (scheme, check) in [
        (
            json!({"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}),
            ("http://127.0.0.1:9/rpc?v=1", Some(("X-Key", "k&1"))),
        ),
        (
            json!({"apiKeySecurityScheme": {"location": "query", "name": "api key"}}),
            ("http://127.0.0.1:9/rpc?v=1&api+key=k%261", None),
        ),
        (
            json!({"type": "apiKey", "in": "cookie", "name": "sid"}),
            ("http://127.0.0.1:9/rpc?v=1", Some(("Cookie", "sid=k&1"))),
        ),
    ] {
        let schemes = read_schemes(&json!({"securitySchemes": {"k": scheme}}));
        let plan = plan(Some(&Auth::ApiKey("k".into())), CARD_URL, &schemes, &[])
            .expect("placed")
            .expect("a plan");
        assert_eq!(plan.scheme, "k");
        let sent = plan.placement.apply(req(), "k&1");
        assert_eq!(sent.url, check.0);
        if let Some((name, value)) = check.1 {
            assert_eq!(sent.header(name), Some(value));
        }
    }
    // An API key with nowhere to go is a clear error; a bearer token goes anyway.
    let err = plan(Some(&Auth::ApiKey("k".into())), CARD_URL, &[], &[]).expect_err("nowhere");
    assert!(
        err.to_string().contains("no apiKey security scheme"),
        "{err}"
    );
    let bearer = plan(Some(&Auth::Bearer("t".into())), CARD_URL, &[], &[])
        .expect("ok")
        .expect("plan");
    let sent = bearer.placement.apply(req(), "t");
    assert_eq!(sent.header("Authorization"), Some("Bearer t"));
}

#[test]
fn the_token_url_comes_from_the_caller_the_card_or_oidc_discovery() {
    let client = |url: Option<&str>| {
        Auth::OAuth2(OAuth2Client {
            client_id: "c".into(),
            token_url: url.map(str::to_string),
            ..Default::default()
        })
    };
    let endpoint = |auth: Auth, card: Value| match plan(
        Some(&auth),
        CARD_URL,
        &read_schemes(&card),
        &read_requirements(&card),
    ) {
        Ok(Some(AuthPlan {
            credential: PlanCredential::Token(s),
            ..
        })) => Ok((s.endpoint, s.scopes)),
        Ok(other) => panic!("not a token plan: {other:?}"),
        Err(e) => Err(e.to_string()),
    };
    let card = json!({"securitySchemes": {"o": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "/t"}}}},
                      "security": [{"o": ["s1"]}]});
    assert_eq!(
        endpoint(client(None), card.clone()),
        Ok((
            TokenEndpoint::Url("http://127.0.0.1:9/t".into()),
            vec!["s1".into()]
        ))
    );
    assert_eq!(
        endpoint(client(Some("https://idp.example/token")), card),
        Ok((
            TokenEndpoint::Url("https://idp.example/token".into()),
            vec!["s1".into()]
        )),
        "an explicit token URL wins"
    );
    let oidc = json!({"securitySchemes": {"id": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://id.example/.well-known/openid-configuration"}}}});
    assert_eq!(
        endpoint(client(None), oidc),
        Ok((
            TokenEndpoint::Discover("https://id.example/.well-known/openid-configuration".into()),
            vec![]
        ))
    );
    let err = endpoint(client(None), json!({})).expect_err("no token URL");
    assert!(err.contains("names a token URL"), "{err}");
}

#[test]
fn token_urls_must_be_https_or_loopback() {
    for ok in [
        "https://idp.example/token",
        "http://127.0.0.1:9/token",
        "http://localhost/t",
        "http://[::1]:8/t",
    ] {
        assert!(token_url_allowed(ok), "{ok}");
    }
    for refused in [
        "http://idp.example/token",
        "http://127.0.0.1.evil.example/",
        "http://user@127.0.0.1/",
        "ftp://x/",
        "/token",
    ] {
        assert!(!token_url_allowed(refused), "{refused}");
    }
}

#[test]
fn token_answers_are_read_strictly_and_never_panic() {
    let resp = |status, body: &str| HttpResponse {
        status,
        headers: vec![],
        body: body.as_bytes().to_vec(),
    };
    let t = read_token_response(
        &resp(
            200,
            r#"{"access_token":"a","token_type":"Bearer","expires_in":"60"}"#,
        ),
        TOKEN_URL,
        1_000,
    )
    .expect("a token");
    assert_eq!((t.value.as_str(), t.expires_ms), ("a", Some(61_000)));
    let no_expiry =
        read_token_response(&resp(200, r#"{"access_token":"a"}"#), TOKEN_URL, 0).expect("token");
    assert_eq!(no_expiry.expires_ms, None);
    for (status, body, says) in [
        (
            400,
            r#"{"error":"invalid_client","error_description":"bad secret"}"#,
            "invalid_client: bad secret",
        ),
        (500, "oops", "HTTP 500"),
        (200, "[]", "not answer a JSON object"),
        (200, r#"{"token_type":"Bearer"}"#, "no access_token"),
        (
            200,
            r#"{"access_token":"a","token_type":"mac"}"#,
            "not Bearer",
        ),
    ] {
        let err = read_token_response(&resp(status, body), TOKEN_URL, 0).expect_err(body);
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[cfg(feature = "oauth2")]
#[test]
fn the_cache_shares_one_fetch_and_refreshes_before_expiry() {
    let mut c = TokenCache::new();
    assert_eq!(c.acquire(0), Acquire::Fetch);
    assert_eq!(c.acquire(0), Acquire::Wait(0), "one fetch in flight");
    let token = Token {
        value: "t".into(),
        expires_ms: Some(100_000),
        fetched_ms: 0,
    };
    c.settle(Ok(token.clone()));
    assert_eq!(c.acquire(50_000), Acquire::Use(token.clone()));
    // A tenth of a 100 s life (10 s) before expiry, it is fetched again.
    assert_eq!(c.acquire(89_999), Acquire::Use(token.clone()));
    assert_eq!(c.acquire(90_000), Acquire::Fetch);
    c.settle(Err(None));
    // A refused token is dropped only while it is the current one.
    c.settle(Ok(token.clone()));
    c.drop_token("older");
    assert_eq!(c.acquire(0), Acquire::Use(token));
    c.drop_token("t");
    assert_eq!(c.acquire(0), Acquire::Fetch);
    assert_eq!(c.fetches(), 3);
    // Long-lived tokens are refreshed 30 s before expiry.
    let long = Token {
        value: "l".into(),
        expires_ms: Some(3_600_000),
        fetched_ms: 0,
    };
    assert!(long.usable(3_569_999) && !long.usable(3_570_000));
}

#[cfg(feature = "oauth2")]
#[test]
fn a_token_is_fetched_once_and_sent_on_every_call() {
    let peer = peer()
        .on_url(TOKEN_URL, vec![token_json("t1")])
        .on("SendMessage", vec![Reply::Result(completed("t", "ok"))]);
    let tool = oauth_tool();
    for _ in 0..3 {
        let r = run(&tool, &peer);
        assert_eq!(r.output, "ok");
    }
    let fetches = peer.requests_to(TOKEN_URL);
    assert_eq!(fetches.len(), 1, "cached");
    let fetch = &fetches[0];
    assert_eq!(fetch.method, "POST");
    assert_eq!(
        fetch.header("Content-Type"),
        Some("application/x-www-form-urlencoded")
    );
    // RFC 6749 §2.3.1: id and secret form-encoded, then Basic.
    assert_eq!(
        fetch.header("Authorization"),
        Some(format!("Basic {}", base64(b"app+one:s3cret%3A%26")).as_str())
    );
    assert_eq!(
        String::from_utf8_lossy(&fetch.body),
        "grant_type=client_credentials&scope=a2a.call"
    );
    assert_eq!(auth_headers(&peer), vec![Some("Bearer t1".to_string()); 3]);
}

#[cfg(feature = "oauth2")]
#[test]
fn a_token_is_refreshed_before_it_expires() {
    let peer = peer()
        .on_url(TOKEN_URL, vec![token_json("t1"), token_json("t2")])
        .on("SendMessage", vec![Reply::Result(completed("t", "ok"))]);
    let tool = oauth_tool();
    assert_eq!(run(&tool, &peer).output, "ok");
    peer.time().advance_to(80_000);
    assert_eq!(run(&tool, &peer).output, "ok");
    assert_eq!(peer.requests_to(TOKEN_URL).len(), 1, "still fresh at 80 s");
    // Lifetime 100 s: within its last tenth it is replaced before use.
    peer.time().advance_to(91_000);
    assert_eq!(run(&tool, &peer).output, "ok");
    assert_eq!(peer.requests_to(TOKEN_URL).len(), 2);
    assert_eq!(
        auth_headers(&peer),
        ["Bearer t1", "Bearer t1", "Bearer t2"].map(|s| Some(s.to_string()))
    );
}

#[cfg(feature = "oauth2")]
#[test]
fn concurrent_calls_share_one_token_fetch() {
    let peer = peer()
        .on_url(
            TOKEN_URL,
            vec![Reply::Delay(200, Box::new(token_json("t1")))],
        )
        .on("SendMessage", vec![Reply::Result(completed("t", "ok"))]);
    let tool = oauth_tool();
    let args = json!({"task": "x"});
    let results = block_on(crate::host::driver::join_all(
        (0..8).map(|_| tool.execute(&peer, &args, std::future::pending())),
    ));
    assert!(results.iter().all(|r| r.output == "ok"), "{results:?}");
    assert_eq!(
        peer.requests_to(TOKEN_URL).len(),
        1,
        "one fetch for 8 calls"
    );
    assert_eq!(auth_headers(&peer), vec![Some("Bearer t1".to_string()); 8]);
}

#[cfg(feature = "oauth2")]
#[test]
fn a_401_drops_the_token_fetches_once_and_retries_once() {
    let peer = peer()
        .on_url(TOKEN_URL, vec![token_json("t1"), token_json("t2")])
        .require("Authorization", &["Bearer t2"])
        .on("SendMessage", vec![Reply::Result(completed("t", "ok"))]);
    let tool = oauth_tool();
    let r = run(&tool, &peer);
    assert_eq!(r.output, "ok", "{}", r.output);
    assert_eq!(peer.requests_to(TOKEN_URL).len(), 2);
    assert_eq!(
        auth_headers(&peer),
        ["Bearer t1", "Bearer t2"].map(|s| Some(s.to_string()))
    );
    // The next call uses the fresh token.
    assert_eq!(run(&tool, &peer).output, "ok");
    assert_eq!(peer.requests_to(TOKEN_URL).len(), 2);
}

#[cfg(feature = "oauth2")]
#[test]
fn a_second_401_is_a_clear_error_naming_the_scheme() {
    let peer = peer()
        .on_url(
            TOKEN_URL,
            vec![token_json("t1"), token_json("t2"), token_json("t3")],
        )
        .require("Authorization", &["Bearer never"])
        .on("SendMessage", vec![Reply::Result(completed("t", "ok"))]);
    let r = run(&oauth_tool(), &peer);
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A SendMessage to http://127.0.0.1:9/ failed: the agent refused a fresh token for its scheme \"oauth\" (HTTP 401)"
    );
    assert_eq!(peer.requests_to(TOKEN_URL).len(), 2, "one re-fetch");
    assert_eq!(auth_headers(&peer).len(), 2, "one retry");
}

/// The desk's tool for an agent whose tokens come from the host (a JS `getToken`).
fn host_token_tool() -> A2aTool {
    let agent = Agent::new(CARD_URL).with_auth(Auth::HostToken("0".into()));
    card_tools(&agent, &oauth_card())[0].clone()
}

#[test]
fn a_host_token_is_asked_each_call_and_renewed_once_after_a_401() {
    let peer = ScriptedPeer::new()
        .host_tokens(&["h1", "h2"])
        .require("Authorization", &["Bearer h2"])
        .on("SendMessage", vec![Reply::Result(completed("t", "ok"))]);
    let tool = host_token_tool();
    assert_eq!(run(&tool, &peer).output, "ok");
    assert_eq!(
        peer.host_token_asks(),
        [false, true],
        "asked, then renewed once"
    );
    assert_eq!(
        auth_headers(&peer),
        ["Bearer h1", "Bearer h2"].map(|s| Some(s.to_string()))
    );
    // Not cached: the next call asks again (and h2, the last, is accepted).
    assert_eq!(run(&tool, &peer).output, "ok");
    assert_eq!(peer.host_token_asks(), [false, true, false]);
    assert!(
        peer.requests_to(TOKEN_URL).is_empty(),
        "no token endpoint involved"
    );
}

#[test]
fn a_host_token_refused_twice_is_a_clear_error() {
    let peer = ScriptedPeer::new()
        .host_tokens(&["h1", "h2"])
        .require("Authorization", &["Bearer never"]);
    let r = run(&host_token_tool(), &peer);
    assert!(r.is_error);
    assert_eq!(
        r.output,
        "A2A SendMessage to http://127.0.0.1:9/ failed: the agent refused a fresh token for its scheme \"oauth\" (HTTP 401)"
    );
    assert_eq!(peer.host_token_asks(), [false, true]);
}

#[test]
fn a_fixed_credential_refused_is_an_error_at_once() {
    let card = AgentCard::from_value(&json!({"name": "desk", "url": "http://127.0.0.1:9/",
        "skills": [{"id": "s"}],
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}}))
    .expect("card");
    let agent = Agent::new(CARD_URL).with_auth(Auth::ApiKey("${KEY}".into()));
    let peer = ScriptedPeer::new()
        .env_var("KEY", "wrong")
        .require("X-API-Key", &["right"]);
    let r = run(&card_tools(&agent, &card)[0], &peer);
    assert_eq!(
        r.output,
        "A2A SendMessage to http://127.0.0.1:9/ failed: the agent refused the credential for its scheme \"key\" (HTTP 401)"
    );
    assert_eq!(peer.requests().len(), 1);
    assert_eq!(peer.requests()[0].1.header("X-API-Key"), Some("wrong"));
    assert!(!r.output.contains("wrong"));
}

/// A build without OAuth2 client credentials (the npm client entry) calls
/// nothing for such an agent: a clear error, no request sent.
#[cfg(not(feature = "oauth2"))]
#[test]
fn without_the_oauth2_feature_a_client_credentials_agent_is_refused_before_any_request() {
    let peer = peer();
    let r = run(&card_tools(&oauth_agent(), &oauth_card())[0], &peer);
    assert!(r.is_error);
    assert!(r.output.ends_with(NO_OAUTH2), "{}", r.output);
    assert!(peer.requests().is_empty(), "nothing sent");
}

#[cfg(feature = "oauth2")]
#[test]
fn a_token_url_over_plain_http_to_a_stranger_is_refused() {
    let card = AgentCard::from_value(&json!({"name": "desk", "url": "http://127.0.0.1:9/",
        "skills": [{"id": "s"}],
        "securitySchemes": {"o": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "http://idp.example/token"}}}}}))
    .expect("card");
    let peer = peer();
    let r = run(&card_tools(&oauth_agent(), &card)[0], &peer);
    assert!(r.is_error);
    assert!(
        r.output.starts_with("A2A getting a token for the scheme \"o\" failed: refusing the token URL http://idp.example/token"),
        "{}",
        r.output
    );
    assert!(peer.requests().is_empty(), "nothing sent");
}

#[cfg(feature = "oauth2")]
#[test]
fn the_token_endpoint_is_discovered_from_the_cards_openid_connect_scheme() {
    const OIDC: &str = "http://127.0.0.1:9/.well-known/openid-configuration";
    let card = AgentCard::from_value(&json!({"name": "desk", "url": "http://127.0.0.1:9/",
        "skills": [{"id": "s"}],
        "securitySchemes": {"id": {"openIdConnectSecurityScheme": {"openIdConnectUrl": OIDC}}}}))
    .expect("card");
    let peer = peer()
        .on_url(
            OIDC,
            vec![Reply::Http(
                200,
                r#"{"issuer":"x","token_endpoint":"/token"}"#,
            )],
        )
        .on_url(TOKEN_URL, vec![token_json("t1")])
        .on("SendMessage", vec![Reply::Result(completed("t", "ok"))]);
    let r = run(&card_tools(&oauth_agent(), &card)[0], &peer);
    assert_eq!(r.output, "ok", "{}", r.output);
    let urls: Vec<String> = peer.requests().into_iter().map(|(_, r)| r.url).collect();
    assert_eq!(urls, [OIDC, TOKEN_URL, "http://127.0.0.1:9/"]);
}

#[cfg(feature = "oauth2")]
#[test]
fn an_auth_required_task_is_continued_once_with_a_fresh_token() {
    let waiting = task_with_message("t", "auth-required", "sign in again");
    let peer = peer()
        .on_url(
            TOKEN_URL,
            vec![token_json("t1"), token_json("t2"), token_json("t3")],
        )
        .on(
            "SendMessage",
            vec![
                Reply::Result(waiting.clone()),
                Reply::Result(completed("t", "done")),
            ],
        );
    let r = run(&oauth_tool(), &peer);
    assert_eq!(r.output, "done", "{}", r.output);
    let sends: Vec<HttpRequest> = peer
        .requests()
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| r.url != TOKEN_URL)
        .collect();
    assert_eq!(sends.len(), 2);
    let second: Value = serde_json::from_slice(&sends[1].body).expect("json");
    assert_eq!(second["params"]["message"]["taskId"], "t");
    assert_eq!(sends[1].header("Authorization"), Some("Bearer t2"));

    // Asked again after the fresh token: surfaced, as without auth.
    let again = self::peer()
        .on_url(
            TOKEN_URL,
            vec![token_json("t1"), token_json("t2"), token_json("t3")],
        )
        .on(
            "SendMessage",
            vec![
                Reply::Result(waiting),
                Reply::Result(task_with_message("t", "auth-required", "still not")),
            ],
        );
    let r = run(&oauth_tool(), &again);
    assert!(
        r.is_error && r.output.ends_with("auth-required: still not"),
        "{}",
        r.output
    );
    assert_eq!(again.requests_to(TOKEN_URL).len(), 2, "continued once");
}

#[test]
fn without_auth_a_401_says_credentials_are_wanted() {
    let card = AgentCard::from_value(&json!({"name": "desk", "url": "http://127.0.0.1:9/",
        "skills": [{"id": "s"}]}))
    .expect("card");
    let peer = ScriptedPeer::new().require("Authorization", &["Bearer x"]);
    let r = run(&card_tools(&Agent::new(CARD_URL), &card)[0], &peer);
    assert!(
        r.output.contains("wants credentials (HTTP 401)"),
        "{}",
        r.output
    );
}

#[cfg(feature = "oauth2")]
#[test]
fn a_token_that_nears_expiry_mid_call_is_replaced_before_the_next_poll() {
    let working = json!({"id": "t", "status": {"state": "working"}});
    let peer = peer()
        .on_url(TOKEN_URL, vec![token_json("t1"), token_json("t2")])
        .on("SendMessage", vec![Reply::Result(working.clone())])
        .on(
            "GetTask",
            vec![
                Reply::Delay(95_000, Box::new(Reply::Result(working))),
                Reply::Result(completed("t", "late")),
            ],
        );
    let r = run(&oauth_tool(), &peer);
    assert_eq!(r.output, "late", "{}", r.output);
    assert_eq!(peer.requests_to(TOKEN_URL).len(), 2);
    assert_eq!(
        auth_headers(&peer),
        ["Bearer t1", "Bearer t1", "Bearer t2"].map(|s| Some(s.to_string()))
    );
}

#[cfg(feature = "oauth2")]
#[test]
fn list_tasks_sends_the_token_and_fetches_again_once_on_401() {
    let peer = peer()
        .on_url(TOKEN_URL, vec![token_json("t1"), token_json("t2")])
        .require("Authorization", &["Bearer t2"])
        .on(
            "ListTasks",
            vec![Reply::Result(json!({"tasks": [], "nextPageToken": ""}))],
        );
    let list = block_on(crate::list_tasks(
        &peer,
        &oauth_agent(),
        &oauth_card(),
        &crate::ListFilter::default(),
        None,
    ))
    .expect("listed");
    assert!(list.tasks.is_empty());
    assert_eq!(
        auth_headers(&peer),
        ["Bearer t1", "Bearer t2"].map(|s| Some(s.to_string()))
    );
}

#[cfg(feature = "oauth2")]
#[test]
fn list_tasks_uses_the_token_the_agents_tools_fetched() {
    let completed_task = Reply::Result(completed("t", "done"));
    let peer = peer()
        .on_url(TOKEN_URL, vec![token_json("t1"), token_json("t2")])
        .on("SendMessage", vec![completed_task])
        .on(
            "ListTasks",
            vec![Reply::Result(json!({"tasks": [], "nextPageToken": ""}))],
        );
    let cell: SharedTokenCell = Arc::new(<TestLock<TokenCache> as crate::Lock<_>>::new(
        TokenCache::new(),
    ));
    let tool = card_tools(&oauth_agent(), &oauth_card())[0]
        .clone()
        .with_tokens(cell.clone());
    assert_eq!(run(&tool, &peer).output, "done");
    for _ in 0..2 {
        block_on(crate::list_tasks(
            &peer,
            &oauth_agent(),
            &oauth_card(),
            &crate::ListFilter::default(),
            Some(&*cell),
        ))
        .expect("listed");
    }
    assert_eq!(
        peer.requests_to(TOKEN_URL).len(),
        1,
        "one token for the call and both listings"
    );
    assert_eq!(
        auth_headers(&peer),
        ["Bearer t1"; 3].map(|s| Some(s.to_string()))
    );
}
