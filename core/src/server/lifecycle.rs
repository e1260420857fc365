//! A task's life in the server, between its machines: the task a call
//! names (read by [`super::read`]), whether its fulfilment is gone, its
//! fulfilment, what a save leaves to do, and the types the flows share.

use super::*;

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The stored task `params.id` names. A plain function: an async
    /// wrapper around [`Self::stored`] would be a state machine of its own.
    pub(super) fn existing<'a>(
        &'a self,
        io: &'a Io<H>,
        params: &'a Value,
        owner: Owner<'a>,
    ) -> impl Future<Output = Result<Arc<Task>, RpcError>> + 'a {
        self.stored(io, task_id(params), owner)
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
#[derive(Clone, Copy)]
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

/// The error for a store that failed to answer a read or a list.
pub(super) fn store_failed(e: StoreError) -> RpcError {
    RpcError::internal(format!("the task store failed: {e}"))
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
