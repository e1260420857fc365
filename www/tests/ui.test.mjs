// End-to-end: the browser console in headless Chromium (Debian's
// /usr/bin/chromium driven by playwright-core), served by
// `toolnexus serve --ui www/dist` beside an agent whose tasks a stub
// OpenAI-style model on 127.0.0.1 answers. Run by www/test.sh.
//
// Everything listens on 127.0.0.1; every wait is bounded; every process
// started here is stopped in `after`.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { launchChromium, ROOT, serve, stop } from "./harness.mjs";
import { startPeer } from "./peer.mjs";
import { startStubLlm } from "./stub-llm.mjs";

const OUT = join(ROOT, "test-output", "www");
const DESKTOP = { width: 1200, height: 800 };

let llm;
let agent; // serves the UI and the example skills
let corsless; // a second agent that sends no CORS headers
let peer; // a scripted A2A 0.3 agent whose tasks report "working"
let browser;
let context;
let page;
const pageErrors = [];
const children = [];

/** A JSON-RPC call to an agent, from Node (bounded). */
async function rpc(url, method, params) {
  const resp = await fetch(`${url}/`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(10_000),
  });
  return resp.json();
}

before(async () => {
  mkdirSync(OUT, { recursive: true });
  llm = await startStubLlm({ slowMs: 10_000 });
  agent = await serve(children, [
    "--skills", "examples/skills",
    "--name", "e2e-agent",
    "--description", "The example skills, answered by a stub model",
    "--agent-version", "1.2.3",
    "--provider-org", "Acme Test",
    "--provider-url", "https://acme.example",
    "--llm", "openai", "--llm-base-url", llm.url, "--model", "stub",
    "--ui", "www/dist",
  ]);
  peer = await startPeer({ workingPolls: 2 });
  corsless = await serve(children, ["--skills", "examples/skills", "--name", "no-cors", "--llm", "echo", "--cors-origin", "none"]);
  browser = await launchChromium({ viewport: DESKTOP });
  context = browser.context;
  page = context.pages()[0] ?? (await context.newPage());
  page.on("pageerror", (e) => pageErrors.push(e.message));
});

after(async () => {
  await browser?.close();
  // The model first, so a task still waiting on it ends at once.
  await llm?.close();
  await peer?.close();
  await Promise.all(children.map(stop));
});

// --- page helpers -----------------------------------------------------------------

const cardOf = (base) => `${base}/.well-known/agent-card.json`;

async function open() {
  await page.goto(`${agent.url}/`, { timeout: 20_000 });
  await page.waitForSelector("body[data-ready]", { timeout: 20_000 });
}

async function connectCard(url, { timeout } = {}) {
  await page.check('input[name="mode"][value="card"]');
  await page.fill("#card-url", url);
  if (timeout) {
    await page.locator("details.options").evaluate((d) => {
      d.open = true;
    });
    await page.fill("#timeout", String(timeout));
  }
  await page.click("#connect-btn");
  await page.waitForFunction(() => {
    const s = document.getElementById("connect-status");
    return s.dataset.tone && !s.textContent.startsWith("Connecting");
  });
}

/** Runs `task` with `tool` and returns the #result state once settled. */
async function runTask(tool, task, { within = 20_000 } = {}) {
  await page.selectOption("#tool", tool);
  await page.fill("#task", task);
  await page.click("#run-btn");
  await page.waitForSelector("#result[data-state]", { timeout: within });
  return page.getAttribute("#result", "data-state");
}

const text = (selector) => page.locator(selector).innerText();
const rawText = (selector) => page.locator(selector).evaluate((e) => e.textContent);

// --- tests --------------------------------------------------------------------------

test("toolnexus serve --ui serves the page; it loads the package and defaults to its own agent", async () => {
  const wasmTypes = [];
  const onResponse = (r) => {
    if (r.url().endsWith(".wasm")) wasmTypes.push(r.headers()["content-type"]);
  };
  page.on("response", onResponse);
  await open();
  page.off("response", onResponse);
  assert.equal(await page.title(), "toolnexus · A2A agent console");
  assert.deepEqual(wasmTypes, ["application/wasm"]);
  assert.equal(await page.inputValue("#card-url"), cardOf(agent.url));
  assert.match(await text("#about"), /toolnexus-wasm 0\.1\.0/);
});

test("connect shows the card (name, description, version, provider, dialect, endpoint) and the skills as tools", async () => {
  await connectCard(cardOf(agent.url));
  assert.equal(await page.getAttribute("#connect-status", "data-tone"), "ok", await text("#connect-status"));
  const card = page.locator('#agent-list article[data-state="ok"]');
  assert.equal(await card.count(), 1);
  const shown = await card.innerText();
  assert.match(shown, /e2e-agent/);
  assert.match(shown, /v1\.2\.3/);
  assert.match(shown, /The example skills, answered by a stub model/);
  assert.match(shown, /Acme Test/);
  assert.equal(await card.locator(".badge.dialect").innerText(), "A2A 1.0");
  assert.equal(await card.locator(".endpoint").innerText(), `${agent.url}/`);
  assert.deepEqual(await card.locator(".tool-name").allInnerTexts(), ["e2e-agent_hello-world", "e2e-agent_summarize"]);
  assert.deepEqual(await card.locator(".tool-desc").allInnerTexts(), [
    "Greets the user warmly and says what this agent can do.",
    "Summarizes a piece of text in three bullet points.",
  ]);
  assert.deepEqual(await page.locator("#tool option").allInnerTexts(), ["e2e-agent_hello-world", "e2e-agent_summarize"]);
});

