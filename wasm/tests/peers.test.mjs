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
    output: r.output.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, 'ID').replace(/http:\/\/127\.0\.0\.1:\d+\/?/g, 'URL'),
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

  test('results over REST are the ones over JSON-RPC ({output, isError, metadata}), for both SDKs, 1.0 and 0.3, errors included', async () => {
    const v03 = ['--compat-03', '--card-03'];
    const pairs = [
      ['py 1.0', startPy, []],
      ['py 0.3', startPy, v03],
      ['js 1.0', startJs, []],
      ['js 0.3', startJs, v03],
    ];
    for (const [name, start, version] of pairs) {
      const rest = await start(['--rest-only', ...version]);
      const rpc = await start(version);
      const restCard = await (await fetch(rest.cardUrl)).json();
      const rpcCard = await (await fetch(rpc.cardUrl)).json();
      assert.deepEqual(restCard.supportedInterfaces.map((i) => i.protocolBinding), restCard.supportedInterfaces.map(() => 'HTTP+JSON'));
      assert.deepEqual(rpcCard.supportedInterfaces.map((i) => i.protocolBinding), rpcCard.supportedInterfaces.map(() => 'JSONRPC'));
      for (const [mode, edit] of [['streaming', (c) => c], ['blocking', noStreaming]]) {
        const viaRest = await echoTool((await recordingProxy(rest.url, edit)).cardUrl);
        const viaRpc = await echoTool((await recordingProxy(rpc.url, edit)).cardUrl);
        const same = async (args) => {
          const a = await viaRest.execute(args);
          const b = await viaRpc.execute(args);
          assert.deepEqual(shape(a), shape(b), `${name} ${mode} ${JSON.stringify(args)}: REST ${JSON.stringify(a)} vs JSON-RPC ${JSON.stringify(b)}`);
          return [a, b];
        };
        for (const text of ['hello', 'fail now', 'ask me', 'chunks 2']) await same({ task: text });
        // The peer's errors: a task that does not exist, a task already finished.
        // (a2a-sdk's 0.3 REST stream answers 200 and then drops the connection
        // on these, with no error event: tests/peers/WIRE.md §10.7.)
        if (name === 'py 0.3' && mode === 'streaming') continue;
        const [ghost] = await same({ task: 'more', taskId: 'no-such-task' });
        assert.match(ghost.output, /-32001/, ghost.output);
        const [doneRest] = [await viaRest.execute({ task: 'done' })];
        const [doneRpc] = [await viaRpc.execute({ task: 'done' })];
        const again = [
          await viaRest.execute({ task: 'again', taskId: doneRest.metadata.taskId }),
          await viaRpc.execute({ task: 'again', taskId: doneRpc.metadata.taskId }),
        ].map(shape);
        assert.deepEqual(again[0], again[1], `${name} ${mode}: continuing a finished task`);
        assert.match(again[0].output, /-32004/, again[0].output);
      }
    }
  });
});

// ---------------------------------------------------------------------------
// Issue 18: protected official Python SDK servers

/** The token endpoint's counters of an --auth-oauth peer. */
const oauthStats = async (peer) => (await fetch(`${peer.url}/oauth/stats`)).json();

