// toolnexus-wasm/durable: the task store of createA2AHandler on Durable
// Objects (workerd, Cloudflare Workers). Plain JavaScript, no .wasm.
//
// - A2ATaskStore: a Durable Object class keeping tasks in its SQLite storage
//   (ctx.storage.sql): a compare-and-swap on each task's version, a per-task
//   log of versions (the cursor streams replay from), leases, push configs,
//   messageId de-duplication, and alarms at lease ends; it deletes the
//   finished tasks the handler's retention sweep names.
// - durableObjectStore(namespace): the handler's store over a namespace of
//   A2ATaskStore objects.
//
// Sharding: by task id. A task's id names its shard (a hash of the id over
// `shards` objects): GetTask, CancelTask, SubscribeToTask and every save of
// a running task know only the id, so each is one call to one object, and
// a busy caller's tasks spread over all shards instead of queuing on one.
// Each shard indexes its tasks by owner, and ListTasks (and the sweep of
// expired leases) fans out over the shards and merges their pages by the
// same keyset cursor as natively (status time, then id, newest first).
// Sharding by owner would need the owner on every read, which a task id
// does not carry.
//
// The protocol (what a version, a lease, a cancel or a conflict mean) is the
// core's: this file stores what the handler saves and refuses a save whose
// version does not follow the stored one. The policies are the core's too:
// which leases ran out (the handler's sweep reads `expired()` and decides),
// and how long finished tasks are kept (the handler's `retentionMs`; its
// sweep calls `deleteFinished({before})`). The objects only execute.

import { DurableObject } from "cloudflare:workers";

const TERMINAL = new Set(["completed", "failed", "canceled", "rejected"]);

/** A state in the 0.3 spelling, whatever the task's dialect. */
function stateName(task) {
  let s = String(task?.status?.state ?? "unknown");
  if (s.startsWith("TASK_STATE_")) s = s.slice(11).toLowerCase().replace(/_/g, "-");
  return s === "cancelled" ? "canceled" : s;
}

/** The status time in Unix ms (0 when the task has none). */
function statusMs(task) {
  const t = Date.parse(task?.status?.timestamp ?? "");
  return Number.isFinite(t) ? t : 0;
}

/**
 * One shard of tasks, in Durable Object SQLite storage. Its methods are
 * called over RPC by durableObjectStore; `fetch` serves the changes of a
 * task as a stream (`GET /changes?id=…&after=VERSION`).
 */
