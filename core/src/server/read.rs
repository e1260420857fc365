//! Reading a stored task for a caller, as a machine: another caller's task
//! is not found (the same answer as a missing one), and a task whose
//! fulfilment is gone (its lease ran out, or silent past
//! [`ServerOptions::interrupted_after`]) is failed as [`INTERRUPTED`] with
//! a compare-and-swap over the version read: if it changed meanwhile (its
//! replica renewed the lease, another settled it), the stored task is the
//! answer. No store, no host, no futures in [`ReadMachine`];
//! [`A2aServer::stored`] is its driver.

use super::*;

/// What the read asks for next.
#[must_use = "a read's step is what it waits for: run it, or the read stalls"]
// The answer is every GetTask's: boxing its task would cost each an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum ReadStep {
    /// Read the stored task, then [`ReadMachine::handle_read`].
    Read,
    /// Save [`ReadMachine::saving`] (the task failed as interrupted, and
    /// its status event) over the version read, then [`ReadMachine::handle_saved`].
    Save,
    /// The task was failed as interrupted and stored: the store changed
    /// (at its version), the host hears `report`, and the task is the answer.
    Interrupted { task: Box<Task>, report: String },
    /// The answer: the task as the store shares it ([`TaskStore::get_shared`]).
    Answer(Result<Arc<Task>, RpcError>),
}

/// One read of task `id` for `owner`.
pub(super) struct ReadMachine<'a> {
    id: &'a str,
    owner: Owner<'a>,
    /// The task failed as interrupted, its status event, and what the
    /// host hears once it is stored (boxed: rare, and every GetTask's
    /// future holds a read machine).
    failing: Option<Box<(Task, [StreamEvent; 1], String)>>,
    /// A save of the failed task conflicted: the task read again is the answer.
    conflicted: bool,
}

