// End-to-end: the browser console in headless Chromium (Debian's
// /usr/bin/chromium driven by playwright-core), served by
// `toolnexus serve --ui www/dist` beside an agent whose tasks a stub
// OpenAI-style model on 127.0.0.1 answers, a scripted A2A 0.3 agent, and the
// official @a2a-js/sdk agent (it streams; behind a CORS proxy). The timeline
// is what the package's `onEvent` reports. Run by www/test.sh.
//
// Everything listens on 127.0.0.1; every wait is bounded; every process
// started here is stopped in `after`.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launchChromium, ROOT, serve, stop } from "./harness.mjs";
import { startPeer } from "./peer.mjs";
import { startSdkPeer } from "./sdk-peer.mjs";
import { startStubLlm } from "./stub-llm.mjs";

const OUT = join(ROOT, "test-output", "www");
const DESKTOP = { width: 1200, height: 800 };

let llm;
let agent; // serves the UI and the example skills
let corsless; // a second agent that sends no CORS headers
let peer; // a scripted A2A 0.3 agent whose tasks report "working"
let sdk; // the @a2a-js/sdk agent: streams (SSE)
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
  sdk = await startSdkPeer(children);
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
  await sdk?.close();
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

/** Resolves once the stub model got a task matching `re` (the agent is working on it). */
async function modelGot(re, within = 8_000) {
  const until = Date.now() + within;
  while (!llm.calls.some((c) => re.test(c.task))) {
    if (Date.now() > until) throw new Error(`the model never got ${re}`);
    await new Promise((ok) => setTimeout(ok, 25));
  }
}

