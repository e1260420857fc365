// The seed scenarios under Node, through the packed tarball installed into a
// fresh folder (wasm/test.sh), against real local HTTP peers on 127.0.0.1.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  eventually, importShim, killChildren, serveFetch, startJsSdkServer, startNativeEchoAgent, startPeer, startStubLlm, toolCall,
  withTimeout,
} from './helpers.mjs';

const tn = await importShim('esm.mjs');
const { parseSkillMd } = await importShim('skills.mjs');
const closers = [];
after(async () => {
  await Promise.all(closers.map((c) => c()));
  await killChildren();
});

async function peer(options) {
  const p = await startPeer(options);
  closers.push(p.close);
  return p;
}

/** Asserts that `promise` rejects with an `Error` of this `kind`. */
async function rejectsWithKind(promise, kind, pattern) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Error, 'an Error');
    assert.equal(e.kind, kind, `kind of: ${e.message}`);
    if (pattern) assert.match(e.message, pattern);
    return true;
  });
}

describe('imports', () => {
  test('ESM and CommonJS entries expose the same API', async () => {
    const cjs = await importShim('cjs.cjs');
    const names = ['agent', 'agentTools', 'parseAgentsConfig', 'buildAgentCard', 'createToolkit', 'createClient', 'createA2AHandler', 'sanitize', 'describeCard', 'listTasks'];
    for (const n of names) {
      assert.equal(typeof tn[n], 'function', `ESM ${n}`);
      assert.equal(typeof cjs[n], 'function', `CJS ${n}`);
    }
    // Node gets one instance whichever way it loads the package.
    assert.equal(cjs.agentTools, tn.agentTools);
    assert.equal(tn.sanitize('café-1 x'), 'caf_-1_x');
  });

  test('the client-only entry loads under ESM and CommonJS and has no server half', async () => {
    const esm = await importShim('client.mjs');
    const cjs = await importShim('client.cjs');
    for (const m of [esm, cjs]) {
      assert.deepEqual(Object.keys(m).sort(), ['agent', 'agentTools', 'createToolkit', 'describeCard', 'listTasks', 'parseAgentsConfig', 'sanitize']);
    }
    await rejectsWithKind(esm.createToolkit({ skills: [{ name: 'x' }] }), 'misuse', /full build/);
  });

  test('the skills entry loads under ESM and CommonJS: parseSkillMd with a real YAML parser', async () => {
    const esm = await importShim('skills.mjs');
    const cjs = await importShim('skills.cjs');
    for (const m of [esm, cjs]) {
      assert.deepEqual(Object.keys(m), ['parseSkillMd']);
      assert.deepEqual(m.parseSkillMd('\ufeff---\r\nname: "  q  "\r\ndescription: >\r\n  folded\r\n  text\r\n---\r\n\r\nBody.\r\n'), {
        name: 'q', description: 'folded text', content: 'Body.',
      });
    }
    // YAML, not line matching: an anchor and alias, a block scalar, a flow mapping.
    assert.deepEqual(esm.parseSkillMd('---\nbase: &n shared\nname: *n\ndescription: |\n  two\n  lines\nmeta: {a: 1}\n---\nx'), {
      name: 'shared', description: 'two\nlines', content: 'x',
    });
    for (const [text, why] of [
      ['no frontmatter', /no frontmatter/],
      ['---\nname: [broken\n---\nbody', /invalid YAML in frontmatter/],
      ['---\ndescription: d\n---\n', /missing `name`/],
      ['---\nname: 5\n---\n', /`name` must be a string, found a number/],
    ]) {
      assert.throws(() => esm.parseSkillMd(text), (e) => e.kind === 'misuse' && why.test(e.message), text);
    }
  });
});

describe('outbound: agents as tools', () => {
  test('round trip: SendMessage, at least two polls, completed with the artifact text', async () => {
    const p = await peer({ name: 'echo agent', workingPolls: 2 });
    const tools = await tn.agentTools(tn.agent({ card: p.cardUrl, pollEvery: 20 }));
    assert.equal(tools.length, 1);
    const [tool] = tools;
    assert.equal(tool.name, 'echo_agent_echo');
    assert.equal(tool.source, 'a2a');
    assert.equal(tool.description, 'Echoes the task');
    assert.deepEqual(tool.inputSchema, {
      type: 'object', properties: { task: { type: 'string', description: 'Echoes the task' } }, required: ['task'],
    });
    const r = await tool.execute({ task: 'hello' });
    assert.equal(r.isError, false, r.output);
    assert.equal(r.output, 'echo: hello');
    assert.equal(r.metadata.agent, 'echo agent');
    assert.equal(r.metadata.state, 'completed');
    assert.ok(r.metadata.polls >= 2, `polls: ${r.metadata.polls}`);
    assert.ok(p.methods().filter((m) => m === 'GetTask' || m === 'tasks/get').length >= 2);
    assert.deepEqual(JSON.parse(JSON.stringify(tool)), {
      name: tool.name, description: tool.description, inputSchema: tool.inputSchema, source: 'a2a',
    });
  });

  test('a failed task is isError with the remote message', async () => {
    const p = await peer({ workingPolls: 1 });
    const [tool] = await tn.agentTools({ card: p.cardUrl, pollEvery: 10 });
    const r = await tool.execute({ task: 'fail please' });
    assert.equal(r.isError, true);
    assert.match(r.output, /^A2A task \S+ failed: deliberate failure: fail please$/);
    assert.equal(r.metadata.state, 'failed');
  });

  test('two skills give two tools with sanitized names', async () => {
    const p = await peer({
      name: 'Review Bot',
      skills: [
        { id: 'review', name: 'Review', description: 'Reviews code' },
        { id: 'sum.up', name: 'Summarize', description: 'Summarizes' },
      ],
    });
    const tools = await tn.agentTools(p.cardUrl);
    assert.deepEqual(tools.map((t) => t.name), ['Review_Bot_review', 'Review_Bot_sum_up']);
    assert.deepEqual(tools.map((t) => t.description), ['Reviews code', 'Summarizes']);
  });

  test('a bad card rejects with an Error that has a kind', async () => {
    const notJson = await peer({ card: () => 'this is not json' });
    await rejectsWithKind(tn.agentTools(notJson.cardUrl), 'malformed');
    const status = await peer({ card: () => ({ status: 500 }) });
    await rejectsWithKind(tn.agentTools(status.cardUrl), 'status', /HTTP 500/);
    const closed = await peer();
    await closed.close();
    await rejectsWithKind(tn.agentTools({ card: closed.cardUrl, timeout: 5000 }), 'transport', /ECONNREFUSED|fetch failed/);
    await rejectsWithKind(tn.agentTools({ card: 42 }), 'misuse');
    assert.throws(() => tn.agent({ card: 'http://x/', timeout: -1 }), (e) => e.kind === 'misuse');
  });

  test('abort with an AbortController gives a canceled result and cancels the remote task', async () => {
    const p = await peer();
    const [tool] = await tn.agentTools({ card: p.cardUrl, pollEvery: 20 });
    const controller = new AbortController();
    const running = tool.execute({ task: 'slow job' }, { signal: controller.signal });
    await eventually(() => p.methods().some((m) => m === 'GetTask' || m === 'tasks/get'), 5000, 'a first poll');
    controller.abort();
    const r = await withTimeout(running, 5000, 'the aborted call');
    assert.equal(r.isError, true);
    assert.match(r.output, /^A2A task \S+ canceled$/);
    assert.equal(r.metadata.state, 'canceled');
    await eventually(() => p.methods().some((m) => m === 'CancelTask' || m === 'tasks/cancel'), 5000, 'CancelTask');
  });

  test('an already aborted signal stops before any task is created', async () => {
    const p = await peer();
    const [tool] = await tn.agentTools(p.cardUrl);
    const r = await tool.execute({ task: 'never' }, { signal: AbortSignal.abort() });
    assert.equal(r.isError, true);
    assert.equal(r.metadata.state, 'canceled');
    assert.equal(p.methods().length, 0);
  });

  test('a timeout is a result, not a throw', async () => {
    const p = await peer();
    const [tool] = await tn.agentTools({ card: p.cardUrl, pollEvery: 20, timeout: 300 });
    const r = await tool.execute({ task: 'slow forever' });
    assert.equal(r.isError, true);
    assert.match(r.output, /timed out after 300ms \(state=working\)/);
  });

  test('header values expand ${NAME} from process.env at every call', async () => {
    const p = await peer();
    process.env.TN_WASM_TEST_TOKEN = 'tok-1';
    const [tool] = await tn.agentTools({ card: p.cardUrl, pollEvery: 10, headers: { Authorization: 'Bearer ${TN_WASM_TEST_TOKEN}' } });
    process.env.TN_WASM_TEST_TOKEN = 'tok-2';
    await tool.execute({ task: 'hi' });
    const auth = p.requests.map((r) => r.headers.authorization);
    assert.equal(auth[0], 'Bearer tok-1');
    assert.equal(auth.at(-1), 'Bearer tok-2');
  });
});

