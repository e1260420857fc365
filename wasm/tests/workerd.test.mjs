// workerd through Miniflare: workers built on the package as installed from
// the tarball. The package's "workerd" export is resolved from its exports
// map, as wrangler's bundler does, and its .wasm is loaded as a CompiledWasm
// module (the web glue + initSync).
//
// - a worker serving skills with createA2AHandler (its stub LLM reached with
//   fetch) is called by the native client (toolnexus call) and by the
//   official @a2a-js/sdk 1.3.0 client, in A2A 1.0 and 0.3;
// - a worker calls a peer through agentTools, and follows a streaming peer's events;
// - both entries import in workerd; the cold start is measured.

import { after, test } from 'node:test';
import http from 'node:http';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { Miniflare } from 'miniflare';
import {
  killChildren, pkgDir, run, startJsSdkServer, startPeer, startStubLlm, TOOLNEXUS, withTimeout,
} from './helpers.mjs';

const COMPAT_DATE = '2026-04-01';
const SDK_CLIENT = fileURLToPath(new URL('../../tests/peers/js/client.mjs', import.meta.url));
const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
  await killChildren();
});

/**
 * The modules of a worker whose source imports "toolnexus-wasm" (and
 * "/client"): the worker, the package's files, and one alias module per entry
 * named by its bare specifier and pointing at the "workerd" export.
 */
function workerModules(source) {
  const root = '/worker';
  const pkg = JSON.parse(readFileSync(join(pkgDir(), 'package.json'), 'utf8'));
  const modules = [{ type: 'ESModule', path: `${root}/worker.js`, contents: source }];
  for (const [specifier, subpath] of [['toolnexus-wasm', '.'], ['toolnexus-wasm/client', './client'], ['toolnexus-wasm/skills', './skills']]) {
    const target = posix.join('node_modules/toolnexus-wasm', pkg.exports[subpath].workerd.default);
    let rel = posix.relative(posix.dirname(specifier), target);
    if (!rel.startsWith('.')) rel = `./${rel}`;
    modules.push({ type: 'ESModule', path: `${root}/${specifier}`, contents: `export * from "${rel}";\n` });
  }
  for (const variant of readdirSync(join(pkgDir(), 'dist'))) {
    for (const file of readdirSync(join(pkgDir(), 'dist', variant))) {
      const path = `${root}/node_modules/toolnexus-wasm/dist/${variant}/${file}`;
      const bytes = readFileSync(join(pkgDir(), 'dist', variant, file));
      if (file.endsWith('.wasm')) modules.push({ type: 'CompiledWasm', path, contents: bytes });
      else if (file.endsWith('.js')) modules.push({ type: 'ESModule', path, contents: bytes.toString() });
    }
  }
  return { modules, modulesRoot: root };
}

/** Starts a worker listening on 127.0.0.1; returns {mf, url, readyMs}. */
async function startWorker(source, bindings = {}) {
  const t0 = performance.now();
  const mf = new Miniflare({
    ...workerModules(source),
    compatibilityDate: COMPAT_DATE,
    bindings,
    host: '127.0.0.1',
    port: 0,
  });
  cleanups.push(() => mf.dispose());
  const url = await withTimeout(mf.ready, 30_000, 'Miniflare start');
  return { mf, url: url.href.replace(/\/$/, ''), readyMs: performance.now() - t0 };
}

const SERVING_WORKER = `
import { createA2AHandler, createClient } from "toolnexus-wasm";
import { parseSkillMd } from "toolnexus-wasm/skills";

// One skill as data, one from a SKILL.md text (the skills entry's own .wasm).
const skills = [
  { name: "hello-world", description: "Greets people", content: "Say hello warmly.\\nThen stop." },
  parseSkillMd("---\\nname: summarize\\ndescription: Summarizes text\\n---\\nOne line only.\\n"),
];
let handler;

export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({
      skills,
      client: createClient({ baseUrl: env.LLM_URL, style: "openai", model: "stub-model" }),
      a2a: { name: "edge-agent", description: "Skills served from workerd" },
    });
    return handler(request, env, ctx);
  },
};
`;

