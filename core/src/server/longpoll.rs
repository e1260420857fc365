//! GetTask with `Prefer: wait=N` (a long-poll) as a machine of the
//! client's shape: [`LongPoll::start`] and each `handle_*` return the one
//! next [`LongPollStep`]; no store, no host, no futures.
//! [`A2aServer::get_task_waiting`] is its driver.
//!
//! The answer is held while the task is still running and the wait lasts,
//! so a caller sees it settle at once instead of at its next poll. A task
//! running here wakes the long-poll through the task machine with its
//! saved state; one running on another replica through the store's change
//! ([`A2aServer::store_changed`], or every `store_poll`), after which it
//! is read again. Whatever comes first, the waiter (or watch) is taken
//! before the task is read, so a task settling in between is not missed.

use super::*;

/// What a long-poll is to do next.
// Each step is consumed as soon as it is made: boxing the task would only
// cost an allocation.
#[allow(clippy::large_enum_variant)]
#[must_use = "a long-poll's step is what it waits for: run it, or the request never answers"]
#[derive(Debug)]
pub(super) enum LongPollStep {
    /// Read the stored task for the caller; give it to [`LongPoll::handle_read`].
    Read,
    /// Wait for the task machine: the task's saved state on
    /// [`LongPoll::waiter`] ([`LongPoll::handle_waited`]), or a change of the
    /// stored task on [`LongPoll::watch`] ([`LongPoll::handle_changed`]); at
    /// `until_ms` at the latest, [`LongPoll::handle_timeout`].
    Wait { until_ms: u64 },
    /// The answer.
    Answer(Result<Task, RpcError>),
}

/// One long-polling GetTask.
#[derive(Debug)]
pub(super) struct LongPoll {
    /// The task (watched again by it after each change).
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    id: String,
    /// When the caller's wait ends.
    until_ms: u64,
    store_poll_ms: Option<u64>,
    /// The task runs here: the task machine tells its saved state here.
    waiter: Option<Slot>,
    /// It does not: the task machine tells of a change of the stored task here.
    watch: Option<Slot>,
    /// The next read is the answer, whatever the task's state.
    last: bool,
}

impl LongPoll {
    /// The long-poll of task `id` at `now_ms`, until `until_ms`; a task
    /// running elsewhere is also read every `store_poll_ms`.
    pub(super) fn start(
        tasks: &mut Tasks,
        id: &str,
        until_ms: u64,
        store_poll_ms: Option<u64>,
    ) -> (LongPoll, LongPollStep) {
        let waiter = tasks.wait(id, Until::Stops);
        #[cfg(feature = "replicas")]
        let watch = waiter.is_none().then(|| tasks.watch(id));
        #[cfg(not(feature = "replicas"))]
        let watch = None;
        let poll = LongPoll {
            id: id.to_string(),
            until_ms,
            store_poll_ms,
            waiter,
            watch,
            last: false,
        };
        (poll, LongPollStep::Read)
    }

    /// The slot whose answer is the task's saved state, if it runs here.
    pub(super) fn waiter(&self) -> Option<Slot> {
        self.waiter
    }

    /// The slot that fires on a change of the stored task, if it runs elsewhere.
    pub(super) fn watch(&self) -> Option<Slot> {
        self.watch
    }

    /// The task as read for the caller, at `now_ms`.
    pub(super) fn handle_read(
        &mut self,
        read: Result<Task, RpcError>,
        now_ms: u64,
    ) -> LongPollStep {
        match read {
            Ok(task) if !self.last && !machine::ends_stream(task.state) => {
                // Running here: the waiter tells. Elsewhere: also look at
                // the store every `store_poll` in case a change is not told.
                let poll = self
                    .store_poll_ms
                    .filter(|_| self.watch.is_some())
                    .map(|ms| now_ms.saturating_add(ms));
                LongPollStep::Wait {
                    until_ms: poll.map_or(self.until_ms, |p| p.min(self.until_ms)),
                }
            }
            answer => LongPollStep::Answer(answer),
        }
    }

    /// The task machine's answer on [`LongPoll::waiter`].
    pub(super) fn handle_waited(&mut self, waited: Waited) -> LongPollStep {
        self.waiter = None;
        match saved_state(waited) {
            Some(answer) => LongPollStep::Answer(answer),
            // The job ended without a saved outcome: the task as stored.
            None => {
                self.last = true;
                LongPollStep::Read
            }
        }
    }

