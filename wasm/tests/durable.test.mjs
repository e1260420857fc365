// createA2AHandler on Durable Objects (toolnexus-wasm/durable) in workerd
// through Miniflare, driven only through HTTP.
//
// Two workers serve the same agent on one A2ATaskStore namespace: two
// isolates that share nothing but the Durable Objects, as the platform's
// isolates do. Each test sends to one and reads, cancels or subscribes
// through the other. Storage persists in a temp dir, so a restart of
// Miniflare keeps every acknowledged task.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { freePort, killChildren, listen, run, TOOLNEXUS, withTimeout } from './helpers.mjs';
import { startPair, workerModules } from './durable-helpers.mjs';
const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
  await killChildren();
});

let pair;
let persist;
async function shared() {
  if (pair) return pair;
  persist = mkdtempSync(join(tmpdir(), 'toolnexus-do-'));
  cleanups.push(() => rmSync(persist, { recursive: true, force: true }));
  pair = await startPair(persist);
  cleanups.push(() => pair.mf.dispose());
  return pair;
}

/** A JSON-RPC call (A2A 1.0) to `base`; the parsed answer. */
async function rpc(base, method, params, { token, signal } = {}) {
  const headers = { 'content-type': 'application/json', 'A2A-Version': '1.0' };
  if (token) headers.authorization = `Bearer ${token}`;
  const resp = await fetch(`${base}/`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), signal: signal ?? AbortSignal.timeout(20_000) })
    .catch((e) => { throw new Error(`${method}: ${e.message}`); });
  return resp.json();
}
const message = (text, messageId = crypto.randomUUID()) => ({ role: 'ROLE_USER', messageId, parts: [{ text }] });
const sendNow = (base, text, opts) => rpc(base, 'SendMessage', { message: message(text), configuration: { returnImmediately: true } }, opts);
const chunksOf = (task) => (task.artifacts ?? []).flatMap((a) => a.parts.map((p) => p.text ?? p.content?.value));

/** The official @a2a-js/sdk client (tests/peers/js), loaded in this process. */
function sdk() {
  const req = createRequire(fileURLToPath(new URL('../../tests/peers/js/package.json', import.meta.url)));
  return { sdk: req('@a2a-js/sdk'), client: req('@a2a-js/sdk/client') };
}
async function sdkClient(base) {
  const { client: c } = sdk();
  const factory = new c.ClientFactory(c.ClientFactoryOptions.default);
  return factory.createFromUrl(`${base}/.well-known/agent-card.json`, '');
}

/** The text parts of an SDK artifact. */
const sdkParts = (artifact) => (artifact?.parts ?? []).filter((p) => p?.content?.$case === 'text').map((p) => p.content.value);