describe('events: the task as it happens', () => {
  test('describeCard says how calls will follow tasks, by the core rules', () => {
    const url = 'http://127.0.0.1:1/.well-known/agent-card.json';
    const s = tn.describeCard(JSON.stringify({ name: 'x', capabilities: { streaming: true },
      supportedInterfaces: [{ url: 'http://127.0.0.1:1/rpc', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }] }), url);
    assert.equal(s.dialect, '1.0');
    assert.equal(s.endpoint, 'http://127.0.0.1:1/rpc');
    assert.equal(s.follow, 'stream');
    assert.equal(tn.describeCard({ name: 'y', url: '/' }, url).follow, 'poll');
    assert.throws(() => tn.describeCard('[1]', url), (e) => e.kind === 'malformed');
  });

  test('a streaming peer (the official JS SDK server): onEvent sees each event as it arrives', async () => {
    const { url } = await startJsSdkServer();
    const [tool] = (await tn.agentTools(tn.agent({ card: `${url}/.well-known/agent-card.json` })))
      .filter((t) => t.name.endsWith('_echo'));
    const events = [];
    const started = Date.now();
    const r = await tool.execute({ task: 'chunks 3' }, { onEvent: (e) => events.push({ at: Date.now() - started, e }) });
    assert.equal(r.isError, false, r.output);
    assert.equal(r.output, 'chunk 0\nchunk 1\nchunk 2');
    assert.equal(r.metadata.polls, 0, 'streamed, never polled');
    assert.deepEqual(events.map(({ e }) => e.kind),
      ['task', 'status-update', 'artifact-update', 'artifact-update', 'artifact-update', 'status-update']);
    assert.equal(events.at(-1).e.status.state, 'completed');
    assert.equal(events.at(-1).e.final, true);
    assert.deepEqual(events.filter(({ e }) => e.kind === 'artifact-update').map(({ e }) => e.artifact.parts[0].text),
      ['chunk 0', 'chunk 1', 'chunk 2']);
    // The chunks come 100 ms apart at the peer: the caller saw them live, not all at the end.
    const first = events.find(({ e }) => e.kind === 'artifact-update').at;
    assert.ok(events.at(-1).at - first >= 150, `events spread over ${events.at(-1).at - first} ms`);
  });

  test('a polled peer: onEvent sees the task as each poll finds it; a throwing onEvent changes nothing', async () => {
    const p = await peer({ name: 'poller', workingPolls: 1 });
    const [tool] = await tn.agentTools(tn.agent({ card: p.cardUrl, pollEvery: 20 }));
    const states = [];
    const r = await tool.execute({ task: 'hi' }, {
      onEvent: (e) => {
        states.push(e.status.state);
        throw new Error('a broken listener');
      },
    });
    assert.equal(r.output, 'echo: hi');
    assert.deepEqual(states, ['submitted', 'working', 'completed']);
    const bad = await tool.execute({ task: 'hi' }, { onEvent: 42 });
    assert.equal(bad.isError, true);
    assert.match(bad.output, /onEvent must be a function/);
  });

  test('a stream the peer ends just after its terminal event leaves a reusable connection', async () => {
    const http = await import('node:http');
    let connections = 0;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        if (req.method === 'GET') {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ name: 'lazy', url: `http://127.0.0.1:${server.address().port}/`, protocolVersion: '0.3.0', preferredTransport: 'JSONRPC',
            capabilities: { streaming: true }, skills: [{ id: 'echo', name: 'echo', description: 'e', tags: [] }] }));
          return;
        }
        const { id } = JSON.parse(body);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { kind: 'task', id: 't1', contextId: 'c',
          status: { state: 'completed' }, artifacts: [{ artifactId: 'a', parts: [{ kind: 'text', text: 'ok' }] }] } })}\n\n`);
        // Like the Python SDK server: the stream ends a moment after its last event.
        setTimeout(() => res.end(), 20);
      });
    });
    server.on('connection', () => { connections += 1; });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => { server.closeAllConnections(); server.close(r); }));
    const [tool] = await tn.agentTools(`http://127.0.0.1:${server.address().port}/.well-known/agent-card.json`);
    const afterFirst = [];
    for (let i = 0; i < 3; i += 1) {
      const r = await tool.execute({ task: 'x' });
      assert.equal(r.output, 'ok', JSON.stringify(r));
      // The drain takes ~20 ms; leave it ample time.
      await new Promise((done) => setTimeout(done, 300));
      afterFirst.push(connections);
    }
    assert.equal(afterFirst[2], afterFirst[0], `later calls reused the connection: ${afterFirst}`);
  });

  test('stream(): the events as an async iterator, the result as .result', async () => {
    const { url } = await startJsSdkServer();
    const [tool] = (await tn.agentTools(tn.agent({ card: `${url}/.well-known/agent-card.json` })))
      .filter((t) => t.name.endsWith('_echo'));
    const call = tool.stream({ task: 'chunks 2' });
    const kinds = [];
    for await (const e of call) kinds.push(e.kind);
    assert.deepEqual(kinds, ['task', 'status-update', 'artifact-update', 'artifact-update', 'status-update']);
    const r = await call.result;
    assert.equal(r.output, 'chunk 0\nchunk 1');

    // Leaving the loop early stops listening; the call still ends, and so does .result.
    const early = tool.stream({ task: 'chunks 3' });
    for await (const e of early) {
      assert.equal(e.kind, 'task');
      break;
    }
    assert.equal((await early.result).output, 'chunk 0\nchunk 1\nchunk 2');

    const p = await peer({ name: 'kit2', workingPolls: 0 });
    const tk = await tn.createToolkit({ agents: [tn.agent({ card: p.cardUrl, pollEvery: 20 })] });
    const seen = [];
    const viaKit = tk.stream('kit2_echo', { task: 'y' }, { onEvent: (e) => seen.push(e.kind) });
    const iterated = [];
    for await (const e of viaKit) iterated.push(e.kind);
    assert.deepEqual(iterated, seen, 'onEvent and the iterator see the same events');
    assert.equal((await viaKit.result).output, 'echo: y');
    const bad = tool.stream({ task: 'x' }, { onEvent: 42 });
    for await (const e of bad) assert.fail(`no events for a misuse: ${e.kind}`);
    assert.match((await bad.result).output, /onEvent must be a function/);
  });

  test('toolkit.execute passes onEvent to A2A tools', async () => {
    const p = await peer({ name: 'kit', workingPolls: 0 });
    const tk = await tn.createToolkit({ agents: [tn.agent({ card: p.cardUrl, pollEvery: 20 })] });
    const kinds = [];
    const r = await tk.execute('kit_echo', { task: 'x' }, { onEvent: (e) => kinds.push(e.kind) });
    assert.equal(r.output, 'echo: x');
    assert.ok(kinds.length >= 2 && kinds.every((k) => k === 'task'), JSON.stringify(kinds));
  });
});

