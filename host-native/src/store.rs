//! Task stores of the native host: memory, or one JSON file per task.

use crate::serve::unix_ms;
use crate::MemoryStore;
use futures_util::future::BoxFuture;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use toolnexus_core::server::{
    event_from_json, event_json, mark_interrupted, HostStore, LoggedEvent, StoreError, TaskFilter,
    TaskStore,
};
use toolnexus_core::{sanitize, MaybeSend};
use toolnexus_core::{StreamEvent, Task};

/// Tasks as `<dir>/<sanitized id>.json`, each written to a temp file,
/// fsynced and renamed into place, so a crash never leaves a torn file.
pub struct FileStore {
    dir: PathBuf,
    /// Held around each compare-and-swap: in this process (the mutex) and
    /// against other processes on the same folder (an advisory lock on
    /// `<dir>/.lock`).
    cas: std::sync::Arc<std::sync::Mutex<std::fs::File>>,
}

/// The status text a task left unfinished by a crash is failed with.
pub use toolnexus_core::server::INTERRUPTED;

/// An exclusive `flock(2)` on the store's lock file, released when dropped
/// (elsewhere than unix: none; the in-process mutex alone orders saves).
struct FileLock<'a>(#[allow(dead_code)] &'a std::fs::File);

impl<'a> FileLock<'a> {
    fn take(file: &'a std::fs::File) -> Result<FileLock<'a>, StoreError> {
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: flock on a descriptor this File owns; no memory is shared.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                let e = std::io::Error::last_os_error();
                return Err(StoreError::with_source(
                    format!("cannot lock the store: {e}"),
                    e,
                ));
            }
        }
        Ok(FileLock(file))
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: as in `take`.
            unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}

type PageFuture = BoxFuture<'static, Result<Option<(Vec<Task>, usize)>, StoreError>>;

/// The file, inside the store's folder, locked around each save.
pub const LOCK_FILE: &str = ".lock";

/// The folder, inside the store's, that unreadable task files are moved to.
pub const QUARANTINE: &str = "quarantine";

impl FileStore {
    /// Opens (creating) `dir`. Tasks a crash left `submitted` or `working` are
    /// marked `failed` with [`INTERRUPTED`]; their ids are returned. A task
    /// whose lease ([`toolnexus_core::Revision::lease`]) still holds is another
    /// live process's and is left alone: it is failed only once its lease
    /// runs out (by whoever reads it then).
    ///
    /// One bad file never stops the store from opening: a `.json` entry that
    /// is not a regular file (a folder, a FIFO, a socket, a symlink) is
    /// skipped without being opened, and a file that is not a readable task
    /// (empty, truncated, not JSON, not a task) is moved to
    /// `<dir>/quarantine/`; each is logged as a warning.
    pub fn open(dir: impl Into<PathBuf>) -> Result<(FileStore, Vec<String>), StoreError> {
        let dir = dir.into();
        let err = |what: &str, e: std::io::Error| {
            StoreError::with_source(format!("{what} {}: {e}", dir.display()), e)
        };
        std::fs::create_dir_all(&dir).map_err(|e| err("cannot create the store folder", e))?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(|e| err("cannot open the lock file of", e))?;
        let store = FileStore {
            dir: dir.clone(),
            cas: std::sync::Arc::new(std::sync::Mutex::new(lock)),
        };
        let now = unix_ms();
        let mut recovered = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| err("cannot read the store folder", e))? {
            let entry = entry.map_err(|e| err("cannot read the store folder", e))?;
            let path = entry.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name.contains(".json.tmp-") {
                // A write that never reached its rename: the old file (if any) is intact.
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            // The entry's own type, symlinks not followed: opening a FIFO
            // would block startup, and a folder cannot be read as a task.
            let regular = entry.file_type().is_ok_and(|t| t.is_file());
            if !regular {
                tracing::warn!("task store: skipped {name}: not a regular file (left where it is)");
                continue;
            }
            let mut task = match read_task(&path) {
                Ok(Some(task)) => task,
                Ok(None) => continue,
                Err(e) => {
                    quarantine(&dir, &path, name, &e);
                    continue;
                }
            };
            // Stores from before the index, or a marker a crash lost: every
            // task read here is indexed again.
            index_task(&dir, &task)?;
            let leased = task
                .revision
                .lease
                .as_ref()
                .is_some_and(|l| now.is_some_and(|now| l.until_ms >= now));
            if leased {
                continue;
            }
            let held = task.revision.lease.take();
            if mark_interrupted(&mut task, now) {
                task.revision.version += 1;
                write_atomically(&store.path(&task.id), &task)?;
                recovered.push(task.id);
            } else {
                task.revision.lease = held;
            }
        }
        Ok((store, recovered))
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(file_name(id))
    }
}

/// Moves a task file that cannot be read out of the way, with a warning.
fn quarantine(dir: &Path, path: &Path, name: &str, why: &StoreError) {
    let folder = dir.join(QUARANTINE);
    let moved =
        std::fs::create_dir_all(&folder).and_then(|()| std::fs::rename(path, folder.join(name)));
    match moved {
        Ok(()) => tracing::warn!(
            "task store: moved {name} to {QUARANTINE}/ ({why}); the server starts without it"
        ),
        Err(e) => tracing::warn!(
            "task store: skipped {name} ({why}); it could not be moved to {QUARANTINE}/: {e}"
        ),
    }
}