test('stream then resubscribe across isolates: the official JS SDK client streams a 2 s task from one, drops it, subscribes through the other, and gets every remaining chunk once and the terminal state', async () => {
  const { a, b } = await shared();
  const N = 10;
  const { sdk: types } = sdk();
  const first = await sdkClient(a);
  const abort = new AbortController();
  const seenFirst = [];
  let taskId;
  const stream = first.sendMessageStream({
    message: { messageId: crypto.randomUUID(), role: types.Role.ROLE_USER, parts: [{ content: { $case: 'text', value: `chunks ${N} 200` } }] },
  }, { signal: abort.signal });
  try {
    for await (const ev of stream) {
      const p = ev.payload;
      if (p.$case === 'task') taskId = p.value.id;
      if (p.$case === 'statusUpdate') taskId ??= p.value.taskId;
      if (p.$case === 'artifactUpdate') seenFirst.push(...sdkParts(p.value.artifact));
      if (seenFirst.length >= 3) { abort.abort(); break; }
    }
  } catch (e) {
    if (!abort.signal.aborted) throw e;
  }
  assert.ok(taskId, 'the stream named its task');
  assert.deepEqual(seenFirst, ['c0 ', 'c1 ', 'c2 '], 'the first stream, in order');

  const second = await sdkClient(b);
  let snapshot;
  const later = [];
  let terminal;
  for await (const ev of second.resubscribeTask({ tenant: '', id: taskId }, { signal: AbortSignal.timeout(20_000) })) {
    const p = ev.payload;
    if (p.$case === 'task') snapshot = p.value;
    if (p.$case === 'artifactUpdate') later.push(...sdkParts(p.value.artifact));
    if (p.$case === 'statusUpdate' && p.value.status.state === types.TaskState.TASK_STATE_COMPLETED) terminal = p.value;
  }
  assert.ok(snapshot, 'the subscription starts with the task as stored');
  const before = (snapshot.artifacts ?? []).flatMap(sdkParts);
  // What the snapshot holds, then every later chunk exactly once, in order.
  assert.ok(before.length >= 3, JSON.stringify(before));
  assert.deepEqual([...before, ...later], Array.from({ length: N }, (_, i) => `c${i} `));
  assert.ok(terminal, 'the terminal status came through the other isolate');
  const got = await rpc(a, 'GetTask', { id: taskId });
  assert.equal(got.result.status.state, 'TASK_STATE_COMPLETED');
});

test('one task store for every request: a task made through one isolate is found by GetTask, ListTasks, SubscribeToTask and CancelTask through the other, and after a restart with the same storage', async () => {
  const { a, b } = await shared();
  const done = await rpc(a, 'SendMessage', { message: message('kept one') });
  const doneId = done.result.task.id;
  assert.equal(done.result.task.status.state, 'TASK_STATE_COMPLETED');
  const got = await rpc(b, 'GetTask', { id: doneId });
  assert.equal(got.result.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(got));
  const listed = await rpc(b, 'ListTasks', { pageSize: 100 });
  assert.ok(listed.result.tasks.some((t) => t.id === doneId), JSON.stringify(listed));
  // A running task: SubscribeToTask through b streams it; CancelTask through b settles it.
  const running = await sendNow(a, 'chunks 200 50');
  const runningId = running.result.task.id;
  const sub = await fetch(`${b}/`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'A2A-Version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: runningId } }),
  });
  assert.equal(sub.status, 200);
  assert.match(sub.headers.get('content-type'), /text\/event-stream/);
  const canceled = await rpc(b, 'CancelTask', { id: runningId });
  assert.equal(canceled.result?.status?.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled));
  const frames = await withTimeout(sub.text(), 20_000, 'the subscription ends');
  assert.match(frames, /TASK_STATE_CANCELED/);

  // Restart: every acknowledged task is still there.
  await pair.mf.dispose();
  pair = await startPair(persist);
  const again = await rpc(pair.b, 'GetTask', { id: doneId });
  assert.deepEqual(chunksOf(again.result), ['kept one'].map((t) => `echo: ${t}`));
  assert.equal((await rpc(pair.a, 'GetTask', { id: runningId })).result.status.state, 'TASK_STATE_CANCELED');
  const page = await rpc(pair.a, 'ListTasks', { pageSize: 100 });
  assert.ok([doneId, runningId].every((id) => page.result.tasks.some((t) => t.id === id)), JSON.stringify(page));
});

