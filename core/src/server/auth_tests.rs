//! Who calls (issue 18): the authentication step (401 / 403 and their
//! challenges, in both dialects), the claims of a token, the owner of each
//! task and every operation scoped to it, the extended card.

use super::auth::{ApiKeys, AuthConfig, JwtConfig, KeyLocation, Verdict};
use super::*;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

const ALICE: (&str, &str) = ("X-API-Key", "alice-key-0123456789");
const BOB: (&str, &str) = ("X-API-Key", "bob-key-9876543210");

/// The test host's clock, in seconds (its `unix_ms` at virtual time 0).
const NOW_S: i64 = 1_764_547_200;

fn keys(location: KeyLocation, name: &str) -> ApiKeys {
    ApiKeys {
        location,
        name: name.into(),
        keys: vec![
            ("alice".into(), ALICE.1.into()),
            ("bob".into(), BOB.1.into()),
        ],
    }
}

fn jwt_config() -> JwtConfig {
    JwtConfig {
        issuer: Some("https://id.example".into()),
        audience: Some("a2a".into()),
        jwks_url: Some("https://id.example/jwks".into()),
        algorithms: vec!["RS256".into()],
        leeway_seconds: 30,
        ..JwtConfig::default()
    }
}

/// API keys in the `X-API-Key` header and JWTs.
fn both() -> AuthConfig {
    AuthConfig {
        api_keys: Some(keys(KeyLocation::Header, "X-API-Key")),
        jwt: Some(jwt_config()),
        custom: false,
    }
}

#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn guarded(auth: AuthConfig) -> Fixture {
    let host = Arc::new(TestHost::default());
    let store = Arc::new(Recording::default());
    let options = ServerOptions {
        card: Some(card().into()),
        cors_origin: Some(CorsOrigin::any()),
        #[cfg(feature = "push")]
        push: Some(PushOptions {
            allow_private_webhooks: true,
        }),
        auth: Some(auth),
        ..Default::default()
    };
    Fixture {
        server: A2aServer::new(options, store.clone(), host.clone(), Rules),
        host,
        store,
    }
}

/// Registers `token` as validly signed, with these claims.
fn sign(f: &Fixture, token: &str, claims: Value) {
    let claims = claims.as_object().cloned().expect("claims object");
    lock(&f.host.jwts).push((token.into(), claims));
}

/// Claims that pass [`jwt_config`], with `changes` applied (a null removes).
fn claims(changes: Value) -> Value {
    let mut c = json!({"iss": "https://id.example", "aud": "a2a", "sub": "carol",
                       "exp": NOW_S + 600, "nbf": NOW_S - 10, "scope": "a2a.call a2a.read"});
    for (k, v) in changes.as_object().expect("changes") {
        let map = c.as_object_mut().expect("object");
        if v.is_null() {
            map.remove(k);
        } else {
            map.insert(k.clone(), v.clone());
        }
    }
    c
}

impl Fixture {
    /// A JSON-RPC call with these headers, as sent.
    fn call_as(
        &self,
        headers: &[(&str, &str)],
        version: Option<&str>,
        method: &str,
        params: Value,
    ) -> HttpResponse {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut req = HttpRequest::post_json("/", body.to_string().into_bytes());
        for (k, v) in headers {
            req = req.with_header(*k, *v);
        }
        if let Some(v) = version {
            req = req.with_header("A2A-Version", v);
        }
        self.run(self.server.handle(req))
    }

    /// [`Fixture::call_as`], the JSON-RPC answer (HTTP 200).
    fn rpc_as(
        &self,
        who: (&str, &str),
        version: Option<&str>,
        method: &str,
        params: Value,
    ) -> Value {
        let resp = self.call_as(&[who], version, method, params);
        assert_eq!(resp.status, 200, "{}", resp.body_snippet(300));
        serde_json::from_slice(&resp.body).expect("JSON")
    }

