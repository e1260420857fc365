// Official @a2a-js/sdk A2A client for interop tests.
//
// Usage:  node js/client.mjs CARD_URL TEXT [--legacy|--v03] [--non-blocking]
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

import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
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

async function run(cardUrl, text, legacy, nonBlocking) {
  const legacyCompat = legacy ? { enabled: true } : undefined;
  const resolver = new DefaultAgentCardResolver({ legacyCompat });
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      cardResolver: resolver,
      transports: [new JsonRpcTransportFactory({ legacyCompat })],
      preferredTransports: ['JSONRPC'],
    })
  );

  let client;
  if (!legacy) {
    // Empty path = fetch CARD_URL exactly (see ClientFactory.createFromUrl docs).
    client = await factory.createFromUrl(cardUrl, '');
  } else {
    const card = await resolver.resolve(cardUrl, '');
    const ifaces = card.supportedInterfaces ?? [];
    const isLegacy = (v) => typeof v === 'string' && /^0\.(3|[4-9])/.test(v);
    let legacyIfaces = ifaces.filter(
      (i) => i.protocolBinding?.toUpperCase() === 'JSONRPC' && isLegacy(i.protocolVersion)
    );
    if (!legacyIfaces.length) {
      legacyIfaces = ifaces
        .filter((i) => i.protocolBinding?.toUpperCase() === 'JSONRPC')
        .map((i) => ({ ...i, protocolVersion: '0.3' }));
    }
    client = await factory.createFromAgentCard({ ...card, supportedInterfaces: legacyIfaces });
  }

  const opts = () => ({ signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
  const result = await client.sendMessage(
    {
      tenant: '',
      message: {
        messageId: randomUUID(),
        contextId: '',
        taskId: '',
        role: Role.ROLE_USER,
        parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
      configuration: nonBlocking
        ? {
            acceptedOutputModes: [],
            taskPushNotificationConfig: undefined,
            historyLength: undefined,
            returnImmediately: true,
          }
        : undefined,
      metadata: undefined,
    },
    opts()
  );

  if (result && 'messageId' in result) {
    console.log(JSON.stringify({ state: 'message', text: partsText(result.parts).join('\n') }));
    return 0;
  }
  let task = result;
  if (!task || !task.id) throw new Error(`server returned neither a task nor a message: ${JSON.stringify(result)}`);

  const deadline = Date.now() + POLL_BUDGET_MS;
  while (!FINAL_STATES.has(task.status?.state)) {
    if (Date.now() >= deadline) {
      console.log(JSON.stringify({ state: stateName(task.status?.state), text: taskText(task) }));
      process.stderr.write(
        `error: task ${task.id} still ${stateName(task.status?.state)} after ${POLL_BUDGET_MS / 1000}s of polling\n`
      );
      return 1;
    }
    await sleep(POLL_INTERVAL_MS);
    task = await client.getTask({ tenant: '', id: task.id, historyLength: undefined }, opts());
  }
  console.log(JSON.stringify({ state: stateName(task.status.state), text: taskText(task) }));
  return task.status.state === TaskState.TASK_STATE_COMPLETED ? 0 : 2;
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      legacy: { type: 'boolean', default: false },
      v03: { type: 'boolean', default: false },
      'non-blocking': { type: 'boolean', default: false },
    },
  });
  if (parsed.positionals.length !== 2) throw new Error('expected CARD_URL and TEXT');
} catch (e) {
  process.stderr.write(`usage: node client.mjs CARD_URL TEXT [--legacy|--v03] [--non-blocking]\n${e.message}\n`);
  process.exit(1);
}
const [cardUrl, text] = parsed.positionals;
let rc;
try {
  rc = await run(cardUrl, text, parsed.values.legacy || parsed.values.v03, parsed.values['non-blocking']);
} catch (e) {
  const code = e?.code !== undefined ? ` (code ${e.code})` : '';
  process.stderr.write(`error: ${e?.name ?? 'Error'}: ${e?.message ?? e}${code}\n`);
  rc = 1;
}
process.exitCode = rc;