impl<'a> ReadMachine<'a> {
    /// A read of task `id` for `owner`; its first step is [`ReadStep::Read`].
    pub(super) fn new(id: &'a str, owner: Owner<'a>) -> ReadMachine<'a> {
        ReadMachine {
            id,
            owner,
            failing: None,
            conflicted: false,
        }
    }

    /// The task id read.
    pub(super) fn id(&self) -> &'a str {
        self.id
    }

    /// What the store gave; `gone` says whether a task's fulfilment is
    /// gone (`A2aServer::abandoned`), `unix_ms` the wall clock that stamps a
    /// failure (asked only then: most reads need no clock).
    pub(super) fn handle_read(
        &mut self,
        read: Result<Option<Arc<Task>>, StoreError>,
        unix_ms: impl FnOnce() -> Option<u64>,
        gone: impl FnOnce(&Task) -> bool,
    ) -> ReadStep {
        match read {
            Ok(Some(task)) if self.conflicted => ReadStep::Answer(Ok(task)),
            Ok(Some(task)) if !visible(&task, self.owner) => {
                ReadStep::Answer(Err(task_not_found(self.id)))
            }
            Ok(Some(task)) if gone(&task) => self.fail(Arc::unwrap_or_clone(task), unix_ms()),
            Ok(Some(task)) => ReadStep::Answer(Ok(task)),
            Ok(None) => ReadStep::Answer(Err(task_not_found(self.id))),
            Err(e) => ReadStep::Answer(Err(store_failed(e))),
        }
    }

    /// Fails `task`, whose fulfilment is gone, as [`INTERRUPTED`] at
    /// `unix_ms`: the version after the one read, no lease, and its status
    /// event; then [`ReadStep::Save`].
    pub(super) fn fail(&mut self, mut task: Task, unix_ms: Option<u64>) -> ReadStep {
        let silent_s = task
            .updated_ms
            .map_or(0, |u| unix_ms.unwrap_or(u).saturating_sub(u) / 1000);
        let holder = task.revision.lease.take().map(|l| l.holder);
        mark_interrupted(&mut task, unix_ms);
        task.revision.version += 1;
        let event = machine::status(
            &task,
            task.state,
            task.status_message.clone(),
            task.updated_ms,
        );
        let report = match holder {
            Some(holder) => format!(
                "task {}: the lease of replica {holder} ran out (no progress for {silent_s} s); marked failed",
                task.id
            ),
            None => format!(
                "task {} made no progress for {silent_s} s and is not running here; marked failed",
                task.id
            ),
        };
        self.failing = Some(Box::new((task, [event], report)));
        ReadStep::Save
    }

    /// The task to save and its event, while [`ReadStep::Save`] is the step.
    pub(super) fn saving(&self) -> Option<(&Task, &[StreamEvent])> {
        self.failing
            .as_deref()
            .map(|(task, events, _)| (task, &events[..]))
    }

    /// The outcome of that save.
    pub(super) fn handle_saved(&mut self, saved: Result<(), StoreError>) -> ReadStep {
        let Some((task, _, report)) = self.failing.take().map(|f| *f) else {
            return ReadStep::Answer(Err(RpcError::internal("nothing was saved".into())));
        };
        match saved {
            Ok(()) => ReadStep::Interrupted {
                task: Box::new(task),
                report,
            },
            Err(e) if e.is_conflict() => {
                self.conflicted = true;
                ReadStep::Read
            }
            Err(e) => ReadStep::Answer(Err(not_stored(e.message()))),
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The stored task `id` (or the error reading it from the call) as
    /// `owner` may see it: the driver of a [`ReadMachine`]. A plain
    /// function: an async wrapper would be a state machine of its own.
    pub(super) fn stored<'a>(
        &'a self,
        io: &'a Io<H>,
        id: Result<&'a str, RpcError>,
        owner: Owner<'a>,
    ) -> impl Future<Output = Result<Arc<Task>, RpcError>> + 'a {
        self.read(io, id.map(|id| ReadMachine::new(id, owner)), ReadStep::Read)
    }

    /// Runs `read` from `step`. The machine keeps a failed task boxed and
    /// the save is boxed: every GetTask's future holds this one.
    pub(super) async fn read(
        &self,
        io: &Io<H>,
        read: Result<ReadMachine<'_>, RpcError>,
        mut step: ReadStep,
    ) -> Result<Arc<Task>, RpcError> {
        let mut read = read?;
        loop {
            step = match step {
                ReadStep::Read => {
                    let got = io.get_shared(read.id()).await;
                    read.handle_read(got, || self.host.unix_ms(), |t| self.abandoned(t))
                }
                ReadStep::Save => {
                    // Boxed: rare, and inlined it would grow every read's future.
                    let saved = match read.saving() {
                        Some((task, events)) => {
                            let (task, events) = (task.clone(), events.to_vec());
                            Box::pin(io.save(task, events)).await.1
                        }
                        None => Ok(()),
                    };
                    read.handle_saved(saved)
                }
                ReadStep::Interrupted { task, report } => {
                    self.store_changed(&task.id, Some(task.revision.version));
                    self.host.report(&report);
                    return Ok(Arc::new(*task));
                }
                ReadStep::Answer(answer) => return answer,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    //! The read machine alone: its steps for given reads and saves.
    use super::machine::tests::task;
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn owned(id: &str, owner: &str) -> Task {
        let mut t = task(id);
        t.owner = Some(owner.into());
        t.state = TaskState::Working;
        t.updated_ms = Some(1_000);
        t.revision.version = 4;
        t
    }

    fn shared(id: &str, owner: &str) -> Arc<Task> {
        Arc::new(owned(id, owner))
    }

    #[test]
    fn a_stored_task_is_the_answer_and_another_callers_or_a_missing_one_is_not_found() {
        let mut read = ReadMachine::new("t", Some("alice"));
        let got = read.handle_read(Ok(Some(shared("t", "alice"))), || Some(2_000), |_| false);
        assert!(matches!(got, ReadStep::Answer(Ok(t)) if t.id == "t"));
        let mut read = ReadMachine::new("t", Some("bob"));
        let got = read.handle_read(Ok(Some(shared("t", "alice"))), || Some(2_000), |_| false);
        assert!(matches!(got, ReadStep::Answer(Err(e)) if e.code == rpc::TASK_NOT_FOUND));
        let mut read = ReadMachine::new("t", None);
        let got = read.handle_read(Ok(None), || None, |_| false);
        assert!(matches!(got, ReadStep::Answer(Err(e)) if e.code == rpc::TASK_NOT_FOUND));
        let got = read.handle_read(Err(StoreError::new("down")), || None, |_| false);
        assert!(matches!(got, ReadStep::Answer(Err(e)) if e.message.contains("down")));
    }

    #[test]
    fn an_abandoned_task_is_failed_as_interrupted_over_the_version_read() {
        let mut read = ReadMachine::new("t", Some("alice"));
        let step = read.handle_read(Ok(Some(shared("t", "alice"))), || Some(61_000), |_| true);
        assert!(matches!(step, ReadStep::Save));
        let (saving, events) = read.saving().expect("the failed task");
        assert_eq!(
            (saving.state, saving.revision.version),
            (TaskState::Failed, 5)
        );
        assert_eq!(saving.updated_ms, Some(61_000));
        assert!(matches!(&events[0], StreamEvent::Status(s) if s.state == TaskState::Failed));
        let ReadStep::Interrupted { task, report } = read.handle_saved(Ok(())) else {
            panic!("expected the failed task");
        };
        assert_eq!(task.state, TaskState::Failed);
        assert!(report.contains("no progress for 60 s"), "{report}");
    }

    #[test]
    fn a_conflicting_failure_answers_the_task_as_read_again() {
        let mut read = ReadMachine::new("t", Some("alice"));
        let _ = read.handle_read(Ok(Some(shared("t", "alice"))), || Some(61_000), |_| true);
        let conflict = StoreError::conflict("t", Some(5), 5);
        assert!(matches!(read.handle_saved(Err(conflict)), ReadStep::Read));
        // Its replica renewed the lease meanwhile: the task as stored, not failed again.
        let mut renewed = owned("t", "alice");
        renewed.revision.version = 5;
        let got = read.handle_read(Ok(Some(Arc::new(renewed))), || Some(61_001), |_| true);
        assert!(matches!(got, ReadStep::Answer(Ok(t)) if t.state == TaskState::Working));
        // A refused save (not a conflict) is not acknowledged.
        let mut read = ReadMachine::new("t", None);
        let _ = read.handle_read(Ok(Some(shared("t", "a"))), || None, |_| true);
        let refused = read.handle_saved(Err(StoreError::new("disk full")));
        assert!(matches!(refused, ReadStep::Answer(Err(e)) if e.message.contains("disk full")));
    }
}
