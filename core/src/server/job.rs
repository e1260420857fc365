//! The background job of one task: its fulfilment, and every save the
//! machine says is due, until the terminal state is stored.

use super::*;

pub(super) type SaveFuture = BoxFuture<'static, (machine::Due, Result<(), StoreError>)>;
pub(super) type ReadFuture = BoxFuture<'static, Result<Option<Task>, StoreError>>;

/// One task's job as a machine: what to do next for the task, given the
/// task machine ([`Tasks`]), with no futures and no host. Its inputs are
/// the answers to its outputs (a read, a save, the fulfilment's outcome)
/// and the time ([`JobMachine::handle_timeout`] at
/// [`JobMachine::deadline`]); [`JobMachine::poll_output`] says what to do
/// next. [`Job`] drives it with the host's store, fulfiller and timers.
pub(super) struct JobMachine {
    id: String,
    /// A task waiting for a place: what to fulfil once let in.
    request: Option<FulfilRequest>,
    /// The fulfilment runs (handed out, no outcome yet).
    fulfilling: bool,
    /// A [`JobOutput::Save`] is out, not yet answered.
    saving: bool,
    /// A [`JobOutput::Read`] is out, not yet answered.
    reading: bool,
    /// When a refused terminal state is saved again.
    retry_at: Option<u64>,
    /// The next lease renewal, and the next look at the store.
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    renew_at: Option<u64>,
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    poll_at: Option<u64>,
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    store_poll_ms: Option<u64>,
    /// The host has no timer: retries go at once, and nothing is renewed
    /// or looked at on a clock.
    timeless: bool,
}

/// What a job is to do next ([`JobMachine::poll_output`]).
#[derive(Debug)]
pub(super) enum JobOutput {
    /// Read the stored task; answer with [`JobMachine::handle_read`].
    Read,
    /// Save this state with its events; answer with [`JobMachine::handle_saved`].
    Save(machine::Due),
    /// Start this fulfilment; its outcome goes to [`JobMachine::handle_outcome`].
    Fulfil(FulfilRequest),
    /// Drop the fulfilment: a cancel (here or elsewhere) decided the outcome.
    Stop,
    /// The task is done with: the job ends.
    Done,
}

impl JobMachine {
    /// The job of task `id`: `request` waits for a place, else the
    /// fulfilment was started with the task (`fulfilling`).
    pub(super) fn new(
        id: String,
        request: Option<FulfilRequest>,
        store_poll_ms: Option<u64>,
    ) -> JobMachine {
        JobMachine {
            id,
            fulfilling: request.is_none(),
            request,
            saving: false,
            reading: false,
            retry_at: None,
            renew_at: None,
            poll_at: None,
            store_poll_ms,
            timeless: false,
        }
    }

    /// Whether the job waits on the task machine (its turn, a cancel,
    /// progress to save): its slot ([`Tasks::job_slot`]) must be woken.
    pub(super) fn waits_on_tasks(&self) -> bool {
        self.request.is_some() || self.fulfilling
    }

