//! The handler's task store: the core's bounded memory store, or a JS object
//! `{get(id), save(task)}` returning promises (KV, Durable Objects, …).
//!
//! Only the calls cross here: the store contract (versions, the
//! compare-and-swap, leases, paging) is the core's [`TaskStore`] policy.

#[cfg(feature = "push")]
use crate::convert::to_js;
use crate::convert::{error_text, get, is_absent, ser_to_js, to_json};
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

async fn call_store(
    store: JsValue,
    method: &'static str,
    arg: JsValue,
) -> Result<JsValue, StoreError> {
    call_raw(store, method, arg)
        .await
        .map_err(|e| StoreError::new(error_text(&e)))
}

async fn call_raw(store: JsValue, method: &'static str, arg: JsValue) -> Result<JsValue, JsValue> {
    let f = get(&store, method)
        .dyn_into::<Function>()
        .map_err(|_| JsValue::from(format!("the store has no {method} function")))?;
    JsFuture::from(Promise::resolve(&f.call1(&store, &arg)?)).await
}

/// `store.save(task)`: resolving `false`, or rejecting with an error whose
/// `conflict` is `true`, is a refused compare-and-swap ([`StoreError::conflict`]).
async fn js_save(
    store: JsValue,
    task: JsValue,
    id: String,
    version: u64,
) -> Result<(), StoreError> {
    match call_raw(store, "save", task).await {
        Ok(v) if v.as_bool() != Some(false) => Ok(()),
        Err(e) if get(&e, "conflict").as_bool() != Some(true) => {
            Err(StoreError::new(error_text(&e)))
        }
        _ => Err(StoreError::conflict(&id, None, version)),
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

async fn js_get(store: JsValue, id: String) -> Result<Option<Task>, StoreError> {
    let v = call_store(store, "get", id.as_str().into()).await?;
    if is_absent(&v) {
        return Ok(None);
    }
    let value = to_json(&v, "the stored task").map_err(|e| StoreError::new(error_text(&e)))?;
    Task::from_stored(&value).map(Some).ok_or_else(|| {
        StoreError::new(format!(
            "the store returned something that is not a task for {id}"
        ))
    })
}

/// `store.list(query)`, when the store has one: an array of tasks (or a
/// promise of one). The query is a hint (`{contextId?, status?,
/// statusTimestampAfter?, owner?}`); the server filters again.
async fn js_list(store: JsValue, filter: TaskFilter) -> Result<Option<Vec<Task>>, StoreError> {
    if !get(&store, "list").is_function() {
        return Ok(None);
    }
    let listed = call_store(store, "list", ser_to_js(&query(&filter, None, None))).await?;
    tasks_of(&listed, "the store's list()").map(Some)
}

/// `store.listPage(query)`, when the store has one: `{tasks, totalSize}`,
/// one page in the core's order (see [`TaskStore::list_page`]).
async fn js_list_page(
    store: JsValue,
    arg: JsValue,
) -> Result<Option<(Vec<Task>, usize)>, StoreError> {
    if !get(&store, "listPage").is_function() {
        return Ok(None);
    }
    let page = call_store(store, "listPage", arg).await?;
    let total = get(&page, "totalSize").as_f64().unwrap_or(0.0) as usize;
    Ok(Some((tasks_of(&page, "the store's listPage()")?, total)))
}

/// `store.expired({now, limit})`, when the store has one: the active tasks
/// whose lease ended before `now`.
async fn js_expired(store: JsValue, now_ms: u64, limit: usize) -> Result<Vec<Task>, StoreError> {
    if !get(&store, "expired").is_function() {
        return Ok(Vec::new());
    }
    let arg: JsValue = js_sys::Object::new().into();
    crate::convert::set(&arg, "now", &(now_ms as f64).into());
    crate::convert::set(&arg, "limit", &(limit as f64).into());
    tasks_of(
        &call_store(store, "expired", arg).await?,
        "the store's expired()",
    )
}

/// `store.deleteFinished({before, limit})`, when the store has one: deletes
/// the terminal tasks whose status is older than `before` (the core's
/// retention sweep decides `before`); how many went.
async fn js_delete_finished(
    store: JsValue,
    before_ms: u64,
    limit: usize,
) -> Result<usize, StoreError> {
    if !get(&store, "deleteFinished").is_function() {
        return Ok(0);
    }
    let arg: JsValue = js_sys::Object::new().into();
    crate::convert::set(&arg, "before", &(before_ms as f64).into());
    crate::convert::set(&arg, "limit", &(limit as f64).into());
    let gone = call_store(store, "deleteFinished", arg).await?;
    Ok(gone.as_f64().unwrap_or(0.0) as usize)
}

/// `store.getPushConfigs(taskId)`, when the store has it: the array last
/// given to `savePushConfigs` (or null). Without it, the handler's own.
#[cfg(feature = "push")]
async fn js_get_push(
    store: JsValue,
    local: LocalPush,
    task_id: String,
) -> Result<Option<serde_json::Value>, StoreError> {
    if !get(&store, "getPushConfigs").is_function() {
        let kept = local.0.borrow();
        return Ok(kept
            .iter()
            .find(|(id, _)| *id == task_id)
            .map(|(_, v)| v.clone()));
    }
    let v = call_store(store, "getPushConfigs", task_id.as_str().into()).await?;
    if is_absent(&v) {
        return Ok(None);
    }
    to_json(&v, "the stored push configs")
        .map(Some)
        .map_err(|e| StoreError::new(error_text(&e)))
}

/// `store.savePushConfigs(taskId, configs)`, when the store has it;
/// without it, kept by the handler (for its life).
#[cfg(feature = "push")]
async fn js_save_push(
    store: JsValue,
    local: LocalPush,
    task_id: String,
    configs: serde_json::Value,
) -> Result<(), StoreError> {
    let f = get(&store, "savePushConfigs");
    let Some(f) = f.dyn_ref::<Function>() else {
        let mut kept = local.0.borrow_mut();
        kept.retain(|(id, _)| *id != task_id);
        kept.push((task_id, configs));
        return Ok(());
    };
    let configs = to_js(&configs);
    let returned = f
        .call2(&store, &task_id.as_str().into(), &configs)
        .map_err(|e| StoreError::new(error_text(&e)))?;
    JsFuture::from(Promise::resolve(&returned))
        .await
        .map(|_| ())
        .map_err(|e| StoreError::new(error_text(&e)))
}

impl TaskStore for JsStore {
    #[cfg(feature = "push")]
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        js_get_push(self.0.clone(), self.1.clone(), task_id.to_string())
    }

    #[cfg(feature = "push")]
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        js_save_push(
            self.0.clone(),
            self.1.clone(),
            task_id.to_string(),
            configs.clone(),
        )
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        js_list(self.0.clone(), filter.clone())
    }

    fn list_page(
        &self,
        filter: &TaskFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<(Vec<Task>, usize)>, StoreError>> + MaybeSend {
        js_list_page(
            self.0.clone(),
            ser_to_js(&query(filter, after, Some(limit))),
        )
    }

    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        js_delete_finished(self.0.clone(), before_ms, limit)
    }

    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>, StoreError>> + MaybeSend {
        js_expired(self.0.clone(), now_ms, limit)
    }

    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        js_get(self.0.clone(), id.to_string())
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        // Straight to JSON text, as events are: Task::to_value would
        // compile every task shape a second time, for the value
        // serializer. The stored form keeps the task's owner.
        js_save(
            self.0.clone(),
            ser_to_js(&task.stored()),
            task.id.clone(),
            task.revision.version,
        )
    }
}
