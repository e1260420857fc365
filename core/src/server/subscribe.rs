//! SubscribeToTask as a machine: a task running here is followed through
//! its stream slot (another caller's is not found); any other is read from
//! the store for its caller; a task in a terminal state cannot be followed
//! (UnsupportedOperationError, as the A2A spec asks). No store, no host, no
//! futures in [`SubscribeMachine`]; [`A2aServer::subscribe`] is its driver.

use super::*;

/// What a subscription asks for next.
#[must_use = "a subscription's step is what it waits for: run it, or the call stalls"]
// One per subscription, moved once: boxing its task would cost an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum SubscribeStep {
    /// The stored task ([`SubscribeMachine::id`]) as its caller may see it
    /// ([`A2aServer::stored`]), then [`SubscribeMachine::handle_stored`].
    Stored,
    /// The task as it is now, and the slot of its later events when it
    /// runs here (none: it runs on another replica, or is about to end).
    Answer(Result<(Task, Option<Slot>), RpcError>),
}

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

    /// The first step, under the lock of the tasks running here: a stream
    /// of the task if it runs here, else a read of the stored task.
    pub(super) fn begin(&mut self, tasks: &mut Tasks) -> SubscribeStep {
        // Another caller's running task is not found, before anything follows it.
        if tasks.task(self.id).is_some_and(|t| !visible(t, self.owner)) {
            return SubscribeStep::Answer(Err(task_not_found(self.id)));
        }
        match tasks.subscribe(self.id) {
            Some((task, slot)) if task.state.is_terminal() => {
                if let Some(slot) = slot {
                    tasks.drop_stream(slot);
                }
                SubscribeStep::Answer(Err(ended(&task)))
            }
            Some(live) => SubscribeStep::Answer(Ok(live)),
            None => SubscribeStep::Stored,
        }
    }

    /// The stored task (not running here), as its caller may see it.
    pub(super) fn handle_stored(&mut self, stored: Result<Task, RpcError>) -> SubscribeStep {
        SubscribeStep::Answer(match stored {
            Ok(task) if task.state.is_terminal() => Err(ended(&task)),
            Ok(task) => Ok((task, None)),
            Err(e) => Err(e),
        })
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
        params: &Value,
        owner: Owner<'_>,
    ) -> Result<(Task, Option<Slot>), RpcError> {
        let mut m = SubscribeMachine::new(params, owner)?;
        let mut step = m.begin(&mut self.tasks());
        loop {
            step = match step {
                SubscribeStep::Stored => {
                    let stored = self.stored(Ok(m.id()), owner).await;
                    m.handle_stored(stored.map(Arc::unwrap_or_clone))
                }
                SubscribeStep::Answer(answer) => return answer,
            };
        }
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

    fn answer(step: SubscribeStep) -> Result<(Task, Option<Slot>), RpcError> {
        match step {
            SubscribeStep::Answer(a) => a,
            SubscribeStep::Stored => panic!("expected the answer, not a read"),
        }
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
        assert!(matches!(m.begin(&mut tasks), SubscribeStep::Stored));
        assert_eq!(m.id(), "t1");
        let mut working = task("t1");
        working.state = TaskState::Working;
        let (first, slot) = answer(m.handle_stored(Ok(working))).expect("followed");
        assert_eq!((first.state, slot), (TaskState::Working, None));
        let mut done = task("t1");
        done.state = TaskState::Completed;
        let refused = answer(m.handle_stored(Ok(done))).expect_err("ended");
        assert_eq!(refused.code, rpc::UNSUPPORTED_OPERATION);
        let missing = Err(task_not_found("t1"));
        let refused = answer(m.handle_stored(missing)).expect_err("missing");
        assert_eq!(refused.code, rpc::TASK_NOT_FOUND);
        assert!(SubscribeMachine::new(&json!({}), None).is_err());
    }
}
