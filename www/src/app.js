// The toolnexus browser console: connect to A2A agents (one card URL, or an
// `agents` config block), list their skills as tools, run one with a live
// timeline and a Cancel button. Plain ES modules over the toolnexus-wasm
// package (its client build, mapped by the page's import map).

import { esc, explainCardFailure, explainRunError } from "./explain.js";
import { DIALECTS, FOLLOW, newRun, observe, SETTLED, streamedText, streaming } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const el = {
  boot: $("boot"),
  connectForm: $("connect-form"),
  cardMode: $("card-mode"),
  configMode: $("config-mode"),
  cardUrl: $("card-url"),
  config: $("config"),
  timeout: $("timeout"),
  pollEvery: $("poll-every"),
  header: $("header"),
  credential: $("credential"),
  credentialKind: $("credential-kind"),
  connectBtn: $("connect-btn"),
  connectStatus: $("connect-status"),
  agents: $("agents"),
  agentsH: $("agents-h"),
  agentList: $("agent-list"),
  run: $("run"),
  runForm: $("run-form"),
  tool: $("tool"),
  toolDesc: $("tool-desc"),
  task: $("task"),
  runBtn: $("run-btn"),
  cancelBtn: $("cancel-btn"),
  progress: $("progress"),
  timeline: $("timeline"),
  clock: $("clock"),
  eventLog: $("event-log"),
  result: $("result"),
  about: $("about"),
  tasks: $("tasks"),
  tasksRefresh: $("tasks-refresh"),
  tasksStatus: $("tasks-status"),
  taskList: $("task-list"),
  taskDetail: $("task-detail"),
};

let pkg = null; // the toolnexus-wasm module
let toolkit = null; // the connected Toolkit
let tools = []; // [{name, description, agent}] in <select> order
let timeouts = new Map(); // tool name -> the timeout its agent was resolved with
let follows = new Map(); // tool name -> how calls follow its agent's tasks ("stream" | "block" | "poll")
let current = null; // the running task, if any
let listed = []; // the connected agents whose tasks the Recent tasks view lists: [{name, desc, tools}]
let recent = []; // the tasks last listed: [{...TaskSummary, agent, tool}]
let listing = 0; // the latest listing's number (an older one's answer is dropped)

// --- defaults -------------------------------------------------------------------

/** The card this page's own origin serves (when toolnexus serve --ui serves it), else the CLI default. */
function defaultCard() {
  const fromQuery = new URLSearchParams(location.search).get("card");
  if (fromQuery) return fromQuery;
  if (location.protocol === "http:" || location.protocol === "https:") {
    return `${location.origin}/.well-known/agent-card.json`;
  }
  return "http://127.0.0.1:8080/.well-known/agent-card.json";
}

function defaultConfig(card) {
  return JSON.stringify(
    {
      agents: {
        local: { card },
        offline: { card: "http://127.0.0.1:9/.well-known/agent-card.json", timeout: 5000 },
      },
    },
    null,
    2,
  );
}

// --- connecting -------------------------------------------------------------------

function mode() {
  return el.connectForm.elements.mode.value;
}

function showMode() {
  const config = mode() === "config";
  el.cardMode.hidden = config;
  el.configMode.hidden = !config;
}

function numberField(input, fallback) {
  const n = Number(input.value);
  return Number.isFinite(n) && n > 0 ? Math.round(n) : fallback;
}

/** "Name: value" -> {Name: value}; throws on a malformed line. */
function parseHeader(line) {
  const text = line.trim();
  if (!text) return undefined;
  const i = text.indexOf(":");
  if (i <= 0) throw new Error(`The header must look like "Name: value", not "${text}".`);
  return { [text.slice(0, i).trim()]: text.slice(i + 1).trim() };
}

/** Throws unless `card` is an absolute http(s) URL (a relative one would resolve against this page). */
function checkCardUrl(card, who) {
  let url;
  try {
    url = new URL(card);
  } catch {}
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new Error(`${who}: "${card}" is not an absolute http:// or https:// URL.`);
  }
}

/**
 * What to connect to: [{id, desc}] (desc: the package's agent descriptor)
 * plus the `agents` block handed to createToolkit.
 */
