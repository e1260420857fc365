//! SubscribeToTask as a machine: a task running here is followed through
//! its stream slot (another caller's is not found); any other is read from
//! the store for its caller; a task in a terminal state cannot be followed
//! (UnsupportedOperationError, as the A2A spec asks). No store, no host, no
//! futures in [`SubscribeMachine`]; [`A2aServer::subscribe`] is its driver.
//! One decision and at most one read, so each input returns what comes
//! next by type (as the start and list machines).

use super::*;

/// A subscription's answer: the task as it is now, and the slot of its
/// later events when it runs here (none: it runs on another replica, or is
/// about to end).
pub(super) type Subscribed = Result<(Task, Option<Slot>), RpcError>;

/// One SubscribeToTask.
pub(super) struct SubscribeMachine<'a> {
    id: &'a str,
    owner: Owner<'a>,
}

impl<'a> SubscribeMachine<'a> {
    /// A subscription to the task `params.id` names, for `owner`.
    pub(super) fn new(params: &'a Value, owner: Owner<'a>) -> Result<Self, RpcError> {
        Ok(SubscribeMachine {
            id: task_id(params)?,
            owner,
        })
    }

    /// The task subscribed to.
    pub(super) fn id(&self) -> &'a str {
        self.id
    }

    /// The first step, under the lock of the tasks running here: the
    /// answer when the task runs here; `None`: the stored task
    /// ([`SubscribeMachine::id`]) is read for its caller
    /// ([`A2aServer::stored`]) for [`SubscribeMachine::handle_stored`].
    #[must_use = "None asks for the stored task: read it, or the call stalls"]
    pub(super) fn begin(&mut self, tasks: &mut Tasks) -> Option<Subscribed> {
        // Another caller's running task is not found, before anything follows it.
        if tasks.task(self.id).is_some_and(|t| !visible(t, self.owner)) {
            return Some(Err(task_not_found(self.id)));
        }
        match tasks.subscribe(self.id) {
            Some((task, slot)) if task.state.is_terminal() => {
                if let Some(slot) = slot {
                    tasks.drop_stream(slot);
                }
                Some(Err(ended(&task)))
            }
            Some(live) => Some(Ok(live)),
            None => None,
        }
    }

    /// The stored task (not running here), as its caller may see it: the answer.
    pub(super) fn handle_stored(&mut self, stored: Result<Task, RpcError>) -> Subscribed {
        match stored {
            Ok(task) if task.state.is_terminal() => Err(ended(&task)),
            Ok(task) => Ok((task, None)),
            Err(e) => Err(e),
        }
    }
}

/// A task in a terminal state cannot be subscribed to.
fn ended(task: &Task) -> RpcError {
    RpcError::new(
        rpc::UNSUPPORTED_OPERATION,
        format!(
            "Task {} is {}: a task in a terminal state cannot be subscribed to",
            task.id,
            task.state.as_str()
        ),
    )
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// SubscribeToTask: the task as it is now and its later events; the
    /// driver of a [`SubscribeMachine`].
    pub(super) async fn subscribe(
        &self,
        io: &Io<H>,
        params: &Value,
        owner: Owner<'_>,
    ) -> Result<(Task, Option<Slot>), RpcError> {
        let mut m = SubscribeMachine::new(params, owner)?;
        if let Some(answer) = m.begin(&mut self.tasks()) {
            return answer;
        }
        let stored = self.stored(io, Ok(m.id()), owner).await;
        m.handle_stored(stored.map(Arc::unwrap_or_clone))
    }
}

#[cfg(test)]
mod tests {
    //! The subscribe machine alone, over a task machine with no host.
    use super::machine::tests::task;
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn answer(step: Option<Subscribed>) -> Subscribed {
        step.expect("expected the answer, not a read")
    }

    #[test]
    fn a_task_running_here_is_followed_and_another_callers_is_not_found() {
        let mut tasks = Tasks::default();
        let mut running = task("t1");
        running.owner = Some("alice".into());
        assert!(tasks.start(running.clone(), "a1".into(), None, "hi".into()));
        let _ = tasks.saved(running, Ok(()));
        let params = json!({"id": "t1"});
        let mut m = SubscribeMachine::new(&params, Some("bob")).expect("ok");
        let refused = answer(m.begin(&mut tasks)).expect_err("not found");
        assert_eq!(refused.code, rpc::TASK_NOT_FOUND);
        assert_eq!(tasks.stream_count("t1"), 0, "no stream for another caller");
        let mut m = SubscribeMachine::new(&params, Some("alice")).expect("ok");
        let (first, slot) = answer(m.begin(&mut tasks)).expect("followed");
        assert_eq!(first.id, "t1");
        assert!(slot.is_some());
        assert_eq!(tasks.stream_count("t1"), 1);
    }

    #[test]
    fn a_task_not_running_here_is_read_and_an_ended_one_refused() {
        let mut tasks = Tasks::default();
        let params = json!({"id": "t1"});
        let mut m = SubscribeMachine::new(&params, None).expect("ok");
        assert!(m.begin(&mut tasks).is_none(), "the stored task is read");
        assert_eq!(m.id(), "t1");
        let mut working = task("t1");
        working.state = TaskState::Working;
        let (first, slot) = m.handle_stored(Ok(working)).expect("followed");
        assert_eq!((first.state, slot), (TaskState::Working, None));
        let mut done = task("t1");
        done.state = TaskState::Completed;
        let refused = m.handle_stored(Ok(done)).expect_err("ended");
        assert_eq!(refused.code, rpc::UNSUPPORTED_OPERATION);
        let missing = Err(task_not_found("t1"));
        let refused = m.handle_stored(missing).expect_err("missing");
        assert_eq!(refused.code, rpc::TASK_NOT_FOUND);
        assert!(SubscribeMachine::new(&json!({}), None).is_err());
    }
}
