// The package as installed from the tarball: the "env" import gate, the
// conditional exports, and the hand-written TypeScript declarations
// (type-checked with tsc under ESM and CommonJS resolution).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { appDir, HERE, pkgDir, run } from './helpers.mjs';

const pkg = JSON.parse(readFileSync(join(pkgDir(), 'package.json'), 'utf8'));

for (const variant of ['full', 'client', 'skills']) {
  test(`the ${variant} .wasm imports nothing from "env", only wasm-bindgen's glue`, () => {
    const bytes = readFileSync(join(pkgDir(), 'dist', variant, 'toolnexus_wasm_bg.wasm'));
    const imports = WebAssembly.Module.imports(new WebAssembly.Module(bytes));
    const fromEnv = imports.filter((i) => i.module === 'env').map((i) => i.name);
    assert.deepEqual(fromEnv, [], `imports from "env": ${fromEnv.join(', ')}`);
    assert.deepEqual([...new Set(imports.map((i) => i.module))], ['./toolnexus_wasm_bg.js']);
  });
}

test('every conditional export points at a file in the tarball', () => {
  const targets = [];
  const walk = (v) => (typeof v === 'string' ? targets.push(v) : Object.values(v).forEach(walk));
  walk(pkg.exports);
  assert.ok(targets.length >= 20);
  for (const t of targets) assert.ok(existsSync(join(pkgDir(), t)), `${t} is missing`);
  for (const entry of ['.', './client', './skills']) {
    assert.deepEqual(Object.keys(pkg.exports[entry]), ['workerd', 'node', 'browser', 'types', 'default'], entry);
  }
});

test('the declarations have no `any` on the public surface', () => {
  for (const f of ['index.d.ts', 'index.d.cts', 'client.d.ts', 'client.d.cts', 'skills.d.ts', 'skills.d.cts', 'durable.d.ts']) {
    const text = readFileSync(join(pkgDir(), f), 'utf8').replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, '');
    assert.doesNotMatch(text, /\bany\b/, f);
  }
});

