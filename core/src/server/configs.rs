//! The four push-notification config methods (set, get, list, delete, in
//! either dialect's names and shapes) as a machine: the task read for its
//! caller (its configs belong to its owner; another's task is not found),
//! then one store call, then the answer. No store, no host, no futures in
//! [`ConfigMachine`]; [`A2aServer::push_config`] is its driver.

use super::push::{check_webhook_url, configs_of, PushConfig, MAX_CONFIGS_PER_TASK};
use super::rpc::{self, RpcError, RpcRequest};
use super::store::StoreError;
use super::{
    push_not_supported, store_failed, A2aServer, Fulfiller, Io, Owner, ServerHost, TaskStore,
};
use crate::model::task::{Shape, Task};
use crate::wire::json::{object, with};
use serde_json::Value;
use std::sync::Arc;

/// Which config method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Set,
    Get,
    Delete,
    List,
}

/// What a config call asks for next.
#[must_use = "a config call's step is what it waits for: run it, or the call stalls"]
#[derive(Debug)]
pub(super) enum ConfigStep {
    /// The task ([`ConfigMachine::task`]) as its caller may see it
    /// ([`A2aServer::stored`]), then [`ConfigMachine::handle_task`].
    Task,
    /// Store this record for the task (added, or put over the one with its
    /// id), then [`ConfigMachine::handle_put`].
    Put(Value),
    /// Read the task's configs, then [`ConfigMachine::handle_configs`].
    Configs,
    /// Delete the task's config with this id, then [`ConfigMachine::handle_deleted`].
    Delete(String),
    /// The answer.
    Answer(Result<Value, RpcError>),
}

/// One config call.
pub(super) struct ConfigMachine<'a> {
    params: &'a Value,
    kind: Kind,
    v03: bool,
    task: &'a str,
    config_id: Option<&'a str>,
    /// The config being set, answered once stored.
    setting: Option<PushConfig>,
}

impl<'a> ConfigMachine<'a> {
    /// A config call; its first step is [`ConfigStep::Task`]. The task must
    /// be named (1.0 `taskId`; 0.3 `taskId` to set, `id` otherwise).
    pub(super) fn new(call: &'a RpcRequest) -> Result<ConfigMachine<'a>, RpcError> {
        let p = &call.params;
        let v03 = call.method.as_bytes().contains(&b'/');
        let text = |k: &str| p.get(k).and_then(Value::as_str);
        let Some(task) = text("taskId").or_else(|| v03.then(|| text("id")).flatten()) else {
            return Err(RpcError::invalid_field("taskId", "is required (a string)"));
        };
        let kind = match call.method.as_str() {
            "tasks/pushNotificationConfig/set"
            | "CreateTaskPushNotificationConfig"
            | "SetTaskPushNotificationConfig" => Kind::Set,
            "tasks/pushNotificationConfig/get" | "GetTaskPushNotificationConfig" => Kind::Get,
            "tasks/pushNotificationConfig/delete" | "DeleteTaskPushNotificationConfig" => {
                Kind::Delete
            }
            _ => Kind::List,
        };
        Ok(ConfigMachine {
            params: p,
            kind,
            v03,
            task,
            config_id: text(if v03 {
                "pushNotificationConfigId"
            } else {
                "id"
            }),
            setting: None,
        })
    }

    /// The task the call is about.
    pub(super) fn task(&self) -> &'a str {
        self.task
    }

    fn shape(&self) -> Shape {
        if self.v03 {
            Shape::V03
        } else {
            Shape::V10
        }
    }