let serving;
async function servingWorker() {
  if (serving) return serving;
  const llm = await startStubLlm(undefined, { delayMs: 40 });
  cleanups.push(llm.close);
  const worker = await startWorker(SERVING_WORKER, { LLM_URL: llm.baseUrl });
  serving = { ...worker, llm, cardUrl: `${worker.url}/.well-known/agent-card.json` };
  return serving;
}

/**
 * One message through the official @a2a-js/sdk 1.3.0 client: the repo's
 * shared peer client (tests/peers/js/client.mjs), which polls GetTask (≤ 10 s)
 * unless the reply is final and prints {state, text}.
 */
async function sdkCall(cardUrl, text, { legacy = false, nonBlocking = false, stream = false } = {}) {
  const args = [SDK_CLIENT, cardUrl, text];
  if (legacy) args.push('--legacy');
  if (nonBlocking) args.push('--non-blocking');
  if (stream) args.push('--stream');
  const { code, stdout, stderr } = await run(process.execPath, args, { timeout: 30_000 });
  assert.equal(code, 0, `the SDK client failed (exit ${code}): ${stderr}${stdout}`);
  return JSON.parse(stdout.trim().split('\n').pop());
}

test('a worker serving skills (createA2AHandler, stub LLM behind fetch) is called by the native client', async () => {
  const w = await servingWorker();
  const card = await (await fetch(w.cardUrl)).json();
  assert.equal(card.name, 'edge-agent');
  assert.equal(card.url, `${w.url}/`);
  assert.deepEqual(card.skills.map((s) => s.id), ['hello-world', 'summarize']);
  // Non-blocking SendMessage + GetTask polls: the task runs after the
  // response, kept alive by ctx.waitUntil.
  const r = await run(TOOLNEXUS, ['call', w.cardUrl, 'hello-world', 'greet the edge', '--poll-every', '50'], { timeout: 60_000 });
  assert.equal(r.code, 0, `toolnexus call: ${r.stdout}\n${r.stderr}`);
  const result = JSON.parse(r.stdout);
  assert.equal(result.isError, false);
  assert.equal(result.output, 'stub answer [Say hello warmly.] to: greet the edge');
  assert.equal(result.metadata.agent, 'edge-agent');
  assert.ok(w.llm.calls.length >= 2, 'the worker called the stub model twice (skill, then answer)');
});

test('the official @a2a-js/sdk client calls the worker (A2A 1.0 blocking, 0.3 non-blocking)', async () => {
  const w = await servingWorker();
  const v10 = await sdkCall(w.cardUrl, 'sdk says hi');
  assert.deepEqual([v10.state, v10.text], ['completed', 'stub answer [Say hello warmly.] to: sdk says hi']);
  const v03 = await sdkCall(w.cardUrl, 'legacy hi', { legacy: true, nonBlocking: true });
  assert.deepEqual([v03.state, v03.text], ['completed', 'stub answer [Say hello warmly.] to: legacy hi']);
});

test('the official @a2a-js/sdk client streams from the worker (A2A 1.0 and 0.3 SSE)', async () => {
  const w = await servingWorker();
  for (const legacy of [false, true]) {
    const text = `stream hi ${legacy ? '0.3' : '1.0'}`;
    const r = await sdkCall(w.cardUrl, text, { stream: true, legacy });
    assert.deepEqual([r.state, r.text], ['completed', `stub answer [Say hello warmly.] to: ${text}`], JSON.stringify(r));
    const kinds = r.events.map((e) => `${e.kind}:${e.state}`);
    assert.equal(kinds[0], 'task:submitted', kinds.join(' '));
    assert.equal(kinds.at(-1), 'status-update:completed', kinds.join(' '));
    const between = r.events.slice(1, -1);
    assert.ok(between.length >= 1, `an intermediate event: ${kinds.join(' ')}`);
    // The model loaded the skill: a working status naming it came first.
    assert.ok(between.some((e) => e.kind === 'status-update' && /hello-world/.test(e.text ?? '')), JSON.stringify(r.events));
    assert.ok(between.every((e) => e.t_ms <= r.events.at(-1).t_ms));
  }
});

