// Per-call latency client for benchmarks (Node, official @a2a-js/sdk + raw http).
//
// Usage:  node js/bench_client.mjs CARD_URL [--text T] [--warmup W] [--n N] [--methods m1,m2,...]
//
//   CARD_URL   full URL of the agent card, e.g. http://127.0.0.1:P/.well-known/agent-card.json
//   --text     task text (default "sleep 0": on the peer servers, working then completed
//              at once, no artificial pause)
//   --warmup   untimed calls per method before measuring (default 20)
//   --n        timed calls per method (default 200)
//   --methods  comma list, default all four, run in this order:
//     js-sdk-send         official JS SDK client (ClientFactory defaults, A2A 1.0),
//                         blocking client.sendMessage()
//     js-sdk-stream       same client, client.sendMessageStream() consumed until the stream ends
//     raw-keepalive-send  node:http, keep-alive Agent (maxSockets 1), hand-written blocking
//                         1.0 SendMessage POST (A2A-Version: 1.0, Content-Type:
//                         application/json), whole JSON answer read and parsed
//     raw-keepalive-sse   same transport, hand-written SendStreamingMessage POST
//                         (Accept: text/event-stream), SSE read until an event carries a
//                         terminal state
//
// Calls are sequential (one in flight). Wall time per call = process.hrtime.bigint()
// from just before the call to: the resolved sendMessage promise (js-sdk-send); the
// first event with a terminal state (js-sdk-stream, raw-keepalive-sse — the rest of
// the stream is then drained untimed before the next call so the connection is
// reused); the parsed JSON body (raw-keepalive-send). The card is fetched and the
// SDK client built once, untimed. Every call (warm-up included) must end in a
// COMPLETED task, otherwise the process prints the reason on stderr and exits 1.
//
// Output: one JSON line per method, on stdout:
//   {"method":"js-sdk-send","n":200,"p50_ms":1.234,"p90_ms":1.567,"min_ms":0.987}
// (nearest-rank percentiles, 3 decimals). Exit 0 ok, 1 failure, 2 usage.
// stderr: for the raw-* methods, one line "# <method>: K TCP connection(s) for M calls"
// (K should be 1: the keep-alive socket was reused for every call).

import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import http from 'node:http';

import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';

const CALL_TIMEOUT_MS = 30_000;
const MAX_CALLS = 1_000_000;
const ALL_METHODS = ['js-sdk-send', 'js-sdk-stream', 'raw-keepalive-send', 'raw-keepalive-sse'];
const TERMINAL_WIRE = new Set([
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED',
  'TASK_STATE_REJECTED',
  'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_AUTH_REQUIRED',
]);
const TERMINAL_SDK = new Set([...TERMINAL_WIRE].map((n) => TaskState[n]));

function usage(msg) {
  process.stderr.write(
    'usage: node js/bench_client.mjs CARD_URL [--text T] [--warmup W] [--n N] [--methods m1,m2,...]\n' +
      `  methods: ${ALL_METHODS.join(',')}\n${msg ? msg + '\n' : ''}`
  );
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      text: { type: 'string', default: 'sleep 0' },
      warmup: { type: 'string', default: '20' },
      n: { type: 'string', default: '200' },
      methods: { type: 'string', default: ALL_METHODS.join(',') },
    },
  });
} catch (e) {
  usage(e.message);
}
if (parsed.positionals.length !== 1) usage('expected exactly one CARD_URL');
const CARD_URL = parsed.positionals[0];
const TEXT = parsed.values.text;
const count = (name) => {
  const v = parsed.values[name];
  if (!/^\d+$/.test(v) || Number(v) > MAX_CALLS) usage(`--${name} must be an integer 0..${MAX_CALLS}`);
  return Number(v);
};
const WARMUP = count('warmup');
const N = count('n');
if (N < 1) usage('--n must be >= 1');
const METHODS = parsed.values.methods.split(',').filter(Boolean);
for (const m of METHODS) if (!ALL_METHODS.includes(m)) usage(`unknown method ${m}`);