/// The longest file name the store writes (most file systems allow 255 bytes).
const MAX_FILE_NAME: usize = 255;

/// The file a task lives in.
fn file_name(id: &str) -> String {
    format!("{}.json", sanitize(id))
}

/// A task file's name, for messages: callers may see them, so never the
/// store's own path.
fn shown(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The JSON in `path`; `None` when there is no such file. Unreadable or
/// invalid JSON is an error naming the file (relative to the store).
fn read_json(path: &Path) -> Result<Option<serde_json::Value>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(StoreError::with_source(
                format!("cannot read {}: {e}", shown(path)),
                e,
            ))
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::with_source(format!("{} is not valid JSON: {e}", shown(path)), e))
}

fn read_task(path: &Path) -> Result<Option<Task>, StoreError> {
    let Some(value) = read_json(path)? else {
        return Ok(None);
    };
    // The stored form: the task's wire shape and its owner (none in files
    // from before owners).
    Task::from_stored(&value)
        .map(Some)
        .ok_or_else(|| StoreError::new(format!("{} is not a task", shown(path))))
}

fn write_atomically(path: &Path, task: &Task) -> Result<(), StoreError> {
    let body = serde_json::to_vec(&task.stored())
        .map_err(|e| StoreError::with_source(format!("cannot write {}: {e}", shown(path)), e))?;
    write_bytes_atomically(path, &body)
}

/// Writes `body` to a temp file beside `path`, fsyncs it and renames it
/// into place (then fsyncs the folder), so a crash leaves the old file or
/// the new one, never a torn one.
fn write_bytes_atomically(path: &Path, body: &[u8]) -> Result<(), StoreError> {
    let err = |what: &str, e: std::io::Error| {
        StoreError::with_source(format!("{what} {}: {e}", shown(path)), e)
    };
    let tmp = path.with_extension(format!("json.tmp-{}", uuid::Uuid::new_v4()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // Make the rename itself durable.
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| err("cannot write", e))
}

/// The folder, inside the store's, that indexes the tasks by context:
/// `contexts/<sanitized context id>/<sanitized task id>`, one empty marker
/// file per task, so a context's tasks are found without reading every task
/// file. Rebuilt by [`FileStore::open`] from the task files; a marker whose
/// task is gone (or is another context's) is skipped when listed.
pub const CONTEXTS: &str = "contexts";

/// The index folder of a context; `None` when its id cannot name a folder
/// (empty, or too long): that context is listed by reading every task.
fn context_dir(dir: &Path, context_id: &str) -> Option<PathBuf> {
    let name = sanitize(context_id);
    (!name.is_empty() && name.len() <= MAX_FILE_NAME).then(|| dir.join(CONTEXTS).join(name))
}

/// Makes sure `task` is indexed under its context. Done before its task
/// file is written, so a crash leaves at worst a marker without a task
/// (skipped when listed); a lost marker is made again on the next open.
fn index_task(dir: &Path, task: &Task) -> Result<(), StoreError> {
    let Some(folder) = context_dir(dir, &task.context_id) else {
        return Ok(());
    };
    let marker = folder.join(sanitize(&task.id));
    if marker.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&folder)
        .and_then(|()| std::fs::File::create(&marker).map(drop))
        .map_err(|e| {
            StoreError::with_source(format!("cannot index {} by context: {e}", task.id), e)
        })
}

/// The tasks a context's index names that pass `filter`; `None` when the
/// context has no index folder name (then every task is read).
fn list_context(dir: &Path, filter: &TaskFilter) -> Option<Result<Vec<Task>, StoreError>> {
    let folder = context_dir(dir, filter.context_id.as_deref()?)?;
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Ok(Vec::new())),
        Err(e) => {
            return Some(Err(StoreError::with_source(
                format!("cannot read a context index: {e}"),
                e,
            )))
        }
    };
    let mut tasks = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let path = dir.join(format!("{name}.json"));
        // Only a regular file is read (never a FIFO or a link put there).
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if let Ok(Some(task)) = read_task(&path) {
            if filter.matches(&task) {
                tasks.push(task);
            }
        }
    }
    Some(Ok(tasks))
}

/// Every readable task file in `dir` that passes `filter`; files that are
/// not tasks (or vanish while read) are skipped. A context's tasks are
/// found through its index ([`CONTEXTS`]).
fn list_dir(dir: &Path, filter: &TaskFilter) -> Result<Vec<Task>, StoreError> {
    if let Some(listed) = list_context(dir, filter) {
        return listed;
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| StoreError::with_source(format!("cannot read the store folder: {e}"), e))?;
    let mut tasks = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_task = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".json"));
        if !is_task || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Ok(Some(task)) = read_task(&path) {
            if filter.matches(&task) {
                tasks.push(task);
            }
        }
    }
    Ok(tasks)
}

