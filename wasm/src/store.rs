//! The handler's task store: the core's bounded memory store, or a JS object
//! `{get(id), save(task)}` returning promises (KV, Durable Objects, …).
//!
//! Only the calls cross here: the store contract (versions, the
//! compare-and-swap, leases, paging) is the core's [`TaskStore`] policy.

#[cfg(feature = "push")]
use crate::convert::to_js;
use crate::convert::{error_text, get, is_absent, ser_to_js, to_json};
use futures_util::FutureExt;
use js_sys::{Function, Promise};
use std::future::Future;
use toolnexus_core::server::{
    CellLocks, HostStore, MemoryStore, StoreError, TaskFilter, TaskStore,
};
use toolnexus_core::MaybeSend;
use toolnexus_core::Task;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// The memory store, or a JS object `{get(id), save(task)}` returning
/// promises (KV, Durable Objects, …): core's one store dispatch. Tasks
/// cross as A2A task objects in their own dialect, with an `owner` key when
/// the server authenticates callers (kept by the store, never sent to a
/// caller).
pub type HandlerStore = HostStore<Memory, JsStore>;

/// Core's memory store as the handler uses it: tasks, their list and their
/// push configs, without the event log and the per-config and retention
/// calls (its caps bound it; one isolate follows its own tasks in memory;
/// about 1.2 KB of the full `.wasm`, gzipped).
#[derive(Default)]
pub struct Memory(pub MemoryStore<CellLocks>);

impl TaskStore for Memory {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        self.0.get(id)
    }

    fn get_shared(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<std::sync::Arc<Task>>, StoreError>> + MaybeSend {
        self.0.get_shared(id)
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        self.0.save(task)
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        self.0.list(filter)
    }

    #[cfg(feature = "push")]
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        self.0.get_push_configs(task_id)
    }

    #[cfg(feature = "push")]
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        self.0.save_push_configs(task_id, configs)
    }
}

/// The JS object, and the push configs kept for the handler's life when it
/// has no `getPushConfigs`/`savePushConfigs`.
pub struct JsStore(
    pub JsValue,
    #[cfg_attr(not(feature = "push"), allow(dead_code))] pub LocalPush,
);

/// Push configs by task id, for a JS store that keeps none itself.
#[cfg_attr(not(feature = "push"), allow(dead_code))]
#[derive(Default, Clone)]
pub struct LocalPush(std::rc::Rc<std::cell::RefCell<Vec<(String, serde_json::Value)>>>);

/// `store[method](...args)`, awaited (a promise or a plain value): `None`
/// when the store has no such function. The one async step of every store
/// call: each call maps its outcome with a plain function, so the calls
/// share one state machine.
async fn call_js(
    store: JsValue,
    method: &'static str,
    args: js_sys::Array,
) -> Result<Option<JsValue>, JsValue> {
    let Some(f) = get(&store, method).dyn_ref::<Function>().cloned() else {
        return Ok(None);
    };
    let returned = f.apply(&store, &args)?;
    JsFuture::from(Promise::resolve(&returned)).await.map(Some)
}

/// A call's outcome when the function is required (`get`, `save`).
fn required(outcome: Result<Option<JsValue>, JsValue>, method: &str) -> Result<JsValue, JsValue> {
    outcome?.ok_or_else(|| JsValue::from(format!("the store has no {method} function")))
}

fn store_error(e: JsValue) -> StoreError {
    StoreError::new(error_text(&e))
}

/// `store.save(task)`: resolving `false`, or rejecting with an error whose
/// `conflict` is `true`, is a refused compare-and-swap ([`StoreError::conflict`]).
fn js_saved(
    outcome: Result<Option<JsValue>, JsValue>,
    id: &str,
    version: u64,
) -> Result<(), StoreError> {
    match required(outcome, "save") {
        Ok(v) if v.as_bool() != Some(false) => Ok(()),
        Err(e) if get(&e, "conflict").as_bool() != Some(true) => Err(store_error(e)),
        _ => Err(StoreError::conflict(id, None, version)),
    }
}

/// `store.listPage(query)` and `store.list(query)` get the same query: the
/// filter, and (for `listPage`) where the page starts and its size.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Query<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    context_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_timestamp_after: Option<String>,
    /// Only this caller's tasks (the `owner` the stored tasks carry).
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    /// After the task with this status time (Unix ms) and id.
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<After<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<usize>,
}

#[derive(serde::Serialize)]
struct After<'a> {
    timestamp: u64,
    id: &'a str,
}

fn query<'a>(
    filter: &'a TaskFilter,
    after: Option<(u64, &'a str)>,
    limit: Option<usize>,
) -> Query<'a> {
    Query {
        context_id: filter.context_id.as_deref(),
        status: filter.state.map(|s| s.as_str()),
        status_timestamp_after: filter.updated_after_ms.map(toolnexus_core::format_rfc3339),
        owner: filter.owner.as_deref(),
        after: after.map(|(timestamp, id)| After { timestamp, id }),
        limit,
    }
}

/// The tasks in a JS array (or `{tasks}`) a store gave.
fn tasks_of(v: &JsValue, what: &str) -> Result<Vec<Task>, StoreError> {
    let value = to_json(v, what).map_err(|e| StoreError::new(error_text(&e)))?;
    let items = value
        .get("tasks")
        .unwrap_or(&value)
        .as_array()
        .ok_or_else(|| StoreError::new(format!("{what} must be an array of tasks")))?;
    Ok(items.iter().filter_map(Task::from_stored).collect())
}