    /// The next thing to do, `None`: wait for an answer, a wake-up of the
    /// job's slot, or the [`JobMachine::deadline`]. In order: read the
    /// store after a change elsewhere; save what is due (one save at a
    /// time, so each state reaches the store in order); start the
    /// fulfilment once let in; stop it on a cancel; end once the task is
    /// done with. `now_ms` arms the timers, `unix_ms` stamps the task.
    pub(super) fn poll_output(
        &mut self,
        tasks: &mut Tasks,
        now_ms: u64,
        unix_ms: Option<u64>,
    ) -> Option<JobOutput> {
        let id = self.id.as_str();
        let idle = !self.saving && !self.reading;
        if idle && tasks.take_check(id) {
            self.reading = true;
            return Some(JobOutput::Read);
        }
        if idle {
            if let Some(due) = tasks.next_save(id, unix_ms) {
                self.saving = true;
                return Some(JobOutput::Save(due));
            }
        }
        if self.request.is_some() {
            match tasks.poll_admitted(id) {
                machine::Admitted::Waiting => {}
                machine::Admitted::Never => {
                    tasks.work_ended(id);
                    self.request = None;
                }
                machine::Admitted::Yes => {
                    tasks.working(id, unix_ms);
                    self.fulfilling = true;
                    return self.request.take().map(JobOutput::Fulfil);
                }
            }
        }
        if self.fulfilling && tasks.job_poll(id) {
            self.fulfilling = false;
            tasks.work_ended(id);
            return Some(JobOutput::Stop);
        }
        if idle && tasks.finished(id) {
            return Some(JobOutput::Done);
        }
        #[cfg(feature = "replicas")]
        if !self.timeless {
            // The lease is renewed a third of the way through; the store
            // is looked at every `store_poll` in case a change was not told.
            if let (None, Some(ms)) = (self.renew_at, tasks.lease_ms()) {
                self.renew_at = Some(now_ms.saturating_add(ms / 3));
            }
            if let (None, Some(ms)) = (self.poll_at, self.store_poll_ms) {
                self.poll_at = Some(now_ms.saturating_add(ms));
            }
        }
        #[cfg(not(feature = "replicas"))]
        let _ = now_ms;
        None
    }

    /// When [`JobMachine::handle_timeout`] is due, if a timer is armed.
    pub(super) fn deadline(&self) -> Option<u64> {
        [self.retry_at, self.renew_at, self.poll_at]
            .into_iter()
            .flatten()
            .min()
    }

    /// The timers due at `now_ms` fire.
    pub(super) fn handle_timeout(&mut self, tasks: &mut Tasks, now_ms: u64) {
        let due = |at: &mut Option<u64>| at.take_if(|at| *at <= now_ms).is_some();
        if due(&mut self.retry_at) {
            tasks.retry_now(&self.id);
        }
        #[cfg(feature = "replicas")]
        {
            if due(&mut self.renew_at) {
                tasks.renew(&self.id);
            }
            if due(&mut self.poll_at) {
                tasks.store_changed(&self.id, None);
            }
        }
    }

    /// The host has no timer for the [`JobMachine::deadline`]: a retry
    /// goes at once; leases are not renewed nor the store looked at on a clock.
    pub(super) fn handle_no_timer(&mut self, tasks: &mut Tasks) {
        self.timeless = true;
        self.renew_at = None;
        self.poll_at = None;
        if self.retry_at.take().is_some() {
            tasks.retry_now(&self.id);
        }
    }

    /// The answer to [`JobOutput::Read`]: the stored task to reconcile
    /// with, or the problem reading it (reported; the job goes on).
    pub(super) fn handle_read(
        &mut self,
        tasks: &mut Tasks,
        stored: Result<Option<Task>, StoreError>,
    ) -> Option<String> {
        self.reading = false;
        match stored {
            Ok(stored) => {
                tasks.reconcile(&self.id, stored);
                None
            }
            Err(e) => Some(format!("task {}: reading it again failed: {e}", self.id)),
        }
    }

    /// The answer to [`JobOutput::Save`] of `due`, at `now_ms`: what
    /// the task machine says follows (the hook, a problem), `None` after a
    /// conflict (the task is read again).
    pub(super) fn handle_saved(
        &mut self,
        tasks: &mut Tasks,
        due: machine::Due,
        result: Result<(), StoreError>,
        now_ms: u64,
    ) -> Option<machine::AfterSave> {
        self.saving = false;
        let task = due.task;
        let stored = match result {
            Ok(()) => Some(task.revision.version),
            Err(ref e) => {
                // Not stored: its events go with the next save.
                tasks.unlogged(&task.id, due.events);
                if e.is_conflict() {
                    // Another replica wrote it: nothing of ours was stored.
                    tasks.conflicted(&task);
                    return None;
                }
                None
            }
        };
        // Saved first: the run then knows the version it wrote, and the
        // change wakes watchers without reading it back.
        let after = tasks.saved(task, result.map_err(|e| e.to_string()));
        if let Some(version) = stored {
            tasks.store_changed(&self.id, Some(version));
        }
        if let Some(n) = after.retry {
            self.retry_at = Some(now_ms.saturating_add(machine::retry_delay_ms(n)));
        }
        Some(after)
    }

