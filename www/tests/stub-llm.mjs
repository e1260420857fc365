// A stub OpenAI-style model on 127.0.0.1 for the end-to-end test: every
// `POST …/chat/completions` is answered with text built from the last user
// message. A task starting with "slow" is answered after `slowMs` (unless
// the connection closes first). A task starting with "tool" first calls the
// `skill` tool (loading the first skill offered), then answers `toolMs` later.

import http from "node:http";

/** Starts the stub; returns {url (the base URL, …/v1), calls, close()}. */
export async function startStubLlm({ slowMs = 10_000, toolMs = 400 } = {}) {
  const calls = [];
  const sockets = new Set();
  const timers = new Set();
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
    }
    let body = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString());
    } catch {}
    const user = [...(body.messages ?? [])].reverse().find((m) => m.role === "user");
    const task = typeof user?.content === "string" ? user.content : JSON.stringify(user?.content ?? "");
    calls.push({ task, at: Date.now() });
    const answer = () => {
      if (res.destroyed) return;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: `stub-${calls.length}`,
          object: "chat.completion",
          model: body.model ?? "stub",
          choices: [
            {
              index: 0,
              finish_reason: "stop",
              message: { role: "assistant", content: `Hello from the stub model! You asked: "${task}"` },
            },
          ],
          usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
        }),
      );
    };
    const skill = (body.tools ?? []).find((t) => t.function?.name === "skill");
    const toolDone = (body.messages ?? []).some((m) => m.role === "tool");
    if (/^\s*tool/i.test(task) && skill && !toolDone) {
      const system = body.messages?.find((m) => m.role === "system")?.content ?? "";
      const name = /^- \*\*(.+?)\*\*: /m.exec(system)?.[1] ?? "hello-world";
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(
        JSON.stringify({
          id: `stub-${calls.length}`,
          object: "chat.completion",
          model: body.model ?? "stub",
          choices: [
            {
              index: 0,
              finish_reason: "tool_calls",
              message: {
                role: "assistant",
                content: null,
                tool_calls: [{ id: "call_1", type: "function", function: { name: "skill", arguments: JSON.stringify({ name }) } }],
              },
            },
          ],
        }),
      );
    }
    if (/^\s*slow/i.test(task) || (toolDone && /^\s*tool/i.test(task))) {
      const ms = toolDone ? toolMs : slowMs;
      const t = setTimeout(() => {
        timers.delete(t);
        answer();
      }, ms);
      timers.add(t);
    } else {
      answer();
    }
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", ok);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/v1`,
    calls,
    close: () =>
      new Promise((ok) => {
        for (const t of timers) clearTimeout(t);
        for (const s of sockets) s.destroy();
        server.close(() => ok());
      }),
  };
}
