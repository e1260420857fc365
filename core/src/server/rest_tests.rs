//! The HTTP+JSON binding of the server function, route by route: the same
//! calls as JSON-RPC, answered as resources, bare SSE events and
//! `google.rpc.Status` errors with the A2A 1.0.1 HTTP statuses.

use super::*;
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn msg(text: &str) -> Value {
    json!({"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]})
}

#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
fn rest_fixture(config: A2aConfig, push: bool) -> Fixture {
    let host = Arc::new(TestHost::default());
    let store = Arc::new(Recording::default());
    let options = ServerOptions {
        card: Some(build_agent_card(&config, &[], "http://h:1/").into()),
        cors_origin: Some(CorsOrigin::any()),
        push: push.then(PushOptions::default),
        ..Default::default()
    };
    Fixture {
        server: A2aServer::new(options, store.clone(), host.clone(), Rules),
        host,
        store,
    }
}

impl Fixture {
    fn rest(&self, method: &str, path: &str, body: Option<Value>) -> HttpResponse {
        let req = HttpRequest {
            method: method.into(),
            url: format!("http://h:1/rest{path}"),
            headers: vec![("Content-Type".into(), "application/a2a+json".into())],
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        };
        self.run(self.server.handle(req))
    }

    /// A REST call that must answer 200 with an `application/a2a+json` body.
    fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let resp = self.rest(method, path, body);
        assert_eq!(resp.status, 200, "{}", resp.body_snippet(400));
        assert_eq!(resp.header("Content-Type"), Some("application/a2a+json"));
        serde_json::from_slice(&resp.body).expect("JSON body")
    }

    /// A REST call that must fail with `status`: its `google.rpc.Status`.
    fn refused(&self, method: &str, path: &str, body: Option<Value>, status: u16) -> Value {
        let resp = self.rest(method, path, body);
        assert_eq!(resp.status, status, "{}", resp.body_snippet(400));
        let v: Value = serde_json::from_slice(&resp.body).expect("JSON body");
        let e = &v["error"];
        assert_eq!(e["code"], status, "{v}");
        assert!(e["message"].is_string(), "{v}");
        assert_eq!(
            e["details"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(e["details"][0]["domain"], "a2a-protocol.org");
        e.clone()
    }

    fn rest_stream(&self, method: &str, path: &str, body: Option<Value>) -> EventBody {
        let req = HttpRequest {
            method: method.into(),
            url: format!("/rest{path}"),
            headers: Vec::new(),
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        };
        match self.run(self.server.serve(req)) {
            Reply::Stream { head, body } => {
                assert_eq!(head.header("Content-Type"), Some("text/event-stream"));
                body
            }
            Reply::Full(r) => panic!("not a stream: {}", r.body_snippet(300)),
        }
    }

    /// Every bare event (`data: <StreamResponse>`) until the stream ends.
    fn rest_events(&self, body: &mut EventBody) -> Vec<Value> {
        std::iter::from_fn(|| match self.try_frame(body) {
            Poll::Ready(frame) => frame.map(|f| {
                let json = f
                    .strip_prefix("data: ")
                    .and_then(|f| f.strip_suffix("\n\n"))
                    .unwrap_or_else(|| panic!("one data line: {f:?}"));
                let v: Value = serde_json::from_str(json).expect("JSON data");
                assert!(v.get("jsonrpc").is_none(), "no envelope: {v}");
                v
            }),
            Poll::Pending => panic!("no event came"),
        })
        .collect()
    }
}

fn rest() -> Fixture {
    rest_fixture(A2aConfig::default(), false)
}

#[test]
fn the_card_lists_both_bindings_and_the_server_serves_what_it_lists() {
    let card = build_agent_card(&A2aConfig::default(), &[], "http://h:1/");
    let list = card["supportedInterfaces"].as_array().expect("interfaces");
    let rest: Vec<&Value> = list
        .iter()
        .filter(|i| i["protocolBinding"] == "HTTP+JSON")
        .collect();
    assert_eq!(rest.len(), 2, "1.0 and 0.3: {card}");
    assert_eq!(rest[0]["url"], "http://h:1/rest");
    assert_eq!(rest[0]["protocolVersion"], "1.0");
    assert_eq!(list[0]["protocolBinding"], "JSONRPC", "JSON-RPC first");
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(
        card["additionalInterfaces"][1],
        json!({"url": "http://h:1/rest", "transport": "HTTP+JSON"})
    );

    // REST only: the card's main URL is the REST one, JSON-RPC is not served.
    let only = A2aConfig {
        bindings: Some(vec!["rest".into()]),
        ..Default::default()
    };
    let card = build_agent_card(&only, &[], "http://h:1/");
    assert_eq!(card["url"], "http://h:1/rest");
    assert_eq!(card["preferredTransport"], "HTTP+JSON");
    assert!(card["supportedInterfaces"]
        .as_array()
        .expect("list")
        .iter()
        .all(|i| i["protocolBinding"] == "HTTP+JSON"));
    let f = rest_fixture(only, false);
    let rpc = f.post(
        Some("1.0"),
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
    );
    assert_ne!(rpc.status, 200, "no JSON-RPC at /");
    f.refused("GET", "/tasks/x", None, 404);

    // JSON-RPC only: no REST routes.
    let f = rest_fixture(
        A2aConfig {
            bindings: Some(vec!["jsonrpc".into()]),
            ..Default::default()
        },
        false,
    );
    assert_eq!(f.rest("GET", "/tasks/x", None).status, 404);
    assert_eq!(
        f.error_code(Some("1.0"), "GetTask", json!({"id": "x"})),
        -32001
    );
}

#[test]
fn bindings_parse() {
    assert_eq!(
        rest::Bindings::parse("jsonrpc,rest"),
        Ok(rest::Bindings::default())
    );
    assert_eq!(
        rest::Bindings::parse("rest"),
        Ok(rest::Bindings {
            jsonrpc: false,
            rest: true
        })
    );
    assert!(rest::Bindings::parse("grpc").is_err());
    assert!(rest::Bindings::parse("").is_err());
}

#[test]
fn send_blocking_and_non_blocking_then_get_with_history_length() {
    let f = rest();
    let v = f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("hello")})),
    );
    let task = &v["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "done: hello");
    let id = task["id"].as_str().expect("id");

    let got = f.ok("GET", &format!("/tasks/{id}"), None);
    assert_eq!(got["id"], id, "the bare task: {got}");
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(!got["history"].as_array().expect("history").is_empty());
    let trimmed = f.ok("GET", &format!("/tasks/{id}?historyLength=0"), None);
    assert!(
        trimmed.get("history").is_none_or(|h| h == &json!([])),
        "{trimmed}"
    );
    let bad = f.refused("GET", &format!("/tasks/{id}?historyLength=x"), None, 400);
    assert_eq!(bad["status"], "INVALID_ARGUMENT");

    let v = f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("hang on"), "configuration": {"returnImmediately": true}})),
    );
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_SUBMITTED", "{v}");
}

