//! The events of a stored task running on another replica (a stream or a
//! SubscribeToTask served here), as a machine of the client's shape:
//! [`RemoteFollow::poll_output`] says what to do next and each `handle_*`
//! takes an answer; no store, no host, no futures. [`FollowStored`] is its
//! driver, the stream the SSE body reads.
//!
//! From the version `last`, the events are replayed from the store's
//! event log ([`TaskStore::events_after`]) with that version as the
//! cursor, then followed at each change the store tells of (or
//! `store_poll` finds), until the task stops. The cursor moves past each
//! event told, so none is told twice and none written after `last` is
//! missed. The stored task is watched before each read, so a change in
//! between is not missed. A store that keeps no log is followed by
//! comparing each version read with the one before it (chunks saved
//! together merge).

use super::*;
use crate::host::transport::BoxStream;
use std::collections::VecDeque;

/// What following a stored task is to do next.
// Each step is consumed as soon as it is made: boxing the event would only
// cost an allocation.
#[allow(clippy::large_enum_variant)]
#[must_use = "a step is what the stream waits for: run it, or the stream stalls"]
#[derive(Debug)]
pub(super) enum RemoteStep {
    /// Tell the caller this event.
    Emit(StreamEvent),
    /// Read the event log after this version; give it to [`RemoteFollow::handle_log`].
    ReadLog { after: u64 },
    /// Read the stored task; give it to [`RemoteFollow::handle_read`].
    Read,
    /// Wait for [`RemoteFollow::watch`] to fire ([`RemoteFollow::handle_changed`])
    /// or, if set, `until_ms` ([`RemoteFollow::handle_timeout`]).
    Wait { until_ms: Option<u64> },
    /// The task has stopped (or is gone): the stream ends.
    End,
}

/// What the next read is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The log after the cursor.
    Log,
    /// The task, after a log with nothing new: gone, or stopped by a write
    /// that logged nothing?
    Stopped,
    /// The task, from a store that keeps no log: what changed since `last`?
    Changed,
    /// Nothing until the store changes (or a poll is due).
    Wait,
}

/// Following one stored task.
#[derive(Debug)]
pub(super) struct RemoteFollow {
    /// The task as last told (without a log, what the next read is compared with).
    last: Task,
    /// The version of the last event told.
    cursor: u64,
    /// Read, not yet told.
    queue: VecDeque<StreamEvent>,
    /// The stopping event is read: the stream ends once the queue is told.
    done: bool,
    next: Next,
    store_poll_ms: Option<u64>,
    /// Fires when the stored task changes.
    watch: Option<Slot>,
}

impl RemoteFollow {
    /// Following `last`, the task as the caller was told of it.
    pub(super) fn new(last: Task, store_poll_ms: Option<u64>) -> RemoteFollow {
        RemoteFollow {
            cursor: last.revision.version,
            last,
            queue: VecDeque::new(),
            done: false,
            next: Next::Log,
            store_poll_ms,
            watch: None,
        }
    }

    /// The slot that fires on a change of the stored task, while waiting.
    pub(super) fn watch(&self) -> Option<Slot> {
        self.watch
    }

    /// The next thing to do at `now_ms`. Each read asked is answered before
    /// this is called again.
    pub(super) fn poll_output(&mut self, tasks: &mut Tasks, now_ms: u64) -> RemoteStep {
        if let Some(event) = self.queue.pop_front() {
            return RemoteStep::Emit(event);
        }
        if self.done {
            return RemoteStep::End;
        }
        if self.watch.is_none() {
            // Watch before reading, so a change in between is not missed.
            self.watch = Some(tasks.watch(&self.last.id));
        }
        match self.next {
            Next::Log => RemoteStep::ReadLog { after: self.cursor },
            Next::Stopped | Next::Changed => RemoteStep::Read,
            Next::Wait => RemoteStep::Wait {
                until_ms: self.store_poll_ms.map(|ms| now_ms.saturating_add(ms)),
            },
        }
    }

    /// The event log after the cursor (`None`: the store keeps none).
    pub(super) fn handle_log(&mut self, log: Result<Option<Vec<LoggedEvent>>, StoreError>) {
        self.next = match log {
            Ok(Some(events)) if !events.is_empty() => {
                for (version, event) in events {
                    self.cursor = self.cursor.max(version);
                    self.done = event.state().is_some_and(machine::ends_stream);
                    self.queue.push_back(event);
                    if self.done {
                        break;
                    }
                }
                Next::Log
            }
            // Nothing logged since: gone, or stopped by a write that
            // logged nothing; else wait.
            Ok(Some(_)) => Next::Stopped,
            // No log: compare versions.
            Ok(None) => Next::Changed,
            // Unreadable for now: wait for the next change.
            Err(_) => Next::Wait,
        };
    }