    /// [`LongPoll::watch`] fired: the stored task changed. Watched again
    /// before it is read, so a change in between is not missed.
    #[cfg(feature = "replicas")]
    pub(super) fn handle_changed(&mut self, tasks: &mut Tasks) -> LongPollStep {
        if let Some(slot) = self.watch.take() {
            tasks.drop_watch(slot);
        }
        self.watch = Some(tasks.watch(&self.id));
        LongPollStep::Read
    }

    /// The time is `now_ms`: past the caller's wait, the next read is the
    /// answer; before it, the store is due a look.
    pub(super) fn handle_timeout(&mut self, now_ms: u64) -> LongPollStep {
        if now_ms >= self.until_ms {
            self.last = true;
        }
        LongPollStep::Read
    }

    /// The long-poll is over (answered, or its caller gone): its slots are freed.
    pub(super) fn end(&mut self, tasks: &mut Tasks) {
        if let Some(slot) = self.waiter.take() {
            tasks.drop_wait(slot);
        }
        #[cfg(feature = "replicas")]
        if let Some(slot) = self.watch.take() {
            tasks.drop_watch(slot);
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The long-poll a GetTask (`is_get`) asks with `Prefer: wait=N`: N,
    /// and when the wait ends. `None`: answer at once (no wait asked,
    /// another method, or a host without a timer).
    pub(super) fn long_poll(&self, req: &HttpRequest, is_get: bool) -> Option<(u64, u64)> {
        let secs = preferred_wait(req).filter(|_| is_get)?;
        let at = self.host.now_ms().saturating_add(secs * 1000);
        // Hosts without a timer answer at once, as if no wait was asked.
        drop(self.host.sleep_until(at)?);
        Some((secs, at))
    }

    /// GetTask that holds the answer until `until_ms` while the task is
    /// still running: the driver of a [`LongPoll`].
    pub(super) async fn get_task_waiting(
        self: &Arc<Self>,
        io: &Io<H>,
        call: &RpcRequest,
        until_ms: u64,
        owner: Owner<'_>,
    ) -> Result<Answer, RpcError> {
        /// Frees the long-poll's slots however the request ends.
        struct Held<'a, S: TaskStore, H: ServerHost, F: Fulfiller> {
            server: &'a A2aServer<S, H, F>,
            poll: LongPoll,
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Held<'_, S, H, F> {
            fn drop(&mut self) {
                self.poll.end(&mut self.server.tasks());
            }
        }
        let id = call
            .params
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (poll, mut step) = LongPoll::start(&mut self.tasks(), id, until_ms, self.store_poll_ms);
        let mut held = Held { server: self, poll };
        let history = validate::history_length(&call.params, "historyLength")?;
        let task = loop {
            step = match step {
                LongPollStep::Read => {
                    // Another caller's task is not found.
                    let read = self.existing(io, &call.params, owner).await;
                    let read = read.map(Arc::unwrap_or_clone);
                    held.poll.handle_read(read, self.host.now_ms())
                }
                LongPollStep::Answer(answer) => break answer?,
                LongPollStep::Wait { until_ms } => {
                    let end = held.poll.until_ms;
                    let wait = exchange::Wait::long_poll(
                        held.poll.waiter(),
                        held.poll.watch(),
                        end,
                        // Before the caller's wait ends: a look at the store.
                        (until_ms < end).then_some(until_ms),
                    );
                    match io.wait(wait).await {
                        Woke::Waited(waited) => held.poll.handle_waited(waited),
                        #[cfg(feature = "replicas")]
                        Woke::Changed => held.poll.handle_changed(&mut self.tasks()),
                        #[cfg(not(feature = "replicas"))]
                        Woke::Changed => held.poll.handle_timeout(self.host.now_ms()),
                        Woke::Timeout(now_ms) => held.poll.handle_timeout(now_ms),
                    }
                }
            };
        };
        drop(held);
        Ok(Answer::about(call, Arc::new(task), history))
    }
}

#[cfg(test)]
mod tests {
    //! The long-poll machine alone: its steps for given reads, waits,
    //! changes and times, with no store, no host and no timers.
    use super::machine::tests::task;
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn in_state(state: TaskState) -> Task {
        let mut t = task("t");
        t.state = state;
        t
    }

    /// Task `t` running here (its first save done).
    fn running() -> Tasks {
        let mut tasks = Tasks::default();
        assert!(tasks.start(task("t"), "a1".into(), None, "hi".into()));
        let _ = tasks.saved(task("t"), Ok(()));
        tasks
    }

