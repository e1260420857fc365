//! JSON-RPC envelopes in the three dialects a peer may speak.

use crate::error::{Error, Reason};
use crate::wire::http::{HttpRequest, HttpResponse};
use crate::wire::json::{object, text, with};
use serde_json::Value;

/// The wire dialect spoken with a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The toolnexus reference: `SendMessage`/`GetTask` with 0.3 shapes, no version header.
    Toolnexus,
    /// A2A 0.3: `message/send`, `tasks/get`, `tasks/cancel`.
    V03,
    /// A2A 1.0: `SendMessage`, `GetTask`, `CancelTask`, `A2A-Version: 1.0`, 1.0 shapes.
    V10,
    /// A2A 1.0 over HTTP+JSON (REST): `POST /message:send`, `GET /tasks/{id}`, …
    Rest10,
    /// A2A 0.3 over HTTP+JSON: the `/v1/...` routes and the 0.3 proto's JSON.
    Rest03,
}

/// How a SendMessage asks to be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// Answer at once with the task as created; the caller polls.
    NonBlocking,
    /// Answer when the task settles (the A2A default).
    Blocking,
    /// `SendStreamingMessage` / `message/stream`: answer with an SSE stream of events.
    Stream,
}

// The error codes, for both halves (the client reads them, the server sends them).

/// JSON-RPC: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: JSON, but not a request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the params are not what the method takes.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed (a store error, say).
pub const INTERNAL_ERROR: i64 = -32603;
/// A2A: no task with that id.
pub const TASK_NOT_FOUND: i64 = -32001;
/// A2A: the task cannot be canceled (it is finished, or finishing).
pub const TASK_NOT_CANCELABLE: i64 = -32002;
/// A2A: the agent does not support push notifications.
pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
/// A2A: the operation is not supported (e.g. streaming on a peer without it).
pub const UNSUPPORTED_OPERATION: i64 = -32004;
/// A2A: a media type in the request is not supported.
pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
/// A2A: the agent answered something that is not a valid A2A answer.
pub const INVALID_AGENT_RESPONSE: i64 = -32006;
/// A2A: the agent has no extended agent card.
pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
/// A2A: the client must support an extension the agent requires.
pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
/// A2A: the protocol version is not supported.
pub const VERSION_NOT_SUPPORTED: i64 = -32009;

/// An A2A JSON-RPC method, whatever the dialect calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Send,
    Stream,
    Subscribe,
    Get,
    Cancel,
    /// `ListTasks` (1.0 only).
    List,
    /// Any of the push-notification config methods (set/create, get, list, delete).
    PushConfig,
    /// `GetExtendedAgentCard` / `agent/getAuthenticatedExtendedCard`.
    ExtendedCard,
}

impl Method {
    /// The method a name means, in any dialect (`GetTask` and `tasks/get` alike).
    pub fn from_name(name: &str) -> Option<Method> {
        Some(match name {
            "SendMessage" | "message/send" => Method::Send,
            "SendStreamingMessage" | "message/stream" => Method::Stream,
            "SubscribeToTask" | "tasks/resubscribe" => Method::Subscribe,
            "GetTask" | "tasks/get" => Method::Get,
            "CancelTask" | "tasks/cancel" => Method::Cancel,
            "ListTasks" => Method::List,
            "CreateTaskPushNotificationConfig"
            | "SetTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig"
            | "tasks/pushNotificationConfig/set"
            | "tasks/pushNotificationConfig/get"
            | "tasks/pushNotificationConfig/list"
            | "tasks/pushNotificationConfig/delete" => Method::PushConfig,
            "GetExtendedAgentCard" | "agent/getAuthenticatedExtendedCard" => Method::ExtendedCard,
            _ => return None,
        })
    }

    /// Whether it is answered with an event stream.
    pub fn streams(self) -> bool {
        matches!(self, Method::Stream | Method::Subscribe)
    }
}

/// The task and the context a message belongs to: both unset for a new
/// conversation; `task_id` to answer a task waiting for input; `context_id`
/// alone for a new task in an earlier conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageRefs {
    pub task_id: Option<String>,
    pub context_id: Option<String>,
}

impl MessageRefs {
    /// The optional string `taskId` and `contextId` of a tool call's
    /// arguments; anything else there is an error text.
    pub fn from_args(args: &Value) -> Result<MessageRefs, String> {
        let id = |key: &str| match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("the argument \"{key}\" must be a string")),
        };
        Ok(MessageRefs {
            task_id: id("taskId")?,
            context_id: id("contextId")?,
        })
    }
}