    /// The task as its caller may see it. A config to set is checked
    /// (its webhook against SSRF unless `allow_private`) and named with
    /// `new_id` when it has no id; `unix_ms` dates it.
    pub(super) fn handle_task(
        &mut self,
        stored: Result<Arc<Task>, RpcError>,
        allow_private: bool,
        new_id: impl FnOnce() -> String,
        unix_ms: impl FnOnce() -> Option<u64>,
    ) -> ConfigStep {
        let task = match stored {
            Ok(task) => task,
            Err(e) => return ConfigStep::Answer(Err(e)),
        };
        let required = |field| {
            ConfigStep::Answer(Err(RpcError::invalid_field(
                field,
                "is required (a string)",
            )))
        };
        match self.kind {
            Kind::Set => {
                let p = self.params;
                let body = if self.v03 {
                    match p.get("pushNotificationConfig") {
                        Some(body) => body,
                        None => {
                            return ConfigStep::Answer(Err(RpcError::invalid_field(
                                "pushNotificationConfig",
                                "is required",
                            )))
                        }
                    }
                } else {
                    p.get("config").unwrap_or(p)
                };
                let mut config = match PushConfig::from_value(body, self.task, self.shape()) {
                    Ok(config) => config,
                    Err(e) => return ConfigStep::Answer(Err(e)),
                };
                if let Err(e) = check_webhook_url(&config.url, allow_private) {
                    return ConfigStep::Answer(Err(RpcError::invalid_field(
                        "pushNotificationConfig.url",
                        &e,
                    )));
                }
                let record = push_record(&mut config, task.owner.as_deref(), new_id, unix_ms());
                self.setting = Some(config);
                ConfigStep::Put(record)
            }
            // 1.0 names the config; 0.3 also takes the bare task id.
            Kind::Get if !self.v03 && self.config_id.is_none() => required("id"),
            Kind::Get | Kind::List => ConfigStep::Configs,
            Kind::Delete => match self.config_id {
                Some(id) => ConfigStep::Delete(id.to_string()),
                None => required("id"),
            },
        }
    }

    /// The outcome of [`ConfigStep::Put`]: the config set is the answer.
    pub(super) fn handle_put(&mut self, put: Result<bool, StoreError>) -> ConfigStep {
        let shape = self.shape();
        ConfigStep::Answer(match (put_outcome(put), self.setting.take()) {
            (Ok(()), Some(config)) => Ok(config.to_value(shape)),
            (Ok(()), None) => Err(RpcError::internal("no config was set".into())),
            (Err(e), _) => Err(e),
        })
    }

    /// The task's configs as stored: the one asked for, or all of them.
    pub(super) fn handle_configs(&mut self, read: Result<Option<Value>, StoreError>) -> ConfigStep {
        let stored = match read {
            Ok(stored) => stored,
            Err(e) => return ConfigStep::Answer(Err(store_failed(e))),
        };
        let shape = self.shape();
        let configs = configs_of(stored, self.task);
        if self.kind == Kind::Get {
            let found = match self.config_id {
                Some(id) => configs.into_iter().find(|(c, _)| c.id == id),
                None => configs.into_iter().next(),
            };
            return ConfigStep::Answer(match found {
                Some((c, _)) => Ok(c.to_value(shape)),
                None => Err(RpcError::new(
                    rpc::TASK_NOT_FOUND,
                    format!("No push notification config for task {}", self.task),
                )),
            });
        }
        let mut list: Vec<Value> = Vec::new();
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        for (c, _) in configs.iter() {
            list.push(c.to_value(shape));
        }
        ConfigStep::Answer(Ok(if self.v03 {
            Value::Array(list)
        } else {
            object([
                ("configs", Value::Array(list)),
                ("nextPageToken", "".into()),
            ])
        }))
    }

    /// The outcome of [`ConfigStep::Delete`] (deleting none is no error).
    pub(super) fn handle_deleted(&mut self, deleted: Result<bool, StoreError>) -> ConfigStep {
        ConfigStep::Answer(match deleted {
            Ok(_) if self.v03 => Ok(Value::Null),
            Ok(_) => Ok(object([])),
            Err(e) => Err(RpcError::internal(format!(
                "the push notification config could not be deleted: {e}"
            ))),
        })
    }
}

/// The store's record of `config` (named with `new_id` when it has no
/// id), owned by `owner`, set at `unix_ms`: states saved before it are not
/// sent to it.
pub(super) fn push_record(
    config: &mut PushConfig,
    owner: Option<&str>,
    new_id: impl FnOnce() -> String,
    unix_ms: Option<u64>,
) -> Value {
    if config.id.is_empty() {
        config.id = new_id();
    }
    let mut record = config.to_stored();
    if let Some(owner) = owner {
        record = with(record, "owner", owner.into());
    }
    if let Some(now) = unix_ms {
        record = with(record, "createdMs", now.into());
    }
    record
}

