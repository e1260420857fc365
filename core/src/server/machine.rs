//! The lifecycle of running tasks, as a machine with no I/O and no locks:
//! every change to a task goes through [`Tasks`], which orders it, tells
//! the task's streams and waiters, and says what to save next.
//!
//! Rules it keeps for every task, whatever races with what:
//! - progress is taken until the outcome is decided (the fulfilment ended,
//!   a cancel, a crash); after that, nothing but that outcome;
//! - one save at a time, always of the latest state, in order; nothing is
//!   saved after the terminal state;
//! - waiters (a blocking SendMessage, a long-polling GetTask, a CancelTask)
//!   hear of a state only once it has been saved, and of a failed save as
//!   such; the `on_task` hook runs once, after the terminal state is saved.
//!
//! The server keeps one `Tasks` behind its one lock. The async parts (the
//! fulfilment job, event streams, waiting requests) each own a [`Slot`] and
//! poll the machine for it; the machine keeps no wakers: it says which slots
//! to wake, or to forget, as [`Signal`]s the driver takes after each
//! operation ([`Tasks::take_signals`]), so no channel is needed.

use crate::model::event::{StatusUpdate, StreamEvent};
use crate::model::task::{Lease, Message, Task, TaskState};
use hashbrown::HashMap;
use std::collections::VecDeque;
use std::task::Poll;

/// The handle of one stream, waiter, watch or job.
pub(crate) type Slot = u64;

/// What the machine tells its driver about a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Something changed for the slot's owner: poll again.
    Wake(Slot),
    /// The slot is gone: nothing will wake it again.
    Forget(Slot),
}

/// What a waiter waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// The task stops: terminal or interrupted (blocking send, long-poll).
    Stops,
    /// The task is terminal (a cancel waiting for its canceled state).
    Terminal,
}

/// What a waiter gets.
// Handed once to each waiter: boxing the task would cost an allocation there.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Waited {
    /// The task as saved.
    Saved(Task),
    /// Saving that state failed: it was not acknowledged.
    SaveFailed(String),
    /// The job ended without a saved outcome (the host dropped it).
    Released,
}

/// What the server does after a save: the hook and problems to report.
#[derive(Debug, Default)]
#[must_use]
pub(crate) struct AfterSave {
    /// The task reached its terminal state, saved: run the `on_task` hook.
    pub(crate) settled: Option<(Task, RunInfo)>,
    /// A problem no caller will see.
    pub(crate) problem: Option<String>,
    /// The terminal state was not saved: try again after this retry (1, 2,
    /// …) has waited ([`retry_delay_ms`]), then [`Tasks::retry_now`].
    pub(crate) retry: Option<u32>,
}

/// How many times a refused terminal state is saved again before the task
/// is given up (left as stored, the host told).
pub(crate) const TERMINAL_SAVE_RETRIES: u32 = 8;

/// The wait before retry `n` (1-based) of a terminal save: 500 ms doubling,
/// at most 30 s (about 90 s in all), so a disk that frees up gets the
/// outcome stored instead of a task `working` forever.
pub(crate) fn retry_delay_ms(n: u32) -> u64 {
    (500u64 << n.saturating_sub(1).min(6)).min(30_000)
}

/// What the hook needs that the task does not say.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunInfo {
    pub(crate) skill: Option<String>,
    pub(crate) text: String,
    pub(crate) result: Option<String>,
}

struct Run {
    /// The task as its fulfilment has made it so far.
    task: Task,
    info: RunInfo,
    /// The id of the answer artifact, and its chunks published so far.
    answer_id: String,
    chunks: usize,
    /// The outcome is decided: no more progress is taken.
    decided: bool,
    /// The fulfilment is to stop (a cancel).
    abort: bool,
    /// A save is under way.
    saving: bool,
    /// The task changed since the last save began.
    unsaved: bool,
    /// Events were published since the last save began (else a save due is
    /// only a lease renewal).
    changed: bool,
    /// The store changed elsewhere: read it and reconcile.
    check: bool,
    /// The events not yet stored, in order: none goes on the wire before
    /// the save that stores it, so a GetTask (on any replica) after an
    /// event sees its state, a caller never hears of a state the store
    /// never had, and a stream resumed on another replica (from the stored
    /// task and its event log) repeats nothing this one sent.
    held: Vec<StreamEvent>,
    /// How many of `held` the save under way stores.
    in_flight: usize,
    /// The task as last stored (a new stream's first event).
    stored: Task,
    /// The events published since the last save began, in order: logged
    /// with the next save ([`TaskStore::save_with_events`](super::TaskStore::save_with_events)),
    /// put back when a save fails or conflicts.
    pending: Vec<StreamEvent>,
    /// Failed saves of the terminal state so far; while a retry waits, no save starts.
    retries: u32,
    retry_waiting: bool,
    streams: Vec<Slot>,
    waiters: Vec<(Slot, Until)>,
    /// The slot of the job driving this task.
    job: Slot,
    /// Its place among the fulfilments the server runs at once.
    turn: Turn,
}

/// Where a task is with respect to the cap on fulfilments running at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Waiting for a free place (the task stays `submitted`).
    Queued,
    /// Its fulfilment runs (or may start).
    Running,
    /// Its fulfilment ended (or never will): its place is free.
    Done,
}

/// What a job waiting for its turn learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// Start the fulfilment.
    Yes,
    /// Still waiting.
    Waiting,
    /// Never start it (canceled while queued, or forgotten).
    Never,
}

#[derive(Default)]
struct StreamSlot {
    /// The task it follows.
    task: String,
    queue: VecDeque<StreamEvent>,
    /// No more events will come once the queue is drained.
    closed: bool,
}

#[derive(Default)]
struct WaitSlot {
    /// The task it waits on.
    task: String,
    outcome: Option<Waited>,
}

/// Every running task, its streams and its waiters, and the queue of
/// tasks waiting for a place among the fulfilments that run at once.
pub(crate) struct Tasks {
    running: HashMap<String, Run>,
    /// The streams, waiters and watches, by slot (one table for the three).
    slots: HashMap<Slot, Held>,
    next: Slot,
    /// At most this many fulfilments run at once ...
    max_running: usize,
    /// ... and at most this many tasks wait for a place.
    max_queued: usize,
    /// Fulfilments running now.
    fulfilling: usize,
    /// Tasks waiting for a place, first come first served.
    queue: VecDeque<String>,
    /// Whether saves work.
    pub(crate) health: super::policy::HealthState,
    /// This replica's name in the leases it takes.
    holder: String,
    /// How long a lease lasts unless renewed; `None`: tasks take none.
    lease_ms: Option<u64>,
    /// Requests waiting for a stored task to change (a long-poll on a task
    /// running elsewhere), by slot, and their slots by task.
    watched: HashMap<String, Vec<Slot>>,
    /// What the driver is to do since it last looked, in order.
    signals: Vec<Signal>,
}