impl Dialect {
    /// `"toolnexus"`, `"0.3"` or `"1.0"`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Toolnexus => "toolnexus",
            Dialect::V03 => "0.3",
            Dialect::V10 => "1.0",
            Dialect::Rest10 => "rest-1.0",
            Dialect::Rest03 => "rest-0.3",
        }
    }

    /// Whether it is the HTTP+JSON binding.
    pub fn is_rest(self) -> bool {
        matches!(self, Dialect::Rest10 | Dialect::Rest03)
    }

    /// Reads an answer: the JSON-RPC `result` (HTTP+JSON: the resource), or
    /// the peer's error, the same for both bindings.
    pub fn read_reply(self, resp: &HttpResponse, url: &str) -> Result<Value, Error> {
        if self.is_rest() {
            crate::wire::rest::parse_reply(self, resp, url)
        } else {
            parse_reply(resp, url)
        }
    }

    /// Reads one stream event's data: the JSON-RPC response's `result`
    /// (HTTP+JSON: the `StreamResponse` itself), or the error it carries.
    pub fn read_event(self, v: Value) -> Result<Value, Error> {
        if self.is_rest() {
            crate::wire::rest::parse_event(self, v)
        } else {
            parse_response_value(v)
        }
    }

    /// The dialect to retry a first SendMessage in after the peer answered
    /// JSON-RPC error `code`, if that error means "wrong dialect".
    pub fn fallback(self, code: i64) -> Option<Dialect> {
        match (self, code) {
            (Dialect::V10, VERSION_NOT_SUPPORTED | METHOD_NOT_FOUND) => Some(Dialect::V03),
            (Dialect::V03 | Dialect::Toolnexus, VERSION_NOT_SUPPORTED) => Some(Dialect::V10),
            (Dialect::V03, METHOD_NOT_FOUND) => Some(Dialect::Toolnexus),
            (Dialect::Toolnexus, METHOD_NOT_FOUND) => Some(Dialect::V03),
            // HTTP+JSON: the interface the card named, as it is.
            _ => None,
        }
    }

    /// What this dialect calls `method`.
    pub fn method(self, method: Method) -> &'static str {
        match (self, method) {
            (Dialect::V03, Method::Send) => "message/send",
            (Dialect::V03, Method::Get) => "tasks/get",
            (Dialect::V03, Method::Cancel) => "tasks/cancel",
            (Dialect::V03, Method::Stream) => "message/stream",
            (Dialect::V03, Method::Subscribe) => "tasks/resubscribe",
            (_, Method::Stream) => "SendStreamingMessage",
            (_, Method::Subscribe) => "SubscribeToTask",
            (_, Method::Send) => "SendMessage",
            (_, Method::Get) => "GetTask",
            (_, Method::Cancel) => "CancelTask",
            (_, Method::List) => "ListTasks",
            (Dialect::V03, Method::PushConfig) => "tasks/pushNotificationConfig/get",
            (_, Method::PushConfig) => "GetTaskPushNotificationConfig",
            (Dialect::V03, Method::ExtendedCard) => "agent/getAuthenticatedExtendedCard",
            (_, Method::ExtendedCard) => "GetExtendedAgentCard",
        }
    }

    /// The SendMessage params for a user message of one text part, in the
    /// task and context `refs` name, if any.
    fn send_params(
        self,
        message_id: &str,
        text: &str,
        mode: SendMode,
        refs: &MessageRefs,
    ) -> Value {
        let mut params = self.send_params_of(message_id, text, mode);
        if let Some(message) = params.get_mut("message").and_then(Value::as_object_mut) {
            for (key, id) in [("taskId", &refs.task_id), ("contextId", &refs.context_id)] {
                if let Some(id) = id {
                    message.insert(key.into(), Value::String(id.clone()));
                }
            }
        }
        params
    }

    fn send_params_of(self, message_id: &str, text: &str, mode: SendMode) -> Value {
        match self {
            Dialect::V10 | Dialect::Rest10 | Dialect::Rest03 => {
                let message = object([
                    ("role", "ROLE_USER".into()),
                    ("messageId", message_id.into()),
                    ("parts", Value::Array(vec![object([("text", text.into())])])),
                ]);
                let params = object([("message", message)]);
                match mode {
                    SendMode::NonBlocking => with(
                        params,
                        "configuration",
                        object([("returnImmediately", true.into())]),
                    ),
                    // Blocking is the 1.0 default, and streams ignore the flag.
                    SendMode::Blocking | SendMode::Stream => params,
                }
            }
            Dialect::V03 | Dialect::Toolnexus => object([
                (
                    "message",
                    object([
                        ("kind", "message".into()),
                        ("role", "user".into()),
                        ("messageId", message_id.into()),
                        (
                            "parts",
                            Value::Array(vec![object([
                                ("kind", "text".into()),
                                ("text", text.into()),
                            ])]),
                        ),
                    ]),
                ),
                (
                    "configuration",
                    object([("blocking", (mode != SendMode::NonBlocking).into())]),
                ),
            ]),
        }
    }

    pub(crate) fn request(
        self,
        endpoint: &str,
        rpc_id: u64,
        op: Method,
        params: Value,
    ) -> HttpRequest {
        let body = object([
            ("jsonrpc", "2.0".into()),
            ("id", rpc_id.into()),
            ("method", self.method(op).into()),
            ("params", params),
        ]);
        let req = HttpRequest::post_json(endpoint, text(&body).into_bytes());
        match self {
            Dialect::V10 | Dialect::Rest10 | Dialect::Rest03 => {
                req.with_header("A2A-Version", "1.0")
            }
            Dialect::V03 | Dialect::Toolnexus => req,
        }
    }

    /// A non-blocking SendMessage of `text`.
    pub fn send_message(
        self,
        endpoint: &str,
        rpc_id: u64,
        message_id: &str,
        text: &str,
    ) -> HttpRequest {
        self.send(endpoint, rpc_id, message_id, text, SendMode::NonBlocking)
    }

    /// A SendMessage of `text` answered as `mode` asks (a stream is
    /// `SendStreamingMessage`, with `Accept: text/event-stream`).
    pub fn send(
        self,
        endpoint: &str,
        rpc_id: u64,
        message_id: &str,
        text: &str,
        mode: SendMode,
    ) -> HttpRequest {
        let refs = MessageRefs::default();
        self.send_in(endpoint, rpc_id, message_id, text, mode, &refs)
    }

    /// [`Dialect::send`] of a message in the task and context `refs` name
    /// (an answer to a task waiting for input, a follow-up in a conversation).
    pub fn send_in(
        self,
        endpoint: &str,
        rpc_id: u64,
        message_id: &str,
        text: &str,
        mode: SendMode,
        refs: &MessageRefs,
    ) -> HttpRequest {
        if self.is_rest() {
            return crate::wire::rest::send(self, endpoint, message_id, text, mode, refs);
        }
        let op = if mode == SendMode::Stream {
            Method::Stream
        } else {
            Method::Send
        };
        let req = self.request(
            endpoint,
            rpc_id,
            op,
            self.send_params(message_id, text, mode, refs),
        );
        match op {
            Method::Stream => req.with_header("Accept", crate::wire::sse::CONTENT_TYPE),
            _ => req,
        }
    }

    /// A SubscribeToTask (0.3: `tasks/resubscribe`) for `task_id`: its events as SSE.
    pub fn subscribe(self, endpoint: &str, rpc_id: u64, task_id: &str) -> HttpRequest {
        if self.is_rest() {
            return crate::wire::rest::task_op(self, endpoint, Method::Subscribe, task_id);
        }
        self.request(
            endpoint,
            rpc_id,
            Method::Subscribe,
            object([("id", task_id.into())]),
        )
        .with_header("Accept", crate::wire::sse::CONTENT_TYPE)
    }

    /// A GetTask for `task_id`.
    pub fn get_task(self, endpoint: &str, rpc_id: u64, task_id: &str) -> HttpRequest {
        if self.is_rest() {
            return crate::wire::rest::task_op(self, endpoint, Method::Get, task_id);
        }
        self.request(
            endpoint,
            rpc_id,
            Method::Get,
            object([("id", task_id.into())]),
        )
    }

    /// A CancelTask for `task_id`.
    pub fn cancel_task(self, endpoint: &str, rpc_id: u64, task_id: &str) -> HttpRequest {
        if self.is_rest() {
            return crate::wire::rest::task_op(self, endpoint, Method::Cancel, task_id);
        }
        self.request(
            endpoint,
            rpc_id,
            Method::Cancel,
            object([("id", task_id.into())]),
        )
    }
}

