// The package against the official A2A SDKs (tests/peers: a2a-sdk 1.3.0 for
// Python, @a2a-js/sdk 1.3.0 for Node), over real HTTP on 127.0.0.1:
//
// - issue 21, client side: the package client calls REST-only SDK servers
//   (Python and JS, A2A 1.0 and 0.3, a card naming a tenant): blocking,
//   streaming, an input-required task answered, cancel; the results are the
//   ones the same SDK gives over JSON-RPC ({output, isError, metadata});
// - issue 21, server side: the official SDK REST clients (JS in process,
//   Python as a child) against createA2AHandler's HTTP+JSON binding:
//   blocking, streaming, GetTask, ListTasks, cancel;
// - issue 18: the package client calls protected Python SDK servers (a
//   bearer, OAuth2 client credentials from the server's own token endpoint):
//   one token fetch for concurrent calls, an expired token refreshed, a 401
//   answered by exactly one re-fetch and one retry, getToken, and the
//   credential kept from an endpoint on another origin.
//
// A "recording proxy" (a tiny Node server in front of a peer) shows what
// went on the wire: the routes (tenant segment, /v1 for 0.3) and headers.
// It also serves the peer's card with its endpoint rewritten to itself, and
// can edit that card (capabilities.streaming: false for the blocking path).

import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import {
  eventually, freePort, importShim, killChildren, listen, ROOT, run, serveFetch, startServer, withTimeout,
} from './helpers.mjs';

const tn = await importShim('esm.mjs');
const closers = [];
after(async () => {
  for (const c of closers.reverse()) await c();
  await killChildren();
});

const PEERS = join(ROOT, 'tests', 'peers');
const PYTHON = join(PEERS, '.venv', 'bin', 'python');

/** The Python SDK peer server (py_server.py) with `args`; {url, cardUrl}. */
async function startPy(args = []) {
  const port = await freePort();
  const { url } = await startServer(PYTHON, [join(PEERS, 'py_server.py'), '--port', String(port), ...args]);
  return { url, cardUrl: `${url}/.well-known/agent-card.json` };
}

/** The JS SDK peer server (js/server.mjs) with `args`; {url, cardUrl}. */
async function startJs(args = []) {
  const port = await freePort();
  const { url } = await startServer(process.execPath, [join(PEERS, 'js', 'server.mjs'), '--port', String(port), ...args]);
  return { url, cardUrl: `${url}/.well-known/agent-card.json` };
}

/**
 * A Node server forwarding every request to `target` (responses streamed
 * through as they come), recording {method, path, headers}. Its card is the
 * target's with every target URL turned into its own, then `editCard(card)`.
 */
async function recordingProxy(target, editCard = (c) => c) {
  const seen = [];
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method, path: req.url, headers: req.headers });
    if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') {
      fetch(`${target}${req.url}`).then(async (r) => {
        const card = editCard(JSON.parse((await r.text()).replaceAll(target, self)));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(card));
      }, (e) => {
        res.writeHead(502);
        res.end(String(e));
      });
      return;
    }
    const { host, ...headers } = req.headers;
    const upstream = http.request(`${target}${req.url}`, { method: req.method, headers }, (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    });
    upstream.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502);
      res.end(String(e));
    });
    req.pipe(upstream);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const self = `http://127.0.0.1:${server.address().port}`;
  closers.push(() => new Promise((ok) => {
    for (const s of sockets) s.destroy();
    server.close(() => ok());
  }));
  return { url: self, cardUrl: `${self}/.well-known/agent-card.json`, seen };
}

/** A card that says it cannot stream (the client then sends a blocking SendMessage). */
const noStreaming = (card) => ({ ...card, capabilities: { ...card.capabilities, streaming: false } });

/** The result without what differs between any two runs (ids, times). */
function shape(r) {
  const { taskId, contextId, ms, agent, ...rest } = r.metadata ?? {};
  return {
    output: r.output.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, 'ID'),
    isError: r.isError,
    metadata: { ...rest, taskId: typeof taskId, contextId: contextId === undefined ? undefined : typeof contextId },
  };
}