class BenchError extends Error {}
const fail = (method, msg) => {
  throw new BenchError(`${method}: ${msg}`);
};

// ---- raw node:http helpers ---------------------------------------------------

/** One request; resolves {status, headers, res} with the body still unread. */
function rawRequest(agent, url, method, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers }, (res) => resolve(res));
    req.setTimeout(CALL_TIMEOUT_MS, () => req.destroy(new Error(`timeout after ${CALL_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

function readAll(res) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
  });
}

async function fetchCard(agent) {
  const res = await rawRequest(agent, CARD_URL, 'GET', { 'A2A-Version': '1.0' });
  const text = await readAll(res);
  if (res.statusCode !== 200) fail('card', `HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

function jsonRpcUrl(card) {
  const ifaces = card.supportedInterfaces ?? [];
  const iface =
    ifaces.find(
      (i) => i.protocolBinding?.toUpperCase() === 'JSONRPC' && (!i.protocolVersion || i.protocolVersion.startsWith('1'))
    ) ?? fail('card', `no 1.0 JSONRPC interface in ${JSON.stringify(ifaces)}`);
  return iface.url;
}

let rpcId = 0;
const rpcBody = (method) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id: ++rpcId,
    method,
    params: { message: { role: 'ROLE_USER', messageId: randomUUID(), parts: [{ text: TEXT }] } },
  });

function rawSend(agent, url) {
  return async () => {
    const t0 = process.hrtime.bigint();
    const body = rpcBody('SendMessage');
    const res = await rawRequest(agent, url, 'POST', {
      'A2A-Version': '1.0',
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(body),
    }, body);
    const text = await readAll(res);
    const doc = JSON.parse(text);
    const t1 = process.hrtime.bigint();
    const state = doc?.result?.task?.status?.state;
    if (res.statusCode !== 200 || state !== 'TASK_STATE_COMPLETED')
      fail('raw-keepalive-send', `HTTP ${res.statusCode}, expected a COMPLETED task, got ${text.slice(0, 300)}`);
    return t1 - t0;
  };
}

/** Incremental SSE reader: calls onData(dataString) per event. */
function sseEvents(res, onData) {
  return new Promise((resolve, reject) => {
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      buf += chunk;
      for (;;) {
        const m = /\r\n\r\n|\n\n|\r\r/.exec(buf);
        if (!m) break;
        const block = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        const data = block
          .split(/\r\n|\n|\r/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).replace(/^ /, ''))
          .join('\n');
        if (data) {
          try {
            onData(data);
          } catch (e) {
            reject(e);
            res.destroy();
            return;
          }
        }
      }
    });
    res.on('end', resolve);
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
  });
}

function rawSse(agent, url) {
  return async () => {
    const t0 = process.hrtime.bigint();
    const body = rpcBody('SendStreamingMessage');
    const res = await rawRequest(agent, url, 'POST', {
      'A2A-Version': '1.0',
      'Content-Type': 'application/json',
      Accept: 'text/event-stream',
      'Content-Length': Buffer.byteLength(body),
    }, body);
    const ctype = res.headers['content-type'] ?? '';
    if (res.statusCode !== 200 || !ctype.startsWith('text/event-stream')) {
      const text = await readAll(res);
      fail('raw-keepalive-sse', `HTTP ${res.statusCode} ${ctype}: ${text.slice(0, 300)}`);
    }
    let t1;
    let terminal;
    let events = 0;
    await sseEvents(res, (data) => {
      events++;
      const doc = JSON.parse(data);
      if (doc.error) fail('raw-keepalive-sse', `JSON-RPC error event ${data.slice(0, 300)}`);
      const r = doc.result ?? {};
      const state = r.statusUpdate?.status?.state ?? r.task?.status?.state;
      if (terminal === undefined && TERMINAL_WIRE.has(state)) {
        t1 = process.hrtime.bigint();
        terminal = state;
      }
    });
    if (terminal !== 'TASK_STATE_COMPLETED')
      fail('raw-keepalive-sse', `stream of ${events} events ended with terminal state ${terminal ?? 'none'}`);
    return t1 - t0;
  };
}

