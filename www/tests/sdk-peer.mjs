// A streaming A2A agent for the UI test: the official @a2a-js/sdk peer
// (tests/peers/js/server.mjs, A2A 1.0, `capabilities.streaming: true`;
// "chunks N" streams N artifact chunks 100 ms apart, "slow…" works 5 s),
// behind a small proxy on 127.0.0.1 that adds the CORS headers the SDK's
// Express app does not send, and rewrites the card's URLs to the proxy.
// Responses are piped as they arrive, so SSE events reach the page live.

import { spawn } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { join } from "node:path";
import { ROOT } from "./harness.mjs";

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-headers": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  "access-control-expose-headers": "*",
};

function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** Starts `node tests/peers/js/server.mjs --port P` (added to `children`); resolves with its base URL. */
async function startSdkServer(children) {
  const port = await freePort();
  const child = spawn(process.execPath, [join(ROOT, "tests", "peers", "js", "server.mjs"), "--port", String(port)], {
    cwd: join(ROOT, "tests", "peers"),
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  return new Promise((ok, fail) => {
    let out = "";
    let err = "";
    const timer = setTimeout(() => fail(new Error(`the @a2a-js/sdk peer did not start within 20 s\n${err}`)), 20_000);
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.stdout.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        ok(m[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`the @a2a-js/sdk peer exited with ${code}\n${err}`));
    });
  });
}

/**
 * The SDK peer behind a CORS proxy: {url (the proxy), upstream, cardUrl,
 * rpc(method, params) (to the peer itself, from Node), close()}.
 */
export async function startSdkPeer(children) {
  const upstream = await startSdkServer(children);
  const sockets = new Set();
  let base = "";
  const server = http.createServer((req, res) => {
    if (req.method === "OPTIONS") {
      res.writeHead(204, CORS);
      return res.end();
    }
    const headers = { ...req.headers, host: new URL(upstream).host };
    delete headers.origin;
    const out = http.request(`${upstream}${req.url}`, { method: req.method, headers }, (answer) => {
      const isCard = req.method === "GET" && req.url.startsWith("/.well-known/");
      if (!isCard) {
        res.writeHead(answer.statusCode, { ...answer.headers, ...CORS });
        res.flushHeaders();
        answer.pipe(res);
        return;
      }
      const chunks = [];
      answer.on("data", (c) => chunks.push(c));
      answer.on("end", () => {
        const text = Buffer.concat(chunks).toString().replaceAll(`${upstream}/`, `${base}/`);
        const h = { ...answer.headers, ...CORS };
        delete h["content-length"];
        delete h.etag;
        res.writeHead(answer.statusCode, h);
        res.end(text);
      });
    });
    out.on("error", (e) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain", ...CORS });
      res.end(`proxy: ${e.message}`);
    });
    req.pipe(out);
    res.on("close", () => out.destroy());
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${server.address().port}`;
  return {
    url: base,
    upstream,
    cardUrl: `${base}/.well-known/agent-card.json`,
    /** A JSON-RPC 1.0 call to the peer itself (bounded). */
    rpc: async (method, params) => {
      const resp = await fetch(`${upstream}/`, {
        method: "POST",
        headers: { "content-type": "application/json", "a2a-version": "1.0" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
        signal: AbortSignal.timeout(10_000),
      });
      return resp.json();
    },
    close: () =>
      new Promise((ok) => {
        for (const s of sockets) s.destroy();
        server.close(() => ok());
      }),
  };
}
