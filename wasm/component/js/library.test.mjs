// The library component (dist/toolnexus-a2a.wasm) in Node through
// `jco transpile`: the same .wasm, a non-Rust host, no wasm-bindgen.
// agent-tools and call against a real peer: the official @a2a-js/sdk server
// (tests/peers/js/server.mjs), in 1.0 mode and with 0.3 compatibility, and
// serving HTTP+JSON only (1.0, 0.3, a tenant).
//
// Run by wasm/component/test.sh (after build.sh and setup.sh):
//   node --test js/library.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
const wasm = path.resolve(here, '../dist/toolnexus-a2a.wasm');
const out = path.resolve(here, 'out');

assert.ok(fs.existsSync(wasm), `${wasm} is missing: run bash wasm/component/build.sh`);
fs.rmSync(out, { recursive: true, force: true });
execFileSync(path.join(here, 'node_modules/.bin/jco'),
  ['transpile', wasm, '-o', out, '--name', 'toolnexus-a2a', '--quiet',
    '--map', 'toolnexus:a2a/call-host=../call-host.mjs'], { stdio: 'inherit' });
const { client, server } = await import(path.join(out, 'toolnexus-a2a.js'));
const { CallListener } = await import('./call-host.mjs');

/** Starts the official JS SDK server; resolves to {url, child} at its `listening on` line. */
function jsPeer(extra = []) {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn('node', [path.join(root, 'tests/peers/js/server.mjs'), '--port', String(port), ...extra],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => {
      const m = /^listening on (\S+)/.exec(line);
      m ? resolve({ url: m[1], child }) : reject(new Error(`unexpected first line ${line}`));
    });
    child.once('exit', (code) => reject(new Error(`the peer exited (${code})`)));
  });
}

const agent = (card) => ({ card, headers: [], timeoutMs: 30000n, pollIntervalMs: undefined,
  maxCardBytes: undefined, maxSkills: undefined, allowInsecureHeaders: false });
const noRefs = { taskId: undefined, contextId: undefined };

for (const mode of [[], ['--compat-03']]) {
  test(`agent-tools and call against the official JS SDK server ${mode.join(' ') || '(1.0)'}`, async () => {
    const peer = await jsPeer(mode);
    try {
      const card = `${peer.url}/.well-known/agent-card.json`;
      const tools = client.agentTools(agent(card));
      const names = tools.map((t) => t.name);
      assert.ok(names.includes('js-agent_echo'), names.join(','));
      assert.equal(JSON.parse(tools[0].inputSchema).required[0], 'task');

      const summary = client.readCard(agent(card));
      assert.equal(summary.name, 'js-agent');
      assert.equal(summary.streaming, true);

      const ok = client.call(agent(card), 'echo', 'hello from jco', { deadlineMs: undefined, events: true, ...noRefs });
      assert.equal(ok.result.isError, false, ok.result.output);
      assert.equal(ok.result.output, 'echo: hello from jco');
      assert.equal(JSON.parse(ok.result.metadata).state, 'completed');
      assert.ok(ok.events.length >= 2, JSON.stringify(ok.events));
      assert.equal(ok.events.at(-1).state, 'completed');

      const failed = client.call(agent(card), 'js-agent_fail', 'fail on purpose', { deadlineMs: undefined, events: false, ...noRefs });
      assert.equal(failed.result.isError, true);
      assert.match(failed.result.output, /deliberate failure: fail on purpose/);
      assert.deepEqual(failed.events, []);

      // call-live: the tools, then each event as it happens, to a JS listener.
      const seen = [];
      const listener = new CallListener({
        onTools: (tools) => seen.push(`tools ${tools.length}`),
        onEvent: (e) => seen.push(e.state ?? e.kind),
      });
      const live = client.callLive(agent(card), 'echo', 'hello live', { deadlineMs: undefined, events: true, ...noRefs }, listener);
      assert.equal(live.output, 'echo: hello live');
      assert.equal(seen[0], `tools ${tools.length}`);
      assert.equal(seen.at(-1), 'completed', seen.join(','));

      // A tool the agent does not have: the error variant, as `toolnexus call` says it.
      assert.throws(() => client.call(agent(card), 'nope', 'x', { deadlineMs: undefined, events: false, ...noRefs }),
        (e) => e.payload?.tag === 'misuse' && /the agent has no tool "nope"/.test(e.payload.val));
    } finally {
      peer.child.kill();
    }
  });
}

for (const mode of [['--rest-only'], ['--rest-only', '--compat-03', '--card-03'], ['--rest-only', '--tenant', 'acme']]) {
  test(`a REST-only official JS SDK server (${mode.join(' ')}): the dialect names HTTP+JSON, calls complete`, async () => {
    const peer = await jsPeer(mode);
    try {
      const card = `${peer.url}/.well-known/agent-card.json`;
      const want = mode.includes('--compat-03') ? 'rest-v03' : 'rest-v1';
      const summary = client.readCard(agent(card));
      assert.equal(summary.dialect, want, JSON.stringify(summary));
      // The tenant is a path segment of every request.
      assert.equal(summary.endpoint, mode.includes('--tenant') ? `${peer.url}/acme` : peer.url);
      const tools = client.agentTools(agent(card));
      assert.ok(tools.every((t) => t.dialect === want), JSON.stringify(tools.map((t) => t.dialect)));
      const ok = client.call(agent(card), 'echo', 'hello over rest', { deadlineMs: undefined, events: true, ...noRefs });
      assert.equal(ok.result.isError, false, ok.result.output);
      assert.equal(ok.result.output, 'echo: hello over rest');
      assert.equal(ok.events.at(-1).state, 'completed');
    } finally {
      peer.child.kill();
    }
  });
}

test('the pure functions and the echo server on plain records', () => {
  assert.equal(client.sanitize('a b/c'), 'a_b_c');
  const agents = client.parseAgentsConfig(JSON.stringify({ p: { card: 'http://127.0.0.1:1/', timeout: 5 } }));
  assert.equal(agents[0].card, 'http://127.0.0.1:1/');
  assert.equal(agents[0].timeoutMs, 5n);
  const card = JSON.parse(server.buildAgentCard('{"name":"n"}', [['greet', 'Says hello']], 'http://h/'));
  assert.equal(card.name, 'n');
  assert.equal(card.skills[0].id, 'greet');

  const echo = new server.EchoServer({ config: '{"name":"wasm-echo"}', skills: [], url: 'http://h/' });
  const send = (method, params) => {
    const body = new TextEncoder().encode(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
    const r = echo.handle({ method: 'POST', url: '/', headers: [['content-type', 'application/json']], body });
    return JSON.parse(new TextDecoder().decode(r.body));
  };
  const sent = send('message/send', { message: { kind: 'message', messageId: 'm1', role: 'user', parts: [{ kind: 'text', text: 'hi' }] } });
  assert.equal(sent.result.status.state, 'completed', JSON.stringify(sent));
  const got = send('tasks/get', { id: sent.result.id });
  assert.equal(got.result.artifacts[0].parts[0].text, 'hi');
});
