//! The request-head timeout of one connection, kept with one timer per
//! connection instead of one per request.
//!
//! hyper's own `header_read_timeout` arms a fresh timer (a boxed sleep,
//! registered in tokio's timer wheel and removed again) for every request
//! head; at tens of thousands of requests a second that was a measurable
//! share of a GetTask's cost. Here each connection notes when it started
//! waiting for a head (opened, or its last answer sent) in two plain
//! atomics, and one timer, re-armed only when it fires, closes the
//! connection once it has waited longer than the timeout. The accept loop
//! reads the same clock at the connection cap to close the connection that
//! has waited longest ([`HeadClock::waiting_for`], [`HeadClock::evict`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Whether a connection waits for a request head, and since when.
pub(crate) struct HeadClock {
    opened: Instant,
    /// Requests being served (read, handled, or answered): while any is,
    /// no head is awaited.
    serving: AtomicUsize,
    /// When the connection last started waiting for a head, in
    /// milliseconds since `opened`.
    waiting_since_ms: AtomicU64,
    /// Asks the connection to close if it is still waiting for a head.
    evict: Notify,
}

impl HeadClock {
    /// A connection just opened: it waits for its first head from now.
    pub(crate) fn new() -> Arc<HeadClock> {
        Arc::new(HeadClock {
            opened: Instant::now(),
            serving: AtomicUsize::new(0),
            waiting_since_ms: AtomicU64::new(0),
            evict: Notify::new(),
        })
    }

    /// A request head has arrived: no head is awaited until the returned
    /// guard is dropped (when its answer has been sent, or abandoned).
    pub(crate) fn serving(self: &Arc<Self>) -> Serving {
        // Relaxed: a connection's requests, answers and watchdog run in one
        // task, so these are never written concurrently (the accept loop
        // only reads them, for a choice that may be a moment stale).
        self.serving.fetch_add(1, Ordering::Relaxed);
        Serving(self.clone())
    }

    /// When the connection must have sent a whole head by, or `None`
    /// while it is serving a request.
    fn head_deadline(&self, timeout: Duration) -> Option<Instant> {
        if self.serving.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.waiting_since_ms.load(Ordering::Relaxed));
        Some(self.opened + since + timeout)
    }

    /// How long the connection has waited for a request head so far, or
    /// `None` while it is serving a request.
    pub(crate) fn waiting_for(&self, now: Instant) -> Option<Duration> {
        let deadline = self.head_deadline(Duration::ZERO)?;
        Some(now.saturating_duration_since(deadline))
    }

    /// Closes the connection if it is still waiting for a head when it
    /// hears of this; a connection serving a request by then ignores it.
    pub(crate) fn evict(&self) {
        self.evict.notify_one();
    }
}

/// A request being served on a connection; see [`HeadClock::serving`].
pub(crate) struct Serving(Arc<HeadClock>);

impl Drop for Serving {
    fn drop(&mut self) {
        let clock = &self.0;
        let ms = clock.opened.elapsed().as_millis() as u64;
        clock.waiting_since_ms.store(ms, Ordering::Relaxed);
        clock.serving.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `conn` (a connection being served) and drops it, which closes
/// it, once it has waited `timeout` for a request head (slow senders of
/// a head and idle keep-alive connections alike), or when evicted while
/// waiting for one.
pub(crate) async fn close_when_head_late<C: Future>(
    conn: C,
    clock: Arc<HeadClock>,
    timeout: Duration,
) {
    let mut conn = std::pin::pin!(conn);
    let mut timer = std::pin::pin!(tokio::time::sleep_until(clock.opened + timeout));
    let mut evicted = std::pin::pin!(clock.evict.notified());
    std::future::poll_fn(|cx: &mut Context<'_>| {
        if conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        while evicted.as_mut().poll(cx).is_ready() {
            if clock.head_deadline(timeout).is_some() {
                return Poll::Ready(());
            }
            evicted.set(clock.evict.notified());
        }
        // The timer is re-armed only when it fires: a connection that keeps
        // answering costs no timer work per request.
        while timer.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            match clock.head_deadline(timeout) {
                Some(at) if at <= now => return Poll::Ready(()),
                Some(at) => timer.as_mut().reset(at),
                // Serving: a request's body and handling have their own bounds.
                None => Pin::as_mut(&mut timer).reset(now + timeout),
            }
        }
        Poll::Pending
    })
    .await
}