    /// The fulfilment's outcome (`Ok(answer)`, `Err(reason)`); its
    /// message is `message_id`, stamped `unix_ms`. A cancel that raced
    /// the answer wins: it decided first.
    pub(super) fn handle_outcome(
        &mut self,
        tasks: &mut Tasks,
        outcome: Result<String, String>,
        message_id: String,
        unix_ms: Option<u64>,
    ) {
        self.fulfilling = false;
        let result = match &outcome {
            Ok(text) | Err(text) => text.clone(),
        };
        tasks.work_ended(&self.id);
        let events = tasks.outcome_events(&self.id, outcome, message_id, unix_ms);
        tasks.decide(&self.id, events, Some(result));
    }
}

/// The background job of one task, the driver of its [`JobMachine`]:
/// runs what the machine hands out (reads and saves on the store, the
/// fulfilment, a timer for its deadline) and gives it the answers, until
/// the terminal state is saved.
pub(super) struct Job<S: TaskStore, H: ServerHost, F: Fulfiller> {
    pub(super) server: Arc<A2aServer<S, H, F>>,
    pub(super) machine: JobMachine,
    pub(super) work: Option<BoxFuture<'static, Result<String, String>>>,
    pub(super) save: Option<SaveFuture>,
    pub(super) check: Option<ReadFuture>,
    /// The timer for the machine's deadline (that deadline).
    pub(super) timer: Option<(u64, BoxFuture<'static, ()>)>,
    pub(super) finished: bool,
    /// The span of this turn of the task, when the host records spans.
    pub(super) span: TaskSpan,
}

/// The span of one turn of a task (`a2a.task`), open while its job runs.
pub(super) type TaskSpan = Option<Box<crate::SpanRecord>>;

/// Polls the fulfilment; where panics unwind, a panicking one fails its
/// task instead of leaving it `working` forever. (With `panic = "abort"`,
/// as in the wasm build, a panic ends the whole instance anyway.)
pub(super) fn poll_work(
    work: &mut BoxFuture<'static, Result<String, String>>,
    cx: &mut Context<'_>,
) -> Poll<Result<String, String>> {
    #[cfg(panic = "unwind")]
    {
        let poll = std::panic::AssertUnwindSafe(|| work.as_mut().poll(cx));
        std::panic::catch_unwind(poll).unwrap_or_else(|_| Poll::Ready(Err(CRASHED.to_string())))
    }
    #[cfg(not(panic = "unwind"))]
    {
        work.as_mut().poll(cx)
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Job<S, H, F> {
    /// The job of `request` (waiting for a place) or of `work` (the
    /// fulfilment, started with the task).
    pub(super) fn new(
        server: Arc<A2aServer<S, H, F>>,
        id: String,
        request: Option<FulfilRequest>,
        work: Option<BoxFuture<'static, Result<String, String>>>,
        span: TaskSpan,
    ) -> Self {
        Job {
            machine: JobMachine::new(id, request, server.store_poll_ms),
            server,
            work,
            save: None,
            check: None,
            timer: None,
            finished: false,
            span,
        }
    }

    /// Runs what the machine hands out; `Ready` once it says the job is done.
    fn run_outputs(&mut self, cx: &Context<'_>) -> Poll<()> {
        let server = self.server.clone();
        loop {
            let output = {
                let mut tasks = server.tasks();
                if self.machine.waits_on_tasks() {
                    tasks.pending_job(&self.machine.id, cx);
                }
                let (now, unix) = (server.host.now_ms(), server.host.unix_ms());
                self.machine.poll_output(&mut tasks, now, unix)
            };
            match output {
                None => return Poll::Pending,
                Some(JobOutput::Read) => {
                    let (s, id) = (server.clone(), self.machine.id.clone());
                    self.check = Some(Box::pin(async move { s.store.get(&id).await }));
                }
                Some(JobOutput::Save(due)) => {
                    let s = server.clone();
                    self.save = Some(Box::pin(async move {
                        let result = s.store.save_with_events(&due.task, &due.events).await;
                        (due, result)
                    }));
                }
                Some(JobOutput::Fulfil(request)) => self.work = Some(server.fulfil(request)),
                Some(JobOutput::Stop) => self.work = None,
                Some(JobOutput::Done) => {
                    self.finished = true;
                    let hook = server.host.span_hook();
                    if let (Some(mut span), Some(hook)) = (self.span.take(), hook) {
                        if let Some(&(_, state)) = span.events.last() {
                            span.set("a2a.task.state", state);
                            span.error = matches!(state, "failed" | "rejected");
                        }
                        span.end(hook, server.host.now_ms());
                    }
                    return Poll::Ready(());
                }
            }
        }
    }

    /// A save ended: first what its answer means to the host (its span,
    /// the health, push notifications: `due` as stored), then to the
    /// machine, then the `on_task` hook and problems the machine reports.
    fn saved(&mut self, due: machine::Due, result: Result<(), StoreError>) {
        let server = self.server.clone();
        if result.is_ok() {
            if let Some(span) = self.span.as_mut() {
                let state = due.task.state.as_str();
                if span.events.last().is_none_or(|e| e.1 != state) {
                    span.events.push((server.host.now_ms(), state));
                }
            }
            server.save_worked();
            if !due.renewal {
                server.notify(&due.task);
            }
        }
        let now = server.host.now_ms();
        let after = self
            .machine
            .handle_saved(&mut server.tasks(), due, result, now);
        if let Some(after) = after {
            server.after_save(after);
        }
    }

    /// Keeps one timer, for the machine's deadline.
    fn arm(&mut self) {
        let deadline = self.machine.deadline();
        if self.timer.as_ref().map(|t| t.0) == deadline {
            return;
        }
        self.timer = None;
        if let Some(at) = deadline {
            match self.server.host.sleep_until(at) {
                Some(timer) => self.timer = Some((at, timer)),
                None => self.machine.handle_no_timer(&mut self.server.tasks()),
            }
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Future for Job<S, H, F> {
    type Output = ();

    /// Each answer goes to the machine, which is asked again at once: a
    /// save due after a read starts before the fulfilment is polled on.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let job = self.get_mut();
        let server = job.server.clone();
        loop {
            if job.run_outputs(cx).is_ready() {
                return Poll::Ready(());
            }
            if let Some(Poll::Ready(read)) = job.check.as_mut().map(|c| c.as_mut().poll(cx)) {
                job.check = None;
                let problem = job.machine.handle_read(&mut server.tasks(), read);
                if let Some(problem) = problem {
                    server.host.report(&problem);
                }
                continue;
            }
            if let Some(Poll::Ready((due, result))) = job.save.as_mut().map(|s| s.as_mut().poll(cx))
            {
                job.save = None;
                job.saved(due, result);
                continue;
            }
            if let Some(Poll::Ready(outcome)) = job.work.as_mut().map(|w| poll_work(w, cx)) {
                job.work = None;
                let (message_id, unix) = (server.host.new_id(), server.host.unix_ms());
                let mut tasks = server.tasks();
                job.machine
                    .handle_outcome(&mut tasks, outcome, message_id, unix);
                continue;
            }
            job.arm();
            if let Some((_, timer)) = job.timer.as_mut() {
                if timer.as_mut().poll(cx).is_ready() {
                    job.timer = None;
                    let now = server.host.now_ms();
                    job.machine.handle_timeout(&mut server.tasks(), now);
                    continue;
                }
            }
            return Poll::Pending;
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Job<S, H, F> {
    /// Dropped before its end (the host shut down): nobody is left waiting.
    fn drop(&mut self) {
        if !self.finished {
            self.server.tasks().abandon(&self.machine.id);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The job machine alone: its outputs for given answers and times,
    //! with no store, no fulfiller and no timers.
    use super::machine::tests::{request, task};
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Task `t` stored as submitted (the caller's save), its job waiting
    /// to be let in.
    fn job(tasks: &mut Tasks, store_poll_ms: Option<u64>) -> JobMachine {
        assert!(tasks.start(task("t"), "a1".into(), None, "hi".into()));
        let _ = tasks.saved(task("t"), Ok(()));
        JobMachine::new("t".into(), Some(request("t")), store_poll_ms)
    }

    fn save(job: &mut JobMachine, tasks: &mut Tasks, now: u64) -> machine::Due {
        match job.poll_output(tasks, now, Some(now)) {
            Some(JobOutput::Save(due)) => due,
            other => panic!("a save, not {other:?}"),
        }
    }

    #[test]
    fn a_job_starts_the_fulfilment_saves_each_state_in_order_and_ends_once_settled() {
        let mut tasks = Tasks::default();
        let mut job = job(&mut tasks, None);
        assert!(matches!(
            job.poll_output(&mut tasks, 0, None),
            Some(JobOutput::Fulfil(r)) if r.task_id == "t"
        ));
        let due = save(&mut job, &mut tasks, 0);
        assert_eq!(due.task.state, TaskState::Working);
        assert!(
            job.poll_output(&mut tasks, 0, None).is_none(),
            "one save at a time"
        );
        assert_eq!((due.task.revision.version, due.renewal), (1, false));
        let after = job.handle_saved(&mut tasks, due, Ok(()), 0);
        assert!(after.is_some_and(|a| a.settled.is_none() && a.problem.is_none()));
        assert!(job.poll_output(&mut tasks, 0, None).is_none(), "fulfilling");
        job.handle_outcome(&mut tasks, Ok("done".into()), "m1".into(), None);
        let due = save(&mut job, &mut tasks, 0);
        assert_eq!(due.task.state, TaskState::Completed);
        let after = job.handle_saved(&mut tasks, due, Ok(()), 0);
        assert!(
            after.is_some_and(|a| a.settled.is_some()),
            "the hook runs once the terminal state is stored"
        );
        assert!(matches!(
            job.poll_output(&mut tasks, 0, None),
            Some(JobOutput::Done)
        ));
        assert_eq!(job.deadline(), None);
    }

    /// Fulfilled and answered: the terminal save is due.
    fn settling(tasks: &mut Tasks) -> (JobMachine, machine::Due) {
        let mut job = job(tasks, None);
        let _ = job.poll_output(tasks, 0, None);
        let due = save(&mut job, tasks, 0);
        let _ = job.handle_saved(tasks, due, Ok(()), 0);
        job.handle_outcome(tasks, Ok("done".into()), "m1".into(), None);
        let due = save(&mut job, tasks, 0);
        (job, due)
    }

    #[test]
    fn a_refused_terminal_save_is_saved_again_at_its_deadline_and_not_before() {
        let mut tasks = Tasks::default();
        let (mut job, due) = settling(&mut tasks);
        let after = job.handle_saved(&mut tasks, due, Err(StoreError::new("disk full")), 1_000);
        assert!(after.is_some_and(|a| a.problem.is_some() && a.retry == Some(1)));
        let at = 1_000 + machine::retry_delay_ms(1);
        assert_eq!(job.deadline(), Some(at));
        assert!(job.poll_output(&mut tasks, 1_000, None).is_none());
        job.handle_timeout(&mut tasks, at - 1);
        assert!(
            job.poll_output(&mut tasks, at - 1, None).is_none(),
            "too early"
        );
        job.handle_timeout(&mut tasks, at);
        assert_eq!(job.deadline(), None);
        assert_eq!(
            save(&mut job, &mut tasks, at).task.state,
            TaskState::Completed
        );
    }

    #[test]
    fn without_a_timer_a_refused_save_is_saved_again_at_once() {
        let mut tasks = Tasks::default();
        let (mut job, due) = settling(&mut tasks);
        let _ = job.handle_saved(&mut tasks, due, Err(StoreError::new("disk full")), 0);
        assert!(job.poll_output(&mut tasks, 0, None).is_none());
        job.handle_no_timer(&mut tasks);
        assert_eq!(
            save(&mut job, &mut tasks, 0).task.state,
            TaskState::Completed
        );
    }

    #[cfg(feature = "replicas")]
    #[test]
    fn a_conflict_reads_the_store_and_a_cancel_stored_elsewhere_stops_the_fulfilment() {
        let mut tasks = Tasks::default();
        let mut job = job(&mut tasks, None);
        let _ = job.poll_output(&mut tasks, 0, None);
        let due = save(&mut job, &mut tasks, 0);
        let mut canceled = due.task.clone();
        let conflict = StoreError::conflict("t", Some(1), due.task.revision.version);
        let after = job.handle_saved(&mut tasks, due, Err(conflict), 0);
        assert!(after.is_none(), "nothing follows a conflict but the read");
        assert!(matches!(
            job.poll_output(&mut tasks, 0, None),
            Some(JobOutput::Read)
        ));
        assert!(
            job.poll_output(&mut tasks, 0, None).is_none(),
            "no save while reading"
        );
        canceled.state = TaskState::Canceled;
        canceled.revision.version = 1;
        assert_eq!(job.handle_read(&mut tasks, Ok(Some(canceled))), None);
        assert!(matches!(
            job.poll_output(&mut tasks, 0, None),
            Some(JobOutput::Stop)
        ));
        assert!(matches!(
            job.poll_output(&mut tasks, 0, None),
            Some(JobOutput::Done)
        ));
    }

    #[cfg(feature = "replicas")]
    #[test]
    fn the_lease_is_renewed_a_third_of_the_way_and_the_store_looked_at_every_poll() {
        let mut tasks = Tasks::default();
        tasks.set_lease("me".into(), Some(30_000));
        let mut job = job(&mut tasks, Some(1_000));
        let _ = job.poll_output(&mut tasks, 0, Some(0));
        let due = save(&mut job, &mut tasks, 0);
        let _ = job.handle_saved(&mut tasks, due, Ok(()), 0);
        assert!(job.poll_output(&mut tasks, 0, Some(0)).is_none());
        assert_eq!(job.deadline(), Some(1_000), "the store poll comes first");
        job.handle_timeout(&mut tasks, 1_000);
        assert!(matches!(
            job.poll_output(&mut tasks, 1_000, Some(1_000)),
            Some(JobOutput::Read)
        ));
        let stored = tasks.task("t").cloned();
        assert_eq!(job.handle_read(&mut tasks, Ok(stored)), None);
        assert!(job.poll_output(&mut tasks, 1_000, Some(1_000)).is_none());
        assert_eq!(job.deadline(), Some(2_000), "the next poll");
        job.handle_timeout(&mut tasks, 10_000);
        assert!(
            matches!(
                job.poll_output(&mut tasks, 10_000, Some(10_000)),
                Some(JobOutput::Read)
            ),
            "the poll was due too: the store first"
        );
        let stored = tasks.task("t").cloned();
        assert_eq!(job.handle_read(&mut tasks, Ok(stored)), None);
        let renewal = save(&mut job, &mut tasks, 10_000);
        assert!(renewal.renewal, "only the lease changed");
        assert_eq!(
            renewal.task.revision.lease.map(|l| l.until_ms),
            Some(40_000),
            "taken at the save"
        );
    }
}
