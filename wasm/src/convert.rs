//! JS values <-> JSON, JS `Error`s with a `kind`, and readers for option bags.
//!
//! Values cross the boundary as JSON text (`JSON.stringify` / `JSON.parse`):
//! the core already carries serde_json, so this costs no extra code in the
//! `.wasm`, unlike a serde <-> JS bridge.

use js_sys::{Array, Object, Reflect, JSON};
use serde_json::Value;
use toolnexus_core::{Error, ToolResult, ToolSpec};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    pub fn console_error(message: &str);
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    pub fn console_warn(message: &str);
    /// `String(v)`, which can throw (a `toString` that throws).
    #[wasm_bindgen(js_name = String, catch)]
    fn js_string(v: &JsValue) -> Result<String, JsValue>;
}

/// What an exported async method resolves to (`Ok`) or rejects with (`Err`).
pub type JsResultFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<JsValue, JsValue>>>>;

/// `future` as a JS `Promise`. Every export goes through this one boxed
/// type, so the `.wasm` holds one copy of wasm-bindgen's promise glue
/// instead of one per export (an `async fn` export instantiates its own).
pub fn promise(future: JsResultFuture) -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(future)
}

/// A JS `Error` with `message` and a `kind` property.
pub fn error(kind: &str, message: &str) -> JsValue {
    let e: JsValue = js_sys::Error::new(message).into();
    set(&e, "kind", &kind.into());
    e
}

/// An `Error` of kind `"misuse"`: the caller passed something unusable.
pub fn misuse(message: impl AsRef<str>) -> JsValue {
    error("misuse", message.as_ref())
}

/// A core error as a JS `Error`: `kind` always; `status` and `url` for
/// HTTP status errors; `code` for JSON-RPC errors.
pub fn core_error(e: &Error) -> JsValue {
    let js = error(e.kind(), &e.to_string());
    match e {
        Error::Status { status, url, .. } => {
            set(&js, "status", &(*status).into());
            set(&js, "url", &url.as_str().into());
        }
        Error::Rpc { code, .. } => set(&js, "code", &(*code as f64).into()),
        _ => {}
    }
    js
}

/// `target[key] = value`, ignoring failures (frozen objects).
pub fn set(target: &JsValue, key: &str, value: &JsValue) {
    let _ = Reflect::set(target, &JsValue::from_str(key), value);
}

