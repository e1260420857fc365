//! The PostgreSQL task store (feature `postgres`): several replicas of an
//! agent on one database.
//!
//! - One row per task: its stored form ([`Task::stored`]) as `jsonb`, with
//!   the columns the queries need (context, owner, state, status time) and
//!   its revision (`version`, `lease_holder`, `lease_until`). A save is a
//!   compare-and-swap on `version` (core's [`may_replace`] rule): an
//!   `INSERT … ON CONFLICT DO NOTHING` for version 1, an
//!   `UPDATE … WHERE version = n - 1` after; no row touched is a conflict.
//! - A trigger sends `NOTIFY toolnexus_tasks, '<version>:<id>'` with every
//!   change, on commit; [`listen`] hands them to the server
//!   ([`A2aServer::store_changed`](toolnexus_core::server::A2aServer::store_changed)),
//!   with a start-up probe that warns when notifications do not come back
//!   (a transaction-pooling proxy drops them: the server then relies on polling).
//! - Push-notification configs: one row per config (with its task's
//!   owner), read through each time they are used; a put holds a
//!   per-task advisory lock so the cap per task holds across replicas.
//! - Retention: finished tasks older than the server's retention are
//!   deleted (their configs with them, by the foreign key).
//! - ListTasks pages in SQL: the filters, the owner, a keyset cursor on
//!   (status time, id), and the count.
//! - The schema is made by embedded migrations, run at start under an
//!   advisory lock so replicas starting together do not race.

use crate::serve::unix_ms;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::{AsyncMessage, NoTls, Row};
use toolnexus_core::server::{event_from_json, event_json, LoggedEvent, StoreError, TaskFilter};
use toolnexus_core::{Lease, StreamEvent, Task};

/// The channel every change is told on.
pub const CHANNEL: &str = "toolnexus_tasks";

/// The advisory lock key migrations run under (any fixed number: "tnx1").
const MIGRATION_LOCK: i64 = 0x746e_7831;

/// The schema, in order; each runs once, in a transaction.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        r#"
CREATE TABLE toolnexus_tasks (
    id           TEXT PRIMARY KEY,
    context_id   TEXT NOT NULL,
    owner        TEXT,
    state        TEXT NOT NULL,
    updated_ms   BIGINT,
    version      BIGINT NOT NULL,
    lease_holder TEXT,
    lease_until  BIGINT,
    doc          JSONB NOT NULL
);
CREATE INDEX toolnexus_tasks_context ON toolnexus_tasks (context_id);
CREATE INDEX toolnexus_tasks_listed ON toolnexus_tasks (owner, (COALESCE(updated_ms, 0)) DESC, id DESC);
CREATE INDEX toolnexus_tasks_leases ON toolnexus_tasks (lease_until)
    WHERE state IN ('submitted', 'working');
CREATE TABLE toolnexus_push (
    task_id TEXT PRIMARY KEY REFERENCES toolnexus_tasks (id) ON DELETE CASCADE,
    configs JSONB NOT NULL
);
CREATE FUNCTION toolnexus_task_changed() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('toolnexus_tasks', NEW.version::text || ':' || NEW.id);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER toolnexus_task_changed AFTER INSERT OR UPDATE ON toolnexus_tasks
    FOR EACH ROW EXECUTE FUNCTION toolnexus_task_changed();
"#,
    ),
    (
        2,
        r#"
CREATE TABLE toolnexus_push_configs (
    task_id TEXT NOT NULL REFERENCES toolnexus_tasks (id) ON DELETE CASCADE,
    id      TEXT NOT NULL,
    owner   TEXT,
    seq     BIGSERIAL,
    config  JSONB NOT NULL,
    PRIMARY KEY (task_id, id)
);
INSERT INTO toolnexus_push_configs (task_id, id, owner, config)
    SELECT p.task_id, c ->> 'id', t.owner, c
    FROM toolnexus_push p
    JOIN toolnexus_tasks t ON t.id = p.task_id,
    jsonb_array_elements(CASE WHEN jsonb_typeof(p.configs) = 'array' THEN p.configs ELSE '[]'::jsonb END) c
    WHERE c ? 'id'
    ON CONFLICT DO NOTHING;
DROP TABLE toolnexus_push;
CREATE INDEX toolnexus_tasks_finished ON toolnexus_tasks (updated_ms)
    WHERE state IN ('completed', 'failed', 'canceled', 'rejected');
"#,
    ),
    (
        3,
        r#"
CREATE TABLE toolnexus_task_events (
    task_id TEXT NOT NULL REFERENCES toolnexus_tasks (id) ON DELETE CASCADE,
    version BIGINT NOT NULL,
    seq     BIGINT NOT NULL,
    event   JSONB NOT NULL,
    PRIMARY KEY (task_id, version, seq)
);
"#,
    ),
];

