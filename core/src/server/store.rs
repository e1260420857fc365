//! Where tasks live: the [`TaskStore`] trait and the bounded memory store.

use crate::host::lock::{Lock, Locks};
use crate::host::transport::MaybeSend;
use crate::model::event::StreamEvent;
use crate::model::task::{Shape, Task, TaskState};
use futures_util::future::Either;
use hashbrown::hash_table::{Entry, HashTable};
use hashbrown::DefaultHashBuilder;
use std::collections::VecDeque;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::Arc;

crate::error::message_error! {
    /// A store failure (disk full, a KV error, the memory store at capacity),
    /// and the error underneath (an I/O or JSON error) when there is one.
    StoreError
}

impl StoreError {
    /// The save's compare-and-swap was refused: the stored version is not
    /// the one before the save's (another replica wrote the task first).
    /// The server reads the task again and decides again.
    pub fn conflict(task_id: &str, stored_version: Option<u64>, version: u64) -> StoreError {
        let mut e = StoreError::new(match stored_version {
            Some(v) => {
                format!("task {task_id} changed: stored version {v}, saving version {version}")
            }
            None => format!(
                "task {task_id} changed: the stored version is not {}",
                version.saturating_sub(1)
            ),
        });
        e.conflict = true;
        e
    }

    /// Whether this is a refused compare-and-swap ([`StoreError::conflict`]).
    pub fn is_conflict(&self) -> bool {
        self.conflict
    }
}

/// Whether a save of `saving` may replace what is stored (`stored`: its
/// version, `None` when absent): the compare-and-swap every store applies.
/// Version 0 is an unversioned write (a task made outside a server: a seed,
/// a test) and always goes through.
pub fn may_replace(stored: Option<u64>, saving: u64) -> bool {
    saving == 0 || stored.unwrap_or(0) + 1 == saving
}

/// An event of a task's log ([`TaskStore::events_after`]): the version of
/// the task whose save wrote it, and the event.
pub type LoggedEvent = (u64, StreamEvent);

/// An event as stores keep it in their logs (JSON in the A2A 0.3 shape,
/// which [`event_from_json`] reads back).
pub fn event_json(event: &StreamEvent) -> serde_json::Value {
    serde_json::to_value(event.shaped(Shape::V03)).unwrap_or(serde_json::Value::Null)
}

/// An event stored by [`event_json`]; `None` if it is not one.
pub fn event_from_json(v: &serde_json::Value) -> Option<StreamEvent> {
    StreamEvent::from_value(v)
}

/// Which tasks ListTasks asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only this conversation's tasks.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks whose status changed at or after this instant (Unix ms;
    /// `statusTimestampAfter` is inclusive in a2a.proto).
    pub updated_after_ms: Option<u64>,
    /// Only this caller's tasks ([`Task::owner`]); `None`: everyone's (the
    /// server authenticates nobody). A store filters by it while listing.
    pub owner: Option<String>,
}

impl TaskFilter {
    /// Whether `task` passes.
    pub fn matches(&self, task: &Task) -> bool {
        self.context_id
            .as_ref()
            .is_none_or(|c| *c == task.context_id)
            && self.state.is_none_or(|s| s == task.state)
            && self
                .updated_after_ms
                .is_none_or(|after| task.updated_ms.is_some_and(|t| t >= after))
            && self
                .owner
                .as_ref()
                .is_none_or(|o| task.owner.as_ref() == Some(o))
    }
}

