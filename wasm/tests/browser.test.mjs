// Headless Chromium (Debian's /usr/bin/chromium driven by playwright-core):
// a page served from 127.0.0.1 imports the package's browser build (resolved
// through the package's exports map with an import map, as a bundler would)
// and calls a local A2A agent on another port, across origins (CORS).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { chromium } from 'playwright-core';
import { killChildren, listen, pkgDir, startNativeEchoAgent, startPeer } from './helpers.mjs';

const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const MIME = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html', '.json': 'application/json' };

let site;
let agentUrl;
let peer;
let context;
let profile;
const staleProfiles = [];
const pages = [];

/** The browser entry of `subpath` ("." or "./client") from the package's exports map. */
function browserEntry(subpath) {
  const pkg = JSON.parse(readFileSync(join(pkgDir(), 'package.json'), 'utf8'));
  return pkg.exports[subpath].browser.default.replace(/^\.\//, '/pkg/');
}

function page(script, imports = '') {
  const importMap = { imports: { 'toolnexus-wasm': browserEntry('.'), 'toolnexus-wasm/client': browserEntry('./client') } };
  return `<!doctype html><meta charset="utf-8"><title>toolnexus-wasm</title>
<script type="importmap">${JSON.stringify(importMap)}</script>
<pre id="out"></pre>
<script type="module">
${imports}
const out = document.getElementById("out");
try {
${script}
} catch (e) {
  out.textContent = JSON.stringify({ thrown: e.message, kind: e.kind });
}
out.dataset.done = "1";
</script>`;
}

const PAGES = {
  // The README's browser example.
  '/agent.html': page(`
  const card = new URLSearchParams(location.search).get("card");
  const tools = await agentTools(agent({ card, pollEvery: 50 }));
  const result = await tools[0].execute({ task: "hello from chromium" });
  out.textContent = JSON.stringify({ names: tools.map((t) => t.name), result });`, 'import { agent, agentTools } from "toolnexus-wasm";'),
  '/client.html': page(`
  const { createToolkit } = await import("toolnexus-wasm/client");
  const card = new URLSearchParams(location.search).get("card");
  const toolkit = await createToolkit({ agents: [{ card, pollEvery: 20 }] });
  const name = toolkit.tools()[0].name;
  const controller = new AbortController();
  const running = toolkit.execute(name, { task: "slow in the browser" }, { signal: controller.signal });
  setTimeout(() => controller.abort(), 150);
  out.textContent = JSON.stringify({ name, result: await running });`),
  '/bad.html': page(`
  const { agentTools } = await import("toolnexus-wasm");
  await agentTools("http://127.0.0.1:9/.well-known/agent-card.json");
  out.textContent = JSON.stringify({ unexpected: "resolved" });`),
};

before(async () => {
  peer = await startPeer({ name: 'browser-peer' });
  site = await listen(async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (PAGES[url.pathname]) {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end(PAGES[url.pathname]);
    }
    if (url.pathname.startsWith('/pkg/')) {
      const rel = normalize(url.pathname.slice('/pkg/'.length));
      if (!rel.startsWith('..')) {
        try {
          const body = readFileSync(join(pkgDir(), rel));
          res.writeHead(200, { 'content-type': MIME[extname(rel)] ?? 'application/octet-stream' });
          return res.end(body);
        } catch {}
      }
    }
    res.writeHead(404);
    res.end();
  });
  // The page's origin is the only one the agent answers across origins.
  const agent = await startNativeEchoAgent(['--cors-origin', new URL(site.url).origin]);
  agentUrl = agent.url;
  // A cold first start of Chromium on a loaded 2-core machine can pass 30 s
  // (seen in CI): one more try, with a fresh profile and longer, then fail.
  for (const timeout of [30_000, 60_000]) {
    // A timed-out start may still be writing its profile: leave it, clean it up last.
    if (profile) staleProfiles.push(profile);
    profile = mkdtempSync(join(tmpdir(), 'toolnexus-chromium-'));
    try {
      context = await chromium.launchPersistentContext(profile, {
        executablePath: '/usr/bin/chromium',
        headless: true,
        args: FLAGS,
        timeout,
      });
      break;
    } catch (e) {
      if (timeout === 60_000 || e?.name !== 'TimeoutError') throw e;
      console.error(`chromium did not start in ${timeout} ms; trying once more`);
    }
  }
});

after(async () => {
  await context?.close();
  for (const dir of [profile, ...staleProfiles]) {
    if (dir) try { rmSync(dir, { recursive: true, force: true, maxRetries: 5 }); } catch {}
  }
  await site?.close();
  await peer?.close();
  await killChildren();
});

/** Opens `path` and returns the JSON the page writes into #out. */
async function visit(path) {
  const p = await context.newPage();
  pages.push(p);
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await p.goto(`${site.url}${path}`, { timeout: 30_000 });
  try {
    await p.waitForSelector('#out[data-done]', { timeout: 30_000 });
  } catch (e) {
    throw new Error(`${path} did not finish: ${e.message}\n${logs.join('\n')}`);
  }
  const text = await p.textContent('#out');
  await p.close();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${path} wrote ${text}\n${logs.join('\n')}`);
  }
}

test('a page runs agentTools + execute against toolnexus serve on another port (CORS)', async () => {
  const card = `${agentUrl}/.well-known/agent-card.json`;
  const got = await visit(`/agent.html?card=${encodeURIComponent(card)}`);
  assert.equal(got.thrown, undefined, JSON.stringify(got));
  assert.deepEqual(got.names, ['toolnexus-agent_hello-world', 'toolnexus-agent_summarize']);
  assert.equal(got.result.isError, false);
  assert.equal(got.result.output, 'hello from chromium');
  assert.equal(got.result.metadata.state, 'completed');
});

test('the client-only build in a page: a toolkit call aborted with an AbortController', async () => {
  const got = await visit(`/client.html?card=${encodeURIComponent(peer.cardUrl)}`);
  assert.equal(got.thrown, undefined, JSON.stringify(got));
  assert.equal(got.name, 'browser-peer_echo');
  assert.equal(got.result.isError, true);
  assert.equal(got.result.metadata.state, 'canceled');
  assert.ok(peer.methods().some((m) => m === 'CancelTask' || m === 'tasks/cancel'), 'the peer got CancelTask');
});

test('an unreachable card rejects in the page with a kinded Error', async () => {
  const got = await visit('/bad.html');
  assert.equal(got.kind, 'transport');
  assert.match(got.thrown, /fetching the Agent Card/);
});