/// The task files last written before `before_ms` (Unix ms): the only ones
/// a task that finished before then can be in (its terminal save was its
/// last write), found by their metadata alone, so a sweep with nothing to
/// delete reads no task.
fn old_task_files(dir: &Path, before_ms: u64) -> Result<Vec<PathBuf>, StoreError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| StoreError::with_source(format!("cannot read the store folder: {e}"), e))?;
    let cut = std::time::UNIX_EPOCH + std::time::Duration::from_millis(before_ms);
    Ok(entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json")))
        .filter(|e| {
            e.metadata()
                .is_ok_and(|m| m.is_file() && m.modified().is_ok_and(|t| t < cut))
        })
        .map(|e| e.path())
        .collect())
}

/// The folder, inside the store's, of the tasks' push-notification configs
/// (`<sanitized task id>.json`: `{"taskId", "configs"}`).
pub const PUSH_CONFIGS: &str = "push";

/// The configs stored for `task_id` in `path`; `None` when there are none
/// (or the file is another task's: ids share sanitized names). A damaged
/// file is an error, not a panic.
fn read_push_configs(path: &Path, task_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
    let Some(mut value) = read_json(path)? else {
        return Ok(None);
    };
    if value.get("taskId").and_then(|t| t.as_str()) != Some(task_id) {
        return Ok(None);
    }
    Ok(value.get_mut("configs").map(serde_json::Value::take))
}

impl FileStore {
    fn push_path(&self, task_id: &str) -> PathBuf {
        self.dir.join(PUSH_CONFIGS).join(file_name(task_id))
    }

