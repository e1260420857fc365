//! The native [`Locks`]: a `std` mutex, since requests run on several threads.

use std::sync::{Mutex, MutexGuard};
use toolnexus_core::server::{Lock, Locks};

/// Native requests share server state through a `std` mutex.
pub struct NativeLocks;

/// The lock of [`NativeLocks`].
pub struct NativeLock<T>(Mutex<T>);

impl<T: Send> Lock<T> for NativeLock<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        T: 'a;

    fn new(value: T) -> Self {
        NativeLock(Mutex::new(value))
    }

    fn lock(&self) -> MutexGuard<'_, T> {
        // Core holds the lock only for map operations that leave the state
        // whole; if a panic poisoned it anyway, keep serving.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Locks for NativeLocks {
    type Lock<T: Send> = NativeLock<T>;
}

/// The core's bounded memory store, shared through a `std` mutex.
pub type MemoryStore = toolnexus_core::server::MemoryStore<NativeLocks>;