/** The one tool of `card` for skill `echo` (the SDK peers list echo and fail). */
async function echoTool(card, extra = {}) {
  const tools = await tn.agentTools(tn.agent({ card, pollEvery: 20, conversational: true, ...extra }));
  const tool = tools.find((t) => t.name.endsWith('echo'));
  assert.ok(tool, `an echo tool among ${tools.map((t) => t.name)}`);
  return tool;
}

/**
 * Starts `text`, waits (bounded) until `started(events)` says the task is
 * under way, then aborts the call; the call's result.
 */
async function abortMidTask(tool, text, started) {
  const controller = new AbortController();
  const events = [];
  const running = tool.execute({ task: text }, {
    signal: controller.signal,
    onEvent: (e) => events.push(e),
  });
  await eventually(() => started(events), 10_000, 'the task under way');
  controller.abort();
  return withTimeout(running, 10_000, 'the aborted call');
}

// ---------------------------------------------------------------------------
// Issue 21, client side: REST-only SDK servers

const REST_SERVERS = [
  { name: 'Python SDK, 1.0', start: () => startPy(['--rest-only']), prefix: '' },
  { name: 'Python SDK, 0.3 (a card listing only the 0.3 interface)', start: () => startPy(['--rest-only', '--compat-03', '--card-03']), prefix: '/v1' },
  { name: 'Python SDK, 1.0 with a tenant', start: () => startPy(['--rest-only', '--tenant', 'acme']), prefix: '/acme' },
  { name: 'JS SDK, 1.0', start: () => startJs(['--rest-only']), prefix: '' },
  { name: 'JS SDK, 0.3 (a card listing only the 0.3 interface)', start: () => startJs(['--rest-only', '--compat-03', '--card-03']), prefix: '/v1' },
  { name: 'JS SDK, 1.0 with a tenant', start: () => startJs(['--rest-only', '--tenant', 'acme']), prefix: '/acme' },
];