    /// Reads a task's push-notification configs on the blocking pool.
    pub fn get_push_owned(
        &self,
        task_id: &str,
    ) -> BoxFuture<'static, Result<Option<serde_json::Value>, StoreError>> {
        if file_name(task_id).len() > MAX_FILE_NAME {
            return Box::pin(std::future::ready(Ok(None)));
        }
        let (path, id) = (self.push_path(task_id), task_id.to_string());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || read_push_configs(&path, &id))
                .await
                .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }

    /// Writes a task's push-notification configs on the blocking pool,
    /// atomically, beside its task file.
    pub fn save_push_owned(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let path = self.push_path(task_id);
        let body = serde_json::json!({"taskId": task_id, "configs": configs}).to_string();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                if let Some(folder) = path.parent() {
                    std::fs::create_dir_all(folder).map_err(|e| {
                        StoreError::with_source(
                            format!("cannot create the {PUSH_CONFIGS} folder: {e}"),
                            e,
                        )
                    })?;
                }
                write_bytes_atomically(&path, body.as_bytes())
            })
            .await
            .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }

    /// Puts one push config into a task's file (or deletes one, `put`
    /// `None` and `delete` its id) under the store's lock, so replicas on
    /// the same folder never lose each other's changes. `Ok(false)`: the
    /// task holds `max` others already (put), or had no such config (delete).
    fn change_push_owned(
        &self,
        task_id: &str,
        put: Option<(serde_json::Value, usize)>,
        delete: Option<String>,
    ) -> BoxFuture<'static, Result<bool, StoreError>> {
        if file_name(task_id).len() > MAX_FILE_NAME {
            return Box::pin(std::future::ready(Ok(false)));
        }
        let (path, id, cas) = (
            self.push_path(task_id),
            task_id.to_string(),
            self.cas.clone(),
        );
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let file = cas.lock().unwrap_or_else(|e| e.into_inner());
                let _held = FileLock::take(&file)?;
                let mut list = toolnexus_core::server::push_records(read_push_configs(&path, &id)?);
                let changed = match (put, &delete) {
                    (Some((record, max)), _) => {
                        toolnexus_core::server::put_push_record(&mut list, record, max)
                    }
                    (None, Some(config)) => {
                        toolnexus_core::server::delete_push_record(&mut list, config)
                    }
                    (None, None) => false,
                };
                if !changed {
                    return Ok(false);
                }
                if let Some(folder) = path.parent() {
                    std::fs::create_dir_all(folder).map_err(|e| {
                        StoreError::with_source(
                            format!("cannot create the {PUSH_CONFIGS} folder: {e}"),
                            e,
                        )
                    })?;
                }
                let body = serde_json::json!({"taskId": id, "configs": list}).to_string();
                write_bytes_atomically(&path, body.as_bytes())?;
                Ok(true)
            })
            .await
            .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }

    /// Deletes the finished tasks whose status changed before `before_ms`
    /// (with their push configs and context markers), at most `limit`,
    /// each under the store's lock and read again first (a task another
    /// process changed meanwhile stays).
    pub fn delete_finished_owned(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> BoxFuture<'static, Result<usize, StoreError>> {
        let (dir, cas) = (self.dir.clone(), self.cas.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let old = old_task_files(&dir, before_ms)?
                    .into_iter()
                    .filter_map(|path| read_task(&path).ok().flatten())
                    .filter(|t| toolnexus_core::server::is_expired_finished(t, before_ms))
                    .take(limit)
                    .collect::<Vec<_>>();
                let mut gone = 0;
                for task in old {
                    let file = cas.lock().unwrap_or_else(|e| e.into_inner());
                    let _held = FileLock::take(&file)?;
                    let path = dir.join(file_name(&task.id));
                    let still = read_task(&path)
                        .ok()
                        .flatten()
                        .filter(|t| t.id == task.id)
                        .is_some_and(|t| {
                            toolnexus_core::server::is_expired_finished(&t, before_ms)
                        });
                    if !still {
                        continue;
                    }
                    std::fs::remove_file(&path).map_err(|e| {
                        StoreError::with_source(format!("cannot delete {}: {e}", shown(&path)), e)
                    })?;
                    let _ = std::fs::remove_file(dir.join(PUSH_CONFIGS).join(file_name(&task.id)));
                    let _ = std::fs::remove_file(events_path(&dir, &task.id));
                    if let Some(folder) = context_dir(&dir, &task.context_id) {
                        let _ = std::fs::remove_file(folder.join(sanitize(&task.id)));
                        // Gone once its last task is (fails while others remain).
                        let _ = std::fs::remove_dir(&folder);
                    }
                    gone += 1;
                }
                Ok(gone)
            })
            .await
            .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }

    /// The tasks that pass `filter`, read on the blocking pool.
    pub fn list_owned(
        &self,
        filter: &TaskFilter,
    ) -> BoxFuture<'static, Result<Vec<Task>, StoreError>> {
        let (dir, filter) = (self.dir.clone(), filter.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || list_dir(&dir, &filter))
                .await
                .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }

    /// Reads a task on the blocking pool; the future borrows nothing. An id
    /// too long for a file name names no stored task.
    pub fn get_owned(&self, id: &str) -> BoxFuture<'static, Result<Option<Task>, StoreError>> {
        if file_name(id).len() > MAX_FILE_NAME {
            return Box::pin(std::future::ready(Ok(None)));
        }
        let path = self.path(id);
        let id = id.to_string();
        Box::pin(async move {
            let read = tokio::task::spawn_blocking(move || read_task(&path))
                .await
                .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))??;
            // File names are sanitised ids: `a.b` and `a_b` share one. Only
            // the task that really has this id answers.
            Ok(read.filter(|t| t.id == id))
        })
    }

    /// Writes a task on the blocking pool, if its version follows the
    /// stored one ([`toolnexus_core::server::may_replace`]; a conflict
    /// otherwise); the future borrows nothing.
    pub fn save_owned(&self, task: &Task) -> BoxFuture<'static, Result<(), StoreError>> {
        self.save_events_owned(task, &[])
    }

    /// [`save_owned`](Self::save_owned), and `events` appended to the
    /// task's log ([`EVENTS`]) under the same lock, before the task is
    /// written: a crash in between leaves a group of events for a version
    /// never stored, which readers skip ([`read_events`]) and the next
    /// save of that version replaces.
    pub fn save_events_owned(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let path = self.path(&task.id);
        let dir = self.dir.clone();
        let mut task = task.clone();
        let cas = self.cas.clone();
        let events: Vec<serde_json::Value> = events.iter().map(event_json).collect();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                // One compare-and-swap at a time, in this process and others.
                let file = cas.lock().unwrap_or_else(|e| e.into_inner());
                let _held = FileLock::take(&file)?;
                // Held until the write is done (dropped after this value).
                (|| {
                    let stored = read_task(&path)
                        .ok()
                        .flatten()
                        .filter(|t| t.id == task.id)
                        .map(|t| t.revision.version);
                    if !toolnexus_core::server::may_replace(stored, task.revision.version) {
                        return Err(StoreError::conflict(
                            &task.id,
                            stored,
                            task.revision.version,
                        ));
                    }
                    if task.revision.version == 0 {
                        task.revision.version = stored.unwrap_or(0) + 1;
                    }
                    if !events.is_empty() {
                        append_events(&dir, &task.id, task.revision.version, &events)?;
                    }
                    index_task(&dir, &task)?;
                    write_atomically(&path, &task)
                })()
            })
            .await
            .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }

    /// Task `id`'s logged events after `version`, read on the blocking pool.
    pub fn events_after_owned(
        &self,
        id: &str,
        version: u64,
    ) -> BoxFuture<'static, Result<Option<Vec<LoggedEvent>>, StoreError>> {
        if file_name(id).len() > MAX_FILE_NAME {
            return Box::pin(std::future::ready(Ok(Some(Vec::new()))));
        }
        let (dir, path, id) = (self.dir.clone(), self.path(id), id.to_string());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                // The stored version first: events past it are not stored yet.
                let Some(stored) = read_task(&path)?.filter(|t| t.id == id) else {
                    return Ok(Some(Vec::new()));
                };
                let mut events = read_events(&dir, &id)?;
                events.retain(|(v, _)| *v > version && *v <= stored.revision.version);
                Ok(Some(events))
            })
            .await
            .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }
}

/// The folder, inside the store's, of the tasks' event logs
/// (`<sanitized task id>.jsonl`: a line `{"id", "v", "n", "e"}` per event:
/// the task id, the version that logged it, its place in that version's
/// group, the event).
pub const EVENTS: &str = "events";