const ASKING_WORKER = `
import { createA2AHandler } from "toolnexus-wasm";

let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({
      skills: [{ name: "trips", description: "Books trips", content: "Ask where to." }],
      client: async (req) => {
        const asked = req.history.at(-1);
        if (asked?.role === "agent" && asked.text === "Which city?") return "booked for " + req.text;
        return { inputRequired: "Which city?" };
      },
      a2a: { name: "edge-asks" },
    });
    return handler(request, env, ctx);
  },
};
`;

test('a worker asks (a JS fulfiller returns {inputRequired}); the SDK client and toolnexus call answer on the same task', async () => {
  const w = await startWorker(ASKING_WORKER);
  const cardUrl = `${w.url}/.well-known/agent-card.json`;
  for (const extra of [[], ['--legacy'], ['--stream']]) {
    const { code, stdout, stderr } = await run(process.execPath, [SDK_CLIENT, cardUrl, 'book a trip', '--answer', 'Paris', ...extra], { timeout: 30_000 });
    assert.equal(code, 0, `the SDK client ${extra}: ${stderr}${stdout}`);
    const r = JSON.parse(stdout.trim().split('\n').pop());
    assert.deepEqual([r.state, r.text, r.asked, r.sameTask], ['completed', 'booked for Paris', 'Which city?', true], stdout);
  }
  const asked = await run(TOOLNEXUS, ['call', '--no-cache', cardUrl, 'trips', 'book a trip'], { timeout: 60_000 });
  assert.equal(asked.code, 2, asked.stdout + asked.stderr);
  const q = JSON.parse(asked.stdout);
  assert.equal(q.metadata.state, 'input-required');
  assert.match(q.output, /input-required: Which city\?$/);
  const done = await run(TOOLNEXUS, ['call', '--no-cache', '--task-id', q.metadata.taskId, '--context-id', q.metadata.contextId, cardUrl, 'trips', 'Oslo'], { timeout: 60_000 });
  assert.equal(done.code, 0, done.stdout + done.stderr);
  const r = JSON.parse(done.stdout);
  assert.equal(r.output, 'booked for Oslo');
  assert.equal(r.metadata.taskId, q.metadata.taskId);
});

const ECHO_WORKER = `
import { createA2AHandler } from "toolnexus-wasm";

let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({ client: "echo", skills: [{ name: "echo", description: "Echoes the task" }] });
    return handler(request, env, ctx);
  },
};
`;

