//! Reading JSON-RPC requests on the server side, in any dialect.

use crate::model::task::Shape;
use crate::wire::http::HttpRequest;
use serde_json::Value;

pub use crate::wire::rpc::{
    Method, CONTENT_TYPE_NOT_SUPPORTED, EXTENDED_CARD_NOT_CONFIGURED, EXTENSION_SUPPORT_REQUIRED,
    INTERNAL_ERROR, INVALID_AGENT_RESPONSE, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
    PARSE_ERROR, PUSH_NOTIFICATION_NOT_SUPPORTED, TASK_NOT_CANCELABLE, TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION, VERSION_NOT_SUPPORTED,
};

/// The protocol version a request asks for: its `A2A-Version` header, else
/// its `A2A-Version` query parameter.
pub(crate) fn requested_version(req: &HttpRequest) -> Option<&str> {
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
    /// The request field that failed validation (`message.parts`), for the
    /// 1.0 `google.rpc.BadRequest` detail.
    pub field: Option<&'static str>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            field: None,
        }
    }
    pub fn invalid_params(message: &str) -> Self {
        RpcError::new(INVALID_PARAMS, format!("Invalid params: {message}"))
    }
    /// -32602 naming the field that failed (`message.messageId`).
    pub fn invalid_field(field: &'static str, message: &str) -> Self {
        RpcError {
            field: Some(field),
            ..RpcError::invalid_params(&format!("{field} {message}"))
        }
    }

    /// The 1.0 error details (`error.data`): a `google.rpc.ErrorInfo` with
    /// the A2A reason, and a `google.rpc.BadRequest` when a field failed.
    pub fn details(&self) -> ErrorDetails<'_> {
        ErrorDetails(self)
    }
    pub fn internal(message: String) -> Self {
        RpcError::new(INTERNAL_ERROR, message)
    }
}

/// The reason of an error code in `google.rpc.ErrorInfo`, as the official SDKs spell it.
pub(crate) fn reason(code: i64) -> &'static str {
    match code {
        TASK_NOT_FOUND => "TASK_NOT_FOUND",
        TASK_NOT_CANCELABLE => "TASK_NOT_CANCELABLE",
        PUSH_NOTIFICATION_NOT_SUPPORTED => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        UNSUPPORTED_OPERATION => "UNSUPPORTED_OPERATION",
        VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
        CONTENT_TYPE_NOT_SUPPORTED => "CONTENT_TYPE_NOT_SUPPORTED",
        INVALID_AGENT_RESPONSE => "INVALID_AGENT_RESPONSE",
        EXTENDED_CARD_NOT_CONFIGURED => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        EXTENSION_SUPPORT_REQUIRED => "EXTENSION_SUPPORT_REQUIRED",
        INVALID_PARAMS => "INVALID_PARAMS",
        INVALID_REQUEST => "INVALID_REQUEST",
        METHOD_NOT_FOUND => "METHOD_NOT_FOUND",
        PARSE_ERROR => "PARSE_ERROR",
        _ => "INTERNAL_ERROR",
    }
}

/// The `data` array of a 1.0 error (spec §9.5): each object has an `@type`.
pub struct ErrorDetails<'a>(&'a RpcError);

impl serde::Serialize for ErrorDetails<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        #[derive(serde::Serialize)]
        struct Info {
            #[serde(rename = "@type")]
            kind: &'static str,
            reason: &'static str,
            domain: &'static str,
            metadata: Empty,
        }
        #[derive(serde::Serialize)]
        struct Empty {}
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct BadRequest<'a> {
            #[serde(rename = "@type")]
            kind: &'static str,
            field_violations: [Violation<'a>; 1],
        }
        #[derive(serde::Serialize)]
        struct Violation<'a> {
            field: &'a str,
            description: &'a str,
        }
        let mut seq = s.serialize_seq(None)?;
        seq.serialize_element(&Info {
            kind: "type.googleapis.com/google.rpc.ErrorInfo",
            reason: reason(self.0.code),
            domain: "a2a-protocol.org",
            metadata: Empty {},
        })?;
        if let Some(field) = self.0.field {
            seq.serialize_element(&BadRequest {
                kind: "type.googleapis.com/google.rpc.BadRequest",
                field_violations: [Violation {
                    field,
                    description: &self.0.message,
                }],
            })?;
        }
        seq.end()
    }
}