fn events_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(EVENTS).join(format!("{}.jsonl", sanitize(id)))
}

/// Appends one save's events to the task's log and syncs it.
fn append_events(
    dir: &Path,
    id: &str,
    version: u64,
    events: &[serde_json::Value],
) -> Result<(), StoreError> {
    let path = events_path(dir, id);
    let fail = |e: std::io::Error| {
        StoreError::with_source(format!("cannot log events of {}: {e}", shown(&path)), e)
    };
    std::fs::create_dir_all(dir.join(EVENTS)).map_err(fail)?;
    let mut text = String::new();
    for (n, e) in events.iter().enumerate() {
        let line = serde_json::json!({"id": id, "v": version, "n": n, "e": e});
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.sync_data().map_err(fail)
}

/// Task `id`'s log, in order. A group (`n` = 0) that starts again at a
/// version already logged replaces what was logged from that version on
/// (a save that crashed before its task was written); torn or foreign
/// lines are skipped.
fn read_events(dir: &Path, id: &str) -> Result<Vec<LoggedEvent>, StoreError> {
    let path = events_path(dir, id);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(StoreError::with_source(
                format!("cannot read the events of {}: {e}", shown(&path)),
                e,
            ))
        }
    };
    let mut events: Vec<LoggedEvent> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["id"].as_str() != Some(id) {
            continue;
        }
        let (Some(version), Some(n)) = (v["v"].as_u64(), v["n"].as_u64()) else {
            continue;
        };
        let Some(event) = event_from_json(&v["e"]) else {
            continue;
        };
        if n == 0 {
            events.retain(|(logged, _)| *logged < version);
        }
        events.push((version, event));
    }
    Ok(events)
}

impl TaskStore for FileStore {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        self.get_owned(id)
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        self.save_owned(task)
    }

    fn save_with_events(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        self.save_events_owned(task, events)
    }

    fn events_after(
        &self,
        id: &str,
        version: u64,
    ) -> impl Future<Output = Result<Option<Vec<LoggedEvent>>, StoreError>> + MaybeSend {
        self.events_after_owned(id, version)
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        let listed = self.list_owned(filter);
        async move { listed.await.map(Some) }
    }

    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        self.get_push_owned(task_id)
    }

    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        self.save_push_owned(task_id, configs)
    }

    fn put_push_config(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        self.change_push_owned(task_id, Some((config.clone(), max)), None)
    }

    fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        self.change_push_owned(task_id, None, Some(id.to_string()))
    }

    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        self.delete_finished_owned(before_ms, limit)
    }
}

/// A task store as a trait object: what [`StoreConfig::Custom`] takes
/// (your own store, or one that fails on purpose in a test).
pub trait SharedStore: Send + Sync + 'static {
    fn get(&self, id: &str) -> BoxFuture<'static, Result<Option<Task>, StoreError>>;
    /// Must be durable when it resolves `Ok`.
    fn save(&self, task: &Task) -> BoxFuture<'static, Result<(), StoreError>>;
    /// `Ok(None)`: this store cannot list (ListTasks says so).
    fn list(
        &self,
        filter: &TaskFilter,
    ) -> BoxFuture<'static, Result<Option<Vec<Task>>, StoreError>> {
        let _ = filter;
        Box::pin(std::future::ready(Ok(None)))
    }
    /// A task's push-notification configs ([`TaskStore::get_push_configs`]);
    /// the default keeps none.
    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> BoxFuture<'static, Result<Option<serde_json::Value>, StoreError>> {
        let _ = task_id;
        Box::pin(std::future::ready(Ok(None)))
    }
    /// Stores a task's push-notification configs
    /// ([`TaskStore::save_push_configs`]); the default keeps none.
    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let _ = (task_id, configs);
        Box::pin(std::future::ready(Ok(())))
    }
    /// Deletes old finished tasks ([`TaskStore::delete_finished`]); the
    /// default deletes none.
    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> BoxFuture<'static, Result<usize, StoreError>> {
        let _ = (before_ms, limit);
        Box::pin(std::future::ready(Ok(0)))
    }
}

/// Which task store `serve` opens.
#[derive(Clone)]
pub enum StoreConfig {
    /// In memory, bounded by count and bytes (oldest finished tasks dropped first).
    Memory { max_tasks: usize, max_bytes: usize },
    /// One JSON file per task in this folder (survives restarts).
    File(PathBuf),
    /// Yours.
    Custom(std::sync::Arc<dyn SharedStore>),
    /// A PostgreSQL database, by URL (feature `postgres`): replicas of the
    /// agent share it.
    #[cfg(feature = "postgres")]
    Postgres(String),
}