test('a worker answers A2A strictly (fields, versions, details, extended card, ETag, parts), and the SDK client lists its tasks', async () => {
  const w = await startWorker(ECHO_WORKER);
  const rpc = async (method, params, { version = '1.0', query = '' } = {}) => {
    const headers = { 'content-type': 'application/json' };
    if (version) headers['A2A-Version'] = version;
    const resp = await fetch(`${w.url}/${query}`, {
      method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return resp.json();
  };
  const noId = await rpc('SendMessage', { message: { role: 'ROLE_USER', parts: [{ text: 'x' }] } });
  assert.equal(noId.error.code, -32602, JSON.stringify(noId));
  assert.equal(noId.error.data[1].fieldViolations[0].field, 'message.messageId');
  const v03 = { role: 'user', messageId: 'm03', parts: [{ kind: 'text', text: 'hi' }] };
  assert.equal((await rpc('SendMessage', { message: v03 }, { version: null, query: '?A2A-Version=1.0' })).result.task.status.state, 'TASK_STATE_COMPLETED');
  assert.equal((await rpc('SendMessage', { message: v03 }, { version: '2.0' })).error.code, -32009);
  assert.equal((await rpc('GetExtendedAgentCard', {})).error.code, -32004);
  const parts = [{ text: 'look' }, { url: 'https://files.example/r.pdf', mediaType: 'application/pdf', filename: 'r.pdf' }, { data: { k: [1, 2] } }];
  const sent = await rpc('SendMessage', { message: { role: 'ROLE_USER', messageId: 'm10', parts } });
  assert.deepEqual((await rpc('GetTask', { id: sent.result.task.id })).result.history[0].parts, parts);
  const cardUrl = `${w.url}/.well-known/agent-card.json`;
  const etag = (await fetch(cardUrl)).headers.get('etag');
  assert.ok(etag, 'an ETag');
  assert.equal((await fetch(cardUrl, { headers: { 'If-None-Match': etag } })).status, 304);

  const { code, stdout, stderr } = await run(process.execPath, [SDK_CLIENT, cardUrl, 'list me', '--list'], { timeout: 30_000 });
  assert.equal(code, 0, stderr + stdout);
  const r = JSON.parse(stdout.trim().split('\n').pop());
  assert.equal(r.totalSize, 1, stdout);
  assert.deepEqual(r.listed.map((t) => [t.state, t.text]), [['completed', 'list me']], stdout);
});

const PUSH_WORKER = `
import { createA2AHandler } from "toolnexus-wasm";

let handler;
export default {
  fetch(request, env, ctx) {
    // The webhook is on 127.0.0.1: private, so allowed explicitly.
    handler ??= createA2AHandler({ client: "echo", skills: [{ name: "echo", description: "Echoes the task" }],
      push: { allowPrivateWebhooks: true } });
    return handler(request, env, ctx);
  },
};
`;

test('a worker sends push notifications: the official JS SDK client sets, reads, lists and deletes configs (1.0 and 0.3)', async () => {
  const hits = [];
  const hook = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => { hits.push({ headers: req.headers, body: JSON.parse(body) }); res.writeHead(204).end(); });
  });
  await new Promise((ok) => hook.listen(0, '127.0.0.1', ok));
  cleanups.push(() => new Promise((ok) => { hook.closeAllConnections(); hook.close(ok); }));
  const webhook = `http://127.0.0.1:${hook.address().port}/hook`;
  const w = await startWorker(PUSH_WORKER);
  const cardUrl = `${w.url}/.well-known/agent-card.json`;
  assert.equal((await (await fetch(cardUrl)).json()).capabilities.pushNotifications, true);
  for (const legacy of [false, true]) {
    const args = [SDK_CLIENT, cardUrl, `push me ${legacy}`, '--push', webhook, ...(legacy ? ['--legacy'] : [])];
    const { code, stdout, stderr } = await run(process.execPath, args, { timeout: 30_000 });
    assert.equal(code, 0, stderr + stdout);
    const r = JSON.parse(stdout.trim().split('\n').pop());
    assert.deepEqual([r.push.listed, r.push.afterDelete, r.push.got], [2, 1, `${webhook}/2`], stdout);
    // Delivery runs beside the task (ctx.waitUntil): wait, bounded, for the terminal state.
    const states = () => hits
      .map((h) => ({ h, task: legacy ? h.body : h.body.task }))
      .filter(({ task }) => task?.id === r.push.taskId);
    for (let i = 0; i < 200 && !states().some(({ task }) => /completed/i.test(task.status.state)); i++) {
      await new Promise((ok) => setTimeout(ok, 25));
    }
    const seen = states();
    assert.ok(seen.some(({ task }) => /completed/i.test(task.status.state)), JSON.stringify(hits));
    for (const { h } of seen) assert.equal(h.headers.authorization, 'Bearer js-secret', JSON.stringify(h.headers));
  }
});

test('concurrent callers of one worker each get their own answer', async () => {
  const w = await servingWorker();
  const texts = ['one', 'two', 'three', 'four'];
  const got = await Promise.all(texts.map((t, i) => sdkCall(w.cardUrl, `parallel ${t}`, i % 2 ? { legacy: true, nonBlocking: true } : {})));
  assert.deepEqual(got.map((g) => g.text), texts.map((t) => `stub answer [Say hello warmly.] to: parallel ${t}`));
});

