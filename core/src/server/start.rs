//! Starting a turn of a task (a new task, or one continued by an answer)
//! as a machine: no store, no host, no futures. Its flow is one line, so
//! each input returns what comes next by type ([`StartMachine`]) rather
//! than through a step enum. [`A2aServer::start`] is its driver.
//!
//! The task enters the task machine before its first save begins, so a
//! CancelTask arriving at any moment goes through the machine, never
//! around it, and a stream or waiter taken with it misses nothing. It is
//! saved as the version after the one read, with this replica's lease: of
//! two replicas continuing the same task at once, the store takes one save
//! only, and the other answers that the task is running. Once the turn's
//! first state is stored, the task's job starts: with its fulfilment when
//! a place is free, else waiting for one.

use super::*;

/// A turn that did not start: the answer's error, and a problem to report
/// when the store refused the save (the server turns unhealthy).
pub(super) type Refused = (RpcError, Option<String>);

/// The task is stored: start its job, with its fulfilment (`admitted`) or
/// waiting for a place with `request`; `after` is what the save leaves
/// (the hook, a problem).
#[must_use = "the job must start, or the task stays submitted for ever"]
pub(super) struct Ready {
    pub(super) request: FulfilRequest,
    pub(super) admitted: bool,
    pub(super) after: AfterSave,
}

/// Starting one turn of one task: [`StartMachine::begin`] gives the task
/// to store, [`StartMachine::handle_saved`] takes the save's outcome, and
/// [`StartMachine::handle_ready`] the job to start.
#[derive(Debug)]
pub(super) struct StartMachine {
    request: Option<FulfilRequest>,
    /// The state stored, once it is.
    task: Option<Task>,
}

impl StartMachine {
    /// Starts `task`'s turn for `request` at `unix_ms`, its answer artifact
    /// named `answer_id`, followed as `follow` asks (its stream or waiter
    /// taken in the same step, so it misses nothing). Refused when the
    /// server is full or the task is already running (two answers racing:
    /// the first one continues it).
    pub(super) fn begin(
        tasks: &mut Tasks,
        request: FulfilRequest,
        mut task: Task,
        follow: Follow,
        answer_id: String,
        unix_ms: Option<u64>,
    ) -> Result<(StartMachine, Started, Task), RpcError> {
        let id = request.task_id.as_str();
        // The version after the one read (a new task: 1), and this
        // replica's lease.
        task.revision.version += 1;
        task.revision.lease = tasks.lease_for(task.state, unix_ms);
        if !tasks.has_room() {
            let (running, queued) = tasks.limits();
            return Err(RpcError::internal(format!(
                "the agent is busy ({running} tasks running, {queued} waiting); try again later"
            )));
        }
        if !tasks.start(
            task.clone(),
            answer_id,
            request.skill.clone(),
            request.text.clone(),
        ) {
            return Err(conversation::running(id, TaskState::Working.as_str()));
        }
        let mut started = Started::default();
        match follow {
            Follow::Stream => started.stream = tasks.subscribe(id),
            Follow::Wait => started.wait = tasks.wait(id, Until::Stops),
            Follow::None => {}
        }
        let machine = StartMachine {
            request: Some(request),
            task: None,
        };
        // The turn's first state (submitted, or working when continued) to store.
        Ok((machine, started, task))
    }

    /// The outcome of the save of `task` (from [`StartMachine::begin`]).
    pub(super) fn handle_saved(
        &mut self,
        tasks: &mut Tasks,
        task: Task,
        saved: Result<(), StoreError>,
    ) -> Result<(), Refused> {
        let Err(e) = saved else {
            self.task = Some(task);
            return Ok(());
        };
        tasks.abandon(&task.id);
        if e.is_conflict() {
            // Another replica continued (or settled) it first.
            let running = conversation::running(&task.id, TaskState::Working.as_str());
            return Err((running, None));
        }
        let problem = format!("task {}: saving state submitted failed: {e}", task.id);
        let error = RpcError::internal(format!("the task could not be stored: {e}"));
        Err((error, Some(problem)))
    }

    /// The stored task is told to the task machine (at `unix_ms`): its job
    /// starts, with the fulfilment if the task has a place. A continued
    /// task was stored working already; a new one is working once let in.
    pub(super) fn handle_ready(
        &mut self,
        tasks: &mut Tasks,
        unix_ms: Option<u64>,
    ) -> Option<Ready> {
        let (task, request) = (self.task.take()?, self.request.take()?);
        let (id, submitted) = (task.id.clone(), task.state == TaskState::Submitted);
        let version = task.revision.version;
        let after = tasks.saved(task, Ok(()));
        tasks.store_changed(&id, Some(version));
        let admitted = tasks.is_admitted(&id);
        if admitted && submitted {
            tasks.working(&id, unix_ms);
        }
        Some(Ready {
            request,
            admitted,
            after,
        })
    }