/// Tasks in PostgreSQL, through a pool of connections.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    url: Arc<str>,
}

fn pg_error(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    // The driver's message says what the database said; the URL (and its
    // password) is never in it.
    StoreError::with_source(format!("PostgreSQL: {what}: {e}"), e)
}

/// The URL with its password replaced, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`, or
    /// `postgresql://…`; no TLS) and brings the schema up to date.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        let config = parse_url(url)?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(32)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| pg_error("cannot make the connection pool", e))?;
        let store = PgStore {
            pool,
            url: url.into(),
        };
        store.migrate().await?;
        Ok(store)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| pg_error("cannot connect", e))
    }

    /// Runs the migrations not yet applied, under the advisory lock.
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(|e| pg_error("cannot take the migration lock", e))?;
        let result = async {
            client
                .batch_execute(
                    "CREATE TABLE IF NOT EXISTS toolnexus_migrations \
                     (version INT PRIMARY KEY, applied_ms BIGINT NOT NULL)",
                )
                .await
                .map_err(|e| pg_error("cannot make the migrations table", e))?;
            let applied: Vec<i32> = client
                .query("SELECT version FROM toolnexus_migrations", &[])
                .await
                .map_err(|e| pg_error("cannot read the migrations", e))?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for (version, sql) in MIGRATIONS {
                if applied.contains(version) {
                    continue;
                }
                let tx = client
                    .transaction()
                    .await
                    .map_err(|e| pg_error("cannot begin a migration", e))?;
                tx.batch_execute(sql)
                    .await
                    .map_err(|e| pg_error(&format!("migration {version} failed"), e))?;
                let now = unix_ms().unwrap_or(0) as i64;
                tx.execute(
                    "INSERT INTO toolnexus_migrations (version, applied_ms) VALUES ($1, $2)",
                    &[version, &now],
                )
                .await
                .map_err(|e| pg_error("cannot record a migration", e))?;
                tx.commit()
                    .await
                    .map_err(|e| pg_error(&format!("migration {version} failed"), e))?;
                tracing::info!("task store: PostgreSQL migration {version} applied");
            }
            Ok(())
        }
        .await;
        let _ = client
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await;
        result
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Reads task `id`.
    pub fn get_owned(&self, id: &str) -> BoxFuture<'static, Result<Option<Task>, StoreError>> {
        let (this, id) = (self.clone(), id.to_string());
        Box::pin(async move {
            let client = this.client().await?;
            let row = client
                .query_opt(
                    "SELECT doc, version, lease_holder, lease_until FROM toolnexus_tasks WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(|e| pg_error("cannot read a task", e))?;
            row.map(|r| task_of(&r)).transpose()
        })
    }

    /// Saves `task` over the version before its own (see the module docs).
    pub fn save_owned(&self, task: &Task) -> BoxFuture<'static, Result<(), StoreError>> {
        self.save_events_owned(task, &[])
    }

    /// [`save_owned`](Self::save_owned), and `events` appended to the
    /// task's log (`toolnexus_task_events`) under the saved version, in
    /// the same transaction: a refused compare-and-swap appends nothing,
    /// and a listener woken by the task's NOTIFY (sent at commit) reads them.
    pub fn save_events_owned(
        &self,
        task: &Task,
        events: &[StreamEvent],
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let this = self.clone();
        let doc = serde_json::to_value(task.stored());
        let logged = serde_json::Value::Array(events.iter().map(event_json).collect());
        let has_events = !events.is_empty();
        let task = task.clone();
        Box::pin(async move {
            let doc = doc.map_err(|e| pg_error("cannot write a task", e))?;
            let mut client = this.client().await?;
            let version = task.revision.version as i64;
            let (holder, until) = match &task.revision.lease {
                Some(l) => (Some(l.holder.as_str()), Some(l.until_ms as i64)),
                None => (None, None),
            };
            let updated = task.updated_ms.map(|t| t as i64);
            let state = task.state.as_str();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
                &task.id,
                &task.context_id,
                &task.owner,
                &state,
                &updated,
                &version,
                &holder,
                &until,
                &doc,
            ];
            let sql = match version {
                0 => {
                    "INSERT INTO toolnexus_tasks AS t (id, context_id, owner, state, updated_ms, version, lease_holder, lease_until, doc) \
                     VALUES ($1, $2, $3, $4, $5, $6::bigint + 1, $7, $8, $9) \
                     ON CONFLICT (id) DO UPDATE SET context_id = EXCLUDED.context_id, owner = EXCLUDED.owner, \
                     state = EXCLUDED.state, updated_ms = EXCLUDED.updated_ms, version = t.version + 1, \
                     lease_holder = EXCLUDED.lease_holder, lease_until = EXCLUDED.lease_until, doc = EXCLUDED.doc \
                     RETURNING t.version"
                }
                1 => {
                    "INSERT INTO toolnexus_tasks (id, context_id, owner, state, updated_ms, version, lease_holder, lease_until, doc) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING RETURNING version"
                }
                _ => {
                    "UPDATE toolnexus_tasks SET context_id = $2, owner = $3, state = $4, updated_ms = $5, \
                     version = $6, lease_holder = $7, lease_until = $8, doc = $9 \
                     WHERE id = $1 AND version = $6::bigint - 1 RETURNING version"
                }
            };
            let err = |e| pg_error("cannot save a task", e);
            if !has_events {
                let n = client.execute(sql, &params).await.map_err(err)?;
                if n == 0 {
                    return Err(StoreError::conflict(&task.id, None, task.revision.version));
                }
                return Ok(());
            }
            let tx = client.transaction().await.map_err(err)?;
            let Some(row) = tx.query_opt(sql, &params).await.map_err(err)? else {
                // Dropped: rolled back, nothing appended.
                return Err(StoreError::conflict(&task.id, None, task.revision.version));
            };
            let saved: i64 = row.get(0);
            tx.execute(
                "INSERT INTO toolnexus_task_events (task_id, version, seq, event) \
                 SELECT $1, $2, e.seq, e.event FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS e(event, seq)",
                &[&task.id, &saved, &logged],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(())
        })
    }

    /// Task `id`'s logged events after `version`, in order.
    pub fn events_after_owned(
        &self,
        id: &str,
        version: u64,
    ) -> BoxFuture<'static, Result<Option<Vec<LoggedEvent>>, StoreError>> {
        let (this, id) = (self.clone(), id.to_string());
        Box::pin(async move {
            let client = this.client().await?;
            let rows = client
                .query(
                    "SELECT version, event FROM toolnexus_task_events \
                     WHERE task_id = $1 AND version > $2 ORDER BY version, seq",
                    &[&id, &(version as i64)],
                )
                .await
                .map_err(|e| pg_error("cannot read a task's events", e))?;
            let mut events = Vec::with_capacity(rows.len());
            for row in rows {
                let v: i64 = row.get(0);
                let event: serde_json::Value = row.get(1);
                let event = event_from_json(&event).ok_or_else(|| {
                    StoreError::new(format!("task {id}: a logged event is unreadable"))
                })?;
                events.push((v as u64, event));
            }
            Ok(Some(events))
        })
    }

    /// The tasks that pass `filter` (all of them: the server pages).
    pub fn list_owned(
        &self,
        filter: &TaskFilter,
    ) -> BoxFuture<'static, Result<Vec<Task>, StoreError>> {
        let (this, filter) = (self.clone(), filter.clone());
        Box::pin(async move {
            let (clause, params) = where_clause(&filter, None);
            let sql = format!(
                "SELECT doc, version, lease_holder, lease_until FROM toolnexus_tasks {clause}"
            );
            let client = this.client().await?;
            let refs = param_refs(&params);
            let rows = client
                .query(&sql, &refs)
                .await
                .map_err(|e| pg_error("cannot list tasks", e))?;
            rows.iter().map(task_of).collect()
        })
    }

    /// One page of the tasks that pass `filter`, newest first, after the
    /// cursor, and their count.
    pub fn list_page_owned(
        &self,
        filter: &TaskFilter,
        after: Option<(u64, &str)>,
        limit: usize,
    ) -> BoxFuture<'static, Result<(Vec<Task>, usize), StoreError>> {
        let (this, filter) = (self.clone(), filter.clone());
        let after = after.map(|(ms, id)| (ms as i64, id.to_string()));
        Box::pin(async move {
            let client = this.client().await?;
            let (count_clause, count_params) = where_clause(&filter, None);
            let refs = param_refs(&count_params);
            let total: i64 = client
                .query_one(
                    &format!("SELECT count(*) FROM toolnexus_tasks {count_clause}"),
                    &refs,
                )
                .await
                .map_err(|e| pg_error("cannot count tasks", e))?
                .get(0);
            let (clause, mut params) = where_clause(&filter, after);
            params.push(Box::new(limit as i64));
            let sql = format!(
                "SELECT doc, version, lease_holder, lease_until FROM toolnexus_tasks {clause} \
                 ORDER BY COALESCE(updated_ms, 0) DESC, id DESC LIMIT ${}",
                params.len()
            );
            let refs = param_refs(&params);
            let rows = client
                .query(&sql, &refs)
                .await
                .map_err(|e| pg_error("cannot list tasks", e))?;
            let tasks = rows.iter().map(task_of).collect::<Result<Vec<_>, _>>()?;
            Ok((tasks, total as usize))
        })
    }

    /// Active tasks whose lease ended before `now_ms`.
    pub fn expired_owned(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> BoxFuture<'static, Result<Vec<Task>, StoreError>> {
        let this = self.clone();
        Box::pin(async move {
            let client = this.client().await?;
            let rows = client
                .query(
                    "SELECT doc, version, lease_holder, lease_until FROM toolnexus_tasks \
                     WHERE state IN ('submitted', 'working') AND lease_until < $1 LIMIT $2",
                    &[&(now_ms as i64), &(limit as i64)],
                )
                .await
                .map_err(|e| pg_error("cannot find expired leases", e))?;
            rows.iter().map(task_of).collect()
        })
    }

    /// A task's push-notification configs, oldest first (`None`: none).
    pub fn get_push_owned(
        &self,
        task_id: &str,
    ) -> BoxFuture<'static, Result<Option<serde_json::Value>, StoreError>> {
        let (this, id) = (self.clone(), task_id.to_string());
        Box::pin(async move {
            let client = this.client().await?;
            let rows = client
                .query(
                    "SELECT config FROM toolnexus_push_configs WHERE task_id = $1 ORDER BY seq",
                    &[&id],
                )
                .await
                .map_err(|e| pg_error("cannot read push configs", e))?;
            Ok((!rows.is_empty())
                .then(|| serde_json::Value::Array(rows.iter().map(|r| r.get(0)).collect())))
        })
    }

    /// Replaces a task's push-notification configs with `configs` (its
    /// task must be stored), in one transaction.
    pub fn save_push_owned(
        &self,
        task_id: &str,
        configs: &serde_json::Value,
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let (this, id) = (self.clone(), task_id.to_string());
        let list = toolnexus_core::server::push_records(Some(configs.clone()));
        Box::pin(async move {
            let mut client = this.client().await?;
            let tx = client
                .transaction()
                .await
                .map_err(|e| pg_error("cannot save push configs", e))?;
            tx.execute(
                "DELETE FROM toolnexus_push_configs WHERE task_id = $1",
                &[&id],
            )
            .await
            .map_err(|e| pg_error("cannot save push configs", e))?;
            for config in list {
                let Some(config_id) = config.get("id").and_then(|i| i.as_str()) else {
                    continue;
                };
                let owner = config.get("owner").and_then(|o| o.as_str());
                tx.execute(
                    "INSERT INTO toolnexus_push_configs (task_id, id, owner, config) \
                     SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM toolnexus_tasks WHERE id = $1) \
                     ON CONFLICT (task_id, id) DO UPDATE SET owner = EXCLUDED.owner, config = EXCLUDED.config",
                    &[&id, &config_id, &owner, &config],
                )
                .await
                .map_err(|e| pg_error("cannot save push configs", e))?;
            }
            tx.commit()
                .await
                .map_err(|e| pg_error("cannot save push configs", e))
        })
    }

    /// Adds one config (or puts it over the one with its id) unless its
    /// task holds `max` others: under a per-task advisory lock, so two
    /// replicas adding at once cannot pass the cap together.
    pub fn put_push_owned(
        &self,
        task_id: &str,
        config: &serde_json::Value,
        max: usize,
    ) -> BoxFuture<'static, Result<bool, StoreError>> {
        let (this, id, config) = (self.clone(), task_id.to_string(), config.clone());
        Box::pin(async move {
            let config_id = config
                .get("id")
                .and_then(|i| i.as_str())
                .unwrap_or_default()
                .to_string();
            let owner = config
                .get("owner")
                .and_then(|o| o.as_str())
                .map(str::to_string);
            let mut client = this.client().await?;
            let err = |e| pg_error("cannot store a push config", e);
            let tx = client.transaction().await.map_err(err)?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('toolnexus_push:' || $1, 0))",
                &[&id],
            )
            .await
            .map_err(err)?;
            let others: i64 = tx
                .query_one(
                    "SELECT count(*) FROM toolnexus_push_configs WHERE task_id = $1 AND id <> $2",
                    &[&id, &config_id],
                )
                .await
                .map_err(err)?
                .get(0);
            if others as usize >= max {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO toolnexus_push_configs (task_id, id, owner, config) \
                 SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM toolnexus_tasks WHERE id = $1) \
                 ON CONFLICT (task_id, id) DO UPDATE SET owner = EXCLUDED.owner, config = EXCLUDED.config",
                &[&id, &config_id, &owner, &config],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }

    /// Deletes one config; whether it was there.
    pub fn delete_push_owned(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> BoxFuture<'static, Result<bool, StoreError>> {
        let (this, id, config_id) = (self.clone(), task_id.to_string(), config_id.to_string());
        Box::pin(async move {
            let client = this.client().await?;
            let n = client
                .execute(
                    "DELETE FROM toolnexus_push_configs WHERE task_id = $1 AND id = $2",
                    &[&id, &config_id],
                )
                .await
                .map_err(|e| pg_error("cannot delete a push config", e))?;
            Ok(n > 0)
        })
    }

    /// Deletes up to `limit` finished tasks whose status changed before
    /// `before_ms` (their push configs go with them); how many.
    pub fn delete_finished_owned(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> BoxFuture<'static, Result<usize, StoreError>> {
        let this = self.clone();
        Box::pin(async move {
            let client = this.client().await?;
            let n = client
                .execute(
                    "DELETE FROM toolnexus_tasks WHERE id IN (SELECT id FROM toolnexus_tasks \
                     WHERE state IN ('completed', 'failed', 'canceled', 'rejected') \
                     AND updated_ms < $1 LIMIT $2)",
                    &[&(before_ms as i64), &(limit as i64)],
                )
                .await
                .map_err(|e| pg_error("cannot delete finished tasks", e))?;
            Ok(n as usize)
        })
    }
}

