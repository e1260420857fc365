//! The required fields of a SendMessage, checked per the A2A spec (1.0
//! `Message`, 0.3 `Message`): what a malformed request is told, field by field.

use super::rpc::RpcError;
use serde_json::Value;

/// Checks `params.message` and `params.configuration` of a SendMessage (or
/// SendStreamingMessage): a message needs a non-empty `messageId`, a `role`
/// (`user`/`agent`, `ROLE_USER`/`ROLE_AGENT`) and at least one part, each
/// with content (`text`, a file, `data`). Every toolnexus port sends all of
/// them, so its dialect passes as it is.
pub(crate) fn check_send(params: &Value) -> Result<&Value, RpcError> {
    let msg = params
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| RpcError::invalid_field("message", "must be an object"))?;
    if msg
        .get("messageId")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(RpcError::invalid_field(
            "message.messageId",
            "is required (a non-empty string)",
        ));
    }
    let role = msg.get("role").and_then(Value::as_str).unwrap_or_default();
    let role = role.strip_prefix("ROLE_").unwrap_or(role);
    if !(role.eq_ignore_ascii_case("user") || role.eq_ignore_ascii_case("agent")) {
        return Err(RpcError::invalid_field(
            "message.role",
            "is required: user or agent (ROLE_USER, ROLE_AGENT)",
        ));
    }
    let parts = msg
        .get("parts")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| RpcError::invalid_field("message.parts", "needs at least one part"))?;
    if !parts.iter().all(has_content) {
        return Err(RpcError::invalid_field(
            "message.parts",
            "each part needs content: text, a file (raw, url, file) or data",
        ));
    }
    for key in ["contextId", "taskId"] {
        if msg.get(key).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Err(RpcError::invalid_field(
                if key == "taskId" {
                    "message.taskId"
                } else {
                    "message.contextId"
                },
                "must be a string",
            ));
        }
    }
    match params.get("configuration") {
        None | Some(Value::Null) => {}
        Some(c @ Value::Object(_)) => {
            history_length(c, "configuration.historyLength")?;
        }
        Some(_) => {
            return Err(RpcError::invalid_field(
                "configuration",
                "must be an object",
            ))
        }
    }
    Ok(msg)
}

/// A part with content: 1.0 `text`/`raw`/`url`/`data`, or 0.3 `text`,
/// `file` (`bytes` or `uri`) or `data`.
fn has_content(part: &Value) -> bool {
    let str_at = |k: &str| part.get(k).is_some_and(Value::is_string);
    str_at("text")
        || str_at("raw")
        || str_at("url")
        || part.get("data").is_some()
        || part.get("file").is_some_and(|f| {
            f.get("bytes").is_some_and(Value::is_string)
                || f.get("uri").is_some_and(Value::is_string)
        })
}

/// `historyLength` of `params` (`field` names it in errors): absent, or a
/// whole number ≥ 0.
pub(crate) fn history_length(
    params: &Value,
    field: &'static str,
) -> Result<Option<usize>, RpcError> {
    match params.get("historyLength") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) => Ok(Some(n as usize)),
            None => Err(RpcError::invalid_field(
                field,
                "must be a whole number, 0 or more",
            )),
        },
    }
}
