//! The HTTP+JSON (REST) binding on the wire, for both halves: the client's
//! requests (the proto's HTTP routes under an interface URL, which carries
//! the tenant as its last path segment), its answers and `google.rpc.Status`
//! errors read back into the errors the JSON-RPC path gives, and the A2A 0.3
//! shapes (the JSON of the 0.3 proto, served under `/v1`) converted to and
//! from 1.0's.

use crate::error::{Error, Reason};
use crate::wire::http::{HttpRequest, HttpResponse};
use crate::wire::json::{object, text};
use crate::wire::rpc::{Dialect, MessageRefs, Method, SendMode};
use serde_json::{Map, Value};

/// The media type of A2A JSON bodies (A2A 1.0.1).
pub const A2A_JSON: &str = "application/a2a+json";

/// Which binding to prefer for an agent whose card lists both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// JSON-RPC (the default preference), then HTTP+JSON.
    JsonRpc,
    /// HTTP+JSON, then JSON-RPC.
    Rest,
}

impl Binding {
    /// `jsonrpc` / `json-rpc`, or `rest` / `http+json`.
    pub fn parse(name: &str) -> Option<Binding> {
        match name.trim().to_ascii_lowercase().as_str() {
            "jsonrpc" | "json-rpc" => Some(Binding::JsonRpc),
            "rest" | "http+json" | "http" => Some(Binding::Rest),
            _ => None,
        }
    }
}

/// `s` with every byte but the unreserved ones percent-encoded (a path segment).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            for nibble in [b >> 4, b & 15] {
                out.push(
                    char::from_digit(u32::from(nibble), 16)
                        .unwrap_or('0')
                        .to_ascii_uppercase(),
                );
            }
        }
    }
    out
}

/// The base URL of requests to an HTTP+JSON interface: its URL, and the
/// tenant as one more path segment when the card names one.
pub fn base_url(url: &str, tenant: Option<&str>) -> String {
    let url = url.trim_end_matches('/');
    match tenant.filter(|t| !t.is_empty()) {
        Some(t) => format!("{url}/{}", encode_segment(t)),
        None => url.to_string(),
    }
}

fn rest_request(dialect: Dialect, method: &str, url: String, body: Option<Value>) -> HttpRequest {
    let v03 = dialect == Dialect::Rest03;
    let mut req = HttpRequest {
        method: method.into(),
        url,
        headers: Vec::new(),
        body: Vec::new(),
    };
    if let Some(body) = body {
        req.body = text(&body).into_bytes();
        // 0.3 servers predate the A2A media type.
        let ct = if v03 { "application/json" } else { A2A_JSON };
        req.headers.push(("Content-Type".into(), ct.into()));
    }
    req.headers
        .push(("A2A-Version".into(), if v03 { "0.3" } else { "1.0" }.into()));
    req
}

/// The path of an operation under the base (`/v1` first for 0.3).
fn path(dialect: Dialect, base: &str, tail: &str) -> String {
    if dialect == Dialect::Rest03 {
        format!("{base}/v1{tail}")
    } else {
        format!("{base}{tail}")
    }
}

/// A SendMessage (`POST /message:send`) or, for a stream, `POST /message:stream`.
pub(crate) fn send(
    dialect: Dialect,
    base: &str,
    message_id: &str,
    text_: &str,
    mode: SendMode,
    refs: &MessageRefs,
) -> HttpRequest {
    let mut message = Map::new();
    message.insert("messageId".into(), message_id.into());
    message.insert("role".into(), "ROLE_USER".into());
    let part = Value::Array(vec![object([("text", text_.into())])]);
    let parts_key = if dialect == Dialect::Rest03 {
        "content"
    } else {
        "parts"
    };
    message.insert(parts_key.into(), part);
    for (key, id) in [("taskId", &refs.task_id), ("contextId", &refs.context_id)] {
        if let Some(id) = id {
            message.insert(key.into(), Value::String(id.clone()));
        }
    }
    let mut body = object([("message", Value::Object(message))]);
    let configuration = match (dialect, mode) {
        (_, SendMode::Stream) => None,
        (Dialect::Rest03, m) => Some(object([("blocking", (m == SendMode::Blocking).into())])),
        (_, SendMode::NonBlocking) => Some(object([("returnImmediately", true.into())])),
        _ => None,
    };
    if let (Some(c), Some(o)) = (configuration, body.as_object_mut()) {
        o.insert("configuration".into(), c);
    }
    let tail = if mode == SendMode::Stream {
        "/message:stream"
    } else {
        "/message:send"
    };
    let req = rest_request(dialect, "POST", path(dialect, base, tail), Some(body));
    if mode == SendMode::Stream {
        req.with_header("Accept", crate::wire::sse::CONTENT_TYPE)
    } else {
        req
    }
}