test('after a restart with the same storage (Miniflare persist): every acknowledged task is found by GetTask, ListTasks, SubscribeToTask and CancelTask, and push configs kept in the Durable Object deliver again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolnexus-do-restart-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const hooks = [];
  const hook = await listen((req, res, body) => {
    hooks.push({ auth: req.headers['x-a2a-notification-token'] ?? req.headers.authorization, body: JSON.parse(body.toString()) });
    res.end();
  });
  cleanups.push(hook.close);
  let p = await startPair(dir);
  const done = [];
  for (let i = 0; i < 12; i++) {
    const r = await rpc(i % 2 ? p.a : p.b, 'SendMessage', { message: message(`kept ${i}`) });
    assert.equal(r.result?.task?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(r));
    done.push(r.result.task.id);
  }
  // Two tasks waiting for their caller (input-required): one answered after
  // the restart (its push config set before it), one canceled after it.
  const asked = (await rpc(p.a, 'SendMessage', { message: message('ask') })).result.task;
  const toCancel = (await rpc(p.b, 'SendMessage', { message: message('ask') })).result.task;
  for (const t of [asked, toCancel]) assert.equal(t.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(t));
  const set = await rpc(p.a, 'CreateTaskPushNotificationConfig', { taskId: asked.id, url: `${hook.url}/hook`, token: 'restart-token' });
  assert.ok(set.result, JSON.stringify(set));

  await p.mf.dispose();
  p = await startPair(dir);
  cleanups.push(() => p.mf.dispose());

  // GetTask and ListTasks find every acknowledged task, through either isolate.
  for (let k = 0; k < done.length; k++) {
    const t = (await rpc(k % 2 ? p.b : p.a, 'GetTask', { id: done[k] })).result;
    assert.equal(t?.status?.state, 'TASK_STATE_COMPLETED', `task ${k}: ${JSON.stringify(t)}`);
    assert.deepEqual(chunksOf(t), [`echo: kept ${k}`]);
  }
  const listed = new Set();
  let pageToken = '';
  for (let k = 0; k < 10; k++) {
    const r = await rpc(k % 2 ? p.a : p.b, 'ListTasks', { pageSize: 5, pageToken });
    for (const t of r.result.tasks) listed.add(t.id);
    pageToken = r.result.nextPageToken;
    if (!pageToken) break;
  }
  for (const id of [...done, asked.id, toCancel.id]) assert.ok(listed.has(id), `ListTasks lists ${id}`);
  // SubscribeToTask streams the stored task; CancelTask settles it.
  const sub = await fetch(`${p.b}/`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'A2A-Version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: toCancel.id } }),
    signal: AbortSignal.timeout(20_000),
  });
  assert.equal(sub.status, 200);
  const frames = await withTimeout(sub.text(), 20_000, 'the subscription ends');
  assert.match(frames, new RegExp(toCancel.id));
  assert.match(frames, /TASK_STATE_INPUT_REQUIRED/);
  const canceled = await rpc(p.a, 'CancelTask', { id: toCancel.id });
  assert.equal(canceled.result?.status?.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled));
  assert.equal((await rpc(p.b, 'GetTask', { id: toCancel.id })).result.status.state, 'TASK_STATE_CANCELED');

  // The push config set before the restart is read from the Durable Object
  // and the answered task's completion is delivered to the webhook.
  const configs = await rpc(p.b, 'ListTaskPushNotificationConfigs', { taskId: asked.id });
  assert.equal(configs.result?.configs?.[0]?.url, `${hook.url}/hook`, JSON.stringify(configs));
  const answered = await rpc(p.b, 'SendMessage', { message: { ...message('Paris'), taskId: asked.id, contextId: asked.contextId } });
  assert.equal(answered.result?.task?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(answered));
  assert.deepEqual(chunksOf(answered.result.task), ['answered: Paris']);
  const deadline = Date.now() + 20_000;
  const completedHook = () => hooks.find((h) => JSON.stringify(h.body).includes(asked.id) && JSON.stringify(h.body).includes('COMPLETED'));
  while (!completedHook() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.ok(completedHook(), JSON.stringify(hooks));
  assert.match(String(completedHook().auth), /restart-token/);
});

test('CancelTask of a running task answers at once, through the isolate running it and through another (issue 20: it hung until workerd cut it off)', async () => {
  const { a, b } = await shared();
  for (const via of [a, b]) {
    const sent = await sendNow(a, 'chunks 400 25');
    const id = sent.result.task.id;
    const canceled = await rpc(via, 'CancelTask', { id }, { signal: AbortSignal.timeout(10_000) });
    assert.equal(canceled.result?.status?.state, 'TASK_STATE_CANCELED', JSON.stringify(canceled));
  }
});