/// A well-formed JSON-RPC call.
#[derive(Debug)]
pub struct RpcRequest {
    pub id: Value,
    pub method: String,
    pub params: Value,
    /// The shape to answer in: the requested version's, else inferred
    /// from the call (see [`infer_shape`]).
    pub shape: Shape,
    /// Whether the request named its dialect (`A2A-Version`, or a 0.3
    /// method name); if not, a call on an existing task answers in the
    /// shape the task was made in.
    pub versioned: bool,
    /// The binding it came in: how it is answered.
    pub binding: Binding,
}

/// The binding a call came in, and so how its answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    JsonRpc,
    /// HTTP+JSON (1.0): the resource, bare `StreamResponse` events.
    Rest,
    /// HTTP+JSON of A2A 0.3 (the `/v1` routes): the 0.3 proto's JSON.
    Rest03,
}

/// The shape of a supported `A2A-Version`: `1`, `1.0` (a patch is ignored,
/// as the spec asks) or `0.3`; `None` for any other.
pub(crate) fn version_shape(v: &str) -> Option<Shape> {
    let mut parts = v.split('.');
    let (major, minor) = (parts.next()?, parts.next().unwrap_or("0"));
    match (major, minor) {
        ("1", "0") => Some(Shape::V10),
        ("0", "3") => Some(Shape::V03),
        _ => None,
    }
}

/// The shape of a call that names no version. A2A says that is 0.3, but
/// 1.0 clients omit it too: a 1.0-shaped message (`ROLE_USER`, parts
/// without `kind`, `returnImmediately`) and ListTasks (1.0 only) are
/// answered in 1.0 shapes. The toolnexus dialect and 0.3 send `kind`ed
/// parts and lowercase roles, so they keep theirs.
pub fn infer_shape(method: &str, params: &Value) -> Shape {
    if method.as_bytes().contains(&b'/') {
        return Shape::V03;
    }
    if method == "ListTasks" {
        return Shape::V10;
    }
    let Some(message) = params.get("message") else {
        return Shape::V03;
    };
    let role_10 = message
        .get("role")
        .and_then(Value::as_str)
        .is_some_and(|r| r.starts_with("ROLE_"));
    let parts_10 = message
        .get("parts")
        .and_then(Value::as_array)
        .is_some_and(|p| p.iter().any(|p| p.get("kind").is_none()));
    let return_immediately = params
        .get("configuration")
        .and_then(|c| c.get("returnImmediately"))
        .is_some();
    if role_10 || parts_10 || return_immediately {
        Shape::V10
    } else {
        Shape::V03
    }
}

/// A request's four fields, read without the envelope becoming a map (only
/// the fields are values): what a derived `Deserialize` of the struct reads
/// (an object, a field twice refused, others dropped; or an array of exactly
/// four), with `None` where it would fail with a data error. Hand-written so
/// that no serde error (and its `Debug` formatting) is built: the npm `.wasm`.
/// One difference: other members are read as values and dropped, not
/// skipped (serde's `IgnoredAny`, a second JSON reader in the `.wasm`), so
/// a number out of range or a lone surrogate escape in one is a parse error,
/// as it already is in `params` and in an HTTP+JSON body.
struct Envelope(Option<EnvelopeFields>);

#[derive(Default)]
struct EnvelopeFields {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
}

