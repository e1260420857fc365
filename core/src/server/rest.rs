//! The HTTP+JSON (REST) binding on the server side: a REST request is read
//! into the same call the JSON-RPC path dispatches ([`RpcRequest`]), so
//! validation, streaming, push and (later) identity behave the same for both
//! bindings; only the answer is written differently: the resource itself
//! (`application/a2a+json`), bare `StreamResponse`s over SSE, and errors as
//! a `google.rpc.Status` with the A2A 1.0.1 HTTP status.
//!
//! The routes are the proto's HTTP annotations under the mount path the card
//! names (`<base>/rest` for toolnexus hosts), each also under a
//! `/{tenant}` segment; the A2A 0.3 routes (`/v1/...`) are read as 0.3.

use super::rpc::{self, Binding, Method, RpcError, RpcRequest};
use super::stream::Reply;
use super::{A2aServer, Answered, Fulfiller, Io, ServerHost, TaskStore};
use crate::model::task::Shape;
use crate::wire::http::{HttpRequest, HttpResponse};
pub(crate) use crate::wire::rest::to_v03_stream_response;
use crate::wire::rest::{
    camel_keys, from_v03_push_config, from_v03_send, to_v03_push_config, to_v03_task,
};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The media type of A2A JSON bodies (A2A 1.0.1), sent on every REST answer.
pub const A2A_JSON: &str = "application/a2a+json";

/// The path toolnexus hosts mount the HTTP+JSON binding at, beside JSON-RPC
/// at `/` (and out of the way of a UI served at `/`).
pub const REST_PATH: &str = "/rest";

/// Which bindings a server offers (its card lists them; it serves what its
/// card lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bindings {
    pub jsonrpc: bool,
    pub rest: bool,
}

impl Default for Bindings {
    /// Both.
    fn default() -> Self {
        Bindings {
            jsonrpc: true,
            rest: true,
        }
    }
}

impl Bindings {
    /// Reads a list such as `jsonrpc,rest` (names: `jsonrpc`/`json-rpc`,
    /// `rest`/`http+json`; at least one).
    pub fn parse(list: &str) -> Result<Bindings, String> {
        let mut b = Bindings {
            jsonrpc: false,
            rest: false,
        };
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name.to_ascii_lowercase().as_str() {
                "jsonrpc" | "json-rpc" => b.jsonrpc = true,
                "rest" | "http+json" | "http" => b.rest = true,
                _ => {
                    return Err(format!(
                        "unknown binding {}: use jsonrpc, rest or both (jsonrpc,rest)",
                        crate::wire::json::quoted(name)
                    ))
                }
            }
        }
        if !b.jsonrpc && !b.rest {
            return Err("no binding named: use jsonrpc, rest or both (jsonrpc,rest)".into());
        }
        Ok(b)
    }
}

/// Where a server serves HTTP+JSON, learnt from its card.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mount {
    /// The path of the REST interface's URL, without a trailing `/` (`""`: the root).
    pub(crate) path: String,
}

