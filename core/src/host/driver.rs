//! The one generic driver that runs a state machine over a [`Transport`].
//!
//! The rule every machine follows: after each input (`start`, a response, a
//! timer, an abort, the result of work it asked for) it returns exactly one
//! [`Step`], the next thing to do. Card resolution ([`crate::client::card::CardMachine`]),
//! the outbound call ([`crate::client::call::CallMachine`]) and the LLM tool loop
//! (`llm::RunMachine`) are all machines of this shape, run by [`drive`] /
//! [`drive_with_work`].

use crate::error::TransportError;
use crate::host::transport::{BodyStream, Transport};
use crate::wire::http::{HttpRequest, HttpResponse};
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;

/// What a machine wants next. `W` is work the host runs for the machine
/// (the LLM loop's tool calls); machines that need none keep [`Infallible`].
/// A step dropped unread is a machine stalled for good (its request never
/// sent, its timer never armed): hence `#[must_use]`.
#[must_use = "a machine's step is what it waits for: run it, or the machine stalls"]
pub enum Step<T, W = Infallible> {
    /// Send this request; if no answer came by `deadline_ms`, call
    /// [`Machine::handle_timeout`] instead.
    Send {
        request: HttpRequest,
        deadline_ms: u64,
    },
    /// Send this request and read its body as it arrives: the head goes to
    /// [`Machine::handle_head`], then each [`Step::Read`] fetches one chunk.
    /// No head by `deadline_ms` ⇒ [`Machine::handle_timeout`].
    Stream {
        request: HttpRequest,
        deadline_ms: u64,
    },
    /// Read the next chunk of the body of the last `Stream` into
    /// [`Machine::handle_body`]; nothing by `deadline_ms` ⇒
    /// [`Machine::handle_timeout`]. Any other step drops that body.
    Read { deadline_ms: u64 },
    /// Call [`Machine::handle_timeout`] at `until_ms`.
    Sleep { until_ms: u64 },
    /// Run this work (no deadline of its own) and pass what it gives to
    /// [`Machine::handle_work`].
    Work(W),
    /// Finished.
    Done(T),
}

/// Shows header names only: requests carry API keys and tokens.
impl<T: fmt::Debug, W: fmt::Debug> fmt::Debug for Step<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let request = |f: &mut fmt::Formatter<'_>, name, r: &HttpRequest, deadline_ms: &u64| {
            let headers: Vec<&str> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
            f.debug_struct(name)
                .field("method", &r.method)
                .field("url", &r.url)
                .field("headers", &headers)
                .field("deadline_ms", deadline_ms)
                .finish_non_exhaustive()
        };
        match self {
            Step::Send {
                request: r,
                deadline_ms,
            } => request(f, "Send", r, deadline_ms),
            Step::Stream {
                request: r,
                deadline_ms,
            } => request(f, "Stream", r, deadline_ms),
            Step::Read { deadline_ms } => f
                .debug_struct("Read")
                .field("deadline_ms", deadline_ms)
                .finish(),
            Step::Sleep { until_ms } => {
                f.debug_struct("Sleep").field("until_ms", until_ms).finish()
            }
            Step::Work(w) => f.debug_tuple("Work").field(w).finish(),
            Step::Done(out) => f.debug_tuple("Done").field(out).finish(),
        }
    }
}

/// A protocol state machine: inputs in, one [`Step`] out.
///
/// After every input, the host drains [`Machine::poll_event`] (events for
/// the caller, in order) before it carries out the returned step.
pub trait Machine {
    type Output;
    /// What the caller is told while the machine runs.
    type Event;
    /// Work the host runs for the machine ([`Step::Work`]); [`Infallible`] for none.
    type Work;
    /// What that work gives back, for [`Machine::handle_work`].
    type Worked;
    /// The first step.
    fn start(&mut self, now_ms: u64) -> Step<Self::Output, Self::Work>;
    /// The answer (or transport failure) to the last `Send`.
    fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> Step<Self::Output, Self::Work>;
    /// The head of the answer (or the transport failure) to the last `Stream`.
    fn handle_head(
        &mut self,
        now_ms: u64,
        head: Result<ResponseHead, TransportError>,
    ) -> Step<Self::Output, Self::Work>;
    /// The next chunk of the streamed body: `Ok(None)` when it ended cleanly.
    fn handle_body(
        &mut self,
        now_ms: u64,
        chunk: Result<Option<Vec<u8>>, TransportError>,
    ) -> Step<Self::Output, Self::Work>;
    /// A `Sleep` ended, or a `Send`/`Stream`/`Read` passed its deadline.
    fn handle_timeout(&mut self, now_ms: u64) -> Step<Self::Output, Self::Work>;
    /// The caller aborted. Called at most once.
    fn handle_abort(&mut self, now_ms: u64) -> Step<Self::Output, Self::Work>;
    /// The result of the last [`Step::Work`].
    fn handle_work(&mut self, now_ms: u64, worked: Self::Worked) -> Step<Self::Output, Self::Work>;
    /// The next event for the caller, if any.
    fn poll_event(&mut self) -> Option<Self::Event>;
}