    /// A 0.3 non-blocking send of `text` by `who`: the task's id.
    fn start_as(&self, who: (&str, &str), text: &str, extra: Value) -> String {
        let mut message =
            json!({"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": text}]});
        for (k, v) in extra.as_object().expect("extra") {
            message
                .as_object_mut()
                .expect("message")
                .insert(k.clone(), v.clone());
        }
        let v = self.rpc_as(
            who,
            None,
            "message/send",
            json!({"message": message, "configuration": {"blocking": false}}),
        );
        v["result"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("a task, got {v}"))
            .to_string()
    }
}

fn challenges(resp: &HttpResponse) -> Vec<&str> {
    resp.headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("WWW-Authenticate"))
        .map(|(_, v)| v.as_str())
        .collect()
}

fn body(resp: &HttpResponse) -> Value {
    serde_json::from_slice(&resp.body).expect("a JSON body")
}

#[test]
fn a_call_without_credentials_is_401_with_a_challenge_per_scheme_in_both_dialects() {
    let f = guarded(both());
    for (version, method) in [
        (None, "message/send"),
        (Some("0.3"), "tasks/get"),
        (Some("1.0"), "SendMessage"),
        (Some("1.0"), "GetTask"),
        (Some("1.0"), "SendStreamingMessage"),
        (Some("1.0"), "ListTasks"),
    ] {
        let resp = f.call_as(&[], version, method, json!({"id": "t"}));
        assert_eq!(resp.status, 401, "{method}");
        assert_eq!(
            challenges(&resp),
            vec![
                r#"ApiKey realm="a2a", in="header", name="X-API-Key""#,
                r#"Bearer realm="a2a""#
            ],
            "{method}"
        );
        assert_eq!(
            resp.header("Access-Control-Allow-Origin"),
            Some("*"),
            "a page can read why"
        );
        assert_eq!(
            resp.header("Access-Control-Expose-Headers"),
            Some("Preference-Applied, WWW-Authenticate")
        );
        let v = body(&resp);
        assert_eq!(v["error"]["code"], verify::UNAUTHORIZED);
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("credentials")),
            "{v}"
        );
        let reason = &v["error"]["data"][0]["reason"];
        match version {
            Some("1.0") => assert_eq!(reason, "UNAUTHENTICATED", "{v}"),
            _ => assert!(reason.is_null(), "0.3 errors carry no data: {v}"),
        }
    }
    assert!(f.store.inner.is_empty(), "nothing ran for a refused call");
}

