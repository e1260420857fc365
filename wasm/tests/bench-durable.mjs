// Figures, not a test: createA2AHandler in workerd (Miniflare) with the
// Durable Object store (toolnexus-wasm/durable) vs the memory store.
// Prints requests/s and p50 for SendMessage (blocking, echo), GetTask and a
// streamed task (SendStreamingMessage read to its end), and the cold start
// (new Miniflare to the first SendMessage answered).
//
// Usage (after wasm/build.sh and wasm/test.sh's install, which sets
// TOOLNEXUS_WASM_APP; or with wasm/pkg built):
//   node wasm/tests/bench-durable.mjs [seconds per figure, default 5] [concurrency, default 8]

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { startPair, workerModules } from './durable-helpers.mjs';

const SECONDS = Number(process.argv[2] ?? 5);
const CONCURRENCY = Number(process.argv[3] ?? 8);

const MEMORY_WORKER = `
import { createA2AHandler } from "toolnexus-wasm";
let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({ a2a: { name: "mem-agent" }, client: "echo" });
    return handler(request, env, ctx);
  },
};
`;
const DO_ECHO_WORKER = `
import { createA2AHandler } from "toolnexus-wasm";
import { A2ATaskStore, durableObjectStore } from "toolnexus-wasm/durable";
export { A2ATaskStore };
let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({ a2a: { name: "do-agent" }, client: "echo", store: durableObjectStore(env.TASKS) });
    return handler(request, env, ctx);
  },
};
`;

const body = (method, params) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
const headers = { 'content-type': 'application/json', 'A2A-Version': '1.0' };
const msg = (text) => ({ message: { role: 'ROLE_USER', messageId: crypto.randomUUID(), parts: [{ text }] } });
const post = (url, method, params) => fetch(`${url}/`, { method: 'POST', headers, body: body(method, params) });

async function measure(name, fn) {
  const lat = [];
  let errors = 0;
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < end) {
      const t = performance.now();
      try { await fn(); } catch { errors++; }
      lat.push(performance.now() - t);
    }
  }));
  lat.sort((x, y) => x - y);
  const p = (q) => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))].toFixed(1);
  console.log(`${name.padEnd(34)} ${(lat.length / SECONDS).toFixed(0).padStart(6)} req/s  p50 ${p(0.5)} ms  p99 ${p(0.99)} ms${errors ? `  errors ${errors}` : ''}`);
}

async function figures(label, url) {
  const send = async () => {
    const r = await (await post(url, 'SendMessage', msg('bench'))).json();
    if (r.result?.task?.status?.state !== 'TASK_STATE_COMPLETED') throw new Error(JSON.stringify(r));
    return r.result.task.id;
  };
  const id = await send();
  await measure(`${label} SendMessage`, send);
  await measure(`${label} GetTask`, async () => {
    const r = await (await post(url, 'GetTask', { id })).json();
    if (!r.result) throw new Error(JSON.stringify(r));
  });
  await measure(`${label} streamed task`, async () => {
    const text = await (await post(url, 'SendStreamingMessage', msg('bench stream'))).text();
    if (!text.includes('TASK_STATE_COMPLETED')) throw new Error(text);
  });
}

const dir = mkdtempSync(join(tmpdir(), 'toolnexus-do-bench-'));
try {
  console.log(`workerd via Miniflare, ${SECONDS} s per figure, ${CONCURRENCY} concurrent callers, echo model`);
  // Cold start: Miniflare up, first SendMessage answered.
  for (const [label, start] of [
    ['memory', async () => {
      const mf = new Miniflare({ ...workerModules(MEMORY_WORKER), compatibilityDate: '2026-04-01', host: '127.0.0.1', port: 0 });
      return { mf, url: (await mf.ready).href.replace(/\/$/, '') };
    }],
    ['durable', async () => {
      const p = await startPair(mkdtempSync(join(dir, 'cold-')), { source: DO_ECHO_WORKER });
      return { mf: p.mf, url: p.a, b: p.b };
    }],
  ]) {
    const t0 = performance.now();
    const w = await start();
    const ready = performance.now() - t0;
    const r = await (await post(w.url, 'SendMessage', msg('first'))).json();
    if (!r.result) throw new Error(JSON.stringify(r));
    console.log(`${label.padEnd(8)} cold start: Miniflare ready ${ready.toFixed(0)} ms, first answer ${(performance.now() - t0).toFixed(0)} ms`);
    await figures(label, w.url);
    await w.mf.dispose();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
