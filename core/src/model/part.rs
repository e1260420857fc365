//! A part of a message or an artifact: text, a file (inline bytes or a
//! URL) or structured data, read from the 0.3 or the 1.0 shape and written
//! in either.
//!
//! | | 0.3 (and toolnexus) | 1.0 |
//! |---|---|---|
//! | text | `{kind:"text", text}` | `{text}` |
//! | file | `{kind:"file", file:{bytes \| uri, mimeType, name}}` | `{raw \| url, mediaType, filename}` |
//! | data | `{kind:"data", data}` | `{data, mediaType?}` |

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

/// One part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// A file or data part, kept whole as its 1.0 object (`raw` (base64)
    /// or `url`, or `data`; with `mediaType`, `filename`, `metadata` when
    /// given), so nothing a peer sent is dropped.
    Other(Map<String, Value>),
}

impl From<String> for Part {
    fn from(text: String) -> Part {
        Part::Text(text)
    }
}

impl From<&str> for Part {
    fn from(text: &str) -> Part {
        Part::Text(text.into())
    }
}

impl Part {
    /// Reads a part in either shape; `None` for one with no content.
    pub fn from_value(p: &Value) -> Option<Part> {
        let obj = p.as_object()?;
        let kind = obj.get("kind").and_then(Value::as_str);
        if matches!(kind, None | Some("text")) {
            if let Some(text) = obj.get("text").and_then(Value::as_str) {
                return Some(Part::Text(text.into()));
            }
        }
        let mut out = Map::new();
        let copy =
            |out: &mut Map<String, Value>, from: &Map<String, Value>, key: &str, to: &str| {
                if let Some(v) = from.get(key).filter(|v| !v.is_null()) {
                    out.insert(to.into(), v.clone());
                }
            };
        match obj.get("file").and_then(Value::as_object) {
            // 0.3: the file is an object of its own.
            Some(file) => {
                copy(&mut out, file, "bytes", "raw");
                copy(&mut out, file, "uri", "url");
                copy(&mut out, file, "mimeType", "mediaType");
                copy(&mut out, file, "name", "filename");
            }
            None => {
                for key in ["raw", "url", "mediaType", "filename"] {
                    copy(&mut out, obj, key, key);
                }
            }
        }
        copy(&mut out, obj, "data", "data");
        if !["raw", "url", "data"].iter().any(|k| out.contains_key(*k)) {
            return None;
        }
        copy(&mut out, obj, "metadata", "metadata");
        Some(Part::Other(out))
    }

    /// The text of a text part.
    pub fn text(&self) -> Option<&str> {
        match self {
            Part::Text(t) => Some(t),
            Part::Other(_) => None,
        }
    }

    /// About how many bytes of text the part holds (for a memory cap): a
    /// text's length, or a file or data part's strings plus a little per field.
    pub fn byte_len(&self) -> usize {
        match self {
            Part::Text(t) => t.len(),
            Part::Other(o) => o
                .iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(64, str::len))
                .sum(),
        }
    }

    /// The part in its 1.0 shape.
    pub fn to_v10(&self) -> Value {
        match self {
            Part::Text(t) => crate::wire::json::object([("text", t.as_str().into())]),
            Part::Other(o) => Value::Object(o.clone()),
        }
    }

    /// A one-line account of a non-text part for a model that reads text:
    /// `[file report.pdf (application/pdf) https://…]`, `[data {"a":1}]`.
    pub fn describe(&self) -> String {
        match self {
            Part::Text(t) => t.clone(),
            Part::Other(o) => {
                let s = |k: &str| o.get(k).and_then(Value::as_str);
                if let Some(data) = o.get("data") {
                    return format!("[data {}]", crate::wire::json::text(data));
                }
                let mut line = String::from("[file");
                for v in [s("filename"), s("mediaType")].into_iter().flatten() {
                    line.push(' ');
                    line.push_str(v);
                }
                match s("url") {
                    Some(url) => {
                        line.push(' ');
                        line.push_str(url);
                    }
                    None => line.push_str(" (inline)"),
                }
                line.push(']');
                line
            }
        }
    }
}

