// The live timeline of one run, built from the events the package reports
// (`execute(…, {onEvent})`, always in the A2A 0.3 shape): the task states as
// they happen (with their time and where they came from), status messages,
// and the answer text as artifact chunks arrive. No DOM here: app.js renders
// what `observe` builds, and tests/events.test.mjs feeds it fixtures.

/** How a call follows its task (`describeCard(…).follow`), in words. */
export const FOLLOW = {
  stream: "streams events (SSE)",
  block: "one blocking send",
  poll: "polls GetTask",
};

/** The dialects, as the UI names them (the package says why: `dialectReason`). */
export const DIALECTS = { "1.0": "A2A 1.0", "0.3": "A2A 0.3", toolnexus: "toolnexus" };

/** The states a task does not leave (or waits in for the caller). */
export const SETTLED = new Set(["completed", "failed", "canceled", "rejected", "input-required", "auth-required"]);

/** The text parts of `parts` joined by "\n" (how the package joins them). */
export function textOf(parts) {
  return (Array.isArray(parts) ? parts : [])
    .filter((p) => p && typeof p.text === "string")
    .map((p) => p.text)
    .join("\n");
}

function texts(parts) {
  return (Array.isArray(parts) ? parts : []).filter((p) => p && typeof p.text === "string").map((p) => p.text);
}

/**
 * A new run that follows its task by `follow` ("stream" | "block" | "poll",
 * or null when the card could not be read).
 */
export function newRun(follow) {
  return {
    follow: follow ?? null,
    events: 0,
    /** [{kind: "state", state, at, via, message} | {kind: "artifact", id, chunks, chars, at, lastAt, done} | {kind: "message", at, via, text}] */
    steps: [],
    /** artifactId -> [text parts], in arrival order */
    artifacts: new Map(),
    /** the last agent message's text (a direct answer), when there is no artifact */
    answer: null,
    /** [{at, text}]: one line per event */
    log: [],
    lastState: null,
    lastMessage: null,
    lastAt: null,
    taskId: null,
  };
}

/** Where an event came from, judged by its kind and how the call follows the task. */
export function sourceOf(run, event) {
  const kind = event?.kind;
  if (kind === "status-update" || kind === "artifact-update") return "stream event";
  const first = run.events === 0;
  if (run.follow === "stream") return first ? "stream event" : kind === "task" ? "resubscribe or poll" : "stream event";
  if (kind === "message") return "answer";
  return first ? "answer" : "poll";
}

function setArtifact(run, artifact, append) {
  const id = typeof artifact?.artifactId === "string" ? artifact.artifactId : "";
  const parts = texts(artifact?.parts);
  const had = run.artifacts.get(id);
  run.artifacts.set(id, append && had ? [...had, ...parts] : parts);
  return { id, parts };
}

function addState(run, state, message, at, via) {
  if (typeof state !== "string" || !state) return;
  const text = message ? textOf(message.parts) : "";
  if (state === run.lastState && (!text || text === run.lastMessage)) return;
  run.steps.push({ kind: "state", state, at, via, message: text || null });
  run.lastState = state;
  if (text) run.lastMessage = text;
}

function chars(n) {
  return `${n} char${n === 1 ? "" : "s"}`;
}

/**
 * Adds one event (seen `at` ms after the run started) to `run`: a state row
 * when the state or the status message changed, an artifact row per artifact
 * (its chunks counted), the answer text, and a log line. Unknown events only
 * get a log line.
 */
export function observe(run, event, at) {
  const via = sourceOf(run, event);
  run.lastAt = at;
  const kind = event?.kind;
  if (kind === "task") {
    if (typeof event.id === "string") run.taskId = event.id;
    for (const a of Array.isArray(event.artifacts) ? event.artifacts : []) setArtifact(run, a, false);
    addState(run, event.status?.state, event.status?.message, at, via);
    const n = Array.isArray(event.artifacts) ? event.artifacts.length : 0;
    run.log.push({ at, text: `task ${event.status?.state ?? "?"} (${via})${n ? `, ${n} artifact${n === 1 ? "" : "s"}` : ""}` });
  } else if (kind === "status-update") {
    if (typeof event.taskId === "string") run.taskId = event.taskId;
    addState(run, event.status?.state, event.status?.message, at, via);
    const text = event.status?.message ? textOf(event.status.message.parts) : "";
    run.log.push({ at, text: `status-update ${event.status?.state ?? "?"}${event.final ? " (final)" : ""}${text ? `: ${text}` : ""}` });
  } else if (kind === "artifact-update") {
    if (typeof event.taskId === "string") run.taskId = event.taskId;
    const { id, parts } = setArtifact(run, event.artifact, Boolean(event.append));
    const size = parts.reduce((n, p) => n + p.length, 0);
    let step = run.steps.find((s) => s.kind === "artifact" && s.id === id);
    if (!step || !event.append) {
      if (step) step.replaced = true;
      step = { kind: "artifact", id, chunks: 0, chars: 0, at, lastAt: at, done: false };
      run.steps.push(step);
    }
    step.chunks += 1;
    step.chars = (run.artifacts.get(id) ?? []).reduce((n, p) => n + p.length, 0);
    step.lastAt = at;
    step.done = Boolean(event.lastChunk);
    run.log.push({ at, text: `artifact-update ${event.append ? "append" : "new"} ${chars(size)}${event.lastChunk ? " (last chunk)" : ""}` });
  } else if (kind === "message") {
    const text = textOf(event.parts);
    if (event.role !== "user") {
      run.answer = text;
      run.steps.push({ kind: "message", at, via, text });
    }
    run.log.push({ at, text: `message from the ${event.role === "user" ? "user" : "agent"} (${via}): ${chars(text.length)}` });
  } else {
    run.log.push({ at, text: `event ${JSON.stringify(kind ?? null)}` });
  }
  run.events += 1;
  return run;
}

/** The answer text so far: every artifact's parts joined by "\n", else the agent's message. */
export function streamedText(run) {
  const parts = [...run.artifacts.values()].flat();
  if (parts.length) return parts.join("\n");
  return run.answer ?? "";
}

/** The artifact rows that are still receiving chunks. */
export function streaming(run) {
  return run.steps.some((s) => s.kind === "artifact" && !s.done && !s.replaced);
}
