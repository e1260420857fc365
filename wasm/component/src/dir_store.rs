//! The agent component's directory store (`TOOLNEXUS_STORE=file:DIR`, a
//! preopened folder): one JSON file per task, shared by the instances a
//! wasi:http host starts per request, on core's store contract.
//!
//! - **Id check:** file names are sanitized ids, so two ids may share one;
//!   a file holding another task is not this one (read: absent; save:
//!   refused).
//! - **Compare-and-swap:** each save takes the task's lock file
//!   (`.<name>.lock`, created exclusively: instances may run at once), reads
//!   the stored version and writes only over the one before
//!   ([`may_replace`]), else [`StoreError::conflict`]. A lock left by an
//!   instance that died mid-save is taken over once it is
//!   [`STALE_LOCK_MS`] old.
//! - **Recovery through leases:** tasks are stored with their revision and
//!   lease; a task whose instance ended before it did is failed as
//!   interrupted by the server that next reads it (or by
//!   [`A2aServer::recover_expired`](toolnexus_core::server::A2aServer::recover_expired),
//!   through [`expired`](TaskStore::expired)).
//! - **List, push configs, retention:** ListTasks reads the folder; each
//!   task's webhooks are one `<name>.push` file changed under the task's
//!   lock; `delete_finished` removes old terminal tasks with their configs.
//!
//! No event log: subscribers compare versions (core's rule for stores that
//! keep none).

use crate::wasi_host::{new_id, now_ms, sleep_until};
use std::future::Future;
use std::path::{Path, PathBuf};
use toolnexus_core::server::{
    delete_push_record, may_replace, push_records, put_push_record, StoreError, TaskFilter,
    TaskStore,
};
use toolnexus_core::{sanitize, MaybeSend, Task};

/// A lock file this old belongs to an instance that died while holding it.
pub const STALE_LOCK_MS: u64 = 10_000;
/// How many times a save tries the lock (1 ms apart) before it gives up.
const LOCK_TRIES: u32 = 5_000;
/// The longest file name written (most file systems allow 255 bytes).
const MAX_FILE_NAME: usize = 255;

/// Tasks as `<dir>/<sanitized id>.json`.
pub struct DirStore {
    dir: PathBuf,
}

/// A task's lock file, removed when dropped.
struct TaskLock(PathBuf);

impl Drop for TaskLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn io_error(what: String, e: std::io::Error) -> StoreError {
    StoreError::with_source(format!("{what}: {e}"), e)
}

impl DirStore {
    /// The store in `dir` (created if missing).
    pub fn open(dir: impl Into<PathBuf>) -> Result<DirStore, String> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot open the task folder {}: {e}", dir.display()))?;
        Ok(DirStore { dir })
    }

    /// The file of task `id` with `ext`; `None` if its name is too long.
    fn path(&self, id: &str, ext: &str) -> Option<PathBuf> {
        let name = format!("{}.{ext}", sanitize(id));
        (name.len() + 6 <= MAX_FILE_NAME).then(|| self.dir.join(name))
    }

    fn task_path(&self, id: &str) -> Result<PathBuf, StoreError> {
        self.path(id, "json").ok_or_else(|| {
            StoreError::new(format!("task id too long to store: {} bytes", id.len()))
        })
    }

    /// Takes task `id`'s lock: bounded, each try 1 ms after the last.
    async fn lock(&self, id: &str) -> Result<TaskLock, StoreError> {
        let path = self.dir.join(format!(".{}.lock", sanitize(id)));
        for _ in 0..LOCK_TRIES {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(TaskLock(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if lock_is_stale(&path) {
                        let _ = std::fs::remove_file(&path);
                        continue;
                    }
                    sleep_until(now_ms() + 1).await;
                }
                Err(e) => return Err(io_error(format!("cannot lock task {id}"), e)),
            }
        }
        Err(StoreError::new(format!("task {id} stayed locked")))
    }

    /// Task `id` as stored: `None` when absent, or when its file holds
    /// another task (ids that sanitize alike).
    fn read(&self, id: &str) -> Result<Option<Task>, StoreError> {
        let Some(path) = self.path(id, "json") else {
            return Ok(None);
        };
        Ok(read_task(&path)?.filter(|t| t.id == id))
    }

    fn write(&self, task: &Task) -> Result<(), StoreError> {
        let body = serde_json::to_vec(&task.stored()).map_err(|e| {
            StoreError::with_source(format!("cannot write task {}: {e}", task.id), e)
        })?;
        write_atomically(&self.task_path(&task.id)?, &body)
            .map_err(|e| io_error(format!("cannot write task {}", task.id), e))
    }

    /// Every task in the folder (unreadable files skipped).
    fn all(&self) -> Result<Vec<Task>, StoreError> {
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| io_error("cannot read the task folder".into(), e))?;
        let mut tasks = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                if let Ok(Some(task)) = read_task(&path) {
                    tasks.push(task);
                }
            }
        }
        Ok(tasks)
    }

    /// Task `task_id`'s push configs: the stored array, if any is its own.
    fn read_push(&self, task_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let Some(path) = self.path(task_id, "push") else {
            return Ok(None);
        };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(io_error(
                    format!("cannot read the webhooks of {task_id}"),
                    e,
                ))
            }
        };
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::with_source(format!("the webhooks of {task_id} are not JSON: {e}"), e)
        })?;
        if v["taskId"].as_str() != Some(task_id) {
            return Ok(None);
        }
        Ok(Some(v["configs"].take()))
    }

    fn write_push(&self, task_id: &str, configs: &serde_json::Value) -> Result<(), StoreError> {
        let path = self
            .path(task_id, "push")
            .ok_or_else(|| StoreError::new("task id too long to store"))?;
        let body = serde_json::json!({"taskId": task_id, "configs": configs}).to_string();
        write_atomically(&path, body.as_bytes())
            .map_err(|e| io_error(format!("cannot write the webhooks of {task_id}"), e))
    }

    /// Reads, changes and writes task `task_id`'s configs under its lock.
    async fn change_push(
        &self,
        task_id: &str,
        change: impl FnOnce(&mut Vec<serde_json::Value>) -> bool,
    ) -> Result<bool, StoreError> {
        let _lock = self.lock(task_id).await?;
        let mut list = push_records(self.read_push(task_id)?);
        if !change(&mut list) {
            return Ok(false);
        }
        self.write_push(task_id, &serde_json::Value::Array(list))?;
        Ok(true)
    }
}

