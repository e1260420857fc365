//! Where tasks live: the [`TaskStore`] trait and the bounded memory store.

use crate::task::Task;
use crate::transport::MaybeSend;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Mutex;

/// A store failure (disk full, a KV error, the memory store at capacity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Persists tasks. `save` must be durable when it returns: the server
/// acknowledges a task only after its first save.
pub trait TaskStore: crate::transport::MaybeSend + crate::transport::MaybeSync + 'static {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend;
    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend;
}

/// The default cap on tasks kept by [`MemoryStore`].
pub const DEFAULT_MAX_TASKS: usize = 100_000;

struct Inner {
    tasks: HashMap<String, Task>,
    /// Finished task ids, oldest first: the eviction order.
    finished: VecDeque<String>,
}

/// Tasks in memory, bounded: past `max_tasks`, the oldest finished tasks are
/// dropped. Unfinished tasks are never dropped; when every slot holds one, a
/// new task is refused with an error rather than growing without bound.
pub struct MemoryStore {
    max_tasks: usize,
    inner: Mutex<Inner>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_TASKS)
    }
}

impl MemoryStore {
    /// A store that keeps at most `max_tasks` tasks (at least 1).
    pub fn new(max_tasks: usize) -> Self {
        MemoryStore {
            max_tasks: max_tasks.max(1),
            inner: Mutex::new(Inner {
                tasks: HashMap::new(),
                finished: VecDeque::new(),
            }),
        }
    }

    /// How many tasks are stored.
    pub fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated in
        // a way that matters more than losing the store, so recover the data.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The task with this id, now.
    pub fn get_now(&self, id: &str) -> Option<Task> {
        self.lock().tasks.get(id).cloned()
    }

    /// Stores the task now (see the type's eviction rule).
    pub fn save_now(&self, task: &Task) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let is_new = !inner.tasks.contains_key(&task.id);
        if is_new && inner.tasks.len() >= self.max_tasks {
            // Evict finished tasks, oldest first (skipping ids already gone).
            while inner.tasks.len() >= self.max_tasks {
                let Some(old) = inner.finished.pop_front() else {
                    return Err(StoreError(format!(
                        "the task store is full: {} unfinished tasks",
                        inner.tasks.len()
                    )));
                };
                inner.tasks.remove(&old);
            }
        }
        let was_terminal = inner
            .tasks
            .get(&task.id)
            .is_some_and(|t| t.state.is_terminal());
        if task.state.is_terminal() && !was_terminal {
            inner.finished.push_back(task.id.clone());
        }
        inner.tasks.insert(task.id.clone(), task.clone());
        Ok(())
    }
}

impl TaskStore for MemoryStore {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.get_now(id)))
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        std::future::ready(self.save_now(task))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskState;
    use crate::testing::block_on;

    fn task(id: &str, state: TaskState) -> Task {
        Task {
            id: id.into(),
            context_id: "c".into(),
            state,
            status_message: None,
            artifacts: vec![],
            history: vec![],
        }
    }

    #[test]
    fn evicts_the_oldest_finished_tasks_first() {
        let store = MemoryStore::new(2);
        block_on(store.save(&task("a", TaskState::Completed))).expect("a");
        block_on(store.save(&task("b", TaskState::Working))).expect("b");
        block_on(store.save(&task("c", TaskState::Submitted))).expect("c evicts a");
        assert_eq!(block_on(store.get("a")), Ok(None));
        assert!(block_on(store.get("b")).expect("get").is_some());
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn never_evicts_unfinished_tasks() {
        let store = MemoryStore::new(2);
        block_on(store.save(&task("a", TaskState::Working))).expect("a");
        block_on(store.save(&task("b", TaskState::Working))).expect("b");
        let full = block_on(store.save(&task("c", TaskState::Submitted)));
        assert!(full.is_err());
        // Updating a stored task always works.
        block_on(store.save(&task("a", TaskState::Completed))).expect("update a");
        block_on(store.save(&task("c", TaskState::Submitted))).expect("now a can go");
        assert_eq!(block_on(store.get("a")), Ok(None));
    }
}