    /// The stored task, read after [`RemoteStep::Read`].
    pub(super) fn handle_read(&mut self, read: Result<Option<Task>, StoreError>) {
        let (next, now) = (self.next, read);
        self.next = Next::Wait;
        match (next, now) {
            // Gone.
            (_, Ok(None)) => self.done = true,
            (Next::Stopped, Ok(Some(now)))
                if now.revision.version > self.cursor && machine::ends_stream(now.state) =>
            {
                self.queue.push_back(machine::status(
                    &now,
                    now.state,
                    now.status_message.clone(),
                    now.updated_ms,
                ));
                self.done = true;
            }
            (Next::Changed, Ok(Some(now))) if now.revision.version > self.last.revision.version => {
                self.queue.extend(stream::changes(&self.last, &now));
                self.done = machine::ends_stream(now.state);
                self.last = now;
                self.next = Next::Changed;
            }
            // Unchanged, or unreadable for now: wait for the next change.
            _ => {}
        }
    }

    /// [`RemoteFollow::watch`] fired: the store changed; read it again
    /// (watched anew first).
    pub(super) fn handle_changed(&mut self, tasks: &mut Tasks) {
        if let Some(slot) = self.watch.take() {
            tasks.drop_watch(slot);
        }
        self.next = Next::Log;
    }

    /// The `store_poll` is due: read it again.
    pub(super) fn handle_timeout(&mut self) {
        self.next = Next::Log;
    }

    /// Following ends (the stream ended, or its caller went away).
    pub(super) fn end(&mut self, tasks: &mut Tasks) {
        if let Some(slot) = self.watch.take() {
            tasks.drop_watch(slot);
        }
    }
}