test('cancel races: a cancel while the task produces events ends canceled and stays so', async () => {
  const { a, b } = await shared();
  const races = Number(process.env.TOOLNEXUS_CANCEL_RACES ?? 200);
  const ids = [];
  const one = async (i) => {
    const sent = await sendNow(a, `chunks ${5 + (i % 7)} ${1 + (i % 3)}`);
    const id = sent.result.task.id;
    ids[i] = id;
    const answer = await rpc(i % 2 ? a : b, 'CancelTask', { id });
    // Canceled, or already finished before the cancel arrived (not cancelable).
    if (answer.error) assert.equal(answer.error.code, -32002, JSON.stringify(answer));
    return answer.error ? 'finished' : 'canceled';
  };
  const outcomes = [];
  for (let i = 0; i < races; i += 10) {
    outcomes.push(...await Promise.all(Array.from({ length: Math.min(10, races - i) }, (_, k) => one(i + k))));
  }
  assert.ok(outcomes.filter((o) => o === 'canceled').length > races / 2, `most cancels land: ${outcomes.filter((o) => o === 'canceled').length}/${races}`);
  // Each task's last chunk would come within 11 × 3 ms: read them all again.
  for (let k = 0; k < ids.length; k++) {
    const t = (await rpc(k % 2 ? a : b, 'GetTask', { id: ids[k] })).result;
    const want = outcomes[k] === 'canceled' ? 'TASK_STATE_CANCELED' : 'TASK_STATE_COMPLETED';
    assert.equal(t.status.state, want, `race ${k}: ${JSON.stringify(t.status)}`);
  }
});

test('push configs are kept in the Durable Object: set through one isolate, read through the other, delivered to the webhook', async () => {
  const { a, b } = await shared();
  const hooks = [];
  const hook = await listen((req, res, body) => {
    hooks.push(JSON.parse(body.toString()));
    res.end();
  });
  cleanups.push(hook.close);
  const sent = await sendNow(a, 'chunks 5 100');
  const id = sent.result.task.id;
  const set = await rpc(a, 'CreateTaskPushNotificationConfig', { taskId: id, url: `${hook.url}/hook`, token: 'do-token' });
  assert.ok(set.result, JSON.stringify(set));
  const got = await rpc(b, 'ListTaskPushNotificationConfigs', { taskId: id });
  assert.equal(got.result?.configs?.length, 1, JSON.stringify(got));
  assert.equal(got.result.configs[0].url, `${hook.url}/hook`);
  const deadline = Date.now() + 20_000;
  while (!hooks.some((h) => JSON.stringify(h).includes('COMPLETED')) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(hooks.some((h) => JSON.stringify(h).includes('COMPLETED')), JSON.stringify(hooks));
});

test('with authenticate, ListTasks is per owner across the shards, through either isolate', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolnexus-do-auth-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const p = await startPair(dir, { bindings: { AUTH: '1' } });
  cleanups.push(() => p.mf.dispose());
  const mine = { alice: [], bob: [] };
  for (let i = 0; i < 12; i++) {
    const who = i % 3 ? 'alice' : 'bob';
    const r = await rpc(i % 2 ? p.a : p.b, 'SendMessage', { message: message(`task ${i}`) }, { token: who });
    mine[who].push(r.result.task.id);
  }
  for (const who of ['alice', 'bob']) {
    // Pages of 3 through alternating isolates, by the cursor.
    const seen = [];
    let pageToken = '';
    for (let k = 0; k < 10; k++) {
      const r = await rpc(k % 2 ? p.a : p.b, 'ListTasks', { pageSize: 3, pageToken }, { token: who });
      assert.equal(r.result.totalSize, mine[who].length, JSON.stringify(r));
      seen.push(...r.result.tasks.map((t) => t.id));
      pageToken = r.result.nextPageToken;
      if (!pageToken) break;
    }
    assert.deepEqual([...seen].sort(), [...mine[who]].sort(), `${who} sees exactly their tasks, once`);
  }
  // Another owner's task is not found.
  const other = await rpc(p.a, 'GetTask', { id: mine.alice[0] }, { token: 'bob' });
  assert.equal(other.error?.code, -32001, JSON.stringify(other));
});