/// `url` as the driver's config, refused (saying the URL is invalid, not
/// that the database cannot be reached) when it does not parse or names
/// a host no resolver could (`postgres://%%%`).
pub fn parse_url(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| {
        StoreError::with_source(format!("invalid PostgreSQL URL ({}): {e}", redact(url)), e)
    })?;
    for host in config.get_hosts() {
        if let tokio_postgres::config::Host::Tcp(name) = host {
            let plain = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b));
            if !plain {
                return Err(StoreError::new(format!(
                    "invalid PostgreSQL URL ({}): {name:?} is not a host name or address; \
                     use postgres://USER[:PASSWORD]@HOST[:PORT]/DB",
                    redact(url)
                )));
            }
        }
    }
    Ok(config)
}

type Param = Box<dyn tokio_postgres::types::ToSql + Sync + Send>;

/// `WHERE …` for `filter` (and the keyset cursor), with its parameters.
/// The parameters of a [`where_clause`] as `query` takes them.
fn param_refs(params: &[Param]) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as _).collect()
}

fn where_clause(filter: &TaskFilter, after: Option<(i64, String)>) -> (String, Vec<Param>) {
    let mut terms: Vec<String> = Vec::new();
    let mut params: Vec<Param> = Vec::new();
    let mut add = |term: &str, p: Param, params: &mut Vec<Param>| {
        params.push(p);
        terms.push(term.replace('?', &format!("${}", params.len())));
    };
    if let Some(c) = &filter.context_id {
        add("context_id = ?", Box::new(c.clone()), &mut params);
    }
    if let Some(s) = filter.state {
        add("state = ?", Box::new(s.as_str()), &mut params);
    }
    if let Some(t) = filter.updated_after_ms {
        add("updated_ms >= ?", Box::new(t as i64), &mut params);
    }
    if let Some(o) = &filter.owner {
        add("owner = ?", Box::new(o.clone()), &mut params);
    }
    if let Some((ms, id)) = after {
        params.push(Box::new(ms));
        params.push(Box::new(id));
        let n = params.len();
        terms.push(format!(
            "(COALESCE(updated_ms, 0), id) < (${}, ${})",
            n - 1,
            n
        ));
    }
    let clause = if terms.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", terms.join(" AND "))
    };
    (clause, params)
}