#[test]
fn a_wrong_key_or_token_is_401_never_echoing_it() {
    let f = guarded(both());
    let resp = f.call_as(
        &[("X-API-Key", "mallory-guess-1")],
        Some("1.0"),
        "GetTask",
        json!({"id": "t"}),
    );
    assert_eq!(resp.status, 401);
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    assert!(
        text.contains("X-API-Key") && !text.contains("mallory-guess-1"),
        "{text}"
    );
    let resp = f.call_as(
        &[("Authorization", "Bearer forged.token.sig")],
        Some("1.0"),
        "GetTask",
        json!({"id": "t"}),
    );
    assert_eq!(resp.status, 401);
    assert!(
        challenges(&resp).contains(&r#"Bearer realm="a2a", error="invalid_token""#),
        "{:?}",
        challenges(&resp)
    );
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    assert!(
        text.contains("InvalidSignature") && !text.contains("forged.token.sig"),
        "{text}"
    );
    // A bearer token where only API keys are configured is no credential.
    let f = guarded(AuthConfig {
        jwt: None,
        ..both()
    });
    let resp = f.call_as(
        &[("Authorization", "Bearer x")],
        None,
        "tasks/get",
        json!({"id": "t"}),
    );
    assert_eq!(resp.status, 401);
    assert_eq!(
        challenges(&resp),
        vec![r#"ApiKey realm="a2a", in="header", name="X-API-Key""#]
    );
}

#[test]
fn the_public_card_health_and_preflight_stay_open() {
    let f = guarded(both());
    for (method, path) in [
        ("GET", CARD_PATH),
        ("HEAD", CARD_PATH),
        ("GET", LEGACY_CARD_PATH),
        ("GET", HEALTH_PATH),
        ("OPTIONS", "/"),
    ] {
        let resp = get(&f, path, method);
        assert!(
            resp.status == 200 || resp.status == 204,
            "{method} {path}: {}",
            resp.status
        );
        assert!(challenges(&resp).is_empty());
    }
}

#[test]
fn an_api_key_is_read_where_the_config_says_it_travels() {
    for (location, headers, url) in [
        (KeyLocation::Header, vec![("X-Key", ALICE.1)], "/"),
        (
            KeyLocation::Query,
            vec![],
            "/?other=1&api_key=alice-key-0123456789",
        ),
        (
            KeyLocation::Cookie,
            vec![("Cookie", "theme=dark; api_key=\"alice-key-0123456789\"")],
            "/",
        ),
    ] {
        let name = if location == KeyLocation::Header {
            "X-Key"
        } else {
            "api_key"
        };
        let f = guarded(AuthConfig {
            api_keys: Some(keys(location, name)),
            ..AuthConfig::default()
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
        let mut req = HttpRequest::post_json(url, body.to_string().into_bytes());
        for (k, v) in &headers {
            req = req.with_header(*k, *v);
        }
        let resp = f.run(f.server.handle(req));
        assert_eq!(resp.status, 200, "{location:?}: {}", resp.body_snippet(200));
        // The same key anywhere else is no credential.
        let mut req = HttpRequest::post_json("/", body.to_string().into_bytes());
        if location != KeyLocation::Header {
            req = req.with_header(name, ALICE.1);
        } else {
            req = req.with_header("Cookie", format!("X-Key={}", ALICE.1));
        }
        let resp = f.run(f.server.handle(req));
        assert_eq!(resp.status, 401, "{location:?} elsewhere");
        let c = challenges(&resp);
        assert_eq!(c.len(), 1);
        assert!(c[0].contains(&format!("name=\"{name}\"")), "{c:?}");
    }
}

#[test]
fn keys_are_compared_whole_and_with_every_key() {
    use verify::{key_owner, same_key};
    assert!(same_key(b"abc", b"abc"));
    for (a, b) in [
        (&b"abc"[..], &b"abd"[..]),
        (b"abc", b"ab"),
        (b"ab", b"abc"),
        (b"", b"a"),
        (b"xbc", b"abc"),
        // A byte that is the complement of a missing one still differs.
        (b"ab", b"ab\xff"),
    ] {
        assert!(!same_key(a, b), "{a:?} {b:?}");
    }
    let k = keys(KeyLocation::Header, "X-API-Key");
    assert_eq!(key_owner(&k, ALICE.1.as_bytes()), Some("alice"));
    assert_eq!(key_owner(&k, BOB.1.as_bytes()), Some("bob"));
    assert_eq!(key_owner(&k, b"alice-key-012345678"), None, "a prefix");
    assert_eq!(key_owner(&k, b""), None);
}

#[test]
fn token_claims_are_checked_with_leeway_on_the_hosts_clock() {
    let f = guarded(AuthConfig {
        api_keys: None,
        ..both()
    });
    let cases = [
        ("ok", claims(json!({})), 200),
        ("exp-in-leeway", claims(json!({"exp": NOW_S - 20})), 200),
        ("expired", claims(json!({"exp": NOW_S - 31})), 401),
        ("no-exp", claims(json!({"exp": null})), 401),
        ("exp-text", claims(json!({"exp": "tomorrow"})), 401),
        ("nbf-in-leeway", claims(json!({"nbf": NOW_S + 20})), 200),
        ("not-yet", claims(json!({"nbf": NOW_S + 31})), 401),
        (
            "other-iss",
            claims(json!({"iss": "https://evil.example"})),
            401,
        ),
        ("no-iss", claims(json!({"iss": null})), 401),
        ("aud-array", claims(json!({"aud": ["x", "a2a"]})), 200),
        ("other-aud", claims(json!({"aud": "other"})), 401),
        ("other-aud-array", claims(json!({"aud": ["x", "y"]})), 401),
        ("no-sub", claims(json!({"sub": null})), 401),
        ("empty-sub", claims(json!({"sub": ""})), 401),
    ];
    for (token, c, status) in cases {
        sign(&f, token, c);
        let bearer = format!("Bearer {token}");
        let resp = f.call_as(
            &[("Authorization", &bearer)],
            Some("1.0"),
            "ListTasks",
            json!({}),
        );
        assert_eq!(resp.status, status, "{token}: {}", resp.body_snippet(300));
        if status == 401 {
            assert_eq!(
                challenges(&resp),
                vec![r#"Bearer realm="a2a", error="invalid_token""#],
                "{token}"
            );
        }
    }
}

#[test]
fn a_token_without_the_required_scopes_is_403_insufficient_scope() {
    let mut config = jwt_config();
    config.required_scopes = vec!["a2a.call".into(), "a2a.admin".into()];
    let f = guarded(AuthConfig {
        jwt: Some(config),
        ..both()
    });
    sign(&f, "scope", claims(json!({"scope": "a2a.call a2a.admin"})));
    sign(
        &f,
        "scp",
        claims(json!({"scope": null, "scp": ["a2a.admin", "a2a.call"]})),
    );
    sign(&f, "some", claims(json!({"scope": "a2a.call"})));
    for (token, status) in [("scope", 200), ("scp", 200), ("some", 403)] {
        let bearer = format!("Bearer {token}");
        let resp = f.call_as(
            &[("Authorization", &bearer)],
            Some("1.0"),
            "ListTasks",
            json!({}),
        );
        assert_eq!(resp.status, status, "{token}");
        if status == 403 {
            assert_eq!(
                challenges(&resp),
                vec![
                    r#"Bearer realm="a2a", error="insufficient_scope", scope="a2a.call a2a.admin""#
                ]
            );
            let v = body(&resp);
            assert_eq!(v["error"]["data"][0]["reason"], "PERMISSION_DENIED");
            assert!(v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("a2a.admin")));
        }
    }
    // A valid API key passes even so: a request passes when one verifier accepts.
    let resp = f.call_as(
        &[ALICE, ("Authorization", "Bearer some")],
        Some("1.0"),
        "ListTasks",
        json!({}),
    );
    assert_eq!(resp.status, 200);
}

#[test]
fn the_owner_of_a_token_is_its_subject_with_its_issuer() {
    let f = guarded(both());
    // The same `sub` from the API keys and from the issuer: two owners.
    sign(&f, "alice-jwt", claims(json!({"sub": "alice"})));
    let jwt = ("Authorization", "Bearer alice-jwt");
    let id = f.start_as(ALICE, "hello", json!({}));
    f.settle();
    let v = f.rpc_as(jwt, Some("1.0"), "GetTask", json!({"id": id}));
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let v = f.rpc_as(ALICE, Some("1.0"), "GetTask", json!({"id": id}));
    assert_eq!(
        v["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
}

#[test]
fn a_custom_verifier_names_callers_and_its_refusals_stand() {
    let f = guarded(AuthConfig {
        custom: true,
        ..AuthConfig::default()
    });
    *lock(&f.host.custom) = Some(|req: &HttpRequest| match req.header("X-User") {
        Some("dave") => Verdict::Accepted(auth::Principal {
            subject: "dave".into(),
            ..Default::default()
        }),
        Some("eve") => Verdict::Rejected {
            status: 403,
            reason: "eve is suspended".into(),
        },
        _ => Verdict::NotMine,
    });
    let list = |who: &str| f.call_as(&[("X-User", who)], None, "ListTasks", json!({}));
    assert_eq!(list("dave").status, 200);
    let eve = list("eve");
    assert_eq!(eve.status, 403);
    assert!(String::from_utf8_lossy(&eve.body).contains("eve is suspended"));
    let nobody = list("zed");
    assert_eq!(nobody.status, 401);
    assert_eq!(
        challenges(&nobody),
        ["Bearer realm=\"a2a\""],
        "a 401 challenges (RFC 9110), Bearer when the verifier names no scheme"
    );
    assert!(challenges(&eve).is_empty(), "a 403 needs none");
    // The host names its verifier's challenge; a line break is never sent.
    *lock(&f.host.challenge) = Some("Session realm=\"corp\"".into());
    assert_eq!(challenges(&list("zed")), ["Session realm=\"corp\""]);
    *lock(&f.host.challenge) = Some("Session\r\nX-Evil: 1".into());
    assert_eq!(challenges(&list("zed")), ["Bearer realm=\"a2a\""]);
}

/// The error a caller gets for `id` on `method`: another owner's task
/// must read exactly as a task that does not exist.
fn refusal(f: &Fixture, who: (&str, &str), method: &str, params: Value) -> Value {
    let v = f.rpc_as(who, Some("1.0"), method, params);
    assert!(v["result"].is_null(), "{method}: {v}");
    v["error"].clone()
}

/// `error` with the task id in its message replaced, to compare a refusal
/// about one task with a refusal about another.
fn without_id(mut error: Value, id: &str) -> Value {
    if let Some(m) = error.get("message").and_then(Value::as_str) {
        let m = m.replace(id, "<id>");
        error
            .as_object_mut()
            .expect("error")
            .insert("message".into(), m.into());
    }
    error
}

#[test]
fn alices_task_is_not_found_for_bob_on_every_method() {
    let f = guarded(both());
    // One task running, one waiting for an answer, one finished.
    let running = f.start_as(ALICE, "hang on", json!({}));
    let asking = f.start_as(ALICE, "ask me", json!({}));
    let done = f.start_as(ALICE, "hello", json!({}));
    f.settle();
    #[cfg_attr(not(feature = "push"), allow(unused_mut))]
    let mut methods = vec![
        ("GetTask", json!({"id": "ID"})),
        ("CancelTask", json!({"id": "ID"})),
        (
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": "ID", "parts": [{"text": "Paris"}]}}),
        ),
    ];
    #[cfg(feature = "push")]
    methods.extend([
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "ID", "url": "http://127.0.0.1:9/hook"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": "ID", "id": "c"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": "ID"})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "ID", "id": "c"}),
        ),
    ]);
    for id in [&running, &asking, &done] {
        for (method, params) in &methods {
            let params: Value =
                serde_json::from_str(&params.to_string().replace("ID", id)).expect("params");
            let got = refusal(&f, BOB, method, params.clone());
            assert_eq!(got["code"], -32001, "{method} {id}: {got}");
            let unknown_params: Value =
                serde_json::from_str(&params.to_string().replace(id.as_str(), "no-such-task"))
                    .expect("params");
            let unknown = refusal(&f, BOB, method, unknown_params);
            assert_eq!(
                without_id(got, id),
                without_id(unknown, "no-such-task"),
                "{method}: the same answer as a missing task"
            );
        }
        // Streams: SubscribeToTask and tasks/resubscribe.
        for (version, method) in [
            (Some("1.0"), "SubscribeToTask"),
            (None, "tasks/resubscribe"),
        ] {
            let resp = f.call_as(&[BOB], version, method, json!({"id": id}));
            let v = body(&resp);
            assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
        }
        // A long-polling GetTask.
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}});
        let req = HttpRequest::post_json("/", body.to_string().into_bytes())
            .with_header(BOB.0, BOB.1)
            .with_header("Prefer", "wait=5");
        let v: Value = serde_json::from_slice(&f.run(f.server.handle(req)).body).expect("JSON");
        assert_eq!(v["error"]["code"], -32001, "long poll: {v}");
    }
    f.settle();
    // Nothing of alice's moved: bob's cancel and answer did nothing.
    let state = |id: &str| {
        f.rpc_as(ALICE, None, "tasks/get", json!({"id": id}))["result"]["status"]["state"].clone()
    };
    assert_eq!(state(&running), "working");
    assert_eq!(state(&asking), "input-required");
    assert_eq!(state(&done), "completed");
    // Alice herself reaches all of them.
    let v = f.rpc_as(ALICE, None, "tasks/cancel", json!({"id": running}));
    assert_eq!(v["result"]["status"]["state"], "canceled", "{v}");
}