/// Persists tasks. `save` must be durable when it returns: the server
/// acknowledges a task only after its first save.
///
/// The contract that lets several replicas share one store:
/// - **Versions.** [`Task::revision`] is stored with the task. `save` is a
///   compare-and-swap ([`may_replace`]): a task of version `n` replaces the
///   stored one only if that one is version `n - 1` (or absent for `n = 1`);
///   otherwise it fails with [`StoreError::conflict`] and nothing changes.
///   The server then reads the task again and decides again, so a late
///   `completed` never overwrites a `canceled` another replica stored.
/// - **Leases.** A running task's [`Revision::lease`](crate::Revision) names
///   the replica fulfilling it and when its claim ends; that replica renews
///   it. A task still `submitted`/`working` whose lease ran out was
///   abandoned (its replica died) and is failed as
///   [`INTERRUPTED`](super::INTERRUPTED) by whoever sees it first, through
///   the same compare-and-swap ([`TaskStore::expired`] finds them).
/// - **Changes.** Hosts whose store tells of changes made elsewhere (a
///   PostgreSQL `NOTIFY`) pass them to
///   [`A2aServer::store_changed`](super::A2aServer::store_changed): waiters and
///   the fulfilling replica wake at once instead of at their next poll.
/// - **Event log.** [`save_with_events`](TaskStore::save_with_events)
///   appends the status and artifact events that led to the saved version
///   to the task's ordered log, in the same atomic write as the task (both
///   or neither); [`events_after`](TaskStore::events_after) replays them
///   from a version, so a subscriber on any replica misses none and sees
///   none twice. A store that keeps no log answers `Ok(None)` and
///   subscribers compare versions instead (intermediate chunks merged).
///   Deleting a task deletes its log.
pub trait TaskStore:
    crate::host::transport::MaybeSend + crate::host::transport::MaybeSync + 'static
{
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend;
    /// [`get`](TaskStore::get), the task shared rather than owned: every
    /// read of a task for a caller goes through it. A store that keeps tasks
    /// in memory hands out its own without copying it (GetTask writes its
    /// answer from it). The default wraps what `get` reads, which a caller
    /// that needs its own task then takes without a copy.
    fn get_shared(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Arc<Task>>, StoreError>> + MaybeSend {
        futures_util::FutureExt::map(self.get(id), |got| got.map(|t| t.map(Arc::new)))
    }
    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend;
    /// [`save`](TaskStore::save), and `events` (what changed the task since
    /// the stored version, in order) appended to its log under the saved
    /// version, atomically with the task: a refused compare-and-swap
    /// appends nothing. The default keeps no log and only saves.
    fn save_with_events(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        let _ = events;
        self.save(task)
    }
    /// Task `id`'s logged events written by versions after `version`, in
    /// the order they were appended. `Ok(None)` (the default): this store
    /// keeps no log.
    fn events_after(
        &self,
        id: &str,
        version: u64,
    ) -> impl Future<Output = Result<Option<Vec<LoggedEvent>>, StoreError>> + MaybeSend {
        let _ = (id, version);
        std::future::ready(Ok(None))
    }
    /// The stored tasks that pass `filter`, in any order (returning more is
    /// fine: the server filters again). `Ok(None)`: this store cannot list,
    /// and ListTasks answers that it is unsupported.
    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        let _ = filter;
        std::future::ready(Ok(None))
    }
    /// One page of the tasks that pass `filter` (its owner included), newest
    /// status change first (ties: the greater id first), starting after the
    /// task at `after` (its status time and id) in that order, at most
    /// `limit` of them; and how many pass in all. `Ok(None)` (the default):
    /// this store does not page, and the server pages what
    /// [`list`](TaskStore::list) returns.
    fn list_page(
        &self,
        filter: &TaskFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<(Vec<Task>, usize)>, StoreError>> + MaybeSend {
        let _ = (filter, after, limit);
        std::future::ready(Ok(None))
    }
    /// Tasks still `submitted` or `working` whose lease ended before
    /// `now_ms` (Unix ms), or that have none, at most `limit` of them: the
    /// server fails them as interrupted. The default finds none (the
    /// server then checks each task it reads).
    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>, StoreError>> + MaybeSend {
        let _ = (now_ms, limit);
        std::future::ready(Ok(Vec::new()))
    }
    /// The push-notification configs stored with task `task_id` (feature
    /// `push`): the JSON array last given to
    /// [`save_push_configs`](TaskStore::save_push_configs), `Ok(None)` when
    /// none is stored. The default stores none: configs then last only as
    /// long as the server.
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        let _ = task_id;
        std::future::ready(Ok(None))
    }
    /// Stores task `task_id`'s push-notification configs (a JSON array that
    /// replaces the previous one), durably when it returns. It holds the
    /// webhooks' credentials: keep it as private as the tasks.
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        let _ = (task_id, configs);
        std::future::ready(Ok(()))
    }
    /// Adds one push-notification config to task `task_id`, or replaces the
    /// one with the same `"id"` ([`put_push_record`]): `config` is the
    /// record as the server keeps it, its `"owner"` the task's owner (if
    /// any). `Ok(false)`: refused, the task has `max` others already.
    /// Durable when it returns. The server reads configs through the store
    /// each time it uses them (no cache), so a store shared by replicas
    /// makes this atomic against them (a row per config, or the array
    /// rewritten under its lock). The default reads the array with
    /// [`get_push_configs`](TaskStore::get_push_configs) and writes it
    /// back with [`save_push_configs`](TaskStore::save_push_configs):
    /// right for one process.
    fn put_push_config(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        async move {
            let mut list = push_records(self.get_push_configs(task_id).await?);
            if !put_push_record(&mut list, config.clone(), max) {
                return Ok(false);
            }
            self.save_push_configs(task_id, &serde_json::Value::Array(list))
                .await?;
            Ok(true)
        }
    }
    /// Deletes task `task_id`'s push-notification config `id`; whether one
    /// was there. Durable when it returns. The default reads and writes
    /// the array, as [`put_push_config`](TaskStore::put_push_config)'s.
    fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        async move {
            let mut list = push_records(self.get_push_configs(task_id).await?);
            if !delete_push_record(&mut list, id) {
                return Ok(false);
            }
            self.save_push_configs(task_id, &serde_json::Value::Array(list))
                .await?;
            Ok(true)
        }
    }
    /// Deletes the terminal tasks whose status last changed before
    /// `before_ms` (Unix ms), with their push configs, at most `limit` of
    /// them; how many went. What [`A2aServer::sweep`](super::A2aServer::sweep)
    /// calls for [`ServerOptions::retention`](super::ServerOptions::retention).
    /// The default deletes none (a store that cannot delete keeps
    /// everything).
    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        let _ = (before_ms, limit);
        std::future::ready(Ok(0))
    }
}

