// The browser attack of issue 18, in real headless Chromium (Debian's
// /usr/bin/chromium driven by playwright-core): a page served from another
// local origin (another port) tries to drive a default `toolnexus serve`.
//
// - No CORS by default: the page's JSON-RPC fetch (GetTask, ListTasks) is
//   refused (the preflight for application/json is not granted, so the
//   request never reaches the agent), and a blind "simple" POST (no-cors,
//   text/plain) creates no task.
// - DNS rebinding: Chromium resolves rebind.test to 127.0.0.1
//   (--host-resolver-rules), so a page of http://rebind.test:PORT is "same
//   origin" with the agent; the agent refuses the foreign Host (421). A raw
//   request with `Host: attacker.example` is refused the same way.
// - With `--cors-origin` naming the page's origin, the same page works.
//
// Everything listens on 127.0.0.1; every wait is bounded; every process
// started here is stopped in `after`. Run by www/test.sh (suite "security").

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { launchChromium, serve, stop } from "./harness.mjs";

const children = [];
let agent; // a default `toolnexus serve`
let granted; // the same, with --cors-origin naming the page's origin
let pageServer;
let pageOrigin;
let browser;
let rebindBrowser;
let taskId;

/** A JSON-RPC 1.0 call from Node (a trusted local caller), bounded. */
async function rpc(url, method, params) {
  const resp = await fetch(`${url}/`, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(10_000),
  });
  return resp.json();
}