/** [data-step, class] of each timeline row. */
const timeline = () => page.locator("#timeline li").evaluateAll((li) => li.map((x) => [x.dataset.step, x.className]));

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
  // How calls follow its tasks, from the package's describeCard: toolnexus serve streams.
  assert.equal(await card.locator(".badge.stream").innerText(), "streaming");
  assert.equal(await card.locator(".follow").getAttribute("data-follow"), "stream");
  assert.equal(await card.locator(".follow").innerText(), "streams events (SSE)");
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
  const steps = await timeline();
  assert.deepEqual(steps.map((s) => s[0]), ["sent", "submitted", "working", "artifact", "completed"]);
  assert.deepEqual(steps.at(-1), ["completed", "done final ok"]);
  assert.match(await text('#timeline li[data-step="working"]'), /working\s+\+\d+ ms · stream event/);
  assert.match(await text('#timeline li[data-step="completed"]'), /completed\s+\+\d+ ms · stream event · the result \(0 polls\)/);
  assert.match(await text("#clock"), /Finished in \d+ ms · \d+ events · 0 GetTask polls · task [0-9a-f-]{36}/);
  const log = await page.locator("#event-log li").allTextContents();
  assert.match(log[0], /^\+\d+ ms\s*task submitted \(stream event\)$/);
  assert.match(log.at(-2), /status-update completed \(final\)$/);
  assert.match(log.at(-1), /result: completed$/);
  assert.match(await text("#result"), /State\s+completed/);
  await page.screenshot({ path: join(OUT, "completed-run.png") });

  await page.setViewportSize({ width: 360, height: 780 });
  const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than 360 px`);
  await page.screenshot({ path: join(OUT, "completed-run-360.png"), fullPage: true });
  await page.setViewportSize(DESKTOP);
});

test("a tool call of the agent's model shows live as a working status message", async () => {
  await page.selectOption("#tool", "e2e-agent_hello-world");
  await page.fill("#task", "tool: greet, with the skill");
  await page.click("#run-btn");
  // The server reports the tool call as a working status with a message, before the answer.
  await page.waitForFunction(
    () => /Loading the skill/.test(document.getElementById("timeline").textContent) && !document.getElementById("result").dataset.state,
    null,
    { timeout: 8_000 },
  );
  await page.waitForSelector("#result[data-state]", { timeout: 8_000 });
  assert.equal(await page.getAttribute("#result", "data-state"), "completed", await text("#result"));
  const working = await page.locator('#timeline li[data-step="working"]').allInnerTexts();
  assert.ok(working.some((w) => /\+\d+ ms · stream event · “?Loading the skill hello-world/.test(w)), working.join(" | "));
  assert.match(await rawText("#event-log"), /status-update working: Loading the skill hello-world/);
  assert.match(await text("#output"), /You asked: "tool: greet, with the skill"/);
  await page.locator("#run").screenshot({ path: join(OUT, "status-message.png") });
});

test("a slow task is canceled with the Cancel button (and the agent's task is canceled too)", async () => {
  await page.selectOption("#tool", "e2e-agent_hello-world");
  await page.fill("#task", "slow: count to ten, slowly");
  const started = Date.now();
  await page.click("#run-btn");
  // Wait until the agent works on the task (its model got it).
  await modelGot(/^slow: count to ten/);
  await page.waitForSelector("#timeline li.now");
  assert.equal(await page.getAttribute('#timeline li[data-step="sent"]', "class"), "done");
  assert.match(await text("#clock"), /Elapsed/);
  await page.screenshot({ path: join(OUT, "running.png") });
  await page.click("#cancel-btn");
  await page.waitForSelector("#result[data-state]", { timeout: 8_000 });
  assert.ok(Date.now() - started < 9_000, "canceled before the slow model answered");
  assert.equal(await page.getAttribute("#result", "data-state"), "canceled");
  assert.equal(await page.getAttribute("#result", "data-error"), "true");
  assert.equal(await page.locator("#result .error-box").count(), 1);
  assert.match(await text("#output"), /^A2A task .+ canceled/);
  assert.match(await rawText("#event-log"), /Cancel: the call is aborted/);
  assert.match(await text("#result"), /stopped reading the stream and asked the agent to cancel the task/);
  const taskId = await page.locator("#clock code").innerText();
  const seen = await rpc(agent.url, "tasks/get", { id: taskId });
  assert.equal(seen.result?.status?.state, "canceled", JSON.stringify(seen));
  assert.equal(await page.isDisabled("#cancel-btn"), true);
  assert.equal(await page.isEnabled("#run-btn"), true);
});

test("an A2A 0.3 agent: its dialect and endpoint, and working seen live in the timeline", async () => {
  await connectCard(peer.cardUrl);
  const card = page.locator('#agent-list article[data-state="ok"]');
  assert.equal(await card.locator(".badge.dialect").innerText(), "A2A 0.3");
  assert.equal(await card.locator(".endpoint").innerText(), `${peer.url}/rpc`);
  // No capabilities.streaming: one blocking send (this agent answers at once anyway, so polls follow).
  assert.equal(await card.locator(".follow").innerText(), "one blocking send");
  const state = await runTask("scripted-peer_echo", "one, two, three");
  assert.equal(state, "completed", await text("#result"));
  assert.equal(await text("#output"), "echo: one, two, three");
  const steps = await timeline();
  assert.deepEqual(steps.map((s) => s[0]), ["sent", "submitted", "working", "completed"]);
  assert.deepEqual(steps.map((s) => s[1]), ["done", "done", "done", "done final ok"]);
  assert.match(await text('#timeline li[data-step="submitted"]'), /submitted\s+\+\d+ ms · answer/);
  assert.match(await text('#timeline li[data-step="working"]'), /working\s+\+\d+ ms · poll/);
  assert.match(await text('#timeline li[data-step="completed"]'), /poll · the result \(3 polls\)/);
  // Three polls, but an event only for the two that changed something.
  assert.match(await text("#clock"), /3 events · 3 GetTask polls/);
});

test("an answer's image and data parts are shown: the image, the JSON", async () => {
  await connectCard(peer.cardUrl);
  const state = await runTask("scripted-peer_echo", "attach a chart");
  assert.equal(state, "completed", await text("#result"));
  assert.equal(await text("#output"), "echo: attach a chart");
  const img = page.locator("#parts li.image img");
  assert.match(await img.getAttribute("src"), /^data:image\/png;base64,iVBOR/);
  assert.equal(await img.getAttribute("alt"), "dot.png");
  // The browser decoded it: a real image, 1x1.
  assert.equal(await img.evaluate((i) => i.complete && i.naturalWidth), 1);
  assert.deepEqual(JSON.parse(await text("#parts pre.json")), { rows: 2, ok: true });
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
  await modelGot(/^slow, then Escape/);
  await page.keyboard.press("Escape");
  await page.waitForSelector('#result[data-state="canceled"]', { timeout: 8_000 });
});

test("a streaming agent (@a2a-js/sdk): events and the answer text show before the end", async () => {
  await open();
  await connectCard(sdk.cardUrl);
  assert.equal(await page.getAttribute("#connect-status", "data-tone"), "ok", await text("#connect-status"));
  const card = page.locator('#agent-list article[data-state="ok"]');
  assert.equal(await card.locator(".badge.dialect").innerText(), "A2A 1.0");
  assert.equal(await card.locator(".badge.stream").innerText(), "streaming");
  assert.equal(await card.locator(".endpoint").innerText(), `${sdk.url}/`);
  assert.equal(await card.locator(".follow").innerText(), "streams events (SSE)");
  assert.deepEqual(await card.locator(".tool-name").allInnerTexts(), ["js-agent_echo", "js-agent_fail"]);

  // "chunks 8": working, then eight artifact chunks 100 ms apart, then completed.
  const chunks = Array.from({ length: 8 }, (_, i) => `chunk ${i}`);
  await page.selectOption("#tool", "js-agent_echo");
  await page.fill("#task", "chunks 8");
  await page.click("#run-btn");
  // Before the end: working from the stream, and the first chunk in the output.
  await page.waitForFunction(() => {
    const out = document.querySelector("#result pre.streamed");
    return out && /^chunk 0/.test(out.textContent) && !document.getElementById("result").dataset.state;
  }, null, { timeout: 10_000 });
  assert.equal(await page.getAttribute("#result", "data-state"), null, "still running");
  assert.match(await text('#timeline li[data-step="working"]'), /working\s+\+\d+ ms · stream event/);
  assert.equal(await page.locator('#timeline li[data-step="artifact"]').count(), 1);
  await page.locator("#run").screenshot({ path: join(OUT, "streaming.png") });
  await page.waitForSelector("#result[data-state]", { timeout: 10_000 });
  assert.equal(await page.getAttribute("#result", "data-state"), "completed", await text("#result"));
  assert.equal(await text("#output"), chunks.join("\n"));
  const steps = await timeline();
  assert.deepEqual(steps.map((s) => s[0]), ["sent", "submitted", "working", "artifact", "completed"]);
  assert.equal(steps.at(-1)[1], "done final ok");
  assert.match(await text('#timeline li[data-step="artifact"]'), /8 chunks, 56 chars \(\+\d+ ms to \+\d+ ms\) · last chunk/);
  assert.match(await text('#timeline li[data-step="completed"]'), /stream event · the result \(0 polls\)/);
  assert.match(await text("#clock"), /11 events · 0 GetTask polls · task [0-9a-f-]{36}/);
  const log = await page.locator("#event-log li").allTextContents();
  assert.deepEqual(
    log.map((l) => l.replace(/^\+\d+ ms\s*/, "")),
    [
      "task submitted (stream event)",
      "status-update working",
      "artifact-update new 7 chars",
      ...Array(6).fill("artifact-update append 7 chars"),
      "artifact-update append 7 chars (last chunk)",
      "status-update completed (final)",
      "result: completed",
    ],
  );
  await page.screenshot({ path: join(OUT, "streamed-run.png"), fullPage: true });

  // A failure carries the agent's status message into the timeline.
  assert.equal(await runTask("js-agent_fail", "fail on purpose", { within: 10_000 }), "failed");
  assert.match(await text('#timeline li[data-step="failed"]'), /stream event · .*deliberate failure: fail on purpose/);
  assert.match(await text("#output"), /deliberate failure: fail on purpose/);

  // Cancel while it streams: the task id is known, so the agent is asked to cancel it.
  await page.selectOption("#tool", "js-agent_echo");
  await page.fill("#task", "slow stream");
  await page.click("#run-btn");
  await page.waitForSelector('#timeline li[data-step="working"]', { timeout: 8_000 });
  await page.click("#cancel-btn");
  await page.waitForSelector("#result[data-state]", { timeout: 8_000 });
  assert.equal(await page.getAttribute("#result", "data-state"), "canceled", await text("#result"));
  assert.match(await text("#result"), /stopped reading the stream and asked the agent to cancel/);
  const taskId = await page.locator("#clock code").innerText();
  const seen = await sdk.rpc("GetTask", { id: taskId });
  assert.equal(seen.result?.status?.state, "TASK_STATE_CANCELED", JSON.stringify(seen));
});

test("a question from the agent shows with a reply box; the answer continues the same task", async () => {
  await open();
  await connectCard(sdk.cardUrl);
  assert.equal(await runTask("js-agent_echo", "ask for a trip", { within: 10_000 }), "input-required");
  assert.equal(await text("#result h3"), "The agent asks");
  assert.equal(await text("#output"), "Which city?");
  const asked = await page.locator("#clock code").innerText();
  await page.fill("#reply", "Paris");
  await page.click("#reply-btn");
  await page.waitForFunction(() => document.getElementById("result").dataset.state === "completed", null, { timeout: 10_000 });
  assert.equal(await text("#output"), "booked for Paris");
  assert.equal(await page.locator("#clock code").innerText(), asked, "the same task");
  await page.locator("#run").screenshot({ path: join(OUT, "question.png") });
});

test("recent tasks: the agent's tasks are listed (id, state, context, time) and one opens", async () => {
  await open();
  await connectCard(cardOf(agent.url));
  assert.equal(await runTask("e2e-agent_hello-world", "Greet the recent tasks view"), "completed");
  const id = await page.locator("#clock code").innerText();
  // The list is read again after each run, through the package's listTasks.
  const row = page.locator(`#task-list tbody tr[data-task="${id}"]`);
  await row.waitFor({ timeout: 10_000 });
  assert.equal(await row.getAttribute("data-state"), "completed");
  const cells = await row.locator("td").allInnerTexts();
  assert.equal(cells[0], id.slice(0, 8));
  assert.equal(cells[1], "completed");
  assert.match(cells[2], /^[0-9a-f-]{12}…$/, "a long context is shortened in the list");
  assert.match(cells[3], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
  assert.equal(cells[4], "e2e-agent");
  // The suite's earlier tasks are there too, newest first.
  const times = await page.locator("#task-list tbody td:nth-child(4)").allInnerTexts();
  assert.ok(times.length > 1, `${times.length} tasks`);
  assert.deepEqual([...times].sort().reverse(), times);
  assert.match(await text("#tasks-status"), /^\d+ tasks\.$/);
  await row.locator("button.open-task").click();
  await page.waitForSelector("#task-detail:not([hidden])");
  assert.equal(await text("#task-detail .task-id"), id);
  assert.equal(await page.getAttribute("#task-detail", "data-state"), "completed");
  const context = await text("#task-detail .task-context");
  assert.match(context, /^[0-9a-f-]{36}$/);
  assert.equal(`${context.slice(0, 12)}…`, cells[2]);
  assert.equal(await text("#task-detail .task-text"), 'Hello from the stub model! You asked: "Greet the recent tasks view"');
  assert.equal(await page.locator("#task-reply").count(), 0, "a finished task has no reply box");
  await page.locator("#tasks").screenshot({ path: join(OUT, "recent-tasks.png") });
});