test('a task whose isolate died (Miniflare stopped mid-task) is settled once its lease runs out, never left working', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolnexus-do-lease-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const bindings = { LEASE_MS: '1500' };
  let p = await startPair(dir, { bindings });
  const sent = await sendNow(p.a, 'chunks 1000 50');
  const id = sent.result.task.id;
  // Running: a few chunks stored.
  for (let i = 0; i < 100; i++) {
    const t = (await rpc(p.b, 'GetTask', { id })).result;
    if (chunksOf(t).length >= 2) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await p.mf.dispose();
  p = await startPair(dir, { bindings });
  cleanups.push(() => p.mf.dispose());
  // Read until the lease has run out and a read (or the sweep) failed it.
  let t;
  for (let i = 0; i < 200; i++) {
    t = (await rpc(i % 2 ? p.a : p.b, 'GetTask', { id })).result;
    if (t.status.state !== 'TASK_STATE_WORKING') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(t.status.state, 'TASK_STATE_FAILED', JSON.stringify(t.status));
  assert.match(JSON.stringify(t.status.message), /the server stopped before this task finished/);
  assert.ok(chunksOf(t).length >= 2, 'what was stored before stays');
});

test('retention is the handler option (retentionMs, through the core sweep): the objects delete the finished tasks past it, and keep the unfinished', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolnexus-do-retention-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  // A sweep at most every 300 ms per isolate (once a lease period); finished
  // tasks are kept 1 s.
  const p = await startPair(dir, { bindings: { LEASE_MS: '300', RETENTION_MS: '1000' } });
  cleanups.push(() => p.mf.dispose());
  const finished = (await rpc(p.a, 'SendMessage', { message: message('short-lived') })).result.task;
  const waiting = (await rpc(p.a, 'SendMessage', { message: message('ask') })).result.task;
  assert.equal(finished.status.state, 'TASK_STATE_COMPLETED');
  assert.equal(waiting.status.state, 'TASK_STATE_INPUT_REQUIRED');
  assert.equal((await rpc(p.b, 'GetTask', { id: finished.id })).result?.status?.state, 'TASK_STATE_COMPLETED', 'kept while younger than retentionMs');
  let gone;
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 100));
    gone = await rpc(i % 2 ? p.a : p.b, 'GetTask', { id: finished.id });
    if (gone.error) break;
  }
  assert.equal(gone.error?.code, -32001, JSON.stringify(gone));
  const kept = await rpc(p.b, 'GetTask', { id: waiting.id });
  assert.equal(kept.result?.status?.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(kept));
});

test('messageId de-duplication: a retried send with the same messageId makes no second task', async () => {
  const { a, b } = await shared();
  const m = message('once only');
  const first = await rpc(a, 'SendMessage', { message: m });
  assert.equal(first.result.task.status.state, 'TASK_STATE_COMPLETED');
  const retried = await rpc(b, 'SendMessage', { message: m });
  assert.ok(retried.error, JSON.stringify(retried));
  const listed = await rpc(a, 'ListTasks', { pageSize: 100 });
  const named = listed.result.tasks.filter((t) => t.history?.[0]?.messageId === m.messageId);
  assert.equal(named.length, 1, JSON.stringify(named));
});