/** One raw HTTP/1.1 request with our own headers (Host included): {status, headers}. */
function rawRequest(url, { method = "POST", headers = {}, body = "" }) {
  const u = new URL(url);
  return new Promise((ok, fail) => {
    const req = http.request(
      { host: "127.0.0.1", port: u.port, path: "/", method, headers: { ...headers, "content-length": Buffer.byteLength(body) }, timeout: 10_000 },
      (res) => {
        res.resume();
        res.on("end", () => ok({ status: res.statusCode, headers: res.headers }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", fail);
    req.end(body);
  });
}

/** The page of the foreign origin: blank, with a title. */
function startPageServer() {
  return new Promise((ok) => {
    const server = http.createServer((req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<!doctype html><title>another site</title><p>nothing to see</p>");
    });
    server.listen(0, "127.0.0.1", () => ok(server));
  });
}

/**
 * Runs in the page: a JSON-RPC POST to `url` as a web app would send it
 * (application/json: a preflighted request). {ok, status, body} or {error}.
 */
async function pageFetch(page, url, method, params) {
  return page.evaluate(
    async ({ url, method, params }) => {
      try {
        const r = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", "a2a-version": "1.0" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
        });
        return { ok: true, status: r.status, body: await r.text() };
      } catch (e) {
        return { ok: false, error: String(e) };
      }
    },
    { url, method, params },
  );
}

before(async () => {
  agent = await serve(children, ["--llm", "echo", "--name", "victim"]);
  pageServer = await startPageServer();
  pageOrigin = `http://127.0.0.1:${pageServer.address().port}`;
  granted = await serve(children, ["--llm", "echo", "--name", "shared", "--cors-origin", pageOrigin]);
  const sent = await rpc(agent.url, "SendMessage", {
    message: { role: "ROLE_USER", messageId: "secret-1", parts: [{ text: "the user's secret" }] },
  });
  taskId = sent?.result?.task?.id;
  assert.ok(taskId, `a task for the page to steal: ${JSON.stringify(sent)}`);
  browser = await launchChromium({ viewport: { width: 800, height: 600 } });
});

after(async () => {
  await browser?.close();
  await rebindBrowser?.close();
  await new Promise((ok) => (pageServer ? pageServer.close(ok) : ok()));
  await Promise.all(children.map(stop));
});

test("a page of another origin cannot read a default serve's tasks", async () => {
  const page = await browser.context.newPage();
  await page.goto(`${pageOrigin}/`);
  for (const [method, params] of [
    ["ListTasks", {}],
    ["GetTask", { id: taskId }],
  ]) {
    const got = await pageFetch(page, `${agent.url}/`, method, params);
    assert.equal(got.ok, false, `${method} must be refused to the page: ${JSON.stringify(got)}`);
    assert.match(got.error, /TypeError|Failed to fetch/, method);
  }
  // The refusal is the missing grant, not a dead agent: Node reads the task.
  const v = await rpc(agent.url, "GetTask", { id: taskId });
  assert.equal(v.result?.id, taskId, JSON.stringify(v));
  await page.close();
});

test("the preflight of a default serve grants nothing", async () => {
  const r = await rawRequest(agent.url, {
    method: "OPTIONS",
    headers: {
      origin: pageOrigin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type,a2a-version",
      "access-control-request-private-network": "true",
    },
  });
  const granted = Object.keys(r.headers).filter((h) => h.startsWith("access-control-"));
  assert.deepEqual(granted, [], `no CORS grant: ${JSON.stringify(r.headers)}`);
  // A page's POST that skipped the preflight gets no grant either.
  const post = await rawRequest(agent.url, {
    headers: { origin: pageOrigin, "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }),
  });
  assert.equal(post.headers["access-control-allow-origin"], undefined, JSON.stringify(post.headers));
});

test("a blind simple POST from a page (no-cors, text/plain) starts no task", async () => {
  const page = await browser.context.newPage();
  await page.goto(`${pageOrigin}/`);
  const marker = `csrf-${Date.now()}`;
  const got = await page.evaluate(
    async ({ url, marker }) => {
      try {
        // What a hostile page can send without any CORS grant: the browser
        // drops the JSON content type and sends text/plain.
        await fetch(url, {
          method: "POST",
          mode: "no-cors",
          body: JSON.stringify({
            jsonrpc: "2.0", id: 1, method: "message/send",
            params: { message: { role: "user", kind: "message", messageId: marker, parts: [{ kind: "text", text: marker }] } },
          }),
        });
        return "sent";
      } catch (e) {
        return String(e);
      }
    },
    { url: `${agent.url}/`, marker },
  );
  assert.equal(got, "sent");
  const listed = await rpc(agent.url, "ListTasks", { historyLength: 1 });
  const texts = JSON.stringify(listed.result?.tasks ?? listed);
  assert.ok(!texts.includes(marker), `the page started a task: ${texts}`);
  await page.close();
});

test("a DNS-rebinding page (same origin by name, foreign Host) is refused with 421", async () => {
  // Chromium resolves rebind.test to 127.0.0.1: the page at
  // http://rebind.test:PORT is same-origin with the agent, as after a rebinding.
  const port = new URL(agent.url).port;
  rebindBrowser = await launchChromium({
    viewport: { width: 800, height: 600 },
    args: ["--host-resolver-rules=MAP rebind.test 127.0.0.1"],
  });
  const page = await rebindBrowser.context.newPage();
  const nav = await page.goto(`http://rebind.test:${port}/.well-known/agent-card.json`);
  assert.equal(nav.status(), 421, "the card under a foreign Host");
  const got = await pageFetch(page, `http://rebind.test:${port}/`, "ListTasks", {});
  assert.equal(got.ok, true, JSON.stringify(got));
  assert.equal(got.status, 421, JSON.stringify(got));
  assert.ok(!got.body.includes(taskId), "no task in the refusal");
  await page.close();
});

test("a raw request with a foreign Host header is refused with 421, the agent's own names pass", async () => {
  const port = new URL(agent.url).port;
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} });
  const headers = (host) => ({ host, "content-type": "application/json", "a2a-version": "1.0" });
  for (const host of ["attacker.example", `attacker.example:${port}`, `127.0.0.1.nip.example:${port}`]) {
    const r = await rawRequest(agent.url, { headers: headers(host), body });
    assert.equal(r.status, 421, `Host: ${host}`);
  }
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) {
    const r = await rawRequest(agent.url, { headers: headers(host), body });
    assert.equal(r.status, 200, `Host: ${host}`);
  }
});

test("with --cors-origin naming the page's origin, the page works", async () => {
  const page = await browser.context.newPage();
  await page.goto(`${pageOrigin}/`);
  const sent = await pageFetch(page, `${granted.url}/`, "SendMessage", {
    message: { role: "ROLE_USER", messageId: "from-page", parts: [{ text: "hello from the page" }] },
  });
  assert.equal(sent.ok, true, JSON.stringify(sent));
  assert.equal(sent.status, 200);
  const id = JSON.parse(sent.body).result?.task?.id;
  assert.ok(id, sent.body);
  const listed = await pageFetch(page, `${granted.url}/`, "ListTasks", {});
  assert.equal(listed.ok, true, JSON.stringify(listed));
  assert.ok(listed.body.includes(id), listed.body);
  // Another origin is still refused by that agent.
  const other = await browser.context.newPage();
  await other.goto(`${agent.url}/.well-known/agent-card.json`); // origin: the agent's own port
  const got = await pageFetch(other, `${granted.url}/`, "ListTasks", {});
  assert.equal(got.ok, false, JSON.stringify(got));
  await other.close();
  await page.close();
});
