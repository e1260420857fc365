//! Small JSON helpers that keep the `.wasm` small: each does what a
//! `serde_json` convenience does, without instantiating a second copy of the
//! JSON writer (`Display`) or the value serializer (`json!`, which sends
//! every value it holds, literals included, through `to_value(..).unwrap()`).

use serde_json::{Map, Value};

/// A value as compact JSON text, exactly what its `Display` writes, through
/// the one JSON writer the crate already uses (`serde_json::to_string`).
pub fn text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// `object` with `key` set to `value` (a new key goes last, as in `json!`).
/// `json!({.., "key": value})` would copy `value` through the value serializer.
pub fn with(mut object: Value, key: &str, value: Value) -> Value {
    if let Value::Object(map) = &mut object {
        map.insert(key.to_string(), value);
    }
    object
}

/// An object of `pairs`, in order: `json!({"k": v, ..})` without the value
/// serializer (a later pair with the same key replaces the earlier one, as in `json!`).
/// A thin wrapper over one non-generic function: one copy of the loop in
/// the `.wasm`, not one per length.
pub fn object<const N: usize>(mut pairs: [(&str, Value); N]) -> Value {
    object_of(&mut pairs)
}

/// [`object`] of a slice; each value is taken out (left `null`).
fn object_of(pairs: &mut [(&str, Value)]) -> Value {
    let mut map = Map::new();
    for (key, value) in pairs {
        map.insert(key.to_string(), std::mem::take(value));
    }
    Value::Object(map)
}

#[cfg(feature = "server")]
/// `v[key]` read as serde reads an `Option<String>` field: absent or
/// `null` is `None`, a string `Some`, anything else an error naming `key`.
/// (The readers built on these replace derived `Deserialize` impls in the
/// npm `.wasm`: serde's error path brings `str`'s `Debug` and its tables.)
pub fn opt_string(v: &Value, key: &str) -> Result<Option<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

#[cfg(feature = "server")]
/// `v[key]` read as serde reads a `String` field: absent is `missing`
/// (`None`: a missing field is an error), `null` or not a string an error.
pub fn string_or(v: &Value, key: &str, missing: Option<&str>) -> Result<String, String> {
    match (v.get(key), missing) {
        (Some(Value::String(s)), _) => Ok(s.clone()),
        (None, Some(default)) => Ok(default.to_string()),
        (None, None) => Err(format!("missing field `{key}`")),
        (Some(_), _) => Err(format!("`{key}` must be a string")),
    }
}

#[cfg(feature = "server")]
/// Reads an object's fields with `read`, as a derived `Deserialize` would
/// (only objects: anything else is an error).
pub fn read_object<T>(
    v: &Value,
    read: impl FnOnce(&Value) -> Result<T, String>,
) -> Result<T, String> {
    match v {
        Value::Object(_) => read(v),
        _ => Err("expected an object".into()),
    }
}

/// The strings of a JSON array (other items skipped; not an array: none).
/// One shared loop: each `filter_map(..).collect()` site would be its own
/// copy of the iterator code in the `.wasm`.
pub fn strings(v: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::Array(list)) = v {
        for item in list {
            if let Value::String(s) = item {
                out.push(s.clone());
            }
        }
    }
    out
}

/// `s` in double quotes, escaped as a JSON string: for messages that quote
/// what they got. The `{:?}` of a `str` would say the same for printable
/// text, but brings Rust's escaping and Unicode tables into the `.wasm`.
pub fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn text_is_display_and_with_is_json() {
        let v = json!({"b": [1, 2.5, null], "a": {"s": "x\"y\u{1}"}});
        assert_eq!(text(&v), v.to_string());
        let inner = json!({"z": true});
        assert_eq!(
            with(json!({"k": 1}), "v", inner.clone()),
            json!({"k": 1, "v": inner})
        );
        assert_eq!(text(&with(json!({"k": 1}), "k", json!(2))), r#"{"k":2}"#);
        assert_eq!(with(json!([1]), "k", json!(2)), json!([1]));
    }

    #[test]
    fn object_is_json_and_quoted_is_debug_for_printable_text() {
        let o = object([("b", json!(1)), ("a", json!("x")), ("b", json!(2))]);
        assert_eq!(o, json!({"b": 1, "a": "x", "b": 2}));
        assert_eq!(text(&o), r#"{"b":2,"a":"x"}"#);
        assert_eq!(object([]), json!({}));
        for s in [
            "plain",
            "with \"quotes\" and \\",
            "tab\tand\nnewline",
            "é ü 漢",
        ] {
            assert_eq!(quoted(s), format!("{s:?}"));
        }
        assert_eq!(quoted("nul\u{0}"), r#""nul\u0000""#);
    }
}