/// The bindings a card lists: its `supportedInterfaces` (JSON-RPC when it
/// lists none, as older cards), and the path of its HTTP+JSON URL.
pub(crate) fn card_bindings(card: &Value) -> (bool, Option<Mount>) {
    let Some(list) = card.get("supportedInterfaces").and_then(Value::as_array) else {
        return (true, None);
    };
    let binding = |i: &Value| {
        i.get("protocolBinding")
            .or_else(|| i.get("transport"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_uppercase()
    };
    let jsonrpc = list.iter().any(|i| binding(i) == "JSONRPC");
    let rest = list
        .iter()
        .find(|i| binding(i) == "HTTP+JSON")
        .map(|i| Mount {
            path: path_part(i.get("url").and_then(Value::as_str).unwrap_or_default())
                .trim_end_matches('/')
                .to_string(),
        });
    (jsonrpc || list.is_empty(), rest)
}

/// The path of a URL (absolute or not), without query.
fn path_part(url: &str) -> &str {
    let path = match crate::wire::url::origin(url) {
        Some(o) => url.get(o.len()..).unwrap_or_default(),
        None => url,
    };
    path.split(['?', '#']).next().unwrap_or_default()
}

/// Decodes `%XX` escapes (and `+` in a query as a space).
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' => match (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            ) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    let mut text = String::new();
    crate::wire::http::push_lossy(&mut text, &out);
    text
}

/// The query parameters of a URL, decoded, in order.
fn query_pairs(url: &str) -> Vec<(String, String)> {
    let Some((_, query)) = url.split('#').next().unwrap_or_default().split_once('?') else {
        return Vec::new();
    };
    let mut pairs = Vec::new();
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for pair in query.split('&') {
        if pair.is_empty() {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        pairs.push((percent_decode(k, true), percent_decode(v, true)));
    }
    pairs
}

/// A query value as the JSON-RPC params carry it: whole numbers and
/// booleans as such for the keys that take them, text otherwise (so a bad
/// value is refused by the same check as over JSON-RPC).
fn query_value(key: &str, v: String) -> Value {
    match key {
        "historyLength" | "pageSize" => match crate::wire::http::parse_u64(&v) {
            Some(n) => Value::from(n),
            None => Value::String(v),
        },
        "includeArtifacts" => match v.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::String(v),
        },
        _ => Value::String(v),
    }
}

/// A REST request read: the call to dispatch, and how to answer.
pub(crate) struct RestCall {
    pub(crate) call: RpcRequest,
    /// The `/{tenant}` segment, if any.
    pub(crate) tenant: Option<String>,
}

/// What a path under the mount is, before its method is checked.
enum Route {
    Send,
    Stream,
    List,
    Get(String),
    Cancel(String),
    Subscribe(String),
    PushConfigs(String),
    PushConfig(String, String),
    ExtendedCard,
}

/// The route of `segments` (the path under the mount, split on `/`).
fn route_of(segments: &[&str], v03: bool) -> Option<Route> {
    let id = |s: &str| percent_decode(s, false);
    Some(match segments {
        ["message:send"] => Route::Send,
        ["message:stream"] => Route::Stream,
        ["tasks"] if !v03 => Route::List,
        ["card"] if v03 => Route::ExtendedCard,
        ["extendedAgentCard"] if !v03 => Route::ExtendedCard,
        ["tasks", t] => {
            if let Some(t) = t.strip_suffix(":cancel") {
                Route::Cancel(id(t))
            } else if let Some(t) = t.strip_suffix(":subscribe") {
                Route::Subscribe(id(t))
            } else {
                Route::Get(id(t))
            }
        }
        ["tasks", t, "pushNotificationConfigs"] => Route::PushConfigs(id(t)),
        ["tasks", t, "pushNotificationConfigs", c] => Route::PushConfig(id(t), id(c)),
        _ => return None,
    })
}

/// Why a REST request is not a call.
pub(crate) enum Refused {
    /// No such route: 404.
    NotFound,
    /// A route, not with this method: 405 and the methods it takes.
    Method(&'static str),
    /// The call is malformed (its body, its version): the error to answer.
    Error(RpcError),
}

/// Reads a request whose path is `rest` under the mount: the 1.0 routes,
/// the 0.3 ones under `/v1`, each optionally under one `/{tenant}` segment.
pub(crate) fn parse(req: &HttpRequest, rest: &str) -> Result<RestCall, Refused> {
    let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let (tenant, v03, route) = match segments.as_slice() {
        ["v1", tail @ ..] => (None, true, route_of(tail, true)),
        all => match route_of(all, false) {
            Some(r) => (None, false, Some(r)),
            None => match all {
                [tenant, "v1", tail @ ..] if !tenant.is_empty() => (
                    Some(percent_decode(tenant, false)),
                    true,
                    route_of(tail, true),
                ),
                [tenant, tail @ ..] if !tenant.is_empty() => (
                    Some(percent_decode(tenant, false)),
                    false,
                    route_of(tail, false),
                ),
                _ => (None, false, None),
            },
        },
    };
    let route = route.ok_or(Refused::NotFound)?;
    let method = req.method.as_str();
    let allow = |ok: bool, allowed: &'static str| {
        if ok {
            Ok(())
        } else {
            Err(Refused::Method(allowed))
        }
    };
    let mut params = Map::new();
    let name: &str = match &route {
        Route::Send | Route::Stream => {
            allow(method == "POST", "POST")?;
            if let Value::Object(body) = body_json(req)? {
                params = body;
            } else {
                return Err(Refused::Error(RpcError::new(
                    rpc::INVALID_REQUEST,
                    "Invalid request: the body must be a JSON object",
                )));
            }
            if v03 {
                from_v03_send(&mut params);
            } else {
                // ProtoJSON readers take the proto field names too
                // (`message_id`): the official TCK's REST client sends them.
                params = camel_object(params);
            }
            if matches!(route, Route::Send) {
                "SendMessage"
            } else {
                "SendStreamingMessage"
            }
        }
        Route::List => {
            allow(method == "GET", "GET")?;
            for (k, v) in query_pairs(&req.url) {
                let v = query_value(&k, v);
                params.insert(k, v);
            }
            "ListTasks"
        }
        Route::Get(id) => {
            allow(method == "GET", "GET")?;
            for (k, v) in query_pairs(&req.url) {
                if k == "historyLength" || k == "history_length" {
                    params.insert("historyLength".into(), query_value("historyLength", v));
                }
            }
            params.insert("id".into(), id.as_str().into());
            "GetTask"
        }
        Route::Cancel(id) => {
            allow(method == "POST", "POST")?;
            // A body may carry metadata; the id is the path's.
            if let Ok(Value::Object(body)) = body_json(req) {
                params = body;
            }
            params.insert("id".into(), id.as_str().into());
            "CancelTask"
        }
        Route::Subscribe(id) => {
            allow(matches!(method, "GET" | "POST"), "GET, POST")?;
            params.insert("id".into(), id.as_str().into());
            "SubscribeToTask"
        }
        Route::PushConfigs(task) => match method {
            "POST" => {
                let body = body_json(req)?;
                // 0.3: the body is `{name?, pushNotificationConfig}` (or the
                // bare config); 1.0: the flat config.
                // (The Python SDK's sends the whole proto request,
                // `{parent, config_id, config: {name, push_notification_config}}`.)
                let body = match (v03, body) {
                    (true, mut b) => {
                        camel_keys(&mut b);
                        for key in ["config", "pushNotificationConfig"] {
                            if let Some(inner) = b.as_object_mut().and_then(|o| o.remove(key)) {
                                b = inner;
                            }
                        }
                        from_v03_push_config(b)
                    }
                    (false, mut b) => {
                        camel_keys(&mut b);
                        b
                    }
                };
                if let Value::Object(b) = body {
                    params = b;
                }
                params.insert("taskId".into(), task.as_str().into());
                "CreateTaskPushNotificationConfig"
            }
            "GET" => {
                params.insert("taskId".into(), task.as_str().into());
                "ListTaskPushNotificationConfigs"
            }
            _ => return Err(Refused::Method("GET, POST")),
        },
        Route::PushConfig(task, config) => {
            params.insert("taskId".into(), task.as_str().into());
            params.insert("id".into(), config.as_str().into());
            match method {
                "GET" => "GetTaskPushNotificationConfig",
                "DELETE" => "DeleteTaskPushNotificationConfig",
                _ => return Err(Refused::Method("GET, DELETE")),
            }
        }
        Route::ExtendedCard => {
            allow(method == "GET", "GET")?;
            "GetExtendedAgentCard"
        }
    };
    // The version: the request's `A2A-Version`, else the route's (the
    // official TCK's REST client names none).
    let named = match rpc::requested_version(req).map(str::trim) {
        None | Some("") => None,
        Some(v) => Some(rpc::version_shape(v).ok_or_else(|| {
            Refused::Error(RpcError::new(
                rpc::VERSION_NOT_SUPPORTED,
                format!("A2A version {v} is not supported (use 1.0 or 0.3)"),
            ))
        })?),
    };
    // A 0.3 route is answered in the 0.3 proto's JSON, converted from the
    // 1.0 answer: the call itself is dispatched as 1.0. (The Python SDK's
    // 0.3 REST client sends `A2A-Version: 1.0` on the /v1 routes: the route
    // decides there.)
    if !v03 && named == Some(Shape::V03) {
        return Err(Refused::Error(RpcError::new(
            rpc::VERSION_NOT_SUPPORTED,
            format!(
                "A2A version {} is not served at this route (the /v1 routes are 0.3, the others 1.0)",
                rpc::requested_version(req).unwrap_or_default().trim()
            ),
        )));
    }
    Ok(RestCall {
        call: RpcRequest {
            id: Value::Null,
            method: name.into(),
            params: Value::Object(params),
            shape: Shape::V10,
            // The route names its dialect.
            versioned: true,
            binding: if v03 { Binding::Rest03 } else { Binding::Rest },
        },
        tenant: tenant.filter(|t| !t.is_empty()),
    })
}

/// The request body as JSON: an empty body is `{}`.
/// `params` with lowerCamelCase keys (see [`camel_keys`]).
fn camel_object(params: Map<String, Value>) -> Map<String, Value> {
    let mut v = Value::Object(params);
    camel_keys(&mut v);
    match v {
        Value::Object(p) => p,
        _ => Map::new(),
    }
}

fn body_json(req: &HttpRequest) -> Result<Value, Refused> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_slice(&req.body).map_err(|e| {
        Refused::Error(RpcError::new(
            rpc::PARSE_ERROR,
            format!("the body is not JSON: {e}"),
        ))
    })
}

