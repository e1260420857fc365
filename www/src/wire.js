// Watching the A2A calls the package makes, for the live timeline.
//
// The package reports a task only when it settles ({output, isError,
// metadata: {state, polls, ms}}). To show the states in between, this page
// wraps the global `fetch` (the package looks `fetch` up at every call) and
// reads the JSON-RPC method of each request and the task state in each
// answer. It only observes: requests and answers pass through unchanged.

const SEND = new Set(["SendMessage", "message/send"]);
const GET = new Set(["GetTask", "tasks/get"]);
const CANCEL = new Set(["CancelTask", "tasks/cancel"]);

/** "send" | "get" | "cancel" | null for a JSON-RPC method name. */
export function kindOf(method) {
  if (SEND.has(method)) return "send";
  if (GET.has(method)) return "get";
  if (CANCEL.has(method)) return "cancel";
  return null;
}

/** A task state in any dialect ("TASK_STATE_INPUT_REQUIRED", "input-required") in the 0.3 spelling. */
export function normalizeState(state) {
  if (typeof state !== "string") return null;
  return state.replace(/^TASK_STATE_/, "").toLowerCase().replace(/_/g, "-");
}

/** The task state in a JSON-RPC answer (a bare task, or 1.0's {task}), or null. */
export function stateOf(answer) {
  const result = answer?.result;
  const task = result?.task ?? result;
  if (task?.status?.state) return normalizeState(task.status.state);
  if (result?.message) return "completed"; // A 1.0 agent may answer with a message instead of a task.
  return null;
}

function bodyText(body) {
  if (typeof body === "string") return body;
  if (body instanceof Uint8Array || body instanceof ArrayBuffer) return new TextDecoder().decode(body);
  return null;
}

/** A request header from any `HeadersInit` shape (Headers, [name, value] pairs, a record). */
function headerOf(headers, name) {
  if (!headers) return null;
  if (typeof headers.get === "function") return headers.get(name);
  const pairs = Array.isArray(headers) ? headers : Object.entries(headers);
  const hit = pairs.find((p) => Array.isArray(p) && String(p[0]).toLowerCase() === name);
  return hit ? String(hit[1]) : null;
}

let listener = null;
let installed = false;

/**
 * Wraps `globalThis.fetch` once. While `watch(fn)` is active, `fn` gets
 * `{phase: "request", kind, method, longPoll}`, then `{phase: "answer", kind,
 * method, state, rpcError}` or `{phase: "failed", kind, method, error}`.
 */
export function install() {
  if (installed) return;
  installed = true;
  const original = globalThis.fetch.bind(globalThis);
  globalThis.fetch = async function observedFetch(input, init) {
    const notify = listener;
    const text = notify && String(init?.method ?? "GET").toUpperCase() === "POST" ? bodyText(init?.body) : null;
    let method = null;
    if (text) {
      try {
        method = JSON.parse(text)?.method ?? null;
      } catch {}
    }
    const kind = kindOf(method);
    if (!kind) return original(input, init);
    const emit = (event) => {
      try {
        notify({ kind, method, ...event });
      } catch (e) {
        console.error("timeline listener failed", e);
      }
    };
    emit({ phase: "request", longPoll: /wait=/.test(headerOf(init?.headers, "prefer") ?? "") });
    let response;
    try {
      response = await original(input, init);
    } catch (error) {
      emit({ phase: "failed", error: init?.signal?.aborted ? "aborted" : String(error?.message ?? error) });
      throw error;
    }
    response
      .clone()
      .json()
      .then((answer) => emit({ phase: "answer", state: stateOf(answer), rpcError: answer?.error?.message ?? null }))
      .catch(() => emit({ phase: "answer", state: null, rpcError: null }));
    return response;
  };
}

/** Sends A2A request events to `fn` until the returned function is called. */
export function watch(fn) {
  listener = fn;
  return () => {
    if (listener === fn) listener = null;
  };
}
