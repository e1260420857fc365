//! Issue 18's acceptance on the server side, over real HTTP on 127.0.0.1:
//! `toolnexus serve --config FILE` whose `a2a.auth` block turns on API keys
//! and JWT bearer tokens (RS256 / ES256, keys from a JWKS this test serves),
//! called by the official SDK clients through their own auth plumbing, by
//! raw JSON-RPC as two callers (isolation), and with forged tokens.
//!
//! Tokens, keys and the JWKS come from `tests/peers/jwt_tool.py` (PyJWT and
//! cryptography, installed by `tests/peers/setup.sh`).

mod common;

use common::sdk::{official_client_env, peers, Sdk, CLIENT_MODES};
use common::{run_to_end, start_listening, start_listening_env, temp_dir, toolnexus_bin, Proc};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use toolnexus_core::{HttpRequest, HttpResponse, Transport};
use toolnexus_host_native::NativeTransport;

const ALICE_KEY: &str = "alice-7f3c9e1b2d4a5e6f";
const BOB_KEY: &str = "bob-0a9d8c7b6e5f4a3b";
const ISSUER: &str = "https://issuer.toolnexus.test";
const AUDIENCE: &str = "toolnexus-acceptance";
/// The env variable the SDK client scripts read the credential from.
const CRED_ENV: &str = "TN_TEST_CREDENTIAL";

// ---- the test's token issuer ----------------------------------------------------

/// Keys made by `jwt_tool.py keys`, and their JWKS served on 127.0.0.1 by
/// `jwt_tool.py serve-jwks` (which counts the fetches).
struct Issuer {
    dir: PathBuf,
    jwks: Proc,
}

impl Issuer {
    async fn start() -> Issuer {
        let dir = temp_dir("jwt");
        let (python, tool) = jwt_tool();
        let dir_s = dir.display().to_string();
        let (code, _, stderr) = run_to_end(&python, &[&tool, "keys", &dir_s]).await;
        assert_eq!(code, 0, "jwt_tool.py keys: {stderr}");
        let jwks = start_listening(&python, &[&tool, "serve-jwks", &dir_s]).await;
        Issuer { dir, jwks }
    }

    fn jwks_url(&self) -> String {
        format!("{}/jwks.json", self.jwks.url)
    }

    /// `{name: token}` for `{name: spec}` (see `jwt_tool.py tokens`).
    async fn tokens(&self, specs: Value) -> Value {
        let (python, tool) = jwt_tool();
        let dir_s = self.dir.display().to_string();
        let specs = specs.to_string();
        let (code, stdout, stderr) = run_to_end(&python, &[&tool, "tokens", &dir_s, &specs]).await;
        assert_eq!(code, 0, "jwt_tool.py tokens: {stderr}");
        serde_json::from_str(stdout.trim()).expect("tokens JSON")
    }

    /// One good token for `sub`, signed by `kid`, with `extra` claims.
    async fn token(&self, sub: &str, kid: &str, extra: Value) -> String {
        let mut claims = good_claims(sub);
        if let (Some(c), Some(e)) = (claims.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        let t = self
            .tokens(json!({"t": {"kid": kid, "claims": claims}}))
            .await;
        t["t"].as_str().expect("token").to_string()
    }

    /// How many times the JWKS was fetched so far.
    async fn jwks_fetches(&self) -> u64 {
        let resp = NativeTransport::shared()
            .send(HttpRequest::get(format!("{}/count", self.jwks.url)))
            .await
            .expect("count");
        let v: Value = serde_json::from_slice(&resp.body).expect("count JSON");
        v["jwks"].as_u64().expect("jwks count")
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn jwt_tool() -> (PathBuf, String) {
    let python = peers().join(".venv/bin/python");
    assert!(
        python.exists(),
        "the test peers are not installed: run `bash tests/peers/setup.sh`"
    );
    (python, peers().join("jwt_tool.py").display().to_string())
}

/// Claims every verifier of these tests accepts for `sub`.
fn good_claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": "now", "exp": "now+600",
           "scope": "tasks"})
}

// ---- the protected server -------------------------------------------------------

/// The `apiKeys` verifier of the issue: alice and bob, keys from the environment.
fn api_keys() -> Value {
    json!({"in": "header", "name": "X-API-Key",
           "keys": {"alice": "${ALICE_KEY}", "bob": "${BOB_KEY}"}})
}

/// The `jwt` verifier of the issue, keys from the test's JWKS.
fn jwt(issuer: &Issuer) -> Value {
    json!({"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": issuer.jwks_url(),
           "algorithms": ["RS256", "ES256"], "leewaySeconds": 30})
}