impl Default for StoreConfig {
    /// The memory store with its default caps.
    fn default() -> Self {
        StoreConfig::Memory {
            max_tasks: toolnexus_core::server::DEFAULT_MAX_TASKS,
            max_bytes: toolnexus_core::server::DEFAULT_MAX_BYTES,
        }
    }
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreConfig::Memory {
                max_tasks,
                max_bytes,
            } => write!(
                f,
                "Memory {{ max_tasks: {max_tasks}, max_bytes: {max_bytes} }}"
            ),
            StoreConfig::File(dir) => write!(f, "File({})", dir.display()),
            StoreConfig::Custom(_) => f.write_str("Custom(..)"),
            #[cfg(feature = "postgres")]
            StoreConfig::Postgres(url) => {
                write!(f, "Postgres({})", crate::pg_store::redact(url))
            }
        }
    }
}

impl StoreConfig {
    /// A selector: `"memory"` (or empty), `"file:<dir>"`, or (feature
    /// `postgres`) a `postgres://…` / `postgresql://…` URL, or `"postgres"`
    /// alone for the URL in `DATABASE_URL`; anything else is an error.
    pub fn parse(selector: &str) -> Result<StoreConfig, StoreError> {
        #[cfg(feature = "postgres")]
        {
            let s = selector.trim();
            if s.starts_with("postgres://") || s.starts_with("postgresql://") {
                return Ok(StoreConfig::Postgres(s.to_string()));
            }
            if s == "postgres" || s == "postgresql" {
                return match std::env::var("DATABASE_URL") {
                    Ok(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                        Ok(StoreConfig::Postgres(url))
                    }
                    _ => Err(StoreError::new(
                        "the store \"postgres\" reads its URL from DATABASE_URL, which holds no postgres:// URL",
                    )),
                };
            }
        }
        match selector.trim() {
            "" | "memory" => Ok(StoreConfig::default()),
            s => match s.strip_prefix("file:") {
                Some(dir) if !dir.trim().is_empty() => Ok(StoreConfig::File(dir.trim().into())),
                Some(_) => Err(StoreError::new(
                    "the store selector \"file:\" needs a folder: file:<dir>",
                )),
                None => Err(StoreError::new(format!(
                    "unknown task store {s:?}: use \"memory\", \"file:<dir>\" or postgres://USER@HOST/DB"
                ))),
            },
        }
    }
}

/// The native host's own stores, beside core's memory store: a folder, your
/// [`SharedStore`], or PostgreSQL.
pub enum NativeStore {
    File(FileStore),
    Custom(std::sync::Arc<dyn SharedStore>),
    #[cfg(feature = "postgres")]
    Postgres(crate::pg_store::PgStore),
}

/// The store `serve` runs on: core's one store dispatch
/// ([`HostStore`]) over the memory store and the [`NativeStore`]s.
pub type AnyStore = HostStore<MemoryStore, NativeStore>;

impl From<FileStore> for AnyStore {
    fn from(store: FileStore) -> AnyStore {
        HostStore::Host(NativeStore::File(store))
    }
}

#[cfg(feature = "postgres")]
impl From<crate::pg_store::PgStore> for AnyStore {
    fn from(store: crate::pg_store::PgStore) -> AnyStore {
        HostStore::Host(NativeStore::Postgres(store))
    }
}

/// `"memory"` or `"file:<dir>"`; anything else is an error. For a file
/// store, also the ids of tasks recovered from a crash.
pub fn open(selector: &str) -> Result<(AnyStore, Vec<String>), StoreError> {
    open_config(&StoreConfig::parse(selector)?)
}

/// Opens the store `config` names. For a file store, also the ids of
/// tasks recovered from a crash.
pub fn open_config(config: &StoreConfig) -> Result<(AnyStore, Vec<String>), StoreError> {
    match config {
        StoreConfig::Memory {
            max_tasks,
            max_bytes,
        } => Ok((
            HostStore::Memory(MemoryStore::with_limits(*max_tasks, *max_bytes)),
            Vec::new(),
        )),
        StoreConfig::File(dir) => {
            let (store, recovered) = FileStore::open(dir)?;
            Ok((store.into(), recovered))
        }
        StoreConfig::Custom(store) => Ok((
            HostStore::Host(NativeStore::Custom(store.clone())),
            Vec::new(),
        )),
        #[cfg(feature = "postgres")]
        StoreConfig::Postgres(_) => Err(StoreError::new(
            "a PostgreSQL store is opened with store::open_async",
        )),
    }
}

/// [`open_config`], and a PostgreSQL store too (connected, its schema
/// brought up to date).
pub async fn open_async(config: &StoreConfig) -> Result<(AnyStore, Vec<String>), StoreError> {
    match config {
        #[cfg(feature = "postgres")]
        StoreConfig::Postgres(url) => Ok((
            crate::pg_store::PgStore::connect(url).await?.into(),
            Vec::new(),
        )),
        other => open_config(other),
    }
}

type Boxed<T> = BoxFuture<'static, Result<T, StoreError>>;

fn ready<T: Send + 'static>(value: Result<T, StoreError>) -> Boxed<T> {
    Box::pin(std::future::ready(value))
}

