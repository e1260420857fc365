// Official @a2a-js/sdk A2A client for interop tests.
//
// Usage:  node js/client.mjs CARD_URL TEXT [--legacy|--v03] [--non-blocking|--stream] [--answer ANSWER]
//                            [--list] [--push URL] [--api-key-env NAME | --bearer-env NAME]
//
//   CARD_URL   full URL of the agent card,
//              e.g. http://127.0.0.1:P/.well-known/agent-card.json
//   --legacy / --v03
//              use the SDK's v0.3 compat layer: DefaultAgentCardResolver and
//              JsonRpcTransportFactory with legacyCompat enabled, and the card's
//              JSONRPC interface forced to protocolVersion 0.3, so the SDK
//              instantiates LegacyJsonRpcTransport (message/send, tasks/get).
//   --non-blocking
//              send with configuration.returnImmediately=true (0.3: blocking=false)
//              and rely on GetTask polling.
//
// Sends one non-streaming message, polls GetTask (<= 10 s) while the task is not
// in a final state, prints one JSON line {"state": "...", "text": "..."}.
// state: completed | failed | canceled | rejected | input-required |
//        auth-required | submitted | working | unknown | message
// text:  artifact text parts joined with "\n", else the last agent message
//        text (task history), else the status message text.
// Exit: 0 completed (or a Message reply), 2 other final state, 1 error/timeout.
//
// --stream (not with --non-blocking)
//   Uses the SDK's streaming path instead: client.sendMessageStream(), i.e.
//   SendStreamingMessage (1.0) or, with --legacy, message/stream (0.3), and
//   records every SSE event. (If the card says capabilities.streaming=false the
//   SDK silently does a blocking SendMessage and yields one `task` event; this
//   client then warns on stderr.) Events are folded into a task locally (status
//   replaced, artifact chunks appended by artifactId, as the servers do). The
//   whole stream is bounded by the 30 s call timeout. If it ends while the task
//   is not final, GetTask polling follows as in the default mode (`events` still
//   shows only what the stream delivered). Output is the same single JSON line
//   with one more key, `events`, in arrival order:
//     {"state":"completed","text":"echo: sleep 1000","events":[
//       {"kind":"task","state":"submitted","t_ms":4.1,"taskId":"…","timestamp":"2026-…Z"},
//       {"kind":"status-update","state":"working","t_ms":5,"taskId":"…","timestamp":"2026-…Z"},
//       {"kind":"artifact-update","state":null,"t_ms":1006.2,"taskId":"…",
//        "artifactId":"…","append":false,"lastChunk":true,"text":"echo: sleep 1000"},
//       {"kind":"status-update","state":"completed","t_ms":1006.9,"taskId":"…","timestamp":"2026-…Z"}]}
//   kind: task | status-update | artifact-update | message. state: as above for
//   task / status-update, null for artifact-update and message. t_ms: ms since
//   the send started (1 decimal). timestamp: the status timestamp string or null.
//   status-update with a status message and message events also carry "text";
//   artifact-update carries artifactId / append / lastChunk / text (its text parts
//   joined with "\n"). Same keys and order as py_client.py --stream.
//
// --drop-after N [--resubscribe CARD_URL_B]   (with --stream)
//   Reads the first N events of the stream, drops the connection (leaves the
//   SDK's stream), then calls the SDK's resubscribeTask (SubscribeToTask) for the
//   task at CARD_URL_B (another replica; default CARD_URL) and records its events
//   too, after a {"kind":"dropped","t_ms":…} marker. Same as py_client.py.
//
// --rest
//   Use the SDK's HTTP+JSON transport (RestTransportFactory, preferredTransports
//   ['HTTP+JSON']); with --legacy its v0.3 REST transport (the /v1 routes).
//
// --cancel
//   Then cancelTask the finished task and add "cancel": the SDK error name (a
//   finished task is not cancelable: TaskNotCancelableError).
//
// --answer ANSWER
//   When the task stops in input-required or auth-required, answer it: one more
//   message with ANSWER that names the task (taskId) and its contextId, sent and
//   followed the same way. The output then describes the task after the answer,
//   with two more keys: "asked" (the question: the status message text the task
//   stopped with) and "sameTask" (whether the answer continued the same task id).
//
// --api-key-env NAME / --bearer-env NAME
//   Authenticate with the SDK's own plumbing: an AuthenticationHandler wrapped
//   around fetch by createAuthenticatingFetchWithRetry and given to the
//   transport (fetchImpl). The SDK 1.3.0 handler does not read the card, so this
//   one does: for the card's securityRequirements, in order, the first scheme of
//   the matching kind places the value of env NAME (an apiKey scheme with
//   location "header": that header; http bearer, oauth2, openIdConnect:
//   Authorization: Bearer). It never retries (shouldRetryWithHeaders answers
//   undefined), so a refusal shows as it is. The card is fetched without
//   credentials.
//
// On an error the stderr line is `error: NAME: MESSAGE`, followed, when the
// transport got a non-2xx answer, by ` (http STATUS, www-authenticate: ...)`
// (the SDK's own error drops the status when the body is a JSON-RPC error).