#[test]
fn list_tasks_reads_its_params_from_the_query() {
    let f = rest();
    let a = f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("one")})),
    );
    let ctx = a["task"]["contextId"]
        .as_str()
        .expect("context")
        .to_string();
    f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("two")})),
    );
    let all = f.ok("GET", "/tasks", None);
    assert_eq!(all["tasks"].as_array().expect("tasks").len(), 2, "{all}");
    let one = f.ok(
        "GET",
        &format!("/tasks?contextId={ctx}&pageSize=1&includeArtifacts=true&status=TASK_STATE_COMPLETED&statusTimestampAfter=2000-01-01T00%3A00%3A00Z"),
        None,
    );
    let tasks = one["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1, "{one}");
    assert_eq!(tasks[0]["contextId"], ctx.as_str());
    assert!(tasks[0]["artifacts"].is_array(), "{one}");
    let e = f.refused("GET", "/tasks?pageSize=0", None, 400);
    assert_eq!(e["details"][0]["reason"], "INVALID_PARAMS");
}

#[test]
fn cancel_then_cancel_again_is_400_task_not_cancelable() {
    let f = rest();
    let v = f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("hang on"), "configuration": {"returnImmediately": true}})),
    );
    let id = v["task"]["id"].as_str().expect("id").to_string();
    f.settle();
    let c = f.ok("POST", &format!("/tasks/{id}:cancel"), None);
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED", "{c}");
    f.settle();
    let e = f.refused("POST", &format!("/tasks/{id}:cancel"), Some(json!({})), 400);
    assert_eq!(e["status"], "FAILED_PRECONDITION");
    assert_eq!(e["details"][0]["reason"], "TASK_NOT_CANCELABLE");
}