#[test]
fn list_tasks_shows_each_caller_only_their_own_and_counts_only_those() {
    let f = guarded(both());
    for i in 0..3 {
        f.start_as(ALICE, &format!("alice {i}"), json!({}));
    }
    let bobs = f.start_as(BOB, "bob 0", json!({}));
    f.settle();
    let v = f.rpc_as(BOB, Some("1.0"), "ListTasks", json!({"pageSize": 100}));
    let tasks = v["result"]["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1, "{v}");
    assert_eq!(tasks[0]["id"], bobs.as_str());
    assert_eq!(v["result"]["totalSize"], 1);
    let v = f.rpc_as(ALICE, Some("1.0"), "ListTasks", json!({"pageSize": 2}));
    assert_eq!(v["result"]["totalSize"], 3);
    assert_eq!(v["result"]["tasks"].as_array().map(Vec::len), Some(2));
    // The store was asked for the caller's tasks only.
    let alice = f.store.inner.list_now(&TaskFilter {
        owner: Some("alice".into()),
        ..TaskFilter::default()
    });
    assert_eq!(alice.len(), 3);
}

#[test]
fn a_context_named_by_two_callers_reads_only_the_callers_turns() {
    let f = guarded(both());
    let ctx = json!({"contextId": "shared-ctx"});
    f.start_as(ALICE, "my secret plan", ctx.clone());
    f.settle();
    f.start_as(BOB, "hello there", ctx.clone());
    f.settle();
    let id = f.start_as(BOB, "recall", ctx.clone());
    f.settle();
    let v = f.rpc_as(BOB, None, "tasks/get", json!({"id": id}));
    let text = v["result"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(text.contains("hello there"), "bob's own turn: {text}");
    assert!(!text.contains("secret"), "alice's turn leaked: {text}");
}

#[test]
fn the_owner_is_kept_by_the_store_and_never_on_the_wire() {
    let f = guarded(both());
    let id = f.start_as(ALICE, "chunks please", json!({}));
    f.settle();
    let stored = f.store.inner.get_now(&id).expect("stored");
    assert_eq!(stored.owner.as_deref(), Some("alice"));
    let mut bodies = vec![
        f.call_as(&[ALICE], Some("1.0"), "GetTask", json!({"id": id})).body,
        f.call_as(&[ALICE], None, "tasks/get", json!({"id": id})).body,
        f.call_as(&[ALICE], Some("1.0"), "ListTasks", json!({"includeArtifacts": true})).body,
        f.call_as(&[ALICE], None, "message/send",
            json!({"message": {"role": "user", "messageId": "m9", "parts": [{"kind": "text", "text": "hi"}]}})).body,
    ];
    for version in [Some("1.0"), None] {
        let method = if version.is_some() {
            "SendStreamingMessage"
        } else {
            "message/stream"
        };
        let msg = json!({"message": {"role": "user", "messageId": "m8", "parts": [{"kind": "text", "text": "chunks"}]}});
        bodies.push(f.call_as(&[ALICE], version, method, msg).body);
    }
    #[cfg(feature = "push")]
    {
        let hook = json!({"message": {"role": "user", "messageId": "m7", "parts": [{"kind": "text", "text": "hello"}]},
                          "configuration": {"pushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}});
        let v = f.rpc_as(ALICE, None, "message/send", hook);
        assert!(v["result"].is_object(), "{v}");
        f.settle();
        let sent = lock(&f.host.sent);
        assert!(!sent.is_empty(), "a notification was sent");
        bodies.extend(sent.iter().map(|r| r.body.clone()));
    }
    assert!(bodies.len() >= 6);
    for b in bodies {
        let text = String::from_utf8_lossy(&b).into_owned();
        assert!(text.contains("\"id\""), "a real answer: {text}");
        assert!(!text.contains("\"owner\""), "the owner on the wire: {text}");
    }
}

/// The card as `GET path` with these headers gets it: the response and its JSON.
fn card_as(f: &Fixture, path: &str, headers: &[(&str, &str)]) -> (HttpResponse, Value) {
    let mut req = HttpRequest::get(path);
    for (k, v) in headers {
        req = req.with_header(*k, *v);
    }
    let resp = f.run(f.server.handle(req));
    assert_eq!(resp.status, 200, "{}", resp.body_snippet(300));
    let card = serde_json::from_slice(&resp.body).expect("card");
    (resp, card)
}

#[test]
fn the_card_declares_the_schemes_and_the_extended_card_needs_a_caller() {
    let f = guarded(both());
    let (_, card) = card_as(&f, CARD_PATH, &[]);
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
    // 1.0: each scheme is one field naming its kind (the `in` beside
    // `location` is the OpenAPI name the official TCK asks for).
    assert_eq!(
        card["securitySchemes"]["apiKey"],
        json!({"apiKeySecurityScheme": {"location": "header", "in": "header", "name": "X-API-Key",
               "description": "An API key naming the caller"}})
    );
    assert_eq!(
        card["securitySchemes"]["bearer"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"apiKey": {"list": []}}}, {"schemes": {"bearer": {"list": []}}}])
    );
    assert!(
        card.get("security").is_none(),
        "0.3's list is not on the 1.0 card"
    );
    assert!(
        crate::client::card::AgentCard::from_value(&card).is_ok(),
        "our own reader takes it"
    );
    for (version, method) in [
        (Some("1.0"), "GetExtendedAgentCard"),
        (None, "agent/getAuthenticatedExtendedCard"),
    ] {
        assert_eq!(f.call_as(&[], version, method, json!({})).status, 401);
        let v = f.rpc_as(ALICE, version, method, json!({}));
        let public = match version {
            Some(v) => card_as(&f, CARD_PATH, &[("A2A-Version", v)]).1,
            None => card_as(&f, CARD_PATH, &[("A2A-Version", "0.3")]).1,
        };
        assert_eq!(
            v["result"], public,
            "{method}: the public card, in its version"
        );
    }
}

#[test]
fn the_card_is_written_in_the_version_asked_and_1_0_without_one() {
    let f = guarded(both());
    let (plain, v10) = card_as(&f, CARD_PATH, &[]);
    for asked in [
        card_as(&f, CARD_PATH, &[("A2A-Version", "1.0")]),
        card_as(&f, &format!("{CARD_PATH}?A2A-Version=1.0"), &[]),
    ] {
        assert_eq!(
            asked.1, v10,
            "1.0 asked is the card served without a version"
        );
        assert_eq!(asked.0.header("etag"), plain.header("etag"));
    }
    let (old, v03) = card_as(&f, CARD_PATH, &[("A2A-Version", "0.3")]);
    assert_eq!(
        v03["securitySchemes"]["apiKey"],
        json!({"type": "apiKey", "in": "header", "name": "X-API-Key",
               "description": "An API key naming the caller"})
    );
    assert_eq!(
        v03["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer", "bearerFormat": "JWT"})
    );
    assert_eq!(v03["security"], json!([{"apiKey": []}, {"bearer": []}]));
    assert!(v03.get("securityRequirements").is_none());
    assert_eq!(v03["url"], v10["url"], "the rest of the card is the same");
    assert_eq!(v03["supportedInterfaces"], v10["supportedInterfaces"]);
    // The pre-1.0 path is asked by pre-1.0 clients.
    assert_eq!(card_as(&f, LEGACY_CARD_PATH, &[]).1, v03);
    assert_eq!(
        card_as(&f, LEGACY_CARD_PATH, &[("A2A-Version", "1.0")]).1,
        v10
    );
    // Caches keep one per version.
    assert_eq!(plain.header("vary"), Some("A2A-Version"));
    let (tag10, tag03) = (
        plain.header("etag").expect("etag"),
        old.header("etag").expect("etag"),
    );
    assert_ne!(tag10, tag03);
    let req = HttpRequest::get(CARD_PATH)
        .with_header("A2A-Version", "0.3")
        .with_header("If-None-Match", tag10);
    assert_eq!(
        f.run(f.server.handle(req)).status,
        200,
        "the 1.0 tag is not the 0.3 card's"
    );
    for card in [&v10, &v03] {
        let read = crate::client::card::AgentCard::from_value(card).expect("our reader takes both");
        assert_eq!(
            read.endpoint("http://h:1/.well-known/agent-card.json").1,
            "http://h:1/"
        );
    }
}

#[test]
fn an_issuer_without_a_jwks_url_is_declared_as_openid_connect() {
    let f = guarded(AuthConfig {
        api_keys: None,
        jwt: Some(JwtConfig {
            jwks_url: None,
            required_scopes: vec!["a2a.call".into()],
            ..jwt_config()
        }),
        custom: false,
    });
    let card: Value = serde_json::from_slice(&get(&f, CARD_PATH, "GET").body).expect("card");
    let url = "https://id.example/.well-known/openid-configuration";
    assert_eq!(
        card["securitySchemes"]["oidc"],
        json!({"openIdConnectSecurityScheme": {"openIdConnectUrl": url}})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"oidc": {"list": ["a2a.call"]}}}])
    );
    let (_, v03) = card_as(&f, CARD_PATH, &[("A2A-Version", "0.3")]);
    assert_eq!(
        v03["securitySchemes"]["oidc"],
        json!({"type": "openIdConnect", "openIdConnectUrl": url})
    );
    assert_eq!(v03["security"], json!([{"oidc": ["a2a.call"]}]));
    // A card built from the same config says the same.
    let built = build_agent_card(
        &A2aConfig {
            name: Some("desk".into()),
            auth: Some(AuthConfig {
                api_keys: None,
                jwt: Some(JwtConfig {
                    jwks_url: None,
                    required_scopes: vec!["a2a.call".into()],
                    ..jwt_config()
                }),
                custom: false,
            }),
            ..Default::default()
        },
        &[Skill {
            name: "greet".into(),
            description: "says hello".into(),
            content: String::new(),
        }],
        "http://h:1/",
    );
    assert_eq!(card_for(&built, Shape::V10), card);
    assert_eq!(card_for(&built, Shape::V03), v03);
}

