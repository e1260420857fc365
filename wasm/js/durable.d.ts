// toolnexus-wasm/durable: createA2AHandler's task store on Durable Objects
// (workerd, Cloudflare Workers). Plain JavaScript, no .wasm.

import type { TaskStore } from "toolnexus-wasm";

/** The parts of `DurableObjectState` the store uses. */
interface DurableObjectStateLike {
  storage: {
    sql: { exec(query: string, ...bindings: unknown[]): { toArray(): Record<string, unknown>[]; one(): Record<string, unknown> } };
    transactionSync<T>(fn: () => T): T;
    getAlarm(): Promise<number | null>;
    setAlarm(at: number): Promise<void>;
  };
}

/** The parts of a Durable Object namespace binding the store uses. */
interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: unknown): unknown;
}

/**
 * One shard of tasks, in the Durable Object's SQLite storage: a
 * compare-and-swap on each task's version, a log of its versions (the cursor
 * change streams replay from), leases, push configs, `messageId`
 * de-duplication, alarms at lease ends, and the deletes of the handler's
 * retention sweep (`retentionMs`, default 7 days: the policies are the
 * handler's). Export it from your worker and bind it
 * (`[[durable_objects.bindings]]`, with a `new_sqlite_classes` migration).
 */
export declare class A2ATaskStore {
  constructor(ctx: DurableObjectStateLike, env: Record<string, unknown>);
  fetch(request: Request): Promise<Response>;
  alarm(): Promise<void>;
}

export interface DurableObjectStoreOptions {
  /** How many objects the tasks are spread over, by a hash of the task id (default 16). Keep it fixed once tasks are stored. */
  shards?: number;
  /** The objects' name prefix (default "toolnexus-tasks"): two handlers with different names keep separate tasks. */
  name?: string;
}

/**
 * `createA2AHandler({ store: durableObjectStore(env.TASKS) })`: the handler's
 * store over a namespace bound to {@link A2ATaskStore}. Tasks are sharded by
 * id; ListTasks fans out over the shards and merges their pages; the
 * handler's streams and long-polls on a task running in another isolate wake
 * on its shard's change stream.
 */
export declare function durableObjectStore(namespace: DurableObjectNamespaceLike, options?: DurableObjectStoreOptions): TaskStore;