test("recent tasks: a task waiting for input opens with its question and is answered from there", async () => {
  await open();
  await connectCard(sdk.cardUrl);
  assert.equal(await runTask("js-agent_echo", "ask for a trip", { within: 10_000 }), "input-required");
  const id = await page.locator("#clock code").innerText();
  const row = page.locator(`#task-list tbody tr[data-task="${id}"]`);
  await row.waitFor({ timeout: 10_000 });
  assert.equal(await row.getAttribute("data-state"), "input-required");
  await row.locator("button.open-task").click();
  assert.equal(await text("#task-detail .task-text"), "Which city?");
  await page.fill("#task-reply", "Rome");
  await page.click("#task-reply-btn");
  await page.waitForFunction(() => document.getElementById("result").dataset.state === "completed", null, { timeout: 10_000 });
  assert.equal(await text("#output"), "booked for Rome");
  assert.equal(await page.locator("#clock code").innerText(), id, "the same task");
  // The list follows: the opened task is now completed.
  await page.waitForFunction(
    (task) => document.querySelector(`#task-list tbody tr[data-task="${task}"]`)?.dataset.state === "completed",
    id,
    { timeout: 10_000 },
  );
  assert.equal(await page.getAttribute("#task-detail", "data-state"), "completed");
});

test("a protected agent: the credential field's API key reaches it, a run without it is refused, and no storage holds the secret", async () => {
  const SECRET = "www-secret-key-4f1c";
  const dir = mkdtempSync(join(tmpdir(), "toolnexus-www-auth-"));
  const config = join(dir, "auth.json");
  writeFileSync(config, JSON.stringify({ a2a: { auth: { apiKeys: { keys: { alice: SECRET } } } } }));
  const guarded = await serve(children, [
    "--config", config, "--skills", "examples/skills", "--name", "guarded", "--llm", "echo", "--cors-origin", agent.url,
  ]);
  await open();
  await page.locator("details.options").evaluate((d) => {
    d.open = true;
  });
  assert.equal(await page.getAttribute("#credential", "type"), "password");
  await page.selectOption("#credential-kind", "apiKey");
  await page.fill("#credential", SECRET);
  await connectCard(cardOf(guarded.url));
  assert.equal(await page.getAttribute("#connect-status", "data-tone"), "ok", await text("#connect-status"));
  const state = await runTask("guarded_hello-world", "hello behind a key");
  assert.equal(state, "completed", await text("#result"));
  assert.equal(await page.getAttribute("#result", "data-error"), "false");
  // The key was what let it in: the same run without it is refused.
  await page.fill("#credential", "");
  await connectCard(cardOf(guarded.url));
  const refused = await runTask("guarded_hello-world", "hello without a key");
  assert.equal(await page.getAttribute("#result", "data-error"), "true", `${refused}: ${await text("#result")}`);
  assert.match(await text("#result"), /401|auth/i);
  // Nothing the page keeps holds the secret.
  const kept = await page.evaluate(() => JSON.stringify({
    local: Object.entries(localStorage),
    session: Object.entries(sessionStorage),
    url: location.href,
    cookies: document.cookie,
  }));
  assert.ok(!kept.includes(SECRET), kept);
  assert.ok(!(await context.cookies()).some((c) => c.value.includes(SECRET)));
});

test("no uncaught errors in the page", () => {
  assert.deepEqual(pageErrors, []);
});