test('toolnexus call completes a task against the Durable Object-backed worker', async () => {
  const { a } = await shared();
  const r = await run(TOOLNEXUS, ['call', '--no-cache', `${a}/.well-known/agent-card.json`, 'chunks', 'hello do', '--poll-every', '50'], { timeout: 60_000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(JSON.parse(r.stdout).output, 'echo: hello do');
});

/** The worker template (wasm/worker) as wrangler bundles it: its entry, the example SKILL.md texts. */
function templateModules(root) {
  const repo = fileURLToPath(new URL('../../', import.meta.url));
  const extra = ['hello-world', 'summarize'].map((name) => ({
    type: 'Text',
    path: posix.join(root, `examples/skills/${name}/SKILL.md`),
    contents: readFileSync(join(repo, `examples/skills/${name}/SKILL.md`), 'utf8'),
  }));
  const source = readFileSync(join(repo, 'wasm/worker/src/index.js'), 'utf8');
  return workerModules(source, root, { entry: 'wasm/worker/src/index.js', extra });
}

test('the worker template (wasm/worker) serves the example skills with the echo model; toolnexus call completes a task against it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolnexus-template-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const toml = readFileSync(fileURLToPath(new URL('../worker/wrangler.toml', import.meta.url)), 'utf8');
  assert.match(toml, /TOOLNEXUS_LLM = "echo"/);
  const p = await startPair(dir, { modules: templateModules, bindings: { TOOLNEXUS_LLM: 'echo' } });
  cleanups.push(() => p.mf.dispose());
  const cardUrl = `${p.a}/.well-known/agent-card.json`;
  const card = await (await fetch(cardUrl)).json();
  assert.deepEqual(card.skills.map((s) => s.id), ['hello-world', 'summarize']);
  const r = await run(TOOLNEXUS, ['call', '--no-cache', cardUrl, 'hello-world', 'hi from the template', '--poll-every', '50'], { timeout: 60_000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.isError, false, r.stdout);
  assert.match(out.output, /hi from the template/);
  // The task is in the Durable Objects: the other isolate finds it.
  const got = await rpc(p.b, 'GetTask', { id: out.metadata.taskId });
  assert.equal(got.result.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(got));
});

test('the worker template starts with `npx wrangler dev` as wasm/README.md says (wasm/worker, npm ci done by wasm/test.sh), and toolnexus call completes a task against it', async () => {
  const worker = fileURLToPath(new URL('../worker/', import.meta.url));
  assert.ok(existsSync(join(worker, 'node_modules', '.bin', 'wrangler')), 'wasm/worker has its packages (npm ci, as wasm/test.sh does)');
  const dir = mkdtempSync(join(tmpdir(), 'toolnexus-wrangler-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  // Its own process group, so wrangler and its workerd children end together.
  const child = spawn('npx', ['wrangler', 'dev', '--ip', '127.0.0.1', '--port', String(port), '--persist-to', dir], {
    cwd: worker,
    detached: true,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_HIDE_BANNER: 'true', CI: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const stop = () => new Promise((ok) => {
    if (child.exitCode !== null || child.signalCode !== null) return ok();
    const force = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch {} }, 5000);
    child.once('exit', () => { clearTimeout(force); ok(); });
    try { process.kill(-child.pid, 'SIGTERM'); } catch { ok(); }
  });
  cleanups.push(stop);
  await withTimeout(new Promise((ok, fail) => {
    const check = () => (/Ready on/.test(out) ? ok() : null);
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    child.once('exit', (code) => fail(new Error(`wrangler dev exited with ${code}\n${out}`)));
  }), 90_000, `npx wrangler dev\n${out}`);
  const cardUrl = `http://127.0.0.1:${port}/.well-known/agent-card.json`;
  const r = await run(TOOLNEXUS, ['call', '--no-cache', cardUrl, 'hello-world', 'hi from wrangler', '--poll-every', '50'], { timeout: 60_000 });
  assert.equal(r.code, 0, r.stdout + r.stderr + out);
  const answer = JSON.parse(r.stdout);
  assert.equal(answer.isError, false, r.stdout);
  assert.equal(answer.metadata.state, 'completed');
  assert.match(answer.output, /hi from wrangler/);
  await stop();
});