/// The records of a stored push-config array ([`TaskStore::get_push_configs`]).
pub fn push_records(stored: Option<serde_json::Value>) -> Vec<serde_json::Value> {
    match stored {
        Some(serde_json::Value::Array(list)) => list,
        _ => Vec::new(),
    }
}

/// Puts `record` into `list`: over the record with the same `"id"`, else
/// at the end unless `list` holds `max` already (then false, unchanged).
pub fn put_push_record(
    list: &mut Vec<serde_json::Value>,
    record: serde_json::Value,
    max: usize,
) -> bool {
    let id = record.get("id").cloned();
    let full = list.len() >= max;
    match list.iter_mut().find(|r| r.get("id") == id.as_ref()) {
        Some(old) => *old = record,
        None if full => return false,
        None => list.push(record),
    }
    true
}

/// Removes the record with this `"id"` from `list`; whether there was one.
pub fn delete_push_record(list: &mut Vec<serde_json::Value>, id: &str) -> bool {
    let before = list.len();
    list.retain(|r| r.get("id").and_then(serde_json::Value::as_str) != Some(id));
    before != list.len()
}

/// Whether `task` is one [`TaskStore::delete_finished`] deletes: terminal,
/// its status last changed before `before_ms` (a task with no status time
/// is never old).
pub fn is_expired_finished(task: &Task, before_ms: u64) -> bool {
    task.state.is_terminal() && task.updated_ms.is_some_and(|t| t < before_ms)
}

/// The default cap on tasks kept by [`MemoryStore`].
pub const DEFAULT_MAX_TASKS: usize = 100_000;

/// The default cap on the bytes of tasks kept by [`MemoryStore`] (64 MiB,
/// for a small server; tasks are counted by [`task_bytes`]).
pub const DEFAULT_MAX_BYTES: usize = 64 * 1024 * 1024;

/// The memory a stored task takes, near enough: its text, ids and the
/// fixed size of its parts. What [`MemoryStore`]'s byte cap counts.
pub fn task_bytes(task: &Task) -> usize {
    use std::mem::size_of;
    fn message(m: &crate::model::task::Message) -> usize {
        size_of::<crate::model::task::Message>()
            + m.message_id.len()
            + m.context_id.as_ref().map_or(0, String::len)
            + m.task_id.as_ref().map_or(0, String::len)
            + m.parts
                .iter()
                .map(|p| size_of::<crate::model::part::Part>() + p.byte_len())
                .sum::<usize>()
    }
    size_of::<Task>()
        + task.id.len()
        + task.context_id.len()
        + task.status_message.as_ref().map_or(0, message)
        + task
            .artifacts
            .iter()
            .map(|a| {
                size_of::<crate::model::task::Artifact>()
                    + a.artifact_id.len()
                    + a.parts
                        .iter()
                        .map(|p| size_of::<crate::model::part::Part>() + p.byte_len())
                        .sum::<usize>()
            })
            .sum::<usize>()
        + task.history.iter().map(message).sum::<usize>()
}

/// Tasks live in a slab, each behind an `Arc` that readers share
/// ([`TaskStore::get_shared`]); the index and the eviction queue hold
/// 4-byte slot numbers, so a task's id is stored once (in the task).
struct Inner {
    slots: Vec<Option<Arc<Task>>>,
    /// [`task_bytes`] of the task in each slot.
    sizes: Vec<usize>,
    /// Their sum over the stored tasks.
    bytes: usize,
    free: Vec<u32>,
    /// Slot numbers, hashed by the id of the task in the slot.
    index: HashTable<u32>,
    /// Slots of finished tasks, oldest first: the eviction order.
    finished: VecDeque<u32>,
    hasher: DefaultHashBuilder,
    len: usize,
    /// The event log of each stored task that has one, by task id: dropped
    /// with its task. Boxed: a store that logs nothing stays small.
    events: Box<hashbrown::HashMap<String, Vec<LoggedEvent>>>,
    /// The push-notification configs of stored tasks, by task id: dropped
    /// with their task.
    #[cfg(feature = "push")]
    push: hashbrown::HashMap<String, serde_json::Value>,
}

