// The toolnexus browser console: connect to A2A agents (one card URL, or an
// `agents` config block), list their skills as tools, run one with a live
// timeline and a Cancel button. Plain ES modules over the toolnexus-wasm
// package (its client build, mapped by the page's import map).

import { describeCard, DIALECTS } from "./card.js";
import { esc, explainCardFailure, explainRunError } from "./explain.js";
import * as wire from "./wire.js";

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
  wireLog: $("wire-log"),
  result: $("result"),
  about: $("about"),
};

let pkg = null; // the toolnexus-wasm module
let toolkit = null; // the connected Toolkit
let tools = []; // [{name, description, agent}] in <select> order
let timeouts = new Map(); // tool name -> the timeout its agent was resolved with
let current = null; // the running task, if any

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
    const desc = pkg.agent({ card, timeout, pollEvery, ...(headers ? { headers } : {}) });
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

/** This page's own GET of the card, for what the package does not return: the card itself. */
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
      info = describeCard(JSON.parse(text), desc.card);
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
  const html = peers.map((p, i) => (p.failure ? failedHtml(p) : agentHtml(p, i))).join("");
  el.agentList.innerHTML = html;
  for (const p of peers) {
    for (const t of p.tools ?? []) {
      tools.push({ ...t, agent: p.info?.name ?? p.id ?? p.desc.card });
      timeouts.set(t.name, p.desc.timeout ?? 300000);
    }
  }
  el.agents.hidden = false;
  renderToolSelect(peers);
  el.run.hidden = tools.length === 0;
}

function row(label, value) {
  return value ? `<div><dt>${label}</dt><dd>${value}</dd></div>` : "";
}

function agentHtml(p) {
  const c = p.info;
  const dialect = c ? DIALECTS[c.dialect] : null;
  const title = c ? esc(c.name) : esc(p.id ?? p.desc.card);
  const provider = c?.provider
    ? c.provider.url
      ? `<a href="${esc(c.provider.url)}" rel="noopener noreferrer" target="_blank">${esc(c.provider.organization ?? c.provider.url)}</a>`
      : esc(c.provider.organization)
    : "";
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
        dialect ? `<span class="badge dialect" data-dialect="${esc(c.dialect)}" title="${esc(dialect.why)}">${esc(dialect.label)}</span>` : ""
      }<span class="badge ok">connected</span></span>
    </header>
    ${c?.description ? `<p class="desc">${esc(c.description)}</p>` : ""}
    ${c ? "" : `<p class="hint">The card's details are not available to this page (${esc(p.peek?.error ?? "unreadable")}); its tools are below.</p>`}
    <dl class="facts">
      ${row("Dialect", dialect ? `${esc(dialect.label)} <span class="why">(${esc(dialect.why)})</span>` : "")}
      ${row("Endpoint", c ? `<code class="endpoint">${esc(c.endpoint)}</code>` : "")}
      ${row("Provider", provider)}
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

const FINAL = new Set(["completed", "failed", "canceled", "rejected", "input-required", "auth-required", "unknown"]);

async function run() {
  if (current || !toolkit) return;
  const name = el.tool.value;
  const task = el.task.value.trim();
  if (!name) return;
  if (!task) {
    el.task.focus();
    return;
  }
  const controller = new AbortController();
  const r = {
    name,
    controller,
    t0: performance.now(),
    seen: {}, // state -> {at, via}
    lastState: null,
    polls: 0,
    inFlight: null,
    log: [],
    result: null,
    cancelAsked: false,
  };
  current = r;
  wire.watch((ev) => onWire(r, ev));
  el.runBtn.disabled = true;
  el.connectBtn.disabled = true;
  el.cancelBtn.disabled = false;
  el.progress.hidden = false;
  el.result.hidden = true;
  el.result.innerHTML = "";
  delete el.result.dataset.state;
  el.progress.dataset.running = "1";
  renderRun(r);
  const ticker = setInterval(() => renderRun(r), 100);
  let result;
  try {
    result = await toolkit.execute(name, { task }, { signal: controller.signal });
  } catch (e) {
    // execute never rejects; keep the page usable if it ever does.
    result = { isError: true, output: String(e?.message ?? e), metadata: { state: "failed", polls: r.polls, ms: Math.round(performance.now() - r.t0) } };
  }
  clearInterval(ticker);
  r.result = result;
  r.t1 = performance.now();
  current = null;
  delete el.progress.dataset.running;
  el.runBtn.disabled = false;
  el.connectBtn.disabled = false;
  el.cancelBtn.disabled = true;
  el.cancelBtn.textContent = "Cancel";
  renderRun(r);
  renderResult(r);
}

function cancel() {
  if (!current || current.cancelAsked) return;
  current.cancelAsked = true;
  current.cancelAt = performance.now() - current.t0;
  el.cancelBtn.disabled = true;
  el.cancelBtn.textContent = "Canceling…";
  current.controller.abort();
  renderRun(current);
}