/// A task operation: GetTask (`GET /tasks/{id}`), CancelTask (`POST
/// /tasks/{id}:cancel`), SubscribeToTask (`GET /tasks/{id}:subscribe`, SSE).
pub(crate) fn task_op(dialect: Dialect, base: &str, op: Method, task_id: &str) -> HttpRequest {
    let id = encode_segment(task_id);
    match op {
        Method::Cancel => rest_request(
            dialect,
            "POST",
            path(dialect, base, &format!("/tasks/{id}:cancel")),
            Some(object([])),
        ),
        Method::Subscribe => {
            // The 0.3 proto subscribes with GET too; the SDKs serve both.
            rest_request(
                dialect,
                "GET",
                path(dialect, base, &format!("/tasks/{id}:subscribe")),
                None,
            )
            .with_header("Accept", crate::wire::sse::CONTENT_TYPE)
        }
        _ => rest_request(
            dialect,
            "GET",
            path(dialect, base, &format!("/tasks/{id}")),
            None,
        ),
    }
}

/// ListTasks (`GET /tasks?…`) with `params` (strings, numbers, booleans) as the query.
pub(crate) fn list(base: &str, params: &Value) -> HttpRequest {
    let mut query = String::new();
    if let Some(o) = params.as_object() {
        for (k, v) in o {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => text(other),
            };
            query.push(if query.is_empty() { '?' } else { '&' });
            query.push_str(&encode_segment(k));
            query.push('=');
            query.push_str(&encode_segment(&v));
        }
    }
    rest_request(Dialect::Rest10, "GET", format!("{base}/tasks{query}"), None)
}

/// The A2A error code of a `google.rpc.Status`: its `ErrorInfo` reason,
/// else its status name, else its HTTP code.
fn status_code(err: &Value, http: u16) -> i64 {
    use crate::wire::rpc as c;
    let mut reason = None;
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for d in err
        .get("details")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        if let Some(r) = d.get("reason").and_then(Value::as_str) {
            reason = Some(r);
            break;
        }
    }
    let by_reason = reason.and_then(|r| {
        Some(match r {
            "TASK_NOT_FOUND" => c::TASK_NOT_FOUND,
            "TASK_NOT_CANCELABLE" => c::TASK_NOT_CANCELABLE,
            "PUSH_NOTIFICATION_NOT_SUPPORTED" => c::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "UNSUPPORTED_OPERATION" => c::UNSUPPORTED_OPERATION,
            "CONTENT_TYPE_NOT_SUPPORTED" => c::CONTENT_TYPE_NOT_SUPPORTED,
            "INVALID_AGENT_RESPONSE" => c::INVALID_AGENT_RESPONSE,
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED" => c::EXTENDED_CARD_NOT_CONFIGURED,
            "EXTENSION_SUPPORT_REQUIRED" => c::EXTENSION_SUPPORT_REQUIRED,
            "VERSION_NOT_SUPPORTED" => c::VERSION_NOT_SUPPORTED,
            "INVALID_PARAMS" => c::INVALID_PARAMS,
            "INVALID_REQUEST" => c::INVALID_REQUEST,
            "METHOD_NOT_FOUND" => c::METHOD_NOT_FOUND,
            "PARSE_ERROR" => c::PARSE_ERROR,
            "INTERNAL_ERROR" => c::INTERNAL_ERROR,
            _ => return None,
        })
    });
    if let Some(code) = by_reason {
        return code;
    }
    // A JSON-RPC-style numeric code some servers put there.
    if let Some(code) = err.get("code").and_then(Value::as_i64).filter(|c| *c < 0) {
        return code;
    }
    match (err.get("status").and_then(Value::as_str), http) {
        (Some("NOT_FOUND"), _) | (None, 404) => c::TASK_NOT_FOUND,
        (Some("INVALID_ARGUMENT"), _) | (None, 400) => c::INVALID_PARAMS,
        (Some("FAILED_PRECONDITION"), _) => c::UNSUPPORTED_OPERATION,
        (Some("UNIMPLEMENTED"), _) | (None, 405 | 501) => c::METHOD_NOT_FOUND,
        _ => c::INTERNAL_ERROR,
    }
}

