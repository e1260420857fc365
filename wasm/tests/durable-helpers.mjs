// Helpers of durable.test.mjs and bench-durable.mjs: workers on the
// package's Durable Object store in Miniflare.

import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { Miniflare } from 'miniflare';
import { pkgDir, withTimeout } from './helpers.mjs';

export const COMPAT_DATE = '2026-04-01';

/**
 * The modules of a worker whose entry (at `entry` under `root`) imports
 * "toolnexus-wasm", "/skills" and "/durable": the package as installed from
 * the tarball, an alias module per specifier next to the entry (pointing at
 * its "workerd" export), and `extra` modules ({path, type, contents}).
 */
export function workerModules(source, root = '/worker', { entry = 'worker.js', extra = [] } = {}) {
  const pkg = JSON.parse(readFileSync(join(pkgDir(), 'package.json'), 'utf8'));
  const entryPath = posix.join(root, entry);
  const modules = [{ type: 'ESModule', path: entryPath, contents: source }, ...extra];
  const dir = posix.dirname(entryPath);
  const pkgRoot = posix.join(root, 'node_modules/toolnexus-wasm');
  for (const [specifier, subpath] of [['toolnexus-wasm', '.'], ['toolnexus-wasm/skills', './skills'], ['toolnexus-wasm/durable', './durable']]) {
    const at = posix.join(dir, specifier);
    let rel = posix.relative(posix.dirname(at), posix.join(pkgRoot, pkg.exports[subpath].workerd.default));
    if (!rel.startsWith('.')) rel = `./${rel}`;
    modules.push({ type: 'ESModule', path: at, contents: `export * from "${rel}";\n` });
  }
  const add = (rel) => {
    for (const e of readdirSync(join(pkgDir(), rel), { withFileTypes: true })) {
      const file = posix.join(rel, e.name);
      if (e.isDirectory()) { add(file); continue; }
      const path = posix.join(pkgRoot, file);
      const bytes = readFileSync(join(pkgDir(), file));
      if (file.endsWith('.wasm')) modules.push({ type: 'CompiledWasm', path, contents: bytes });
      else if (file.endsWith('.js')) modules.push({ type: 'ESModule', path, contents: bytes.toString() });
    }
  };
  add('dist');
  return { modules, modulesRoot: root };
}

// A fulfiller with known events: "chunks N MS" emits artifact chunks
// "c0 ", "c1 ", … MS apart (N of them), then completes; "ask" stops the
// task input-required (its answer, on the same task, completes it as
// "answered: TEXT"); anything else is echoed.
export const DO_WORKER = `
import { createA2AHandler } from "toolnexus-wasm";
import { A2ATaskStore, durableObjectStore } from "toolnexus-wasm/durable";
export { A2ATaskStore };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({
      a2a: { name: "do-agent", description: "Tasks in Durable Objects" },
      skills: [{ name: "chunks", description: "Streams chunks" }],
      store: durableObjectStore(env.TASKS),
      leaseMs: env.LEASE_MS ? Number(env.LEASE_MS) : undefined,
      retentionMs: env.RETENTION_MS ? Number(env.RETENTION_MS) : undefined,
      push: { allowPrivateWebhooks: true },
      authenticate: env.AUTH ? (req) => {
        const user = (req.headers.get("authorization") ?? "").replace(/^Bearer /, "");
        return user ? { subject: user } : null;
      } : undefined,
      client: async (req, emit) => {
        if (req.text === "ask") return { inputRequired: "Which city?" };
        if (req.history.length > 1) return "answered: " + req.text;
        const m = /^chunks (\\d+) (\\d+)/.exec(req.text);
        if (!m) return "echo: " + req.text;
        for (let i = 0; i < Number(m[1]); i++) {
          await sleep(Number(m[2]));
          emit.artifact("c" + i + " ");
        }
        return "";
      },
    });
    return handler(request, env, ctx);
  },
};
`;

/**
 * Miniflare with two workers (isolates) "a" and "b" on one A2ATaskStore
 * namespace (defined by "a", SQLite storage persisted in `dir`), each on
 * its own 127.0.0.1 port.
 */
export async function startPair(dir, { source = DO_WORKER, bindings = {}, modules } = {}) {
  const worker = (name, root) => ({
    name,
    ...(modules ? modules(root) : workerModules(source, root)),
    compatibilityDate: COMPAT_DATE,
    bindings,
    durableObjects: { TASKS: { className: 'A2ATaskStore', useSQLite: true, ...(name === 'b' ? { scriptName: 'a' } : {}) } },
    unsafeDirectSockets: [{ host: '127.0.0.1', port: 0 }],
  });
  const mf = new Miniflare({
    workers: [worker('a', '/a'), worker('b', '/b')],
    durableObjectsPersist: dir,
    host: '127.0.0.1',
    port: 0,
  });
  await withTimeout(mf.ready, 30_000, 'Miniflare start');
  const a = (await mf.unsafeGetDirectURL('a')).href.replace(/\/$/, '');
  const b = (await mf.unsafeGetDirectURL('b')).href.replace(/\/$/, '');
  return { mf, a, b };
}