import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

const POLL_BUDGET_MS = 10_000;
const POLL_INTERVAL_MS = 200;
const CALL_TIMEOUT_MS = 30_000;

const FINAL_STATES = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);

function stateName(state) {
  const name = TaskState[state];
  if (!name || name === 'TASK_STATE_UNSPECIFIED' || name === 'UNRECOGNIZED') return 'unknown';
  return name.replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');
}

const partsText = (parts) =>
  (parts ?? []).filter((p) => p?.content?.$case === 'text').map((p) => p.content.value);

function taskText(task) {
  const texts = (task.artifacts ?? []).flatMap((a) => partsText(a.parts));
  if (texts.length) return texts.join('\n');
  for (const msg of [...(task.history ?? [])].reverse()) {
    if (msg.role === Role.ROLE_AGENT) {
      const t = partsText(msg.parts);
      if (t.length) return t.join('\n');
    }
  }
  return partsText(task.status?.message?.parts).join('\n');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One machine-readable line item for a StreamResponse (--stream). */
function eventRecord(event, tMs) {
  const t_ms = Math.round(tMs * 10) / 10;
  const p = event?.payload;
  switch (p?.$case) {
    case 'task':
      return {
        kind: 'task',
        state: stateName(p.value.status?.state),
        t_ms,
        taskId: p.value.id,
        timestamp: p.value.status?.timestamp ?? null,
      };
    case 'statusUpdate': {
      const rec = {
        kind: 'status-update',
        state: stateName(p.value.status?.state),
        t_ms,
        taskId: p.value.taskId,
        timestamp: p.value.status?.timestamp ?? null,
      };
      if (p.value.status?.message) rec.text = partsText(p.value.status.message.parts).join('\n');
      return rec;
    }
    case 'artifactUpdate':
      return {
        kind: 'artifact-update',
        state: null,
        t_ms,
        taskId: p.value.taskId,
        artifactId: p.value.artifact?.artifactId ?? '',
        append: !!p.value.append,
        lastChunk: !!p.value.lastChunk,
        text: partsText(p.value.artifact?.parts).join('\n'),
      };
    case 'message':
      return { kind: 'message', state: null, t_ms, text: partsText(p.value.parts).join('\n') };
    default:
      return { kind: String(p?.$case), state: null, t_ms };
  }
}

/** Applies one stream event to the locally aggregated task. */
function foldEvent(task, event) {
  const p = event?.payload;
  if (p?.$case === 'task') return structuredClone(p.value);
  if (p?.$case !== 'statusUpdate' && p?.$case !== 'artifactUpdate') return task;
  const ev = p.value;
  const t = task ?? { id: ev.taskId, contextId: ev.contextId, status: undefined, artifacts: [], history: [] };
  if (p.$case === 'statusUpdate') {
    t.status = structuredClone(ev.status);
    return t;
  }
  if (!ev.artifact) return t;
  t.artifacts = t.artifacts ?? [];
  const existing = t.artifacts.find((a) => a.artifactId === ev.artifact.artifactId);
  if (existing && ev.append) existing.parts = [...(existing.parts ?? []), ...structuredClone(ev.artifact.parts ?? [])];
  else if (existing) Object.assign(existing, structuredClone(ev.artifact));
  else t.artifacts.push(structuredClone(ev.artifact));
  return t;
}

// The last HTTP refusal the transport saw: the SDK turns a non-2xx answer
// whose body is a JSON-RPC error into that error, dropping the status, so the
// error line adds it (and the challenge) from here.
const refusal = { status: 0, challenge: null };
async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  if (!response.ok) {
    refusal.status = response.status;
    refusal.challenge = response.headers.get('www-authenticate');
  }
  return response;
}

