//! Reading JSON-RPC requests on the server side, in any dialect.

use crate::model::task::Shape;
use crate::wire::http::HttpRequest;
use serde_json::Value;

pub use crate::wire::rpc::{
    Method, EXTENDED_CARD_NOT_CONFIGURED, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, PARSE_ERROR, PUSH_NOTIFICATION_NOT_SUPPORTED, TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND, UNSUPPORTED_OPERATION, VERSION_NOT_SUPPORTED,
};

/// The protocol version a request asks for: its `A2A-Version` header, else
/// its `A2A-Version` query parameter.
fn requested_version(req: &HttpRequest) -> Option<&str> {
    if let Some(v) = req.header("A2A-Version") {
        return Some(v);
    }
    let query = req.url.split('#').next()?.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        k.eq_ignore_ascii_case("A2A-Version").then_some(v)
    })
}

/// A JSON-RPC error to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid_params(message: &str) -> Self {
        RpcError::new(INVALID_PARAMS, format!("Invalid params: {message}"))
    }
    pub fn internal(message: String) -> Self {
        RpcError::new(INTERNAL_ERROR, message)
    }
}

/// A well-formed JSON-RPC call.
#[derive(Debug)]
pub struct RpcRequest {
    pub id: Value,
    pub method: String,
    pub params: Value,
    /// The shape to answer in: 1.0 when `A2A-Version` starts with `1`.
    pub shape: Shape,
}

impl RpcRequest {
    /// Reads the call, or the error to answer with (and the id, when known).
    pub fn parse(req: &HttpRequest) -> Result<RpcRequest, (Value, RpcError)> {
        let shape = match requested_version(req).map(str::trim) {
            None | Some("") => Shape::V03,
            Some(v) if v.starts_with('1') => Shape::V10,
            Some(v) if v.starts_with("0.3") => Shape::V03,
            Some(v) => {
                return Err((
                    Value::Null,
                    RpcError::new(
                        VERSION_NOT_SUPPORTED,
                        format!("A2A version {v} is not supported (use 1.0 or 0.3)"),
                    ),
                ))
            }
        };
        // Typed, so the envelope never becomes a map; only the fields are values.
        #[derive(serde::Deserialize)]
        struct Envelope {
            jsonrpc: Option<Value>,
            id: Option<Value>,
            method: Option<Value>,
            params: Option<Value>,
        }
        let mut obj: Envelope = serde_json::from_slice(&req.body).map_err(|e| {
            let err = match e.classify() {
                // Valid JSON, but not a request object.
                serde_json::error::Category::Data => RpcError::new(
                    INVALID_REQUEST,
                    "Invalid Request: expected a JSON-RPC object",
                ),
                _ => RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
            };
            (Value::Null, err)
        })?;
        let id = match obj.id.take() {
            Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
            None => Value::Null,
            Some(_) => {
                return Err((
                    Value::Null,
                    RpcError::new(
                        INVALID_REQUEST,
                        "Invalid Request: id must be a string or number",
                    ),
                ))
            }
        };
        if obj.jsonrpc.as_ref().is_some_and(|j| j != "2.0") {
            return Err((
                id,
                RpcError::new(INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\""),
            ));
        }
        let method = match obj.method.take() {
            Some(Value::String(m)) => m,
            _ => {
                return Err((
                    id,
                    RpcError::new(INVALID_REQUEST, "Invalid Request: method must be a string"),
                ))
            }
        };
        let params = match obj.params.take() {
            Some(p @ Value::Object(_)) => p,
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(_) => return Err((id, RpcError::invalid_params("params must be an object"))),
        };
        Ok(RpcRequest {
            id,
            method,
            params,
            shape,
        })
    }
}
