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
        unpoisoned(&self.0)
    }
}

/// `m` locked, poisoned or not: the host's mutexes guard state that each
/// holder leaves whole (maps, caches, counters), so a panic elsewhere is
/// no reason to stop serving.
pub(crate) fn unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Locks for NativeLocks {
    type Lock<T: Send> = NativeLock<T>;
}

/// The core's bounded memory store, shared through a `std` mutex.
pub type MemoryStore = toolnexus_core::server::MemoryStore<NativeLocks>;