const BEARER_KINDS = new Set(['httpAuthSecurityScheme', 'oauth2SecurityScheme', 'openIdConnectSecurityScheme']);

/**
 * {kind, value} of a card's security scheme. The resolver hands the card's
 * JSON over as it came (not the `{scheme: {$case, value}}` shape its types
 * declare), so the 1.0 JSON shape (`{"apiKeySecurityScheme": {...}}`) and the
 * typed one are both read.
 */
function schemeOf(s) {
  if (!s) return undefined;
  if (s.scheme?.$case) return { kind: s.scheme.$case, value: s.scheme.value };
  for (const kind of ['apiKeySecurityScheme', ...BEARER_KINDS]) {
    if (s[kind]) return { kind, value: s[kind] };
  }
  return undefined;
}

/**
 * An AuthenticationHandler placing one credential per the card's schemes
 * (`cardRef.card`, set once the card is resolved).
 */
function envAuthHandler(cardRef, apiKeyEnv, bearerEnv) {
  const apiKey = apiKeyEnv ? process.env[apiKeyEnv] ?? '' : '';
  const bearer = bearerEnv ? process.env[bearerEnv] ?? '' : '';
  return {
    headers: async () => {
      const card = cardRef.card;
      for (const requirement of card?.securityRequirements ?? []) {
        for (const name of Object.keys(requirement?.schemes ?? {})) {
          const scheme = schemeOf(card.securitySchemes?.[name]);
          if (scheme?.kind === 'apiKeySecurityScheme' && apiKey) {
            if (scheme.value.location?.toLowerCase() === 'header') return { [scheme.value.name]: apiKey };
          } else if (BEARER_KINDS.has(scheme?.kind) && bearer) {
            return { Authorization: `Bearer ${bearer}` };
          }
        }
      }
      return {};
    },
    shouldRetryWithHeaders: async () => undefined,
  };
}