/// An error body `{"error": {…}}` read as [`Error::Rpc`].
fn rest_error(err: &Value, http: u16) -> Error {
    Error::Rpc {
        code: status_code(err, http),
        message: crate::wire::http::snippet(
            err.get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)"),
            crate::wire::http::MAX_PEER_TEXT,
        ),
    }
}

/// Reads an HTTP+JSON answer: the resource (0.3 shapes converted to 1.0),
/// or the peer's error as the JSON-RPC path would give it.
pub(crate) fn parse_reply(
    dialect: Dialect,
    resp: &HttpResponse,
    url: &str,
) -> Result<Value, Error> {
    let status_error = || Error::Status {
        status: resp.status,
        url: url.to_string(),
        body: resp.body_snippet(200),
    };
    let v = match serde_json::from_slice::<Value>(&resp.body) {
        Ok(v) => v,
        Err(_) if !resp.is_success() => return Err(status_error()),
        Err(e) => {
            return Err(Error::Malformed(Reason::with_source(
                format!(
                    "the reply from {url} is not JSON: {}",
                    resp.body_snippet(200)
                ),
                e,
            )))
        }
    };
    read_value(dialect, v, resp.status).map_err(|e| match e {
        Some(e) => e,
        None => status_error(),
    })
}

/// One answer or stream event: the resource, or its error (`None`: an
/// error status with a body that says nothing).
fn read_value(dialect: Dialect, mut v: Value, http: u16) -> Result<Value, Option<Error>> {
    if let Some(err) = v.get("error").filter(|e| e.is_object()) {
        return Err(Some(rest_error(err, http)));
    }
    if !(200..300).contains(&http) {
        // The JS SDK's 0.3 REST error: the JSON-RPC code at the top,
        // `{"code": -32001, "message": …}`.
        return Err(v
            .get("code")
            .and_then(Value::as_i64)
            .is_some_and(|c| c < 0)
            .then(|| rest_error(&v, http)));
    }
    if dialect == Dialect::Rest03 {
        from_v03_answer(&mut v);
    }
    Ok(v)
}

/// Reads one SSE event's data of an HTTP+JSON stream: a `StreamResponse`, or an error.
pub(crate) fn parse_event(dialect: Dialect, v: Value) -> Result<Value, Error> {
    read_value(dialect, v, 200).map_err(|e| e.unwrap_or_else(|| Error::malformed("a stream error")))
}

/// A 0.3 proto answer (a task, a `SendMessageResponse` or a `StreamResponse`) in 1.0 shapes.
fn from_v03_answer(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    if let Some(t) = o.get_mut("task") {
        from_v03_task(t);
    } else if let Some(m) = o.get_mut("message") {
        from_v03_message(m);
    } else if let Some(u) = o.get_mut("statusUpdate") {
        if let Some(m) = u.get_mut("status").and_then(|s| s.get_mut("message")) {
            from_v03_message(m);
        }
    } else if let Some(Value::Array(parts)) = o
        .get_mut("artifactUpdate")
        .and_then(|u| u.get_mut("artifact"))
        .and_then(|a| a.get_mut("parts"))
    {
        parts.iter_mut().for_each(from_v03_part);
    } else if o.contains_key("status") {
        from_v03_task(v);
    }
}