test('tsc type-checks a program using every export, as ESM and as CommonJS', async () => {
  const dir = join(appDir(), 'typecheck');
  mkdirSync(dir, { recursive: true });
  const body = `
const a: Agent = agent({ card: "http://127.0.0.1:1/.well-known/agent-card.json", pollEvery: 10 });
const listed: Agent[] = parseAgentsConfig({ x: { card: "u", enabled: true } });
async function outbound(signal: AbortSignal): Promise<string> {
  const tools: Tool[] = await agentTools(a);
  const r: ToolResult = await tools[0].execute({ task: "t" }, { signal });
  const summary: CardSummary = describeCard({ name: "x" }, "http://h/.well-known/agent-card.json");
  const follow: "stream" | "block" | "poll" = summary.follow;
  const seen: string[] = [follow, summary.endpoint];
  const page = await listTasks(a, { contextId: "c", status: "input-required" });
  seen.push(...page.tasks.map((t) => [t.id, t.state, t.contextId, t.timestamp ?? "", t.text].join(" ")));
  const call: CallStream = tools[0].stream({ task: "t" }, { signal });
  for await (const e of call) seen.push(e.kind);
  const streamed: ToolResult = await call.result;
  seen.push(streamed.output);
  await tools[0].execute({ task: "t" }, {
    onEvent: (e: CallEvent) => {
      if (e.kind === "status-update") seen.push(e.status.state, String(e.final));
      else if (e.kind === "artifact-update") seen.push(e.artifact.parts[0].text, String(e.lastChunk));
      else if (e.kind === "task") seen.push(e.id, e.status.state);
      else seen.push(e.messageId);
    },
  });
  const tk: Toolkit = await createToolkit({
    agents: [a, "http://x/card"],
    config: { agents: { p: { card: "http://x/card", disabled: false } } },
    tools: [{ name: "add", execute: (args) => ({ output: JSON.stringify(args), isError: false }) }],
  });
  const names: string[] = await tk.addAgent("http://x/card");
  const specs: ToolSpec[] = tk.tools();
  const openai: OpenAITool[] = tk.toOpenAI();
  const anthropic: AnthropicTool[] = tk.toAnthropic();
  const gemini: GeminiFunctionDeclaration[] = tk.toGemini();
  const failures: AgentFailure[] = tk.failures();
  const one: ToolResult = await tk.execute("add", { a: 1 });
  return [r.output, names, specs, openai, anthropic, gemini, failures, one, sanitize("a b"), listed].join();
}
function kindOf(e: unknown): ErrorKind | undefined {
  return (e as ToolnexusError).kind;
}
// @ts-expect-error: card is required
agent({ timeout: 1 });
`;
  const server = `
async function inbound(): Promise<Response> {
  const client: Client = createClient({ baseUrl: "http://x/v1", style: "openai", model: "m" });
  const store: TaskStore = { get: async (_id: string) => null, save: async (_t: A2ATask) => {} };
  const handler: A2AHandler = createA2AHandler({
    skills: [{ name: "s", description: "d", content: "c" }, parseSkillMd("---\\nname: t\\n---\\nbody")],
    client, store, a2a: { name: "n" }, onTask: (e: TaskEvent) => void e.state,
  });
  const echo: A2AHandler = createA2AHandler({ client: "echo" });
  // A store of one's own with the whole contract.
  const versioned: TaskStore = {
    get: (_id: string) => null,
    save: (t: A2ATask) => (t.version ?? 0) <= 1,
    listPage: (q: TaskPageQuery) => ({ tasks: [], totalSize: q.limit * 0 }),
    expired: (q: { now: number; limit: number }) => (q.now > 0 ? [] : []),
    watch: (changed) => changed("id", 2),
  };
  const kept: A2AHandler = createA2AHandler({ client: "echo", store: versioned, leaseMs: 30000, storePollMs: false });
  void [versioned, kept];
  const card: AgentCard = buildAgentCard({ name: "n" }, [], "http://h/");
  const result: RunResult = await client.run("p", { toolkit: await createToolkit({ skills: [{ name: "x" }] }) });
  void [card, result, echo];
  return handler(new Request("http://h/"), { waitUntil: (_p: Promise<unknown>) => {} });
}
// @ts-expect-error: style must be openai or anthropic
createClient({ baseUrl: "x", style: "gpt", model: "m" });
`;
  const clientBody = `
// @ts-expect-error: the client-only entry has no skills option
void createToolkitC({ skills: [] });
const parsed: Skill = parseSkillMd("---\\nname: x\\n---\\n");
void parsed.content;
// @ts-expect-error: SKILL.md texts go through parseSkillMd
void createA2AHandler({ skills: ["---\\nname: x\\n---\\n"] });
`;
  const typeNames = 'Agent, Tool, ToolResult, Toolkit, ToolSpec, OpenAITool, AnthropicTool, GeminiFunctionDeclaration, AgentFailure, ErrorKind, ToolnexusError, CallEvent, CardSummary, CallStream';
  const serverNames = 'Client, TaskStore, A2ATask, A2AHandler, TaskEvent, AgentCard, RunResult, TaskPageQuery';
  const skillsImport = 'import { parseSkillMd } from "toolnexus-wasm/skills";\nimport type { Skill } from "toolnexus-wasm/skills";\n';
  // The Durable Object entry is ESM only (workerd).
  const durableBody = `
import { A2ATaskStore, durableObjectStore } from "toolnexus-wasm/durable";
const tasks = { idFromName: (n: string) => n, get: (id: unknown) => id };
const durable: TaskStore = durableObjectStore(tasks, { shards: 4 });
const durableHandler: A2AHandler = createA2AHandler({ client: "echo", store: durable });
void [durableHandler, A2ATaskStore];
`;
  const fns = 'agent, agentTools, parseAgentsConfig, createToolkit, sanitize, describeCard, listTasks, createClient, createA2AHandler, buildAgentCard';
  writeFileSync(join(dir, 'check.mts'),
    `import { ${fns} } from "toolnexus-wasm";\nimport type { ${typeNames}, ${serverNames} } from "toolnexus-wasm";\n` +
    `import { createToolkit as createToolkitC } from "toolnexus-wasm/client";\n${skillsImport}${body}${server}${clientBody}${durableBody}\nexport { outbound, inbound, kindOf };\n`);
  writeFileSync(join(dir, 'check.cts'),
    `import { ${fns} } from "toolnexus-wasm";\nimport type { ${typeNames}, ${serverNames} } from "toolnexus-wasm";\n` +
    `import { createToolkit as createToolkitC } from "toolnexus-wasm/client";\n${skillsImport}${body}${server}${clientBody}\nexport { outbound, inbound, kindOf };\n`);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022',
      lib: ['es2022', 'dom'], types: [], noUnusedLocals: false,
    },
    files: ['check.mts', 'check.cts'],
  }));
  const tsc = join(HERE, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = await run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { timeout: 120_000 });
  assert.equal(r.code, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});
