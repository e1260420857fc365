//! Task stores of the native host: memory, or one JSON file per task.

use crate::serve::unix_ms;
use crate::MemoryStore;
use futures_util::future::{BoxFuture, Either};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use toolnexus_core::server::{mark_interrupted, StoreError, TaskFilter, TaskStore};
use toolnexus_core::Task;
use toolnexus_core::{sanitize, MaybeSend};

/// Tasks as `<dir>/<sanitized id>.json`, each written to a temp file,
/// fsynced and renamed into place, so a crash never leaves a torn file.
pub struct FileStore {
    dir: PathBuf,
}

/// The status text a task left unfinished by a crash is failed with.
pub use toolnexus_core::server::INTERRUPTED;

/// The folder, inside the store's, that unreadable task files are moved to.
pub const QUARANTINE: &str = "quarantine";

impl FileStore {
    /// Opens (creating) `dir`. Tasks a crash left `submitted` or `working` are
    /// marked `failed` with [`INTERRUPTED`]; their ids are returned.
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
        let store = FileStore { dir: dir.clone() };
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
            if mark_interrupted(&mut task, unix_ms()) {
                write_atomically(&store.path(&task.id), &task)?;
                recovered.push(task.id);
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

fn read_task(path: &Path) -> Result<Option<Task>, StoreError> {
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
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        StoreError::with_source(format!("{} is not valid JSON: {e}", shown(path)), e)
    })?;
    Task::from_value(&value)
        .map(Some)
        .ok_or_else(|| StoreError::new(format!("{} is not a task", shown(path))))
}

fn write_atomically(path: &Path, task: &Task) -> Result<(), StoreError> {
    let err = |what: &str, e: std::io::Error| {
        StoreError::with_source(format!("{what} {}: {e}", shown(path)), e)
    };
    let tmp = path.with_extension(format!("json.tmp-{}", uuid::Uuid::new_v4()));
    let body = task.to_value(task.dialect).to_string();
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body.as_bytes())?;
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

/// Every readable task file in `dir` that passes `filter`; files that are
/// not tasks (or vanish while read) are skipped.
fn list_dir(dir: &Path, filter: &TaskFilter) -> Result<Vec<Task>, StoreError> {
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

impl FileStore {
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

    /// Writes a task on the blocking pool; the future borrows nothing.
    pub fn save_owned(&self, task: &Task) -> BoxFuture<'static, Result<(), StoreError>> {
        let path = self.path(&task.id);
        let task = task.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || write_atomically(&path, &task))
                .await
                .map_err(|e| StoreError::with_source(format!("store thread failed: {e}"), e))?
        })
    }
}

impl TaskStore for FileStore {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        self.get_owned(id)
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        self.save_owned(task)
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        let listed = self.list_owned(filter);
        async move { listed.await.map(Some) }
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
        }
    }
}

impl StoreConfig {
    /// A selector: `"memory"` (or empty) or `"file:<dir>"`; anything else is an error.
    pub fn parse(selector: &str) -> Result<StoreConfig, StoreError> {
        match selector.trim() {
            "" | "memory" => Ok(StoreConfig::default()),
            s => match s.strip_prefix("file:") {
                Some(dir) if !dir.trim().is_empty() => Ok(StoreConfig::File(dir.trim().into())),
                Some(_) => Err(StoreError::new(
                    "the store selector \"file:\" needs a folder: file:<dir>",
                )),
                None => Err(StoreError::new(format!(
                    "unknown task store {s:?}: use \"memory\" or \"file:<dir>\""
                ))),
            },
        }
    }
}

/// The store `serve` runs on.
pub enum AnyStore {
    Memory(MemoryStore),
    File(FileStore),
    Custom(std::sync::Arc<dyn SharedStore>),
}

impl AnyStore {
    /// `"memory"` or `"file:<dir>"`; anything else is an error. For a file
    /// store, also the ids of tasks recovered from a crash.
    pub fn open(selector: &str) -> Result<(AnyStore, Vec<String>), StoreError> {
        Self::open_config(&StoreConfig::parse(selector)?)
    }

    /// Opens the store `config` names. For a file store, also the ids of
    /// tasks recovered from a crash.
    pub fn open_config(config: &StoreConfig) -> Result<(AnyStore, Vec<String>), StoreError> {
        match config {
            StoreConfig::Memory {
                max_tasks,
                max_bytes,
            } => Ok((
                AnyStore::Memory(MemoryStore::with_limits(*max_tasks, *max_bytes)),
                Vec::new(),
            )),
            StoreConfig::File(dir) => {
                let (store, recovered) = FileStore::open(dir)?;
                Ok((AnyStore::File(store), recovered))
            }
            StoreConfig::Custom(store) => Ok((AnyStore::Custom(store.clone()), Vec::new())),
        }
    }
}

impl TaskStore for AnyStore {
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<Task>, StoreError>> + MaybeSend {
        // The memory store answers without allocating a future (GetTask's hot path).
        match self {
            AnyStore::Memory(m) => Either::Left(std::future::ready(Ok(m.get_now(id)))),
            AnyStore::File(f) => Either::Right(f.get_owned(id)),
            AnyStore::Custom(c) => Either::Right(c.get(id)),
        }
    }

    fn save(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + MaybeSend {
        match self {
            AnyStore::Memory(m) => Either::Left(std::future::ready(m.save_now(task))),
            AnyStore::File(f) => Either::Right(f.save_owned(task)),
            AnyStore::Custom(c) => Either::Right(c.save(task)),
        }
    }

    fn list(
        &self,
        filter: &TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + MaybeSend {
        let listed = match self {
            AnyStore::Memory(m) => Either::Left(std::future::ready(Ok(Some(m.list_now(filter))))),
            AnyStore::File(f) => {
                let listed = f.list_owned(filter);
                Either::Right(Box::pin(async move { listed.await.map(Some) })
                    as BoxFuture<'static, Result<Option<Vec<Task>>, StoreError>>)
            }
            AnyStore::Custom(c) => Either::Right(c.list(filter)),
        };
        listed
    }
}