impl Inner {
    fn find(&self, id: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(id);
        let slots = &self.slots;
        self.index
            .find(hash, |&slot| {
                slots[slot as usize].as_ref().is_some_and(|t| t.id == id)
            })
            .copied()
    }

    fn remove(&mut self, slot: u32) {
        let Some(task) = self.slots[slot as usize].take() else {
            return;
        };
        let hash = self.hasher.hash_one(task.id.as_str());
        if let Ok(entry) = self.index.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        if !self.events.is_empty() {
            self.events.remove(task.id.as_str());
        }
        #[cfg(feature = "push")]
        if !self.push.is_empty() {
            self.push.remove(task.id.as_str());
        }
        self.free.push(slot);
        self.len -= 1;
        self.bytes -= std::mem::take(&mut self.sizes[slot as usize]);
    }
}

/// Tasks in memory, bounded by count and by bytes ([`task_bytes`]): past
/// either cap, the oldest finished tasks are dropped. Unfinished tasks are
/// never dropped; when only they are left, a new task is refused with an
/// error rather than growing without bound (a stored task's update is
/// always taken).
///
/// `L` is the host's [`Locks`]: requests share the store through it.
pub struct MemoryStore<L: Locks> {
    max_tasks: usize,
    max_bytes: usize,
    inner: L::Lock<Inner>,
}

impl<L: Locks> Default for MemoryStore<L> {
    /// [`DEFAULT_MAX_TASKS`] tasks, [`DEFAULT_MAX_BYTES`] bytes.
    fn default() -> Self {
        Self::with_limits(DEFAULT_MAX_TASKS, DEFAULT_MAX_BYTES)
    }
}

impl<L: Locks> MemoryStore<L> {
    /// A store that keeps at most `max_tasks` tasks (at least 1, at most
    /// `u32::MAX`) and [`DEFAULT_MAX_BYTES`].
    pub fn new(max_tasks: usize) -> Self {
        Self::with_limits(max_tasks, DEFAULT_MAX_BYTES)
    }

    /// A store that keeps at most `max_tasks` tasks and `max_bytes` bytes of them.
    pub fn with_limits(max_tasks: usize, max_bytes: usize) -> Self {
        MemoryStore {
            max_tasks: max_tasks.clamp(1, u32::MAX as usize),
            max_bytes,
            inner: Lock::new(Inner {
                sizes: Vec::new(),
                bytes: 0,
                slots: Vec::new(),
                free: Vec::new(),
                index: HashTable::new(),
                finished: VecDeque::new(),
                hasher: DefaultHashBuilder::default(),
                len: 0,
                events: Box::default(),
                #[cfg(feature = "push")]
                push: hashbrown::HashMap::new(),
            }),
        }
    }