    #[test]
    fn a_task_running_here_is_answered_with_its_saved_state_when_it_settles() {
        let mut tasks = running();
        let (mut poll, step) = LongPoll::start(&mut tasks, "t", 10_000, Some(1_000));
        assert!(matches!(step, LongPollStep::Read));
        assert!(poll.waiter().is_some() && poll.watch().is_none());
        assert!(
            matches!(
                poll.handle_read(Ok(in_state(TaskState::Working)), 0),
                LongPollStep::Wait { until_ms: 10_000 }
            ),
            "no store polls for a task the task machine tells of"
        );
        assert!(matches!(
            poll.handle_waited(Waited::Saved(in_state(TaskState::Completed))),
            LongPollStep::Answer(Ok(t)) if t.state == TaskState::Completed
        ));
        poll.end(&mut tasks);
    }

    #[test]
    fn a_settled_or_unreadable_task_is_answered_at_once() {
        let mut tasks = Tasks::default();
        let (mut poll, _) = LongPoll::start(&mut tasks, "t", 10_000, None);
        assert!(matches!(
            poll.handle_read(Ok(in_state(TaskState::InputRequired)), 0),
            LongPollStep::Answer(Ok(_))
        ));
        assert!(matches!(
            poll.handle_read(Err(task_not_found("t")), 0),
            LongPollStep::Answer(Err(_))
        ));
    }

    #[test]
    fn past_the_wait_or_after_a_released_job_the_next_read_is_the_answer() {
        let mut tasks = running();
        let (mut poll, _) = LongPoll::start(&mut tasks, "t", 10_000, None);
        let _ = poll.handle_read(Ok(in_state(TaskState::Working)), 0);
        assert!(matches!(poll.handle_timeout(10_000), LongPollStep::Read));
        assert!(matches!(
            poll.handle_read(Ok(in_state(TaskState::Working)), 10_000),
            LongPollStep::Answer(Ok(t)) if t.state == TaskState::Working
        ));
        let (mut poll, _) = LongPoll::start(&mut tasks, "t", 10_000, None);
        assert!(matches!(
            poll.handle_waited(Waited::Released),
            LongPollStep::Read
        ));
        assert!(matches!(
            poll.handle_read(Ok(in_state(TaskState::Working)), 5),
            LongPollStep::Answer(Ok(_))
        ));
        assert!(matches!(
            poll.handle_waited(Waited::SaveFailed("disk full".into())),
            LongPollStep::Answer(Err(_))
        ));
    }

    #[cfg(feature = "replicas")]
    #[test]
    fn a_task_running_elsewhere_is_read_at_each_change_and_store_poll_until_it_settles() {
        let mut tasks = Tasks::default();
        let (mut poll, _) = LongPoll::start(&mut tasks, "t", 10_000, Some(1_000));
        let watch = poll.watch().expect("watched, not running here");
        assert!(poll.waiter().is_none());
        assert!(matches!(
            poll.handle_read(Ok(in_state(TaskState::Working)), 0),
            LongPollStep::Wait { until_ms: 1_000 }
        ));
        // The store poll finds it unchanged.
        assert!(matches!(poll.handle_timeout(1_000), LongPollStep::Read));
        assert!(matches!(
            poll.handle_read(Ok(in_state(TaskState::Working)), 1_000),
            LongPollStep::Wait { until_ms: 2_000 }
        ));
        // Another replica saves it: the store tells.
        tasks.store_changed("t", Some(2));
        assert!(tasks.poll_watch(watch).is_ready());
        assert!(matches!(
            poll.handle_changed(&mut tasks),
            LongPollStep::Read
        ));
        let again = poll.watch().expect("watched again before the read");
        assert_ne!(again, watch);
        assert!(tasks.poll_watch(again).is_pending());
        assert!(matches!(
            poll.handle_read(Ok(in_state(TaskState::Completed)), 1_500),
            LongPollStep::Answer(Ok(t)) if t.state == TaskState::Completed
        ));
        // Near the end of the wait, the next look is the wait's end.
        let (mut late, _) = LongPoll::start(&mut tasks, "t", 10_000, Some(1_000));
        assert!(matches!(
            late.handle_read(Ok(in_state(TaskState::Working)), 9_500),
            LongPollStep::Wait { until_ms: 10_000 }
        ));
        poll.end(&mut tasks);
        late.end(&mut tasks);
        assert!(tasks.poll_watch(again).is_ready(), "freed");
    }
}