#[test]
fn without_auth_the_card_declares_nothing_and_tasks_have_no_owner() {
    let f = fixture();
    let card: Value = serde_json::from_slice(&get(&f, CARD_PATH, "GET").body).expect("card");
    assert!(card.get("securitySchemes").is_none());
    assert!(card["capabilities"].get("extendedAgentCard").is_none());
    let v = f.send(None, "message/send", "hello", false);
    let id = v["result"]["id"].as_str().expect("id").to_string();
    f.settle();
    assert_eq!(f.store.inner.get_now(&id).expect("stored").owner, None);
}

#[test]
fn the_stored_form_keeps_the_owner_and_peer_data_never_sets_one() {
    let mut task =
        Task::from_value(&json!({"id": "t", "contextId": "c", "status": {"state": "completed"}}))
            .expect("task");
    task.owner = Some("https://id.example\u{1f}alice".into());
    let stored = serde_json::to_value(task.stored()).expect("stored");
    assert_eq!(stored["owner"], "https://id.example\u{1f}alice");
    assert_eq!(Task::from_stored(&stored), Some(task.clone()));
    assert_eq!(Task::from_value(&stored).expect("task").owner, None);
    assert!(task.to_value(Shape::V10).get("owner").is_none());
    assert!(task.to_value(Shape::V03).get("owner").is_none());
    // A file from before owners: no owner.
    let old = task.to_value(task.dialect);
    assert_eq!(Task::from_stored(&old).expect("task").owner, None);
}