test('a worker calls a peer through agentTools', async () => {
  const peer = await startPeer({ name: 'node-peer', workingPolls: 2 });
  cleanups.push(peer.close);
  const w = await startWorker(`
import { agent, agentTools } from "toolnexus-wasm";

export default {
  async fetch(request, env) {
    const tools = await agentTools(agent({ card: env.PEER_CARD, pollEvery: 50 }));
    const result = await tools[0].execute({ task: "from the edge" });
    return Response.json({ names: tools.map((t) => t.name), result });
  },
};
`, { PEER_CARD: peer.cardUrl });
  const got = await (await w.mf.dispatchFetch(w.url)).json();
  assert.deepEqual(got.names, ['node-peer_echo']);
  assert.equal(got.result.isError, false, got.result.output);
  assert.equal(got.result.output, 'echo: from the edge');
  assert.ok(got.result.metadata.polls >= 2);
});

const TRACED_WORKER = `
import { agent, agentTools, createA2AHandler, createClient } from "toolnexus-wasm";

const spans = [];
let handler;
export default {
  async fetch(request, env, ctx) {
    const path = new URL(request.url).pathname;
    if (path === "/spans") return Response.json(spans);
    if (path === "/call") {
      const tools = await agentTools(agent({ card: env.PEER_CARD, pollEvery: 50 }));
      const result = await tools[0].execute({ task: "traced" }, { traceparent: request.headers.get("traceparent") });
      return Response.json(result);
    }
    handler ??= createA2AHandler({
      skills: [{ name: "hello-world", description: "Greets people", content: "Say hello warmly." }],
      client: createClient({ baseUrl: env.LLM_URL, style: "openai", model: "stub-model" }),
      a2a: { name: "traced-edge" },
      onSpan: (span) => spans.push(span),
    });
    return handler(request, env, ctx);
  },
};
`;

