// Shared helpers of the toolnexus-wasm test suites: real local HTTP peers
// (a scripted A2A agent, a stub LLM), child processes with timeouts, and the
// package as installed from the tarball.
//
// Everything listens on 127.0.0.1 only; every child process is killed when
// the test file ends; every wait has a timeout.

import http from 'node:http';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(HERE, '..', '..');
export const TOOLNEXUS = join(ROOT, 'target', 'debug', 'toolnexus');

/** The temp folder where wasm/test.sh installed the packed tarball. */
export function appDir() {
  const dir = process.env.TOOLNEXUS_WASM_APP;
  if (!dir || !existsSync(join(dir, 'node_modules', 'toolnexus-wasm'))) {
    throw new Error('TOOLNEXUS_WASM_APP must name a folder with toolnexus-wasm installed: run wasm/test.sh');
  }
  return dir;
}

/** The installed package's folder. */
export function pkgDir() {
  return join(appDir(), 'node_modules', 'toolnexus-wasm');
}

/**
 * Imports the package the way a user would: through a shim in the app
 * folder that says `export * from "toolnexus-wasm"` (or `/client`, or
 * `require(...)` for the CommonJS shims).
 */
export async function importShim(name) {
  const mod = await import(pathToFileURL(join(appDir(), name)).href);
  return name.endsWith('.cjs') ? mod.default : mod;
}

// ---------------------------------------------------------------------------
// Bounded waiting

/** Rejects after `ms` with `what` in the message. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------
// HTTP servers on 127.0.0.1

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

/** Starts `handler(req, res, body)` on 127.0.0.1:0. */
export async function listen(handler) {
  const sockets = new Set();
  const server = http.createServer(async (req, res) => {
    try {
      await handler(req, res, await readBody(req));
    } catch (e) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(e?.stack ?? e));
    }
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address();
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((ok) => {
        for (const s of sockets) s.destroy();
        server.close(() => ok());
      }),
  };
}

const cors = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': '*',
  'access-control-allow-methods': 'GET, POST, OPTIONS',
};

function sendJson(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json', ...cors });
  res.end(JSON.stringify(value));
}

/**
 * A scripted A2A agent (toolnexus / A2A 0.3 dialect). The user text decides:
 * `fail…` ⇒ failed with "deliberate failure: <text>"; `slow…` ⇒ working until
 * canceled; anything else ⇒ `workingPolls` GetTasks in "working", then
 * completed with the artifact "echo: <text>".
 *
 * `card` may be a function (peer) => value|string to serve a broken card.
 */
export async function startPeer({
  name = 'peer',
  skills = [{ id: 'echo', name: 'echo', description: 'Echoes the task' }],
  workingPolls = 2,
  card,
} = {}) {
  const tasks = new Map();
  const requests = [];
  const peer = await listen(async (req, res, body) => {
    requests.push({ method: req.method, url: req.url, headers: req.headers, body: body.toString() });
    if (req.method === 'OPTIONS') {
      res.writeHead(204, cors);
      return res.end();
    }
    if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') {
      const value = card
        ? card(peer)
        : { name, description: `${name} (test peer)`, version: '1.0.0', protocolVersion: '0.3.0', url: `${peer.url}/`, capabilities: {}, defaultInputModes: ['text'], defaultOutputModes: ['text'], skills };
      if (typeof value === 'string') {
        res.writeHead(200, { 'content-type': 'application/json', ...cors });
        return res.end(value);
      }
      if (value && value.status) return sendJson(res, value.status, { error: 'broken on purpose' });
      return sendJson(res, 200, value);
    }
    if (req.method !== 'POST' || req.url !== '/') return sendJson(res, 404, { error: 'not found' });
    const rpc = JSON.parse(body.toString());
    const reply = (result) => sendJson(res, 200, { jsonrpc: '2.0', id: rpc.id, result });
    const fail = (code, message) => sendJson(res, 200, { jsonrpc: '2.0', id: rpc.id, error: { code, message } });
    const view = (t) => ({
      kind: 'task', id: t.id, contextId: t.contextId,
      status: t.message ? { state: t.state, message: t.message } : { state: t.state },
      ...(t.artifacts ? { artifacts: t.artifacts } : {}),
    });
    switch (rpc.method) {
      case 'SendMessage':
      case 'message/send': {
        const text = (rpc.params?.message?.parts ?? []).map((p) => p.text).join('\n');
        const t = { id: randomUUID(), contextId: randomUUID(), state: 'submitted', text, polls: 0 };
        tasks.set(t.id, t);
        return reply(view(t));
      }
      case 'GetTask':
      case 'tasks/get': {
        const t = tasks.get(rpc.params?.id);
        if (!t) return fail(-32001, 'Task not found');
        t.polls += 1;
        if (t.state === 'submitted' || t.state === 'working') {
          if (t.text.startsWith('slow') || t.polls <= workingPolls) t.state = 'working';
          else if (t.text.startsWith('fail')) {
            t.state = 'failed';
            t.message = { kind: 'message', role: 'agent', messageId: randomUUID(), parts: [{ kind: 'text', text: `deliberate failure: ${t.text}` }] };
          } else {
            t.state = 'completed';
            t.artifacts = [{ artifactId: randomUUID(), parts: [{ kind: 'text', text: `echo: ${t.text}` }] }];
          }
        }
        return reply(view(t));
      }
      case 'CancelTask':
      case 'tasks/cancel': {
        const t = tasks.get(rpc.params?.id);
        if (!t) return fail(-32001, 'Task not found');
        t.state = 'canceled';
        return reply(view(t));
      }
      default:
        return fail(-32601, `Method not found: ${rpc.method}`);
    }
  });
  const methods = () => requests.filter((r) => r.method === 'POST').map((r) => JSON.parse(r.body).method);
  return { ...peer, cardUrl: `${peer.url}/.well-known/agent-card.json`, requests, tasks, methods };
}