/// The driver of a [`RemoteFollow`]: a stream of the task's events.
pub(super) struct FollowStored<S: TaskStore, H: ServerHost, F: Fulfiller> {
    server: Arc<A2aServer<S, H, F>>,
    follow: RemoteFollow,
    log: Option<BoxFuture<'static, Result<Option<Vec<LoggedEvent>>, StoreError>>>,
    read: Option<job::ReadFuture>,
    /// Waiting: the store poll's timer, if any.
    waiting: Option<Option<BoxFuture<'static, ()>>>,
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The events of the stored task `last` (running on another replica)
    /// after the version the caller was told of.
    pub(super) fn follow_stored(self: &Arc<Self>, last: Task) -> BoxStream<'static, StreamEvent> {
        Box::pin(FollowStored {
            follow: RemoteFollow::new(last, self.store_poll_ms),
            server: self.clone(),
            log: None,
            read: None,
            waiting: None,
        })
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> futures_util::Stream for FollowStored<S, H, F> {
    type Item = StreamEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamEvent>> {
        let me = self.get_mut();
        let server = me.server.clone();
        loop {
            if let Some(log) = me.log.as_mut() {
                let Poll::Ready(log) = log.as_mut().poll(cx) else {
                    return Poll::Pending;
                };
                me.log = None;
                me.follow.handle_log(log);
            } else if let Some(read) = me.read.as_mut() {
                let Poll::Ready(read) = read.as_mut().poll(cx) else {
                    return Poll::Pending;
                };
                me.read = None;
                me.follow.handle_read(read);
            } else if let Some(timer) = me.waiting.as_mut() {
                let watch = me.follow.watch();
                let changed = watch.is_some_and(|slot| {
                    let mut tasks = server.tasks();
                    tasks.poll(slot, cx, |t| t.poll_watch(slot)).is_ready()
                });
                if changed {
                    me.waiting = None;
                    me.follow.handle_changed(&mut server.tasks());
                } else if timer
                    .as_mut()
                    .is_some_and(|t| t.as_mut().poll(cx).is_ready())
                {
                    me.waiting = None;
                    me.follow.handle_timeout();
                } else {
                    return Poll::Pending;
                }
            } else {
                let now = server.host.now_ms();
                let step = me.follow.poll_output(&mut server.tasks(), now);
                // The id only for a read (not for each event told).
                let read = || (server.clone(), me.follow.last.id.clone());
                match step {
                    RemoteStep::Emit(event) => return Poll::Ready(Some(event)),
                    RemoteStep::End => return Poll::Ready(None),
                    RemoteStep::ReadLog { after } => {
                        let (s, id) = read();
                        me.log = Some(Box::pin(
                            async move { s.store.events_after(&id, after).await },
                        ));
                    }
                    RemoteStep::Read => {
                        let (s, id) = read();
                        me.read = Some(Box::pin(async move { s.store.get(&id).await }));
                    }
                    RemoteStep::Wait { until_ms } => {
                        me.waiting = Some(until_ms.and_then(|at| server.host.sleep_until(at)));
                    }
                }
            }
        }
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for FollowStored<S, H, F> {
    fn drop(&mut self) {
        self.follow.end(&mut self.server.tasks());
    }
}

#[cfg(test)]
mod tests {
    //! Following a stored task with the machine alone: given logs and
    //! reads, the events told, with no store, no host and no timers.
    use super::machine::tests::task;
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn at(version: u64, state: TaskState) -> Task {
        let mut t = task("t");
        t.state = state;
        t.revision.version = version;
        t
    }

    fn event(t: &Task) -> StreamEvent {
        machine::status(t, t.state, None, None)
    }

    fn states(follow: &mut RemoteFollow, tasks: &mut Tasks) -> Vec<TaskState> {
        let mut told = Vec::new();
        while let RemoteStep::Emit(e) = follow.poll_output(tasks, 0) {
            told.extend(e.state());
        }
        told
    }

    #[test]
    fn the_log_is_replayed_from_the_cursor_then_followed_at_each_change_until_the_task_stops() {
        let mut tasks = Tasks::default();
        let mut f = RemoteFollow::new(at(2, TaskState::Working), Some(1_000));
        assert!(matches!(
            f.poll_output(&mut tasks, 0),
            RemoteStep::ReadLog { after: 2 }
        ));
        let watch = f.watch().expect("watched before the read");
        f.handle_log(Ok(Some(vec![(3, event(&at(3, TaskState::Working)))])));
        assert_eq!(states(&mut f, &mut tasks), [TaskState::Working]);
        assert!(
            matches!(
                f.poll_output(&mut tasks, 0),
                RemoteStep::ReadLog { after: 3 }
            ),
            "the cursor moved past the event told"
        );
        f.handle_log(Ok(Some(Vec::new())));
        assert!(matches!(f.poll_output(&mut tasks, 0), RemoteStep::Read));
        f.handle_read(Ok(Some(at(3, TaskState::Working))));
        assert!(matches!(
            f.poll_output(&mut tasks, 50),
            RemoteStep::Wait {
                until_ms: Some(1_050)
            }
        ));
        tasks.store_changed("t", Some(5));
        assert!(tasks.poll_watch(watch).is_ready());
        f.handle_changed(&mut tasks);
        assert!(matches!(
            f.poll_output(&mut tasks, 60),
            RemoteStep::ReadLog { after: 3 }
        ));
        assert_ne!(f.watch(), Some(watch), "watched anew before the read");
        f.handle_log(Ok(Some(vec![
            (4, event(&at(4, TaskState::Working))),
            (5, event(&at(5, TaskState::Completed))),
            (6, event(&at(6, TaskState::Working))),
        ])));
        assert_eq!(
            states(&mut f, &mut tasks),
            [TaskState::Working, TaskState::Completed],
            "nothing after the stopping event"
        );
        assert!(matches!(f.poll_output(&mut tasks, 60), RemoteStep::End));
        f.end(&mut tasks);
    }

    #[test]
    fn a_stop_that_logged_nothing_is_read_from_the_task_and_a_gone_task_ends_the_stream() {
        let mut tasks = Tasks::default();
        let mut f = RemoteFollow::new(at(2, TaskState::Working), None);
        let _ = f.poll_output(&mut tasks, 0);
        f.handle_log(Ok(Some(Vec::new())));
        let _ = f.poll_output(&mut tasks, 0);
        f.handle_read(Ok(Some(at(3, TaskState::Failed))));
        assert_eq!(states(&mut f, &mut tasks), [TaskState::Failed]);
        assert!(matches!(f.poll_output(&mut tasks, 0), RemoteStep::End));

        let mut gone = RemoteFollow::new(at(2, TaskState::Working), None);
        let _ = gone.poll_output(&mut tasks, 0);
        gone.handle_log(Ok(Some(Vec::new())));
        let _ = gone.poll_output(&mut tasks, 0);
        gone.handle_read(Ok(None));
        assert!(matches!(gone.poll_output(&mut tasks, 0), RemoteStep::End));
    }

    #[test]
    fn without_a_log_each_version_read_is_compared_with_the_last_told() {
        let mut tasks = Tasks::default();
        let mut f = RemoteFollow::new(at(2, TaskState::Working), None);
        let _ = f.poll_output(&mut tasks, 0);
        f.handle_log(Ok(None));
        assert!(matches!(f.poll_output(&mut tasks, 0), RemoteStep::Read));
        f.handle_read(Ok(Some(at(2, TaskState::Working))));
        assert!(
            matches!(
                f.poll_output(&mut tasks, 0),
                RemoteStep::Wait { until_ms: None }
            ),
            "unchanged: wait for a change"
        );
        f.handle_changed(&mut tasks);
        let _ = f.poll_output(&mut tasks, 0);
        f.handle_log(Ok(None));
        let _ = f.poll_output(&mut tasks, 0);
        f.handle_read(Ok(Some(at(4, TaskState::Completed))));
        assert_eq!(states(&mut f, &mut tasks), [TaskState::Completed]);
        assert!(matches!(f.poll_output(&mut tasks, 0), RemoteStep::End));
    }

    #[test]
    fn an_unreadable_log_waits_for_the_next_change_or_poll() {
        let mut tasks = Tasks::default();
        let mut f = RemoteFollow::new(at(2, TaskState::Working), Some(500));
        let _ = f.poll_output(&mut tasks, 0);
        f.handle_log(Err(StoreError::new("connection reset")));
        assert!(matches!(
            f.poll_output(&mut tasks, 10),
            RemoteStep::Wait {
                until_ms: Some(510)
            }
        ));
        f.handle_timeout();
        assert!(matches!(
            f.poll_output(&mut tasks, 510),
            RemoteStep::ReadLog { after: 2 }
        ));
    }
}