test('W3C trace context in workerd: the handler continues a traceparent to its model and onSpan; agent tools send it to the peer', async () => {
  const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const [, traceId, parentSpan] = PARENT.split('-');
  const llm = await startStubLlm();
  cleanups.push(llm.close);
  const peer = await startPeer({ name: 'traced-peer' });
  cleanups.push(peer.close);
  const w = await startWorker(TRACED_WORKER, { LLM_URL: llm.baseUrl, PEER_CARD: peer.cardUrl });
  const res = await w.mf.dispatchFetch(`${w.url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'A2A-Version': '1.0', traceparent: PARENT },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { role: 'ROLE_USER', messageId: 'm-traced', parts: [{ text: 'greet' }] } } }),
  });
  const answer = await res.json();
  assert.equal(answer.result?.task?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(answer));
  assert.equal(llm.calls.length, 2, 'skill, then the answer');
  const modelSpans = llm.calls.map((c) => {
    const [, trace, span] = (c.headers.traceparent ?? '').split('-');
    assert.equal(trace, traceId, 'the model call continues the trace');
    assert.notEqual(span, parentSpan);
    return span;
  });
  const spans = await (await w.mf.dispatchFetch(`${w.url}/spans`)).json();
  const tools = spans.filter((s) => s.name.startsWith('execute_tool'));
  assert.equal(tools.length, 1, JSON.stringify(spans));
  assert.deepEqual(
    [tools[0].name, tools[0].traceId, tools[0].parentSpanId, tools[0].status, tools[0].attributes['gen_ai.tool.name']],
    ['execute_tool skill', traceId, modelSpans[0], 'ok', 'skill'],
  );
  // The request, and the model calls under the task, in the same trace.
  const request = spans.find((s) => s.name === 'a2a.server SendMessage');
  assert.equal(request?.parentSpanId, parentSpan, JSON.stringify(spans));
  const models = spans.filter((s) => s.name === 'chat stub-model');
  assert.deepEqual(models.map((m) => m.spanId), modelSpans);
  assert.ok(models.every((m) => m.traceId === traceId && m.parentSpanId !== request.spanId));

  const called = await (await w.mf.dispatchFetch(`${w.url}/call`, { headers: { traceparent: PARENT } })).json();
  assert.equal(called.isError, false, called.output);
  const sent = peer.requests.filter((r) => r.method === 'POST');
  assert.ok(sent.length >= 1);
  for (const r of sent) {
    const [, trace, span] = (r.headers.traceparent ?? '').split('-');
    assert.equal(trace, traceId, 'each A2A request carries the trace');
    assert.notEqual(span, parentSpan, 'as a span of its own');
  }
});

test('a worker follows a streaming peer (the official JS SDK server): events live, and stream()', async () => {
  const { url } = await startJsSdkServer();
  const w = await startWorker(`
import { agent, agentTools } from "toolnexus-wasm/client";

export default {
  async fetch(request, env) {
    const tools = await agentTools(agent({ card: env.PEER_CARD }));
    const tool = tools.find((t) => t.name.endsWith("_echo"));
    const t0 = Date.now();
    const events = [];
    const result = await tool.execute({ task: "chunks 3" }, { onEvent: (e) => events.push({ kind: e.kind, at: Date.now() - t0 }) });
    const call = tool.stream({ task: "chunks 2" });
    const iterated = [];
    for await (const e of call) iterated.push(e.kind);
    return Response.json({ result, events, iterated, streamed: await call.result });
  },
};
`, { PEER_CARD: `${url}/.well-known/agent-card.json` });
  const got = await (await w.mf.dispatchFetch(w.url)).json();
  assert.equal(got.result.isError, false, got.result.output);
  assert.equal(got.result.output, 'chunk 0\nchunk 1\nchunk 2');
  assert.equal(got.result.metadata.polls, 0, 'streamed, never polled');
  assert.deepEqual(got.events.map((e) => e.kind),
    ['task', 'status-update', 'artifact-update', 'artifact-update', 'artifact-update', 'status-update']);
  // The chunks are 100 ms apart at the peer: the worker read them as they came.
  const chunks = got.events.filter((e) => e.kind === 'artifact-update');
  assert.ok(chunks[2].at - chunks[0].at >= 150, JSON.stringify(got.events));
  assert.deepEqual(got.iterated, ['task', 'status-update', 'artifact-update', 'artifact-update', 'status-update']);
  assert.equal(got.streamed.output, 'chunk 0\nchunk 1');
});

test('both entries import in workerd; cold start (Miniflare up + first request)', async (t) => {
  const baseline = await startWorker('export default { fetch() { return new Response("ok"); } };');
  await baseline.mf.dispatchFetch(baseline.url);
  const w = await startWorker(`
import * as full from "toolnexus-wasm";
import * as client from "toolnexus-wasm/client";
export default {
  fetch() {
    return Response.json({ full: Object.keys(full).sort(), client: Object.keys(client).sort(), s: full.sanitize("a b") });
  },
};
`);
  const t0 = performance.now();
  const got = await (await w.mf.dispatchFetch(w.url)).json();
  const firstMs = performance.now() - t0;
  assert.deepEqual(got.full, ['agent', 'agentTools', 'buildAgentCard', 'createA2AHandler', 'createClient', 'createToolkit', 'describeCard', 'listTasks', 'parseAgentsConfig', 'sanitize']);
  assert.deepEqual(got.client, ['agent', 'agentTools', 'createToolkit', 'describeCard', 'listTasks', 'parseAgentsConfig', 'sanitize']);
  assert.equal(got.s, 'a_b');
  // A handler's first request (card), on a fresh instance: instantiation
  // (both .wasm files compiled at startup) plus building the server.
  const s = await startWorker(SERVING_WORKER, { LLM_URL: 'http://127.0.0.1:9/v1' });
  const t1 = performance.now();
  const card = await s.mf.dispatchFetch(`${s.url}/.well-known/agent-card.json`);
  const cardMs = performance.now() - t1;
  assert.equal(card.status, 200);
  await card.arrayBuffer();
  t.diagnostic(`cold start: Miniflare ready ${baseline.readyMs.toFixed(0)} ms (empty worker) vs ${w.readyMs.toFixed(0)} ms (both entries), first request ${firstMs.toFixed(0)} ms`);
  t.diagnostic(`cold start: createA2AHandler worker ready ${s.readyMs.toFixed(0)} ms, first request (card) ${cardMs.toFixed(0)} ms`);
});

// --- identity: createA2AHandler({authenticate}) -------------------------------

const AUTH_WORKER = `
import { createA2AHandler } from "toolnexus-wasm";

// Bearer tokens of two users; "Bearer banned" gets the function's own 403.
const TOKENS = { "alice-token": "alice", "bob-token": "bob" };
let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({
      client: "echo",
      skills: [{ name: "echo", description: "Echoes the task" }],
      a2a: { name: "edge-protected" },
      authenticate: (req) => {
        const h = req.headers.get("authorization") ?? "";
        if (h === "Bearer banned") return new Response("go away", { status: 403, headers: { "x-why": "banned" } });
        const user = TOKENS[h.replace(/^Bearer /, "")];
        return user ? { subject: user, scopes: ["tasks"] } : null;
      },
    });
    return handler(request, env, ctx);
  },
};
`;

/** The official @a2a-js/sdk client (tests/peers/js), loaded in this process. */
function sdkModules() {
  const req = createRequire(fileURLToPath(new URL('../../tests/peers/js/package.json', import.meta.url)));
  return { sdk: req('@a2a-js/sdk'), client: req('@a2a-js/sdk/client') };
}

/**
 * An SDK client for cardUrl whose fetch carries `Bearer token` through the
 * SDK's AuthenticationHandler; over JSON-RPC, or HTTP+JSON with `rest`.
 */
async function sdkClientWithBearer(cardUrl, token, { rest = false } = {}) {
  const { client: c } = sdkModules();
  const seen = { headerCalls: 0 };
  const handler = {
    headers: async () => { seen.headerCalls++; return token ? { Authorization: `Bearer ${token}` } : {}; },
    shouldRetryWithHeaders: async () => undefined,
  };
  const fetchImpl = c.createAuthenticatingFetchWithRetry(fetch, handler);
  const factory = new c.ClientFactory(c.ClientFactoryOptions.createFrom(c.ClientFactoryOptions.default, {
    cardResolver: new c.DefaultAgentCardResolver({ fetchImpl }),
    transports: [rest ? new c.RestTransportFactory({ fetchImpl }) : new c.JsonRpcTransportFactory({ fetchImpl })],
    preferredTransports: [rest ? 'HTTP+JSON' : 'JSONRPC'],
  }));
  return { client: await factory.createFromUrl(cardUrl, ''), seen };
}

test('a worker with createA2AHandler({authenticate}): 401 without a credential, the function\'s own Response, each caller sees only its tasks; the official SDK client sends a bearer token', async () => {
  const w = await startWorker(AUTH_WORKER);
  const cardUrl = `${w.url}/.well-known/agent-card.json`;
  // The public card stays readable without credentials.
  const cardResp = await fetch(cardUrl);
  assert.equal(cardResp.status, 200);
  const rpc = async (token, method, params) => {
    const headers = { 'content-type': 'application/json', 'A2A-Version': '1.0' };
    if (token) headers.authorization = `Bearer ${token}`;
    const resp = await fetch(`${w.url}/`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
    return { status: resp.status, headers: resp.headers, body: await resp.text() };
  };
  const send = (token, text, messageId) => rpc(token, 'SendMessage', { message: { role: 'ROLE_USER', messageId, parts: [{ text }] } });

  // No credential, an unknown one (the function answers null): the core's 401.
  for (const token of [null, 'nobody-token']) {
    const r = await send(token, 'anonymous', `m-anon-${token}`);
    assert.equal(r.status, 401, r.body);
  }
  // The function's own Response, as it made it.
  const banned = await send('banned', 'hi', 'm-banned');
  assert.deepEqual([banned.status, banned.body, banned.headers.get('x-why')], [403, 'go away', 'banned']);

  // Alice, through the official SDK client and its AuthenticationHandler.
  const alice = await sdkClientWithBearer(cardUrl, 'alice-token');
  const sent = await alice.client.sendMessage({
    message: { messageId: 'm-alice', role: sdkModules().sdk.Role.ROLE_USER, parts: [{ content: { $case: 'text', value: 'from alice' } }] },
  });
  assert.equal(sent.$case ?? sent.payload?.$case ?? 'task', 'task', JSON.stringify(sent));
  const task = sent.value ?? sent.payload?.value ?? sent;
  assert.ok(task.id, JSON.stringify(sent));
  assert.ok(alice.seen.headerCalls >= 1, 'the SDK asked the handler for headers');
  const got = await alice.client.getTask({ tenant: '', id: task.id });
  assert.equal(got.id, task.id);
  // The SDK without a token is refused.
  const anon = await sdkClientWithBearer(cardUrl, null);
  await assert.rejects(anon.client.getTask({ tenant: '', id: task.id }), /401|auth/i);

  // Bob: alice's task does not exist for him; his list holds only his own.
  assert.equal((await send('bob-token', 'from bob', 'm-bob')).status, 200);
  const bobGet = JSON.parse((await rpc('bob-token', 'GetTask', { id: task.id })).body);
  assert.equal(bobGet.error?.code, -32001, JSON.stringify(bobGet));
  const bobCancel = JSON.parse((await rpc('bob-token', 'CancelTask', { id: task.id })).body);
  assert.equal(bobCancel.error?.code, -32001, JSON.stringify(bobCancel));
  const bobList = JSON.parse((await rpc('bob-token', 'ListTasks', {})).body).result;
  assert.equal(bobList.totalSize, 1, JSON.stringify(bobList));
  assert.deepEqual(bobList.tasks.map((t) => t.history?.[0]?.parts?.[0]?.text), ['from bob']);
  const aliceList = JSON.parse((await rpc('alice-token', 'ListTasks', {})).body).result;
  assert.deepEqual(aliceList.tasks.map((t) => t.id), [task.id]);
  assert.equal(aliceList.totalSize, 1);
});

test('a worker with createA2AHandler({authenticate}) over HTTP+JSON: the official SDK REST client with a bearer token, each caller scoped', async () => {
  const w = await startWorker(AUTH_WORKER);
  const cardUrl = `${w.url}/.well-known/agent-card.json`;
  const card = await (await fetch(cardUrl)).json();
  assert.ok(card.supportedInterfaces.some((i) => i.protocolBinding === 'HTTP+JSON'), JSON.stringify(card.supportedInterfaces));
  const { sdk } = sdkModules();
  const message = (text) => ({
    message: { messageId: `m-${text}`, role: sdk.Role.ROLE_USER, parts: [{ content: { $case: 'text', value: text } }] },
  });
  const taskOf = (r) => r.value ?? r.payload?.value ?? r;

  const alice = await sdkClientWithBearer(cardUrl, 'alice-token', { rest: true });
  const sent = taskOf(await alice.client.sendMessage(message('alice over rest')));
  assert.ok(sent.id, JSON.stringify(sent));
  assert.equal(sent.status.state, sdk.TaskState.TASK_STATE_COMPLETED, JSON.stringify(sent));
  assert.ok(alice.seen.headerCalls >= 1, 'the SDK asked the handler for headers');
  const events = [];
  for await (const e of alice.client.sendMessageStream(message('alice streams'))) events.push(e);
  assert.ok(events.length >= 2, JSON.stringify(events));
  assert.equal((await alice.client.getTask({ tenant: '', id: sent.id })).id, sent.id);
  const page = await alice.client.listTasks({ tenant: '', contextId: '', status: sdk.TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', includeArtifacts: false });
  assert.equal(page.totalSize, 2, JSON.stringify(page));

  // Bob's REST client: alice's task does not exist for him, his list is empty.
  const bob = await sdkClientWithBearer(cardUrl, 'bob-token', { rest: true });
  await assert.rejects(bob.client.getTask({ tenant: '', id: sent.id }), /not found/i);
  await assert.rejects(bob.client.cancelTask({ tenant: '', id: sent.id }), /not found/i);
  assert.equal((await bob.client.listTasks({ tenant: '', contextId: '', status: sdk.TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', includeArtifacts: false })).totalSize, 0);
  // No token: 401 over REST too.
  const anon = await sdkClientWithBearer(cardUrl, null, { rest: true });
  await assert.rejects(anon.client.getTask({ tenant: '', id: sent.id }), /401|auth/i);
});