/// A task from its row: the stored form, with the revision of the columns.
fn task_of(row: &Row) -> Result<Task, StoreError> {
    let doc: serde_json::Value = row.get(0);
    let mut task = Task::from_stored(&doc)
        .ok_or_else(|| StoreError::new("PostgreSQL: a stored task is not a task"))?;
    task.revision.version = row.get::<_, i64>(1) as u64;
    let holder: Option<String> = row.get(2);
    let until: Option<i64> = row.get(3);
    task.revision.lease = match (holder, until) {
        (Some(holder), Some(until)) => Some(Lease {
            holder,
            until_ms: until as u64,
        }),
        _ => None,
    };
    Ok(task)
}

/// What [`listen`] hands on: a task changed (its id and version), or the
/// notifications are (again) being heard, after a start or a reconnect
/// (changes meanwhile were not told: look again).
pub type OnChange = Arc<dyn Fn(&str, Option<u64>) + Send + Sync>;

/// Listens for changes on a connection of its own, for as long as the
/// returned task runs (abort it to stop), reconnecting after a second when
/// the connection drops. At start, it sends itself a probe: if it does not
/// come back within 2 s (a transaction-pooling proxy between here and the
/// database drops notifications) it warns, and the server relies on polling.
pub fn listen(url: &str, on_change: OnChange) -> tokio::task::JoinHandle<()> {
    let url = url.to_string();
    tokio::spawn(async move {
        let mut probed = false;
        loop {
            match listen_once(&url, &on_change, &mut probed).await {
                Ok(()) => tracing::warn!("task store: the PostgreSQL LISTEN connection closed"),
                Err(e) => tracing::warn!("task store: LISTEN {CHANNEL}: {e}"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

async fn listen_once(url: &str, on_change: &OnChange, probed: &mut bool) -> Result<(), StoreError> {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| pg_error("cannot connect to listen", e))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n.payload().to_string()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("task store: the LISTEN connection failed: {e}");
                    break;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(|e| pg_error("LISTEN failed", e))?;
    // Whatever changed while nobody listened is looked at again by polling.
    let probe = (!*probed).then(|| format!("probe:{}", uuid::Uuid::new_v4()));
    if let Some(probe) = &probe {
        client
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, probe])
            .await
            .map_err(|e| pg_error("the NOTIFY probe failed", e))?;
        *probed = true;
        let heard = tokio::time::timeout(Duration::from_secs(2), async {
            while let Some(payload) = rx.recv().await {
                if payload == *probe {
                    return true;
                }
                dispatch(&payload, on_change);
            }
            false
        })
        .await;
        if heard != Ok(true) {
            tracing::warn!(
                "task store: PostgreSQL notifications do not arrive (a pooling proxy?); \
                 replicas will see each other's changes by polling only (--store-poll-ms)"
            );
        } else {
            tracing::info!("task store: PostgreSQL LISTEN/NOTIFY works");
        }
    }
    while let Some(payload) = rx.recv().await {
        dispatch(&payload, on_change);
    }
    driver.abort();
    Ok(())
}

/// `<version>:<id>` to the server.
fn dispatch(payload: &str, on_change: &OnChange) {
    if payload.starts_with("probe:") {
        return;
    }
    match payload.split_once(':') {
        Some((version, id)) => on_change(id, version.parse().ok()),
        None => on_change(payload, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_url_says_so_before_any_connection() {
        for url in ["postgres://%%%", "postgres://u@:x/db", "postgres://a b/db"] {
            let e = parse_url(url).expect_err(url);
            assert!(e.to_string().contains("invalid PostgreSQL URL"), "{e}");
        }
        for url in [
            "postgres://u:pw@127.0.0.1:5432/db",
            "postgresql://u@db.example.com/x",
            "postgres://u@[::1]:5/db",
            "postgres://u@my_host/db",
        ] {
            parse_url(url).expect(url);
        }
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://u:secret@h:5/db"),
            "postgres://u:***@h:5/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres:///db"), "postgres:///db");
    }

    #[test]
    fn filters_become_numbered_terms_and_the_cursor_a_row_comparison() {
        let filter = TaskFilter {
            context_id: Some("c".into()),
            owner: Some("o".into()),
            ..TaskFilter::default()
        };
        let (clause, params) = where_clause(&filter, Some((5, "x".into())));
        assert_eq!(
            clause,
            "WHERE context_id = $1 AND owner = $2 AND (COALESCE(updated_ms, 0), id) < ($3, $4)"
        );
        assert_eq!(params.len(), 4);
        assert_eq!(where_clause(&TaskFilter::default(), None).0, "");
    }
}