fn from_v03_task(t: &mut Value) {
    let Some(o) = t.as_object_mut() else { return };
    if let Some(m) = o.get_mut("status").and_then(|s| s.get_mut("message")) {
        from_v03_message(m);
    }
    if let Some(Value::Array(h)) = o.get_mut("history") {
        h.iter_mut().for_each(from_v03_message);
    }
    if let Some(Value::Array(list)) = o.get_mut("artifacts") {
        for a in list {
            if let Some(Value::Array(parts)) = a.get_mut("parts") {
                parts.iter_mut().for_each(from_v03_part);
            }
        }
    }
}
// The A2A 0.3 HTTP+JSON shapes: the JSON of the 0.3 proto, which differs
// from 1.0's in a few names. Calls on the `/v1` routes are read into 1.0
// shapes and their answers written back.

/// A 0.3 proto part (`{text}`, `{file: {fileWithUri|fileWithBytes,
/// mimeType, name}}`, `{data: {data}}`) as a 1.0 part.
pub(crate) fn from_v03_part(p: &mut Value) {
    let Some(o) = p.as_object_mut() else { return };
    if let Some(Value::Object(mut file)) = o.remove("file") {
        for (from, to) in [
            ("fileWithUri", "url"),
            ("fileWithBytes", "raw"),
            ("mimeType", "mediaType"),
            ("name", "filename"),
        ] {
            if let Some(v) = file.remove(from) {
                o.insert(to.into(), v);
            }
        }
    }
    if let Some(Value::Object(d)) = o.get_mut("data") {
        if let Some(inner) = d.remove("data") {
            o.insert("data".into(), inner);
        }
    }
}

#[cfg(feature = "server")]
/// A 1.0 part as the 0.3 proto writes it.
pub(crate) fn to_v03_part(p: &mut Value) {
    let Some(o) = p.as_object_mut() else { return };
    let mut file = Map::new();
    for (from, to) in [
        ("url", "fileWithUri"),
        ("raw", "fileWithBytes"),
        ("mediaType", "mimeType"),
        ("filename", "name"),
    ] {
        if let Some(v) = o.remove(from) {
            file.insert(to.into(), v);
        }
    }
    if file.contains_key("fileWithUri") || file.contains_key("fileWithBytes") {
        o.insert("file".into(), Value::Object(file));
    }
    if let Some(d) = o.remove("data") {
        let mut inner = Map::new();
        inner.insert("data".into(), d);
        o.insert("data".into(), Value::Object(inner));
    }
}

/// A 0.3 proto message (`content`) as a 1.0 one (`parts`).
pub(crate) fn from_v03_message(m: &mut Value) {
    let Some(o) = m.as_object_mut() else { return };
    if let Some(mut content) = o.remove("content") {
        if let Some(parts) = content.as_array_mut() {
            parts.iter_mut().for_each(from_v03_part);
        }
        o.insert("parts".into(), content);
    }
}

#[cfg(feature = "server")]
pub(crate) fn to_v03_message(m: &mut Value) {
    let Some(o) = m.as_object_mut() else { return };
    if let Some(mut parts) = o.remove("parts") {
        if let Some(list) = parts.as_array_mut() {
            list.iter_mut().for_each(to_v03_part);
        }
        o.insert("content".into(), parts);
    }
}

#[cfg(feature = "server")]
/// The proto JSON's field names in lowerCamelCase: protobuf readers take
/// either, and the Python SDK's 0.3 REST client sends the snake_case names
/// (`message_id`) and `request` for `message`. The keys of `metadata` and
/// `data` values are the caller's, left as they are.
pub(crate) fn camel_keys(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let keys: Vec<String> = o.keys().cloned().collect();
            for k in keys {
                let Some(mut inner) = o.remove(&k) else {
                    continue;
                };
                if k != "metadata" && k != "data" {
                    camel_keys(&mut inner);
                }
                let mut camel = String::with_capacity(k.len());
                let mut up = false;
                for c in k.chars() {
                    if c == '_' {
                        up = true;
                    } else if up {
                        camel.push(c.to_ascii_uppercase());
                        up = false;
                    } else {
                        camel.push(c);
                    }
                }
                o.insert(camel, inner);
            }
        }
        Value::Array(list) => list.iter_mut().for_each(camel_keys),
        _ => {}
    }
}