/// Every part with content of a `parts` array, in either shape.
pub(crate) fn read_parts(v: &Value) -> Vec<Part> {
    // A plain loop, not a `filter_map(..).collect()` chain (its own iterator
    // code in the `.wasm`; see ARCHITECTURE.md).
    let mut parts = Vec::new();
    if let Some(list) = v.get("parts").and_then(Value::as_array) {
        for p in list {
            if let Some(part) = Part::from_value(p) {
                parts.push(part);
            }
        }
    }
    parts
}

/// Parts written in one shape.
pub(crate) struct Parts<'a>(pub(crate) &'a [Part], pub(crate) crate::model::task::Shape);

impl Serialize for Parts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|p| Shaped(p, self.1)))
    }
}

struct Shaped<'a>(&'a Part, crate::model::task::Shape);

impl Serialize for Shaped<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v03 = self.1 == crate::model::task::Shape::V03;
        let mut map = s.serialize_map(None)?;
        match self.0 {
            Part::Text(text) => {
                if v03 {
                    map.serialize_entry("kind", "text")?;
                }
                map.serialize_entry("text", text)?;
            }
            Part::Other(o) if !v03 => {
                for (k, v) in o {
                    map.serialize_entry(k, v)?;
                }
            }
            Part::Other(o) if o.contains_key("data") => {
                map.serialize_entry("kind", "data")?;
                map.serialize_entry("data", &o["data"])?;
                if let Some(m) = o.get("metadata") {
                    map.serialize_entry("metadata", m)?;
                }
            }
            Part::Other(o) => {
                let mut file = Map::new();
                for (from, to) in [
                    ("raw", "bytes"),
                    ("url", "uri"),
                    ("mediaType", "mimeType"),
                    ("filename", "name"),
                ] {
                    if let Some(v) = o.get(from) {
                        file.insert(to.into(), v.clone());
                    }
                }
                map.serialize_entry("kind", "file")?;
                map.serialize_entry("file", &file)?;
                if let Some(m) = o.get("metadata") {
                    map.serialize_entry("metadata", m)?;
                }
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::task::Shape;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn write(parts: &[Part], shape: Shape) -> Value {
        serde_json::to_value(Parts(parts, shape)).expect("json")
    }

    #[test]
    fn files_and_data_read_from_either_shape_and_write_to_both() {
        let v03 = json!({"parts": [
            {"kind": "text", "text": "see"},
            {"kind": "file", "file": {"uri": "https://x/r.pdf", "mimeType": "application/pdf", "name": "r.pdf"}},
            {"kind": "file", "file": {"bytes": "iVBORw0K", "mimeType": "image/png"}},
            {"kind": "data", "data": {"rows": [1, 2]}, "metadata": {"m": 1}}]});
        let v10 = json!({"parts": [
            {"text": "see"},
            {"url": "https://x/r.pdf", "mediaType": "application/pdf", "filename": "r.pdf"},
            {"raw": "iVBORw0K", "mediaType": "image/png"},
            {"data": {"rows": [1, 2]}, "metadata": {"m": 1}}]});
        let parts = read_parts(&v03);
        assert_eq!(parts.len(), 4);
        assert_eq!(read_parts(&v10), parts);
        assert_eq!(write(&parts, Shape::V10), v10["parts"]);
        assert_eq!(write(&parts, Shape::V03), v03["parts"]);
        assert_eq!(parts[0].text(), Some("see"));
        assert_eq!(
            parts[1].describe(),
            "[file r.pdf application/pdf https://x/r.pdf]"
        );
        assert_eq!(parts[2].describe(), "[file image/png (inline)]");
        assert_eq!(parts[3].describe(), r#"[data {"rows":[1,2]}]"#);
    }

    #[test]
    fn a_part_without_content_is_not_kept() {
        for p in [
            json!({"kind": "file", "file": {"name": "x"}}),
            json!({"mediaType": "text/plain"}),
            json!(3),
        ] {
            assert_eq!(Part::from_value(&p), None, "{p}");
        }
        // Data may be any JSON value, null excepted.
        assert!(Part::from_value(&json!({"data": false})).is_some());
    }
}