    /// How many tasks are stored.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    /// The bytes of the stored tasks ([`task_bytes`]).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> <L::Lock<Inner> as Lock<Inner>>::Guard<'_> {
        self.inner.lock()
    }

    /// The task with this id, now.
    pub fn get_now(&self, id: &str) -> Option<Task> {
        let inner = self.lock();
        let slot = inner.find(id)?;
        inner.slots[slot as usize].as_deref().cloned()
    }

    /// The task with this id, now, shared: no copy of it is made (a later
    /// save replaces the stored one; it never changes this one).
    pub fn get_shared_now(&self, id: &str) -> Option<Arc<Task>> {
        let inner = self.lock();
        let slot = inner.find(id)?;
        inner.slots[slot as usize].clone()
    }

    /// The stored tasks that pass `filter`, now.
    pub fn list_now(&self, filter: &TaskFilter) -> Vec<Task> {
        let inner = self.lock();
        inner
            .slots
            .iter()
            .flatten()
            .filter(|t| filter.matches(t))
            .map(|t| (**t).clone())
            .collect()
    }

    /// Stores the task now (see the type's eviction rule), if its version
    /// follows the stored one ([`may_replace`]).
    pub fn save_now(&self, task: &Task) -> Result<(), StoreError> {
        self.save_events_now(task, &[])
    }

    /// [`save_now`](Self::save_now), and `events` appended to the task's
    /// log under the saved version, under the same lock.
    pub fn save_events_now(&self, task: &Task, events: &[StreamEvent]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        self.save_locked(&mut inner, task)?;
        if !events.is_empty() {
            let version = inner
                .find(&task.id)
                .and_then(|slot| inner.slots[slot as usize].as_ref())
                .map_or(task.revision.version, |t| t.revision.version);
            let log = inner.events.entry(task.id.clone()).or_default();
            log.extend(events.iter().map(|e| (version, e.clone())));
        }
        Ok(())
    }

    /// The events logged for task `id` after `version`, now.
    pub fn events_after_now(&self, id: &str, version: u64) -> Vec<LoggedEvent> {
        let inner = self.lock();
        inner.events.get(id).map_or_else(Vec::new, |log| {
            log.iter().filter(|(v, _)| *v > version).cloned().collect()
        })
    }

    fn save_locked(&self, inner: &mut Inner, task: &Task) -> Result<(), StoreError> {
        let size = task_bytes(task);
        if let Some(slot) = inner.find(&task.id) {
            let stored = inner.slots[slot as usize]
                .as_mut()
                .expect("indexed slots hold a task");
            let version = stored.revision.version;
            if !may_replace(Some(version), task.revision.version) {
                return Err(StoreError::conflict(
                    &task.id,
                    Some(version),
                    task.revision.version,
                ));
            }
            let newly_finished = task.state.is_terminal() && !stored.state.is_terminal();
            // In place, unless a reader holds the stored task: it keeps
            // the version it read.
            match Arc::get_mut(stored) {
                Some(stored) => {
                    stored.clone_from(task);
                    stored.revision.version = version + 1;
                }
                None => {
                    let mut fresh = task.clone();
                    fresh.revision.version = version + 1;
                    *stored = Arc::new(fresh);
                }
            }
            if newly_finished {
                inner.finished.push_back(slot);
            }
            let old = std::mem::replace(&mut inner.sizes[slot as usize], size);
            inner.bytes = inner.bytes - old + size;
            // A task that grew may push the store over its byte cap: the
            // oldest other finished tasks make room.
            while inner.bytes > self.max_bytes {
                match inner.finished.front() {
                    Some(&old) if old != slot => {
                        inner.finished.pop_front();
                        inner.remove(old);
                    }
                    _ => break,
                }
            }
            return Ok(());
        }
        if !may_replace(None, task.revision.version) {
            return Err(StoreError::conflict(&task.id, None, task.revision.version));
        }
        while inner.len >= self.max_tasks || inner.bytes + size > self.max_bytes {
            let Some(old) = inner.finished.pop_front() else {
                return Err(StoreError::new(format!(
                    "the task store is full: {} unfinished tasks, {} bytes",
                    inner.len, inner.bytes
                )));
            };
            inner.remove(old);
        }
        let mut fresh = task.clone();
        fresh.revision.version = 1;
        let boxed = Arc::new(fresh);
        let slot = match inner.free.pop() {
            Some(slot) => {
                inner.slots[slot as usize] = Some(boxed);
                inner.sizes[slot as usize] = size;
                slot
            }
            None => {
                inner.slots.push(Some(boxed));
                inner.sizes.push(size);
                (inner.slots.len() - 1) as u32
            }
        };
        inner.bytes += size;
        let hash = inner.hasher.hash_one(task.id.as_str());
        let Inner {
            index,
            slots,
            hasher,
            ..
        } = &mut *inner;
        let rehash = |&s: &u32| {
            slots[s as usize]
                .as_ref()
                .map_or(0, |t| hasher.hash_one(t.id.as_str()))
        };
        match index.entry(hash, |_| false, rehash) {
            Entry::Vacant(v) => {
                v.insert(slot);
            }
            Entry::Occupied(_) => unreachable!("the eq closure never matches"),
        }
        inner.len += 1;
        if task.state.is_terminal() {
            inner.finished.push_back(slot);
        }
        Ok(())
    }
}

impl<L: Locks> TaskStore for MemoryStore<L> {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.get_now(id)))
    }

    fn get_shared(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Arc<Task>>, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.get_shared_now(id)))
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        std::future::ready(self.save_now(task))
    }

    fn save_with_events(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        std::future::ready(self.save_events_now(task, events))
    }

    fn events_after(
        &self,
        id: &str,
        version: u64,
    ) -> impl Future<Output = Result<Option<Vec<LoggedEvent>>, StoreError>> + MaybeSend {
        std::future::ready(Ok(Some(self.events_after_now(id, version))))
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        std::future::ready(Ok(Some(self.list_now(filter))))
    }

    #[cfg(feature = "push")]
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.lock().push.get(task_id).cloned()))
    }

    /// Kept until the task is evicted; a task not stored keeps none.
    #[cfg(feature = "push")]
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        let mut inner = self.lock();
        if inner.find(task_id).is_some() {
            inner.push.insert(task_id.to_string(), configs.clone());
        }
        std::future::ready(Ok(()))
    }

    #[cfg(feature = "push")]
    fn put_push_config(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.put_push_now(task_id, config, max)))
    }

    #[cfg(feature = "push")]
    fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.delete_push_now(task_id, id)))
    }

    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        std::future::ready(Ok(self.delete_finished_now(before_ms, limit)))
    }
}

