//! The driver's side of the task machine ([`Tasks`]): the wakers of the
//! futures that poll it (jobs, event streams, waiting requests, watches),
//! by slot. The machine says which slots to wake or forget
//! ([`Signal`]s); this guard delivers them each time the server's lock
//! is let go, so no change is left untold. Beside them, the work started
//! and not yet taken by the host ([`super::Work`]).

use super::machine::{Signal, Slot, Tasks};
use super::Work;
use hashbrown::HashMap;
use std::ops::{Deref, DerefMut};
use std::task::{Context, Waker};

/// What the server's one lock guards: the machine, its futures' wakers,
/// and the work started for the host to run.
pub(crate) struct Live {
    tasks: Tasks,
    wakers: HashMap<Slot, Waker>,
    /// Started, not yet taken ([`super::A2aServer::take_work`]), oldest first.
    work: Vec<Work>,
    /// The host's future waiting for work ([`super::A2aServer::poll_work`]).
    work_waker: Option<Waker>,
}

impl Live {
    pub(crate) fn new(tasks: Tasks) -> Live {
        Live {
            tasks,
            wakers: HashMap::new(),
            work: Vec::new(),
            work_waker: None,
        }
    }
}

/// The server is gone: its host's runner ([`super::A2aServer::run_work`])
/// wakes to find it so, and ends.
impl Drop for Live {
    fn drop(&mut self) {
        if let Some(w) = self.work_waker.take() {
            w.wake();
        }
    }
}

/// The machine under the lock. Dropping it wakes the slots the machine
/// signalled (under the lock, as a wake only schedules a poll).
pub(crate) struct TasksGuard<G: DerefMut<Target = Live>>(pub(crate) G);

impl<G: DerefMut<Target = Live>> TasksGuard<G> {
    /// The future owning `slot` polled it and must wait: it is woken by the
    /// machine's next [`Signal::Wake`] of that slot.
    pub(crate) fn pending(&mut self, slot: Slot, cx: &Context<'_>) {
        let kept = self
            .0
            .wakers
            .entry(slot)
            .or_insert_with(|| Waker::noop().clone());
        if !kept.will_wake(cx.waker()) {
            kept.clone_from(cx.waker());
        }
    }

    /// The job running task `id` must wait: it is woken through its slot
    /// ([`Tasks::job_slot`]).
    pub(crate) fn pending_job(&mut self, id: &str, cx: &Context<'_>) {
        if let Some(slot) = self.job_slot(id) {
            self.pending(slot, cx);
        }
    }

    /// Hands `work` to the host: it runs once taken.
    pub(crate) fn start_work(&mut self, work: Work) {
        self.0.work.push(work);
    }

    /// The work started and not yet taken, oldest first; none: the waker
    /// of `cx` (if any) is woken when some is started.
    pub(crate) fn take_work(&mut self, cx: Option<&Context<'_>>) -> Vec<Work> {
        let live = &mut *self.0;
        if live.work.is_empty() {
            if let Some(cx) = cx {
                live.work_waker = Some(cx.waker().clone());
            }
        }
        std::mem::take(&mut live.work)
    }

    /// How many futures' wakers are kept (for tests: none once they are gone).
    #[cfg(test)]
    pub(crate) fn wakers_kept(&self) -> usize {
        self.0.wakers.len()
    }

    /// Polls the machine for `slot` with `poll`, keeping the waker while
    /// the answer is pending.
    pub(crate) fn poll<T>(
        &mut self,
        slot: Slot,
        cx: &Context<'_>,
        poll: impl FnOnce(&mut Tasks) -> std::task::Poll<T>,
    ) -> std::task::Poll<T> {
        let answer = poll(&mut self.0.tasks);
        if answer.is_pending() {
            self.pending(slot, cx);
        }
        answer
    }
}

impl<G: DerefMut<Target = Live>> Deref for TasksGuard<G> {
    type Target = Tasks;
    fn deref(&self) -> &Tasks {
        &self.0.tasks
    }
}

impl<G: DerefMut<Target = Live>> DerefMut for TasksGuard<G> {
    fn deref_mut(&mut self) -> &mut Tasks {
        &mut self.0.tasks
    }
}

impl<G: DerefMut<Target = Live>> Drop for TasksGuard<G> {
    fn drop(&mut self) {
        let Live {
            tasks,
            wakers,
            work,
            work_waker,
        } = &mut *self.0;
        if !work.is_empty() {
            if let Some(w) = work_waker.take() {
                w.wake();
            }
        }
        for signal in tasks.take_signals() {
            match signal {
                Signal::Wake(slot) => {
                    if let Some(w) = wakers.remove(&slot) {
                        w.wake();
                    }
                }
                Signal::Forget(slot) => {
                    wakers.remove(&slot);
                }
            }
        }
    }
}
