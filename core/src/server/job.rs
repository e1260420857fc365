//! The background job of one task: its fulfilment, and every save the
//! machine says is due, until the terminal state is stored.

use super::*;

pub(super) type SaveFuture = BoxFuture<'static, (machine::Due, Result<(), StoreError>)>;
pub(super) type ReadFuture = BoxFuture<'static, Result<Option<Task>, StoreError>>;

/// The background job of one task: runs its fulfilment and saves every
/// state the machine says is due, one save at a time, until the terminal
/// state is saved.
pub(super) struct Job<S: TaskStore, H: ServerHost, F: Fulfiller> {
    pub(super) server: Arc<A2aServer<S, H, F>>,
    pub(super) id: String,
    /// A task waiting for a place: what to fulfil once let in.
    pub(super) request: Option<FulfilRequest>,
    /// The wait before saving a refused terminal state again.
    pub(super) retry: Option<BoxFuture<'static, ()>>,
    pub(super) work: Option<BoxFuture<'static, Result<String, String>>>,
    pub(super) save: Option<SaveFuture>,
    /// A read of the stored task, to reconcile with (after a conflict or a
    /// change elsewhere).
    pub(super) check: Option<ReadFuture>,
    /// The next lease renewal, and the next look at the store.
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    pub(super) renew: Option<BoxFuture<'static, ()>>,
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    pub(super) poll: Option<BoxFuture<'static, ()>>,
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

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Future for Job<S, H, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let job = self.get_mut();
        let server = job.server.clone();
        loop {
            let mut moved = false;
            // A change elsewhere (or a conflict): read the task and reconcile.
            if job.check.is_none() && job.save.is_none() && server.tasks().take_check(&job.id) {
                let s = server.clone();
                let id = job.id.clone();
                job.check = Some(Box::pin(async move { s.store.get(&id).await }));
            }
            if let Some(check) = job.check.as_mut() {
                if let Poll::Ready(read) = check.as_mut().poll(cx) {
                    job.check = None;
                    match read {
                        Ok(stored) => server.tasks().reconcile(&job.id, stored),
                        Err(e) => server
                            .host
                            .report(&format!("task {}: reading it again failed: {e}", job.id)),
                    }
                    moved = true;
                }
            }
            // Saves first, so each state reaches the store in order.
            if job.save.is_none() && job.check.is_none() {
                let due = server.tasks().next_save(&job.id, server.host.unix_ms());
                if let Some(due) = due {
                    let s = server.clone();
                    job.save = Some(Box::pin(async move {
                        let result = s.store.save_with_events(&due.task, &due.events).await;
                        (due, result)
                    }));
                }
            }
            if let Some(save) = job.save.as_mut() {
                if let Poll::Ready((due, result)) = save.as_mut().poll(cx) {
                    job.save = None;
                    let task = due.task;
                    if result.is_err() {
                        // Not stored: its events go with the next save.
                        server.tasks().unlogged(&task.id, due.events);
                    }
                    if matches!(&result, Err(e) if e.is_conflict()) {
                        // Another replica wrote it: nothing of ours was stored.
                        server.tasks().conflicted(&task);
                        continue;
                    }
                    if result.is_ok() {
                        if let Some(span) = job.span.as_mut() {
                            let state = task.state.as_str();
                            if span.events.last().is_none_or(|e| e.1 != state) {
                                span.events.push((server.host.now_ms(), state));
                            }
                        }
                        server.save_worked();
                        if !due.renewal {
                            server.notify(&task);
                        }
                        server
                            .tasks()
                            .store_changed(&task.id, Some(task.revision.version));
                    }
                    let mut after = server
                        .tasks()
                        .saved(task, result.map_err(|e| e.to_string()));
                    if let Some(n) = after.retry.take() {
                        let at = server
                            .host
                            .now_ms()
                            .saturating_add(machine::retry_delay_ms(n));
                        match server.host.sleep_until(at) {
                            Some(timer) => job.retry = Some(timer),
                            // No timer to wait with: retry at once.
                            None => server.tasks().retry_now(&job.id),
                        }
                    }
                    server.after_save(after);
                    moved = true;
                }
            }
            if let Some(retry) = job.retry.as_mut() {
                if retry.as_mut().poll(cx).is_ready() {
                    job.retry = None;
                    server.tasks().retry_now(&job.id);
                    moved = true;
                }
            }
            if job.request.is_some() {
                let mut tasks = server.tasks();
                match tasks.poll_admitted(&job.id) {
                    machine::Admitted::Waiting => tasks.pending_job(&job.id, cx),
                    machine::Admitted::Never => {
                        tasks.work_ended(&job.id);
                        job.request = None;
                        moved = true;
                    }
                    machine::Admitted::Yes => {
                        server.working(&mut tasks, &job.id);
                        drop(tasks);
                        job.work = job.request.take().map(|r| server.fulfil(r));
                        moved = true;
                    }
                }
            }
            if let Some(work) = job.work.as_mut() {
                let stop = {
                    let mut tasks = server.tasks();
                    tasks.pending_job(&job.id, cx);
                    tasks.job_poll(&job.id)
                };
                if stop {
                    // Canceled: the cancel has decided the outcome.
                    job.work = None;
                    server.tasks().work_ended(&job.id);
                } else if let Poll::Ready(outcome) = poll_work(work, cx) {
                    job.work = None;
                    let result = match &outcome {
                        Ok(text) | Err(text) => text.clone(),
                    };
                    let message_id = server.host.new_id();
                    let mut tasks = server.tasks();
                    tasks.work_ended(&job.id);
                    let now = server.host.unix_ms();
                    let events = tasks.outcome_events(&job.id, outcome, message_id, now);
                    // A cancel that raced the answer wins: it decided first.
                    tasks.decide(&job.id, events, Some(result));
                    moved = true;
                }
            }
            if job.save.is_none() && job.check.is_none() && server.tasks().finished(&job.id) {
                job.finished = true;
                if let (Some(mut span), Some(hook)) = (job.span.take(), server.host.span_hook()) {
                    if let Some(&(_, state)) = span.events.last() {
                        span.set("a2a.task.state", state);
                        span.error = matches!(state, "failed" | "rejected");
                    }
                    span.end(hook, server.host.now_ms());
                }
                return Poll::Ready(());
            }
            // The lease is renewed a third of the way through; the store is
            // looked at every `store_poll` in case a change was not told.
            #[cfg(feature = "replicas")]
            job.timers(&server, cx, &mut moved);
            if !moved {
                return Poll::Pending;
            }
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Job<S, H, F> {
    #[cfg(feature = "replicas")]
    pub(super) fn timers(
        &mut self,
        server: &Arc<A2aServer<S, H, F>>,
        cx: &mut Context<'_>,
        moved: &mut bool,
    ) {
        let job = self;
        let lease_ms = server.tasks().lease_ms();
        if let Some(ms) = lease_ms {
            if job.renew.is_none() {
                job.renew = server.host.sleep_until(server.host.now_ms() + ms / 3);
            }
            if let Some(renew) = job.renew.as_mut() {
                if renew.as_mut().poll(cx).is_ready() {
                    job.renew = None;
                    server.tasks().renew(&job.id);
                    *moved = true;
                }
            }
        }
        if let Some(ms) = server.store_poll_ms {
            if job.poll.is_none() {
                job.poll = server.host.sleep_until(server.host.now_ms() + ms);
            }
            if let Some(poll) = job.poll.as_mut() {
                if poll.as_mut().poll(cx).is_ready() {
                    job.poll = None;
                    server.tasks().store_changed(&job.id, None);
                    *moved = true;
                }
            }
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Job<S, H, F> {
    /// Dropped before its end (the host shut down): nobody is left waiting.
    fn drop(&mut self) {
        if !self.finished {
            self.server.tasks().abandon(&self.id);
        }
    }
}