/// The HTTP status and `google.rpc.Code` name of an error code (A2A 1.0.1).
pub fn http_status(code: i64) -> (u16, &'static str) {
    match code {
        rpc::TASK_NOT_FOUND | rpc::METHOD_NOT_FOUND => (404, "NOT_FOUND"),
        rpc::TASK_NOT_CANCELABLE
        | rpc::PUSH_NOTIFICATION_NOT_SUPPORTED
        | rpc::UNSUPPORTED_OPERATION
        | rpc::EXTENDED_CARD_NOT_CONFIGURED
        | rpc::EXTENSION_SUPPORT_REQUIRED
        | rpc::VERSION_NOT_SUPPORTED => (400, "FAILED_PRECONDITION"),
        rpc::CONTENT_TYPE_NOT_SUPPORTED
        | rpc::INVALID_PARAMS
        | rpc::INVALID_REQUEST
        | rpc::PARSE_ERROR => (400, "INVALID_ARGUMENT"),
        _ => (500, "INTERNAL"),
    }
}

/// An error as HTTP+JSON answers it: the `google.rpc.Status` JSON,
/// `{"error": {code, status, message, details: [ErrorInfo, BadRequest?]}}`.
pub fn error_response(e: &RpcError) -> HttpResponse {
    error_body(e, false)
}