export class A2ATaskStore extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    /** Open change streams, by task id: [{after, send}]. */
    this.followers = new Map();
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS tasks (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        owner TEXT NOT NULL DEFAULT '',
        context_id TEXT,
        state TEXT NOT NULL,
        status_ms INTEGER NOT NULL,
        lease_until INTEGER,
        body TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, status_ms DESC, id DESC);
      CREATE INDEX IF NOT EXISTS tasks_by_lease ON tasks (lease_until) WHERE lease_until IS NOT NULL;
      CREATE INDEX IF NOT EXISTS tasks_by_status_ms ON tasks (status_ms);
      CREATE TABLE IF NOT EXISTS task_log (
        task_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        state TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (task_id, version)
      );
      CREATE TABLE IF NOT EXISTS push_configs (task_id TEXT PRIMARY KEY, configs TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS messages (
        owner TEXT NOT NULL,
        message_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, message_id)
      );
    `);
  }

  /**
   * `messageId` de-duplication (this object holds the messageIds that hash
   * here): the task that first sent `messageId` as `owner`, claimed for
   * `taskId` when none did (or when `replace`, the holder never stored).
   */
  claimMessage(owner, messageId, taskId, replace = false) {
    const row = this.sql
      .exec("SELECT task_id FROM messages WHERE owner = ? AND message_id = ?", owner, messageId)
      .toArray()[0];
    if (row && row.task_id !== taskId && !replace) return row.task_id;
    this.sql.exec(
      "INSERT OR REPLACE INTO messages (owner, message_id, task_id, at_ms) VALUES (?, ?, ?, ?)",
      owner, messageId, taskId, Date.now(),
    );
    return null;
  }

  /** The stored task, or null. */
  get(id) {
    const row = this.sql.exec("SELECT body FROM tasks WHERE id = ?", id).toArray()[0];
    return row ? JSON.parse(row.body) : null;
  }

  /**
   * Stores `task` if its version follows the stored one (compare and swap;
   * version 0 or absent always goes through), as version stored + 1, and
   * logs the version. `false`: refused, nothing changed.
   */
  save(task) {
    const id = String(task.id);
    const owner = task.owner ?? "";
    const saving = Number(task.version ?? 0);
    const state = stateName(task);
    const at = statusMs(task);
    const lease = task.lease?.until ?? null;
    const version = this.ctx.storage.transactionSync(() => {
      const row = this.sql.exec("SELECT version FROM tasks WHERE id = ?", id).toArray()[0];
      const stored = row ? row.version : null;
      if (saving !== 0 && (stored ?? 0) + 1 !== saving) return null;
      const next = (stored ?? 0) + 1;
      const body = JSON.stringify({ ...task, version: next });
      this.sql.exec(
        `INSERT INTO tasks (id, version, owner, context_id, state, status_ms, lease_until, body)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version, owner = excluded.owner,
           context_id = excluded.context_id, state = excluded.state, status_ms = excluded.status_ms,
           lease_until = excluded.lease_until, body = excluded.body`,
        id, next, owner, task.contextId ?? null, state, at, lease, body,
      );
      this.sql.exec(
        "INSERT OR REPLACE INTO task_log (task_id, version, state, at_ms) VALUES (?, ?, ?, ?)",
        id, next, state, Date.now(),
      );
      return next;
    });
    if (version === null) return false;
    this.#changed(id, version, state);
    if (lease !== null && !TERMINAL.has(state)) this.#schedule(lease + 1);
    return true;
  }

  /**
   * One page of the tasks passing the query, newest status first (ties: the
   * greater id first), after `after` ({timestamp, id}); and how many pass.
   */
  listPage(q = {}) {
    const where = [];
    const args = [];
    if (q.owner != null) { where.push("owner = ?"); args.push(String(q.owner)); }
    if (q.contextId != null) { where.push("context_id = ?"); args.push(String(q.contextId)); }
    if (q.status != null) { where.push("state = ?"); args.push(String(q.status)); }
    if (q.statusTimestampAfter != null) {
      where.push("status_ms >= ?");
      args.push(Date.parse(q.statusTimestampAfter) || 0);
    }
    const filter = where.length ? `WHERE ${where.join(" AND ")}` : "";
    const totalSize = this.sql.exec(`SELECT count(*) AS n FROM tasks ${filter}`, ...args).one().n;
    const page = [...where];
    const pageArgs = [...args];
    if (q.after) {
      page.push("(status_ms < ? OR (status_ms = ? AND id < ?))");
      pageArgs.push(q.after.timestamp, q.after.timestamp, String(q.after.id));
    }
    const limit = Math.max(0, Math.min(Number(q.limit ?? 100), 1000));
    const tasks = this.sql
      .exec(
        `SELECT body FROM tasks ${page.length ? `WHERE ${page.join(" AND ")}` : ""}
         ORDER BY status_ms DESC, id DESC LIMIT ?`,
        ...pageArgs, limit,
      )
      .toArray()
      .map((r) => JSON.parse(r.body));
    return { tasks, totalSize };
  }

  /** Active tasks whose lease ended before `now`. */
  expired({ now, limit = 100 } = {}) {
    return this.sql
      .exec(
        "SELECT body FROM tasks WHERE lease_until IS NOT NULL AND lease_until < ? AND state IN ('submitted', 'working') LIMIT ?",
        now, limit,
      )
      .toArray()
      .map((r) => JSON.parse(r.body));
  }

  /**
   * Deletes up to `limit` terminal tasks whose status is older than `before`
   * (Unix ms; the handler's retention sweep decides it), with their logs,
   * push configs, and the messageIds claimed before then; how many tasks.
   */
  deleteFinished(before, limit = 1000) {
    return this.ctx.storage.transactionSync(() => {
      const ids = this.sql
        .exec(
          "SELECT id FROM tasks WHERE status_ms < ? AND state IN ('completed', 'failed', 'canceled', 'rejected') LIMIT ?",
          before, limit,
        )
        .toArray()
        .map((r) => r.id);
      for (const id of ids) {
        this.sql.exec("DELETE FROM task_log WHERE task_id = ?", id);
        this.sql.exec("DELETE FROM push_configs WHERE task_id = ?", id);
        this.sql.exec("DELETE FROM tasks WHERE id = ?", id);
      }
      this.sql.exec("DELETE FROM messages WHERE at_ms < ?", before);
      return ids.length;
    });
  }

  getPushConfigs(taskId) {
    const row = this.sql.exec("SELECT configs FROM push_configs WHERE task_id = ?", taskId).toArray()[0];
    return row ? JSON.parse(row.configs) : null;
  }

  /** Kept with the task (and deleted with it); a task not stored keeps none. */
  savePushConfigs(taskId, configs) {
    if (!this.sql.exec("SELECT 1 FROM tasks WHERE id = ?", taskId).toArray().length) return;
    this.sql.exec(
      "INSERT OR REPLACE INTO push_configs (task_id, configs) VALUES (?, ?)",
      taskId, JSON.stringify(configs ?? []),
    );
  }

  /** The logged versions of a task after `after`, oldest first. */
  changes(id, after) {
    return this.sql
      .exec("SELECT version, state FROM task_log WHERE task_id = ? AND version > ? ORDER BY version", id, after)
      .toArray()
      .map((r) => ({ version: r.version, state: r.state }));
  }

  /**
   * `GET /changes?id=ID&after=VERSION[&waitMs=N]`: a stream of NDJSON lines
   * `{"version", "state"}`: the logged versions after the cursor at once,
   * else the next ones as they are saved; it ends after the first batch, at
   * a terminal state, or after `waitMs` (default 25 s) with none.
   */
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname !== "/changes") return new Response("not found", { status: 404 });
    const id = url.searchParams.get("id") ?? "";
    const after = Number(url.searchParams.get("after") ?? 0) || 0;
    const waitMs = Math.min(Number(url.searchParams.get("waitMs") ?? 25_000) || 25_000, 60_000);
    const enc = new TextEncoder();
    const lines = (list) => enc.encode(list.map((c) => `${JSON.stringify(c)}\n`).join(""));
    const logged = this.changes(id, after);
    const headers = { "content-type": "application/x-ndjson" };
    if (logged.length) return new Response(lines(logged), { headers });
    const { readable, writable } = new TransformStream();
    const writer = writable.getWriter();
    let done = false;
    const follower = { after };
    const finish = async (list) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const mine = this.followers.get(id);
      if (mine) {
        mine.delete(follower);
        if (!mine.size) this.followers.delete(id);
      }
      try {
        if (list.length) await writer.write(lines(list));
        await writer.close();
      } catch {
        // The reader left.
      }
    };
    follower.send = finish;
    const timer = setTimeout(() => finish([]), waitMs);
    if (!this.followers.has(id)) this.followers.set(id, new Set());
    this.followers.get(id).add(follower);
    return new Response(readable, { headers });
  }

  /** Wakes the streams following `id`. */
  #changed(id, version, state) {
    const followers = this.followers.get(id);
    if (!followers) return;
    for (const f of [...followers]) {
      if (version > f.after) f.send(this.changes(id, f.after));
    }
    void state;
  }

  /** Sets the alarm at `at` (a lease's end) unless an earlier one is set. */
  #schedule(at) {
    this.ctx.storage.getAlarm().then((current) => {
      if (current === null || at < current) return this.ctx.storage.setAlarm(at);
    });
  }

  /**
   * At a lease's end: the streams following a task whose lease ran out are
   * woken, so their isolates read it (and the core fails it as interrupted);
   * without followers the handler's sweep (`expired()`) or the next read
   * does. Then the alarm moves to the next lease's end.
   */
  async alarm() {
    const now = Date.now();
    for (const r of this.sql
      .exec("SELECT id, version, state FROM tasks WHERE lease_until IS NOT NULL AND lease_until < ? AND state IN ('submitted', 'working')", now)
      .toArray()) {
      for (const f of [...(this.followers.get(r.id) ?? [])]) f.send([{ version: r.version, state: r.state }]);
    }
    const lease = this.sql
      .exec("SELECT min(lease_until) AS t FROM tasks WHERE lease_until >= ? AND state IN ('submitted', 'working')", now)
      .one().t;
    if (lease !== null) await this.ctx.storage.setAlarm(lease + 1);
  }
}

/** FNV-1a of a string: a task id's shard. */
function hash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Newest status first, ties: the greater id first (the core's order). */
function newestFirst(a, b) {
  const d = statusMs(b) - statusMs(a);
  if (d) return d;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/**
 * The store of `createA2AHandler({store})` over a Durable Object namespace
 * bound to {@link A2ATaskStore}: tasks sharded by id over `shards` objects
 * (default 16; keep it fixed once tasks are stored).
 */
export function durableObjectStore(namespace, options = {}) {
  if (!namespace || typeof namespace.idFromName !== "function") {
    throw new TypeError("durableObjectStore(namespace): a Durable Object namespace binding (env.TASKS) bound to A2ATaskStore");
  }
  const shards = Math.max(1, Math.floor(options.shards ?? 16));
  const name = options.name ?? "toolnexus-tasks";
  // A stub per call: stubs are I/O objects of the request that made them.
  const shard = (i) => namespace.get(namespace.idFromName(`${name}/${i}`));
  const of = (taskId) => shard(hash(String(taskId)) % shards);
  const all = () => Array.from({ length: shards }, (_, i) => shard(i));
  const listeners = new Set();

  // The next change of a running task after `version`, from its shard's
  // change stream: told to the handler (store.watch), which reads the task
  // again. Opened by every read of a running task, so a stream, long-poll
  // or job following it through reads always has one open.
  const follow = (id, version) => {
    of(id)
      .fetch(`https://toolnexus.store/changes?id=${encodeURIComponent(id)}&after=${version}`)
      .then(async (r) => {
        for (const line of (await r.text()).split("\n")) {
          if (!line) continue;
          const change = JSON.parse(line);
          for (const l of listeners) l(id, change.version);
        }
      })
      .catch(() => {
        // The request that opened it ended; the next read opens another.
      });
  };

  return {
    async get(id) {
      const task = await of(id).get(id);
      const state = task && stateName(task);
      if (state === "submitted" || state === "working") follow(id, Number(task.version ?? 0));
      return task;
    },
    async save(task) {
      // A new task whose first message repeats a messageId its owner sent
      // before (a retried send) is refused as a conflict: no second task.
      const messageId = task.history?.[0]?.messageId;
      if (Number(task.version ?? 0) <= 1 && messageId) {
        const owner = String(task.owner ?? "");
        const claims = of(`${owner}\u0000${messageId}`);
        const held = await claims.claimMessage(owner, String(messageId), String(task.id));
        if (held) {
          if (await of(held).get(held)) return false;
          await claims.claimMessage(owner, String(messageId), String(task.id), true);
        }
      }
      return of(task.id).save(task);
    },
    async listPage(query) {
      const limit = Number(query.limit ?? 100);
      const pages = await Promise.all(all().map((s) => s.listPage(query)));
      const tasks = pages.flatMap((p) => p.tasks).sort(newestFirst).slice(0, limit);
      return { tasks, totalSize: pages.reduce((n, p) => n + p.totalSize, 0) };
    },
    async deleteFinished({ before, limit = 1000 }) {
      const gone = await Promise.all(all().map((s) => s.deleteFinished(before, limit)));
      return gone.reduce((n, k) => n + k, 0);
    },
    async expired(query) {
      const found = await Promise.all(all().map((s) => s.expired(query)));
      return found.flat().slice(0, query.limit ?? 100);
    },
    getPushConfigs(taskId) {
      return of(taskId).getPushConfigs(taskId);
    },
    savePushConfigs(taskId, configs) {
      return of(taskId).savePushConfigs(taskId, configs);
    },
    watch(changed) {
      listeners.add(changed);
    },
  };
}