function onWire(r, ev) {
  const at = performance.now() - r.t0;
  if (ev.phase === "request") {
    if (ev.kind === "get") r.polls += 1;
    const n = ev.kind === "get" ? ` #${r.polls}` : "";
    r.inFlight = { kind: ev.kind, longPoll: ev.longPoll, since: at, n: r.polls };
    r.log.push({ at, text: `${ev.method}${n} sent${ev.longPoll ? " (long poll: the agent may hold the answer until the task settles)" : ""}` });
  } else if (ev.phase === "answer") {
    const n = ev.kind === "get" ? ` #${r.inFlight?.n ?? r.polls}` : "";
    r.inFlight = null;
    if (ev.state) {
      r.lastState = ev.state;
      if (!r.seen[ev.state]) r.seen[ev.state] = { at, via: `${ev.method}${n}` };
    }
    r.log.push({ at, text: `${ev.method}${n} answered${ev.state ? `: ${ev.state}` : ev.rpcError ? `: error ${ev.rpcError}` : ""}` });
  } else {
    r.inFlight = null;
    r.log.push({ at, text: `${ev.method} ${ev.error === "aborted" ? "stopped (aborted)" : `failed: ${ev.error}`}` });
  }
  if (current === r) renderRun(r);
  else renderLog(r);
}

function step(state, cls, detail) {
  return `<li class="${cls}" data-step="${esc(state)}"><span class="dot" aria-hidden="true"></span><span class="state">${esc(state)}</span><span class="detail">${detail}</span></li>`;
}

function renderRun(r) {
  const now = (r.t1 ?? performance.now()) - r.t0;
  const done = r.result !== null;
  const meta = r.result?.metadata ?? {};
  const items = [];
  const sub = r.seen.submitted;
  const work = r.seen.working;
  const laterSeen = Object.keys(r.seen).some((s) => s !== "submitted");
  items.push(
    sub
      ? step("submitted", "done", `+${Math.round(sub.at)} ms · ${esc(sub.via)}`)
      : step("submitted", done || laterSeen ? "skipped" : "now", done || laterSeen ? "not seen" : `sending… ${msText(now)}`),
  );
  if (work) {
    const still = !done && r.lastState === "working";
    items.push(step("working", still ? "now done" : "done", `+${Math.round(work.at)} ms · ${esc(work.via)}${still ? ` · still working, ${msText(now - work.at)}` : ""}`));
  } else if (done) {
    items.push(step("working", "skipped", "not seen (the task settled between polls)"));
  } else {
    const waiting =
      r.inFlight?.kind === "get"
        ? `GetTask #${r.inFlight.n} in flight${r.inFlight.longPoll ? " (long poll)" : ""} for ${msText(now - r.inFlight.since)}`
        : "waiting for the next poll";
    items.push(step("working", sub ? "now" : "pending", sub ? `not seen yet · ${waiting}` : ""));
  }
  if (done) {
    const state = meta.state ?? (r.result.isError ? "failed" : "completed");
    const cls = state === "completed" ? "done final ok" : "done final bad";
    items.push(step(state, cls, `+${esc(meta.ms ?? Math.round(now))} ms · ${plural(meta.polls ?? r.polls, "poll")} (from the result)`));
  } else {
    items.push(
      step(
        r.cancelAsked ? "canceling" : "settled",
        "pending",
        r.cancelAsked ? `aborted at +${Math.round(r.cancelAt)} ms; waiting for the result…` : "completed, failed or canceled: not yet",
      ),
    );
  }
  el.timeline.innerHTML = items.join("");
  el.clock.innerHTML = done
    ? `Finished in <strong>${esc(meta.ms ?? Math.round(now))} ms</strong> · ${plural(meta.polls ?? r.polls, "GetTask poll")}${meta.taskId ? ` · task <code>${esc(meta.taskId)}</code>` : ""}`
    : `Elapsed <strong>${msText(now)}</strong> · ${plural(r.polls, "GetTask poll")} so far${r.lastState ? ` · last state seen: ${esc(r.lastState)}` : ""}`;
  renderLog(r);
}

function renderLog(r) {
  el.wireLog.innerHTML = r.log.map((l) => `<li><span class="at">+${Math.round(l.at)} ms</span> ${esc(l.text)}</li>`).join("");
}

function renderResult(r) {
  const { output, isError, metadata = {} } = r.result;
  const state = metadata.state ?? (isError ? "failed" : "completed");
  el.result.dataset.state = state;
  el.result.dataset.error = String(Boolean(isError));
  const facts = `<dl class="facts inline">
      ${row("State", `<span class="state-${esc(state)}">${esc(state)}</span>`)}
      ${row("Time", `${esc(metadata.ms ?? "?")} ms`)}
      ${row("Polls", esc(metadata.polls ?? "?"))}
      ${row("Agent", esc(metadata.agent ?? ""))}
    </dl>`;
  if (!isError) {
    el.result.innerHTML = `<h3>Output</h3><pre class="output" id="output">${esc(output)}</pre>${facts}`;
  } else {
    const why = explainRunError(r.result, timeouts.get(r.name));
    const title = state === "canceled" ? "Canceled" : /timed out after/i.test(output) ? "Timed out" : `Task ${state}`;
    el.result.innerHTML = `<div class="error-box"><h3>${esc(title)}</h3><pre class="error-text" id="output">${esc(output)}</pre>${
      why ? `<p>${why}</p>` : ""
    }</div>${facts}`;
  }
  el.result.hidden = false;
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
  wire.install();
  el.boot.hidden = true;
  el.connectBtn.disabled = false;
  document.body.dataset.ready = "1";
  try {
    const meta = await (await fetch("./vendor/toolnexus-wasm/package.json", { cache: "no-store" })).json();
    el.about.innerHTML = `Runs in your browser on <code>${esc(meta.name)} ${esc(meta.version)}</code> (the toolnexus Rust core compiled to WebAssembly); requests go only to the agents you connect to.`;
  } catch {}
}

boot();