/// The status and headers of a streamed response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first value of a header, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::wire::http::find_header(&self.headers, name)
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Runs `futures` concurrently and returns their outputs in order. What
/// `futures_util::future::join_all` does for a short list (each wake polls
/// the futures not done yet), for any length: join_all switches to a
/// `FuturesOrdered` past 30, and compiles that machinery into every build.
pub(crate) async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures
        .into_iter()
        .map(|f| Box::pin(futures_util::future::maybe_done(f)))
        .collect();
    std::future::poll_fn(move |cx| {
        let mut pending = false;
        for f in &mut futures {
            pending |= f.as_mut().poll(cx).is_pending();
        }
        if pending {
            return Poll::Pending;
        }
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        let mut out = Vec::with_capacity(futures.len());
        for f in &mut futures {
            if let Some(o) = f.as_mut().take_output() {
                out.push(o);
            }
        }
        Poll::Ready(out)
    })
    .await
}

enum Woke<T> {
    Aborted,
    Timer,
    Op(T),
}

enum Op<Resp, Head, Worked> {
    Send(Resp),
    Stream(Head),
    Work(Worked),
    Read(Option<Result<Vec<u8>, TransportError>>),
}

/// Runs `machine` to completion over `transport`. `abort` completes when the
/// caller gives up (pass `std::future::pending()` for never); it is checked
/// before the work of every step, so an abort stops the call before its next request.
///
/// This and the two below are plain functions returning the future of
/// [`drive_watched`]: as async wrappers, each would nest a state machine of
/// its own in every caller's.
pub fn drive<'a, M: Machine<Work = Infallible>, T: Transport>(
    machine: &'a mut M,
    transport: &'a T,
    abort: impl Future<Output = ()> + 'a,
) -> impl Future<Output = M::Output> + 'a {
    drive_with_events(machine, transport, abort, |_| {})
}

/// [`drive`] that hands every event of the machine to `on_event` as it happens.
pub fn drive_with_events<'a, M: Machine<Work = Infallible>, T: Transport>(
    machine: &'a mut M,
    transport: &'a T,
    abort: impl Future<Output = ()> + 'a,
    on_event: impl FnMut(M::Event) + 'a,
) -> impl Future<Output = M::Output> + 'a {
    let no_work = |w: Infallible| -> std::future::Ready<M::Worked> { match w {} };
    drive_with_work(machine, transport, abort, on_event, no_work)
}

/// [`drive_with_events`] for a machine that asks for work: each
/// [`Step::Work`] is handed to `work`, and what its future gives goes back
/// to [`Machine::handle_work`]. An abort while work runs drops it.
pub fn drive_with_work<'a, M: Machine, T: Transport, Fut: Future<Output = M::Worked> + 'a>(
    machine: &'a mut M,
    transport: &'a T,
    abort: impl Future<Output = ()> + 'a,
    on_event: impl FnMut(M::Event) + 'a,
    work: impl FnMut(M::Work) -> Fut + 'a,
) -> impl Future<Output = M::Output> + 'a {
    drive_watched(machine, transport, abort, on_event, work, ())
}

/// Sees each request a machine sends, and its answer: the spans of an A2A
/// call's requests ([`crate::wire::trace::CallSpans`]).
pub(crate) trait Watch {
    /// `req` is about to go (its trace headers may be rewritten).
    fn sent(&mut self, req: &mut HttpRequest, now_ms: u64);
    /// Its answer: the status (a stream's head's) and a whole answer's
    /// body; status 0 when none came (a transport failure, a timeout, an
    /// abort).
    fn answered(&mut self, now_ms: u64, status: u16, body: &[u8]);
}

/// No watch: compiled away.
impl Watch for () {
    #[inline(always)]
    fn sent(&mut self, _: &mut HttpRequest, _: u64) {}
    #[inline(always)]
    fn answered(&mut self, _: u64, _: u16, _: &[u8]) {}
}

/// A watch when there is one.
impl<W: Watch> Watch for Option<W> {
    fn sent(&mut self, req: &mut HttpRequest, now_ms: u64) {
        if let Some(w) = self {
            w.sent(req, now_ms);
        }
    }
    fn answered(&mut self, now_ms: u64, status: u16, body: &[u8]) {
        if let Some(w) = self {
            w.answered(now_ms, status, body);
        }
    }
}

impl<W: Watch> Watch for &mut W {
    fn sent(&mut self, req: &mut HttpRequest, now_ms: u64) {
        (**self).sent(req, now_ms);
    }
    fn answered(&mut self, now_ms: u64, status: u16, body: &[u8]) {
        (**self).answered(now_ms, status, body);
    }
}

