//! CancelTask as a machine of the client's shape: [`CancelMachine::start`]
//! and each `handle_*` return the one next [`CancelStep`]; no store, no
//! host, no futures. [`A2aServer::cancel`] is its driver.
//!
//! A task running here is canceled through the task machine, whatever the
//! store says at that instant, and the answer is its canceled state once
//! saved. A task not running here (stored before a restart, ended, or
//! running on another replica) gets `canceled` stored over the version
//! read (compare and swap): the replica running it sees the change and
//! stops, and its later outcome can never overwrite it. A conflict means
//! the task changed meanwhile: it is read again and decided again.

use super::*;

/// What a CancelTask is to do next.
// Each step is consumed as soon as it is made: boxing the task would only
// cost an allocation.
#[allow(clippy::large_enum_variant)]
#[must_use = "a cancel's step is what it waits for: run it, or the request never answers"]
#[derive(Debug)]
pub(super) enum CancelStep {
    /// Wait for the task machine's answer on this slot (the task runs
    /// here); give it to [`CancelMachine::handle_waited`].
    Wait(Slot),
    /// Read the stored task for the caller (unknown and another owner's
    /// alike are not found; an abandoned one is failed first); give it to
    /// [`CancelMachine::handle_read`].
    Read,
    /// Store this canceled task and its status event over the version
    /// read; give the outcome to [`CancelMachine::handle_saved`].
    Save(Task, StreamEvent),
    /// Stored `canceled`: the driver tells the change (health, watchers,
    /// push, the `on_task` hook) and answers with the task.
    Stored(Task),
    /// The store refused the save (not a conflict, or conflicts past
    /// [`CONFLICT_RETRIES`]): the answer is an error, and a refusal
    /// other than a conflict makes the server unhealthy.
    Refused(StoreError),
    /// The answer.
    Answer(Result<Task, RpcError>),
}

/// One CancelTask.
#[derive(Debug)]
pub(super) struct CancelMachine {
    id: String,
    conflicts: u32,
    /// The running task's job ended without a saved outcome: the answer
    /// is the task as stored, not a cancel of it.
    released: bool,
}

impl CancelMachine {
    /// The cancel of task `id` for `owner`, at `unix_ms`: through the task
    /// machine if the task runs here, else from the store.
    pub(super) fn start(
        tasks: &mut Tasks,
        id: &str,
        owner: Owner<'_>,
        unix_ms: Option<u64>,
    ) -> (CancelMachine, CancelStep) {
        let machine = CancelMachine {
            id: id.to_string(),
            conflicts: 0,
            released: false,
        };
        // Another caller's task is not found, and is never canceled.
        let step = if tasks.task(id).is_some_and(|t| !visible(t, owner)) {
            CancelStep::Answer(Err(task_not_found(id)))
        } else if !tasks.is_running(id) {
            // A task leaves the machine only once its terminal state is
            // saved, so the store is read after that.
            CancelStep::Read
        } else if !tasks.cancel(id, unix_ms) {
            // Its outcome was decided first: it is finishing.
            CancelStep::Answer(Err(RpcError::new(
                rpc::TASK_NOT_CANCELABLE,
                format!("Task cannot be canceled: {id} is finishing"),
            )))
        } else {
            match tasks.wait(id, Until::Terminal) {
                Some(slot) => CancelStep::Wait(slot),
                None => CancelStep::Read,
            }
        };
        (machine, step)
    }

    /// The task machine's answer for a task running here.
    pub(super) fn handle_waited(&mut self, waited: Waited) -> CancelStep {
        match saved_state(waited) {
            // The answer is the canceled state as stored.
            Some(answer) => CancelStep::Answer(answer),
            None => {
                self.released = true;
                CancelStep::Read
            }
        }
    }

    /// The stored task as read for the caller, at `unix_ms`.
    pub(super) fn handle_read(
        &mut self,
        read: Result<Task, RpcError>,
        unix_ms: Option<u64>,
    ) -> CancelStep {
        let mut task = match read {
            Ok(task) if !self.released => task,
            answer => return CancelStep::Answer(answer),
        };
        if task.state.is_terminal() {
            return CancelStep::Answer(Err(RpcError::new(
                rpc::TASK_NOT_CANCELABLE,
                format!(
                    "Task cannot be canceled: {} is {}",
                    task.id,
                    task.state.as_str()
                ),
            )));
        }
        task.state = TaskState::Canceled;
        task.updated_ms = unix_ms.or(task.updated_ms);
        task.revision.version += 1;
        task.revision.lease = None;
        let event = machine::status(
            &task,
            task.state,
            task.status_message.clone(),
            task.updated_ms,
        );
        CancelStep::Save(task, event)
    }