#[cfg(feature = "server")]
/// A 0.3 SendMessage body read into 1.0 params.
pub(crate) fn from_v03_send(params: &mut Map<String, Value>) {
    for v in params.values_mut() {
        camel_keys(v);
    }
    if let Some(m) = params.remove("request") {
        params.entry("message").or_insert(m);
    }
    if let Some(m) = params.get_mut("message") {
        from_v03_message(m);
    }
    if let Some(Value::Object(c)) = params.get_mut("configuration") {
        if let Some(p) = c.remove("pushNotification") {
            c.insert("taskPushNotificationConfig".into(), from_v03_push_config(p));
        }
    }
}

#[cfg(feature = "server")]
/// A 0.3 push config (`authentication.schemes`) as a 1.0 one.
pub(crate) fn from_v03_push_config(mut c: Value) -> Value {
    camel_keys(&mut c);
    if let Some(Value::Object(a)) = c.get_mut("authentication") {
        if let Some(Value::Array(schemes)) = a.remove("schemes") {
            if let Some(first) = schemes.into_iter().next() {
                a.insert("scheme".into(), first);
            }
        }
    }
    c
}

#[cfg(feature = "server")]
/// A 1.0 push config as the 0.3 proto's `TaskPushNotificationConfig`:
/// `{name: tasks/T/pushNotificationConfigs/C, pushNotificationConfig}`.
pub(crate) fn to_v03_push_config(c: &mut Value) {
    let Some(o) = c.as_object_mut() else { return };
    let task = o.remove("taskId");
    if let Some(Value::Object(a)) = o.get_mut("authentication") {
        if let Some(s) = a.remove("scheme") {
            a.insert("schemes".into(), Value::Array(vec![s]));
        }
    }
    let id = o.get("id").and_then(Value::as_str).unwrap_or_default();
    let name = format!(
        "tasks/{}/pushNotificationConfigs/{id}",
        task.as_ref().and_then(Value::as_str).unwrap_or_default()
    );
    let config = Value::Object(std::mem::take(o));
    o.insert("name".into(), name.into());
    o.insert("pushNotificationConfig".into(), config);
}

#[cfg(feature = "server")]
/// A 1.0 status as the 0.3 proto's: `TASK_STATE_CANCELLED`, its message's `content`.
pub(crate) fn to_v03_status(s: &mut Value) {
    let Some(o) = s.as_object_mut() else { return };
    if o.get("state").and_then(Value::as_str) == Some("TASK_STATE_CANCELED") {
        o.insert("state".into(), "TASK_STATE_CANCELLED".into());
    }
    if let Some(m) = o.get_mut("message") {
        to_v03_message(m);
    }
}

#[cfg(feature = "server")]
pub(crate) fn to_v03_task(t: &mut Value) {
    let Some(o) = t.as_object_mut() else { return };
    if let Some(s) = o.get_mut("status") {
        to_v03_status(s);
    }
    if let Some(Value::Array(h)) = o.get_mut("history") {
        h.iter_mut().for_each(to_v03_message);
    }
    if let Some(Value::Array(list)) = o.get_mut("artifacts") {
        for a in list {
            if let Some(Value::Array(parts)) = a.get_mut("parts") {
                parts.iter_mut().for_each(to_v03_part);
            }
        }
    }
}

