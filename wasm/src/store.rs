//! The handler's task store: the core's bounded memory store, or a JS object
//! `{get(id), save(task)}` returning promises (KV, Durable Objects, …).

use crate::convert::{error_text, get, is_absent, ser_to_js, to_json};
use futures_util::future::Either;
use js_sys::{Function, Promise};
use std::future::Future;
use toolnexus_core::server::{CellLocks, MemoryStore, StoreError, TaskFilter, TaskStore};
use toolnexus_core::MaybeSend;
use toolnexus_core::Task;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// The memory store, or a JS object `{get(id), save(task)}` returning
/// promises (KV, Durable Objects, …). Tasks cross as A2A task objects in
/// their own dialect, with an `owner` key when the server authenticates
/// callers (kept by the store, never sent to a caller).
pub enum HandlerStore {
    Memory(MemoryStore<CellLocks>),
    Js(JsValue),
}

async fn call_store(
    store: JsValue,
    method: &'static str,
    arg: JsValue,
) -> Result<JsValue, StoreError> {
    let f = get(&store, method)
        .dyn_into::<Function>()
        .map_err(|_| StoreError::new(format!("the store has no {method} function")))?;
    let returned = f
        .call1(&store, &arg)
        .map_err(|e| StoreError::new(error_text(&e)))?;
    JsFuture::from(Promise::resolve(&returned))
        .await
        .map_err(|e| StoreError::new(error_text(&e)))
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

/// `store.list(filter)`, when the store has one: an array of tasks (or a
/// promise of one). The filter is a hint (`{contextId?, status?,
/// statusTimestampAfter?}`); the server filters again.
async fn js_list(store: JsValue, filter: TaskFilter) -> Result<Option<Vec<Task>>, StoreError> {
    if !get(&store, "list").is_function() {
        return Ok(None);
    }
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Hint {
        #[serde(skip_serializing_if = "Option::is_none")]
        context_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status_timestamp_after: Option<String>,
        /// Only this caller's tasks (the `owner` the stored tasks carry).
        #[serde(skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    }
    let hint = Hint {
        context_id: filter.context_id,
        status: filter.state.map(|s| s.as_str()),
        status_timestamp_after: filter.updated_after_ms.map(toolnexus_core::format_rfc3339),
        owner: filter.owner,
    };
    let listed = call_store(store, "list", ser_to_js(&hint)).await?;
    let value =
        to_json(&listed, "the listed tasks").map_err(|e| StoreError::new(error_text(&e)))?;
    let items = value
        .as_array()
        .ok_or_else(|| StoreError::new("the store's list() must give an array of tasks"))?;
    Ok(Some(items.iter().filter_map(Task::from_stored).collect()))
}

/// `store.getPushConfigs(taskId)`, when the store has it: the array last
/// given to `savePushConfigs` (or null). Without it, none are stored.
#[cfg(feature = "push")]
async fn js_get_push(
    store: JsValue,
    task_id: String,
) -> Result<Option<serde_json::Value>, StoreError> {
    if !get(&store, "getPushConfigs").is_function() {
        return Ok(None);
    }
    let v = call_store(store, "getPushConfigs", task_id.as_str().into()).await?;
    if is_absent(&v) {
        return Ok(None);
    }
    to_json(&v, "the stored push configs")
        .map(Some)
        .map_err(|e| StoreError::new(error_text(&e)))
}

/// `store.savePushConfigs(taskId, configs)`, when the store has it.
#[cfg(feature = "push")]
async fn js_save_push(store: JsValue, task_id: String, configs: JsValue) -> Result<(), StoreError> {
    let f = get(&store, "savePushConfigs");
    let Some(f) = f.dyn_ref::<Function>() else {
        return Ok(());
    };
    let returned = f
        .call2(&store, &task_id.as_str().into(), &configs)
        .map_err(|e| StoreError::new(error_text(&e)))?;
    JsFuture::from(Promise::resolve(&returned))
        .await
        .map(|_| ())
        .map_err(|e| StoreError::new(error_text(&e)))
}

impl TaskStore for HandlerStore {
    #[cfg(feature = "push")]
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        match self {
            HandlerStore::Memory(m) => Either::Left(m.get_push_configs(task_id)),
            HandlerStore::Js(s) => Either::Right(js_get_push(s.clone(), task_id.to_string())),
        }
    }

    #[cfg(feature = "push")]
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        match self {
            HandlerStore::Memory(m) => Either::Left(m.save_push_configs(task_id, configs)),
            HandlerStore::Js(s) => Either::Right(js_save_push(
                s.clone(),
                task_id.to_string(),
                ser_to_js(configs),
            )),
        }
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        match self {
            HandlerStore::Memory(m) => {
                Either::Left(std::future::ready(Ok(Some(m.list_now(filter)))))
            }
            HandlerStore::Js(s) => Either::Right(js_list(s.clone(), filter.clone())),
        }
    }

    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        match self {
            HandlerStore::Memory(m) => Either::Left(std::future::ready(Ok(m.get_now(id)))),
            HandlerStore::Js(s) => Either::Right(js_get(s.clone(), id.to_string())),
        }
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        match self {
            HandlerStore::Memory(m) => Either::Left(std::future::ready(m.save_now(task))),
            HandlerStore::Js(s) => {
                // Straight to JSON text, as events are: Task::to_value would
                // compile every task shape a second time, for the value
                // serializer. The stored form keeps the task's owner.
                let task = ser_to_js(&task.stored());
                let fut = call_store(s.clone(), "save", task);
                Either::Right(async move { fut.await.map(|_| ()) })
            }
        }
    }
}