impl<'de> serde::Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Envelope, D::Error> {
        d.deserialize_any(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> serde::de::Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC object")
    }
    fn visit_unit<E>(self) -> Result<Envelope, E> {
        Ok(Envelope(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Envelope, E> {
        Ok(Envelope(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Envelope, E> {
        Ok(Envelope(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Envelope, E> {
        Ok(Envelope(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Envelope, E> {
        Ok(Envelope(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<Envelope, E> {
        Ok(Envelope(None))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Envelope, A::Error> {
        let mut fields = [None, None, None, None];
        for field in &mut fields {
            match seq.next_element::<Value>()? {
                Some(v) => *field = present(v),
                None => return Ok(Envelope(None)),
            }
        }
        let [jsonrpc, id, method, params] = fields;
        Ok(Envelope(Some(EnvelopeFields {
            jsonrpc,
            id,
            method,
            params,
        })))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut f = EnvelopeFields::default();
        let mut seen = [false; 4];
        let mut twice = false;
        while let Some(key) = map.next_key::<Member>()? {
            let (slot, i) = match key {
                Member::Jsonrpc => (&mut f.jsonrpc, 0),
                Member::Id => (&mut f.id, 1),
                Member::Method => (&mut f.method, 2),
                Member::Params => (&mut f.params, 3),
                Member::Other => {
                    map.next_value::<Value>()?;
                    continue;
                }
            };
            twice |= std::mem::replace(&mut seen[i], true);
            *slot = present(map.next_value::<Value>()?);
        }
        Ok(Envelope((!twice).then_some(f)))
    }
}

/// The name of an envelope's member, read as the `&str` the JSON reader
/// hands out (no `String` made for it, as `next_key::<String>` would).
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Other,
}

impl<'de> serde::Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Member, D::Error> {
        d.deserialize_identifier(MemberVisitor)
    }
}

struct MemberVisitor;

impl serde::de::Visitor<'_> for MemberVisitor {
    type Value = Member;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a member name")
    }
    fn visit_str<E>(self, name: &str) -> Result<Member, E> {
        Ok(match name {
            "jsonrpc" => Member::Jsonrpc,
            "id" => Member::Id,
            "method" => Member::Method,
            "params" => Member::Params,
            _ => Member::Other,
        })
    }
}

/// A field's value as serde reads an `Option<Value>`: `null` is `None`.
/// (Read as a `Value`, not an `Option<Value>`: one JSON value reader.)
fn present(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        v => Some(v),
    }
}

impl RpcRequest {
    /// Reads the call, or the error to answer with (and the id, when known).
    pub fn parse(req: &HttpRequest) -> Result<RpcRequest, (Value, RpcError)> {
        let shape = match requested_version(req).map(str::trim) {
            None | Some("") => None,
            Some(v) => Some(version_shape(v).ok_or_else(|| {
                (
                    Value::Null,
                    RpcError::new(
                        VERSION_NOT_SUPPORTED,
                        format!("A2A version {v} is not supported (use 1.0 or 0.3)"),
                    ),
                )
            })?),
        };
        let mut obj = match serde_json::from_slice::<Envelope>(&req.body) {
            Ok(Envelope(Some(obj))) => obj,
            // Valid JSON, but not a request object.
            Ok(Envelope(None)) => {
                return Err((
                    Value::Null,
                    RpcError::new(
                        INVALID_REQUEST,
                        "Invalid Request: expected a JSON-RPC object",
                    ),
                ))
            }
            Err(e) => {
                return Err((
                    Value::Null,
                    RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
                ))
            }
        };
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
            shape: shape.unwrap_or_else(|| infer_shape(&method, &params)),
            // A 0.3 method name (`tasks/get`) names its dialect too.
            versioned: shape.is_some() || method.as_bytes().contains(&b'/'),
            binding: Binding::JsonRpc,
            id,
            method,
            params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// The envelope as a derived `Deserialize` reads it (what `parse` used).
    fn derived(body: &[u8]) -> Result<[Option<Value>; 4], bool> {
        #[derive(serde::Deserialize)]
        struct Derived {
            jsonrpc: Option<Value>,
            id: Option<Value>,
            method: Option<Value>,
            params: Option<Value>,
        }
        serde_json::from_slice::<Derived>(body)
            .map(|d| [d.jsonrpc, d.id, d.method, d.params])
            .map_err(|e| e.classify() == serde_json::error::Category::Data)
    }

    #[test]
    fn the_envelope_reads_what_the_derived_struct_reads() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#,
            r#"{"method":"m","x":[1,{"y":2}],"id":null}"#,
            r#"{"id":1,"id":2}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0"}"#,
            r#"{"me\u0074hod":"m"}"#,
            r#"["2.0",1,"m",{}]"#,
            r#"["2.0",1,"m"]"#,
            r#"["2.0",1,"m",{},5]"#,
            r#"[{"jsonrpc":"2.0","method":"m"}]"#,
            r#"[]"#,
            r#"{}"#,
            r#""text""#,
            "7",
            "-7",
            "2.5",
            "true",
            "null",
            "",
            "{",
            r#"{"id":1} x"#,
            r#"{"id":1,}"#,
        ] {
            let got = match serde_json::from_slice::<Envelope>(body.as_bytes()) {
                Ok(Envelope(Some(f))) => Ok([f.jsonrpc, f.id, f.method, f.params]),
                Ok(Envelope(None)) => Err(true),
                Err(e) => Err(e.classify() == serde_json::error::Category::Data),
            };
            assert_eq!(got, derived(body.as_bytes()), "{body}");
        }
    }

    #[test]
    fn other_members_are_read_as_json_values() {
        for body in [
            r#"{"method":"m","x":1e400}"#,
            r#"{"method":"m","x":"\ud800"}"#,
        ] {
            assert!(
                serde_json::from_slice::<Envelope>(body.as_bytes()).is_err(),
                "{body}"
            );
            assert!(serde_json::from_slice::<Value>(body.as_bytes()).is_err());
        }
    }
}