describe('the package client against REST-only official SDK servers (issue 21)', () => {
  for (const server of REST_SERVERS) {
    test(`${server.name}: streaming, blocking, input-required answered, cancel; each on its route`, async () => {
      const peer = await server.start();
      const card = await (await fetch(peer.cardUrl)).json();
      assert.deepEqual([...new Set(card.supportedInterfaces.map((i) => i.protocolBinding))], ['HTTP+JSON'], 'a REST-only card');
      const routes = (proxy) => proxy.seen.filter((s) => s.method !== 'GET' || !s.path.startsWith('/.well-known/'))
        .map((s) => `${s.method} ${s.path.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, 'ID').replace(/\?.*/, '')}`);
      const p = server.prefix;

      // Streaming (the card says it can): every event as it comes, no poll.
      const streaming = await recordingProxy(peer.url);
      const tool = await echoTool(streaming.cardUrl);
      const events = [];
      const streamed = await tool.execute({ task: 'chunks 3' }, { onEvent: (e) => events.push(e) });
      assert.equal(streamed.isError, false, streamed.output);
      assert.equal(streamed.output, 'chunk 0\nchunk 1\nchunk 2');
      assert.equal(streamed.metadata.state, 'completed');
      assert.equal(streamed.metadata.polls, 0, 'streamed, never polled');
      assert.deepEqual(events.filter((e) => e.kind === 'artifact-update').map((e) => e.artifact.parts[0].text),
        ['chunk 0', 'chunk 1', 'chunk 2']);
      assert.equal(events.at(-1).status?.state, 'completed', JSON.stringify(events.at(-1)));
      assert.deepEqual(routes(streaming), [`POST ${p}/message:stream`]);

      // Blocking (a card that cannot stream): SendMessage answers the finished task.
      const blocking = await recordingProxy(peer.url, noStreaming);
      const plain = await echoTool(blocking.cardUrl);
      const done = await plain.execute({ task: 'hello rest' });
      assert.equal(done.isError, false, done.output);
      assert.equal(done.output, 'echo: hello rest');
      assert.equal(done.metadata.state, 'completed');
      assert.equal(routes(blocking)[0], `POST ${p}/message:send`);
      assert.ok(routes(blocking).every((r) => r === `POST ${p}/message:send` || r === `GET ${p}/tasks/ID`), routes(blocking).join(', '));

      // A failed task is an error result with the agent's message.
      const failed = await plain.execute({ task: 'fail on purpose' });
      assert.equal(failed.isError, true);
      assert.equal(failed.metadata.state, 'failed');
      assert.match(failed.output, /failed: deliberate failure: fail on purpose$/);

      // input-required, answered on the same task (both paths).
      for (const t of [tool, plain]) {
        const asked = await t.execute({ task: 'ask for a trip' });
        assert.equal(asked.isError, true, asked.output);
        assert.equal(asked.metadata.state, 'input-required');
        assert.match(asked.output, /input-required: Which city\?$/);
        const { taskId, contextId } = asked.metadata;
        assert.ok(taskId && contextId, JSON.stringify(asked.metadata));
        const booked = await t.execute({ task: 'Paris', taskId, contextId });
        assert.equal(booked.isError, false, booked.output);
        assert.equal(booked.output, 'booked for Paris');
        assert.equal(booked.metadata.taskId, taskId, 'the same task');
      }

      // Cancel while streaming: the task's id came with its first event;
      // aborting the call cancels the remote task (POST /tasks/{id}:cancel).
      const canceled = await abortMidTask(tool, 'slow job', (ev) => ev.some((e) => e.status?.state === 'working'));
      assert.equal(canceled.isError, true);
      assert.equal(canceled.metadata.state, 'canceled', canceled.output);
      assert.match(canceled.output, /^A2A task \S+ canceled$/);
      await eventually(() => routes(streaming).includes(`POST ${p}/tasks/ID:cancel`), 10_000, 'CancelTask on the wire');
      const id = canceled.metadata.taskId;
      const state = await eventually(async () => {
        const r = await fetch(`${peer.url}${p}/tasks/${id}`, { headers: p === '/v1' ? {} : { 'A2A-Version': '1.0' } });
        const body = await r.json();
        const s = String(body.status?.state ?? body.task?.status?.state ?? '');
        return /cancel/i.test(s) && s;
      }, 10_000, `task ${id} canceled at the server`);
      assert.match(state, /cancel/i);

      // Abort during a blocking send: the call ends canceled at once (the
      // peer has not said the task's id yet, so there is nothing to cancel).
      const sends = () => routes(blocking).filter((r) => r.endsWith('/message:send')).length;
      const before = sends();
      const gaveUp = await abortMidTask(plain, 'sleep 60000', () => sends() > before);
      assert.equal(gaveUp.isError, true);
      assert.equal(gaveUp.metadata.state, 'canceled', gaveUp.output);
    });
  }

  test('results over REST are the ones over JSON-RPC ({output, isError, metadata}), for both SDKs', async () => {
    const pairs = [
      [await startPy(['--rest-only']), await startPy([])],
      [await startJs(['--rest-only']), await startJs([])],
    ];
    for (const [rest, rpc] of pairs) {
      const restCard = await (await fetch(rest.cardUrl)).json();
      const rpcCard = await (await fetch(rpc.cardUrl)).json();
      assert.equal(restCard.supportedInterfaces[0].protocolBinding, 'HTTP+JSON');
      assert.equal(rpcCard.supportedInterfaces[0].protocolBinding, 'JSONRPC');
      for (const edit of [(c) => c, noStreaming]) {
        const viaRest = await echoTool((await recordingProxy(rest.url, edit)).cardUrl);
        const viaRpc = await echoTool((await recordingProxy(rpc.url, edit)).cardUrl);
        for (const text of ['hello', 'fail now', 'ask me', 'chunks 2']) {
          const a = await viaRest.execute({ task: text });
          const b = await viaRpc.execute({ task: text });
          assert.deepEqual(shape(a), shape(b), `${text}: REST ${JSON.stringify(a)} vs JSON-RPC ${JSON.stringify(b)}`);
        }
      }
    }
  });
});
