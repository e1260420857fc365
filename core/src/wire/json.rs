//! Two small JSON helpers that keep the `.wasm` small: each does what a
//! `serde_json` convenience does, without instantiating a second copy of the
//! JSON writer (`Display`) or the value serializer (`json!` around a `Value`).

use serde_json::Value;

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
}