// ---- official SDK ------------------------------------------------------------

const sdkRequest = () => ({
  tenant: '',
  message: {
    messageId: randomUUID(),
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: TEXT }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
  configuration: undefined,
  metadata: undefined,
});

function sdkSend(client) {
  return async () => {
    const t0 = process.hrtime.bigint();
    const result = await client.sendMessage(sdkRequest(), { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
    const t1 = process.hrtime.bigint();
    if (!result || 'messageId' in result || result.status?.state !== TaskState.TASK_STATE_COMPLETED)
      fail('js-sdk-send', `expected a COMPLETED task, got ${JSON.stringify(result).slice(0, 300)}`);
    return t1 - t0;
  };
}

function sdkStream(client) {
  return async () => {
    const t0 = process.hrtime.bigint();
    let t1;
    let terminal;
    let events = 0;
    for await (const ev of client.sendMessageStream(sdkRequest(), { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) })) {
      events++;
      const p = ev?.payload;
      const state =
        p?.$case === 'statusUpdate' ? p.value.status?.state : p?.$case === 'task' ? p.value.status?.state : undefined;
      if (terminal === undefined && TERMINAL_SDK.has(state)) {
        t1 = process.hrtime.bigint();
        terminal = state;
      }
    }
    if (terminal !== TaskState.TASK_STATE_COMPLETED)
      fail('js-sdk-stream', `stream of ${events} events ended with terminal state ${TaskState[terminal] ?? 'none'}`);
    return t1 - t0;
  };
}

// ---- driver ------------------------------------------------------------------

const round3 = (x) => Math.round(x * 1000) / 1000;
const pct = (sorted, p) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)];

async function measure(method, call) {
  for (let i = 0; i < WARMUP; i++) await call();
  const ms = [];
  for (let i = 0; i < N; i++) ms.push(Number(await call()) / 1e6);
  ms.sort((a, b) => a - b);
  console.log(
    JSON.stringify({ method, n: N, p50_ms: round3(pct(ms, 0.5)), p90_ms: round3(pct(ms, 0.9)), min_ms: round3(ms[0]) })
  );
}

const cardAgent = new http.Agent({ keepAlive: false });
const agents = [];
const newAgent = () => {
  const a = new http.Agent({ keepAlive: true, maxSockets: 1 });
  // Count TCP connects, to show keep-alive really held (reported on stderr).
  a.connects = 0;
  const connect = a.createConnection.bind(a);
  a.createConnection = (...args) => {
    a.connects++;
    return connect(...args);
  };
  agents.push(a);
  return a;
};

let rc = 0;
try {
  const url = jsonRpcUrl(await fetchCard(cardAgent));
  let client;
  const sdkClient = async () => (client ??= await new ClientFactory().createFromUrl(CARD_URL, ''));
  for (const method of METHODS) {
    let call;
    if (method === 'js-sdk-send') call = sdkSend(await sdkClient());
    else if (method === 'js-sdk-stream') call = sdkStream(await sdkClient());
    else if (method === 'raw-keepalive-send') call = rawSend(newAgent(), url);
    else call = rawSse(newAgent(), url);
    await measure(method, call);
    if (method.startsWith('raw-'))
      process.stderr.write(`# ${method}: ${agents.at(-1).connects} TCP connection(s) for ${WARMUP + N} calls\n`);
  }
} catch (e) {
  process.stderr.write(`error: ${e instanceof BenchError ? e.message : e?.stack ?? e}\n`);
  rc = 1;
} finally {
  for (const a of agents) a.destroy();
  cardAgent.destroy();
}
process.exitCode = rc;