test("a task runs to completed: timeline, output, metadata; screenshots at 1200 and 360 px", async () => {
  const state = await runTask("e2e-agent_hello-world", "Greet the end-to-end test");
  assert.equal(state, "completed", await text("#result"));
  assert.equal(await page.getAttribute("#result", "data-error"), "false");
  assert.equal(await text("#output"), 'Hello from the stub model! You asked: "Greet the end-to-end test"');
  const steps = await page.locator("#timeline li").evaluateAll((li) => li.map((x) => [x.dataset.step, x.className]));
  assert.deepEqual(steps[0], ["submitted", "done"]);
  assert.equal(steps[2][0], "completed");
  assert.match(await text("#clock"), /Finished in \d+ ms · \d+ GetTask polls? · task [0-9a-f-]{36}/);
  assert.match(await rawText("#wire-log"), /SendMessage answered: submitted/);
  assert.match(await text("#result"), /State\s+completed/);
  await page.screenshot({ path: join(OUT, "completed-run.png") });

  await page.setViewportSize({ width: 360, height: 780 });
  const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than 360 px`);
  await page.screenshot({ path: join(OUT, "completed-run-360.png"), fullPage: true });
  await page.setViewportSize(DESKTOP);
});

test("a slow task is canceled with the Cancel button (and the agent's task is canceled too)", async () => {
  await page.selectOption("#tool", "e2e-agent_hello-world");
  await page.fill("#task", "slow: count to ten, slowly");
  const started = Date.now();
  await page.click("#run-btn");
  // Wait until the task exists at the agent and a GetTask is in flight.
  await page.waitForFunction(() => /GetTask #1 sent/.test(document.getElementById("wire-log").textContent), null, { timeout: 8_000 });
  assert.equal(await page.getAttribute('#timeline li[data-step="submitted"]', "class"), "done");
  assert.match(await text("#clock"), /Elapsed/);
  await page.screenshot({ path: join(OUT, "running.png") });
  await page.click("#cancel-btn");
  await page.waitForSelector("#result[data-state]", { timeout: 8_000 });
  assert.ok(Date.now() - started < 9_000, "canceled before the slow model answered");
  assert.equal(await page.getAttribute("#result", "data-state"), "canceled");
  assert.equal(await page.getAttribute("#result", "data-error"), "true");
  assert.equal(await page.locator("#result .error-box").count(), 1);
  assert.match(await text("#output"), /^A2A task \S+ canceled/);
  assert.match(await text("#result"), /asked the agent to cancel/);
  const taskId = await page.locator("#clock code").innerText();
  const seen = await rpc(agent.url, "tasks/get", { id: taskId });
  assert.equal(seen.result?.status?.state, "canceled", JSON.stringify(seen));
  assert.match(await rawText("#wire-log"), /CancelTask sent/);
  assert.equal(await page.isDisabled("#cancel-btn"), true);
  assert.equal(await page.isEnabled("#run-btn"), true);
});

test("an A2A 0.3 agent: its dialect and endpoint, and working seen live in the timeline", async () => {
  await connectCard(peer.cardUrl);
  const card = page.locator('#agent-list article[data-state="ok"]');
  assert.equal(await card.locator(".badge.dialect").innerText(), "A2A 0.3");
  assert.equal(await card.locator(".endpoint").innerText(), `${peer.url}/rpc`);
  const state = await runTask("scripted-peer_echo", "one, two, three");
  assert.equal(state, "completed", await text("#result"));
  assert.equal(await text("#output"), "echo: one, two, three");
  const steps = await page.locator("#timeline li").evaluateAll((li) => li.map((x) => [x.dataset.step, x.className]));
  assert.deepEqual(steps.map((s) => s[0]), ["submitted", "working", "completed"]);
  assert.deepEqual(steps.slice(0, 2).map((s) => s[1]), ["done", "done"]);
  assert.match(await text('#timeline li[data-step="working"]'), /working\s+\+\d+ ms · tasks\/get #1/);
  assert.match(await text("#clock"), /3 GetTask polls/);
});

test("a task that outlives the timeout comes back timed out, explained", async () => {
  await connectCard(cardOf(agent.url), { timeout: 1500 });
  const state = await runTask("e2e-agent_hello-world", "slow and steady", { within: 10_000 });
  assert.notEqual(state, "completed");
  assert.match(await text("#output"), /timed out after 1500ms/);
  assert.match(await text("#result"), /Timed out[\s\S]*did not settle within the tool's timeout \(1500 ms\)/);
  await page.fill("#timeout", "60000");
});

test("a config with a good and a dead agent: the dead one is shown failed, the good one's tools work", async () => {
  const config = {
    agents: {
      good: { card: cardOf(agent.url) },
      dead: { card: "http://127.0.0.1:1/.well-known/agent-card.json", timeout: 5000 },
      off: { card: cardOf(agent.url), disabled: true },
    },
  };
  await page.check('input[name="mode"][value="config"]');
  await page.fill("#config", JSON.stringify(config, null, 2));
  await page.click("#connect-btn");
  await page.waitForFunction(() => !document.getElementById("connect-status").textContent.startsWith("Connecting"));
  assert.match(await text("#connect-status"), /1 of 2 agents connected, 1 failed; 2 tools/);
  const dead = page.locator('#agent-list article[data-state="failed"]');
  assert.equal(await dead.count(), 1);
  const deadText = await dead.innerText();
  assert.match(deadText, /dead/);
  assert.match(deadText, /Unreachable/);
  assert.match(deadText, /Nothing answered at 127\.0\.0\.1:1/);
  const good = page.locator('#agent-list article[data-state="ok"]');
  assert.equal(await good.count(), 1);
  assert.match(await good.innerText(), /good/);
  assert.deepEqual(await good.locator(".tool-name").allInnerTexts(), ["e2e-agent_hello-world", "e2e-agent_summarize"]);
  const state = await runTask("e2e-agent_summarize", "Three points about toolkits");
  assert.equal(state, "completed", await text("#result"));
  assert.match(await text("#output"), /You asked: "Three points about toolkits"/);
  await page.screenshot({ path: join(OUT, "config-one-failed.png"), fullPage: true });
});

test("an agent without CORS headers is explained, with the fix", async () => {
  await connectCard(cardOf(corsless.url));
  const failed = page.locator('#agent-list article[data-state="failed"]');
  assert.equal(await failed.count(), 1);
  assert.equal(await failed.getAttribute("data-kind"), "transport");
  const shown = await failed.innerText();
  assert.match(shown, /does not allow this page \(CORS\)/);
  assert.match(shown, /Access-Control-Allow-Origin/);
  assert.match(shown, /--cors-origin/);
  assert.equal(await page.getAttribute("#connect-status", "data-tone"), "error");
  assert.equal(await page.isHidden("#run"), true);
  await page.screenshot({ path: join(OUT, "cors.png"), fullPage: true });
});

test("a URL that is not a card, a 404, an unreachable one and input mistakes are explained", async () => {
  await connectCard(`${agent.url}/index.html`);
  let shown = await page.locator('#agent-list article[data-state="failed"]').innerText();
  assert.match(shown, /Not an Agent Card/);
  assert.match(shown, /text\/html/);
  await connectCard(`${agent.url}/no-such-card.json`);
  shown = await page.locator('#agent-list article[data-state="failed"]').innerText();
  assert.match(shown, /HTTP 404 instead of a card/);
  assert.match(shown, /\/\.well-known\/agent-card\.json/);
  await connectCard("http://127.0.0.1:1/.well-known/agent-card.json");
  shown = await page.locator('#agent-list article[data-state="failed"]').innerText();
  assert.match(shown, /Unreachable/);
  // Input mistakes are caught before any request.
  await connectCard("agent-card.json");
  assert.match(await text("#connect-status"), /is not an absolute http:\/\/ or https:\/\/ URL/);
  await page.check('input[name="mode"][value="config"]');
  await page.fill("#config", '{"agents": {');
  await page.click("#connect-btn");
  assert.match(await text("#connect-status"), /The config is not valid JSON/);
  await page.check('input[name="mode"][value="card"]');
});

test("keyboard only: Enter connects, Ctrl+Enter runs, Escape cancels", async () => {
  await open();
  await page.focus("#card-url");
  await page.keyboard.press("Enter");
  await page.waitForSelector('#agent-list article[data-state="ok"]');
  // Tab order reaches the tool picker, the task and Run.
  await page.focus("#tool");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.id), "task");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.id), "run-btn");
  await page.focus("#task");
  await page.keyboard.press("Control+A");
  await page.keyboard.type("Hello from the keyboard");
  await page.keyboard.press("Control+Enter");
  await page.waitForSelector('#result[data-state="completed"]', { timeout: 20_000 });
  assert.match(await text("#output"), /Hello from the keyboard/);
  await page.focus("#task");
  await page.keyboard.press("Control+A");
  await page.keyboard.type("slow, then Escape");
  await page.keyboard.press("Control+Enter");
  await page.waitForFunction(() => /GetTask #1 sent/.test(document.getElementById("wire-log").textContent), null, { timeout: 8_000 });
  await page.keyboard.press("Escape");
  await page.waitForSelector('#result[data-state="canceled"]', { timeout: 8_000 });
});

test("no uncaught errors in the page", () => {
  assert.deepEqual(pageErrors, []);
});