/// `target[key]`, or `undefined` when `target` is not an object or the getter throws.
pub fn get(target: &JsValue, key: &str) -> JsValue {
    if !(target.is_object() || target.is_function()) {
        return JsValue::UNDEFINED;
    }
    Reflect::get(target, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// Whether `v` is `undefined` or `null`.
pub fn is_absent(v: &JsValue) -> bool {
    v.is_undefined() || v.is_null()
}

/// `s.parse::<usize>().ok()`, through the `u64` parser the core already
/// has (a second integer parser would be another copy in the `.wasm`).
pub fn parse_usize(s: &str) -> Option<usize> {
    toolnexus_core::parse_u64(s).and_then(|n| usize::try_from(n).ok())
}

/// The text of a thrown value: an `Error`'s message followed by its
/// `cause` chain (Node's `fetch failed` hides the reason in `cause`).
pub fn error_text(e: &JsValue) -> String {
    fn one(v: &JsValue) -> String {
        if let Some(s) = v.as_string() {
            return s;
        }
        if let Some(s) = get(v, "message").as_string() {
            return s;
        }
        js_string(v).unwrap_or_else(|_| "unknown error".into())
    }
    let mut text = one(e);
    let mut cause = get(e, "cause");
    // Bounded: a cause chain may be cyclic.
    for _ in 0..4 {
        if is_absent(&cause) {
            break;
        }
        let more = one(&cause);
        // (`find_str`, not `contains(&str)`: see toolnexus_core::find_str.)
        if !more.is_empty() && toolnexus_core::find_str(&text, &more).is_none() {
            text = format!("{text}: {more}");
        }
        cause = get(&cause, "cause");
    }
    text
}

/// A JS value as JSON (`undefined` is `null`). `what` names it in errors.
pub fn to_json(v: &JsValue, what: &str) -> Result<Value, JsValue> {
    if v.is_undefined() {
        return Ok(Value::Null);
    }
    let text = JSON::stringify(v).map_err(|e| {
        misuse(format!(
            "{what} cannot be turned into JSON: {}",
            error_text(&e)
        ))
    })?;
    match text.as_string() {
        // Functions and symbols stringify to undefined.
        None => Ok(Value::Null),
        Some(text) => serde_json::from_slice(text.as_bytes())
            .map_err(|e| misuse(format!("{what} is not valid JSON: {e}"))),
    }
}

/// JSON as a plain JS value.
pub fn to_js(v: &Value) -> JsValue {
    // serde_json always writes valid JSON, which JSON.parse accepts.
    JSON::parse(&toolnexus_core::json_text(v)).unwrap_or(JsValue::NULL)
}

/// A serialisable core value as a plain JS value.
pub fn ser_to_js<T: serde::Serialize>(v: &T) -> JsValue {
    // Straight to JSON text (the serialiser the wire already uses), not
    // through a `Value`: one instance of each `Serialize` impl, not two.
    serde_json::to_string(v)
        .ok()
        .and_then(|text| JSON::parse(&text).ok())
        .unwrap_or(JsValue::NULL)
}

/// `{output, isError, metadata?}` (set one by one: no `Serialize` of
/// the result in the `.wasm` for it).
pub fn result_to_js(r: &ToolResult) -> JsValue {
    let o: JsValue = Object::new().into();
    set(&o, "output", &r.output.as_str().into());
    set(&o, "isError", &r.is_error.into());
    if let Some(m) = &r.metadata {
        set(&o, "metadata", &to_js(m));
    }
    o
}

/// `{name, description, inputSchema, source}`.
pub fn spec_to_js(s: &ToolSpec) -> JsValue {
    let o: JsValue = Object::new().into();
    set(&o, "name", &s.name.as_str().into());
    set(&o, "description", &s.description.as_str().into());
    set(&o, "inputSchema", &to_js(&s.input_schema));
    set(&o, "source", &s.source.as_str().into());
    o
}

/// Tool specs as an array.
pub fn specs_to_js(specs: &[ToolSpec]) -> JsValue {
    specs.iter().map(spec_to_js).collect::<Array>().into()
}

/// Plain JSON values as an array.
pub fn values_to_js(values: &[Value]) -> JsValue {
    values.iter().map(to_js).collect::<Array>().into()
}

/// `options[key]` as a string, if set. `what` names the option bag in errors.
pub fn opt_string(options: &JsValue, key: &str, what: &str) -> Result<Option<String>, JsValue> {
    let v = get(options, key);
    if is_absent(&v) {
        return Ok(None);
    }
    v.as_string()
        .map(Some)
        .ok_or_else(|| misuse(format!("{what}.{key} must be a string")))
}

/// `options[key]` as a string; absent is an error.
#[cfg(feature = "server")]
pub fn req_string(options: &JsValue, key: &str, what: &str) -> Result<String, JsValue> {
    opt_string(options, key, what)?
        .ok_or_else(|| misuse(format!("{what}.{key} (a string) is required")))
}

/// `options[key]` as a whole number >= 0, if set.
pub fn opt_u64(options: &JsValue, key: &str, what: &str) -> Result<Option<u64>, JsValue> {
    let v = get(options, key);
    if is_absent(&v) {
        return Ok(None);
    }
    match v.as_f64() {
        Some(n) if n.is_finite() && n >= 0.0 && n.fract() == 0.0 => Ok(Some(n as u64)),
        _ => Err(misuse(format!(
            "{what}.{key} must be a whole number of milliseconds (>= 0)"
        ))),
    }
}

/// `options[key]` as a function, if set.
pub fn opt_function(
    options: &JsValue,
    key: &str,
    what: &str,
) -> Result<Option<js_sys::Function>, JsValue> {
    let v = get(options, key);
    if is_absent(&v) {
        return Ok(None);
    }
    v.dyn_into::<js_sys::Function>()
        .map(Some)
        .map_err(|_| misuse(format!("{what}.{key} must be a function")))
}

/// `options.onSpan` as core's span hook. The client entry records no
/// spans (core's feature `spans`: about 3 KB gzipped): there it is refused.
pub fn opt_span_hook(
    options: &JsValue,
    what: &str,
) -> Result<Option<toolnexus_core::SpanHook>, JsValue> {
    let hook = opt_function(options, "onSpan", what)?;
    #[cfg(not(feature = "server"))]
    return match hook {
        Some(_) => Err(misuse(
            "onSpan needs the full build: import from \"toolnexus-wasm\", not \"toolnexus-wasm/client\"",
        )),
        None => Ok(None),
    };
    #[cfg(feature = "server")]
    Ok(hook.map(span_hook))
}

/// `onSpan(span)`: each span core records as `{name, kind, traceId,
/// spanId, parentSpanId?, startTimeMs, endTimeMs, attributes, events,
/// status}`, times in ms since the epoch (`parentSpanId` absent for a
/// root; `events`: a task's states, `{name, timeMs, attributes}`). The JS
/// hook is the exporter: the `.wasm` has none.
#[cfg(feature = "server")]
pub fn span_hook(hook: js_sys::Function) -> toolnexus_core::SpanHook {
    // Nothing here crosses threads.
    #[allow(clippy::arc_with_non_send_sync)]
    std::sync::Arc::new(move |s: &toolnexus_core::SpanRecord| {
        let span: JsValue = Object::new().into();
        let (id, parent) = s.ids_hex();
        // Core's times are on the transport clock: counted back from now.
        let now = js_sys::Date::now();
        let at = |ms: u64| now - s.end_ms.saturating_sub(ms) as f64;
        set(&span, "name", &s.name.as_str().into());
        set(&span, "kind", &s.kind.as_str().into());
        set(&span, "traceId", &s.context.trace_id_hex().into());
        set(&span, "spanId", &id.into());
        if s.parent_span_id != [0; 8] {
            set(&span, "parentSpanId", &parent.into());
        }
        set(&span, "startTimeMs", &at(s.start_ms).into());
        set(&span, "endTimeMs", &now.into());
        let attributes: JsValue = Object::new().into();
        for (k, v) in &s.attributes {
            set(&attributes, k, &v.as_str().into());
        }
        set(&span, "attributes", &attributes);
        let events = Array::new();
        for (ms, state) in &s.events {
            let e: JsValue = Object::new().into();
            set(&e, "name", &"a2a.task.state".into());
            set(&e, "timeMs", &at(*ms).into());
            let a: JsValue = Object::new().into();
            set(&a, "a2a.task.state", &(*state).into());
            set(&e, "attributes", &a);
            events.push(&e);
        }
        set(&span, "events", &events);
        set(
            &span,
            "status",
            &(if s.error { "error" } else { "ok" }).into(),
        );
        if let Err(e) = hook.call1(&JsValue::UNDEFINED, &span) {
            console_error(&format!("toolnexus: onSpan threw: {}", error_text(&e)));
        }
    })
}

/// `options.traceparent` (and `tracestate`), when valid.
pub fn trace_option(options: &JsValue) -> Option<toolnexus_core::TraceContext> {
    let parent = get(options, "traceparent").as_string()?;
    let state = get(options, "tracestate").as_string();
    toolnexus_core::TraceContext::parse(&parent, state.as_deref())
}

/// A `{name: "value"}` object as pairs, in insertion order.
pub fn string_pairs(v: &JsValue, what: &str) -> Result<Vec<(String, String)>, JsValue> {
    if is_absent(v) {
        return Ok(Vec::new());
    }
    if !v.is_object() || Array::is_array(v) {
        return Err(misuse(format!(
            "{what} must be an object of header names to string values"
        )));
    }
    // A plain loop, not `collect::<Result<..>>()` (see ARCHITECTURE.md).
    let mut pairs = Vec::new();
    for entry in Object::entries(v.unchecked_ref()).iter() {
        let name = Reflect::get_u32(&entry, 0)
            .ok()
            .and_then(|k| k.as_string())
            .unwrap_or_default();
        match Reflect::get_u32(&entry, 1).ok().and_then(|v| v.as_string()) {
            Some(value) => pairs.push((name, value)),
            None => return Err(misuse(format!("{what}.{name} must be a string"))),
        }
    }
    Ok(pairs)
}

/// `[[name, value], …]` (a `Headers` object or an array of pairs) as pairs.
pub fn header_pairs(headers: &JsValue) -> Vec<(String, String)> {
    // A plain loop, not a `filter_map(..).collect()` chain (see ARCHITECTURE.md).
    let mut pairs = Vec::new();
    for pair in Array::from(headers).iter() {
        let Some(name) = Reflect::get_u32(&pair, 0).ok().and_then(|n| n.as_string()) else {
            continue;
        };
        if let Some(value) = Reflect::get_u32(&pair, 1).ok().and_then(|v| v.as_string()) {
            pairs.push((name, value));
        }
    }
    pairs
}

/// Pairs as `[[name, value], …]`, the shape `fetch` and `Response` take.
pub fn pairs_to_js(pairs: &[(String, String)]) -> JsValue {
    pairs
        .iter()
        .map(|(k, v)| -> JsValue { Array::of2(&k.as_str().into(), &v.as_str().into()).into() })
        .collect::<Array>()
        .into()
}

/// The caller's `onEvent` from an options object: each event of an A2A
/// tool's task, in the A2A 0.3 shape (`kind`: task, status-update,
/// artifact-update or message), as it happens. A throwing callback is logged
/// and never stops the call.
pub fn event_sink(
    options: &JsValue,
    what: &str,
) -> Result<impl FnMut(toolnexus_core::StreamEvent), JsValue> {
    let on_event = opt_function(options, "onEvent", what)?;
    Ok(move |event: toolnexus_core::StreamEvent| {
        if let Some(f) = &on_event {
            let js = ser_to_js(&event.shaped(toolnexus_core::Shape::V03));
            if let Err(e) = f.call1(&JsValue::NULL, &js) {
                console_error(&format!("onEvent threw: {}", error_text(&e)));
            }
        }
    })
}