    /// The outcome of the [`CancelStep::Save`] of `task`.
    pub(super) fn handle_saved(&mut self, task: Task, saved: Result<(), StoreError>) -> CancelStep {
        match saved {
            Ok(()) => CancelStep::Stored(task),
            // Changed meanwhile: read it again and decide again.
            Err(e) if e.is_conflict() && self.conflicts < CONFLICT_RETRIES => {
                self.conflicts += 1;
                CancelStep::Read
            }
            Err(e) => CancelStep::Refused(e),
        }
    }

    /// The task this cancel is for.
    pub(super) fn id(&self) -> &str {
        &self.id
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// CancelTask: the driver of a [`CancelMachine`].
    pub(super) async fn cancel(
        self: &Arc<Self>,
        io: &Io<H>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
    ) -> Result<Answer, RpcError> {
        let id = task_id(params)?;
        let (mut cancel, mut step) =
            CancelMachine::start(&mut self.tasks(), id, owner, self.host.unix_ms());
        let task = loop {
            step = match step {
                CancelStep::Wait(slot) => cancel.handle_waited(self.waited(io, slot).await),
                CancelStep::Read => {
                    let read = self.stored(io, Ok(id), owner).await;
                    cancel.handle_read(read.map(Arc::unwrap_or_clone), self.host.unix_ms())
                }
                CancelStep::Save(task, event) => {
                    let (task, saved) = io.save(task, vec![event]).await;
                    cancel.handle_saved(task, saved)
                }
                CancelStep::Stored(task) => {
                    self.canceled(&task);
                    break task;
                }
                CancelStep::Refused(e) => {
                    if !e.is_conflict() {
                        let id = cancel.id();
                        self.save_failed(&format!("task {id}: saving state canceled failed: {e}"));
                    }
                    return Err(not_stored(e.message()));
                }
                CancelStep::Answer(answer) => break answer?,
            }
        };
        Ok(Answer::task(Arc::new(task), shape, None))
    }

    /// A task not running here was stored `canceled`: the health, the
    /// watchers (here and, through the store, elsewhere), push, the hook.
    fn canceled(self: &Arc<Self>, task: &Task) {
        self.save_worked();
        self.store_changed(&task.id, Some(task.revision.version));
        self.notify(task);
        let info = machine::RunInfo {
            skill: None,
            text: task.history.first().map(Message::text).unwrap_or_default(),
            result: None,
        };
        self.after_save(AfterSave {
            settled: Some((task.clone(), info)),
            ..AfterSave::default()
        });
    }
}

#[cfg(test)]
mod tests {
    //! The cancel machine alone: its steps for given reads, saves and
    //! waits, with no store and no host.
    use super::machine::tests::task;
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn working(version: u64) -> Task {
        let mut t = task("t");
        t.state = TaskState::Working;
        t.revision.version = version;
        t.revision.lease = Some(crate::model::task::Lease {
            holder: "b".into(),
            until_ms: 9,
        });
        t
    }

    #[test]
    fn a_stored_task_is_canceled_over_the_version_read_and_a_conflict_reads_again() {
        let mut tasks = Tasks::default();
        let (mut m, step) = CancelMachine::start(&mut tasks, "t", None, Some(5));
        assert!(
            matches!(step, CancelStep::Read),
            "not running here: {step:?}"
        );
        let CancelStep::Save(saving, event) = m.handle_read(Ok(working(3)), Some(5)) else {
            panic!("a save")
        };
        assert_eq!(saving.state, TaskState::Canceled);
        assert_eq!(saving.revision.version, 4, "the one after the version read");
        assert_eq!(saving.revision.lease, None, "nobody holds a canceled task");
        assert_eq!(saving.updated_ms, Some(5));
        assert_eq!(event.state(), Some(TaskState::Canceled));
        let conflict = StoreError::conflict("t", Some(4), 4);
        assert!(matches!(
            m.handle_saved(saving, Err(conflict)),
            CancelStep::Read
        ));
        let CancelStep::Save(again, _) = m.handle_read(Ok(working(4)), Some(6)) else {
            panic!("decided again on the new version")
        };
        assert_eq!(again.revision.version, 5);
        assert!(matches!(
            m.handle_saved(again, Ok(())),
            CancelStep::Stored(t) if t.state == TaskState::Canceled
        ));
    }

