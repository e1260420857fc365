// The page's reading of Agent Cards (src/card.js) against the same fixtures
// as toolnexus-core's `AgentCard::endpoint` tests (core/src/card.rs), and the
// timeline's reading of task states in every dialect (src/wire.js).

import { test } from "node:test";
import assert from "node:assert/strict";
import { describeCard, endpointOf } from "../src/card.js";
import { kindOf, stateOf } from "../src/wire.js";

const CARD_URL = "http://127.0.0.1:9/.well-known/agent-card.json";

test("dialect: a bare url is the toolnexus dialect", () => {
  const card = { name: "desk", url: "http://127.0.0.1:9/", protocolVersion: "0.3.0", skills: [] };
  assert.deepEqual(endpointOf(card, CARD_URL), { dialect: "toolnexus", endpoint: "http://127.0.0.1:9/" });
});

test("dialect: preferredTransport marks A2A 0.3", () => {
  const card = { name: "a", url: "http://127.0.0.1:9/rpc", preferredTransport: "JSONRPC", protocolVersion: "0.3.0" };
  assert.deepEqual(endpointOf(card, CARD_URL), { dialect: "0.3", endpoint: "http://127.0.0.1:9/rpc" });
});

test("dialect: a JSONRPC interface of protocol 1.x wins (A2A 1.0), resolved against the card URL", () => {
  const card = {
    name: "a",
    supportedInterfaces: [
      { url: "http://127.0.0.1:9/grpc", protocolBinding: "GRPC", protocolVersion: "1.0" },
      { url: "http://127.0.0.1:9/v03", protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      { url: "/a2a", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
    ],
  };
  assert.deepEqual(endpointOf(card, CARD_URL), { dialect: "1.0", endpoint: "http://127.0.0.1:9/a2a" });
});

test("dialect: the hybrid card toolnexus serves reads as 1.0", () => {
  const card = {
    name: "h",
    url: "http://h/",
    preferredTransport: "JSONRPC",
    supportedInterfaces: [
      { url: "http://h/", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: "http://h/", protocolBinding: "JSONRPC", protocolVersion: "0.3" },
    ],
  };
  assert.equal(endpointOf(card, CARD_URL).dialect, "1.0");
});

test("dialect: only a 0.3 interface (no url) is 0.3; nothing at all falls back to the card's origin", () => {
  const only03 = { name: "x", additionalInterfaces: [{ url: "http://h/rpc", transport: "JSONRPC" }] };
  assert.deepEqual(endpointOf(only03, CARD_URL), { dialect: "0.3", endpoint: "http://h/rpc" });
  assert.deepEqual(endpointOf({ name: "reviewer" }, CARD_URL), { dialect: "toolnexus", endpoint: "http://127.0.0.1:9/" });
});

test("a card needs a string name; mistyped fields are tolerated", () => {
  assert.equal(describeCard({ skills: [] }, CARD_URL), null);
  assert.equal(describeCard("<html>", CARD_URL), null);
  assert.equal(describeCard([], CARD_URL), null);
  const c = describeCard({ name: "n", description: 5, skills: [{ name: "s" }, 7], url: null, provider: { organization: "Acme" } }, CARD_URL);
  assert.equal(c.description, "");
  assert.deepEqual(c.skills.map((s) => s.id), ["s", ""]);
  assert.deepEqual(c.provider, { organization: "Acme", url: undefined });
  assert.equal(c.dialect, "toolnexus");
});

test("task states are read from 0.3, toolnexus and 1.0 answers", () => {
  assert.equal(stateOf({ result: { id: "t", status: { state: "working" } } }), "working");
  assert.equal(stateOf({ result: { task: { id: "t", status: { state: "TASK_STATE_INPUT_REQUIRED" } } } }), "input-required");
  assert.equal(stateOf({ result: { message: { parts: [] } } }), "completed");
  assert.equal(stateOf({ error: { code: -32001, message: "Task not found" } }), null);
  assert.deepEqual(
    ["SendMessage", "message/send", "tasks/get", "GetTask", "CancelTask", "tasks/cancel", "other"].map(kindOf),
    ["send", "send", "get", "get", "cancel", "cancel", null],
  );
});