/// `toolnexus serve --addr 127.0.0.1:0 --config FILE …extra` with
/// `{"a2a": {"auth": auth}}` in FILE (and `--llm echo` unless `extra` names
/// another model), ALICE_KEY and BOB_KEY in its environment.
async fn protected(auth: Value, extra: &[&str]) -> Proc {
    let dir = temp_dir("auth-cfg");
    std::fs::create_dir_all(&dir).expect("config dir");
    let path = dir.join("config.json");
    std::fs::write(&path, json!({"a2a": {"auth": auth}}).to_string()).expect("config");
    let path = path.display().to_string();
    let mut args = vec!["serve", "--addr", "127.0.0.1:0", "--config", &path];
    if !extra.contains(&"--llm") {
        args.extend(["--llm", "echo"]);
    }
    args.extend(extra);
    let proc = start_listening_env(
        &toolnexus_bin(),
        &args,
        &[
            ("ALICE_KEY", ALICE_KEY),
            ("BOB_KEY", BOB_KEY),
            ("OPENAI_API_KEY", "unused-by-these-tests"),
        ],
    )
    .await;
    // Read at start: the file is not needed any more.
    let _ = std::fs::remove_dir_all(&dir);
    proc
}

fn card_url(server: &Proc) -> String {
    format!("{}/.well-known/agent-card.json", server.url)
}

// ---- raw JSON-RPC as a caller ---------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Cred<'a> {
    Anonymous,
    Key(&'a str),
    Bearer(&'a str),
}

/// POSTs `body` to the server's JSON-RPC endpoint as `cred`; `version` is the
/// `A2A-Version` header (None: the 0.3 dialect, no header).
fn request(url: &str, cred: Cred, version: Option<&str>, body: &Value) -> HttpRequest {
    let mut req = HttpRequest::post_json(format!("{url}/"), body.to_string().into_bytes());
    if let Some(v) = version {
        req.headers.push(("A2A-Version".into(), v.into()));
    }
    match cred {
        Cred::Anonymous => {}
        Cred::Key(k) => req.headers.push(("X-API-Key".into(), k.into())),
        Cred::Bearer(t) => req
            .headers
            .push(("Authorization".into(), format!("Bearer {t}"))),
    }
    req
}

async fn send(req: HttpRequest) -> HttpResponse {
    tokio::time::timeout(Duration::from_secs(30), NativeTransport::shared().send(req))
        .await
        .expect("an answer within 30 s")
        .expect("an HTTP answer")
}

/// A 1.0 JSON-RPC call: (HTTP status, the JSON body or Null).
async fn rpc(url: &str, cred: Cred<'_>, method: &str, params: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = send(request(url, cred, Some("1.0"), &body)).await;
    (
        resp.status,
        serde_json::from_slice(&resp.body).unwrap_or(Value::Null),
    )
}

/// A 0.3 JSON-RPC call (no version header, 0.3 method names).
async fn rpc03(url: &str, cred: Cred<'_>, method: &str, params: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = send(request(url, cred, None, &body)).await;
    (
        resp.status,
        serde_json::from_slice(&resp.body).unwrap_or(Value::Null),
    )
}

/// A streaming method (SendStreamingMessage, SubscribeToTask, their 0.3
/// names): the head, and the body read until it ends, holds a JSON-RPC
/// error, or 5 s pass (a stream that keeps going is a granted stream).
async fn stream_head(req: HttpRequest) -> (u16, Vec<(String, String)>, String) {
    let resp = tokio::time::timeout(
        Duration::from_secs(30),
        NativeTransport::shared().send_streaming(req),
    )
    .await
    .expect("a head within 30 s")
    .expect("an HTTP answer");
    let (status, headers) = (resp.status, resp.headers.clone());
    let mut body = String::new();
    let mut stream = resp.body;
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => body.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => break,
            }
            if body.contains("\"error\"") || body.contains("TASK_STATE_") {
                break;
            }
        }
    })
    .await;
    (status, headers, body)
}

/// The SendMessage params of a 1.0 message with `text`.
fn message(text: &str, return_immediately: bool) -> Value {
    json!({"message": {"role": "ROLE_USER", "messageId": uuid(), "parts": [{"text": text}]},
           "configuration": {"returnImmediately": return_immediately}})
}

/// The 0.3 message/send params.
fn message03(text: &str) -> Value {
    json!({"message": {"role": "user", "kind": "message", "messageId": uuid(),
                       "parts": [{"kind": "text", "text": text}]}})
}

fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "m-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The id of the task a 1.0 SendMessage answer holds.
fn task_id(v: &Value) -> String {
    v["result"]["task"]["id"]
        .as_str()
        .or_else(|| v["result"]["id"].as_str())
        .unwrap_or_else(|| panic!("no task in {v}"))
        .to_string()
}

/// Every `WWW-Authenticate` value of a response, joined with ", ".
fn challenges(headers: &[(String, String)]) -> String {
    headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("www-authenticate"))
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A refusal for want of valid credentials: 401, a challenge naming each
/// scheme in `schemes` (case-insensitive), and the credential not echoed.
fn assert_401(what: &str, resp: &HttpResponse, schemes: &[&str], secret: Option<&str>) {
    assert_eq!(
        resp.status,
        401,
        "{what}: {} {}",
        resp.status,
        String::from_utf8_lossy(&resp.body)
    );
    let challenge = challenges(&resp.headers);
    assert!(
        !challenge.trim().is_empty(),
        "{what}: 401 without WWW-Authenticate: {:?}",
        resp.headers
    );
    for scheme in schemes {
        assert!(
            challenge
                .to_ascii_lowercase()
                .contains(&scheme.to_ascii_lowercase()),
            "{what}: the challenge {challenge:?} does not name {scheme}"
        );
    }
    if let Some(secret) = secret {
        let body = String::from_utf8_lossy(&resp.body);
        assert!(
            !body.contains(secret) && !challenge.contains(secret),
            "{what}: the refusal echoes the credential: {body} {challenge}"
        );
    }
}

// ---- 1. the official SDK clients, through their own auth plumbing ---------------

/// Every mode of the client script (blocking, non-blocking, streaming; 1.0
/// and 0.3) completes with the right credential; without one, or with a
/// wrong one, the call is refused with 401.
/// The SDK clients' HTTP+JSON transports, 1.0 and 0.3, blocking and streaming.
const REST_MODES: [&[&str]; 4] = [
    &["--rest"],
    &["--rest", "--stream"],
    &["--rest", "--legacy"],
    &["--rest", "--legacy", "--stream"],
];

async fn sdk_modes(sdk: Sdk, server: &Proc, flag: &str, good: &str, wrong: &str) {
    let card = card_url(server);
    for mode in CLIENT_MODES.iter().chain(REST_MODES.iter()) {
        let text = format!("auth {sdk:?} {flag} {mode:?}");
        let mut args: Vec<&str> = mode.to_vec();
        args.extend([flag, CRED_ENV]);
        let (code, v, stderr) =
            official_client_env(sdk, &card, &text, &args, &[(CRED_ENV, good)]).await;
        assert_eq!(code, 0, "{sdk:?} {mode:?} {flag}: {v} {stderr}");
        assert_eq!(v["state"], "completed", "{sdk:?} {mode:?}: {v}");
        assert_eq!(v["text"], text.as_str(), "{sdk:?} {mode:?}");
        if mode.contains(&"--stream") {
            let last = v["events"].as_array().and_then(|e| e.last()).cloned();
            assert_eq!(
                last.as_ref()
                    .map(|e| (e["kind"].clone(), e["state"].clone())),
                Some((json!("status-update"), json!("completed"))),
                "{sdk:?} {mode:?}: streamed for real: {v}"
            );
        }
    }
    for mode in [
        &[][..],
        &["--legacy"],
        &["--stream"],
        &["--legacy", "--stream"],
        &["--rest"],
        &["--rest", "--legacy", "--stream"],
    ] {
        // A wrong credential, through the same plumbing.
        let mut args: Vec<&str> = mode.to_vec();
        args.extend([flag, CRED_ENV]);
        let (code, v, stderr) =
            official_client_env(sdk, &card, "wrong", &args, &[(CRED_ENV, wrong)]).await;
        assert_eq!(code, 1, "{sdk:?} {mode:?} wrong credential: {v} {stderr}");
        assert!(stderr.contains("401"), "{sdk:?} {mode:?}: {stderr}");
        assert!(!stderr.contains(good), "{sdk:?} {mode:?}: {stderr}");
        // None at all.
        let (code, v, stderr) = official_client_env(sdk, &card, "none", mode, &[]).await;
        assert_eq!(code, 1, "{sdk:?} {mode:?} no credential: {v} {stderr}");
        assert!(stderr.contains("401"), "{sdk:?} {mode:?}: {stderr}");
    }
}

async fn sdk_with_api_keys(sdk: Sdk) {
    let server = protected(json!({"apiKeys": api_keys()}), &[]).await;
    sdk_modes(sdk, &server, "--api-key-env", ALICE_KEY, "alice-wrong-key").await;
}

