//! A task's life in the server: reading it for a caller, creating it,
//! starting its fulfilment, continuing and canceling it.

use super::*;

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The stored task `params.id` names. A plain function: an async
    /// wrapper around [`Self::stored`] would be a state machine of its own.
    pub(super) fn existing<'a>(
        &'a self,
        params: &'a Value,
        owner: Owner<'a>,
    ) -> impl Future<Output = Result<Task, RpcError>> + 'a {
        self.stored(task_id(params), owner)
    }

    /// The stored task `id` (or the error reading it from the call): unknown
    /// is -32001, and so is another caller's (the same answer, so nothing
    /// tells that it exists).
    pub(super) async fn stored(
        &self,
        id: Result<&str, RpcError>,
        owner: Owner<'_>,
    ) -> Result<Task, RpcError> {
        let id = id?;
        match self.store.get(id).await {
            Ok(Some(task)) if !visible(&task, owner) => Err(task_not_found(id)),
            Ok(Some(task)) if self.abandoned(&task) => Box::pin(self.fail_abandoned(task)).await,
            Ok(Some(task)) => Ok(task),
            Ok(None) => Err(task_not_found(id)),
            Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
        }
    }

    /// Whether [`ServerOptions::interrupted_after`] says the fulfilment of
    /// this stored task is gone: still `submitted`/`working`, silent that
    /// long, and not running here.
    /// Also: its lease ([`ServerOptions::lease`]) ran out.
    pub(super) fn abandoned(&self, task: &Task) -> bool {
        if !task.state.is_active() {
            return false;
        }
        let Some(now) = self.host.unix_ms() else {
            return false;
        };
        let silent = match (
            &task.revision.lease,
            self.interrupted_after_ms,
            task.updated_ms,
        ) {
            (Some(_), _, _) => self.lease_expired(task, now),
            (None, Some(after_ms), Some(updated)) => now.saturating_sub(updated) >= after_ms,
            _ => false,
        };
        silent && !self.tasks().is_running(&task.id)
    }

    /// Fails an [`abandoned`](Self::abandoned) task as [`INTERRUPTED`] and
    /// saves it so. Boxed where it is awaited: it is rare, and inlined it
    /// would grow every future that reads a task.
    ///
    /// A compare-and-swap: if the task changed meanwhile (its replica
    /// renewed the lease, another settled it), the stored task is the answer.
    pub(super) async fn fail_abandoned(&self, mut task: Task) -> Result<Task, RpcError> {
        let silent_s = task.updated_ms.map_or(0, |u| {
            self.host.unix_ms().unwrap_or(u).saturating_sub(u) / 1000
        });
        let holder = task.revision.lease.take().map(|l| l.holder);
        mark_interrupted(&mut task, self.host.unix_ms());
        task.revision.version += 1;
        let logged = [machine::status(
            &task,
            task.state,
            task.status_message.clone(),
            task.updated_ms,
        )];
        match self.store.save_with_events(&task, &logged).await {
            Ok(()) => {}
            Err(e) if e.is_conflict() => {
                return match self.store.get(&task.id).await {
                    Ok(Some(stored)) => Ok(stored),
                    Ok(None) => Err(task_not_found(&task.id)),
                    Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
                };
            }
            Err(e) => return Err(not_stored(e.message())),
        }
        self.store_changed(&task.id, Some(task.revision.version));
        self.host.report(&match holder {
            Some(holder) => format!(
                "task {}: the lease of replica {holder} ran out (no progress for {silent_s} s); marked failed",
                task.id
            ),
            None => format!(
                "task {} made no progress for {silent_s} s and is not running here; marked failed",
                task.id
            ),
        });
        Ok(task)
    }

    pub(super) fn fulfil(
        self: &Arc<Self>,
        request: FulfilRequest,
    ) -> BoxFuture<'static, Result<String, String>> {
        let hooks: Arc<dyn stream::Hooks> = self.clone();
        let id = request.task_id.clone();
        self.fulfiller.fulfil(request, Progress::new(hooks, &id))
    }

    /// Reports what a save left to do: a problem, the `on_task` hook.
    pub(super) fn after_save(&self, after: AfterSave) {
        if let Some(problem) = after.problem {
            self.save_failed(&problem);
        }
        if let Some((task, info)) = after.settled {
            self.host.on_task(TaskEvent {
                trace_id: task.trace.as_ref().map(|t| t.trace_id_hex()),
                id: task.id,
                skill: info.skill,
                task: info.text,
                result: info.result,
                state: task.state,
            });
        }
    }
}

/// What a new task's caller follows.
pub(super) enum Follow {
    None,
    /// Its events (SendStreamingMessage).
    Stream,
    /// Its outcome (a blocking SendMessage).
    Wait,
}

#[derive(Default)]
pub(super) struct Started {
    pub(super) stream: Option<(Task, Option<Slot>)>,
    pub(super) wait: Option<Slot>,
}

/// A new task's webhook from its SendMessage, stored after the task's first save.
#[cfg(feature = "push")]
pub(super) type PendingPush = Option<push::PushConfig>;
#[cfg(not(feature = "push"))]
pub(super) type PendingPush = Option<std::convert::Infallible>;

/// PushNotificationNotSupportedError: the card says `pushNotifications: false`.
pub(super) fn push_not_supported() -> RpcError {
    RpcError::new(
        rpc::PUSH_NOTIFICATION_NOT_SUPPORTED,
        "Push notifications are not supported by this agent",
    )
}

/// The error for a state the store did not take: never acknowledged.
pub(super) fn not_stored(e: &str) -> RpcError {
    RpcError::internal(format!("the task's new state could not be stored: {e}"))
}

/// What a waiter heard, as an answer: the task as saved, or the error for
/// a state the store refused; `None` when the job ended without a saved
/// outcome (the caller then reads the store).
pub(super) fn saved_state(waited: Waited) -> Option<Result<Task, RpcError>> {
    match waited {
        Waited::Saved(task) => Some(Ok(task)),
        Waited::SaveFailed(e) => Some(Err(not_stored(&e))),
        Waited::Released => None,
    }
}