#[test]
fn on_the_0_3_routes_errors_also_carry_what_the_sdks_0_3_clients_read() {
    let f = rest();
    let v = f.ok(
        "POST",
        "/v1/message:send",
        Some(json!({"message": {"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "hi"}]}})),
    );
    let id = v["task"]["id"].as_str().expect("id").to_string();
    f.settle();
    for (method, path, status, code, class) in [
        (
            "POST",
            format!("/v1/tasks/{id}:cancel"),
            400,
            -32002,
            "TaskNotCancelableError",
        ),
        (
            "GET",
            "/v1/tasks/nope".to_string(),
            404,
            -32001,
            "TaskNotFoundError",
        ),
    ] {
        let resp = f.rest(method, &path, None);
        assert_eq!(resp.status, status, "{}", resp.body_snippet(400));
        let v: Value = serde_json::from_slice(&resp.body).expect("JSON body");
        // The google.rpc.Status, as on the 1.0 routes (and as a2a-sdk's 0.3 routes answer)…
        assert_eq!(v["error"]["code"], status, "{v}");
        // …and at the top the JSON-RPC code (@a2a-js/sdk's 0.3 REST client
        // maps it) and the class name (a2a-sdk's 0.3 REST client maps it).
        assert_eq!(v["code"], code, "{v}");
        assert_eq!(v["message"], v["error"]["message"], "{v}");
        assert_eq!(v["type"], class, "{v}");
    }
    // The 1.0 routes keep the google.rpc.Status alone.
    let v: Value = serde_json::from_slice(&f.rest("GET", "/tasks/nope", None).body).expect("JSON");
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");
    for (reason, class) in [
        ("TASK_NOT_FOUND", "TaskNotFoundError"),
        (
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            "ExtendedAgentCardNotConfiguredError",
        ),
        ("INTERNAL_ERROR", "InternalError"),
        ("INVALID_PARAMS", "InvalidParamsError"),
    ] {
        assert_eq!(super::rest::class_name(reason), class);
    }
}

#[test]
fn stream_and_subscribe_send_bare_stream_responses() {
    let f = rest();
    let mut body = f.rest_stream(
        "POST",
        "/message:stream",
        Some(json!({"message": msg("progress please")})),
    );
    let events = f.rest_events(&mut body);
    assert!(events[0]["task"]["id"].is_string(), "{events:?}");
    let last = events.last().expect("events");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    assert!(events.iter().any(|e| e.get("artifactUpdate").is_some()));

    // Subscribe (GET and POST) to a running task; a finished one is refused.
    let v = f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("hang on"), "configuration": {"returnImmediately": true}})),
    );
    let id = v["task"]["id"].as_str().expect("id").to_string();
    f.settle();
    for method in ["GET", "POST"] {
        let mut sub = f.rest_stream(method, &format!("/tasks/{id}:subscribe"), None);
        let first = match f.try_frame(&mut sub) {
            Poll::Ready(Some(frame)) => frame,
            other => panic!("a first event: {other:?}"),
        };
        assert!(first.contains(r#""task":{"#), "{first}");
        assert!(first.contains(&id), "{first}");
    }
    f.ok("POST", &format!("/tasks/{id}:cancel"), None);
    f.settle();
    let done = f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("quick")})),
    );
    let done_id = done["task"]["id"].as_str().expect("id");
    let e = f.refused("GET", &format!("/tasks/{done_id}:subscribe"), None, 400);
    assert_eq!(e["details"][0]["reason"], "UNSUPPORTED_OPERATION");
    let e = f.refused("POST", "/message:stream", Some(json!({"message": {}})), 400);
    assert_eq!(e["details"][0]["reason"], "INVALID_PARAMS");
}

#[cfg(feature = "push")]
#[test]
fn push_config_routes_create_get_list_delete() {
    let f = rest_fixture(
        A2aConfig {
            push_notifications: true,
            ..Default::default()
        },
        true,
    );
    let v = f.ok(
        "POST",
        "/message:send",
        Some(json!({"message": msg("hang on"), "configuration": {"returnImmediately": true}})),
    );
    let id = v["task"]["id"].as_str().expect("id").to_string();
    let base = format!("/tasks/{id}/pushNotificationConfigs");
    let set = f.ok(
        "POST",
        &base,
        Some(json!({"taskId": id, "url": "https://hooks.example/a2a", "token": "tk"})),
    );
    let cid = set["id"].as_str().expect("config id").to_string();
    assert_eq!(set["taskId"], id.as_str());
    let got = f.ok("GET", &format!("{base}/{cid}"), None);
    assert_eq!(got["url"], "https://hooks.example/a2a");
    let list = f.ok("GET", &base, None);
    assert_eq!(
        list["configs"].as_array().expect("configs").len(),
        1,
        "{list}"
    );
    let deleted = f.ok("DELETE", &format!("{base}/{cid}"), None);
    assert_eq!(deleted, json!({}));
    let e = f.refused("GET", &format!("{base}/{cid}"), None, 404);
    assert_eq!(e["status"], "NOT_FOUND");
    let e = f.refused("POST", &base, Some(json!({"token": "no url"})), 400);
    assert_eq!(e["details"][0]["reason"], "INVALID_PARAMS");
    assert_eq!(f.rest("PUT", &base, None).status, 405);
    let e = f.refused("GET", "/tasks/nope/pushNotificationConfigs", None, 404);
    assert_eq!(e["details"][0]["reason"], "TASK_NOT_FOUND");
}