/// Both verifiers on: the client offers a JWT, and the SDK's plumbing puts it
/// in `Authorization: Bearer` per the card's bearer scheme (not the API key
/// header); an expired token is refused like a missing one.
async fn sdk_with_jwt(sdk: Sdk) {
    let issuer = Issuer::start().await;
    let server = protected(json!({"apiKeys": api_keys(), "jwt": jwt(&issuer)}), &[]).await;
    let good = issuer
        .token(&format!("{sdk:?}-user"), "rs1", json!({}))
        .await;
    let expired = issuer
        .token("late", "rs1", json!({"exp": "now-600", "iat": "now-1200"}))
        .await;
    sdk_modes(sdk, &server, "--bearer-env", &good, &expired).await;
}

#[tokio::test]
async fn the_python_sdk_client_calls_a_protected_serve_with_an_api_key() {
    sdk_with_api_keys(Sdk::Python).await;
}

#[tokio::test]
async fn the_js_sdk_client_calls_a_protected_serve_with_an_api_key() {
    sdk_with_api_keys(Sdk::Js).await;
}

#[tokio::test]
async fn the_python_sdk_client_calls_a_protected_serve_with_a_jwt() {
    sdk_with_jwt(Sdk::Python).await;
}

#[tokio::test]
async fn the_js_sdk_client_calls_a_protected_serve_with_a_jwt() {
    sdk_with_jwt(Sdk::Js).await;
}

/// Raw HTTP, every dialect and method kind: no credential, a wrong API key,
/// a garbage bearer, each 401 with a challenge for each declared scheme; the
/// right ones pass. The public card stays readable and declares both
/// schemes; the extended card needs a caller.
#[tokio::test]
async fn missing_or_wrong_credentials_get_401_with_a_challenge_in_every_dialect() {
    let issuer = Issuer::start().await;
    let server = protected(json!({"apiKeys": api_keys(), "jwt": jwt(&issuer)}), &[]).await;
    let url = server.url.as_str();
    let good = issuer.token("carol", "rs1", json!({})).await;

    // The public card: no credential needed; the schemes come from the config.
    let card = send(HttpRequest::get(card_url(&server))).await;
    assert_eq!(card.status, 200);
    let card_text = String::from_utf8_lossy(&card.body).to_string();
    let card: Value = serde_json::from_str(&card_text).expect("card JSON");
    assert!(
        card["securitySchemes"].is_object(),
        "the card declares its schemes: {card}"
    );
    assert!(card_text.contains("X-API-Key"), "the apiKey scheme: {card}");
    assert!(
        card_text.to_ascii_lowercase().contains("bearer"),
        "the bearer scheme: {card}"
    );
    assert!(
        card["securityRequirements"].is_array() || card["security"].is_array(),
        "the card requires them: {card}"
    );
    assert!(
        !card_text.contains(ALICE_KEY) && !card_text.contains("${ALICE_KEY}"),
        "no key on the card"
    );
    assert_eq!(
        card["capabilities"]["extendedAgentCard"], true,
        "auth on: an extended card is offered: {card}"
    );

    let bodies = [
        (
            "1.0 SendMessage",
            Some("1.0"),
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("x", false)}),
        ),
        (
            "1.0 GetTask",
            Some("1.0"),
            json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}),
        ),
        (
            "1.0 ListTasks",
            Some("1.0"),
            json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}),
        ),
        (
            "1.0 GetExtendedAgentCard",
            Some("1.0"),
            json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}),
        ),
        (
            "0.3 message/send",
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": message03("x")}),
        ),
        (
            "0.3 tasks/get",
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t"}}),
        ),
    ];
    for (what, version, body) in &bodies {
        for (cred, secret) in [
            (Cred::Anonymous, None),
            (Cred::Key("not-a-key"), Some("not-a-key")),
            (Cred::Key(""), None),
            (Cred::Bearer("not.a.jwt"), Some("not.a.jwt")),
            (Cred::Bearer(ALICE_KEY), Some(ALICE_KEY)),
        ] {
            let resp = send(request(url, cred, *version, body)).await;
            assert_401(&format!("{what} as {cred:?}"), &resp, &["Bearer"], secret);
        }
        for cred in [Cred::Key(ALICE_KEY), Cred::Bearer(&good)] {
            let resp = send(request(url, cred, *version, body)).await;
            assert_eq!(
                resp.status,
                200,
                "{what} as {cred:?}: {}",
                String::from_utf8_lossy(&resp.body)
            );
        }
    }
    // The streaming methods are refused before any stream starts.
    for (what, version, method, params) in [
        (
            "1.0 SendStreamingMessage",
            Some("1.0"),
            "SendStreamingMessage",
            message("s", false),
        ),
        ("0.3 message/stream", None, "message/stream", message03("s")),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, headers, text) =
            stream_head(request(url, Cred::Anonymous, version, &body)).await;
        assert_eq!(status, 401, "{what}: {text}");
        assert!(
            challenges(&headers).to_ascii_lowercase().contains("bearer"),
            "{what}: {headers:?}"
        );
        let (status, _, text) =
            stream_head(request(url, Cred::Key(ALICE_KEY), version, &body)).await;
        assert_eq!(status, 200, "{what} as alice: {text}");
    }
    // The extended card answers an authenticated caller.
    let (status, v) = rpc(url, Cred::Key(ALICE_KEY), "GetExtendedAgentCard", json!({})).await;
    assert_eq!(status, 200);
    assert!(v["result"]["name"].is_string(), "{v}");
}