/// [`error_response`], and on the 0.3 routes (`v03`) also what the SDKs'
/// 0.3 REST clients read at the top: the JSON-RPC `code` and `message`
/// (@a2a-js/sdk) and the error class `type` (a2a-sdk, e.g.
/// `TaskNotCancelableError`), so that both raise their typed errors.
fn error_body(e: &RpcError, v03: bool) -> HttpResponse {
    #[derive(serde::Serialize)]
    struct Status<'a> {
        code: u16,
        status: &'static str,
        message: &'a str,
        details: rpc::ErrorDetails<'a>,
    }
    #[derive(serde::Serialize)]
    struct Body<'a> {
        error: Status<'a>,
    }
    let (code, status) = http_status(e.code);
    let mut body = serde_json::to_vec(&Body {
        error: Status {
            code,
            status,
            message: &e.message,
            details: e.details(),
        },
    })
    .unwrap_or_default();
    if v03 && body.pop() == Some(b'}') {
        for piece in [
            ",\"code\":",
            &crate::wire::json::text(&Value::from(e.code)),
            ",\"message\":",
            &crate::wire::json::quoted(&e.message),
            ",\"type\":\"",
            &class_name(rpc::reason(e.code)),
            "\"}",
        ] {
            body.extend_from_slice(piece.as_bytes());
        }
    }
    a2a_json(code, body)
}