/// Reads one JSON-RPC response object (an SSE event's data): the `result`,
/// or the peer's error.
pub fn parse_response_value(mut v: Value) -> Result<Value, Error> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(rpc_error(err));
    }
    match v.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(Error::malformed(format!(
            "a stream event is not a JSON-RPC response: {}",
            crate::wire::http::snippet(&text(&v), 200)
        ))),
    }
}

fn rpc_error(err: &Value) -> Error {
    Error::Rpc {
        code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
        // A peer's message is quoted, never copied whole (it may be megabytes).
        message: crate::wire::http::snippet(
            err.get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)"),
            crate::wire::http::MAX_PEER_TEXT,
        ),
    }
}

/// Reads a JSON-RPC reply: the `result`, or the peer's error. A non-JSON
/// body is [`Error::Status`] on a non-2xx status and [`Error::Malformed`] otherwise.
pub fn parse_reply(resp: &HttpResponse, url: &str) -> Result<Value, Error> {
    let status_error = || Error::Status {
        status: resp.status,
        url: url.to_string(),
        body: resp.body_snippet(200),
    };
    let mut v = match serde_json::from_slice::<Value>(&resp.body) {
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
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(rpc_error(err));
    }
    if !resp.is_success() {
        return Err(status_error());
    }
    match v.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(Error::malformed(format!(
            "the reply from {url} is not a JSON-RPC response: {}",
            resp.body_snippet(200)
        ))),
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
    fn each_dialect_builds_its_own_send() {
        let t = Dialect::Toolnexus.send_message("http://p/", 1, "m1", "hi");
        assert_eq!(body(&t)["method"], "SendMessage");
        assert_eq!(body(&t)["params"]["configuration"]["blocking"], false);
        assert_eq!(body(&t)["params"]["message"]["parts"][0]["kind"], "text");
        assert_eq!(t.header("A2A-Version"), None);
        assert_eq!(t.header("content-type"), Some("application/json"));

        let v03 = Dialect::V03.send_message("http://p/", 1, "m1", "hi");
        assert_eq!(body(&v03)["method"], "message/send");
        assert_eq!(
            body(&Dialect::V03.get_task("u", 2, "t"))["method"],
            "tasks/get"
        );
        assert_eq!(
            body(&Dialect::V03.cancel_task("u", 3, "t"))["method"],
            "tasks/cancel"
        );

        let v10 = Dialect::V10.send_message("http://p/", 1, "m1", "hi");
        assert_eq!(v10.header("A2A-Version"), Some("1.0"));
        assert_eq!(body(&v10)["params"]["message"]["role"], "ROLE_USER");
        assert_eq!(
            body(&v10)["params"]["message"]["parts"][0],
            json!({"text": "hi"})
        );
        assert_eq!(
            body(&v10)["params"]["configuration"]["returnImmediately"],
            true
        );
        assert_eq!(
            body(&Dialect::V10.get_task("u", 2, "t"))["params"],
            json!({"id": "t"})
        );
    }

    #[test]
    fn fallback_goes_to_the_other_dialect_only_for_dialect_errors() {
        assert_eq!(Dialect::V10.fallback(-32009), Some(Dialect::V03));
        assert_eq!(Dialect::V10.fallback(-32601), Some(Dialect::V03));
        assert_eq!(Dialect::V03.fallback(-32009), Some(Dialect::V10));
        assert_eq!(Dialect::Toolnexus.fallback(-32601), Some(Dialect::V03));
        assert_eq!(Dialect::V10.fallback(-32602), None);
        assert_eq!(Dialect::V03.fallback(-32001), None);
    }

    #[test]
    fn replies_are_read_leniently() {
        let ok = HttpResponse::json(
            200,
            br#"{"jsonrpc":"2.0","id":1,"result":{"id":"t"}}"#.to_vec(),
        );
        assert_eq!(parse_reply(&ok, "u"), Ok(json!({"id": "t"})));
        let err = HttpResponse::json(
            200,
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}"#
                .to_vec(),
        );
        assert_eq!(
            parse_reply(&err, "u"),
            Err(Error::Rpc {
                code: -32001,
                message: "Task not found".into()
            })
        );
        let err400 = HttpResponse::json(400, br#"{"error":{"code":-32600}}"#.to_vec());
        assert!(matches!(
            parse_reply(&err400, "u"),
            Err(Error::Rpc { code: -32600, .. })
        ));
        let html = HttpResponse {
            status: 502,
            headers: vec![],
            body: b"<h1>bad gateway</h1>".to_vec(),
        };
        assert!(matches!(
            parse_reply(&html, "u"),
            Err(Error::Status { status: 502, .. })
        ));
        let junk = HttpResponse::json(200, b"nope".to_vec());
        let err = parse_reply(&junk, "u").expect_err("not JSON");
        assert!(matches!(err, Error::Malformed(_)), "{err:?}");
        // The cause is kept, but for the npm build (see `error.rs`).
        let cause = std::error::Error::source(&err);
        let keeps = !cfg!(all(target_arch = "wasm32", target_os = "unknown"));
        assert_eq!(
            cause.is_some_and(|c| c.downcast_ref::<serde_json::Error>().is_some()),
            keeps
        );
        let empty = HttpResponse::json(200, b"{}".to_vec());
        assert!(matches!(parse_reply(&empty, "u"), Err(Error::Malformed(_))));
    }
}