impl<L: Locks> MemoryStore<L> {
    /// [`TaskStore::put_push_config`], under the store's lock; a task not
    /// stored keeps none.
    #[cfg(feature = "push")]
    pub fn put_push_now(&self, task_id: &str, config: &serde_json::Value, max: usize) -> bool {
        let mut inner = self.lock();
        if inner.find(task_id).is_none() {
            return true;
        }
        let entry = inner
            .push
            .entry(task_id.to_string())
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if !entry.is_array() {
            *entry = serde_json::Value::Array(Vec::new());
        }
        match entry.as_array_mut() {
            Some(list) => put_push_record(list, config.clone(), max),
            None => true,
        }
    }

    /// Task `task_id`'s stored push-config records, now.
    #[cfg(feature = "push")]
    pub fn get_push_configs_now(&self, task_id: &str) -> Vec<serde_json::Value> {
        push_records(self.lock().push.get(task_id).cloned())
    }

    /// [`TaskStore::delete_push_config`], under the store's lock.
    #[cfg(feature = "push")]
    pub fn delete_push_now(&self, task_id: &str, id: &str) -> bool {
        self.lock()
            .push
            .get_mut(task_id)
            .and_then(serde_json::Value::as_array_mut)
            .is_some_and(|list| delete_push_record(list, id))
    }

    /// Deletes the finished tasks older than `before_ms`
    /// ([`is_expired_finished`]), at most `limit`; how many went.
    pub fn delete_finished_now(&self, before_ms: u64, limit: usize) -> usize {
        let mut inner = self.lock();
        let mut gone = hashbrown::HashSet::new();
        for &slot in &inner.finished {
            if gone.len() >= limit {
                break;
            }
            let old = inner.slots[slot as usize]
                .as_deref()
                .is_some_and(|t| is_expired_finished(t, before_ms));
            if old {
                gone.insert(slot);
            }
        }
        if gone.is_empty() {
            return 0;
        }
        for &slot in &gone {
            inner.remove(slot);
        }
        inner.finished.retain(|s| !gone.contains(s));
        gone.len()
    }
}

/// The store a host serves from: core's bounded [`MemoryStore`], or one of
/// the host's own (`H`: a folder of files, PostgreSQL, a JS object, the
/// component's directory). The one store dispatch of every host: each
/// supplies only its own backends, and the memory store's calls stay
/// ready futures (no allocation on GetTask's hot path). `M` is the memory
/// store: [`MemoryStore`], or a host's narrower view of it (the npm
/// package keeps no event log in memory, for its size).
pub enum HostStore<M, H> {
    Memory(M),
    Host(H),
}

impl<M, H> HostStore<M, H> {
    /// The host's store, `None` for the memory store.
    pub fn host(&self) -> Option<&H> {
        match self {
            HostStore::Memory(_) => None,
            HostStore::Host(h) => Some(h),
        }
    }
}

/// One call on whichever store `$s` is, as a future of one type.
macro_rules! dispatch {
    ($s:expr, $store:ident => $call:expr) => {
        match $s {
            HostStore::Memory($store) => Either::Left($call),
            HostStore::Host($store) => Either::Right($call),
        }
    };
}