/// With API keys only, the challenge still names a scheme (no bearer here).
#[tokio::test]
async fn an_api_key_server_challenges_too() {
    let server = protected(json!({"apiKeys": api_keys()}), &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}});
    let resp = send(request(&server.url, Cred::Anonymous, Some("1.0"), &body)).await;
    assert_401("anonymous", &resp, &[], None);
    let resp = send(request(&server.url, Cred::Key(BOB_KEY), Some("1.0"), &body)).await;
    assert_eq!(resp.status, 200);
}

// ---- 2. isolation -----------------------------------------------------------------

fn assert_not_found(what: &str, v: &Value) {
    assert_eq!(v["error"]["code"], -32001, "{what}: TaskNotFound, got {v}");
    assert!(v.get("result").is_none(), "{what}: {v}");
}

/// Alice's task, while it runs (a model that never answers keeps it
/// `working`), is TaskNotFound for bob on every method that names a task, in
/// 1.0 and 0.3, exactly as an id that never existed; bob changes nothing
/// (alice's task still runs, her webhook configs are hers); alice's own
/// calls work.
#[tokio::test]
async fn alices_task_is_task_not_found_for_bob_on_every_method() {
    let hang = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hang_url = format!("http://{}", hang.local_addr().expect("addr"));
    let (hook, _hits) = common::Stub::webhook().await;
    let webhook = format!("{}/hook", hook.url());
    let server = protected(
        json!({"apiKeys": api_keys()}),
        &[
            "--llm",
            "openai",
            "--model",
            "m",
            "--llm-base-url",
            &hang_url,
            "--push-notifications",
            "--allow-private-webhooks",
        ],
    )
    .await;
    let url = server.url.as_str();
    let (alice, bob) = (Cred::Key(ALICE_KEY), Cred::Key(BOB_KEY));

    let (status, v) = rpc(url, alice, "SendMessage", message("long job", true)).await;
    assert_eq!(status, 200, "{v}");
    let id = task_id(&v);
    let (_, v) = rpc(
        url,
        alice,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": webhook}),
    )
    .await;
    let config_id = v["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("alice sets a webhook: {v}"))
        .to_string();

    // What bob is told of an id that never existed, to compare with.
    let (_, never) = rpc(url, bob, "GetTask", json!({"id": "no-such-task"})).await;
    assert_not_found("an unknown id", &never);

    let calls: Vec<(&str, Value)> = vec![
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": format!("{webhook}/bob")}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": config_id}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": config_id}),
        ),
    ];
    for (method, params) in &calls {
        let (status, v) = rpc(url, bob, method, params.clone()).await;
        assert_eq!(status, 200, "{method}: {v}");
        assert_not_found(&format!("bob's {method}"), &v);
        assert_eq!(
            v["error"]["message"].as_str().map(|m| m.replace(&id, "ID")),
            never["error"]["message"]
                .as_str()
                .map(|m| m.replace("no-such-task", "ID")),
            "bob's {method} tells him no more than of an unknown id"
        );
    }
    let calls03: Vec<(&str, Value)> = vec![
        ("tasks/get", json!({"id": id})),
        ("tasks/cancel", json!({"id": id})),
        (
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"url": format!("{webhook}/bob03")}}),
        ),
        (
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": config_id}),
        ),
        ("tasks/pushNotificationConfig/list", json!({"id": id})),
        (
            "tasks/pushNotificationConfig/delete",
            json!({"id": id, "pushNotificationConfigId": config_id}),
        ),
    ];
    for (method, params) in &calls03 {
        let (status, v) = rpc03(url, bob, method, params.clone()).await;
        assert_eq!(status, 200, "{method}: {v}");
        assert_not_found(&format!("bob's 0.3 {method}"), &v);
    }
    // SubscribeToTask: no stream for bob, in either dialect.
    for (version, method) in [
        (Some("1.0"), "SubscribeToTask"),
        (None, "tasks/resubscribe"),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": id}});
        let (_, _, text) = stream_head(request(url, bob, version, &body)).await;
        assert!(
            text.contains("-32001")
                && !text.contains("TASK_STATE_")
                && !text.contains("\"working\""),
            "bob's {method}: {text}"
        );
    }

    // Bob changed nothing: alice's task still runs, her one webhook is there.
    let (_, v) = rpc(url, alice, "GetTask", json!({"id": id})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_WORKING", "{v}");
    let (_, v) = rpc(
        url,
        alice,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    let urls: Vec<&str> = v["result"]["configs"]
        .as_array()
        .unwrap_or_else(|| panic!("alice lists her webhooks: {v}"))
        .iter()
        .filter_map(|c| c["url"].as_str())
        .collect();
    assert_eq!(urls, [webhook.as_str()], "{v}");
    // Alice may subscribe, then cancel.
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": id}});
    let (status, _, text) = stream_head(request(url, alice, Some("1.0"), &body)).await;
    assert_eq!(status, 200);
    assert!(
        text.contains("TASK_STATE_WORKING"),
        "alice's subscription: {text}"
    );
    let (_, v) = rpc(url, alice, "CancelTask", json!({"id": id})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    drop(hang);
}

/// ListTasks never shows bob alice's tasks, whatever the filter; totalSize
/// counts only his.
#[tokio::test]
async fn list_tasks_shows_each_caller_only_their_own() {
    let server = protected(json!({"apiKeys": api_keys()}), &[]).await;
    let url = server.url.as_str();
    let (alice, bob) = (Cred::Key(ALICE_KEY), Cred::Key(BOB_KEY));
    let mut alices = Vec::new();
    let mut alice_context = String::new();
    for i in 0..3 {
        let (_, v) = rpc(
            url,
            alice,
            "SendMessage",
            message(&format!("alice {i}"), false),
        )
        .await;
        alices.push(task_id(&v));
        alice_context = v["result"]["task"]["contextId"]
            .as_str()
            .unwrap_or_default()
            .into();
    }
    let mut bobs = Vec::new();
    for i in 0..2 {
        let (_, v) = rpc(url, bob, "SendMessage", message(&format!("bob {i}"), false)).await;
        bobs.push(task_id(&v));
    }
    let ids = |v: &Value| -> Vec<String> {
        v["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("a page: {v}"))
            .iter()
            .filter_map(|t| t["id"].as_str().map(str::to_string))
            .collect()
    };
    let (_, v) = rpc(url, bob, "ListTasks", json!({})).await;
    let mut seen = ids(&v);
    seen.sort();
    let mut want = bobs.clone();
    want.sort();
    assert_eq!(seen, want, "bob sees his tasks only: {v}");
    assert_eq!(v["result"]["totalSize"], 2, "{v}");

    let (_, v) = rpc(url, bob, "ListTasks", json!({"pageSize": 1})).await;
    assert_eq!(ids(&v).len(), 1, "{v}");
    assert!(bobs.contains(&ids(&v)[0]), "{v}");
    assert_eq!(v["result"]["totalSize"], 2, "{v}");

    let (_, v) = rpc(url, bob, "ListTasks", json!({"contextId": alice_context})).await;
    assert_eq!(
        ids(&v),
        Vec::<String>::new(),
        "alice's context is empty for bob: {v}"
    );
    assert_eq!(v["result"]["totalSize"], 0, "{v}");

    let (_, v) = rpc(
        url,
        bob,
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED"}),
    )
    .await;
    assert!(ids(&v).iter().all(|id| !alices.contains(id)), "{v}");
    assert_eq!(v["result"]["totalSize"], 2, "{v}");

    let (_, v) = rpc(url, alice, "ListTasks", json!({})).await;
    assert_eq!(v["result"]["totalSize"], 3, "{v}");
    assert!(ids(&v).iter().all(|id| alices.contains(id)), "{v}");
}

// ---- 3. JWT refusals -----------------------------------------------------------

/// Each forged or out-of-policy token is 401 (a valid one without the
/// required scope, 403), none brings the server down, and a good token is
/// accepted before and after; a token inside the leeway and an ES256 one pass.
#[tokio::test]
async fn forged_and_out_of_policy_tokens_are_refused_and_the_server_stays_up() {
    let issuer = Issuer::start().await;
    let mut config = jwt(&issuer);
    config["requiredScopes"] = json!(["tasks"]);
    let mut server = protected(json!({"jwt": config}), &[]).await;
    let url = server.url.clone();
    let claims = good_claims("mallory");
    let with = |patch: Value| {
        let mut c = claims.clone();
        if let (Some(c), Some(p)) = (c.as_object_mut(), patch.as_object()) {
            for (k, v) in p {
                if v.is_null() {
                    c.remove(k);
                } else {
                    c.insert(k.clone(), v.clone());
                }
            }
        }
        c
    };
    let t = issuer
        .tokens(json!({
            "good": {"claims": claims},
            "es256": {"kid": "ec1", "claims": claims},
            "in_leeway": {"claims": with(json!({"exp": "now-10"}))},
            "expired": {"claims": with(json!({"exp": "now-120", "iat": "now-900"}))},
            "not_yet_valid": {"claims": with(json!({"nbf": "now+120"}))},
            "wrong_iss": {"claims": with(json!({"iss": "https://evil.example"}))},
            "no_iss": {"claims": with(json!({"iss": null}))},
            "wrong_aud": {"claims": with(json!({"aud": "another-service"}))},
            "alg_none": {"attack": "none", "claims": claims},
            "hs256_confusion": {"attack": "confusion", "claims": claims},
            "tampered": {"attack": "tampered", "claims": claims,
                          "claims_tampered": with(json!({"sub": "admin"}))},
            "unknown_kid": {"kid": "rs2", "claims": claims},
            "garbage": {"attack": "garbage"},
            "no_scope": {"claims": with(json!({"scope": null}))},
        }))
        .await;
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    let status_of = |token: String| {
        let req = request(&url, Cred::Bearer(&token), Some("1.0"), &get);
        async move { send(req).await }
    };
    for ok in ["good", "es256", "in_leeway"] {
        let resp = status_of(t[ok].as_str().expect(ok).into()).await;
        assert_eq!(
            resp.status,
            200,
            "{ok}: {}",
            String::from_utf8_lossy(&resp.body)
        );
    }
    for bad in [
        "expired",
        "not_yet_valid",
        "wrong_iss",
        "no_iss",
        "wrong_aud",
        "alg_none",
        "hs256_confusion",
        "tampered",
        "unknown_kid",
        "garbage",
    ] {
        let token = t[bad].as_str().expect(bad).to_string();
        let resp = status_of(token.clone()).await;
        assert_401(bad, &resp, &["Bearer"], Some(&token));
        assert!(
            server.child.try_wait().expect("wait").is_none(),
            "{bad}: the server died"
        );
    }
    let resp = status_of(t["no_scope"].as_str().expect("no_scope").into()).await;
    assert_eq!(
        resp.status,
        403,
        "valid but without the required scope: {}",
        String::from_utf8_lossy(&resp.body)
    );
    // Still up, still accepting a good token.
    let resp = status_of(t["good"].as_str().expect("good").into()).await;
    assert_eq!(resp.status, 200);
    // Malformed Authorization headers are refused, not crashed on.
    for header in [
        "Bearer",
        "Bearer ",
        "Basic YWxpY2U6cHc=",
        "Bearer a.b.c.d",
        "Bearer a.b",
        "Bearer ....",
        "Bearer eyJhbGciOiJub25lIn0.e30.",
    ] {
        let mut req = request(&url, Cred::Anonymous, Some("1.0"), &get);
        req.headers.push(("Authorization".into(), header.into()));
        let resp = send(req).await;
        assert_eq!(resp.status, 401, "{header:?}");
    }
    assert!(server.child.try_wait().expect("wait").is_none());
}

/// Tokens naming a kid the JWKS does not have fetch it again at most once
/// per kid within the cache interval; known kids come from the cache.
#[tokio::test]
async fn an_unknown_kid_fetches_the_jwks_at_most_once_per_interval() {
    let issuer = Issuer::start().await;
    let server = protected(json!({"jwt": jwt(&issuer)}), &[]).await;
    let url = server.url.as_str();
    let good = issuer.token("dave", "rs1", json!({})).await;
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    for _ in 0..5 {
        let resp = send(request(url, Cred::Bearer(&good), Some("1.0"), &get)).await;
        assert_eq!(resp.status, 200);
    }
    let after_good = issuer.jwks_fetches().await;
    assert!(
        (1..=2).contains(&after_good),
        "the keys are fetched, then cached: {after_good} fetches for 5 calls"
    );
    let unknown = issuer.token("dave", "rs3", json!({})).await;
    for round in 0..20 {
        let resp = send(request(url, Cred::Bearer(&unknown), Some("1.0"), &get)).await;
        assert_401(
            &format!("unknown kid, round {round}"),
            &resp,
            &["Bearer"],
            None,
        );
    }
    let after_unknown = issuer.jwks_fetches().await;
    assert!(
        after_unknown <= after_good + 1,
        "20 tokens with one unknown kid fetched the JWKS {} times",
        after_unknown - after_good
    );
    // The known key still works, from the cache.
    let resp = send(request(url, Cred::Bearer(&good), Some("1.0"), &get)).await;
    assert_eq!(resp.status, 200);
    assert_eq!(issuer.jwks_fetches().await, after_unknown);
}

// ---- safe defaults of a plain `toolnexus serve` -----------------------------------

/// One raw HTTP/1.1 exchange on 127.0.0.1 with a Host header of our choosing
/// (what a DNS-rebinding page's browser sends): the status code.
async fn status_with_host(addr: &str, host: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#;
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"))
}

/// A default `serve` answers only Host names that are its own (DNS
/// rebinding: 421 for a foreign one), sends no CORS headers to a foreign
/// page, and does with `--cors-origin` naming it.
#[tokio::test]
async fn a_default_serve_refuses_foreign_hosts_and_sends_no_cors() {
    let server = start_listening(
        &toolnexus_bin(),
        &["serve", "--addr", "127.0.0.1:0", "--llm", "echo"],
    )
    .await;
    let addr = server.url.trim_start_matches("http://").to_string();
    let port = addr.rsplit(':').next().expect("port").to_string();
    for host in [
        addr.clone(),
        format!("localhost:{port}"),
        "127.0.0.1".into(),
    ] {
        assert_eq!(status_with_host(&addr, &host).await, 200, "Host: {host}");
    }
    for host in [
        "attacker.example".to_string(),
        format!("attacker.example:{port}"),
        format!("127.0.0.1.attacker.example:{port}"),
        format!("localhost.attacker.example:{port}"),
    ] {
        assert_eq!(status_with_host(&addr, &host).await, 421, "Host: {host}");
    }

    let page = "http://127.0.0.1:9";
    let mut post = HttpRequest::post_json(
        format!("{}/", server.url),
        br#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#.to_vec(),
    );
    post.headers.push(("Origin".into(), page.into()));
    post.headers.push(("A2A-Version".into(), "1.0".into()));
    let resp = send(post.clone()).await;
    let cors = |r: &HttpResponse| {
        r.headers
            .iter()
            .filter(|(k, _)| k.to_ascii_lowercase().starts_with("access-control-"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(cors(&resp), vec![], "no CORS by default");
    let preflight = HttpRequest {
        method: "OPTIONS".into(),
        url: format!("{}/", server.url),
        headers: vec![
            ("Origin".into(), page.into()),
            ("Access-Control-Request-Method".into(), "POST".into()),
            (
                "Access-Control-Request-Headers".into(),
                "content-type".into(),
            ),
            (
                "Access-Control-Request-Private-Network".into(),
                "true".into(),
            ),
        ],
        body: Vec::new(),
    };
    let resp = send(preflight.clone()).await;
    assert_eq!(cors(&resp), vec![], "no preflight grant by default");

    let granted = start_listening(
        &toolnexus_bin(),
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--llm",
            "echo",
            "--cors-origin",
            page,
        ],
    )
    .await;
    post.url = format!("{}/", granted.url);
    let resp = send(post).await;
    assert_eq!(resp.header("access-control-allow-origin"), Some(page));
    let mut preflight = preflight;
    preflight.url = format!("{}/", granted.url);
    let resp = send(preflight).await;
    assert_eq!(resp.header("access-control-allow-origin"), Some(page));
    assert_eq!(
        resp.header("access-control-allow-private-network"),
        None,
        "private network access only when asked for"
    );
    // Another origin is still not granted.
    let mut other = HttpRequest::post_json(
        format!("{}/", granted.url),
        br#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#.to_vec(),
    );
    other
        .headers
        .push(("Origin".into(), "http://127.0.0.1:8".into()));
    let resp = send(other).await;
    assert_ne!(
        resp.header("access-control-allow-origin"),
        Some("http://127.0.0.1:8")
    );
    assert_ne!(resp.header("access-control-allow-origin"), Some("*"));
}