#[cfg(feature = "server")]
/// A 1.0 `StreamResponse` (or `SendMessageResponse`) as the 0.3 proto's.
pub(crate) fn to_v03_stream_response(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    if let Some(t) = o.get_mut("task") {
        to_v03_task(t);
    }
    if let Some(m) = o.get_mut("message") {
        to_v03_message(m);
    }
    if let Some(Value::Object(u)) = o.get_mut("statusUpdate") {
        let state = u
            .get("status")
            .and_then(|s| s.get("state"))
            .and_then(Value::as_str)
            .map(crate::model::task::TaskState::parse);
        // 0.3 marks the last event of a stream.
        let last = state.is_some_and(|s| s.is_terminal() || s.is_interrupted());
        u.insert("final".into(), last.into());
        if let Some(s) = u.get_mut("status") {
            to_v03_status(s);
        }
    }
    if let Some(Value::Object(u)) = o.get_mut("artifactUpdate") {
        if let Some(Value::Array(parts)) = u.get_mut("artifact").and_then(|a| a.get_mut("parts")) {
            parts.iter_mut().for_each(to_v03_part);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn body(req: &HttpRequest) -> Value {
        serde_json::from_slice(&req.body).expect("json body")
    }

    #[test]
    fn the_tenant_is_one_encoded_path_segment() {
        assert_eq!(
            base_url("http://h/rest/", Some("acme")),
            "http://h/rest/acme"
        );
        assert_eq!(
            base_url("http://h/rest", Some("a b/c")),
            "http://h/rest/a%20b%2Fc"
        );
        assert_eq!(base_url("http://h/rest", Some("")), "http://h/rest");
        assert_eq!(base_url("http://h", None), "http://h");
    }

    #[test]
    fn requests_follow_the_proto_routes() {
        let refs = MessageRefs {
            task_id: Some("t1".into()),
            context_id: None,
        };
        let send = Dialect::Rest10.send_in("http://h/r", 1, "m1", "hi", SendMode::Blocking, &refs);
        assert_eq!(
            (send.method.as_str(), send.url.as_str()),
            ("POST", "http://h/r/message:send")
        );
        assert_eq!(send.header("Content-Type"), Some(A2A_JSON));
        assert_eq!(send.header("A2A-Version"), Some("1.0"));
        assert_eq!(
            body(&send),
            json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}], "taskId": "t1"}})
        );
        let none = MessageRefs::default();
        let nb = Dialect::Rest10.send_in("http://h/r", 1, "m1", "hi", SendMode::NonBlocking, &none);
        assert_eq!(
            body(&nb)["configuration"],
            json!({"returnImmediately": true})
        );
        let stream = Dialect::Rest10.send_in("http://h/r", 1, "m1", "hi", SendMode::Stream, &none);
        assert_eq!(stream.url, "http://h/r/message:stream");
        assert_eq!(stream.header("Accept"), Some("text/event-stream"));

        let get = Dialect::Rest10.get_task("http://h/r", 1, "a/b");
        assert_eq!(
            (get.method.as_str(), get.url.as_str()),
            ("GET", "http://h/r/tasks/a%2Fb")
        );
        assert!(get.body.is_empty());
        let cancel = Dialect::Rest10.cancel_task("http://h/r", 1, "t");
        assert_eq!(
            (cancel.method.as_str(), cancel.url.as_str()),
            ("POST", "http://h/r/tasks/t:cancel")
        );
        let sub = Dialect::Rest10.subscribe("http://h/r", 1, "t");
        assert_eq!(
            (sub.method.as_str(), sub.url.as_str()),
            ("GET", "http://h/r/tasks/t:subscribe")
        );

        // 0.3: the /v1 routes, `content`, `blocking`.
        let s03 = Dialect::Rest03.send_in("http://h/r", 1, "m1", "hi", SendMode::Blocking, &none);
        assert_eq!(s03.url, "http://h/r/v1/message:send");
        assert_eq!(s03.header("A2A-Version"), Some("0.3"));
        assert_eq!(s03.header("Content-Type"), Some("application/json"));
        assert_eq!(body(&s03)["message"]["content"], json!([{"text": "hi"}]));
        assert_eq!(body(&s03)["configuration"], json!({"blocking": true}));
        assert_eq!(
            Dialect::Rest03.get_task("http://h/r", 1, "t").url,
            "http://h/r/v1/tasks/t"
        );

        let listed = list(
            "http://h/r",
            &json!({"pageSize": 100, "contextId": "c 1", "includeArtifacts": true}),
        );
        assert_eq!(
            listed.url,
            "http://h/r/tasks?pageSize=100&contextId=c%201&includeArtifacts=true"
        );
    }

    fn answer(status: u16, v: Value) -> HttpResponse {
        HttpResponse::json(status, text(&v).into_bytes())
    }

    #[test]
    fn answers_and_status_errors_read_as_the_json_rpc_path_reads_them() {
        let task = json!({"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}});
        assert_eq!(
            Dialect::Rest10.read_reply(&answer(200, task.clone()), "u"),
            Ok(task)
        );
        let status = |code: u16, status: &str, reason: &str| {
            json!({"error": {"code": code, "status": status, "message": "no",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org"}]}})
        };
        for (http, name, reason, code) in [
            (404, "NOT_FOUND", "TASK_NOT_FOUND", -32001),
            (400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE", -32002),
            (400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION", -32004),
            (
                400,
                "INVALID_ARGUMENT",
                "CONTENT_TYPE_NOT_SUPPORTED",
                -32005,
            ),
            (500, "INTERNAL", "INVALID_AGENT_RESPONSE", -32006),
            (400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", -32009),
            (400, "INVALID_ARGUMENT", "INVALID_PARAMS", -32602),
        ] {
            assert_eq!(
                Dialect::Rest10.read_reply(&answer(http, status(http, name, reason)), "u"),
                Err(Error::Rpc {
                    code,
                    message: "no".into()
                }),
                "{reason}"
            );
        }
        // No ErrorInfo: the status name, then the HTTP code.
        let bare = json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "gone"}});
        assert!(matches!(
            Dialect::Rest10.read_reply(&answer(404, bare), "u"),
            Err(Error::Rpc { code: -32001, .. })
        ));
        let html = HttpResponse {
            status: 502,
            headers: vec![],
            body: b"<h1>bad gateway</h1>".to_vec(),
        };
        assert!(matches!(
            Dialect::Rest10.read_reply(&html, "u"),
            Err(Error::Status { status: 502, .. })
        ));
        // The JS SDK's 0.3 REST error body: the JSON-RPC code at the top.
        for dialect in [Dialect::Rest03, Dialect::Rest10] {
            let js03 = json!({"code": -32004, "message": "Task t is in a terminal state"});
            assert_eq!(
                dialect.read_reply(&answer(400, js03), "u"),
                Err(Error::Rpc {
                    code: -32004,
                    message: "Task t is in a terminal state".into()
                })
            );
        }
        // A top-level positive `code` is no A2A error: the status is the error.
        assert!(matches!(
            Dialect::Rest03.read_reply(&answer(400, json!({"code": 400, "message": "x"})), "u"),
            Err(Error::Status { status: 400, .. })
        ));
        // An SSE error event.
        assert!(matches!(
            Dialect::Rest10.read_event(status(500, "INTERNAL", "INTERNAL_ERROR")),
            Err(Error::Rpc { code: -32603, .. })
        ));
    }

    #[cfg(feature = "server")]
    #[test]
    fn the_0_3_proto_shapes_are_read_as_1_0() {
        let v = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_CANCELLED",
            "message": {"role": "ROLE_AGENT", "content": [{"text": "stopped"}]}},
            "artifacts": [{"artifactId": "a", "parts": [{"file": {"fileWithUri": "http://f", "mimeType": "text/plain"}}, {"data": {"data": {"k": 1}}}]}]}});
        let got = Dialect::Rest03
            .read_reply(&answer(200, v), "u")
            .expect("task");
        let task = crate::model::task::SendResult::from_value(&got);
        let Some(crate::model::task::SendResult::Task(task)) = task else {
            panic!("a task: {got}")
        };
        assert_eq!(task.state, crate::model::task::TaskState::Canceled);
        assert_eq!(task.status_text().as_deref(), Some("stopped"));
        assert_eq!(
            got["task"]["artifacts"][0]["parts"],
            json!([{"url": "http://f", "mediaType": "text/plain"}, {"data": {"k": 1}}])
        );
        // And back: what a 0.3 server answers.
        let mut out = got.clone();
        to_v03_stream_response(&mut out);
        assert_eq!(out["task"]["status"]["state"], "TASK_STATE_CANCELLED");
        assert_eq!(
            out["task"]["status"]["message"]["content"][0]["text"],
            "stopped"
        );
        assert_eq!(
            out["task"]["artifacts"][0]["parts"][1],
            json!({"data": {"data": {"k": 1}}})
        );
    }

    #[cfg(feature = "server")]
    #[test]
    fn snake_case_proto_names_are_read() {
        let mut p = serde_json::Map::new();
        p.insert(
            "request".into(),
            json!({"message_id": "m", "role": "ROLE_USER", "content": [{"text": "hi"}], "metadata": {"my_key": 1}}),
        );
        p.insert("configuration".into(), json!({"history_length": 2}));
        from_v03_send(&mut p);
        assert_eq!(
            Value::Object(p),
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "metadata": {"my_key": 1}},
                   "configuration": {"historyLength": 2}})
        );
    }
}