impl<M: TaskStore, H: TaskStore> TaskStore for HostStore<M, H> {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        dispatch!(self, s => s.get(id))
    }

    fn get_shared(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Arc<Task>>, StoreError>> + MaybeSend {
        dispatch!(self, s => s.get_shared(id))
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        dispatch!(self, s => s.save(task))
    }

    fn save_with_events(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        dispatch!(self, s => s.save_with_events(task, events))
    }

    fn events_after(
        &self,
        id: &str,
        version: u64,
    ) -> impl Future<Output = Result<Option<Vec<LoggedEvent>>, StoreError>> + MaybeSend {
        dispatch!(self, s => s.events_after(id, version))
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        dispatch!(self, s => s.list(filter))
    }

    fn list_page(
        &self,
        filter: &TaskFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<(Vec<Task>, usize)>, StoreError>> + MaybeSend {
        dispatch!(self, s => s.list_page(filter, after, limit))
    }

    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>, StoreError>> + MaybeSend {
        dispatch!(self, s => s.expired(now_ms, limit))
    }

    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        dispatch!(self, s => s.get_push_configs(task_id))
    }

    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        dispatch!(self, s => s.save_push_configs(task_id, configs))
    }

    fn put_push_config(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        dispatch!(self, s => s.put_push_config(task_id, config, max))
    }

    fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        dispatch!(self, s => s.delete_push_config(task_id, id))
    }

    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        dispatch!(self, s => s.delete_finished(before_ms, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::task::TaskState;
    use crate::testing::{block_on, TestLocks};
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn task(id: &str, state: TaskState) -> Task {
        Task {
            id: id.into(),
            context_id: "c".into(),
            state,
            status_message: None,
            updated_ms: None,
            artifacts: vec![],
            history: vec![],
            dialect: crate::model::task::Shape::V03,
            owner: None,
            trace: None,
            revision: Default::default(),
        }
    }

    /// A host's own store that keeps tasks and nothing else (no log, no list).
    #[derive(Default)]
    struct Plain(std::sync::Mutex<Vec<Task>>);

    impl TaskStore for Plain {
        async fn get(&self, id: &str) -> Result<Option<Task>, StoreError> {
            let kept = self.0.lock().expect("lock");
            Ok(kept.iter().find(|t| t.id == id).cloned())
        }
        async fn save(&self, task: &Task) -> Result<(), StoreError> {
            let mut kept = self.0.lock().expect("lock");
            kept.retain(|t| t.id != task.id);
            kept.push(task.clone());
            Ok(())
        }
    }

    /// The one store dispatch: each call goes to the store the host chose,
    /// and what that store does not do (log, list) keeps the contract's
    /// defaults; the memory store keeps its own (log, list, CAS).
    #[test]
    fn the_host_store_dispatch_calls_the_chosen_store_and_keeps_its_abilities() {
        let host: HostStore<MemoryStore<TestLocks>, Plain> = HostStore::Host(Plain::default());
        let memory: HostStore<MemoryStore<TestLocks>, Plain> =
            HostStore::Memory(MemoryStore::new(8));
        let mut t = task("t", TaskState::Working);
        t.revision.version = 1;
        for store in [&host, &memory] {
            block_on(store.save_with_events(&t, &[])).expect("save");
            assert_eq!(block_on(store.get("t")).expect("get"), Some(t.clone()));
        }
        assert_eq!(
            host.host().map(|p| p.0.lock().expect("lock").len()),
            Some(1)
        );
        assert!(memory.host().is_none());
        assert_eq!(block_on(host.list(&TaskFilter::default())), Ok(None));
        assert_eq!(block_on(host.events_after("t", 0)), Ok(None));
        let listed = block_on(memory.list(&TaskFilter::default())).expect("list");
        assert_eq!(listed.map(|l| l.len()), Some(1));
        assert_eq!(block_on(memory.events_after("t", 0)), Ok(Some(vec![])));
        let refused = block_on(memory.save(&t)).expect_err("version 1 again");
        assert!(refused.is_conflict());
    }

    /// A shared read is the stored task itself, not a copy; a save while a
    /// reader holds it leaves the reader's version as it was; the default
    /// of a store without its own shared read wraps what `get` reads.
    #[test]
    fn shared_reads_are_the_stored_task_and_keep_their_version_across_saves() {
        let memory = MemoryStore::<TestLocks>::new(8);
        let mut t = task("t", TaskState::Working);
        memory.save_now(&t).expect("saved");
        let held = memory.get_shared_now("t").expect("stored");
        assert!(Arc::ptr_eq(
            &held,
            &memory.get_shared_now("t").expect("stored")
        ));
        t.state = TaskState::Completed;
        t.revision.version = 2;
        memory.save_now(&t).expect("saved over a held read");
        assert_eq!((held.state, held.revision.version), (TaskState::Working, 1));
        let now = memory.get_shared_now("t").expect("stored");
        assert_eq!((now.state, now.revision.version), (TaskState::Completed, 2));
        drop((held, now));
        // Nobody holds it: saved in place, the same allocation.
        let before = Arc::as_ptr(&memory.get_shared_now("t").expect("stored"));
        t.revision.version = 3;
        memory.save_now(&t).expect("saved");
        assert_eq!(
            Arc::as_ptr(&memory.get_shared_now("t").expect("stored")),
            before
        );
        let plain = Plain::default();
        block_on(plain.save(&t)).expect("saved");
        let got = block_on(plain.get_shared("t"))
            .expect("read")
            .expect("stored");
        assert_eq!(got.state, TaskState::Completed);
        assert_eq!(block_on(plain.get_shared("u")), Ok(None));
    }

    #[test]
    fn evicts_the_oldest_finished_tasks_first() {
        let store = MemoryStore::<TestLocks>::new(2);
        block_on(store.save(&task("a", TaskState::Completed))).expect("a");
        block_on(store.save(&task("b", TaskState::Working))).expect("b");
        block_on(store.save(&task("c", TaskState::Submitted))).expect("c evicts a");
        assert_eq!(block_on(store.get("a")), Ok(None));
        assert!(block_on(store.get("b")).expect("get").is_some());
        assert!(block_on(store.get("c")).expect("get").is_some());
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn never_evicts_unfinished_tasks() {
        let store = MemoryStore::<TestLocks>::new(2);
        block_on(store.save(&task("a", TaskState::Working))).expect("a");
        block_on(store.save(&task("b", TaskState::Working))).expect("b");
        let full = block_on(store.save(&task("c", TaskState::Submitted)));
        assert!(full.is_err());
        // Updating a stored task always works.
        block_on(store.save(&task("a", TaskState::Completed))).expect("update a");
        block_on(store.save(&task("c", TaskState::Submitted))).expect("now a can go");
        assert_eq!(block_on(store.get("a")), Ok(None));
    }

    #[test]
    fn updates_replace_and_finishing_twice_queues_once() {
        let store = MemoryStore::<TestLocks>::new(3);
        block_on(store.save(&task("a", TaskState::Submitted))).expect("a");
        block_on(store.save(&task("a", TaskState::Completed))).expect("a done");
        block_on(store.save(&task("a", TaskState::Completed))).expect("a again");
        assert_eq!(
            block_on(store.get("a")).expect("get").map(|t| t.state),
            Some(TaskState::Completed)
        );
        assert_eq!(store.lock().finished.len(), 1);
    }

    fn big(id: &str, state: TaskState, kib: usize) -> Task {
        let mut t = task(id, state);
        t.artifacts.push(crate::model::task::Artifact {
            artifact_id: "a".into(),
            parts: vec!["x".repeat(kib * 1024).into()],
        });
        t
    }

    /// 200 finished tasks of 1 MiB each: the default store keeps its byte
    /// cap (64 MiB), dropping the oldest, instead of all 200 MiB.
    #[test]
    fn the_default_store_is_bounded_by_bytes_evicting_the_oldest_finished() {
        let store = MemoryStore::<TestLocks>::default();
        for i in 0..200 {
            block_on(store.save(&big(&format!("t{i}"), TaskState::Completed, 1024))).expect("save");
        }
        let kept = (0..200)
            .filter(|i| store.get_now(&format!("t{i}")).is_some())
            .count();
        assert!(kept < 70, "kept {kept} MiB-sized tasks");
        assert!(store.get_now("t0").is_none(), "the oldest went first");
        assert!(store.get_now("t199").is_some(), "the newest stays");
        assert!(store.bytes() <= DEFAULT_MAX_BYTES);
    }

    #[test]
    fn the_byte_cap_never_drops_unfinished_tasks_and_updates_always_land() {
        let store = MemoryStore::<TestLocks>::with_limits(100, 3 * 1024 * 1024);
        block_on(store.save(&big("a", TaskState::Working, 1024))).expect("a");
        block_on(store.save(&big("b", TaskState::Completed, 1024))).expect("b");
        block_on(store.save(&big("c", TaskState::Working, 1024))).expect("c evicts b");
        assert!(store.get_now("b").is_none());
        let full = block_on(store.save(&big("d", TaskState::Submitted, 1024)));
        assert!(full.is_err(), "only unfinished tasks are left");
        // A running task grows past the cap: its update is still taken.
        block_on(store.save(&big("a", TaskState::Completed, 2048))).expect("a grows");
        assert_eq!(
            store.get_now("a").map(|t| t.state),
            Some(TaskState::Completed)
        );
        block_on(store.save(&big("d", TaskState::Submitted, 1))).expect("a makes room");
        assert!(store.get_now("a").is_none());
        assert!(store.bytes() <= 3 * 1024 * 1024);
    }

    #[test]
    fn slots_are_reused_and_lookups_stay_right_under_churn() {
        let store = MemoryStore::<TestLocks>::new(50);
        for i in 0..1_000 {
            block_on(store.save(&task(&format!("t{i}"), TaskState::Completed))).expect("save");
        }
        assert_eq!(store.len(), 50);
        assert!(store.lock().slots.len() <= 50, "evicted slots were reused");
        for i in 0..950 {
            assert_eq!(store.get_now(&format!("t{i}")), None, "t{i} was evicted");
        }
        for i in 950..1_000 {
            assert_eq!(
                store.get_now(&format!("t{i}")).map(|t| t.id),
                Some(format!("t{i}"))
            );
        }
    }
}
