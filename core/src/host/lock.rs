//! The cell a host provides for state that requests share.
//!
//! A server's running tasks and a memory store's tasks are read and written
//! by every request. Core has no sync primitive of its own (the same code
//! runs on many threads natively and on one in a browser or a worker), so
//! the host says how that state is shared: a mutex where requests run on
//! several threads, a `RefCell` where they run on one.

use crate::host::transport::{MaybeSend, MaybeSync};
use std::ops::DerefMut;

/// Exclusive access to a `T` shared between requests.
///
/// `lock` is held only for a few map operations and never across an
/// `.await` or user code; an implementation may recover from a poisoned
/// mutex (the state is whole between operations).
pub trait Lock<T>: MaybeSend + MaybeSync {
    /// What `lock` hands out; the access ends when it is dropped.
    type Guard<'a>: DerefMut<Target = T>
    where
        Self: 'a;

    /// A cell holding `value`.
    fn new(value: T) -> Self;

    /// Exclusive access until the guard is dropped.
    fn lock(&self) -> Self::Guard<'_>;
}

/// The host's kind of [`Lock`], for any `T`: the server and
/// [`MemoryStore`](crate::server::MemoryStore) name it once and build theirs.
#[cfg(feature = "server")]
pub trait Locks: 'static {
    /// The host's lock around a `T`.
    type Lock<T: MaybeSend>: Lock<T>;
}

/// The [`Locks`] of a host that runs on one thread (wasm32: a browser, a
/// worker, a WASI component): a `RefCell`, since core never holds a lock
/// across an `.await`. Natively a server is shared between threads, so
/// this exists on wasm32 only.
#[cfg(all(target_arch = "wasm32", feature = "server"))]
pub struct CellLocks;

/// The lock of [`CellLocks`].
#[cfg(target_arch = "wasm32")]
pub struct CellLock<T>(std::cell::RefCell<T>);

#[cfg(target_arch = "wasm32")]
impl<T> Lock<T> for CellLock<T> {
    type Guard<'a>
        = std::cell::RefMut<'a, T>
    where
        T: 'a;

    fn new(value: T) -> Self {
        CellLock(std::cell::RefCell::new(value))
    }

    fn lock(&self) -> std::cell::RefMut<'_, T> {
        self.0.borrow_mut()
    }
}

#[cfg(all(target_arch = "wasm32", feature = "server"))]
impl Locks for CellLocks {
    type Lock<T: MaybeSend> = CellLock<T>;
}