#[test]
fn errors_use_the_a2a_1_0_1_statuses_and_google_rpc_status() {
    let f = rest();
    let e = f.refused("GET", "/tasks/nope", None, 404);
    assert_eq!(e["status"], "NOT_FOUND");
    assert_eq!(e["details"][0]["reason"], "TASK_NOT_FOUND");
    let e = f.refused("POST", "/tasks/nope:cancel", None, 404);
    assert_eq!(e["details"][0]["reason"], "TASK_NOT_FOUND");
    // Push notifications not offered.
    let e = f.refused("GET", "/tasks/x/pushNotificationConfigs", None, 400);
    assert_eq!(e["details"][0]["reason"], "PUSH_NOTIFICATION_NOT_SUPPORTED");
    assert_eq!(e["status"], "FAILED_PRECONDITION");
    // No extended card.
    let e = f.refused("GET", "/extendedAgentCard", None, 400);
    assert_eq!(e["details"][0]["reason"], "UNSUPPORTED_OPERATION");
    // A body that is not JSON, a message without parts (with the field named).
    let resp = {
        let req = HttpRequest {
            method: "POST".into(),
            url: "/rest/message:send".into(),
            headers: Vec::new(),
            body: b"{not json".to_vec(),
        };
        f.run(f.server.handle(req))
    };
    assert_eq!(resp.status, 400);
    let e = f.refused(
        "POST",
        "/message:send",
        Some(json!({"message": {"role": "ROLE_USER", "messageId": "m"}})),
        400,
    );
    assert_eq!(e["status"], "INVALID_ARGUMENT");
    assert_eq!(
        e["details"][1]["@type"],
        "type.googleapis.com/google.rpc.BadRequest"
    );
    assert_eq!(
        e["details"][1]["fieldViolations"][0]["field"],
        "message.parts"
    );
    // Unknown routes and wrong methods.
    let e = f.refused("GET", "/nothing/here/at/all", None, 404);
    assert_eq!(e["details"][0]["reason"], "METHOD_NOT_FOUND");
    let resp = f.rest("GET", "/message:send", None);
    assert_eq!(resp.status, 405);
    assert_eq!(resp.header("Allow"), Some("POST"));
    // A version this server lacks, and a 0.3 version on a 1.0 route.
    for v in ["2.0", "0.3"] {
        let req = HttpRequest {
            method: "GET".into(),
            url: "/rest/tasks/x".into(),
            headers: vec![("A2A-Version".into(), v.into())],
            body: Vec::new(),
        };
        let resp = f.run(f.server.handle(req));
        assert_eq!(resp.status, 400, "{v}");
        let body: Value = serde_json::from_slice(&resp.body).expect("json");
        assert_eq!(
            body["error"]["details"][0]["reason"],
            "VERSION_NOT_SUPPORTED"
        );
    }
}