/// `TASK_NOT_FOUND` as a2a-sdk names its error class: `TaskNotFoundError`
/// (bytes, not `str` patterns: no string searcher in the `.wasm`).
pub(crate) fn class_name(reason: &str) -> String {
    let reason = reason.strip_suffix("_ERROR").unwrap_or(reason);
    let mut out = String::with_capacity(reason.len() + 5);
    let mut upper = true;
    for b in reason.bytes() {
        if b == b'_' {
            upper = true;
            continue;
        }
        out.push(char::from(if upper { b } else { b.to_ascii_lowercase() }));
        upper = false;
    }
    out.push_str("Error");
    out
}

/// An authentication refusal (401/403) as HTTP+JSON answers it: the
/// `google.rpc.Status` (`UNAUTHENTICATED`, `PERMISSION_DENIED`) with the
/// JSON-RPC refusal's challenges.
fn refused(auth: &super::auth::AuthConfig, refusal: &super::verify::Refusal) -> HttpResponse {
    let rpc = super::verify::refusal_response(auth, refusal, true);
    let status = if rpc.status == 403 {
        "PERMISSION_DENIED"
    } else {
        "UNAUTHENTICATED"
    };
    let message = serde_json::from_slice::<Value>(&rpc.body)
        .ok()
        .and_then(|v| v.get("error")?.get("message")?.as_str().map(str::to_string))
        .unwrap_or_default();
    let body = crate::wire::json::object([(
        "error",
        crate::wire::json::object([
            ("code", rpc.status.into()),
            ("status", status.into()),
            ("message", message.into()),
            (
                "details",
                Value::Array(vec![crate::wire::json::object([
                    ("@type", "type.googleapis.com/google.rpc.ErrorInfo".into()),
                    ("reason", status.into()),
                    ("domain", "a2a-protocol.org".into()),
                    ("metadata", Value::Object(Map::new())),
                ])]),
            ),
        ]),
    )]);
    let mut resp = a2a_json(rpc.status, crate::wire::json::text(&body).into_bytes());
    resp.headers.extend(
        rpc.headers
            .into_iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("WWW-Authenticate")),
    );
    resp
}