describe('config and toolkit', () => {
  test('parseAgentsConfig keeps enabled agents and leaves unset fields unset', () => {
    assert.deepEqual(tn.parseAgentsConfig(null), []);
    assert.deepEqual(
      tn.parseAgentsConfig({
        librarian: { card: 'https://library.internal/.well-known/agent-card.json' },
        off: { card: 'http://x/2', disabled: true },
        alsoOff: { card: 'http://x/3', enabled: false },
        planner: { card: 'http://x/4', timeout: 5000, pollEvery: 10, headers: { 'X-Trace': 'abc' } },
        noCard: { headers: {} },
      }),
      [
        { card: 'https://library.internal/.well-known/agent-card.json' },
        { card: 'http://x/4', headers: { 'X-Trace': 'abc' }, timeout: 5000, pollEvery: 10 },
      ],
    );
  });

  test('a config block becomes a toolkit whose tools execute; a dead agent is skipped', async () => {
    const p = await peer({ name: 'planner' });
    const dead = await peer();
    await dead.close();
    const tk = await tn.createToolkit({
      config: {
        agents: {
          planner: { card: p.cardUrl, pollEvery: 10, headers: { 'X-Trace': 'abc' } },
          broken: { card: dead.cardUrl, timeout: 3000 },
          off: { card: 'http://127.0.0.1:9/never', disabled: true },
        },
      },
      tools: [{ name: 'add', description: 'Adds', inputSchema: { type: 'object' }, execute: ({ a, b }) => String(a + b) }],
    });
    assert.deepEqual(tk.tools().map((t) => [t.name, t.source]), [['planner_echo', 'a2a'], ['add', 'host']]);
    assert.deepEqual(tk.failures().map((f) => [f.card, f.kind]), [[dead.cardUrl, 'transport']]);
    const r = await tk.execute('planner_echo', { task: 'plan it' });
    assert.equal(r.output, 'echo: plan it');
    assert.ok(p.requests.filter((q) => q.method === 'POST').every((q) => q.headers['x-trace'] === 'abc'));
    assert.deepEqual(await tk.execute('add', { a: 2, b: 3 }), { output: '5', isError: false });
    assert.deepEqual(await tk.execute('nope', {}), { output: 'Unknown tool: nope', isError: true });
    assert.equal(tk.get('add').description, 'Adds');
    assert.equal(tk.get('nope'), undefined);
    assert.equal(tk.toOpenAI()[0].function.name, 'planner_echo');
    assert.equal(tk.toAnthropic()[1].input_schema.type, 'object');
    assert.equal(tk.toGemini()[0].parameters.required[0], 'task');
  });

  test('host tools: objects, throws and rejections become results', async () => {
    const tk = await tn.createToolkit({
      tools: [
        { name: 'obj', execute: async () => ({ output: 'done', isError: false, metadata: { n: 1 } }) },
        { name: 'boom', execute: () => { throw new Error('kaput'); } },
        { name: 'reject', execute: () => Promise.reject(new TypeError('nope')) },
        { name: 'json', execute: () => ({ x: [1, 2] }) },
      ],
    });
    assert.deepEqual(await tk.execute('obj', {}), { output: 'done', isError: false, metadata: { n: 1 } });
    assert.deepEqual(await tk.execute('boom', {}), { output: 'kaput', isError: true });
    assert.deepEqual(await tk.execute('reject', {}), { output: 'nope', isError: true });
    assert.deepEqual(await tk.execute('json', {}), { output: '{"x":[1,2]}', isError: false });
    await rejectsWithKind(tn.createToolkit({ tools: [{ name: 'x' }] }), 'misuse', /execute/);
  });

  test('skills in a toolkit: the skill tool loads a skill; a SKILL.md text goes through parseSkillMd', async () => {
    const tk = await tn.createToolkit({
      skills: [{ name: 'hello-world', description: 'Greets', content: 'Say hello.' }, parseSkillMd('---\nname: md\n---\nFrom markdown.')],
    });
    const skill = tk.get('skill');
    assert.equal(skill.source, 'skill');
    // The reference tool (toolnexus SPEC §0.6): its description, one required name.
    assert.match(skill.description, /^Load a specialized skill when the task at hand matches/);
    assert.deepEqual(skill.inputSchema.required, ['name']);
    const md = await tk.execute('skill', { name: 'md' });
    assert.equal(md.isError, false);
    assert.equal(
      md.output,
      '<skill_content name="md">\n# Skill: md\n\nFrom markdown.\n\nBase directory for this skill: skill://md/\n' +
        'Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.\n</skill_content>',
    );
    const nope = await tk.execute('skill', { name: 'nope' });
    assert.deepEqual([nope.isError, nope.output], [true, 'Skill "nope" not found. Available skills: hello-world, md']);
    await rejectsWithKind(tn.createToolkit({ skills: [{ description: 'no name' }] }), 'misuse');
    // The text itself is refused with a pointer to the skills entry, never dropped.
    await rejectsWithKind(tn.createToolkit({ skills: ['---\nname: md\n---\nx'] }), 'misuse', /skills\[0\] is a SKILL\.md text: .*parseSkillMd from "toolnexus-wasm\/skills"/);
    assert.throws(() => tn.createA2AHandler({ client: 'echo', skills: [{ name: 'ok' }, '---\nname: md\n---\nx'] }), (e) => e.kind === 'misuse' && /skills\[1\] is a SKILL\.md text/.test(e.message));
  });

  test('addAgent adds tools at run time and the abort signal reaches them', async () => {
    const p = await peer({ name: 'late' });
    const tk = await tn.createToolkit({});
    assert.deepEqual(await tk.addAgent({ card: p.cardUrl, pollEvery: 10 }), ['late_echo']);
    assert.deepEqual(await tk.addAgent({ card: p.cardUrl, pollEvery: 10 }), []);
    assert.deepEqual(tk.tools().map((t) => t.name), ['late_echo']);
    const controller = new AbortController();
    const running = tk.execute('late_echo', { task: 'slow' }, { signal: controller.signal });
    await eventually(() => p.methods().some((m) => m === 'GetTask' || m === 'tasks/get'), 5000, 'a poll');
    // A call in flight keeps its toolkit while addAgent swaps in a bigger one.
    const other = await peer({ name: 'later' });
    assert.deepEqual(await tk.addAgent({ card: other.cardUrl, pollEvery: 10 }), ['later_echo']);
    assert.deepEqual(tk.tools().map((t) => t.name), ['late_echo', 'later_echo']);
    controller.abort();
    assert.equal((await withTimeout(running, 5000, 'abort')).metadata.state, 'canceled');
    const dead = 'http://127.0.0.1:9/.well-known/agent-card.json';
    await rejectsWithKind(tk.addAgent(dead), 'transport');
    assert.deepEqual(tk.failures().map((f) => [f.card, f.kind]), [[dead, 'transport']]);
    assert.deepEqual(tk.tools().map((t) => t.name), ['late_echo', 'later_echo']);
    assert.equal((await tk.execute('later_echo', { task: 'after' })).output, 'echo: after');
  });
});