#[test]
fn the_1_0_1_status_table() {
    use rest::http_status;
    assert_eq!(http_status(rpc::TASK_NOT_FOUND), (404, "NOT_FOUND"));
    assert_eq!(
        http_status(rpc::TASK_NOT_CANCELABLE),
        (400, "FAILED_PRECONDITION")
    );
    assert_eq!(
        http_status(rpc::PUSH_NOTIFICATION_NOT_SUPPORTED),
        (400, "FAILED_PRECONDITION")
    );
    assert_eq!(
        http_status(rpc::UNSUPPORTED_OPERATION),
        (400, "FAILED_PRECONDITION")
    );
    assert_eq!(
        http_status(rpc::CONTENT_TYPE_NOT_SUPPORTED),
        (400, "INVALID_ARGUMENT")
    );
    assert_eq!(http_status(rpc::INVALID_AGENT_RESPONSE), (500, "INTERNAL"));
    assert_eq!(
        http_status(rpc::EXTENDED_CARD_NOT_CONFIGURED),
        (400, "FAILED_PRECONDITION")
    );
    assert_eq!(
        http_status(rpc::EXTENSION_SUPPORT_REQUIRED),
        (400, "FAILED_PRECONDITION")
    );
    assert_eq!(
        http_status(rpc::VERSION_NOT_SUPPORTED),
        (400, "FAILED_PRECONDITION")
    );
    assert_eq!(http_status(rpc::INVALID_PARAMS), (400, "INVALID_ARGUMENT"));
    assert_eq!(http_status(rpc::INVALID_REQUEST), (400, "INVALID_ARGUMENT"));
    assert_eq!(http_status(rpc::METHOD_NOT_FOUND), (404, "NOT_FOUND"));
    assert_eq!(http_status(rpc::INTERNAL_ERROR), (500, "INTERNAL"));
}

#[test]
fn every_route_works_under_a_tenant_segment() {
    let f = rest();
    let v = f.ok(
        "POST",
        "/acme/message:send",
        Some(json!({"message": msg("hi")})),
    );
    let id = v["task"]["id"].as_str().expect("id").to_string();
    assert_eq!(
        f.ok("GET", &format!("/acme/tasks/{id}"), None)["id"],
        id.as_str()
    );
    assert!(f.ok("GET", "/acme/tasks", None)["tasks"].is_array());
    let e = f.refused("POST", &format!("/acme/tasks/{id}:cancel"), None, 400);
    assert_eq!(e["details"][0]["reason"], "TASK_NOT_CANCELABLE");
    let mut s = f.rest_stream(
        "POST",
        "/acme/message:stream",
        Some(json!({"message": msg("x")})),
    );
    assert!(!f.rest_events(&mut s).is_empty());
    // Percent-encoded ids and tenants are decoded.
    let v = f.ok(
        "POST",
        "/ac%20me/message:send",
        Some(json!({"message": msg("x")})),
    );
    let spaced = v["task"]["id"].as_str().expect("id").to_string();
    assert_eq!(
        f.ok(
            "GET",
            &format!("/ac%20me/tasks/{}", spaced.replace('d', "%64")),
            None
        )["id"],
        spaced.as_str()
    );
}

#[test]
fn tenants_keep_their_tasks_apart() {
    let f = rest();
    let v = f.ok(
        "POST",
        "/acme/message:send",
        Some(json!({"message": msg("mine")})),
    );
    let id = v["task"]["id"].as_str().expect("id").to_string();
    assert_eq!(
        f.ok("GET", &format!("/acme/tasks/{id}"), None)["id"],
        id.as_str()
    );
    // Another tenant: not found, not listed, not cancelable, no stream.
    let e = f.refused("GET", &format!("/globex/tasks/{id}"), None, 404);
    assert_eq!(e["details"][0]["reason"], "TASK_NOT_FOUND");
    f.refused("POST", &format!("/globex/tasks/{id}:cancel"), None, 404);
    f.refused("GET", &format!("/globex/tasks/{id}:subscribe"), None, 404);
    assert_eq!(f.ok("GET", "/globex/tasks", None)["tasks"], json!([]));
    assert_eq!(
        f.ok("GET", "/acme/tasks", None)["tasks"]
            .as_array()
            .expect("tasks")
            .len(),
        1
    );
    // A message naming the task from another tenant cannot continue it.
    let other = f.rest(
        "POST",
        "/globex/message:send",
        Some(json!({"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": id, "parts": [{"text": "hi"}]}})),
    );
    assert_ne!(other.status, 200, "{}", other.body_snippet(300));
}

#[test]
fn the_tenant_is_on_the_card_when_configured() {
    let card = build_agent_card(
        &A2aConfig {
            tenant: Some("acme".into()),
            ..Default::default()
        },
        &[],
        "http://h:1/",
    );
    for i in card["supportedInterfaces"].as_array().expect("list") {
        assert_eq!(i["tenant"], "acme", "{i}");
    }
}

#[test]
fn percent_decoding() {
    assert_eq!(rest::percent_decode("a%20b%2Fc", false), "a b/c");
    assert_eq!(rest::percent_decode("a+b%", true), "a b%");
    assert_eq!(rest::percent_decode("%zz%4", false), "%zz%4");
    assert_eq!(rest::percent_decode("%C3%A9", false), "é");
}

