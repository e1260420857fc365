// A scripted A2A 0.3 agent on 127.0.0.1 (with CORS) for the timeline test:
// each task stays "working" for `workingPolls` GetTasks, then completes with
// "echo: <text>". Its JSON-RPC endpoint is /rpc, named by the card's `url`.

import http from "node:http";
import { randomUUID } from "node:crypto";

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-headers": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
};

// A task starting with "attach" also answers a 1x1 PNG and a data part.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const attachments = (text) =>
  text.startsWith("attach")
    ? [{ kind: "file", file: { bytes: PNG, mimeType: "image/png", name: "dot.png" } }, { kind: "data", data: { rows: 2, ok: true } }]
    : [];

export async function startPeer({ name = "scripted-peer", workingPolls = 2 } = {}) {
  const tasks = new Map();
  const sockets = new Set();
  let base = "";
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const send = (status, value) => {
      res.writeHead(status, { "content-type": "application/json", ...CORS });
      res.end(JSON.stringify(value));
    };
    if (req.method === "OPTIONS") {
      res.writeHead(204, CORS);
      return res.end();
    }
    if (req.method === "GET" && req.url === "/.well-known/agent-card.json") {
      return send(200, {
        name, description: "A scripted A2A 0.3 agent", version: "0.3.1", protocolVersion: "0.3.0",
        url: `${base}/rpc`, preferredTransport: "JSONRPC", capabilities: {},
        defaultInputModes: ["text"], defaultOutputModes: ["text"],
        skills: [{ id: "echo", name: "echo", description: "Echoes the task after a while", tags: [] }],
      });
    }
    if (req.method !== "POST" || req.url !== "/rpc") return send(404, { error: "not found" });
    let rpc = {};
    try {
      rpc = JSON.parse(Buffer.concat(chunks).toString());
    } catch {}
    const reply = (result) => send(200, { jsonrpc: "2.0", id: rpc.id ?? null, result });
    const view = (t) => ({
      kind: "task", id: t.id, contextId: t.contextId, status: { state: t.state },
      ...(t.state === "completed" ? { artifacts: [{ artifactId: "a", parts: [{ kind: "text", text: `echo: ${t.text}` }, ...attachments(t.text)] }] } : {}),
    });
    const task = tasks.get(rpc.params?.id);
    switch (rpc.method) {
      case "message/send": {
        const text = (rpc.params?.message?.parts ?? []).map((p) => p.text).join("\n");
        const t = { id: randomUUID(), contextId: randomUUID(), state: "submitted", text, polls: 0 };
        tasks.set(t.id, t);
        return reply(view(t));
      }
      case "tasks/get":
        if (!task) return send(200, { jsonrpc: "2.0", id: rpc.id, error: { code: -32001, message: "Task not found" } });
        task.polls += 1;
        if (task.state !== "canceled") task.state = task.polls <= workingPolls ? "working" : "completed";
        return reply(view(task));
      case "tasks/cancel":
        if (task) task.state = "canceled";
        return reply(task ? view(task) : null);
      default:
        return send(200, { jsonrpc: "2.0", id: rpc.id, error: { code: -32601, message: `Method not found: ${rpc.method}` } });
    }
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${server.address().port}`;
  return {
    url: base,
    cardUrl: `${base}/.well-known/agent-card.json`,
    close: () =>
      new Promise((ok) => {
        for (const s of sockets) s.destroy();
        server.close(() => ok());
      }),
  };
}