describe('inbound: serve skills and resolve them', () => {
  const skills = [
    { name: 'hello-world', description: 'Greets people', content: 'Say hello warmly.\nThen stop.' },
    parseSkillMd('---\nname: summarize\ndescription: Summarizes text\n---\nSummarize in one line.\n'),
  ];

  test('buildAgentCard: defaults, allowlist, provider', () => {
    const card = tn.buildAgentCard({ name: 'front-desk', skills: ['summarize', 'nope'], provider: { organization: 'Acme', url: 'https://acme.example' } }, skills, 'http://127.0.0.1:1/');
    assert.equal(card.name, 'front-desk');
    assert.equal(card.version, '0.1.0');
    assert.equal(card.protocolVersion, '0.3.0');
    assert.equal(card.url, 'http://127.0.0.1:1/');
    assert.deepEqual(card.skills, [{ id: 'summarize', name: 'summarize', description: 'Summarizes text', tags: [] }]);
    assert.deepEqual(card.provider, { organization: 'Acme', url: 'https://acme.example' });
    assert.deepEqual(tn.buildAgentCard(null, [], 'http://h/').skills, []);
    assert.throws(() => tn.buildAgentCard({}, [], 7), (e) => e.kind === 'misuse');
  });

  test('createA2AHandler with a stub LLM behind a Node server, resolved with agentTools', async () => {
    const llm = await startStubLlm();
    closers.push(llm.close);
    const events = [];
    const saved = new Map();
    const states = [];
    const store = {
      async get(id) { return saved.get(id) ?? null; },
      async save(task) { states.push(task.status.state); saved.set(task.id, structuredClone(task)); },
    };
    const handler = tn.createA2AHandler({
      skills,
      client: tn.createClient({ baseUrl: llm.baseUrl, style: 'openai', model: 'stub-model', apiKey: 'sk-test-secret', systemPrompt: 'You are a test agent.' }),
      a2a: { name: 'node-edge', description: 'Served by createA2AHandler' },
      store,
      onTask: (e) => events.push(e),
    });
    const server = await serveFetch((req) => handler(req));
    closers.push(server.close);

    const card = await (await fetch(`${server.url}/.well-known/agent-card.json`)).json();
    assert.equal(card.name, 'node-edge');
    assert.equal(card.url, `${server.url}/`);
    assert.deepEqual(card.skills.map((s) => s.id), ['hello-world', 'summarize']);

    const tools = await tn.agentTools({ card: `${server.url}/.well-known/agent-card.json`, pollEvery: 20 });
    assert.deepEqual(tools.map((t) => t.name), ['node-edge_hello-world', 'node-edge_summarize']);
    const r = await tools[0].execute({ task: 'greet Ada' });
    assert.equal(r.isError, false, r.output);
    assert.equal(r.output, 'stub answer [Say hello warmly.] to: greet Ada');
    assert.equal(r.metadata.state, 'completed');

    // The model saw the skills prompt and the `skill` tool, and the key.
    const first = llm.calls[0];
    assert.equal(first.headers.authorization, 'Bearer sk-test-secret');
    assert.match(
      first.body.messages[0].content,
      /^You are a test agent\.\n\nSkills provide specialized instructions and workflows for specific tasks\.\n/,
    );
    assert.ok(first.body.tools.some((t) => t.function.name === 'skill'));
    // A store gets each task in the dialect it was made in (the package client speaks 1.0 here).
    assert.deepEqual([...new Set(states)], ['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_COMPLETED']);
    await eventually(() => events.length === 1, 2000, 'onTask');
    assert.equal(events[0].state, 'completed');
    assert.equal(events[0].task, 'greet Ada');
    assert.equal(events[0].result, 'stub answer [Say hello warmly.] to: greet Ada');
  });

  test('W3C trace context: execute({traceparent}) sends it on; the handler continues it to its model, its store, onSpan and a JS fulfiller', async () => {
    const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const [, traceId, parentSpan] = PARENT.split('-');
    const inTrace = (traceparent, who) => {
      assert.ok(traceparent, `${who}: a traceparent`);
      const [version, trace, span] = traceparent.split('-');
      assert.equal(version, '00', who);
      assert.equal(trace, traceId, who);
      assert.notEqual(span, parentSpan, `${who}: a span of its own`);
    };
    const llm = await startStubLlm();
    closers.push(llm.close);
    const saved = new Map();
    const events = [];
    const spans = [];
    const handler = tn.createA2AHandler({
      skills,
      client: tn.createClient({ baseUrl: llm.baseUrl, style: 'openai', model: 'stub-model' }),
      a2a: { name: 'traced-edge' },
      store: { async get(id) { return saved.get(id) ?? null; }, async save(task) { saved.set(task.id, structuredClone(task)); } },
      onTask: (e) => events.push(e),
      onSpan: (s) => spans.push(s),
    });
    const server = await serveFetch((req) => handler(req));
    closers.push(server.close);
    const tools = await tn.agentTools({ card: `${server.url}/.well-known/agent-card.json`, pollEvery: 20 });
    const r = await tools[0].execute({ task: 'greet Ada' }, { traceparent: PARENT, tracestate: 'v=1' });
    assert.equal(r.isError, false, r.output);
    assert.ok(llm.calls.length > 0);
    llm.calls.forEach((c, i) => inTrace(c.headers.traceparent, `model call ${i}`));
    assert.equal(new Set(llm.calls.map((c) => c.headers.traceparent)).size, llm.calls.length, 'a span per model call');
    assert.equal(llm.calls[0].headers.tracestate, 'v=1');
    const stored = [...saved.values()];
    assert.equal(stored.length, 1);
    inTrace(stored[0].traceparent, 'the stored task');
    await eventually(() => events.length === 1, 2000, 'onTask');
    assert.equal(events[0].traceId, traceId);
    // onSpan got the local skill call, the child of the model call that asked for it.
    const toolSpans = spans.filter((s) => s.name.startsWith('execute_tool'));
    assert.equal(toolSpans.length, 1, JSON.stringify(spans));
    const [span] = toolSpans;
    assert.equal(span.name, 'execute_tool skill');
    assert.equal(span.traceId, traceId);
    assert.equal(span.parentSpanId, llm.calls[0].headers.traceparent.split('-')[2]);
    assert.match(span.spanId, /^[0-9a-f]{16}$/);
    assert.ok(llm.calls.every((c) => !c.headers.traceparent.includes(span.spanId)), 'a span of its own');
    assert.equal(span.attributes['gen_ai.tool.name'], 'skill');
    assert.equal(span.attributes['toolnexus.tool.source'], 'skill');
    assert.equal(span.attributes['gen_ai.tool.call.id'], llm.calls[1].body.messages.find((m) => m.role === 'tool').tool_call_id);
    assert.equal(span.status, 'ok');
    assert.ok(span.startTimeMs <= span.endTimeMs && Math.abs(span.endTimeMs - Date.now()) < 60_000, JSON.stringify(span));

    // A JS fulfiller is told the task's trace; an invalid traceparent is ignored.
    const seen = [];
    const js = tn.createA2AHandler({ client: (request) => { seen.push(request.traceparent); return 'ok'; } });
    const send = (traceparent) => js(new Request('http://edge.test/', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'A2A-Version': '1.0', ...(traceparent ? { traceparent } : {}) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { role: 'ROLE_USER', messageId: randomUUID(), parts: [{ text: 'hi' }] } } }),
    })).then((res) => res.json());
    assert.equal((await send(PARENT)).result.task.status.state, 'TASK_STATE_COMPLETED');
    await send(PARENT.toUpperCase());
    inTrace(seen[0], 'the JS fulfiller');
    assert.equal(seen[1], undefined);
  });

  test('onSpan: one trace through caller, handler, model, agent tool and the agent, parent-linked; createToolkit and execute get the client spans', async () => {
    const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const [, traceId, parentSpan] = PARENT.split('-');
    // Agent B: echo, recording its spans.
    const bSpans = [];
    const b = tn.createA2AHandler({ client: 'echo', skills: [{ name: 'forecast', description: 'The weather', content: 'Say the weather.' }], a2a: { name: 'agent-b' }, onSpan: (s) => bSpans.push(s) });
    const bServer = await serveFetch((req) => b(req));
    closers.push(bServer.close);
    const tkSpans = [];
    const tk = await tn.createToolkit({ agents: [{ card: `${bServer.url}/.well-known/agent-card.json`, pollEvery: 20 }], onSpan: (s) => tkSpans.push(s) });
    const [bTool] = tk.tools().map((t) => t.name);
    assert.ok(bTool, 'B has a tool');
    // A's model asks for B's tool, then answers.
    const llm = await startStubLlm((body) => {
      const result = body.messages.filter((m) => m.role === 'tool').at(-1);
      return result ? { content: `B said: ${result.content}` } : toolCall(bTool, { task: 'weather in Paris' });
    });
    closers.push(llm.close);
    const aSpans = [];
    const a = tn.createA2AHandler({
      skills,
      client: tn.createClient({ baseUrl: llm.baseUrl, style: 'openai', model: 'stub-model' }),
      toolkit: tk,
      a2a: { name: 'agent-a' },
      onSpan: (s) => aSpans.push(s),
    });
    const aServer = await serveFetch((req) => a(req));
    closers.push(aServer.close);
    const [aTool] = await tn.agentTools({ card: `${aServer.url}/.well-known/agent-card.json`, pollEvery: 20 });
    const callerSpans = [];
    const r = await aTool.execute({ task: 'will it rain?' }, { traceparent: PARENT, onSpan: (s) => callerSpans.push(s) });
    assert.equal(r.isError, false, r.output);
    assert.match(r.output, /^B said: /);
    await eventually(() => aSpans.some((s) => s.name === 'a2a.task') && bSpans.some((s) => s.name === 'a2a.task'), 5000, 'the task spans');
    // (The card fetches before the call are requests of traces of their own.)
    const call = (list) => list.filter((s) => !s.name.startsWith('a2a.server GET'));
    const all = [...callerSpans, ...call(aSpans), ...call(bSpans)];
    const show = JSON.stringify(all.map((s) => `${s.name} ${s.spanId}<-${s.parentSpanId}`), null, 1);
    for (const s of all) {
      assert.equal(s.traceId, traceId, `one trace: ${s.name}`);
      assert.match(s.spanId, /^[0-9a-f]{16}$/);
      assert.ok(s.startTimeMs <= s.endTimeMs, s.name);
      assert.equal(s.status, 'ok', `${s.name}: ${JSON.stringify(s.attributes)}`);
    }
    const one = (list, prefix) => {
      const found = list.filter((s) => s.name.startsWith(prefix));
      assert.ok(found.length >= 1, `${prefix}: ${show}`);
      return found[0];
    };
    // The caller: its tool call under the caller's span, its A2A request under that.
    const callerTool = one(callerSpans, 'execute_tool ');
    assert.equal(callerTool.parentSpanId, parentSpan, show);
    assert.equal(callerTool.attributes['gen_ai.tool.type'], 'agent');
    const callerRequest = one(callerSpans, 'a2a.client ');
    assert.equal(callerRequest.parentSpanId, callerTool.spanId, show);
    assert.equal(callerRequest.kind, 'client');
    // A: request → task → model call → B's tool → its A2A request.
    const aRequest = one(aSpans, 'a2a.server Send');
    assert.equal(aRequest.kind, 'server');
    assert.equal(aRequest.parentSpanId, callerRequest.spanId, show);
    const aTask = one(aSpans, 'a2a.task');
    assert.equal(aTask.parentSpanId, aRequest.spanId, show);
    assert.equal(aTask.attributes['a2a.task.state'], 'completed');
    assert.deepEqual(aTask.events.map((e) => e.attributes['a2a.task.state']).slice(-1), ['completed']);
    const models = aSpans.filter((s) => s.name === 'chat stub-model');
    assert.equal(models.length, 2, show);
    for (const m of models) assert.equal(m.parentSpanId, aTask.spanId, show);
    assert.deepEqual(models.map((m) => m.spanId), llm.calls.map((c) => c.headers.traceparent.split('-')[2]), 'the ids the model saw');
    assert.equal(models[0].attributes['gen_ai.usage.input_tokens'], '10');
    assert.equal(models[0].attributes['gen_ai.usage.output_tokens'], '5');
    const aTool2 = one(aSpans, `execute_tool ${bTool}`);
    assert.equal(aTool2.parentSpanId, models[0].spanId, show);
    const aCall = one(aSpans, 'a2a.client ');
    assert.equal(aCall.parentSpanId, aTool2.spanId, show);
    // B: its request under A's A2A request, its task under that.
    const bRequest = one(bSpans, 'a2a.server Send');
    assert.equal(bRequest.parentSpanId, aCall.spanId, show);
    assert.equal(one(bSpans, 'a2a.task').parentSpanId, bRequest.spanId, show);
    // In the handler, its onSpan got the toolkit's spans, not createToolkit's.
    assert.equal(tkSpans.length, 0, JSON.stringify(tkSpans));

    // The toolkit's own calls: createToolkit's onSpan, the caller's trace continued.
    const direct = await tk.execute(bTool, { task: 'direct' }, { traceparent: PARENT });
    assert.equal(direct.isError, false, direct.output);
    const tkTool = one(tkSpans, `execute_tool ${bTool}`);
    assert.equal(tkTool.traceId, traceId);
    assert.equal(tkTool.parentSpanId, parentSpan);
    const tkCall = one(tkSpans, 'a2a.client ');
    assert.equal(tkCall.parentSpanId, tkTool.spanId);
    assert.equal(tkCall.attributes['http.response.status_code'], '200');
    // Without a traceparent, a toolkit with onSpan starts a trace of its own.
    const before = tkSpans.length;
    await tk.execute(bTool, { task: 'untraced' });
    const root = tkSpans.slice(before).find((s) => s.name.startsWith('execute_tool '));
    assert.ok(root && root.parentSpanId === undefined && root.traceId !== traceId, JSON.stringify(tkSpans.slice(before)));
  });

  test('ListTasks through the handler: the memory store, a JS store with list(), one without', async () => {
    const call = (handler, method, params) => handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json', 'A2A-Version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    })).then((r) => r.json());
    const send = (handler, text) => call(handler, 'SendMessage', { message: { role: 'ROLE_USER', messageId: text, parts: [{ text }] } });
    const memory = tn.createA2AHandler({ client: 'echo' });
    await send(memory, 'one');
    await send(memory, 'two');
    const listed = (await call(memory, 'ListTasks', { pageSize: 1 })).result;
    assert.equal(listed.totalSize, 2);
    assert.equal(listed.tasks.length, 1);
    assert.ok(listed.tasks[0].status.timestamp, 'stamped with Date.now()');
    assert.ok(listed.nextPageToken.length > 0);

    const saved = new Map();
    const hints = [];
    const withList = tn.createA2AHandler({ client: 'echo', store: {
      get: async (id) => saved.get(id) ?? null,
      save: async (task) => { saved.set(task.id, structuredClone(task)); },
      list: async (hint) => { hints.push(hint); return [...saved.values()]; },
    } });
    await send(withList, 'kept');
    const page = (await call(withList, 'ListTasks', { status: 'TASK_STATE_COMPLETED', includeArtifacts: true })).result;
    assert.equal(page.totalSize, 1);
    assert.equal(page.tasks[0].artifacts[0].parts[0].text, 'kept');
    assert.deepEqual(hints, [{ status: 'completed' }]);

    const getOnly = tn.createA2AHandler({ client: 'echo', store: { get: async () => null, save: async () => {} } });
    assert.equal((await call(getOnly, 'ListTasks', {})).error.code, -32004);
  });

  test('listTasks: a served agent\'s tasks (id, state, context, time, text), by context; an agent without ListTasks rejects as rpc', async () => {
    const handler = tn.createA2AHandler({ client: 'echo', skills: [{ name: 'echo', description: 'Echoes the task' }] });
    const server = await serveFetch((req) => handler(req));
    closers.push(server.close);
    const card = `${server.url}/.well-known/agent-card.json`;
    const [tool] = await tn.agentTools(card);
    for (const [task, contextId] of [['first', 'ctx-a'], ['second', 'ctx-b'], ['third', 'ctx-a']]) {
      const r = await tool.execute({ task, contextId });
      assert.equal(r.output, task, JSON.stringify(r));
    }
    const all = await tn.listTasks(card);
    assert.equal(all.totalSize, 3);
    assert.equal(all.truncated, false);
    assert.deepEqual(all.tasks.map((t) => t.text).sort(), ['first', 'second', 'third']);
    for (const t of all.tasks) {
      assert.equal(t.state, 'completed');
      assert.match(t.id, /^[0-9a-f-]{36}$/);
      assert.match(t.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    }
    const a = await tn.listTasks({ card, timeout: 5000 }, { contextId: 'ctx-a' });
    assert.deepEqual(a.tasks.map((t) => t.text).sort(), ['first', 'third']);
    assert.ok(a.tasks.every((t) => t.contextId === 'ctx-a'));
    assert.equal((await tn.listTasks(card, { status: 'failed' })).tasks.length, 0);
    await rejectsWithKind(tn.listTasks(card, { status: 'sleeping' }), 'misuse', /unknown status/);
    const p = await peer({ name: 'no-list' });
    await rejectsWithKind(tn.listTasks(p.cardUrl), 'rpc');
  });

  test('a JS store: a task an instance abandoned mid-work is failed when read, one still fresh is not', async () => {
    const call = (handler, id) => handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id } }),
    })).then((r) => r.json());
    // What another isolate left behind: it saved `working`, then was evicted.
    const ago = (ms) => new Date(Date.now() - ms).toISOString();
    const left = (id, at) => ({ kind: 'task', id, contextId: 'c', status: { state: 'working', timestamp: at } });
    const saved = new Map([['gone', left('gone', ago(11 * 60_000))], ['busy', left('busy', ago(60_000))]]);
    const store = {
      get: async (id) => structuredClone(saved.get(id) ?? null),
      save: async (task) => { saved.set(task.id, structuredClone(task)); },
    };
    const handler = tn.createA2AHandler({ client: 'echo', store });
    const gone = (await call(handler, 'gone')).result;
    assert.equal(gone.status.state, 'failed');
    assert.match(gone.status.message.parts[0].text, /stopped before this task finished/);
    assert.equal(saved.get('gone').status.state, 'failed', 'the store now says so too');
    assert.equal((await call(handler, 'busy')).result.status.state, 'working');
    // Opted out: the store's word stands.
    const trusting = tn.createA2AHandler({ client: 'echo', store, interruptedAfterMs: false });
    saved.set('gone2', left('gone2', ago(11 * 60_000)));
    assert.equal((await call(trusting, 'gone2')).result.status.state, 'working');
    assert.throws(() => tn.createA2AHandler({ client: 'echo', store, interruptedAfterMs: -1 }), (e) => e.kind === 'misuse');
  });

  test('the handler speaks JSON-RPC errors, CORS and 404 like the native server', async () => {
    const handler = tn.createA2AHandler({ skills, client: 'echo' });
    const post = (body, headers = {}) => handler(new Request('http://edge.test/', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body }));
    const json = async (resp) => (await resp).json();
    assert.equal((await json(post('{oops'))).error.code, -32700);
    assert.equal((await json(post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'nope', params: {} })))).error.code, -32601);
    assert.equal((await json(post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: 'x' } })))).error.code, -32001);
    // A blocking A2A 1.0 SendMessage waits for the task (echo answers with the text).
    const blocking = await json(post(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'SendMessage', params: { message: { role: 'ROLE_USER', messageId: randomUUID(), parts: [{ text: 'ping' }] } } }), { 'A2A-Version': '1.0' }));
    assert.equal(blocking.result.task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(blocking.result.task.artifacts[0].parts[0].text, 'ping');
    const preflight = await handler(new Request('http://edge.test/', { method: 'OPTIONS', headers: { 'Access-Control-Request-Headers': 'content-type' } }));
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
    assert.equal((await handler(new Request('http://edge.test/elsewhere'))).status, 404);
    const none = tn.createA2AHandler({ client: 'echo', a2a: false });
    assert.equal((await none(new Request('http://edge.test/.well-known/agent-card.json'))).status, 404);
    const big = await handler(new Request('http://edge.test/', { method: 'POST', body: 'x'.repeat(1024 * 1024 + 1) }));
    assert.equal(big.status, 413);
    assert.throws(() => tn.createA2AHandler({ client: 'gpt' }), (e) => e.kind === 'misuse');
  });

  test('ctx.waitUntil receives a promise that settles when the task does', async () => {
    const handler = tn.createA2AHandler({ client: 'echo' });
    const waited = [];
    const ctx = { waitUntil: (p) => waited.push(p) };
    const resp = await handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { role: 'user', messageId: 'm1', parts: [{ kind: 'text', text: 'later' }] }, configuration: { blocking: false } } }),
    }), ctx);
    const { result } = await resp.json();
    assert.equal(result.status.state, 'submitted');
    assert.equal(waited.length, 1);
    await withTimeout(waited[0], 5000, 'the waitUntil promise');
    const got = await (await handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: result.id } }),
    }))).json();
    assert.equal(got.result.status.state, 'completed');
  });

  test('conversations: a JS fulfiller asks, the package client answers on the same task, the context remembers', async () => {
    const seen = [];
    const handler = tn.createA2AHandler({
      skills,
      client: async (request) => {
        seen.push(request);
        const asked = request.history.at(-1);
        if (request.text.startsWith('ask')) return { inputRequired: 'Which city?' };
        if (request.text.startsWith('login')) return { authRequired: 'Sign in first' };
        if (asked?.role === 'agent' && asked.text === 'Which city?') return `booked for ${request.text}`;
        return `turns: ${request.history.map((t) => `${t.role}:${t.text}`).join(' | ')}`;
      },
    });
    const server = await serveFetch((req) => handler(req));
    closers.push(server.close);
    const card = `${server.url}/.well-known/agent-card.json`;

    const [plain] = await tn.agentTools({ card, pollEvery: 20 });
    assert.deepEqual(plain.inputSchema.required, ['task']);
    assert.deepEqual(Object.keys(plain.inputSchema.properties), ['task'], 'the fixed {task} schema by default');
    const [tool] = await tn.agentTools({ card, pollEvery: 20, conversational: true });
    assert.deepEqual(Object.keys(tool.inputSchema.properties).sort(), ['contextId', 'task', 'taskId']);

    const asked = await tool.execute({ task: 'ask for a trip', contextId: 'conv-1' });
    assert.equal(asked.isError, true);
    assert.equal(asked.metadata.state, 'input-required');
    assert.match(asked.output, /input-required: Which city\?$/);
    assert.equal(asked.metadata.contextId, 'conv-1');
    const { taskId, contextId } = asked.metadata;
    const done = await tool.execute({ task: 'Paris', taskId, contextId });
    assert.equal(done.isError, false, done.output);
    assert.equal(done.output, 'booked for Paris');
    assert.equal(done.metadata.taskId, taskId);
    assert.deepEqual(seen.at(-1).history, [{ role: 'user', text: 'ask for a trip' }, { role: 'agent', text: 'Which city?' }]);

    const recall = await plain.execute({ task: 'recall', contextId: 'conv-1' });
    assert.equal(recall.output, 'turns: user:ask for a trip | agent:Which city? | user:Paris | agent:booked for Paris');
    const login = await plain.execute({ task: 'login please' });
    assert.equal(login.metadata.state, 'auth-required');
    assert.match(login.output, /auth-required: Sign in first$/);
    const again = await plain.execute({ task: 'Rome', taskId });
    assert.equal(again.isError, true);
    assert.match(again.output, /-32004.*terminal/);
  });

  test('A2A strictness through the handler: required fields, versions, error details, extended card, ETag, parts, historyLength, taskId checks, no push', async () => {
    // The rows of CONFORMANCE.md that core tests cover, here through the published build.
    const handler = tn.createA2AHandler({ skills, client: 'echo' });
    const rpc = async (method, params, { version = '1.0', query = '' } = {}) => {
      const headers = { 'content-type': 'application/json' };
      if (version) headers['A2A-Version'] = version;
      const resp = await handler(new Request(`http://edge.test/${query}`, {
        method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      }));
      return resp.json();
    };
    const msg = (extra = {}) => ({ role: 'ROLE_USER', messageId: randomUUID(), parts: [{ text: 'hi' }], ...extra });
    const msg03 = () => ({ role: 'user', messageId: randomUUID(), parts: [{ kind: 'text', text: 'hi' }] });

    // Required fields: -32602 naming the field, with 1.0 error details; 0.3 errors stay plain.
    const noId = await rpc('SendMessage', { message: { role: 'ROLE_USER', parts: [{ text: 'x' }] } });
    assert.equal(noId.error.code, -32602, JSON.stringify(noId));
    assert.equal(noId.error.data[0]['@type'], 'type.googleapis.com/google.rpc.ErrorInfo');
    assert.equal(noId.error.data[1].fieldViolations[0].field, 'message.messageId');
    const noParts = await rpc('message/send', { message: { role: 'user', messageId: 'm', parts: [] } }, { version: null });
    assert.equal(noParts.error.code, -32602);
    assert.equal(noParts.error.data, undefined);

    // A2A-Version: header or query; unsupported ⇒ -32009.
    assert.equal((await rpc('SendMessage', { message: msg() }, { version: '1.1' })).error.code, -32009);
    const byQuery = await rpc('SendMessage', { message: msg03() }, { version: null, query: '?A2A-Version=1.0' });
    assert.equal(byQuery.result?.task?.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(byQuery));
    assert.equal((await rpc('SendMessage', { message: msg() }, { version: null, query: '?A2A-Version=9.9' })).error.code, -32009);
    // No version: a 1.0-shaped message is answered in 1.0, a 0.3 one in 0.3.
    assert.equal((await rpc('SendMessage', { message: msg() }, { version: null })).result.task.status.state, 'TASK_STATE_COMPLETED');
    assert.equal((await rpc('message/send', { message: msg03() }, { version: null })).result.kind, 'task');

    // No extended card declared ⇒ -32004, in both names.
    for (const method of ['GetExtendedAgentCard', 'agent/getAuthenticatedExtendedCard']) {
      assert.equal((await rpc(method, {})).error.code, -32004, method);
    }
    // The card's ETag, and 304 for a matching If-None-Match.
    const cardUrl = 'http://edge.test/.well-known/agent-card.json';
    const card = await handler(new Request(cardUrl));
    const etag = card.headers.get('etag');
    assert.ok(etag, 'an ETag');
    assert.equal((await handler(new Request(cardUrl, { headers: { 'If-None-Match': etag } }))).status, 304);

    // File and data parts are kept, and read back in either shape.
    const parts = [{ text: 'look' },
      { url: 'https://files.example/r.pdf', mediaType: 'application/pdf', filename: 'r.pdf' },
      { raw: 'aGVsbG8=', mediaType: 'text/plain', filename: 'hello.txt' },
      { data: { k: [1, 2] } }];
    const sent = await rpc('SendMessage', { message: msg({ parts }) });
    const task = sent.result.task;
    assert.deepEqual((await rpc('GetTask', { id: task.id })).result.history[0].parts, parts);
    const as03 = (await rpc('tasks/get', { id: task.id }, { version: '0.3' })).result.history[0].parts;
    assert.deepEqual(as03[1], { kind: 'file', file: { uri: 'https://files.example/r.pdf', mimeType: 'application/pdf', name: 'r.pdf' } });
    assert.deepEqual(as03[3], { kind: 'data', data: { k: [1, 2] } });

    // historyLength on SendMessage; ListTasks statusTimestampAfter is inclusive.
    assert.equal((await rpc('SendMessage', { message: msg(), configuration: { historyLength: 0 } })).result.task.history, undefined);
    const after = await rpc('ListTasks', { statusTimestampAfter: task.status.timestamp });
    assert.ok(after.result.tasks.some((t) => t.id === task.id), JSON.stringify(after));

    // A message naming a task: unknown ⇒ -32001, another context ⇒ -32602, finished ⇒ -32004.
    assert.equal((await rpc('SendMessage', { message: msg({ taskId: 'nope' }) })).error.code, -32001);
    assert.equal((await rpc('SendMessage', { message: msg({ taskId: task.id, contextId: 'other' }) })).error.code, -32602);
    assert.equal((await rpc('SendMessage', { message: msg({ taskId: task.id }) })).error.code, -32004);

    // A handler without the `push` option: the methods and a webhook on a send are -32003.
    for (const method of ['CreateTaskPushNotificationConfig', 'GetTaskPushNotificationConfig', 'ListTaskPushNotificationConfigs',
      'DeleteTaskPushNotificationConfig', 'tasks/pushNotificationConfig/set', 'tasks/pushNotificationConfig/list']) {
      assert.equal((await rpc(method, { taskId: task.id, id: 'c' })).error.code, -32003, method);
    }
    const hooked = await rpc('SendMessage', { message: msg(), configuration: { taskPushNotificationConfig: { url: 'https://hooks.example/x' } } });
    assert.equal(hooked.error.code, -32003, JSON.stringify(hooked));
  });

  test('the package client keeps an answer\'s file parts in metadata.parts', async () => {
    const drawer = await serveFetch(async (req) => {
      if (req.method === 'GET') {
        const origin = new URL(req.url).origin;
        return Response.json({ name: 'drawer', description: 'draws', version: '1.0.0', protocolVersion: '0.3.0', url: `${origin}/`,
          capabilities: {}, defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
          skills: [{ id: 'draw', name: 'draw', description: 'Draws', tags: [] }] });
      }
      const call = await req.json();
      return Response.json({ jsonrpc: '2.0', id: call.id, result: { kind: 'task', id: 't1', contextId: 'c1', status: { state: 'completed' },
        artifacts: [{ artifactId: 'a1', parts: [{ kind: 'text', text: 'a chart' },
          { kind: 'file', file: { bytes: 'iVBORw0KGgo=', mimeType: 'image/png', name: 'c.png' } },
          { kind: 'data', data: { rows: 2 } }] }] } });
    });
    closers.push(drawer.close);
    const [tool] = await tn.agentTools(`${drawer.url}/.well-known/agent-card.json`);
    const r = await tool.execute({ task: 'a chart please' });
    assert.equal(r.isError, false, r.output);
    assert.equal(r.output, 'a chart');
    assert.deepEqual(r.metadata.parts, [{ raw: 'iVBORw0KGgo=', mediaType: 'image/png', filename: 'c.png' }, { data: { rows: 2 } }]);
  });

  test('a JS fulfiller streams progress: SSE frames arrive as it emits them', async () => {
    let release;
    const gate = new Promise((r) => { release = r; });
    const seen = [];
    const handler = tn.createA2AHandler({
      client: async (request, emit) => {
        seen.push(request);
        emit.status('thinking');
        emit.artifact('part one');
        await gate;
        emit.artifact('part two', { lastChunk: false });
        return 'tail';
      },
    });
    const waited = [];
    const resp = await handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json', 'A2A-Version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'SendStreamingMessage', params: { message: { role: 'ROLE_USER', messageId: 'm1', parts: [{ text: 'stream it' }], metadata: { skill: 'x' } } } }),
    }), { waitUntil: (p) => waited.push(p) });
    assert.equal(resp.status, 200);
    assert.equal(resp.headers.get('content-type'), 'text/event-stream');
    assert.equal(resp.headers.get('access-control-allow-origin'), '*');
    assert.equal(waited.length, 1, 'the fulfilment went to waitUntil');
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffered = '';
    const next = async () => {
      while (!buffered.includes('\n\n')) {
        const { value, done } = await withTimeout(reader.read(), 5000, 'an SSE frame');
        if (done) return null;
        buffered += decoder.decode(value, { stream: true });
      }
      const end = buffered.indexOf('\n\n');
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      assert.ok(frame.startsWith('data: '), frame);
      const v = JSON.parse(frame.slice(6));
      assert.equal(v.id, 8);
      return v.result;
    };
    const first = await next();
    assert.equal(first.task.status.state, 'TASK_STATE_SUBMITTED');
    assert.equal((await next()).statusUpdate.status.state, 'TASK_STATE_WORKING');
    const said = await next();
    assert.equal(said.statusUpdate.status.message.parts[0].text, 'thinking');
    const one = (await next()).artifactUpdate;
    assert.deepEqual([one.artifact.parts[0].text, one.append, one.lastChunk], ['part one', false, false]);
    // The task is still running: the stream has given what exists so far.
    assert.deepEqual(seen.map((r) => [r.text, r.skill, typeof r.taskId]), [['stream it', 'x', 'string']]);
    release();
    const two = (await next()).artifactUpdate;
    assert.deepEqual([two.artifact.parts[0].text, two.append], ['part two', true]);
    const tail = (await next()).artifactUpdate;
    assert.deepEqual([tail.artifact.parts[0].text, tail.append, tail.lastChunk], ['tail', true, true]);
    assert.equal((await next()).statusUpdate.status.state, 'TASK_STATE_COMPLETED');
    assert.equal(await next(), null, 'the stream ends after the terminal event');
    await withTimeout(waited[0], 5000, 'the waitUntil promise');
    const got = await (await handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: first.task.id } }),
    }))).json();
    assert.equal(got.result.artifacts.length, 1);
    assert.deepEqual(got.result.artifacts[0].parts.map((p) => p.text), ['part one', 'part two', 'tail']);
    // A finished task cannot be subscribed to: a plain JSON-RPC error.
    const sub = await handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tasks/resubscribe', params: { id: first.task.id } }),
    }));
    assert.equal(sub.headers.get('content-type'), 'application/json');
    assert.equal((await sub.json()).error.code, -32004);
  });

  test('worker timers: an idle stream gets a heartbeat, and GetTask honours Prefer: wait', async () => {
    let release;
    const gate = new Promise((r) => { release = r; });
    const handler = tn.createA2AHandler({ client: async () => { await gate; return 'done'; }, heartbeatMs: 30 });
    const resp = await handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/stream', params: { message: { role: 'user', messageId: 'm', parts: [{ kind: 'text', text: 'wait' }] } } }),
    }));
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes(': ping')) {
      const { value, done } = await withTimeout(reader.read(), 5000, 'a heartbeat');
      assert.ok(!done, `the stream ended before a heartbeat: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    const id = JSON.parse(text.split('\n').find((l) => l.startsWith('data: ')).slice(6)).result.id;
    // A long-poll is held while the task runs and answered when it settles.
    const polled = handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json', Prefer: 'wait=5' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id } }),
    }));
    let answered = false;
    polled.then(() => { answered = true; });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(answered, false, 'held while the task runs');
    release();
    const got = await withTimeout(polled, 5000, 'the long-poll answer');
    assert.equal(got.headers.get('preference-applied'), 'wait=5');
    assert.equal((await got.json()).result.status.state, 'completed');
    await reader.cancel();
    assert.throws(() => tn.createA2AHandler({ client: 'echo', heartbeatMs: -1 }), /heartbeatMs/);
  });

  test('a JS fulfiller that throws fails the task with its message', async () => {
    const handler = tn.createA2AHandler({ client: () => { throw new Error('no luck'); } });
    const resp = await handler(new Request('http://edge.test/', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { role: 'user', messageId: 'm', parts: [{ kind: 'text', text: 'x' }] } } }),
    }));
    const { result } = await resp.json();
    assert.equal(result.status.state, 'failed');
    assert.match(result.status.message.parts[0].text, /no luck/);
  });

  test('createClient.run with a toolkit: the model calls a remote agent added at run time', async () => {
    const p = await peer({ name: 'remote' });
    const llm = await startStubLlm((body) => {
      const done = body.messages.find((m) => m.role === 'tool');
      return done ? { content: `final: ${done.content}` } : toolCall('remote_echo', { task: 'from the model' });
    });
    closers.push(llm.close);
    const tk = await tn.createToolkit({ tools: [{ name: 'noop', execute: () => 'ok' }] });
    await tk.addAgent({ card: p.cardUrl, pollEvery: 10 });
    const client = tn.createClient({ baseUrl: llm.baseUrl, style: 'openai', model: 'stub-model' });
    const result = await client.run('use the remote agent', { toolkit: tk });
    assert.equal(result.text, 'final: echo: from the model');
    assert.equal(result.toolCallCount, 1);
    assert.equal(result.toolCalls[0].name, 'remote_echo');
    assert.equal(result.turns, 2);
    assert.deepEqual(result.usage, { promptTokens: 20, completionTokens: 10, totalTokens: 30 });
    assert.deepEqual(llm.calls[0].body.tools.map((t) => t.function.name), ['noop', 'remote_echo']);
    await rejectsWithKind(tn.createClient({ baseUrl: 'http://127.0.0.1:9', style: 'openai', model: 'm' }).run('x'), 'transport');
    assert.throws(() => tn.createClient({ baseUrl: 'x', style: 'nope', model: 'm' }), (e) => e.kind === 'misuse');
  });

  test('createA2AHandler with a toolkit: the handler skills, the host tools and an agent added later', async () => {
    const p = await peer({ name: 'remote' });
    const llm = await startStubLlm((body) => {
      const done = body.messages.find((m) => m.role === 'tool');
      return done ? { content: `final: ${done.content}` } : toolCall('remote_echo', { task: 'via the handler' });
    });
    closers.push(llm.close);
    const tk = await tn.createToolkit({
      tools: [{ name: 'noop', execute: () => 'ok' }],
      skills: [{ name: 'own-skill', description: 'The toolkit skill', content: 'unused' }],
    });
    const handler = tn.createA2AHandler({
      skills,
      client: tn.createClient({ baseUrl: llm.baseUrl, style: 'openai', model: 'stub-model' }),
      toolkit: tk,
    });
    // Added after the handler was made: the next task sees it.
    await tk.addAgent({ card: p.cardUrl, pollEvery: 10 });
    const server = await serveFetch((req) => handler(req));
    closers.push(server.close);
    const tools = await tn.agentTools({ card: `${server.url}/.well-known/agent-card.json`, pollEvery: 20 });
    const r = await tools[0].execute({ task: 'go' });
    assert.equal(r.isError, false, r.output);
    assert.equal(r.output, 'final: echo: via the handler');
    const first = llm.calls[0].body;
    // The served model may also ask the caller (the built-in question tool).
    assert.deepEqual(first.tools.map((t) => t.function.name).sort(), ['noop', 'question', 'remote_echo', 'skill']);
    // The handler's skills replace the toolkit's own, in the tool and the prompt.
    const system = first.messages.find((m) => m.role === 'system')?.content ?? '';
    assert.match(system, /## Available Skills\n- \*\*hello-world\*\*: .*\n- \*\*summarize\*\*: /);
    assert.doesNotMatch(system, /own-skill/);
    // The toolkit itself is unchanged.
    assert.deepEqual(tk.tools().map((t) => t.name).sort(), ['noop', 'remote_echo', 'skill']);
    assert.equal((await tk.execute('skill', { name: 'own-skill' })).isError, false);
  });

  test('the wasm client calls the native server (toolnexus serve --llm echo)', async () => {
    const agent = await startNativeEchoAgent();
    const tools = await tn.agentTools({ card: `${agent.url}/.well-known/agent-card.json`, pollEvery: 20 });
    assert.deepEqual(tools.map((t) => t.name).sort(), ['toolnexus-agent_hello-world', 'toolnexus-agent_summarize']);
    const r = await tools[0].execute({ task: 'native round trip' });
    assert.equal(r.output, 'native round trip');
    assert.equal(r.isError, false);
  });
});