impl TaskStore for NativeStore {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        match self {
            NativeStore::File(f) => f.get_owned(id),
            NativeStore::Custom(c) => c.get(id),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.get_owned(id),
        }
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        match self {
            NativeStore::File(f) => f.save_owned(task),
            NativeStore::Custom(c) => c.save(task),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.save_owned(task),
        }
    }

    fn save_with_events(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        match self {
            NativeStore::File(f) => f.save_events_owned(task, events),
            NativeStore::Custom(c) => c.save(task),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.save_events_owned(task, events),
        }
    }

    fn events_after(
        &self,
        id: &str,
        version: u64,
    ) -> impl Future<Output = Result<Option<Vec<LoggedEvent>>, StoreError>> + MaybeSend {
        match self {
            NativeStore::File(f) => f.events_after_owned(id, version),
            NativeStore::Custom(_) => ready(Ok(None)),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.events_after_owned(id, version),
        }
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        let listed: Boxed<Option<Vec<Task>>> = match self {
            NativeStore::File(f) => {
                let listed = f.list_owned(filter);
                Box::pin(async move { listed.await.map(Some) })
            }
            NativeStore::Custom(c) => c.list(filter),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => {
                let listed = p.list_owned(filter);
                Box::pin(async move { listed.await.map(Some) })
            }
        };
        listed
    }

    fn list_page(
        &self,
        filter: &TaskFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<(Vec<Task>, usize)>, StoreError>> + MaybeSend {
        let paged: PageFuture = match self {
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => {
                let page = p.list_page_owned(filter, after, limit);
                Box::pin(async move { page.await.map(Some) })
            }
            _ => {
                let _ = (filter, after, limit);
                ready(Ok(None))
            }
        };
        paged
    }

    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Task>, StoreError>> + MaybeSend {
        let found: Boxed<Vec<Task>> = match self {
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.expired_owned(now_ms, limit),
            _ => {
                let _ = (now_ms, limit);
                ready(Ok(Vec::new()))
            }
        };
        found
    }

    fn get_push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>, StoreError>> + MaybeSend {
        match self {
            NativeStore::File(f) => f.get_push_owned(task_id),
            NativeStore::Custom(c) => c.get_push_configs(task_id),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.get_push_owned(task_id),
        }
    }

    fn save_push_configs(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        match self {
            NativeStore::File(f) => f.save_push_owned(task_id, configs),
            NativeStore::Custom(c) => c.save_push_configs(task_id, configs),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.save_push_owned(task_id, configs),
        }
    }

    fn put_push_config(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        let put: Boxed<bool> = match self {
            NativeStore::File(f) => f.change_push_owned(task_id, Some((config.clone(), max)), None),
            NativeStore::Custom(c) => {
                // Read and written whole: a custom store is one process's.
                let (c, id, config) = (c.clone(), task_id.to_string(), config.clone());
                Box::pin(async move {
                    let mut list =
                        toolnexus_core::server::push_records(c.get_push_configs(&id).await?);
                    if !toolnexus_core::server::put_push_record(&mut list, config, max) {
                        return Ok(false);
                    }
                    c.save_push_configs(&id, &serde_json::Value::Array(list))
                        .await?;
                    Ok(true)
                })
            }
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.put_push_owned(task_id, config, max),
        };
        put
    }

    fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + MaybeSend {
        let deleted: Boxed<bool> = match self {
            NativeStore::File(f) => f.change_push_owned(task_id, None, Some(id.to_string())),
            NativeStore::Custom(c) => {
                let (c, task, id) = (c.clone(), task_id.to_string(), id.to_string());
                Box::pin(async move {
                    let mut list =
                        toolnexus_core::server::push_records(c.get_push_configs(&task).await?);
                    if !toolnexus_core::server::delete_push_record(&mut list, &id) {
                        return Ok(false);
                    }
                    c.save_push_configs(&task, &serde_json::Value::Array(list))
                        .await?;
                    Ok(true)
                })
            }
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.delete_push_owned(task_id, id),
        };
        deleted
    }

    fn delete_finished(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + MaybeSend {
        match self {
            NativeStore::File(f) => f.delete_finished_owned(before_ms, limit),
            NativeStore::Custom(c) => c.delete_finished(before_ms, limit),
            #[cfg(feature = "postgres")]
            NativeStore::Postgres(p) => p.delete_finished_owned(before_ms, limit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolnexus_core::server::push_records;
    use toolnexus_core::TaskState;

    fn task(id: &str, state: TaskState, updated_ms: u64) -> Task {
        Task {
            id: id.into(),
            context_id: "ctx".into(),
            state,
            status_message: None,
            updated_ms: Some(updated_ms),
            artifacts: vec![],
            history: vec![],
            dialect: toolnexus_core::Shape::V03,
            owner: None,
            trace: None,
            revision: Default::default(),
        }
    }

    /// Two stores on one folder (two processes): a config put through one
    /// is read by the other; the cap and the deletes hold across them.
    #[tokio::test]
    async fn push_configs_are_records_shared_by_stores_on_one_folder() {
        let dir = std::env::temp_dir().join(format!("tnx-push-{}", uuid::Uuid::new_v4()));
        let (a, _) = FileStore::open(&dir).expect("a");
        let (b, _) = FileStore::open(&dir).expect("b");
        a.save(&task("t1", TaskState::Working, 1))
            .await
            .expect("t1");
        let config = |i: usize| serde_json::json!({"id": format!("c{i}"), "url": "https://h/x"});
        for i in 0..3 {
            let store = if i % 2 == 0 { &a } else { &b };
            assert_eq!(store.put_push_config("t1", &config(i), 3).await, Ok(true));
        }
        assert_eq!(
            b.put_push_config("t1", &config(3), 3).await,
            Ok(false),
            "the cap"
        );
        assert_eq!(
            a.put_push_config("t1", &config(1), 3).await,
            Ok(true),
            "a replacement"
        );
        assert_eq!(b.delete_push_config("t1", "c0").await, Ok(true));
        let ids: Vec<String> = push_records(a.get_push_configs("t1").await.expect("read"))
            .iter()
            .map(|c| c["id"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(a.delete_push_config("t1", "c0").await, Ok(false));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn chunk(id: &str, text: &str) -> StreamEvent {
        StreamEvent::Artifact(toolnexus_core::ArtifactUpdate {
            task_id: id.into(),
            context_id: "ctx".into(),
            artifact: toolnexus_core::Artifact {
                artifact_id: "a".into(),
                parts: vec![toolnexus_core::Part::Text(text.into())],
            },
            append: true,
            last_chunk: false,
        })
    }

    fn texts(events: &[LoggedEvent]) -> Vec<(u64, String)> {
        events
            .iter()
            .map(|(v, e)| match e {
                StreamEvent::Artifact(a) => (*v, a.artifact.parts[0].text().unwrap_or("").into()),
                other => (*v, format!("{:?}", other.state())),
            })
            .collect()
    }

    /// The file store's event log: appended under the lock with the task,
    /// read back in order from a version by another store on the folder; a
    /// group logged by a save that crashed before its task was written is
    /// neither read nor kept once the version is saved again; deleted with
    /// the task.
    #[tokio::test]
    async fn events_are_logged_with_their_save_and_replayed_from_a_version() {
        let dir = std::env::temp_dir().join(format!("tnx-events-{}", uuid::Uuid::new_v4()));
        let (a, _) = FileStore::open(&dir).expect("a");
        let (b, _) = FileStore::open(&dir).expect("b");
        let mut t = task("t", TaskState::Working, 1);
        t.revision.version = 1;
        a.save_with_events(&t, &[chunk("t", "one"), chunk("t", "two")])
            .await
            .expect("version 1");
        let refused = a
            .save_with_events(&t, &[chunk("t", "lost")])
            .await
            .expect_err("version 1 twice");
        assert!(refused.is_conflict());
        // A save of version 2 that crashed after logging, before its task.
        append_events(&dir, "t", 2, &[event_json(&chunk("t", "crashed"))]).expect("append");
        assert_eq!(
            texts(&b.events_after("t", 0).await.expect("read").expect("log")),
            [(1, "one".into()), (1, "two".into())],
            "a version not stored is not read"
        );
        let mut done = task("t", TaskState::Completed, 1);
        done.revision.version = 2;
        b.save_with_events(&done, &[chunk("t", "three")])
            .await
            .expect("version 2");
        assert_eq!(
            texts(&a.events_after("t", 1).await.expect("read").expect("log")),
            [(2, "three".to_string())],
            "the crashed group replaced"
        );
        // A cut past now: the file's time is now.
        let cut = unix_ms().expect("clock") + 60_000;
        assert_eq!(a.delete_finished(cut, 10).await, Ok(1));
        assert!(!events_path(&dir, "t").exists(), "deleted with the task");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Retention: only finished tasks older than the cut go, with their
    /// push configs and context markers.
    #[tokio::test]
    async fn old_finished_tasks_are_deleted_with_what_they_had() {
        let dir = std::env::temp_dir().join(format!("tnx-keep-{}", uuid::Uuid::new_v4()));
        let (store, _) = FileStore::open(&dir).expect("open");
        let now = unix_ms().expect("clock");
        let (hour, cut) = (3_600_000, now - 3_600_000);
        for (id, state, at) in [
            ("old", TaskState::Completed, now - 2 * hour),
            ("new", TaskState::Completed, now),
            ("run", TaskState::Working, now - 2 * hour),
        ] {
            store.save(&task(id, state, at)).await.expect("save");
            // Written when it last changed, as a real store's file is.
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at);
            std::fs::File::options()
                .write(true)
                .open(dir.join(format!("{id}.json")))
                .and_then(|f| f.set_modified(when))
                .expect("set the file time");
        }
        let c = serde_json::json!({"id": "c", "url": "https://h/x"});
        assert_eq!(store.put_push_config("old", &c, 10).await, Ok(true));
        assert_eq!(store.delete_finished(cut, 100).await, Ok(1));
        assert_eq!(store.get("old").await, Ok(None));
        assert_eq!(store.get_push_configs("old").await, Ok(None));
        assert!(store.get("new").await.expect("new").is_some());
        assert!(store.get("run").await.expect("run").is_some());
        assert!(!dir.join(CONTEXTS).join("ctx").join("old").exists());
        assert_eq!(store.delete_finished(cut, 100).await, Ok(0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