/// A response with an `application/a2a+json` body.
pub fn a2a_json(status: u16, body: Vec<u8>) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("Content-Type".into(), A2A_JSON.into())],
        body,
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// Answers a request under the REST mount (`rest` is the path below
    /// it); `None` for a path that is no route when the mount is the root
    /// (the card, the health check and the rest are answered as before).
    pub(super) async fn rest(
        self: &Arc<Self>,
        io: &Io<H>,
        req: &HttpRequest,
        rest: &str,
    ) -> Option<Reply> {
        let at_root = self.rest.as_ref().is_some_and(|m| m.path.is_empty());
        if at_root && matches!(parse(req, rest), Err(Refused::NotFound)) {
            return None;
        }
        Some(self.rest_call(io, req, rest).await)
    }

    async fn rest_call(self: &Arc<Self>, io: &Io<H>, req: &HttpRequest, rest: &str) -> Reply {
        let call = match parse(req, rest) {
            Ok(call) => call,
            Err(Refused::NotFound) => {
                return Reply::Full(error_response(&RpcError::new(
                    rpc::METHOD_NOT_FOUND,
                    format!(
                        "no HTTP+JSON route {} {}",
                        req.method,
                        super::path_of(&req.url)
                    ),
                )))
            }
            Err(Refused::Method(allowed)) => {
                let mut r = error_response(&RpcError::new(
                    rpc::METHOD_NOT_FOUND,
                    format!("{} is not allowed here (allowed: {allowed})", req.method),
                ));
                r.status = 405;
                r.headers.push(("Allow".into(), allowed.into()));
                return Reply::Full(r);
            }
            Err(Refused::Error(e)) => return Reply::Full(error_response(&e)),
        };
        let RestCall { call, tenant } = call;
        let v03 = call.binding == Binding::Rest03;
        // The authentication step, as for JSON-RPC; a refusal is a
        // google.rpc.Status with the same status and challenges.
        let principal = match &self.auth {
            None => None,
            Some(auth) => match super::verify::authenticate(io, auth, &self.host, req).await {
                Ok(principal) => Some(principal.owner()),
                Err(refusal) => return Reply::Full(refused(auth, &refusal)),
            },
        };
        // A tenant keeps its tasks apart: it is part of the owner of what is
        // made under it, so another tenant (or the same caller under
        // another tenant) sees none of them.
        let owner = match (principal, tenant) {
            (p, Some(t)) => Some(format!("{}\u{1f}tenant\u{1f}{t}", p.unwrap_or_default())),
            (p, None) => p,
        };
        let caller = owner.map(|owner| super::Caller { owner });
        let caller = caller.as_ref();
        let method = Method::from_name(&call.method);
        if method.is_some_and(Method::streams) {
            return match self
                .stream_call(io, call, caller.map(|c| c.owner.as_str()), req)
                .await
            {
                Ok(reply) => reply,
                Err(e) => Reply::Full(error_body(&e, v03)),
            };
        }
        let (outcome, waited) = match self.long_poll(req, method == Some(Method::Get)) {
            Some((secs, at)) => (
                self.get_task_waiting(io, &call, at, caller.map(|c| c.owner.as_str()))
                    .await
                    .map(Answered::Task),
                Some(secs),
            ),
            None => (self.dispatch(io, call, caller, req).await, None),
        };
        let mut resp = match outcome {
            Ok(result) if v03 => {
                // Written as bytes and read back, not `to_value`: that would
                // instantiate every answer type's `Serialize` a second time,
                // for serde_json's `Value` serializer (a few KB of the npm
                // `.wasm`) on a path only 0.3 REST clients take.
                let mut v = reparse(serde_json::to_vec(&result).unwrap_or_default());
                to_v03_answer(&mut v);
                a2a_json(200, crate::wire::json::text(&v).into_bytes())
            }
            Ok(result) => a2a_json(200, serde_json::to_vec(&result).unwrap_or_default()),
            Err(e) => error_body(&e, v03),
        };
        if let Some(secs) = waited {
            resp.headers
                .push(("Preference-Applied".into(), format!("wait={secs}")));
        }
        Reply::Full(resp)
    }
}

/// JSON text we just wrote, as a `Value` (see the 0.3 answer above).
pub(crate) fn reparse(json: Vec<u8>) -> Value {
    serde_json::from_slice(&json).unwrap_or_default()
}

/// A 1.0 answer (a task, a send response, a config or their list) as the
/// 0.3 proto writes it.
fn to_v03_answer(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    if o.contains_key("task") || o.contains_key("message") {
        to_v03_stream_response(v);
    } else if o.contains_key("status") {
        to_v03_task(v);
    } else if let Some(Value::Array(list)) = o.get_mut("configs") {
        list.iter_mut().for_each(to_v03_push_config);
    } else if o.contains_key("url") {
        to_v03_push_config(v);
    }
}