/// What a store's `put_push_config` came to: refused past
/// [`MAX_CONFIGS_PER_TASK`], an error when the store failed.
pub(super) fn put_outcome(put: Result<bool, StoreError>) -> Result<(), RpcError> {
    match put {
        Ok(true) => Ok(()),
        Ok(false) => Err(RpcError::invalid_params(&format!(
            "a task takes at most {MAX_CONFIGS_PER_TASK} push notification configs"
        ))),
        Err(e) => Err(RpcError::internal(format!(
            "the push notification config could not be stored: {e}"
        ))),
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The four config methods: the driver of a [`ConfigMachine`].
    pub(super) async fn push_config(
        &self,
        io: &Io<H>,
        call: &RpcRequest,
        owner: Owner<'_>,
    ) -> Result<Value, RpcError> {
        let Some((options, _)) = &self.push else {
            return Err(push_not_supported());
        };
        let mut m = ConfigMachine::new(call)?;
        let mut step = ConfigStep::Task;
        loop {
            step = match step {
                ConfigStep::Task => {
                    let stored = self.stored(io, Ok(m.task()), owner).await;
                    m.handle_task(
                        stored,
                        options.allow_private_webhooks,
                        || self.host.new_id(),
                        || self.host.unix_ms(),
                    )
                }
                ConfigStep::Put(record) => {
                    let put = io
                        .put_push_config(m.task(), record, MAX_CONFIGS_PER_TASK)
                        .await;
                    m.handle_put(put)
                }
                ConfigStep::Configs => m.handle_configs(io.push_configs(m.task()).await),
                ConfigStep::Delete(id) => {
                    m.handle_deleted(io.delete_push_config(m.task(), id).await)
                }
                ConfigStep::Answer(answer) => return answer,
            };
        }
    }

    /// Stores `config` (named with a new id when it has none) for its task,
    /// owned by `owner`: one record, added or put over the one with its id.
    pub(super) async fn put_push(
        &self,
        io: &Io<H>,
        mut config: PushConfig,
        owner: Option<&str>,
    ) -> Result<(), RpcError> {
        let record = push_record(
            &mut config,
            owner,
            || self.host.new_id(),
            self.host.unix_ms(),
        );
        let put = io
            .put_push_config(&config.task_id, record, MAX_CONFIGS_PER_TASK)
            .await;
        put_outcome(put)
    }
}

#[cfg(test)]
mod tests {
    //! The config machine alone: its steps for given tasks and store answers.
    use super::super::machine::tests::task;
    use super::*;
    use crate::server::rpc::Binding;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn call(method: &str, params: Value) -> RpcRequest {
        RpcRequest {
            id: json!(1),
            method: method.into(),
            params,
            shape: Shape::V10,
            versioned: true,
            binding: Binding::JsonRpc,
        }
    }

    fn owned(owner: &str) -> Result<Arc<Task>, RpcError> {
        let mut t = task("t1");
        t.owner = Some(owner.into());
        Ok(Arc::new(t))
    }

    fn answer(step: ConfigStep) -> Result<Value, RpcError> {
        match step {
            ConfigStep::Answer(a) => a,
            other => panic!("expected the answer, got {other:?}"),
        }
    }

    #[test]
    fn a_config_set_is_checked_named_dated_owned_and_answered_once_stored() {
        let set = call(
            "tasks/pushNotificationConfig/set",
            json!({"taskId": "t1", "pushNotificationConfig": {"url": "https://h.example/x"}}),
        );
        let mut m = ConfigMachine::new(&set).expect("ok");
        assert_eq!(m.task(), "t1");
        let ConfigStep::Put(record) =
            m.handle_task(owned("alice"), false, || "c9".into(), || Some(42))
        else {
            panic!("expected the record to be stored");
        };
        assert_eq!(record["id"], "c9");
        assert_eq!(record["owner"], "alice");
        assert_eq!(record["createdMs"], 42);
        let answered = answer(m.handle_put(Ok(true))).expect("set");
        assert_eq!(answered["pushNotificationConfig"]["id"], "c9", "{answered}");
        // A task holding the most configs already refuses one more.
        let mut m = ConfigMachine::new(&set).expect("ok");
        let _ = m.handle_task(owned("alice"), false, || "c9".into(), || None);
        let refused = answer(m.handle_put(Ok(false))).expect_err("refused");
        assert_eq!(refused.code, crate::wire::rpc::INVALID_PARAMS);
    }

    #[test]
    fn a_private_webhook_or_anothers_task_is_refused_before_anything_is_stored() {
        let params = json!({"taskId": "t1", "config": {"url": "http://127.0.0.1:9/x"}});
        let set = call("CreateTaskPushNotificationConfig", params);
        let mut m = ConfigMachine::new(&set).expect("ok");
        let refused =
            answer(m.handle_task(owned("a"), false, || "c".into(), || None)).expect_err("refused");
        assert!(refused.message.contains("url"), "{}", refused.message);
        // Allowed when the server takes private webhooks.
        let mut m = ConfigMachine::new(&set).expect("ok");
        let step = m.handle_task(owned("a"), true, || "c".into(), || None);
        assert!(matches!(step, ConfigStep::Put(_)), "{step:?}");
        // The read machine's not-found is the answer, whatever the method.
        let mut m = ConfigMachine::new(&set).expect("ok");
        let missing = Err(RpcError::new(rpc::TASK_NOT_FOUND, "Task not found: t1"));
        let refused =
            answer(m.handle_task(missing, true, || "c".into(), || None)).expect_err("not found");
        assert_eq!(refused.code, rpc::TASK_NOT_FOUND);
        // No task named at all.
        let nameless = call("ListTaskPushNotificationConfigs", json!({}));
        assert!(ConfigMachine::new(&nameless).is_err());
    }

    #[test]
    fn get_list_and_delete_read_or_delete_the_stored_configs() {
        let stored = json!([
            {"id": "a", "taskId": "t1", "url": "https://h.example/a"},
            {"id": "b", "taskId": "t1", "url": "https://h.example/b"},
        ]);
        let stored = Value::Array(
            stored
                .as_array()
                .expect("array")
                .iter()
                .map(|c| {
                    PushConfig::from_value(c, "t1", Shape::V10)
                        .expect("config")
                        .to_stored()
                })
                .collect(),
        );
        let step = |method: &str, params: Value, read: Option<Value>| {
            let c = call(method, params);
            let mut m = ConfigMachine::new(&c).expect("ok");
            match m.handle_task(owned("a"), false, String::new, || None) {
                ConfigStep::Configs => answer(m.handle_configs(Ok(read))),
                ConfigStep::Delete(id) => {
                    assert_eq!(id, "b");
                    answer(m.handle_deleted(Ok(true)))
                }
                other => answer(other),
            }
        };
        let got = step(
            "GetTaskPushNotificationConfig",
            json!({"taskId": "t1", "id": "b"}),
            Some(stored.clone()),
        )
        .expect("found");
        assert_eq!(got["url"], "https://h.example/b", "{got}");
        let unnamed = step(
            "GetTaskPushNotificationConfig",
            json!({"taskId": "t1"}),
            None,
        );
        assert_eq!(
            unnamed.expect_err("1.0 names it").code,
            crate::wire::rpc::INVALID_PARAMS
        );
        let first = step(
            "tasks/pushNotificationConfig/get",
            json!({"id": "t1"}),
            Some(stored.clone()),
        )
        .expect("0.3 takes the bare task id");
        assert_eq!(first["pushNotificationConfig"]["id"], "a", "{first}");
        let none = step(
            "GetTaskPushNotificationConfig",
            json!({"taskId": "t1", "id": "z"}),
            None,
        );
        assert_eq!(none.expect_err("none").code, rpc::TASK_NOT_FOUND);
        let list = step(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": "t1"}),
            Some(stored.clone()),
        )
        .expect("listed");
        assert_eq!(list["configs"].as_array().map(Vec::len), Some(2), "{list}");
        assert_eq!(list["nextPageToken"], "");
        let list = step(
            "tasks/pushNotificationConfig/list",
            json!({"id": "t1"}),
            Some(stored),
        )
        .expect("listed");
        assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
        let deleted = step(
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "t1", "id": "b"}),
            None,
        );
        assert_eq!(deleted.expect("deleted"), json!({}));
        let deleted = step(
            "tasks/pushNotificationConfig/delete",
            json!({"id": "t1", "pushNotificationConfigId": "b"}),
            None,
        );
        assert_eq!(deleted.expect("deleted"), Value::Null);
    }
}