async function run(cardUrl, text, legacy, nonBlocking, stream = false, answer = undefined, listAfter = false, pushUrl = undefined, rest = false, cancel = false, apiKeyEnv = undefined, bearerEnv = undefined, dropAfter = undefined, resubscribe = undefined) {
  const legacyCompat = legacy ? { enabled: true } : undefined;
  const resolver = new DefaultAgentCardResolver({ legacyCompat });
  const auth = apiKeyEnv || bearerEnv;
  const cardRef = { card: undefined };
  const binding = rest ? 'HTTP+JSON' : 'JSONRPC';
  const fetchImpl = auth
    ? createAuthenticatingFetchWithRetry(recordingFetch, envAuthHandler(cardRef, apiKeyEnv, bearerEnv))
    : recordingFetch;
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      cardResolver: resolver,
      transports: [rest ? new RestTransportFactory({ legacyCompat, fetchImpl }) : new JsonRpcTransportFactory({ legacyCompat, fetchImpl })],
      preferredTransports: [binding],
    })
  );

  let client;
  if (auth && !legacy) {
    cardRef.card = await resolver.resolve(cardUrl, '');
    client = await factory.createFromAgentCard(cardRef.card);
  } else if (!legacy) {
    // Empty path = fetch CARD_URL exactly (see ClientFactory.createFromUrl docs).
    client = await factory.createFromUrl(cardUrl, '');
  } else {
    const card = await resolver.resolve(cardUrl, '');
    cardRef.card = card;
    const ifaces = card.supportedInterfaces ?? [];
    const isLegacy = (v) => typeof v === 'string' && /^0\.(3|[4-9])/.test(v);
    let legacyIfaces = ifaces.filter(
      (i) => i.protocolBinding?.toUpperCase() === binding && isLegacy(i.protocolVersion)
    );
    if (!legacyIfaces.length) {
      legacyIfaces = ifaces
        .filter((i) => i.protocolBinding?.toUpperCase() === binding)
        .map((i) => ({ ...i, protocolVersion: '0.3' }));
    }
    client = await factory.createFromAgentCard({ ...card, supportedInterfaces: legacyIfaces });
  }

  const opts = () => ({ signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
  const events = stream ? [] : undefined;
  let asked = {};
  const emit = (state, resultText) => {
    const out = events ? { state, text: resultText, events } : { state, text: resultText };
    if (asked) Object.assign(out, asked);
    console.log(JSON.stringify(out));
  };
  let task = await turn(text, '', '');
  if (task === undefined) return 0;
  const waiting = new Set([TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED]);
  if (answer !== undefined && waiting.has(task.status?.state)) {
    const question = partsText(task.status?.message?.parts ?? []).join('\n');
    const first = task.id;
    task = await turn(answer, task.id, task.contextId);
    if (task === undefined) return 0;
    Object.assign(asked, { asked: question, sameTask: task.id === first });
  }
  if (pushUrl) {
    // The four config methods on the finished task.
    const made = await client.createTaskPushNotificationConfig(
      { tenant: '', id: '', taskId: task.id, url: `${pushUrl}/2`, token: '', authentication: undefined },
      opts()
    );
    const got = await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: made.id }, opts());
    const configs = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }, opts());
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: made.id }, opts());
    const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }, opts());
    asked.push = { taskId: task.id, created: made.id, got: got.url, listed: configs.configs.length, afterDelete: after.configs.length };
  }
  if (cancel) {
    try {
      await client.cancelTask({ tenant: '', id: task.id, metadata: undefined }, opts());
      asked.cancel = 'canceled';
    } catch (e) {
      asked.cancel = e?.constructor?.name ?? 'Error';
    }
  }
  if (listAfter) {
    const page = await client.listTasks(
      { tenant: '', contextId: task.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: undefined,
        pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: true },
      opts()
    );
    asked.listed = page.tasks.map((t) => ({ id: t.id, state: stateName(t.status?.state), text: taskText(t) }));
    asked.totalSize = page.totalSize;
  }
  emit(stateName(task.status.state), taskText(task));
  return task.status.state === TaskState.TASK_STATE_COMPLETED ? 0 : 2;

  // One message (in the task and context named, if any), followed until the
  // task settles; `undefined` when the agent answered with a message (printed).
  async function turn(text, taskId, contextId) {
  const request = {
    tenant: '',
    message: {
      messageId: randomUUID(),
      contextId,
      taskId,
      role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration:
      nonBlocking || pushUrl
        ? {
            acceptedOutputModes: [],
            // The webhook rides on the message; the task's states are POSTed to it.
            taskPushNotificationConfig: pushUrl
              ? { tenant: '', id: '', taskId: '', url: pushUrl, token: 'js-token',
                  authentication: { scheme: 'Bearer', credentials: 'js-secret' } }
              : undefined,
            historyLength: undefined,
            returnImmediately: nonBlocking,
          }
        : undefined,
    metadata: undefined,
  };

  let result;
  if (!stream) {
    result = await client.sendMessage(request, opts());
  } else {
    if (!client.agentCard?.capabilities?.streaming) {
      process.stderr.write(
        'warning: card says capabilities.streaming=false; the SDK falls back to a blocking SendMessage\n'
      );
    }
    const t0 = process.hrtime.bigint();
    let folded;
    const since = () => Number(process.hrtime.bigint() - t0) / 1e6;
    for await (const event of client.sendMessageStream(request, opts())) {
      events.push(eventRecord(event, since()));
      if (event?.payload?.$case === 'message') {
        result = event.payload.value;
        break;
      }
      folded = foldEvent(folded, event);
      // Leaving the loop closes the SDK's stream: the connection drops.
      if (dropAfter !== undefined && events.length >= dropAfter) break;
    }
    if (dropAfter !== undefined && !result && folded?.id) {
      events.push({ kind: 'dropped', t_ms: Math.round(since() * 10) / 10 });
      const other = await factory.createFromUrl(resubscribe ?? cardUrl, '');
      for await (const event of other.resubscribeTask({ tenant: '', id: folded.id }, opts())) {
        events.push(eventRecord(event, since()));
        folded = foldEvent(folded, event);
      }
    }
    result = result ?? folded;
  }

  if (result && 'messageId' in result) {
    emit('message', partsText(result.parts).join('\n'));
    return undefined;
  }
  let task = result;
  if (!task || !task.id) throw new Error(`server returned neither a task nor a message: ${JSON.stringify(result)}`);

  const deadline = Date.now() + POLL_BUDGET_MS;
  while (!FINAL_STATES.has(task.status?.state)) {
    if (Date.now() >= deadline) {
      emit(stateName(task.status?.state), taskText(task));
      throw new Error(
        `task ${task.id} still ${stateName(task.status?.state)} after ${POLL_BUDGET_MS / 1000}s of polling`
      );
    }
    await sleep(POLL_INTERVAL_MS);
    task = await client.getTask({ tenant: '', id: task.id, historyLength: undefined }, opts());
  }
  return task;
  }
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      legacy: { type: 'boolean', default: false },
      v03: { type: 'boolean', default: false },
      'non-blocking': { type: 'boolean', default: false },
      stream: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      push: { type: 'string' },
      answer: { type: 'string' },
      rest: { type: 'boolean', default: false },
      cancel: { type: 'boolean', default: false },
      'api-key-env': { type: 'string' },
      'bearer-env': { type: 'string' },
      'drop-after': { type: 'string' },
      resubscribe: { type: 'string' },
    },
  });
  if (parsed.positionals.length !== 2) throw new Error('expected CARD_URL and TEXT');
  if (parsed.values.stream && parsed.values['non-blocking'])
    throw new Error('--stream and --non-blocking are mutually exclusive');
} catch (e) {
  process.stderr.write(
    `usage: node client.mjs CARD_URL TEXT [--legacy|--v03] [--non-blocking|--stream] [--answer ANSWER]\n${e.message}\n`
  );
  process.exit(1);
}
const [cardUrl, text] = parsed.positionals;
let rc;
try {
  rc = await run(
    cardUrl,
    text,
    parsed.values.legacy || parsed.values.v03,
    parsed.values['non-blocking'],
    parsed.values.stream,
    parsed.values.answer,
    parsed.values.list,
    parsed.values.push,
    parsed.values.rest,
    parsed.values.cancel,
    parsed.values['api-key-env'],
    parsed.values['bearer-env'],
    parsed.values['drop-after'] === undefined ? undefined : Number(parsed.values['drop-after']),
    parsed.values.resubscribe
  );
} catch (e) {
  const code = e?.code !== undefined ? ` (code ${e.code})` : '';
  const http = refusal.status
    ? ` (http ${refusal.status}${refusal.challenge ? `, www-authenticate: ${refusal.challenge}` : ''})`
    : '';
  process.stderr.write(`error: ${e?.name ?? 'Error'}: ${e?.message ?? e}${code}${http}\n`);
  rc = 1;
}
process.exitCode = rc;