#[test]
fn json_rpc_answers_the_media_type_it_was_sent() {
    let f = rest();
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#.to_vec();
    for (sent, answered) in [
        ("application/json", "application/json"),
        ("application/a2a+json", "application/a2a+json"),
    ] {
        let mut req = HttpRequest::post_json("/", body.clone());
        req.headers = vec![("Content-Type".into(), sent.into())];
        let resp = f.run(f.server.handle(req));
        assert_eq!(resp.header("Content-Type"), Some(answered), "{sent}");
    }
}

#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
#[test]
fn a_card_with_http_json_at_the_root_keeps_its_other_routes() {
    let card = json!({"name": "root", "skills": [], "capabilities": {"streaming": true},
        "supportedInterfaces": [{"url": "http://h:1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]});
    let host = Arc::new(TestHost::default());
    let store = Arc::new(Recording::default());
    let options = ServerOptions {
        card: Some(card.into()),
        ..Default::default()
    };
    let f = Fixture {
        server: A2aServer::new(options, store.clone(), host.clone(), Rules),
        host,
        store,
    };
    assert_eq!(get(&f, CARD_PATH, "GET").status, 200, "the card");
    assert_eq!(get(&f, HEALTH_PATH, "GET").status, 200, "the health check");
    let req = HttpRequest {
        method: "POST".into(),
        url: "/message:send".into(),
        headers: Vec::new(),
        body: json!({"message": msg("at the root")})
            .to_string()
            .into_bytes(),
    };
    let resp = f.run(f.server.handle(req));
    assert_eq!(resp.status, 200, "{}", resp.body_snippet(300));
    // No JSON-RPC on this card.
    let rpc = f.post(
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
    );
    assert_ne!(rpc.status, 200);
}

#[test]
fn rest_at_root_is_served_beside_json_rpc_and_the_card_says_so() {
    let config = A2aConfig {
        rest_at_root: true,
        ..Default::default()
    };
    let card = build_agent_card(&config, &[], "http://h:1/");
    let rest: Vec<&Value> = card["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter(|i| i["protocolBinding"] == "HTTP+JSON")
        .collect();
    assert_eq!(rest.len(), 2, "{card}");
    assert!(rest.iter().all(|i| i["url"] == "http://h:1/"), "{card}");
    let f = rest_fixture(config, false);
    let at = |method: &str, path: &str, body: Option<Value>| {
        let req = HttpRequest {
            method: method.into(),
            url: format!("http://h:1{path}"),
            headers: vec![("Content-Type".into(), "application/a2a+json".into())],
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        };
        f.run(f.server.handle(req))
    };
    let sent = at("POST", "/message:send", Some(json!({"message": msg("hi")})));
    assert_eq!(sent.status, 200, "{}", sent.body_snippet(300));
    let task: Value = serde_json::from_slice(&sent.body).expect("JSON");
    let id = task["task"]["id"].as_str().expect("a task").to_string();
    let got = at("GET", &format!("/tasks/{id}"), None);
    assert_eq!(got.status, 200, "{}", got.body_snippet(300));
    // JSON-RPC, the card and anything else are where they were.
    let rpc = f.post(
        Some("1.0"),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}}).to_string(),
    );
    assert_eq!(rpc.status, 200);
    let rpc: Value = serde_json::from_slice(&rpc.body).expect("JSON");
    assert_eq!(rpc["result"]["id"], id.as_str());
    assert_eq!(at("GET", CARD_PATH, None).status, 200);
    let other = at("GET", "/nothing/here", None);
    assert_eq!(other.status, 404);
    assert_ne!(other.header("Content-Type"), Some("application/a2a+json"));
}

#[test]
fn a_1_0_body_may_use_the_proto_field_names() {
    // ProtoJSON readers accept the proto names as well as the JSON names;
    // the official TCK's REST client sends `message_id`.
    let f = fixture();
    let v = f.ok(
        "POST",
        "/message:send",
        Some(
            json!({"message": {"role": "ROLE_USER", "message_id": "m-snake",
                                "parts": [{"text": "hi"}]},
                    "configuration": {"history_length": 1}}),
        ),
    );
    let history = v["task"]["history"].as_array().expect("history");
    assert_eq!(history.len(), 1, "history_length read: {v}");
    assert_eq!(history[0]["messageId"], "m-snake");
}