function plan() {
  const timeout = numberField(el.timeout, 60000);
  const pollEvery = numberField(el.pollEvery, 1000);
  if (mode() === "card") {
    const card = el.cardUrl.value.trim();
    if (!card) throw new Error("Enter an Agent Card URL.");
    checkCardUrl(card, "The Agent Card URL");
    const headers = parseHeader(el.header.value);
    // The credential stays in this page's memory: the field and the descriptor.
    const secret = el.credential.value.trim();
    const auth = secret ? { [el.credentialKind.value === "apiKey" ? "apiKey" : "bearer"]: secret } : undefined;
    const desc = pkg.agent({ card, timeout, pollEvery, ...(headers ? { headers } : {}), ...(auth ? { auth } : {}) });
    return { peers: [{ id: null, desc }], block: { agent: desc } };
  }
  let parsed;
  try {
    parsed = JSON.parse(el.config.value);
  } catch (e) {
    throw new Error(`The config is not valid JSON: ${e.message}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new Error('The config must be a JSON object: {"agents": {...}} or the agents block itself.');
  }
  const raw = parsed.agents && typeof parsed.agents === "object" && !Array.isArray(parsed.agents) ? parsed.agents : parsed;
  const block = {};
  const peers = [];
  for (const [id, entry] of Object.entries(raw)) {
    // The package decides what counts (a string card; disabled, enabled).
    const [desc] = pkg.parseAgentsConfig({ [id]: entry });
    if (!desc) continue;
    checkCardUrl(desc.card, `The card of "${id}"`);
    const filled = { timeout, pollEvery, ...desc };
    block[id] = filled;
    peers.push({ id, desc: filled });
  }
  if (peers.length === 0) {
    throw new Error('The config has no enabled agent with a string "card".');
  }
  return { peers, block };
}

function expandHeaders(headers) {
  const out = { Accept: "application/json" };
  for (const [k, v] of Object.entries(headers ?? {})) out[k] = String(v).replace(/\$\{[A-Za-z0-9_]+\}/g, "");
  return out;
}

/**
 * This page's own GET of the card, to show it: the package reads the text
 * (`describeCard`, the rules its calls use; `info` is null for a non-card).
 */
async function peekCard(desc) {
  try {
    const resp = await fetch(desc.card, {
      headers: expandHeaders(desc.headers),
      cache: "no-store",
      signal: AbortSignal.timeout(Math.min(desc.timeout ?? 60000, 30000)),
    });
    const contentType = resp.headers.get("content-type") ?? "";
    const text = await resp.text();
    let info = null;
    try {
      info = pkg.describeCard(text, desc.card);
    } catch {}
    const snippet = text.replace(/\s+/g, " ").trim().slice(0, 80);
    return { status: resp.status, contentType, snippet: snippet + (text.length > 80 ? "…" : ""), info };
  } catch (e) {
    return { error: String(e?.message ?? e) };
  }
}

async function connect() {
  if (current) return;
  let target;
  try {
    target = plan();
  } catch (e) {
    setStatus(e.message, "error");
    return;
  }
  const n = target.peers.length;
  el.connectBtn.disabled = true;
  el.connectForm.setAttribute("aria-busy", "true");
  const started = performance.now();
  const ticker = setInterval(
    () => setStatus(`Connecting to ${n === 1 ? "the agent" : `${n} agents`}… ${secs(performance.now() - started)}`),
    200,
  );
  setStatus(`Connecting to ${n === 1 ? "the agent" : `${n} agents`}…`);
  try {
    const [tk, peeks] = await Promise.all([
      pkg.createToolkit({ config: { agents: target.block } }),
      Promise.all(target.peers.map((p) => peekCard(p.desc))),
    ]);
    toolkit?.free();
    toolkit = tk;
    const failures = tk.failures();
    const specs = tk.tools();
    const claimed = new Set();
    const peers = [];
    for (const [i, p] of target.peers.entries()) {
      const peek = peeks[i];
      const failure = failures.find((f) => f.card === p.desc.card);
      if (failure) {
        const explanation = await explainCardFailure(failure, p.desc.card, peek);
        peers.push({ ...p, failure, explanation, peek });
        continue;
      }
      // A tool's name is sanitize(card name) + "_" + sanitize(skill id).
      const prefix = peek.info ? `${pkg.sanitize(peek.info.name)}_` : null;
      const mine = specs.filter((t) => !claimed.has(t.name) && (prefix === null || t.name.startsWith(prefix)));
      mine.forEach((t) => claimed.add(t.name));
      peers.push({ ...p, info: peek.info, peek, tools: mine });
    }
    renderAgents(peers);
    const ok = peers.filter((p) => !p.failure).length;
    const toolCount = specs.length;
    const took = `in ${Math.round(performance.now() - started)} ms`;
    if (ok === 0) setStatus(`Could not connect ${n === 1 ? "to the agent" : `to any of the ${n} agents`} (${took}).`, "error");
    else if (ok < n) setStatus(`${ok} of ${n} agents connected, ${n - ok} failed; ${plural(toolCount, "tool")} (${took}).`, "warn");
    else setStatus(`Connected${n === 1 ? "" : ` ${n} agents`}: ${plural(toolCount, "tool")} (${took}).`, "ok");
    el.agentsH.focus({ preventScroll: true });
  } catch (e) {
    setStatus(`Could not build the toolkit: ${e.message}${e.kind ? ` (${e.kind})` : ""}`, "error");
  } finally {
    clearInterval(ticker);
    el.connectBtn.disabled = false;
    el.connectForm.removeAttribute("aria-busy");
  }
}

function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function msText(ms) {
  return `${Math.round(ms)} ms`;
}

function secs(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function setStatus(text, tone = "") {
  el.connectStatus.textContent = text;
  el.connectStatus.dataset.tone = tone;
}

// --- the agents -------------------------------------------------------------------

function renderAgents(peers) {
  tools = [];
  timeouts = new Map();
  follows = new Map();
  const html = peers.map((p, i) => (p.failure ? failedHtml(p) : agentHtml(p, i))).join("");
  el.agentList.innerHTML = html;
  for (const p of peers) {
    for (const t of p.tools ?? []) {
      tools.push({ ...t, agent: p.info?.name ?? p.id ?? p.desc.card });
      timeouts.set(t.name, p.desc.timeout ?? 300000);
      follows.set(t.name, p.info?.follow ?? null);
    }
  }
  el.agents.hidden = false;
  renderToolSelect(peers);
  el.run.hidden = tools.length === 0;
  listed = peers
    .filter((p) => !p.failure)
    .map((p) => ({ name: p.info?.name ?? p.id ?? p.desc.card, desc: p.desc, tools: p.tools ?? [] }));
  el.tasks.hidden = listed.length === 0;
  el.taskDetail.hidden = true;
  refreshTasks();
}

// --- recent tasks ---------------------------------------------------------------------

/** "2026-12-02T05:00:00.123Z" -> "2026-12-02 05:00:00" (UTC, as the agent wrote it). */
function when(timestamp) {
  return typeof timestamp === "string" ? timestamp.replace("T", " ").slice(0, 19) : "";
}

/** Lists the connected agents' tasks (the package's listTasks) into the table, newest first. */
async function refreshTasks() {
  if (listed.length === 0) return;
  const mine = ++listing;
  el.tasksRefresh.disabled = true;
  el.tasks.setAttribute("aria-busy", "true");
  el.tasksStatus.textContent = "Listing tasks…";
  el.tasksStatus.dataset.tone = "";
  const answers = await Promise.all(
    listed.map((a) =>
      pkg.listTasks(a.desc).then(
        (list) => ({ a, list }),
        (error) => ({ a, error }),
      ),
    ),
  );
  if (mine !== listing) return;
  el.tasksRefresh.disabled = false;
  el.tasks.removeAttribute("aria-busy");
  recent = answers
    .flatMap(({ a, list }) => (list?.tasks ?? []).map((t) => ({ ...t, agent: a.name, tool: a.tools[0]?.name ?? null })))
    .sort((x, y) => String(y.timestamp ?? "").localeCompare(String(x.timestamp ?? "")));
  const failed = answers.filter((x) => x.error);
  const notes = failed.map(
    ({ a, error }) => `${a.name} does not list its tasks (${error.kind === "rpc" ? `JSON-RPC error ${error.code}` : error.kind}: ${error.message})`,
  );
  el.tasksStatus.textContent = [`${plural(recent.length, "task")}.`, ...notes].join(" ");
  el.tasksStatus.dataset.tone = failed.length ? "warn" : "ok";
  el.taskList.querySelector("tbody").innerHTML = recent
    .map(
      (t, i) => `<tr data-task="${esc(t.id)}" data-state="${esc(t.state)}">
        <td><button type="button" class="open-task small" data-index="${i}" aria-label="Open task ${esc(t.id)}">${esc(t.id.slice(0, 8))}</button></td>
        <td class="state-${esc(t.state)}">${esc(t.state)}</td>
        <td><code title="${esc(t.contextId)}">${esc(t.contextId.length > 13 ? `${t.contextId.slice(0, 12)}…` : t.contextId)}</code></td>
        <td>${esc(when(t.timestamp))}</td>
        <td>${esc(t.agent)}</td></tr>`,
    )
    .join("");
  el.taskList.hidden = recent.length === 0;
  const open = el.taskDetail.dataset.task;
  if (open && !el.taskDetail.hidden) {
    const i = recent.findIndex((t) => t.id === open);
    if (i >= 0) openTask(i, { focus: false });
  }
}

/** Shows task `recent[i]`: its facts and text; a task waiting for input gets a reply box. */
function openTask(i, { focus = true } = {}) {
  const t = recent[i];
  if (!t) return;
  for (const tr of el.taskList.querySelectorAll("tbody tr")) tr.classList.toggle("open", tr.dataset.task === t.id);
  const waits = t.state === "input-required" || t.state === "auth-required";
  const label = t.state === "completed" ? "Answer" : waits ? "The agent asks" : "Status message";
  el.taskDetail.dataset.task = t.id;
  el.taskDetail.dataset.state = t.state;
  el.taskDetail.innerHTML = `<h3 tabindex="-1">Task <code class="task-id">${esc(t.id)}</code></h3>
    <dl class="facts">
      ${row("State", `<span class="state-${esc(t.state)}">${esc(t.state)}</span>`)}
      ${row("Context", `<code class="task-context">${esc(t.contextId)}</code>`)}
      ${row("Time", esc(when(t.timestamp)) || "(not given)")}
      ${row("Agent", esc(t.agent))}
    </dl>
    ${t.text ? `<h4>${esc(label)}</h4><pre class="task-text">${esc(t.text)}</pre>` : ""}
    ${
      waits && t.tool
        ? `<form class="reply" id="task-reply-form"><label for="task-reply">Your answer</label>
      <textarea id="task-reply" rows="2"></textarea>
      <button type="submit" class="primary" id="task-reply-btn">Answer</button></form>`
        : ""
    }`;
  el.taskDetail.hidden = false;
  const form = document.getElementById("task-reply-form");
  form?.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = document.getElementById("task-reply").value.trim();
    if (!text) return;
    el.run.scrollIntoView({ behavior: "smooth", block: "start" });
    run({ text, taskId: t.id, contextId: t.contextId, tool: t.tool });
  });
  if (focus) el.taskDetail.querySelector("h3").focus({ preventScroll: true });
}

function row(label, value) {
  return value ? `<div><dt>${label}</dt><dd>${value}</dd></div>` : "";
}

/** How calls follow this agent's tasks, in words, with the card's reason. */
function followHtml(c) {
  const how = FOLLOW[c.follow] ?? c.follow;
  const why =
    c.follow === "stream"
      ? "the card says capabilities.streaming"
      : c.follow === "block"
        ? "an A2A agent without streaming: the answer comes when the task settles"
        : `the toolnexus dialect answers at once${c.longPoll ? "; the agent long-polls (Prefer: wait)" : ""}`;
  return `<span class="follow" data-follow="${esc(c.follow)}">${esc(how)}</span> <span class="why">(${esc(why)})</span>`;
}

function agentHtml(p) {
  const c = p.info;
  const dialect = c ? DIALECTS[c.dialect] ?? c.dialect : null;
  const title = c ? esc(c.name) : esc(p.id ?? p.desc.card);
  const toolsHtml = p.tools.length
    ? `<ul class="tools">${p.tools
        .map(
          (t) => `<li><div class="tool-head"><code class="tool-name">${esc(t.name)}</code>
            <button type="button" class="small use" data-tool="${esc(t.name)}" aria-label="Use ${esc(t.name)}">Use</button></div>
            <p class="tool-desc">${esc(t.description || "(no description)")}</p></li>`,
        )
        .join("")}</ul>`
    : `<p class="hint">This agent advertises no skills${c && c.skills.length ? " the toolkit could use (their names are taken by an earlier agent)" : ""}.</p>`;
  return `<article class="agent" data-state="ok" aria-label="Agent ${title}">
    <header>
      <h3>${title}${c?.version ? ` <span class="version">v${esc(c.version)}</span>` : ""}</h3>
      <span class="badges">${p.id ? `<span class="badge id">${esc(p.id)}</span>` : ""}${
        dialect ? `<span class="badge dialect" data-dialect="${esc(c.dialect)}" title="${esc(c.dialectReason)}">${esc(dialect)}</span>` : ""
      }${c?.streaming ? `<span class="badge stream" title="capabilities.streaming">streaming</span>` : ""}<span class="badge ok">connected</span></span>
    </header>
    ${c?.description ? `<p class="desc">${esc(c.description)}</p>` : ""}
    ${c ? "" : `<p class="hint">The card's details are not available to this page (${esc(p.peek?.error ?? "unreadable")}); its tools are below.</p>`}
    <dl class="facts">
      ${row("Dialect", dialect ? `${esc(dialect)} <span class="why">(${esc(c.dialectReason)})</span>` : "")}
      ${row("Endpoint", c ? `<code class="endpoint">${esc(c.endpoint)}</code>` : "")}
      ${row("Calls", c ? followHtml(c) : "")}
      ${row("Provider", c?.provider ? esc(c.provider) : "")}
      ${row("Card", `<a href="${esc(p.desc.card)}" class="card-link" target="_blank" rel="noopener noreferrer">${esc(p.desc.card)}</a>`)}
    </dl>
    <h4>${plural(p.tools.length, "tool")}</h4>
    ${toolsHtml}
  </article>`;
}

function failedHtml(p) {
  const x = p.explanation;
  return `<article class="agent failed" data-state="failed" data-kind="${esc(p.failure.kind)}" aria-label="Agent ${esc(p.id ?? p.desc.card)}: failed">
    <header>
      <h3>${esc(p.id ?? hostOf(p.desc.card))}</h3>
      <span class="badges"><span class="badge fail">failed</span></span>
    </header>
    <dl class="facts">${row("Card", `<code>${esc(p.desc.card)}</code>`)}</dl>
    <div class="explain" role="alert">
      <p class="explain-title"><strong>${x.title}</strong></p>
      <p>${x.text}</p>
      ${x.fix ? `<div class="fix"><span class="label">How to fix:</span> ${x.fix}</div>` : ""}
      <details><summary>Error details</summary><pre class="error-text">${esc(p.failure.kind)}: ${esc(p.failure.message)}</pre></details>
    </div>
  </article>`;
}

function renderToolSelect(peers) {
  const previous = el.tool.value;
  el.tool.innerHTML = peers
    .filter((p) => p.tools?.length)
    .map(
      (p) => `<optgroup label="${esc(p.info?.name ?? p.id ?? p.desc.card)}">${p.tools
        .map((t) => `<option value="${esc(t.name)}">${esc(t.name)}</option>`)
        .join("")}</optgroup>`,
    )
    .join("");
  if (tools.some((t) => t.name === previous)) el.tool.value = previous;
  showToolDesc();
}

function showToolDesc() {
  const t = tools.find((x) => x.name === el.tool.value);
  el.toolDesc.textContent = t ? t.description || "(no description)" : "";
}

// --- running ------------------------------------------------------------------------

/**
 * Runs the selected tool on the task text; with `answer` ({text, taskId,
 * contextId, tool}), answers the question of that task instead.
 */
async function run(answer) {
  if (current || !toolkit) return;
  const name = answer?.tool ?? el.tool.value;
  const task = answer ? answer.text : el.task.value.trim();
  if (!name) return;
  if (!task) {
    (answer ? document.getElementById("reply") : el.task)?.focus();
    return;
  }
  const args = { task };
  if (answer) {
    args.taskId = answer.taskId;
    if (answer.contextId) args.contextId = answer.contextId;
  }
  const controller = new AbortController();
  const r = {
    name,
    controller,
    t0: performance.now(),
    tl: newRun(follows.get(name)),
    result: null,
    cancelAsked: false,
    shown: "", // the streamed text on screen
  };
  current = r;
  el.runBtn.disabled = true;
  el.connectBtn.disabled = true;
  el.cancelBtn.disabled = false;
  el.progress.hidden = false;
  el.result.hidden = true;
  el.result.innerHTML = "";
  delete el.result.dataset.state;
  delete el.result.dataset.error;
  el.progress.dataset.running = "1";
  renderRun(r);
  const ticker = setInterval(() => renderRun(r), 100);
  const onEvent = (event) => {
    observe(r.tl, event, performance.now() - r.t0);
    if (current === r) {
      renderRun(r);
      renderStreamed(r);
    }
  };
  let result;
  try {
    result = await toolkit.execute(name, args, { signal: controller.signal, onEvent });
  } catch (e) {
    // execute never rejects; keep the page usable if it ever does.
    result = { isError: true, output: String(e?.message ?? e), metadata: { state: "failed", polls: 0, ms: Math.round(performance.now() - r.t0) } };
  }
  clearInterval(ticker);
  r.result = result;
  r.t1 = performance.now();
  r.tl.log.push({ at: r.t1 - r.t0, text: `result: ${result.metadata?.state ?? (result.isError ? "error" : "ok")}` });
  current = null;
  delete el.progress.dataset.running;
  el.runBtn.disabled = false;
  el.connectBtn.disabled = false;
  el.cancelBtn.disabled = true;
  el.cancelBtn.textContent = "Cancel";
  renderRun(r);
  renderResult(r);
  refreshTasks();
}

function cancel() {
  if (!current || current.cancelAsked) return;
  current.cancelAsked = true;
  current.cancelAt = performance.now() - current.t0;
  current.tl.log.push({ at: current.cancelAt, text: "Cancel: the call is aborted" });
  el.cancelBtn.disabled = true;
  el.cancelBtn.textContent = "Canceling…";
  current.controller.abort();
  renderRun(current);
}

function step(state, cls, detail) {
  return `<li class="${cls}" data-step="${esc(state)}"><span class="dot" aria-hidden="true"></span><span class="state">${esc(state)}</span><span class="detail">${detail}</span></li>`;
}

function at(ms) {
  return `+${Math.round(ms)} ms`;
}

function quote(text, max = 160) {
  const t = text.replace(/\s+/g, " ").trim();
  return `<q class="msg">${esc(t.length > max ? `${t.slice(0, max)}…` : t)}</q>`;
}

/** What the call did first, by how it follows the task. */
function sentText(follow) {
  if (follow === "stream") return "the task is sent as a stream request; its events follow (SSE)";
  if (follow === "block") return "the task is sent as one blocking request; the answer comes when it settles";
  if (follow === "poll") return "the task is sent; GetTask polls follow until it settles";
  return "the task is sent";
}

function waitingStep(r, now) {
  const tl = r.tl;
  if (r.cancelAsked) return step("canceling", "now", `aborted at ${at(r.cancelAt)}; waiting for the result…`);
  const quiet = tl.lastAt === null ? "" : ` · ${msText(now - tl.lastAt)} since the last event`;
  if (tl.follow === "stream") return step("streaming", "now", `stream open for ${msText(now)}${quiet}`);
  if (tl.follow === "block") {
    return tl.events === 0
      ? step("waiting", "now", `blocking send in flight for ${msText(now)}`)
      : step("polling", "now", `the answer was not settled: polling GetTask${quiet}`);
  }
  if (tl.follow === "poll") return step("polling", "now", `polling GetTask (a poll shows only when something changed)${quiet}`);
  return step("waiting", "now", `waiting for the agent · ${msText(now)}`);
}

function renderRun(r) {
  const now = (r.t1 ?? performance.now()) - r.t0;
  const done = r.result !== null;
  const tl = r.tl;
  const meta = r.result?.metadata ?? {};
  const finalState = done ? meta.state ?? (r.result.isError ? "failed" : "completed") : null;
  const finalCls = finalState === "completed" ? "done final ok" : "done final bad";
  const fromResult = done ? `the result (${plural(meta.polls ?? 0, "poll")})` : "";
  let lastState = -1;
  tl.steps.forEach((s, i) => {
    if (s.kind === "state") lastState = i;
  });
  // The last state seen is the result's state: that row is the end of the timeline.
  const merged = done && lastState >= 0 && tl.steps[lastState].state === finalState && SETTLED.has(finalState);
  const items = [step("sent", "done", `+0 ms · ${esc(sentText(tl.follow))}`)];
  tl.steps.forEach((s, i) => {
    if (s.kind === "state") {
      const end = merged && i === lastState;
      const live = !done && i === lastState && !SETTLED.has(s.state);
      const cls = end ? finalCls : live ? "done now" : "done";
      const msg = s.message ? ` · ${quote(s.message)}` : "";
      items.push(step(s.state, cls, `${at(s.at)} · ${esc(s.via)}${msg}${end ? ` · ${esc(fromResult)}` : ""}`));
    } else if (s.kind === "artifact") {
      const open = !done && !s.done && !s.replaced;
      const chunks = `${plural(s.chunks, "chunk")}, ${plural(s.chars, "char")}`;
      const span = s.chunks > 1 ? ` (${at(s.at)} to ${at(s.lastAt)})` : "";
      items.push(
        step("artifact", open ? "done now" : "done", `${at(s.at)} · stream event · ${chunks}${span}${open ? " · more to come…" : s.done ? " · last chunk" : ""}`),
      );
    } else if (s.kind === "message") {
      items.push(step("message", "done", `${at(s.at)} · ${esc(s.via)} · ${quote(s.text)}`));
    }
  });
  if (!done) items.push(waitingStep(r, now));
  else if (!merged) items.push(step(finalState, finalCls, `${at(meta.ms ?? now)} · ${plural(meta.polls ?? 0, "poll")} (from the result)`));
  el.timeline.innerHTML = items.join("");
  const events = plural(tl.events, "event");
  el.clock.innerHTML = done
    ? `Finished in <strong>${esc(meta.ms ?? Math.round(now))} ms</strong> · ${events} · ${plural(meta.polls ?? 0, "GetTask poll")}${meta.taskId ? ` · task <code>${esc(meta.taskId)}</code>` : ""}`
    : `Elapsed <strong>${msText(now)}</strong> · ${events} so far${tl.lastState ? ` · last state: ${esc(tl.lastState)}` : ""}${tl.taskId ? ` · task <code>${esc(tl.taskId)}</code>` : ""}`;
  renderLog(r);
}

function renderLog(r) {
  el.eventLog.innerHTML = r.tl.log.map((l) => `<li><span class="at">+${Math.round(l.at)} ms</span> ${esc(l.text)}</li>`).join("");
}

/** While running: the answer text as it streams in (artifact chunks, a message). */
function renderStreamed(r) {
  const text = streamedText(r.tl);
  if (text === r.shown) return;
  r.shown = text;
  let pre = el.result.querySelector("pre.streamed");
  if (!pre) {
    el.result.innerHTML = `<h3>Output <span class="live">arriving…</span></h3><pre class="output streamed" id="output"></pre>`;
    el.result.setAttribute("aria-busy", "true");
    pre = el.result.querySelector("pre.streamed");
  }
  pre.textContent = text;
  el.result.querySelector(".live").textContent = streaming(r.tl) ? "streaming…" : "arriving…";
  el.result.hidden = false;
}

function renderResult(r) {
  const { output, isError, metadata = {} } = r.result;
  const state = metadata.state ?? (isError ? "failed" : "completed");
  el.result.removeAttribute("aria-busy");
  el.result.dataset.state = state;
  el.result.dataset.error = String(Boolean(isError));
  const facts = `<dl class="facts inline">
      ${row("State", `<span class="state-${esc(state)}">${esc(state)}</span>`)}
      ${row("Time", `${esc(metadata.ms ?? "?")} ms`)}
      ${row("Events", esc(r.tl.events))}
      ${row("Polls", esc(metadata.polls ?? "?"))}
      ${row("Agent", esc(metadata.agent ?? ""))}
    </dl>`;
  const waits = state === "input-required" || state === "auth-required";
  if (!isError) {
    el.result.innerHTML = `<h3>Output</h3><pre class="output" id="output">${esc(output)}</pre>${renderParts(metadata.parts)}${facts}`;
  } else if (waits && metadata.taskId) {
    // The agent waits for the caller: show its question and a reply box that
    // answers on the same task (taskId, contextId from the result).
    const marker = `${state}: `;
    const question = output.includes(marker) ? output.slice(output.indexOf(marker) + marker.length) : output;
    const title = state === "auth-required" ? "The agent needs you to sign in" : "The agent asks";
    el.result.innerHTML = `<div class="ask-box"><h3>${esc(title)}</h3><pre class="question" id="output">${esc(question)}</pre>
      <form id="reply-form" class="reply"><label for="reply">Your answer</label>
      <textarea id="reply" name="reply" rows="2"></textarea>
      <button id="reply-btn" type="submit" class="primary">Answer</button></form></div>${facts}`;
    const form = document.getElementById("reply-form");
    const reply = document.getElementById("reply");
    const send = () => run({ text: reply.value.trim(), taskId: metadata.taskId, contextId: metadata.contextId, tool: r.name });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      send();
    });
    reply.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        send();
      }
    });
  } else {
    const why = explainRunError(r.result, timeouts.get(r.name), r.tl.follow);
    const title = state === "canceled" ? "Canceled" : /timed out after/i.test(output) ? "Timed out" : `Task ${state}`;
    const partial = r.shown ? `<details class="partial"><summary>What arrived before the end</summary><pre class="output">${esc(r.shown)}</pre></details>` : "";
    el.result.innerHTML = `<div class="error-box"><h3>${esc(title)}</h3><pre class="error-text" id="output">${esc(output)}</pre>${
      why ? `<p>${why}</p>` : ""
    }${partial}</div>${facts}`;
  }
  el.result.hidden = false;
}

/** The answer's file and data parts (`metadata.parts`, A2A 1.0 shape): images shown,
 * JSON pretty-printed, other files as a link or their name and size. */
function renderParts(parts) {
  if (!Array.isArray(parts) || parts.length === 0) return "";
  const items = parts.map((p) => {
    const type = typeof p.mediaType === "string" ? p.mediaType : "";
    const name = esc(p.filename ?? "");
    if ("data" in p) return `<li class="part data"><pre class="json">${esc(JSON.stringify(p.data, null, 2))}</pre></li>`;
    const src = typeof p.url === "string" ? p.url : typeof p.raw === "string" ? `data:${type || "application/octet-stream"};base64,${p.raw}` : "";
    const safe = /^(https?:|data:)/i.test(src) ? src : "";
    if (type.startsWith("image/") && safe) return `<li class="part image"><img src="${esc(safe)}" alt="${name || esc(type)}"><span>${name}</span></li>`;
    const label = name || esc(type || "file");
    return `<li class="part file">${safe ? `<a href="${esc(safe)}" download="${name}" rel="noopener" target="_blank">${label}</a>` : label} <span class="muted">${esc(type)}</span></li>`;
  });
  return `<h3>Attachments</h3><ul class="parts" id="parts">${items.join("")}</ul>`;
}

// --- wiring -------------------------------------------------------------------------

function wireUp() {
  el.connectForm.addEventListener("submit", (e) => {
    e.preventDefault();
    connect();
  });
  el.connectForm.addEventListener("change", (e) => {
    if (e.target.name === "mode") showMode();
  });
  el.runForm.addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });
  el.cancelBtn.addEventListener("click", cancel);
  el.tasksRefresh.addEventListener("click", refreshTasks);
  el.taskList.addEventListener("click", (e) => {
    const open = e.target.closest("button.open-task");
    if (open) openTask(Number(open.dataset.index));
  });
  el.tool.addEventListener("change", showToolDesc);
  el.task.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && current) cancel();
  });
  el.agentList.addEventListener("click", (e) => {
    const use = e.target.closest("button.use");
    if (!use) return;
    el.tool.value = use.dataset.tool;
    showToolDesc();
    el.run.scrollIntoView({ behavior: "smooth", block: "start" });
    el.task.focus({ preventScroll: true });
  });
}

async function boot() {
  const card = defaultCard();
  el.cardUrl.value = card;
  el.config.value = defaultConfig(card);
  wireUp();
  showMode();
  try {
    pkg = await import("toolnexus-wasm");
  } catch (e) {
    el.boot.dataset.tone = "error";
    el.boot.textContent = `Could not load the toolnexus-wasm package: ${e.message}. Serve this folder over HTTP with .wasm as application/wasm (toolnexus serve --ui does).`;
    return;
  }
  el.boot.hidden = true;
  el.connectBtn.disabled = false;
  try {
    const meta = await (await fetch("./vendor/toolnexus-wasm/package.json", { cache: "no-store" })).json();
    el.about.innerHTML = `Runs in your browser on <code>${esc(meta.name)} ${esc(meta.version)}</code> (the toolnexus Rust core compiled to WebAssembly); requests go only to the agents you connect to.`;
  } catch {}
  // Ready once boot is over, the package's name and version shown included.
  document.body.dataset.ready = "1";
}

boot();