/// What a slot of the table is (a job's slot has no state there).
#[cfg_attr(not(feature = "replicas"), allow(dead_code))]
enum Held {
    Stream(StreamSlot),
    /// Boxed: a waiter's outcome holds a whole task, and streams and
    /// watches are many more.
    Wait(Box<WaitSlot>),
    Watch(Watch),
}

fn stream_at(slots: &mut HashMap<Slot, Held>, slot: Slot) -> Option<&mut StreamSlot> {
    match slots.get_mut(&slot) {
        Some(Held::Stream(s)) => Some(s),
        _ => None,
    }
}

fn wait_at(slots: &mut HashMap<Slot, Held>, slot: Slot) -> Option<&mut WaitSlot> {
    match slots.get_mut(&slot) {
        Some(Held::Wait(w)) => Some(w),
        _ => None,
    }
}

/// Removes the slot if `kind` says it is of the kind asked for.
fn remove_at(slots: &mut HashMap<Slot, Held>, slot: Slot, kind: fn(&Held) -> bool) -> Option<Held> {
    if slots.get(&slot).is_some_and(kind) {
        slots.remove(&slot)
    } else {
        None
    }
}

#[derive(Default)]
struct Watch {
    #[cfg_attr(not(feature = "replicas"), allow(dead_code))]
    task: String,
    fired: bool,
}

/// A save the job is to make: the task and whether only its lease changed.
#[derive(Debug)]
pub(crate) struct Due {
    pub(crate) task: Task,
    /// Nothing but the lease changed (no hook, no notification).
    pub(crate) renewal: bool,
    /// The events that led from the stored version to this one, for the log.
    pub(crate) events: Vec<StreamEvent>,
}

impl Default for Tasks {
    /// No cap.
    fn default() -> Self {
        Tasks::with_limits(usize::MAX, 0)
    }
}

