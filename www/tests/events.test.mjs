// The page's live timeline (src/timeline.js) built from the events the
// package reports (`execute(…, {onEvent})`, A2A 0.3 shape): a stream, a
// blocking answer, polls, a direct message. Runs in Node, no browser.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newRun, observe, sourceOf, streamedText, streaming, textOf } from "../src/timeline.js";

const ids = { taskId: "t1", contextId: "c1" };
const task = (state, extra = {}) => ({ kind: "task", id: "t1", contextId: "c1", status: { state }, ...extra });
const status = (state, text, final = false) => ({
  kind: "status-update",
  ...ids,
  status: { state, ...(text ? { message: { kind: "message", role: "agent", messageId: "m", parts: [{ kind: "text", text }] } } : {}) },
  final,
});
const chunk = (text, append, lastChunk = false, artifactId = "a1") => ({
  kind: "artifact-update",
  ...ids,
  artifact: { artifactId, parts: [{ kind: "text", text }] },
  append,
  lastChunk,
});
const states = (run) => run.steps.filter((s) => s.kind === "state").map((s) => [s.state, s.via, s.message]);

test("a stream: states with their source and messages, chunks appended to one artifact", () => {
  const run = newRun("stream");
  observe(run, task("submitted"), 5);
  observe(run, status("working"), 10);
  observe(run, status("working", "calling tool search"), 20);
  observe(run, chunk("chunk 0", false), 110);
  assert.equal(streamedText(run), "chunk 0");
  assert.equal(streaming(run), true);
  observe(run, chunk("chunk 1", true), 210);
  observe(run, chunk("chunk 2", true, true), 310);
  assert.equal(streamedText(run), "chunk 0\nchunk 1\nchunk 2");
  assert.equal(streaming(run), false);
  observe(run, status("completed", null, true), 320);
  assert.deepEqual(states(run), [
    ["submitted", "stream event", null],
    ["working", "stream event", null],
    ["working", "stream event", "calling tool search"],
    ["completed", "stream event", null],
  ]);
  const art = run.steps.filter((s) => s.kind === "artifact");
  assert.equal(art.length, 1);
  assert.deepEqual([art[0].chunks, art[0].chars, art[0].at, art[0].lastAt, art[0].done], [3, 21, 110, 310, true]);
  assert.equal(run.events, 7);
  assert.equal(run.log.length, 7);
  assert.equal(run.taskId, "t1");
  assert.match(run.log[4].text, /artifact-update append 7 chars/);
  assert.match(run.log[6].text, /status-update completed \(final\)/);
});

test("an artifact-update without append replaces that artifact; other artifacts are kept", () => {
  const run = newRun("stream");
  observe(run, chunk("draft", false), 1);
  observe(run, chunk("other", false, true, "a2"), 2);
  observe(run, chunk("final", false, true), 3);
  assert.equal(streamedText(run), "final\nother");
});

test("a blocking answer is one task event from the answer; polls after it are polls", () => {
  const run = newRun("block");
  assert.equal(sourceOf(run, task("submitted")), "answer");
  observe(run, task("submitted"), 4);
  observe(run, task("working"), 40);
  observe(run, task("completed", { artifacts: [{ artifactId: "a", parts: [{ kind: "text", text: "echo: hi" }] }] }), 90);
  assert.deepEqual(states(run), [
    ["submitted", "answer", null],
    ["working", "poll", null],
    ["completed", "poll", null],
  ]);
  assert.equal(streamedText(run), "echo: hi");
  assert.equal(run.steps.some((s) => s.kind === "artifact"), false, "a task's artifacts are not stream chunks");
});

test("a repeated state without a new message adds no row; a direct message is the answer", () => {
  const run = newRun("poll");
  observe(run, task("working"), 1);
  observe(run, task("working"), 2);
  assert.equal(states(run).length, 1);
  assert.equal(run.log.length, 2);
  observe(run, { kind: "message", role: "agent", messageId: "m1", parts: [{ kind: "text", text: "hi" }, { kind: "text", text: "there" }] }, 3);
  assert.equal(streamedText(run), "hi\nthere");
  assert.equal(run.steps.at(-1).kind, "message");
  assert.equal(run.steps.at(-1).via, "answer");
});

test("odd input is logged, never thrown", () => {
  const run = newRun(null);
  observe(run, { kind: "surprise" }, 1);
  observe(run, { kind: "status-update", status: null }, 2);
  observe(run, { kind: "artifact-update", artifact: null, append: true }, 3);
  assert.equal(run.events, 3);
  assert.equal(textOf([{ kind: "text", text: "a" }, { kind: "data" }, null, { text: "b" }]), "a\nb");
  assert.equal(states(run).length, 0);
});