describe('the package client against protected official Python SDK servers (issue 18)', () => {
  test('a bearer server: {bearer} and getToken complete tasks (JSON-RPC and REST); none or a wrong one is a 401 error result', async () => {
    for (const args of [[], ['--rest-only']]) {
      const peer = await startPy(['--auth-bearer', 'the-right-token', ...args]);
      const card = await (await fetch(peer.cardUrl)).json();
      assert.ok(card.securitySchemes?.bearer, JSON.stringify(card.securitySchemes));
      assert.equal(tn.describeCard(card, peer.cardUrl).requiresCredentials, true);

      const withBearer = await echoTool(peer.cardUrl, { auth: { bearer: 'the-right-token' } });
      for (const text of ['hello bearer', 'chunks 2']) {
        const r = await withBearer.execute({ task: text });
        assert.equal(r.isError, false, r.output);
      }
      let asked = 0;
      const withGetToken = await echoTool(peer.cardUrl, { getToken: async () => { asked++; return 'the-right-token'; } });
      const before = asked;
      const r = await withGetToken.execute({ task: 'hello getToken' });
      assert.equal(r.isError, false, r.output);
      assert.equal(r.output, 'echo: hello getToken');
      assert.ok(asked > before, 'getToken was asked for the call');

      const wrong = await echoTool(peer.cardUrl, { auth: { bearer: 'a-wrong-token' } });
      const refused = await wrong.execute({ task: 'hello' });
      assert.equal(refused.isError, true);
      assert.match(refused.output, /401/);
      const none = await echoTool(peer.cardUrl);
      const anon = await none.execute({ task: 'hello' });
      assert.equal(anon.isError, true);
      assert.match(anon.output, /401/);
    }
  });

  test('an OAuth2 server: the token URL from the card, N concurrent calls share one token fetch, the scope the card requires', async () => {
    for (const args of [[], ['--rest-only']]) {
      const peer = await startPy(['--auth-oauth', 'app:app-secret', ...args]);
      const tool = await echoTool(peer.cardUrl, { auth: { oauth2: { clientId: 'app', clientSecret: 'app-secret' } } });
      const results = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => tool.execute({ task: `concurrent ${i}` })));
      for (const [i, r] of results.entries()) {
        assert.equal(r.isError, false, r.output);
        assert.equal(r.output, `echo: concurrent ${i + 1}`);
      }
      const stats = await oauthStats(peer);
      assert.equal(stats.tokenRequests, 1, `one token fetch for six concurrent calls: ${JSON.stringify(stats)}`);
      assert.equal(stats.unauthorized, 0, JSON.stringify(stats));
      assert.deepEqual(stats.scopes, ['a2a.call']);
      // listTasks uses the same credential plumbing (JSON-RPC peer; the REST peer too).
      const again = await tool.execute({ task: 'once more' });
      assert.equal(again.isError, false, again.output);
      assert.equal((await oauthStats(peer)).tokenRequests, 1, 'the cached token serves later calls');
    }
  });

  test('an OAuth2 server with an explicit tokenUrl and a wrong secret: a clear error naming the scheme, no call goes out unauthenticated', async () => {
    const peer = await startPy(['--auth-oauth', 'app:app-secret']);
    const tool = await echoTool(peer.cardUrl, { auth: { oauth2: { clientId: 'app', clientSecret: 'nope', tokenUrl: `${peer.url}/oauth/token` } } });
    const r = await tool.execute({ task: 'with a bad secret' });
    assert.equal(r.isError, true);
    assert.match(r.output, /oauth|token/i);
    const stats = await oauthStats(peer);
    assert.ok(stats.tokenRequests >= 1, JSON.stringify(stats));
    assert.equal(stats.unauthorized, 0, 'no A2A call went out without a token');
  });

  test('an expired token is refreshed before the call (short-lived tokens), never answered by a 401', async () => {
    const peer = await startPy(['--auth-oauth', 'app:app-secret', '--oauth-ttl', '2']);
    const tool = await echoTool(peer.cardUrl, { auth: { oauth2: { clientId: 'app', clientSecret: 'app-secret', scopes: ['a2a.call'] } } });
    const first = await tool.execute({ task: 'first' });
    assert.equal(first.isError, false, first.output);
    assert.equal((await oauthStats(peer)).tokenRequests, 1);
    // Past the token's lifetime (2 s at the server).
    await new Promise((r) => setTimeout(r, 2_300));
    const second = await tool.execute({ task: 'second' });
    assert.equal(second.isError, false, second.output);
    const stats = await oauthStats(peer);
    assert.equal(stats.tokenRequests, 2, `a fresh token for the second call: ${JSON.stringify(stats)}`);
    assert.equal(stats.unauthorized, 0, 'refreshed before it expired, not after a 401');
  });

  test('a 401 (the server revoked every token) causes exactly one re-fetch and one retry', async () => {
    for (const args of [[], ['--rest-only']]) {
      const peer = await startPy(['--auth-oauth', 'app:app-secret', ...args]);
      const tool = await echoTool(peer.cardUrl, { auth: { oauth2: { clientId: 'app', clientSecret: 'app-secret' } } });
      assert.equal((await tool.execute({ task: 'before' })).isError, false);
      assert.deepEqual(await oauthStats(peer).then((s) => [s.tokenRequests, s.unauthorized]), [1, 0]);
      await fetch(`${peer.url}/oauth/revoke`, { method: 'POST' });
      const r = await tool.execute({ task: 'after revoke' });
      assert.equal(r.isError, false, r.output);
      assert.equal(r.output, 'echo: after revoke');
      const stats = await oauthStats(peer);
      assert.deepEqual([stats.tokenRequests, stats.unauthorized], [2, 1], `one 401, one re-fetch: ${JSON.stringify(stats)}`);
    }
  });

  test('a token endpoint whose tokens the server never accepts: one re-fetch, one retry, then an error naming the scheme', async () => {
    const peer = await startPy(['--auth-oauth', 'app:app-secret']);
    let issued = 0;
    const idp = await listen((req, res) => {
      issued++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: `useless-${issued}`, token_type: 'Bearer', expires_in: 3600 }));
    });
    closers.push(idp.close);
    const tool = await echoTool(peer.cardUrl, { auth: { oauth2: { clientId: 'app', clientSecret: 'x', tokenUrl: `${idp.url}/token` } } });
    const r = await tool.execute({ task: 'never accepted' });
    assert.equal(r.isError, true);
    assert.match(r.output, /401/);
    assert.match(r.output, /oauth/, 'names the scheme');
    assert.equal(issued, 2, 'the first token, then exactly one re-fetch');
    assert.equal((await oauthStats(peer)).unauthorized, 2, 'the call, then exactly one retry');
  });

  test('credential origins: a card on one origin whose endpoint is on another; that origin never sees the credential unless allowed', async () => {
    for (const args of [[], ['--rest-only']]) {
      const peer = await startPy(['--auth-bearer', 'secret-token', ...args]);
      // The endpoint origin: a recording server in front of the peer.
      const endpoint = await recordingProxy(peer.url);
      const card = await (await fetch(endpoint.cardUrl)).json();
      // The card's origin: another server, serving that card as it is.
      const cardHost = await listen((req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(card));
      });
      closers.push(cardHost.close);
      const cardUrl = `${cardHost.url}/.well-known/agent-card.json`;
      const calls = () => endpoint.seen.filter((s) => !s.path.startsWith('/.well-known/'));

      for (const auth of [{ auth: { bearer: 'secret-token' } }, { getToken: () => 'secret-token' }]) {
        const tool = await echoTool(cardUrl, auth);
        const r = await tool.execute({ task: 'elsewhere' });
        assert.equal(r.isError, true, 'refused: the card requires a credential it may not get');
        assert.match(r.output, /another origin/, r.output);
      }
      assert.equal(calls().length, 0, 'refused before any call');

      // The same card saying nothing of its security: the call goes, without the credential.
      const { securityRequirements, securitySchemes, ...open } = card;
      const openHost = await listen((req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(open));
      });
      closers.push(openHost.close);
      for (const auth of [{ auth: { bearer: 'secret-token' } }, { getToken: () => 'secret-token' }]) {
        const tool = await echoTool(`${openHost.url}/.well-known/agent-card.json`, auth);
        const r = await tool.execute({ task: 'withheld' });
        assert.equal(r.isError, true, 'the peer refuses the call without a credential');
        assert.match(r.output, /401/, r.output);
      }
      assert.ok(calls().length >= 2, 'the calls reached the other origin');
      assert.ok(calls().every((s) => s.headers.authorization === undefined), JSON.stringify(calls().map((s) => s.headers)));

      const allowed = await echoTool(cardUrl, { auth: { bearer: 'secret-token' }, allowedOrigins: [endpoint.url] });
      const ok = await allowed.execute({ task: 'allowed' });
      assert.equal(ok.isError, false, ok.output);
      assert.equal(ok.output, 'echo: allowed');
      assert.ok(calls().some((s) => s.headers.authorization === 'Bearer secret-token'), 'the allowed origin got it');
    }
  });
});