/**
 * A stub OpenAI-style model at `${url}/v1`. `reply(body, turn)` returns the
 * assistant message; the default loads the first skill with the `skill`
 * tool, then answers with the skill's first line and the user's text.
 * Each answer takes `delayMs`.
 */
export async function startStubLlm(reply = skillThenAnswer, { delayMs = 0 } = {}) {
  const calls = [];
  const llm = await listen(async (req, res, body) => {
    if (req.method === 'OPTIONS') {
      res.writeHead(204, cors);
      return res.end();
    }
    if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) return sendJson(res, 404, { error: 'not found' });
    const parsed = JSON.parse(body.toString());
    calls.push({ headers: req.headers, body: parsed });
    const message = await reply(parsed, calls.length);
    // A model takes time: lets concurrent tasks overlap.
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    sendJson(res, 200, {
      id: `chatcmpl-${calls.length}`,
      object: 'chat.completion',
      model: 'stub-model',
      choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
  });
  return { ...llm, baseUrl: `${llm.url}/v1`, calls };
}

/** A tool call message. */
export function toolCall(name, args, id = `call_${randomUUID().slice(0, 8)}`) {
  return { content: null, tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }] };
}

/** The first skill the system prompt lists (`## Available Skills` / `- **name**: …`). */
export function firstListedSkill(body) {
  const system = body.messages.find((m) => m.role === 'system')?.content ?? '';
  return /^- \*\*(.+?)\*\*: /m.exec(system)?.[1];
}

/** The default stub model: `skill` first, then the answer. */
export function skillThenAnswer(body) {
  const user = body.messages.find((m) => m.role === 'user')?.content ?? '';
  const toolResult = body.messages.filter((m) => m.role === 'tool').at(-1);
  if (!toolResult) {
    const skill = body.tools?.find((t) => t.function.name === 'skill');
    const first = skill && firstListedSkill(body);
    if (first) return toolCall('skill', { name: first });
    return { content: `stub answer (no skills): ${user}` };
  }
  // The skill's body starts on the fourth line of its <skill_content> block.
  const lines = String(toolResult.content).split('\n');
  const firstLine = lines[0].startsWith('<skill_content') ? lines[3] : lines[0];
  return { content: `stub answer [${firstLine}] to: ${user}` };
}

// ---------------------------------------------------------------------------
// Child processes

const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Kills every child process this file started. */
export async function killChildren() {
  await Promise.all(
    [...children].map(
      (c) =>
        new Promise((ok) => {
          if (c.exitCode !== null || c.signalCode !== null) return ok();
          const force = setTimeout(() => c.kill('SIGKILL'), 3000);
          c.once('exit', () => {
            clearTimeout(force);
            ok();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
  children.clear();
}

/** Runs a command to completion (killed after `timeout` ms). */
export function run(cmd, args, { timeout = 30_000, env, input } = {}) {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`${cmd} ${args.join(' ')} timed out after ${timeout} ms\n${stdout}\n${stderr}`));
    }, timeout);
    child.on('error', fail);
    child.on('exit', (code) => {
      clearTimeout(timer);
      children.delete(child);
      ok({ code, stdout, stderr });
    });
    child.stdin.end(input ?? '');
  });
}

/** Starts a server process and waits (≤ `timeout` ms) for "listening on <url>" on stdout. */
export function startServer(cmd, args, { timeout = 20_000, env } = {}) {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`${cmd} did not start within ${timeout} ms\n${out}\n${err}`));
    }, timeout);
    child.stderr.on('data', (d) => (err += d));
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        ok({ url: m[1], child });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      children.delete(child);
      fail(new Error(`${cmd} exited with ${code}\n${out}\n${err}`));
    });
  });
}

/** A TCP port that was free a moment ago (for peers that need one given). */
export function freePort() {
  return new Promise((ok, fail) => {
    const srv = http.createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

/** The official @a2a-js/sdk echo server (tests/peers/js/server.mjs; its card says streaming). */
export async function startJsSdkServer() {
  const port = await freePort();
  return startServer('node', [join(ROOT, 'tests', 'peers', 'js', 'server.mjs'), '--port', String(port)]);
}

/** `toolnexus serve --llm echo --skills examples/skills` on a free port, with `extra` flags
 * (`--cors-origin ORIGIN` for a page on another origin: serve sends no CORS headers unless told). */
export function startNativeEchoAgent(extra = []) {
  return startServer(TOOLNEXUS, ['serve', '--addr', '127.0.0.1:0', '--llm', 'echo', '--skills', join(ROOT, 'examples', 'skills'), ...extra]);
}

/** Serves a fetch-style handler `(Request) => Promise<Response>` with Node's http server. */
export function serveFetch(handler) {
  return listen(async (req, res, body) => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
    });
    const response = await handler(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
}

/** Polls `check()` every 20 ms until it returns a truthy value (≤ `ms`). */
export async function eventually(check, ms = 5000, what = 'condition') {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
