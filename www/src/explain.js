// Turning a failure into what happened and what to do about it.
//
// The package gives every error a `kind` ("transport", "status", "malformed",
// "rpc", "misuse"). A browser hides why a fetch failed, so a "transport"
// failure is told apart with a second request in `no-cors` mode: if that one
// gets an (opaque) answer, the agent is up but sends no CORS headers.

/** Escapes text for HTML. */
export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** Whether anything answers `url` at all, ignoring CORS (bounded by `ms`). */
export async function answersWithoutCors(url, ms = 5000) {
  try {
    await fetch(url, { mode: "no-cors", cache: "no-store", credentials: "omit", signal: AbortSignal.timeout(ms) });
    return true;
  } catch {
    return false;
  }
}

/**
 * Explains a failure to resolve the agent at `cardUrl`.
 * `failure`: {kind, message, status?}; `peek`: what this page's own GET of
 * the card saw ({status, contentType, snippet}) when it got an answer.
 * Returns {title, text (HTML), fix (HTML)}.
 */
export async function explainCardFailure(failure, cardUrl, peek) {
  const kind = failure.kind ?? "transport";
  const message = failure.message ?? String(failure);
  const host = esc(hostOf(cardUrl));
  if (kind === "misuse") {
    return {
      title: "Not a usable agent",
      text: `The package refused the agent descriptor: ${esc(message)}`,
      fix: "Give an absolute <code>http://</code> or <code>https://</code> Agent Card URL.",
    };
  }
  if (kind === "transport" && /timed out/i.test(message)) {
    return {
      title: "Timed out",
      text: `<strong>${host}</strong> did not answer the Agent Card request in time.`,
      fix: "Check that the agent is up and not overloaded, or raise the timeout under <em>Options</em> (a config entry has its own <code>timeout</code>).",
    };
  }
  if (kind === "transport") {
    if (location.protocol === "https:" && /^http:/i.test(cardUrl)) {
      return {
        title: "Blocked: an http:// agent from an https:// page",
        text: "Browsers block plain-HTTP requests from secure pages (mixed content).",
        fix: "Serve the agent over HTTPS, or open this page over http:// (for example from <code>toolnexus serve --ui</code>).",
      };
    }
    if (await answersWithoutCors(cardUrl)) {
      return {
        title: "The agent does not allow this page (CORS)",
        text: `<strong>${host}</strong> answered, but without an <code>Access-Control-Allow-Origin</code> header that lets <strong>${esc(location.origin)}</strong> read it, so the browser hid the answer.`,
        fix: `let the agent allow this page's origin:<ul>
          <li><code>toolnexus serve</code> sends no CORS headers unless started with <code>--cors-origin ${esc(location.origin)}</code> (repeatable, one origin each).</li>
          <li>An <code>@a2a-js/sdk</code> (Express) agent: <code>app.use(cors())</code> from the <code>cors</code> package.</li>
          <li>A Python <code>a2a-sdk</code> (Starlette) agent: add Starlette's <code>CORSMiddleware</code>.</li>
          <li>Or open this page from the agent's own origin: <code>toolnexus serve --ui www/dist</code>.</li></ul>`,
      };
    }
    return {
      title: "Unreachable",
      text: `Nothing answered at <strong>${host}</strong>: the agent is not running, the address or port is wrong, or something in between blocks it.`,
      fix: "Start the agent (for example <code>toolnexus serve --skills examples/skills</code>) and check the URL.",
    };
  }
  if (kind === "status") {
    const status = failure.status ?? peek?.status;
    return {
      title: `HTTP ${status ?? "error"} instead of a card`,
      text: `${host} answered ${status ? `<code>${esc(status)}</code>` : "an error"} for this URL.`,
      fix: "Is this the Agent Card URL? Cards live at <code>/.well-known/agent-card.json</code> (older agents: <code>/.well-known/agent.json</code>); a 401/403 needs a header (under <em>Options</em>, or <code>headers</code> in a config entry).",
    };
  }
  if (kind === "malformed") {
    const saw = peek?.contentType
      ? ` It sent <code>${esc(peek.contentType)}</code>${peek.snippet ? `: <code class="snippet">${esc(peek.snippet)}</code>` : ""}.`
      : "";
    return {
      title: "Not an Agent Card",
      text: `The URL answered, but not with an Agent Card (a JSON object with a string <code>name</code>).${saw}`,
      fix: "Point at the card itself: <code>https://host/.well-known/agent-card.json</code>, not the agent's home page or its JSON-RPC endpoint.",
    };
  }
  return { title: `Failed (${esc(kind)})`, text: esc(message), fix: "" };
}

/**
 * Explains an error result of a run; `null` when the output says enough.
 * `follow`: how the call followed the task ("stream" | "block" | "poll").
 */
export function explainRunError(result, timeoutMs, follow) {
  const state = result?.metadata?.state;
  const output = String(result?.output ?? "");
  if (/timed out after/i.test(output)) {
    return `The task did not settle within the tool's timeout (${esc(timeoutMs ?? "?")} ms); the agent may still be working on it. Raise the timeout under <em>Options</em> and connect again, or ask for less.`;
  }
  if (state === "canceled") {
    const stopped = follow === "stream" ? "stopped reading the stream" : follow === "block" ? "stopped waiting for the answer" : "stopped polling";
    return result?.metadata?.taskId
      ? `The run was canceled: the page ${stopped} and asked the agent to cancel the task (CancelTask, best effort).`
      : `The run was canceled: the page ${stopped}. The agent had not said the task's id yet, so it could not be asked to cancel it.`;
  }
  if (state === "input-required" || state === "auth-required") {
    return `The agent needs something before it can go on (${esc(state)}); its question is above.`;
  }
  if (state === "failed") return "The agent reported the task as failed; its message is above.";
  return null;
}