/// [`drive_with_work`], telling `watch` of each request (a type
/// parameter: the machines driven with `()` keep their code as it was).
pub(crate) async fn drive_watched<M: Machine, T: Transport, Fut: Future<Output = M::Worked>>(
    machine: &mut M,
    transport: &T,
    abort: impl Future<Output = ()>,
    mut on_event: impl FnMut(M::Event),
    mut work: impl FnMut(M::Work) -> Fut,
    mut watch: impl Watch,
) -> M::Output {
    let mut abort = pin!(abort);
    let mut aborted = false;
    let mut body: Option<BodyStream> = None;
    let mut step = machine.start(transport.now_ms());
    loop {
        while let Some(event) = machine.poll_event() {
            on_event(event);
        }
        // Only a Read goes on with the body; any other step drops it.
        if !matches!(step, Step::Read { .. }) {
            body = None;
        }
        let mut send = None;
        let mut stream = None;
        let mut working = None;
        let until = match step {
            Step::Done(out) => return out,
            Step::Work(w) => {
                working = Some(work(w));
                None
            }
            Step::Send {
                mut request,
                deadline_ms,
            } => {
                watch.sent(&mut request, transport.now_ms());
                send = Some(transport.send(request));
                Some(deadline_ms)
            }
            Step::Stream {
                mut request,
                deadline_ms,
            } => {
                watch.sent(&mut request, transport.now_ms());
                stream = Some(transport.send_streaming(request));
                Some(deadline_ms)
            }
            Step::Read { deadline_ms } => Some(deadline_ms),
            Step::Sleep { until_ms } => Some(until_ms),
        };
        let mut send = pin!(send);
        let mut stream = pin!(stream);
        let mut working = pin!(working);
        let mut timer = pin!(until.map(|at| transport.sleep_until(at)));
        let woke = std::future::poll_fn(|cx| {
            if !aborted && abort.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Aborted);
            }
            if let Some(fut) = send.as_mut().as_pin_mut() {
                if let Poll::Ready(r) = fut.poll(cx) {
                    return Poll::Ready(Woke::Op(Op::Send(r)));
                }
            }
            if let Some(fut) = stream.as_mut().as_pin_mut() {
                if let Poll::Ready(r) = fut.poll(cx) {
                    return Poll::Ready(Woke::Op(Op::Stream(r)));
                }
            }
            if let Some(fut) = working.as_mut().as_pin_mut() {
                if let Poll::Ready(r) = fut.poll(cx) {
                    return Poll::Ready(Woke::Op(Op::Work(r)));
                }
            }
            if let Some(b) = body.as_mut() {
                if let Poll::Ready(chunk) = b.as_mut().poll_next(cx) {
                    return Poll::Ready(Woke::Op(Op::Read(chunk)));
                }
            }
            if let Some(timer) = timer.as_mut().as_pin_mut() {
                if timer.poll(cx).is_ready() {
                    return Poll::Ready(Woke::Timer);
                }
            }
            Poll::Pending
        })
        .await;
        let now = transport.now_ms();
        match &woke {
            Woke::Op(Op::Send(Ok(r))) => watch.answered(now, r.status, &r.body),
            Woke::Op(Op::Stream(Ok(r))) => watch.answered(now, r.status, &[]),
            // No answer: a failure, or the request given up.
            Woke::Op(Op::Send(Err(_)) | Op::Stream(Err(_))) => watch.answered(now, 0, &[]),
            Woke::Aborted | Woke::Timer if send.is_some() || stream.is_some() => {
                watch.answered(now, 0, &[])
            }
            _ => {}
        }
        step = match woke {
            Woke::Aborted => {
                aborted = true;
                machine.handle_abort(now)
            }
            Woke::Timer => machine.handle_timeout(now),
            Woke::Op(Op::Send(r)) => machine.handle_response(now, r),
            Woke::Op(Op::Work(r)) => machine.handle_work(now, r),
            Woke::Op(Op::Stream(r)) => {
                let head = r.map(|resp| {
                    body = Some(resp.body);
                    ResponseHead {
                        status: resp.status,
                        headers: resp.headers,
                    }
                });
                machine.handle_head(now, head)
            }
            Woke::Op(Op::Read(chunk)) => {
                let chunk = match chunk {
                    None => {
                        body = None;
                        Ok(None)
                    }
                    Some(Ok(bytes)) => Ok(Some(bytes)),
                    Some(Err(e)) => {
                        body = None;
                        Err(e)
                    }
                };
                machine.handle_body(now, chunk)
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Ready after `polls` pending polls.
    fn after(polls: u32, value: &'static str) -> impl Future<Output = &'static str> {
        let mut left = polls;
        std::future::poll_fn(move |_| {
            if left == 0 {
                return Poll::Ready(value);
            }
            left -= 1;
            Poll::Pending
        })
    }

    #[test]
    fn join_all_keeps_the_given_order_whatever_finishes_first() {
        let futures = [after(3, "slow"), after(0, "now"), after(1, "soon")];
        let out = crate::testing::block_on(join_all(futures));
        assert_eq!(out, ["slow", "now", "soon"]);
        let many: Vec<_> = (0..40).map(|i| after(40 - i, "x")).collect();
        assert_eq!(crate::testing::block_on(join_all(many)).len(), 40);
        let none: [std::future::Ready<()>; 0] = [];
        assert!(crate::testing::block_on(join_all(none)).is_empty());
    }
}