    /// The task as stored, after [`StartMachine::handle_saved`].
    pub(super) fn stored(&self) -> Option<&Task> {
        self.task.as_ref()
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// Starts a turn of `task` for `request`: the driver of a [`StartMachine`].
    pub(super) async fn start(
        self: &Arc<Self>,
        io: &Io<H>,
        request: FulfilRequest,
        task: Task,
        follow: Follow,
        pending: PendingPush,
        mut span: TaskSpan,
    ) -> Result<Started, RpcError> {
        let (answer_id, unix_ms) = (self.host.new_id(), self.host.unix_ms());
        let (mut start, started, task) =
            StartMachine::begin(&mut self.tasks(), request, task, follow, answer_id, unix_ms)?;
        let (task, saved) = io.save(task, Vec::new()).await;
        // Its own statement: the lock is let go before a refusal is reported.
        let saved = start.handle_saved(&mut self.tasks(), task, saved);
        if let Err((error, problem)) = saved {
            if let Some(problem) = problem {
                self.save_failed(&problem);
            }
            return Err(error);
        }
        self.save_worked();
        if let Some(task) = start.stored() {
            if let Some(span) = span.as_mut() {
                span.events.push((self.host.now_ms(), task.state.as_str()));
            }
            // A new task's webhooks (set on its SendMessage) are stored once
            // the task is: a send refused before it leaves nothing behind.
            #[cfg(feature = "push")]
            if let Err(e) = self
                .store_new_push(io, pending, task.owner.as_deref())
                .await
            {
                self.host
                    .report(&format!("task {}: {}", task.id, e.message));
            }
        }
        #[cfg(not(feature = "push"))]
        let _ = pending;
        let ready = start.handle_ready(&mut self.tasks(), self.host.unix_ms());
        let Some(Ready {
            request,
            admitted,
            after,
        }) = ready
        else {
            return Err(RpcError::internal("the task was not stored".into()));
        };
        self.after_save(after);
        // A task past the cap waits, submitted, for its job to be let in.
        let id = request.task_id.clone();
        let (work, request) = if admitted {
            (Some(self.fulfil(request)), None)
        } else {
            (None, Some(request))
        };
        let job = Job::new(self.clone(), id, request, work, span);
        self.tasks().start_work(Box::pin(job));
        Ok(started)
    }
}

#[cfg(test)]
mod tests {
    //! The start machine alone: its steps for given saves, with no store
    //! and no host.
    use super::machine::tests::{request, task};
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn begin(tasks: &mut Tasks, id: &str, follow: Follow) -> (StartMachine, Started, Task) {
        StartMachine::begin(tasks, request(id), task(id), follow, "a1".into(), Some(7))
            .expect("started")
    }

    #[test]
    fn a_new_task_is_saved_then_its_job_starts_with_the_fulfilment_and_it_is_working() {
        let mut tasks = Tasks::default();
        tasks.set_lease("me".into(), Some(30_000));
        let (mut m, started, saving) = begin(&mut tasks, "t", Follow::Wait);
        assert!(started.wait.is_some() && started.stream.is_none());
        assert_eq!(saving.revision.version, 1, "the version after the one read");
        assert_eq!(
            saving
                .revision
                .lease
                .as_ref()
                .map(|l| (l.holder.as_str(), l.until_ms)),
            Some(("me", 30_007))
        );
        assert!(tasks.is_running("t"), "in the task machine before the save");
        assert!(m.handle_saved(&mut tasks, saving, Ok(())).is_ok());
        assert_eq!(m.stored().map(|t| t.state), Some(TaskState::Submitted));
        let Ready {
            request, admitted, ..
        } = m.handle_ready(&mut tasks, Some(8)).expect("the job");
        assert!(admitted && request.task_id == "t");
        assert_eq!(tasks.task("t").map(|t| t.state), Some(TaskState::Working));
    }

    #[test]
    fn a_task_past_the_cap_waits_submitted_and_a_full_server_refuses_before_anything() {
        let mut tasks = Tasks::with_limits(1, 1);
        let (mut first, _, saving) = begin(&mut tasks, "a", Follow::None);
        assert!(first.handle_saved(&mut tasks, saving, Ok(())).is_ok());
        assert!(first
            .handle_ready(&mut tasks, None)
            .is_some_and(|r| r.admitted));
        let (mut second, _, saving) = begin(&mut tasks, "b", Follow::Stream);
        assert!(second.handle_saved(&mut tasks, saving, Ok(())).is_ok());
        assert!(
            second
                .handle_ready(&mut tasks, None)
                .is_some_and(|r| !r.admitted),
            "past the cap: queued"
        );
        assert_eq!(tasks.task("b").map(|t| t.state), Some(TaskState::Submitted));
        let full = StartMachine::begin(
            &mut tasks,
            request("c"),
            task("c"),
            Follow::None,
            "a3".into(),
            None,
        );
        assert!(full.is_err_and(|e| e.message.contains("busy")));
        assert!(!tasks.is_running("c"));
    }

    #[test]
    fn a_refused_first_save_leaves_nothing_running() {
        let mut tasks = Tasks::default();
        let (mut m, _, saving) = begin(&mut tasks, "t", Follow::None);
        let conflict = StoreError::conflict("t", Some(1), 1);
        assert!(
            matches!(
                m.handle_saved(&mut tasks, saving, Err(conflict)),
                Err((_, None))
            ),
            "another replica continued it first: no problem to report"
        );
        assert!(!tasks.is_running("t"));
        let (mut m, _, saving) = begin(&mut tasks, "t", Follow::None);
        assert!(matches!(
            m.handle_saved(&mut tasks, saving, Err(StoreError::new("disk full"))),
            Err((_, Some(problem))) if problem.contains("disk full")
        ));
        assert!(!tasks.is_running("t"));
        let (_, _, _) = begin(&mut tasks, "t", Follow::None);
        let twice = StartMachine::begin(
            &mut tasks,
            request("t"),
            task("t"),
            Follow::None,
            "a".into(),
            None,
        );
        assert!(
            twice.is_err(),
            "two answers racing: the first one continues it"
        );
    }
}