/// `store.get(id)`: the task, or `None` (null or undefined).
fn js_got(outcome: Result<Option<JsValue>, JsValue>, id: &str) -> Result<Option<Task>, StoreError> {
    let v = required(outcome, "get").map_err(store_error)?;
    if is_absent(&v) {
        return Ok(None);
    }
    let value = to_json(&v, "the stored task").map_err(store_error)?;
    Task::from_stored(&value).map(Some).ok_or_else(|| {
        StoreError::new(format!(
            "the store returned something that is not a task for {id}"
        ))
    })
}

/// `store.getPushConfigs(taskId)`: the array last given to
/// `savePushConfigs` (or null).
#[cfg(feature = "push")]
fn js_got_push(v: JsValue) -> Result<Option<serde_json::Value>, StoreError> {
    if is_absent(&v) {
        return Ok(None);
    }
    to_json(&v, "the stored push configs")
        .map(Some)
        .map_err(store_error)
}

/// One argument, as `call_js` takes them.
fn arg(v: JsValue) -> js_sys::Array {
    js_sys::Array::of1(&v)
}

/// `{key1: a, key2: b}` of two numbers.
fn numbers(key1: &str, a: f64, key2: &str, b: f64) -> js_sys::Array {
    let o: JsValue = js_sys::Object::new().into();
    crate::convert::set(&o, key1, &a.into());
    crate::convert::set(&o, key2, &b.into());
    arg(o)
}

impl TaskStore for JsStore {
    /// `store.getPushConfigs(taskId)` when the store has it; without it, the
    /// handler's own.
    #[cfg(feature = "push")]
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        let (local, task_id) = (self.1.clone(), task_id.to_string());
        call_js(
            self.0.clone(),
            "getPushConfigs",
            arg(task_id.as_str().into()),
        )
        .map(move |outcome| match outcome {
            Ok(Some(v)) => js_got_push(v),
            Ok(None) => Ok(local
                .0
                .borrow()
                .iter()
                .find(|(id, _)| *id == task_id)
                .map(|(_, v)| v.clone())),
            Err(e) => Err(store_error(e)),
        })
    }

    /// `store.savePushConfigs(taskId, configs)` when the store has it;
    /// without it, kept by the handler (for its life).
    #[cfg(feature = "push")]
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        let (local, task_id, configs) = (self.1.clone(), task_id.to_string(), configs.clone());
        let args = js_sys::Array::of2(&task_id.as_str().into(), &to_js(&configs));
        call_js(self.0.clone(), "savePushConfigs", args).map(move |outcome| match outcome {
            Ok(Some(_)) => Ok(()),
            Ok(None) => {
                let mut kept = local.0.borrow_mut();
                kept.retain(|(id, _)| *id != task_id);
                kept.push((task_id, configs));
                Ok(())
            }
            Err(e) => Err(store_error(e)),
        })
    }

    /// `store.list(query)`, when the store has one: an array of tasks (or a
    /// promise of one). The query is a hint (`{contextId?, status?,
    /// statusTimestampAfter?, owner?}`); the server filters again.
    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        let args = arg(ser_to_js(&query(filter, None, None)));
        call_js(self.0.clone(), "list", args).map(|outcome| match outcome {
            Ok(Some(listed)) => tasks_of(&listed, "the store's list()").map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(store_error(e)),
        })
    }

    /// `store.listPage(query)`, when the store has one: `{tasks, totalSize}`,
    /// one page in the core's order (see [`TaskStore::list_page`]).
    fn list_page(
        &self,
        filter: &TaskFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<(Vec<Task>, usize)>, StoreError>> + MaybeSend {
        let args = arg(ser_to_js(&query(filter, after, Some(limit))));
        call_js(self.0.clone(), "listPage", args).map(|outcome| match outcome {
            Ok(Some(page)) => {
                let total = get(&page, "totalSize").as_f64().unwrap_or(0.0) as usize;
                Ok(Some((tasks_of(&page, "the store's listPage()")?, total)))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(store_error(e)),
        })
    }

    /// `store.deleteFinished({before, limit})`, when the store has one:
    /// deletes the terminal tasks whose status is older than `before` (the
    /// core's retention sweep decides `before`); how many went.
    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        let args = numbers("before", before_ms as f64, "limit", limit as f64);
        call_js(self.0.clone(), "deleteFinished", args).map(|outcome| match outcome {
            Ok(Some(gone)) => Ok(gone.as_f64().unwrap_or(0.0) as usize),
            Ok(None) => Ok(0),
            Err(e) => Err(store_error(e)),
        })
    }

    /// `store.expired({now, limit})`, when the store has one: the active
    /// tasks whose lease ended before `now`.
    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>, StoreError>> + MaybeSend {
        let args = numbers("now", now_ms as f64, "limit", limit as f64);
        call_js(self.0.clone(), "expired", args).map(|outcome| match outcome {
            Ok(Some(v)) => tasks_of(&v, "the store's expired()"),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(store_error(e)),
        })
    }

    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        let id = id.to_string();
        call_js(self.0.clone(), "get", arg(id.as_str().into()))
            .map(move |outcome| js_got(outcome, &id))
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        // Straight to JSON text, as events are: Task::to_value would
        // compile every task shape a second time, for the value
        // serializer. The stored form keeps the task's owner.
        let (id, version) = (task.id.clone(), task.revision.version);
        call_js(self.0.clone(), "save", arg(ser_to_js(&task.stored())))
            .map(move |outcome| js_saved(outcome, &id, version))
    }
}