    #[test]
    fn conflicts_past_the_retries_and_other_refusals_are_errors() {
        let mut tasks = Tasks::default();
        let (mut m, _) = CancelMachine::start(&mut tasks, "t", None, None);
        for n in 0..=CONFLICT_RETRIES {
            let CancelStep::Save(t, _) = m.handle_read(Ok(working(n.into())), None) else {
                panic!("a save")
            };
            let conflict = StoreError::conflict("t", None, t.revision.version);
            match m.handle_saved(t, Err(conflict)) {
                CancelStep::Read => assert!(n < CONFLICT_RETRIES),
                CancelStep::Refused(e) => {
                    assert_eq!(n, CONFLICT_RETRIES);
                    assert!(e.is_conflict());
                }
                other => panic!("{other:?}"),
            }
        }
        let (mut m, _) = CancelMachine::start(&mut tasks, "t", None, None);
        let CancelStep::Save(t, _) = m.handle_read(Ok(working(1)), None) else {
            panic!("a save")
        };
        assert!(matches!(
            m.handle_saved(t, Err(StoreError::new("disk full"))),
            CancelStep::Refused(e) if !e.is_conflict()
        ));
    }

    #[test]
    fn a_terminal_or_unreadable_task_is_answered_not_saved() {
        let mut tasks = Tasks::default();
        let (mut m, _) = CancelMachine::start(&mut tasks, "t", None, None);
        let mut done = working(2);
        done.state = TaskState::Completed;
        assert!(matches!(
            m.handle_read(Ok(done), None),
            CancelStep::Answer(Err(e)) if e.code == rpc::TASK_NOT_CANCELABLE
        ));
        assert!(matches!(
            m.handle_read(Err(task_not_found("t")), None),
            CancelStep::Answer(Err(e)) if e.code == rpc::TASK_NOT_FOUND
        ));
    }

    #[test]
    fn a_task_running_here_is_canceled_through_the_task_machine() {
        let mut tasks = Tasks::default();
        assert!(tasks.start(task("t"), "a1".into(), None, "hi".into()));
        let _ = tasks.saved(task("t"), Ok(()));
        let (mut m, step) = CancelMachine::start(&mut tasks, "t", None, None);
        assert!(matches!(step, CancelStep::Wait(_)), "{step:?}");
        let (_, again) = CancelMachine::start(&mut tasks, "t", None, None);
        assert!(
            matches!(again, CancelStep::Answer(Err(ref e)) if e.code == rpc::TASK_NOT_CANCELABLE),
            "decided already: {again:?}"
        );
        let mut canceled = task("t");
        canceled.state = TaskState::Canceled;
        assert!(matches!(
            m.handle_waited(Waited::Saved(canceled)),
            CancelStep::Answer(Ok(t)) if t.state == TaskState::Canceled
        ));
        assert!(matches!(
            m.handle_waited(Waited::SaveFailed("disk full".into())),
            CancelStep::Answer(Err(_))
        ));
        // The job went away unsaved: the answer is the task as stored.
        assert!(matches!(
            m.handle_waited(Waited::Released),
            CancelStep::Read
        ));
        assert!(matches!(
            m.handle_read(Ok(working(1)), None),
            CancelStep::Answer(Ok(t)) if t.state == TaskState::Working
        ));
    }

    #[test]
    fn another_callers_running_task_is_not_found_and_not_canceled() {
        let mut tasks = Tasks::default();
        let mut mine = task("t");
        mine.owner = Some("alice".into());
        assert!(tasks.start(mine.clone(), "a1".into(), None, "hi".into()));
        let _ = tasks.saved(mine, Ok(()));
        let (_, step) = CancelMachine::start(&mut tasks, "t", Some("bob"), None);
        assert!(matches!(
            step,
            CancelStep::Answer(Err(ref e)) if e.code == rpc::TASK_NOT_FOUND
        ));
        let (_, step) = CancelMachine::start(&mut tasks, "t", Some("alice"), None);
        assert!(matches!(step, CancelStep::Wait(_)));
    }
}