// ---------------------------------------------------------------------------
// Issue 21, server side: official SDK REST clients against createA2AHandler

/** The official @a2a-js/sdk (tests/peers/js), loaded in this process. */
function jsSdk() {
  const req = createRequire(join(PEERS, 'js', 'package.json'));
  return { sdk: req('@a2a-js/sdk'), client: req('@a2a-js/sdk/client') };
}

/**
 * A handler whose fulfiller echoes, streams `chunks N`, and holds `slow…`
 * tasks until the test ends (bounded); every request's method and path.
 */
async function restServedAgent(options = {}) {
  let release;
  const released = new Promise((r) => { release = r; });
  closers.push(async () => release());
  const handler = tn.createA2AHandler({
    skills: [{ name: 'echo', description: 'Echoes the task' }],
    a2a: { name: 'npm-rest' },
    client: async (request, emit) => {
      const chunks = /^chunks (\d+)$/.exec(request.text);
      if (chunks) {
        for (let i = 0; i < Number(chunks[1]); i++) emit.chunk?.(`chunk ${i}`);
        return `chunked ${chunks[1]}`;
      }
      if (request.text.startsWith('slow')) {
        await Promise.race([released, new Promise((r) => setTimeout(r, 20_000))]);
      }
      return `echo: ${request.text}`;
    },
    ...options,
  });
  const seen = [];
  const server = await serveFetch((req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname}`);
    return handler(req);
  });
  closers.push(server.close);
  return { url: server.url, cardUrl: `${server.url}/.well-known/agent-card.json`, seen };
}

describe('official SDK REST clients against createA2AHandler (issue 21, server side)', () => {
  test('the JS SDK REST transport: blocking, streaming, GetTask, ListTasks, cancel; only REST routes used', async () => {
    const agent = await restServedAgent();
    const { sdk, client: c } = jsSdk();
    const factory = new c.ClientFactory(c.ClientFactoryOptions.createFrom(c.ClientFactoryOptions.default, {
      transports: [new c.RestTransportFactory()],
      preferredTransports: ['HTTP+JSON'],
    }));
    const client = await factory.createFromUrl(agent.cardUrl, '');
    const message = (text, extra = {}) => ({
      tenant: '',
      message: {
        messageId: `m-${Math.random()}`, role: sdk.Role.ROLE_USER,
        parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
        metadata: undefined, extensions: [], referenceTaskIds: [], contextId: '', taskId: '',
      },
      configuration: { acceptedOutputModes: [], historyLength: undefined, returnImmediately: false, ...extra },
      metadata: undefined,
    });
    const taskOf = (r) => (r?.payload?.$case === 'task' ? r.payload.value : r?.$case === 'task' ? r.value : r);
    const texts = (task) => (task.artifacts ?? []).flatMap((a) => a.parts.map((p) => p.content?.value));

    // Blocking.
    const sent = taskOf(await client.sendMessage(message('hello over rest')));
    assert.equal(sent.status.state, sdk.TaskState.TASK_STATE_COMPLETED, JSON.stringify(sent));
    assert.deepEqual(texts(sent), ['echo: hello over rest']);

    // Streaming: events until the terminal status.
    const events = [];
    for await (const e of client.sendMessageStream(message('chunks 2'))) events.push(e);
    const kinds = events.map((e) => e.payload?.$case);
    assert.ok(kinds.includes('statusUpdate'), JSON.stringify(kinds));
    const last = events.at(-1).payload;
    const lastState = last.$case === 'task' ? last.value.status.state : last.value.status?.state;
    assert.equal(lastState, sdk.TaskState.TASK_STATE_COMPLETED, JSON.stringify(events.at(-1)));
    const streamedId = events[0].payload.value.id ?? events[0].payload.value.taskId;

    // GetTask.
    const got = await client.getTask({ tenant: '', id: sent.id, historyLength: 10 });
    assert.equal(got.id, sent.id);
    assert.equal(got.status.state, sdk.TaskState.TASK_STATE_COMPLETED);
    assert.deepEqual(texts(got), ['echo: hello over rest']);

    // Cancel a task still working (sent with returnImmediately).
    const slow = taskOf(await client.sendMessage(message('slow job', { returnImmediately: true })));
    assert.ok(slow.id, JSON.stringify(slow));
    const canceled = await client.cancelTask({ tenant: '', id: slow.id, metadata: undefined });
    assert.equal(canceled.status.state, sdk.TaskState.TASK_STATE_CANCELED, JSON.stringify(canceled));
    assert.equal((await client.getTask({ tenant: '', id: slow.id })).status.state, sdk.TaskState.TASK_STATE_CANCELED);
    // A finished task is not cancelable: the SDK's own typed error.
    await assert.rejects(client.cancelTask({ tenant: '', id: sent.id, metadata: undefined }), (e) => /NotCancelable/i.test(e?.constructor?.name ?? '') || /not cancelable/i.test(e.message));
    // An unknown task: TaskNotFound.
    await assert.rejects(client.getTask({ tenant: '', id: 'no-such-task' }), (e) => /NotFound/i.test(e?.constructor?.name ?? '') || /not found/i.test(e.message));

    // ListTasks: all three, newest first.
    const page = await client.listTasks({
      tenant: '', contextId: '', status: sdk.TaskState.TASK_STATE_UNSPECIFIED, pageSize: undefined,
      pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: true,
    });
    assert.deepEqual(new Set(page.tasks.map((t) => t.id)), new Set([sent.id, streamedId, slow.id]));
    assert.equal(page.totalSize, 3);

    // Every call went over HTTP+JSON (no JSON-RPC POST /).
    const calls = agent.seen.filter((s) => !s.includes('/.well-known/'));
    assert.ok(calls.length >= 7, calls.join(', '));
    assert.ok(calls.every((s) => s.startsWith('POST /rest/') || s.startsWith('GET /rest/')), calls.join(', '));
  });

  test('the JS SDK 0.3 REST transport and the Python SDK REST transport (1.0 and 0.3): blocking, streaming, TaskNotCancelable as the typed error, ListTasks (1.0)', async () => {
    const agent = await restServedAgent();
    const jsClient = join(PEERS, 'js', 'client.mjs');
    const pyClient = join(PEERS, 'py_client.py');
    const clients = [
      ['js 0.3', process.execPath, [jsClient], ['--rest', '--legacy']],
      ['py 1.0', PYTHON, [pyClient], ['--rest']],
      ['py 0.3', PYTHON, [pyClient], ['--rest', '--legacy']],
    ];
    for (const [name, cmd, script, flags] of clients) {
      const call = async (text, more = []) => {
        const r = await run(cmd, [...script, agent.cardUrl, text, ...flags, ...more], { timeout: 60_000 });
        const line = r.stdout.trim().split('\n').pop();
        assert.ok(line?.startsWith('{'), `${name} ${text}: exit ${r.code}\n${r.stdout}\n${r.stderr}`);
        return { code: r.code, out: JSON.parse(line), stderr: r.stderr };
      };
      const blocking = await call(`hello ${name}`);
      assert.deepEqual([blocking.code, blocking.out.state, blocking.out.text], [0, 'completed', `echo: hello ${name}`], `${name}: ${blocking.stderr}`);
      const streamed = await call(`streamed ${name}`, ['--stream']);
      assert.deepEqual([streamed.out.state, streamed.out.text], ['completed', `echo: streamed ${name}`], `${name}: ${streamed.stderr}`);
      assert.ok(streamed.out.events.length >= 2, JSON.stringify(streamed.out.events));
      const cancel = await call(`cancel ${name}`, ['--cancel']);
      assert.equal(cancel.out.state, 'completed', `${name}: ${cancel.stderr}`);
      assert.match(cancel.out.cancel, /NotCancelable/, `${name}: ${JSON.stringify(cancel.out)}`);
      // ListTasks has no 0.3 REST route (the SDK 0.3 clients refuse it themselves).
      if (flags.includes('--legacy')) continue;
      const listed = await call(`listed ${name}`, ['--list']);
      assert.ok(listed.out.listed?.some((t) => t.text === `echo: listed ${name}`), `${name}: ${JSON.stringify(listed.out)} ${listed.stderr}`);
    }
    const calls = agent.seen.filter((s) => !s.includes('/.well-known/'));
    assert.ok(calls.every((s) => / \/rest\//.test(s)), calls.join(', '));
    assert.ok(calls.some((s) => s.startsWith('POST /rest/v1/')), 'the 0.3 /v1 routes were used');
  });
});
