//! The one generic driver that runs a state machine over a [`Transport`].
//!
//! The rule every machine follows: after each input (`start`, a response, a
//! timer, an abort) it returns exactly one [`Step`], the next thing to do.

use crate::error::TransportError;
use crate::http::{HttpRequest, HttpResponse};
use crate::transport::Transport;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;

/// What a machine wants next.
#[derive(Debug)]
pub enum Step<T> {
    /// Send this request; if no answer came by `deadline_ms`, call
    /// [`Machine::handle_timeout`] instead.
    Send {
        request: HttpRequest,
        deadline_ms: u64,
    },
    /// Call [`Machine::handle_timeout`] at `until_ms`.
    Sleep { until_ms: u64 },
    /// Finished.
    Done(T),
}

/// A protocol state machine: inputs in, one [`Step`] out.
pub trait Machine {
    type Output;
    /// The first step.
    fn start(&mut self, now_ms: u64) -> Step<Self::Output>;
    /// The answer (or transport failure) to the last `Send`.
    fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> Step<Self::Output>;
    /// A `Sleep` ended, or a `Send` passed its deadline.
    fn handle_timeout(&mut self, now_ms: u64) -> Step<Self::Output>;
    /// The caller aborted. Called at most once.
    fn handle_abort(&mut self, now_ms: u64) -> Step<Self::Output>;
}

/// Runs `fut` until `deadline_ms` of the transport's clock; `None` when the
/// deadline came first (`fut` is then dropped).
pub async fn within<T: Transport, F: Future>(
    transport: &T,
    deadline_ms: u64,
    fut: F,
) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut timer = pin!(transport.sleep_until(deadline_ms));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        timer.as_mut().poll(cx).map(|_| None)
    })
    .await
}

enum Woke<T> {
    Aborted,
    Timer,
    Op(T),
}

/// Runs `machine` to completion over `transport`. `abort` completes when the
/// caller gives up (pass `std::future::pending()` for never); it is checked
/// before the work of every step, so an abort stops the call before its next request.
pub async fn drive<M: Machine, T: Transport>(
    machine: &mut M,
    transport: &T,
    abort: impl Future<Output = ()>,
) -> M::Output {
    let mut abort = pin!(abort);
    let mut aborted = false;
    let mut step = machine.start(transport.now_ms());
    loop {
        let (op, until) = match step {
            Step::Done(out) => return out,
            Step::Send {
                request,
                deadline_ms,
            } => (Some(transport.send(request)), deadline_ms),
            Step::Sleep { until_ms } => (None, until_ms),
        };
        let mut op = pin!(op);
        let mut timer = pin!(transport.sleep_until(until));
        let woke = std::future::poll_fn(|cx| {
            if !aborted && abort.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Aborted);
            }
            if let Some(fut) = op.as_mut().as_pin_mut() {
                if let Poll::Ready(r) = fut.poll(cx) {
                    return Poll::Ready(Woke::Op(r));
                }
            }
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Timer);
            }
            Poll::Pending
        })
        .await;
        let now = transport.now_ms();
        step = match woke {
            Woke::Aborted => {
                aborted = true;
                machine.handle_abort(now)
            }
            Woke::Timer => machine.handle_timeout(now),
            Woke::Op(r) => machine.handle_response(now, r),
        };
    }
}