/// Whether a task in this state has nothing more to stream.
pub(crate) fn ends_stream(state: TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

impl Tasks {
    /// At most `max_running` fulfilments at once (at least 1), and at most
    /// `max_queued` tasks waiting for a place.
    pub(crate) fn with_limits(max_running: usize, max_queued: usize) -> Tasks {
        Tasks {
            running: HashMap::new(),
            slots: HashMap::new(),
            next: 0,
            max_running: max_running.max(1),
            max_queued,
            fulfilling: 0,
            queue: VecDeque::new(),
            health: Default::default(),
            holder: String::new(),
            lease_ms: None,
            watched: HashMap::new(),
            signals: Vec::new(),
        }
    }

    /// Tasks take leases named `holder` lasting `lease_ms` (renewed by their
    /// job: [`Tasks::renew`]); `None`: no leases.
    pub(crate) fn set_lease(&mut self, holder: String, lease_ms: Option<u64>) {
        self.holder = holder;
        self.lease_ms = lease_ms;
    }

    /// The lease a task saved at `now_ms` (Unix ms) in `state` carries.
    pub(crate) fn lease_for(&self, state: TaskState, now_ms: Option<u64>) -> Option<Lease> {
        let (ms, now) = (self.lease_ms?, now_ms?);
        (!ends_stream(state)).then(|| Lease {
            holder: self.holder.clone(),
            until_ms: now.saturating_add(ms),
        })
    }

    /// This replica's name in its leases.
    #[cfg(all(test, feature = "replicas"))]
    pub(crate) fn lease_holder(&self) -> &str {
        &self.holder
    }

    #[cfg(feature = "replicas")]
    /// The lease length, if tasks take leases.
    pub(crate) fn lease_ms(&self) -> Option<u64> {
        self.lease_ms
    }

    /// Whether a new task can be taken: a place to run it, or to wait.
    pub(crate) fn has_room(&self) -> bool {
        self.fulfilling < self.max_running || self.queue.len() < self.max_queued
    }

    /// The cap, for the busy error: (running at most, waiting at most).
    pub(crate) fn limits(&self) -> (usize, usize) {
        (self.max_running, self.max_queued)
    }

    /// For a job: whether its fulfilment may start. While it waits, its
    /// slot ([`Tasks::job_slot`]) is woken when its turn comes.
    pub(crate) fn poll_admitted(&self, id: &str) -> Admitted {
        let Some(run) = self.running.get(id) else {
            return Admitted::Never;
        };
        match run.turn {
            _ if run.abort || run.decided => Admitted::Never,
            Turn::Running => Admitted::Yes,
            Turn::Done => Admitted::Never,
            Turn::Queued => Admitted::Waiting,
        }
    }

    /// The slot of the job running task `id`: woken on progress (something
    /// to save), on a cancel, and when a queued task's turn comes.
    pub(crate) fn job_slot(&self, id: &str) -> Option<Slot> {
        self.running.get(id).map(|r| r.job)
    }

    /// What the driver is to do for the slots since it last asked: wake
    /// their owners, or forget them.
    pub(crate) fn take_signals(&mut self) -> std::vec::Drain<'_, Signal> {
        self.signals.drain(..)
    }

    /// Whether the task's fulfilment may run now (it was not queued).
    pub(crate) fn is_admitted(&self, id: &str) -> bool {
        self.running
            .get(id)
            .is_some_and(|r| r.turn == Turn::Running)
    }

    /// For a job: its fulfilment ended (or will never start). Frees its
    /// place for the next queued task.
    pub(crate) fn work_ended(&mut self, id: &str) {
        if let Some(run) = self.running.get_mut(id) {
            let turn = std::mem::replace(&mut run.turn, Turn::Done);
            self.free(id, turn);
        }
    }

    /// Gives up a task's place (running or queued) and lets the next queued
    /// task run.
    fn free(&mut self, id: &str, turn: Turn) {
        match turn {
            Turn::Running => self.fulfilling -= 1,
            Turn::Queued => self.queue.retain(|q| q != id),
            Turn::Done => {}
        }
        while self.fulfilling < self.max_running {
            let Some(next) = self.queue.pop_front() else {
                break;
            };
            if let Some(run) = self.running.get_mut(&next) {
                if run.turn == Turn::Queued {
                    run.turn = Turn::Running;
                    self.fulfilling += 1;
                    self.signals.push(Signal::Wake(run.job));
                }
            }
        }
    }

    fn slot(&mut self) -> Slot {
        self.next += 1;
        self.next
    }

    /// Takes the new `task` as running, with `answer_id` for its answer
    /// artifact. Its first save is the caller's, under way from now on: the
    /// caller reports it with [`Tasks::saved`] (or [`Tasks::abandon`]s the task).
    pub(crate) fn start(
        &mut self,
        task: Task,
        answer_id: String,
        skill: Option<String>,
        text: String,
    ) -> bool {
        if self.running.contains_key(&task.id) {
            return false;
        }
        let job = self.slot();
        let turn = if self.fulfilling < self.max_running {
            self.fulfilling += 1;
            Turn::Running
        } else {
            self.queue.push_back(task.id.clone());
            Turn::Queued
        };
        let run = Run {
            turn,
            stored: task.clone(),
            in_flight: 0,
            task,
            info: RunInfo {
                skill,
                text,
                result: None,
            },
            answer_id,
            chunks: 0,
            decided: false,
            abort: false,
            saving: true,
            unsaved: false,
            changed: false,
            check: false,
            held: Vec::new(),
            pending: Vec::new(),
            retries: 0,
            retry_waiting: false,
            streams: Vec::new(),
            waiters: Vec::new(),
            job,
        };
        self.running.insert(run.task.id.clone(), run);
        true
    }

    /// The running task `id` as its fulfilment has made it so far.
    pub(crate) fn task(&self, id: &str) -> Option<&Task> {
        self.running.get(id).map(|r| &r.task)
    }

    pub(crate) fn is_running(&self, id: &str) -> bool {
        self.running.contains_key(id)
    }

    /// The task as stored and a stream of its later events, if it runs
    /// here. A task stored as stopped gets no stream.
    pub(crate) fn subscribe(&mut self, id: &str) -> Option<(Task, Option<Slot>)> {
        let task = self.running.get(id)?.stored.clone();
        if ends_stream(task.state) {
            return Some((task, None));
        }
        let slot = self.slot();
        let stream = StreamSlot {
            task: id.to_string(),
            ..StreamSlot::default()
        };
        self.slots.insert(slot, Held::Stream(stream));
        self.running.get_mut(id)?.streams.push(slot);
        Some((task, Some(slot)))
    }

    /// The next event of a stream; `None` once it has ended.
    /// While it is pending, the slot is woken when an event comes.
    pub(crate) fn poll_stream(&mut self, slot: Slot) -> Poll<Option<StreamEvent>> {
        let Some(s) = stream_at(&mut self.slots, slot) else {
            return Poll::Ready(None);
        };
        if let Some(event) = s.queue.pop_front() {
            return Poll::Ready(Some(event));
        }
        if s.closed {
            self.slots.remove(&slot);
            self.signals.push(Signal::Forget(slot));
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    /// The stream is gone (its reader hung up, or it ended).
    pub(crate) fn drop_stream(&mut self, slot: Slot) {
        if let Some(Held::Stream(stream)) =
            remove_at(&mut self.slots, slot, |h| matches!(h, Held::Stream(_)))
        {
            if let Some(run) = self.running.get_mut(&stream.task) {
                run.streams.retain(|s| *s != slot);
            }
        }
        self.signals.push(Signal::Forget(slot));
    }

    /// The number of open streams on a task (for tests).
    #[cfg(test)]
    pub(crate) fn stream_count(&self, id: &str) -> usize {
        self.running.get(id).map_or(0, |r| r.streams.len())
    }

    /// Waits for the running task `id` to reach `until`; `None` if it is
    /// not running here.
    pub(crate) fn wait(&mut self, id: &str, until: Until) -> Option<Slot> {
        if !self.running.contains_key(id) {
            return None;
        }
        let slot = self.slot();
        let wait = WaitSlot {
            task: id.to_string(),
            ..WaitSlot::default()
        };
        self.slots.insert(slot, Held::Wait(Box::new(wait)));
        self.running.get_mut(id)?.waiters.push((slot, until));
        Some(slot)
    }

    /// While it is pending, the slot is woken when the outcome comes.
    pub(crate) fn poll_wait(&mut self, slot: Slot) -> Poll<Waited> {
        let Some(w) = wait_at(&mut self.slots, slot) else {
            return Poll::Ready(Waited::Released);
        };
        if let Some(outcome) = w.outcome.take() {
            self.slots.remove(&slot);
            self.signals.push(Signal::Forget(slot));
            return Poll::Ready(outcome);
        }
        Poll::Pending
    }

    /// The waiter is gone (its request was dropped or stopped waiting).
    pub(crate) fn drop_wait(&mut self, slot: Slot) {
        if let Some(Held::Wait(wait)) =
            remove_at(&mut self.slots, slot, |h| matches!(h, Held::Wait(_)))
        {
            if let Some(run) = self.running.get_mut(&wait.task) {
                run.waiters.retain(|(s, _)| *s != slot);
            }
        }
        self.signals.push(Signal::Forget(slot));
    }

    fn publish(&mut self, id: &str, event: StreamEvent) {
        let Some(run) = self.running.get_mut(id) else {
            return;
        };
        run.task.apply(&event);
        run.unsaved = true;
        run.changed = true;
        run.pending.push(event.clone());
        // On the wire once stored: see `saved`.
        run.held.push(event);
        self.signals.push(Signal::Wake(run.job));
    }

    /// Sends the first `n` held events (the ones a save just stored) to
    /// the run's streams.
    fn release_stored(&mut self, id: &str, n: usize) {
        let Some(run) = self.running.get_mut(id) else {
            return;
        };
        let n = n.min(run.held.len());
        if n == 0 {
            return;
        }
        let stored: Vec<StreamEvent> = run.held.drain(..n).collect();
        for slot in &run.streams {
            if let Some(s) = stream_at(&mut self.slots, *slot) {
                s.queue.extend(stored.iter().cloned());
                self.signals.push(Signal::Wake(*slot));
            }
        }
    }

    /// Sends a run's held events to its streams and ends them.
    fn release_held(&mut self, id: &str) {
        self.release_stored(id, usize::MAX);
        if let Some(run) = self.running.get_mut(id) {
            let streams = std::mem::take(&mut run.streams);
            self.close(streams);
        }
    }

    /// Progress from the fulfilment, made from the task as it is; ignored
    /// once the outcome is decided or the task has stopped.
    pub(crate) fn progress(
        &mut self,
        id: &str,
        make: impl FnOnce(&mut Progressing) -> StreamEvent,
    ) {
        let Some(run) = self.running.get_mut(id) else {
            return;
        };
        if run.decided || ends_stream(run.task.state) {
            return;
        }
        let mut p = Progressing {
            task_id: &run.task.id,
            context_id: &run.task.context_id,
            answer_id: &run.answer_id,
            chunks: &mut run.chunks,
        };
        let event = make(&mut p);
        self.publish(id, event);
    }

    /// Decides the outcome: `events` are the task's last, `result` what the
    /// hook reports. `false` if the outcome was already decided (the
    /// fulfilment and a cancel raced: the first one wins).
    pub(crate) fn decide(
        &mut self,
        id: &str,
        events: Vec<StreamEvent>,
        result: Option<String>,
    ) -> bool {
        let Some(run) = self.running.get_mut(id) else {
            return false;
        };
        if std::mem::replace(&mut run.decided, true) {
            return false;
        }
        run.info.result = result;
        for event in events {
            self.publish(id, event);
        }
        true
    }

    /// The fulfilment stops to wait for the caller (`event` is its
    /// input-required or auth-required status): decides the outcome, and
    /// tells the job to drop the fulfilment. Once that state is saved the
    /// task leaves the machine (not terminal: a later message on the task
    /// starts it again). `false` if the outcome was already decided.
    pub(crate) fn interrupt(&mut self, id: &str, event: StreamEvent) -> bool {
        if !self.decide(id, vec![event], None) {
            return false;
        }
        if let Some(run) = self.running.get_mut(id) {
            run.abort = true;
            self.signals.push(Signal::Wake(run.job));
        }
        true
    }

    /// Cancels the running task: decides it canceled and tells its job to stop.
    pub(crate) fn cancel(&mut self, id: &str, now_ms: Option<u64>) -> bool {
        let Some(run) = self.running.get(id) else {
            return false;
        };
        let event = status(&run.task, TaskState::Canceled, None, now_ms);
        if !self.decide(id, vec![event], None) {
            return false;
        }
        if let Some(run) = self.running.get_mut(id) {
            run.abort = true;
            self.signals.push(Signal::Wake(run.job));
            if run.turn == Turn::Queued {
                run.turn = Turn::Done;
                self.free(id, Turn::Queued);
            }
        }
        true
    }

    /// The events that finish the task with `outcome` from its fulfilment.
    pub(crate) fn outcome_events(
        &self,
        id: &str,
        outcome: Result<String, String>,
        message_id: String,
        now_ms: Option<u64>,
    ) -> Vec<StreamEvent> {
        let Some(run) = self.running.get(id) else {
            return Vec::new();
        };
        match outcome {
            Ok(text) => {
                let mut events = Vec::new();
                if run.chunks == 0 || !text.is_empty() {
                    events.push(StreamEvent::Artifact(crate::model::event::ArtifactUpdate {
                        task_id: run.task.id.clone(),
                        context_id: run.task.context_id.clone(),
                        artifact: crate::model::task::Artifact {
                            artifact_id: run.answer_id.clone(),
                            parts: vec![crate::model::task::Part::Text(text)],
                        },
                        append: run.chunks > 0,
                        last_chunk: true,
                    }));
                }
                events.push(status(&run.task, TaskState::Completed, None, now_ms));
                events
            }
            Err(error) => vec![status(
                &run.task,
                TaskState::Failed,
                Some(Message::agent_text(message_id, error)),
                now_ms,
            )],
        }
    }

    /// The task's fulfilment starts: it is `working` (stamped `unix_ms`).
    pub(crate) fn working(&mut self, id: &str, unix_ms: Option<u64>) {
        let timestamp = unix_ms.map(crate::model::time::format_rfc3339);
        self.progress(id, |p| {
            StreamEvent::Status(StatusUpdate {
                task_id: p.task_id.to_string(),
                context_id: p.context_id.to_string(),
                state: TaskState::Working,
                timestamp,
                message: None,
            })
        });
    }

    /// For the job: whether the fulfilment is to stop. The job's slot
    /// ([`Tasks::job_slot`]) is woken on progress (something to save) and
    /// on a cancel.
    pub(crate) fn job_poll(&self, id: &str) -> bool {
        self.running.get(id).is_none_or(|run| run.abort)
    }

    /// For the job: the task to save next (the version after the stored
    /// one, its lease taken at `now_ms`), if a save is due and none is under way.
    pub(crate) fn next_save(&mut self, id: &str, now_ms: Option<u64>) -> Option<Due> {
        let run = self.running.get(id)?;
        if run.saving || !run.unsaved || run.retry_waiting {
            return None;
        }
        let lease = self.lease_for(run.task.state, now_ms);
        let run = self.running.get_mut(id)?;
        run.saving = true;
        run.unsaved = false;
        let renewal = !std::mem::take(&mut run.changed);
        let events = std::mem::take(&mut run.pending);
        // The task saved has every event published so far applied: once
        // stored, all of them may go on the wire.
        run.in_flight = run.held.len();
        let mut task = run.task.clone();
        task.revision.version += 1;
        task.revision.lease = lease;
        Some(Due {
            task,
            renewal,
            events,
        })
    }

    /// For the job: a save of `events` did not store them (it failed or
    /// conflicted): they go first into the next save.
    pub(crate) fn unlogged(&mut self, id: &str, mut events: Vec<StreamEvent>) {
        if events.is_empty() {
            return;
        }
        if let Some(run) = self.running.get_mut(id) {
            events.append(&mut run.pending);
            run.pending = events;
            run.changed = true;
        }
    }

    #[cfg(feature = "replicas")]
    /// For the job: a lease renewal is due (a save of the task as it is).
    pub(crate) fn renew(&mut self, id: &str) {
        if let Some(run) = self.running.get_mut(id) {
            if !run.decided {
                run.unsaved = true;
                self.signals.push(Signal::Wake(run.job));
            }
        }
    }

    /// The store says task `id` changed elsewhere (at `version`, when
    /// known): wakes the requests watching it, and the job running it here
    /// (which reads it again: [`Tasks::take_check`]) unless this replica
    /// wrote that version itself.
    pub(crate) fn store_changed(&mut self, id: &str, version: Option<u64>) {
        if let Some(slots) = self.watched.remove(id) {
            for slot in slots {
                if let Some(Held::Watch(w)) = self.slots.get_mut(&slot) {
                    w.fired = true;
                    self.signals.push(Signal::Wake(slot));
                }
            }
        }
        if let Some(run) = self.running.get_mut(id) {
            if version.is_none_or(|v| v > run.task.revision.version) {
                run.check = true;
                self.signals.push(Signal::Wake(run.job));
            }
        }
    }

    /// For the job: whether the store is to be read again and reconciled.
    pub(crate) fn take_check(&mut self, id: &str) -> bool {
        self.running
            .get_mut(id)
            .is_some_and(|r| std::mem::take(&mut r.check))
    }

    #[cfg(feature = "replicas")]
    /// Watches the stored task `id` for a change ([`Tasks::store_changed`]).
    pub(crate) fn watch(&mut self, id: &str) -> Slot {
        let slot = self.slot();
        self.slots.insert(
            slot,
            Held::Watch(Watch {
                task: id.to_string(),
                ..Watch::default()
            }),
        );
        self.watched.entry(id.to_string()).or_default().push(slot);
        slot
    }

    #[cfg(feature = "replicas")]
    /// Ready once the watched task changed; while it is pending, the slot
    /// is woken by the change.
    pub(crate) fn poll_watch(&self, slot: Slot) -> Poll<()> {
        match self.slots.get(&slot) {
            Some(Held::Watch(w)) if !w.fired => Poll::Pending,
            _ => Poll::Ready(()),
        }
    }

    #[cfg(feature = "replicas")]
    /// The watch is no longer needed.
    pub(crate) fn drop_watch(&mut self, slot: Slot) {
        if let Some(Held::Watch(w)) =
            remove_at(&mut self.slots, slot, |h| matches!(h, Held::Watch(_)))
        {
            if let Some(slots) = self.watched.get_mut(&w.task) {
                slots.retain(|s| *s != slot);
                if slots.is_empty() {
                    self.watched.remove(&w.task);
                }
            }
        }
        self.signals.push(Signal::Forget(slot));
    }

    /// For the job: the save of `task` was refused as a conflict (another
    /// replica wrote the task): nothing was stored; the job reads the task
    /// again and [`Tasks::reconcile`]s.
    pub(crate) fn conflicted(&mut self, task: &Task) {
        if let Some(run) = self.running.get_mut(&task.id) {
            run.saving = false;
            run.in_flight = 0;
            run.unsaved = true;
            run.check = true;
            self.signals.push(Signal::Wake(run.job));
        }
    }

    /// For the job: the task as the store holds it now (read after a
    /// conflict or a change elsewhere). A task another replica has settled
    /// (canceled, failed as interrupted), stopped, or taken over is
    /// adopted: its fulfilment here stops, its waiters and streams hear of
    /// the stored state, and it leaves the machine without the hook (the
    /// replica that stored it ran it). A task still ours is saved again
    /// over the stored version.
    pub(crate) fn reconcile(&mut self, id: &str, stored: Option<Task>) {
        let holder = self.holder.clone();
        let Some(run) = self.running.get_mut(id) else {
            return;
        };
        let Some(stored) = stored else {
            // Gone from the store: nothing to save it over.
            self.abandon(id);
            return;
        };
        if stored.revision.version <= run.task.revision.version {
            return;
        }
        let ours = stored
            .revision
            .lease
            .as_ref()
            .is_none_or(|l| l.holder == holder);
        if ours && !ends_stream(stored.state) {
            run.task.revision.version = stored.revision.version;
            run.unsaved = true;
            self.signals.push(Signal::Wake(run.job));
            return;
        }
        run.decided = true;
        run.abort = true;
        self.signals.push(Signal::Wake(run.job));
        // Another replica's state stands: what was ours is not logged.
        run.pending.clear();
        run.held.clear();
        run.held.push(status(
            &stored,
            stored.state,
            stored.status_message.clone(),
            stored.updated_ms,
        ));
        self.release_held(id);
        if let Some(run) = self.running.remove(id) {
            self.free(id, run.turn);
            for (slot, _) in run.waiters {
                if let Some(w) = wait_at(&mut self.slots, slot) {
                    w.outcome = Some(Waited::Saved(stored.clone()));
                    self.signals.push(Signal::Wake(slot));
                }
            }
            self.signals.push(Signal::Forget(run.job));
        }
    }

    /// For the job: the save of `task` (from [`Tasks::next_save`]) ended.
    pub(crate) fn saved(&mut self, task: Task, result: Result<(), String>) -> AfterSave {
        let mut after = AfterSave::default();
        let Some(run) = self.running.get_mut(&task.id) else {
            return after;
        };
        run.saving = false;
        let in_flight = std::mem::take(&mut run.in_flight);
        if result.is_ok() {
            run.task.revision = task.revision.clone();
            run.stored = task.clone();
        }
        let (id, state) = (task.id.clone(), task.state);
        if result.is_ok() {
            self.release_stored(&id, in_flight);
        }
        let Some(run) = self.running.get_mut(&id) else {
            return after;
        };
        let outcome = match result {
            Ok(()) => Waited::Saved(task),
            Err(e) => {
                after.problem = Some(format!(
                    "task {}: saving state {} failed: {e}",
                    task.id,
                    state.as_str()
                ));
                Waited::SaveFailed(e)
            }
        };
        // A later state is already waiting to be saved: waiters hear of that one.
        if run.unsaved && !matches!(outcome, Waited::SaveFailed(_)) {
            return after;
        }
        let stops = ends_stream(state);
        // A decided interruption is the run's last state: it ends here,
        // without the hook (the task is not finished).
        let interrupted = run.decided && state.is_interrupted();
        let (ready, waiting): (Vec<_>, Vec<_>) = run
            .waiters
            .drain(..)
            .partition(|(_, until)| state.is_terminal() || (stops && *until == Until::Stops));
        run.waiters = waiting;
        for (slot, _) in ready {
            if let Some(w) = wait_at(&mut self.slots, slot) {
                w.outcome = Some(outcome.clone());
                self.signals.push(Signal::Wake(slot));
            }
        }
        if stops && matches!(outcome, Waited::Saved(_)) {
            self.release_held(&id);
        }
        if state.is_terminal() || interrupted {
            let failed = state.is_terminal() && matches!(outcome, Waited::SaveFailed(_));
            if let Some(run) = self.running.get_mut(&id).filter(|_| failed) {
                if run.retries < TERMINAL_SAVE_RETRIES {
                    // Told as failed to whoever waited; stored once it can be.
                    run.retries += 1;
                    run.unsaved = true;
                    run.retry_waiting = true;
                    after.retry = Some(run.retries);
                    return after;
                }
            }
            if let Some(run) = self.running.remove(&id) {
                self.free(&id, run.turn);
                if let (true, Waited::Saved(task)) = (state.is_terminal(), outcome) {
                    after.settled = Some((task, run.info));
                }
                self.close(run.streams);
                self.release(run.waiters);
                self.signals.push(Signal::Forget(run.job));
            }
        }
        after
    }

    /// For the job: the wait before a retry is over; the save may start.
    pub(crate) fn retry_now(&mut self, id: &str) {
        if let Some(run) = self.running.get_mut(id) {
            run.retry_waiting = false;
        }
    }

    /// For the job: whether the task is done with (its terminal state saved, or forgotten).
    pub(crate) fn finished(&self, id: &str) -> bool {
        !self.running.contains_key(id)
    }

    /// The job ended without finishing the task (the host dropped it):
    /// forget the task, end its streams, free its waiters.
    pub(crate) fn abandon(&mut self, id: &str) {
        if let Some(run) = self.running.remove(id) {
            self.free(id, run.turn);
            self.close(run.streams);
            self.release(run.waiters);
            self.signals.push(Signal::Forget(run.job));
        }
    }

    fn close(&mut self, streams: Vec<Slot>) {
        for slot in streams {
            if let Some(s) = stream_at(&mut self.slots, slot) {
                s.closed = true;
                self.signals.push(Signal::Wake(slot));
            }
        }
    }

    fn release(&mut self, waiters: Vec<(Slot, Until)>) {
        for (slot, _) in waiters {
            if let Some(w) = wait_at(&mut self.slots, slot) {
                w.outcome.get_or_insert(Waited::Released);
                self.signals.push(Signal::Wake(slot));
            }
        }
    }
}

/// The running task, as progress sees it.
pub(crate) struct Progressing<'a> {
    pub(crate) task_id: &'a str,
    pub(crate) context_id: &'a str,
    pub(crate) answer_id: &'a str,
    /// Chunks of the answer published so far.
    pub(crate) chunks: &'a mut usize,
}

/// A status-update event of `task`, stamped `now_ms` (wall clock, Unix ms) when known.
pub(crate) fn status(
    task: &Task,
    state: TaskState,
    message: Option<Message>,
    now_ms: Option<u64>,
) -> StreamEvent {
    StreamEvent::Status(StatusUpdate {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        state,
        timestamp: now_ms.map(crate::model::time::format_rfc3339),
        message,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// What a job of task `id` fulfils: `hi`, in context `c`.
    pub(in crate::server) fn request(id: &str) -> crate::server::FulfilRequest {
        crate::server::FulfilRequest {
            task_id: id.into(),
            context_id: "c".into(),
            text: "hi".into(),
            skill: None,
            history: Vec::new(),
            trace: None,
        }
    }

    /// A new task, `submitted`, never saved.
    pub(in crate::server) fn task(id: &str) -> Task {
        Task {
            id: id.into(),
            context_id: "c".into(),
            state: TaskState::Submitted,
            status_message: None,
            updated_ms: None,
            artifacts: Vec::new(),
            history: Vec::new(),
            dialect: crate::model::task::Shape::V03,
            owner: None,
            trace: None,
            revision: Default::default(),
        }
    }

    fn started(id: &str) -> Tasks {
        let mut t = Tasks::default();
        t.start(task(id), "a1".into(), None, "hi".into());
        let after = t.saved(task(id), Ok(()));
        assert!(after.settled.is_none() && after.problem.is_none());
        t
    }

    #[test]
    fn events_of_a_save_that_did_not_store_go_with_the_next_one() {
        let mut t = started("t");
        working(&mut t, "t");
        let due = t.next_save("t", None).expect("due");
        assert_eq!(due.events.len(), 1, "the working event");
        // A chunk arrives while the save is under way, which then conflicts.
        chunk(&mut t, "t", "one");
        t.unlogged("t", due.events);
        t.conflicted(&due.task);
        let mut stored = due.task.clone();
        stored.revision.version += 1;
        t.reconcile("t", Some(stored));
        let again = t
            .next_save("t", None)
            .expect("saved again over the stored version");
        let states: Vec<Option<TaskState>> = again.events.iter().map(StreamEvent::state).collect();
        assert_eq!(
            states,
            vec![Some(TaskState::Working), None],
            "in publish order, none dropped"
        );
        let _ = t.saved(again.task, Ok(()));
        assert!(t.next_save("t", None).is_none_or(|d| d.events.is_empty()));
    }

    #[test]
    fn nothing_is_saved_before_the_first_save_ends_even_a_cancel() {
        let mut t = Tasks::default();
        t.start(task("t"), "a1".into(), None, "hi".into());
        assert!(
            t.cancel("t", None),
            "a cancel during the first save goes through the machine"
        );
        assert!(
            t.next_save("t", None).map(|d| d.task).is_none(),
            "the submitted save is still under way"
        );
        let _ = t.saved(task("t"), Ok(()));
        assert_eq!(save_all(&mut t, "t"), vec![TaskState::Canceled]);
        assert!(t.finished("t"));
    }

    fn working(t: &mut Tasks, id: &str) {
        t.progress(id, |p| {
            StreamEvent::Status(StatusUpdate {
                task_id: p.task_id.into(),
                context_id: p.context_id.into(),
                state: TaskState::Working,
                timestamp: None,
                message: None,
            })
        });
    }

    /// The slots the machine said to wake, and to forget, since last asked.
    fn signals(t: &mut Tasks) -> (Vec<Slot>, Vec<Slot>) {
        let (mut wake, mut forget) = (Vec::new(), Vec::new());
        for signal in t.take_signals() {
            match signal {
                Signal::Wake(slot) => wake.push(slot),
                Signal::Forget(slot) => forget.push(slot),
            }
        }
        (wake, forget)
    }

    #[test]
    fn the_machine_says_which_slots_to_wake_and_which_to_forget() {
        let mut t = started("t");
        let job = t.job_slot("t").expect("a running task has a job slot");
        let (_, Some(stream)) = t.subscribe("t").unwrap() else {
            panic!("a working task is followed")
        };
        let wait = t.wait("t", Until::Stops).unwrap();
        assert!(t.poll_stream(stream).is_pending());
        assert!(t.poll_wait(wait).is_pending());
        let _ = t.take_signals();
        // Progress: the job (something to save), not the stream (nothing
        // is on the wire before it is stored) nor the waiter.
        working(&mut t, "t");
        assert_eq!(signals(&mut t), (vec![job], vec![]));
        // Its save stored: the stream, not the waiter (working does not stop).
        let due = t.next_save("t", None).unwrap();
        let _ = t.saved(due.task, Ok(()));
        let (wake, forget) = signals(&mut t);
        assert!(wake.contains(&stream), "{wake:?}");
        assert!(!wake.contains(&wait) && forget.is_empty());
        assert!(t.poll_stream(stream).is_ready());
        assert!(t.poll_stream(stream).is_pending());
        // Nothing changed, nothing to wake.
        assert_eq!(signals(&mut t), (vec![], vec![]));
        // A cancel wakes the job; its saved canceled state wakes the waiter
        // and ends the stream; the finished task's job slot is forgotten.
        assert!(t.cancel("t", None));
        assert!(signals(&mut t).0.contains(&job));
        assert!(t.job_poll("t"), "the job is told to stop");
        save_all(&mut t, "t");
        let (wake, forget) = signals(&mut t);
        assert!(wake.contains(&wait) && wake.contains(&stream), "{wake:?}");
        assert!(forget.contains(&job), "{forget:?}");
        assert!(matches!(t.poll_wait(wait), Poll::Ready(Waited::Saved(_))));
        while let Poll::Ready(Some(_)) = t.poll_stream(stream) {}
        // Both slots ended on their last poll: forgotten.
        let (_, forget) = signals(&mut t);
        assert!(
            forget.contains(&wait) && forget.contains(&stream),
            "{forget:?}"
        );
        // A dropped waiter is forgotten too.
        let mut t = started("u");
        let w = t.wait("u", Until::Stops).unwrap();
        let _ = t.take_signals();
        t.drop_wait(w);
        assert_eq!(signals(&mut t), (vec![], vec![w]));
    }

    #[test]
    fn a_queued_job_is_woken_when_its_turn_comes() {
        let mut t = Tasks::with_limits(1, 4);
        for id in ["a", "b"] {
            assert!(t.start(task(id), format!("{id}-answer"), None, String::new()));
        }
        assert_eq!(t.poll_admitted("b"), Admitted::Waiting);
        let b = t.job_slot("b").unwrap();
        let _ = t.take_signals();
        t.work_ended("a");
        assert_eq!(signals(&mut t).0, vec![b]);
        assert_eq!(t.poll_admitted("b"), Admitted::Yes);
    }

    /// A first chunk of the answer, `text`.
    fn chunk(t: &mut Tasks, id: &str, text: &str) {
        t.progress(id, |p| {
            StreamEvent::Artifact(crate::model::event::ArtifactUpdate {
                task_id: p.task_id.into(),
                context_id: p.context_id.into(),
                artifact: crate::model::task::Artifact {
                    artifact_id: p.answer_id.into(),
                    parts: vec![crate::model::task::Part::Text(text.into())],
                },
                append: false,
                last_chunk: false,
            })
        });
    }

    /// Saves whatever is due, succeeding, until nothing is; the saved states.
    fn save_all(t: &mut Tasks, id: &str) -> Vec<TaskState> {
        let mut states = Vec::new();
        while let Some(task) = t.next_save(id, None).map(|d| d.task) {
            states.push(task.state);
            let _ = t.saved(task, Ok(()));
        }
        states
    }

    #[test]
    fn one_save_at_a_time_and_always_the_latest_state() {
        let mut t = started("t");
        working(&mut t, "t");
        let first = t
            .next_save("t", None)
            .map(|d| d.task)
            .expect("working is due");
        assert_eq!(first.state, TaskState::Working);
        // While it is being saved, progress and the outcome arrive.
        t.progress("t", |p| {
            *p.chunks += 1;
            status_of(p, TaskState::Working)
        });
        assert!(
            t.next_save("t", None).map(|d| d.task).is_none(),
            "a second save while one runs"
        );
        let events = t.outcome_events("t", Ok("done".into()), "m".into(), Some(7));
        assert!(t.decide("t", events, Some("done".into())));
        let after = t.saved(first, Ok(()));
        assert!(after.settled.is_none());
        // The next save is the terminal state itself, with the answer.
        let last = t
            .next_save("t", None)
            .map(|d| d.task)
            .expect("the outcome is due");
        assert_eq!(last.state, TaskState::Completed);
        assert_eq!(last.artifacts.len(), 1);
        assert_eq!(last.updated_ms, Some(7), "stamped when it completed");
        let after = t.saved(last, Ok(()));
        let (task, info) = after
            .settled
            .expect("the hook runs once the terminal state is saved");
        assert_eq!(task.state, TaskState::Completed);
        assert_eq!(info.result.as_deref(), Some("done"));
        assert!(t.finished("t"));
        assert!(
            t.next_save("t", None).map(|d| d.task).is_none(),
            "nothing is saved after the terminal state"
        );
    }

    fn status_of(p: &Progressing<'_>, state: TaskState) -> StreamEvent {
        StreamEvent::Status(StatusUpdate {
            task_id: p.task_id.into(),
            context_id: p.context_id.into(),
            state,
            timestamp: None,
            message: None,
        })
    }

    #[test]
    fn a_cancel_racing_the_answer_decides_once_and_progress_after_it_is_ignored() {
        let mut t = started("t");
        working(&mut t, "t");
        assert!(t.cancel("t", None));
        assert!(t.job_poll("t"), "the job is told to stop");
        let events = t.outcome_events("t", Ok("late".into()), "m".into(), None);
        assert!(!t.decide("t", events, None), "the answer lost the race");
        working(&mut t, "t");
        assert_eq!(save_all(&mut t, "t"), vec![TaskState::Canceled]);
        assert!(t.finished("t"));
    }

    #[test]
    fn waiters_hear_of_a_state_only_once_it_is_saved() {
        let mut t = started("t");
        let stops = t.wait("t", Until::Stops).unwrap();
        let terminal = t.wait("t", Until::Terminal).unwrap();
        working(&mut t, "t");
        let events = t.outcome_events("t", Err("boom".into()), "m".into(), None);
        t.decide("t", events, Some("boom".into()));
        assert!(t.poll_wait(stops).is_pending(), "decided is not saved");
        let task = t.next_save("t", None).map(|d| d.task).unwrap();
        assert_eq!(task.state, TaskState::Failed);
        assert!(t.poll_wait(terminal).is_pending());
        let _ = t.saved(task, Ok(()));
        for slot in [stops, terminal] {
            match t.poll_wait(slot) {
                Poll::Ready(Waited::Saved(task)) => assert_eq!(task.state, TaskState::Failed),
                other => panic!("not the saved task: {other:?}"),
            }
        }
    }

    #[test]
    fn a_failed_terminal_save_is_told_to_waiters_and_runs_no_hook() {
        let mut t = started("t");
        let w = t.wait("t", Until::Stops).unwrap();
        t.cancel("t", None);
        let task = t.next_save("t", None).map(|d| d.task).unwrap();
        let after = t.saved(task, Err("disk full".into()));
        assert!(after.settled.is_none(), "no hook for a state never stored");
        assert!(after.problem.unwrap().contains("disk full"));
        assert_eq!(
            t.poll_wait(w),
            Poll::Ready(Waited::SaveFailed("disk full".into()))
        );
        assert_eq!(after.retry, Some(1), "saved again after a wait");
        assert!(!t.finished("t"));
    }

    /// A refused terminal state is saved again after a wait (never at
    /// once), and the hook runs when it is stored; after the last retry the
    /// task is given up, still without a hook.
    #[test]
    fn a_refused_terminal_state_is_retried_then_given_up() {
        let mut t = started("t");
        t.cancel("t", None);
        let task = t.next_save("t", None).map(|d| d.task).unwrap();
        let after = t.saved(task, Err("disk full".into()));
        assert_eq!(after.retry, Some(1));
        assert!(
            t.next_save("t", None).map(|d| d.task).is_none(),
            "not before the wait is over"
        );
        t.retry_now("t");
        let task = t.next_save("t", None).map(|d| d.task).expect("saved again");
        assert_eq!(task.state, TaskState::Canceled);
        let after = t.saved(task, Ok(()));
        assert_eq!(
            after.settled.map(|(t, _)| t.state),
            Some(TaskState::Canceled)
        );
        assert!(t.finished("t"));

        let mut t = started("u");
        t.cancel("u", None);
        for n in 1..=TERMINAL_SAVE_RETRIES {
            let task = t.next_save("u", None).map(|d| d.task).unwrap();
            assert_eq!(t.saved(task, Err("disk full".into())).retry, Some(n));
            t.retry_now("u");
        }
        let task = t.next_save("u", None).map(|d| d.task).unwrap();
        let after = t.saved(task, Err("disk full".into()));
        assert!(after.retry.is_none() && after.settled.is_none());
        assert!(t.finished("u"), "given up");
        assert_eq!(retry_delay_ms(1), 500);
        assert_eq!(retry_delay_ms(20), 30_000);
    }

    #[test]
    fn streams_get_every_event_once_and_end_after_the_last() {
        let mut t = started("t");
        let (first, slot) = t.subscribe("t").unwrap();
        assert_eq!(first.state, TaskState::Submitted);
        let slot = slot.unwrap();
        working(&mut t, "t");
        let events = t.outcome_events("t", Ok("x".into()), "m".into(), None);
        t.decide("t", events, None);
        assert!(
            t.poll_stream(slot).is_pending(),
            "no event goes on the wire before its save"
        );
        // A stream that starts now begins with the task as stored.
        let (later, later_slot) = t.subscribe("t").unwrap();
        assert_eq!(later.state, TaskState::Submitted);
        let later_slot = later_slot.unwrap();
        // The save under way stores working, the answer and completed.
        let due = t.next_save("t", None).expect("due");
        assert_eq!(due.events.len(), 3);
        assert!(
            t.poll_stream(slot).is_pending(),
            "not while its save is under way"
        );
        let after = t.saved(due.task, Ok(()));
        assert!(after.settled.is_some(), "saved once, with its answer");
        for s in [slot, later_slot] {
            let mut kinds = Vec::new();
            while let Poll::Ready(Some(e)) = t.poll_stream(s) {
                kinds.push(e.state());
            }
            assert_eq!(
                kinds,
                vec![Some(TaskState::Working), None, Some(TaskState::Completed)],
                "every event once, in order, after its save"
            );
        }
        assert_eq!(t.stream_count("t"), 0);
    }

    #[test]
    fn a_save_sends_only_the_events_it_stored_and_a_failed_one_none() {
        let mut t = started("t");
        let (_, slot) = t.subscribe("t").unwrap();
        let slot = slot.unwrap();
        working(&mut t, "t");
        let first = t.next_save("t", None).expect("working is due");
        // A chunk while the first save is under way.
        chunk(&mut t, "t", "one");
        let _ = t.saved(first.task, Ok(()));
        assert_eq!(
            t.poll_stream(slot).map(|e| e.and_then(|e| e.state())),
            Poll::Ready(Some(TaskState::Working))
        );
        assert!(
            t.poll_stream(slot).is_pending(),
            "the chunk is not stored yet"
        );
        // Its save fails: still nothing on the wire; the next one sends it.
        let second = t.next_save("t", None).expect("the chunk is due");
        t.unlogged("t", second.events);
        let _ = t.saved(second.task, Err("disk full".into()));
        assert!(
            t.poll_stream(slot).is_pending(),
            "a failed save sends nothing"
        );
        assert_eq!(
            t.subscribe("t").unwrap().0.state,
            TaskState::Working,
            "as stored"
        );
        working(&mut t, "t");
        let third = t.next_save("t", None).expect("due again");
        assert_eq!(third.events.len(), 2, "the chunk, then the new status");
        let _ = t.saved(third.task, Ok(()));
        assert!(matches!(
            t.poll_stream(slot),
            Poll::Ready(Some(StreamEvent::Artifact(_)))
        ));
        assert!(t.poll_stream(slot).is_ready());
        assert!(t.poll_stream(slot).is_pending());
    }

    #[test]
    fn an_abandoned_task_frees_its_waiters_and_ends_its_streams() {
        let mut t = started("t");
        let (_, slot) = t.subscribe("t").unwrap();
        let w = t.wait("t", Until::Stops).unwrap();
        t.abandon("t");
        assert_eq!(t.poll_stream(slot.unwrap()), Poll::Ready(None));
        assert_eq!(t.poll_wait(w), Poll::Ready(Waited::Released));
        assert!(t.wait("t", Until::Stops).is_none());
    }

    #[test]
    fn a_dropped_waiter_or_stream_leaves_nothing_behind() {
        let mut t = started("t");
        let w = t.wait("t", Until::Stops).unwrap();
        let (_, s) = t.subscribe("t").unwrap();
        t.drop_wait(w);
        t.drop_stream(s.unwrap());
        assert!(t.slots.is_empty());
        assert_eq!(t.stream_count("t"), 0);
        assert!(t.running["t"].waiters.is_empty());
    }
}