fn lock_is_stale(path: &Path) -> bool {
    let modified = std::fs::metadata(path).and_then(|m| m.modified());
    let age = modified
        .ok()
        .and_then(|m| std::time::SystemTime::now().duration_since(m).ok());
    age.is_some_and(|a| a.as_millis() as u64 >= STALE_LOCK_MS)
}

fn read_task(path: &Path) -> Result<Option<Task>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("cannot read a task".into(), e)),
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| StoreError::with_source(format!("a task file is not JSON: {e}"), e))?;
    // The stored form: the task, its owner and its revision (version, lease).
    Task::from_stored(&value)
        .map(Some)
        .ok_or_else(|| StoreError::new("a task file holds no task"))
}

/// A temp file beside `path`, renamed into place: readers see the old file
/// or the new one, never a torn one.
fn write_atomically(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", new_id()));
    std::fs::write(&tmp, body)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

impl TaskStore for DirStore {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        std::future::ready(self.read(id))
    }

    async fn save(&self, task: &Task) -> Result<(), StoreError> {
        let _lock = self.lock(&task.id).await?;
        let path = self.task_path(&task.id)?;
        let stored = read_task(&path)?;
        if let Some(other) = stored.as_ref().filter(|t| t.id != task.id) {
            return Err(StoreError::new(format!(
                "task {} cannot be stored: its file holds task {}",
                task.id, other.id
            )));
        }
        let version = stored.map(|t| t.revision.version);
        if !may_replace(version, task.revision.version) {
            return Err(StoreError::conflict(
                &task.id,
                version,
                task.revision.version,
            ));
        }
        self.write(task)
    }

    async fn list(&self, filter: &TaskFilter) -> Result<Option<Vec<Task>>, StoreError> {
        let mut tasks = self.all()?;
        tasks.retain(|t| filter.matches(t));
        Ok(Some(tasks))
    }

    async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Task>, StoreError> {
        let mut tasks = self.all()?;
        tasks.retain(|t| {
            t.state.is_active()
                && t.revision
                    .lease
                    .as_ref()
                    .is_none_or(|l| l.until_ms < now_ms)
        });
        tasks.truncate(limit);
        Ok(tasks)
    }

    async fn get_push_configs(
        &self,
        task_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.read_push(task_id)
    }

    async fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let _lock = self.lock(task_id).await?;
        self.write_push(task_id, configs)
    }

    async fn put_push_config(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> Result<bool, StoreError> {
        self.change_push(task_id, |list| put_push_record(list, config.clone(), max))
            .await
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> Result<bool, StoreError> {
        self.change_push(task_id, |list| delete_push_record(list, id))
            .await
    }

    async fn delete_finished(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for task in self.all()? {
            if deleted == limit {
                break;
            }
            if !toolnexus_core::server::is_expired_finished(&task, before_ms) {
                continue;
            }
            let _lock = self.lock(&task.id).await?;
            if let Some(path) = self.path(&task.id, "json") {
                if std::fs::remove_file(path).is_ok() {
                    deleted += 1;
                }
            }
            if let Some(path) = self.path(&task.id, "push") {
                let _ = std::fs::remove_file(path);
            }
        }
        Ok(deleted)
    }
}
