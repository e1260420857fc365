// Official @a2a-js/sdk A2A peer server for interop tests.
//
// Usage:  node js/server.mjs --port P [--compat-03 [--card-03]] [--rest-only [--tenant T]] [--no-streaming]
// (--no-streaming: the card says capabilities.streaming false.)
//
// Serves (one Express app on 127.0.0.1:P):
//   GET  /.well-known/agent-card.json   agent card
//   POST /                              JSON-RPC (A2A 1.0; plus 0.3 with --compat-03)
// With --rest-only: HTTP+JSON instead (the SDK's restHandler at the root, also
// under /:tenant; its 0.3 /v1 routes with --compat-03), and a card listing only
// HTTP+JSON interfaces (with `tenant` T when given).
//
// Prints exactly one line `listening on http://127.0.0.1:P` once ready.
// Exits cleanly on SIGTERM / SIGINT.
//
// Agent behaviour (decided by the user text):
//   working, ~150 ms, then
//   "fail..." -> failed, status message (role agent) "deliberate failure: <text>"
//   "slow..." -> stays working 5 s then completes like echo; CancelTask -> canceled
//   "ask..."  -> input-required, status message (role agent) "Which city?"; a message
//              that continues that task (its taskId) completes it with one
//              artifact "booked for <text>"
//   otherwise -> completed, one artifact with one text part "echo: <text>"
// except for two texts that skip the ~150 ms pause (working is published at once):
//   "sleep N" (N = integer ms, 0..600000, e.g. "sleep 2000") -> working, waits N ms
//              (N=0: no wait at all), then completes exactly like echo (artifact
//              "echo: sleep N"); the completed status timestamp is taken when it
//              settles. CancelTask during the wait -> canceled.
//   "chunks N" (N = integer, 0..100) -> working, then N artifact-update events for ONE
//              artifact (name "chunks", one id), 100 ms before each, text "chunk i",
//              append=true for i>0, lastChunk=true on the last; then completed
//              (the stored task ends with one artifact holding N text parts).
//              CancelTask between chunks -> canceled.

import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import express from 'express';

import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';

const HOST = '127.0.0.1';
const WORK_DELAY_MS = 150;
const SLOW_DELAY_MS = 5000;
const CHUNK_DELAY_MS = 100;
const MAX_SLEEP_MS = 600_000;
const MAX_CHUNKS = 100;
const SLEEP_RE = /^sleep (\d+)(?:\s|$)/;
const CHUNKS_RE = /^chunks (\d+)(?:\s|$)/;

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    'compat-03': { type: 'boolean', default: false },
    'rest-only': { type: 'boolean', default: false },
    'card-03': { type: 'boolean', default: false },
    tenant: { type: 'string', default: '' },
    'no-streaming': { type: 'boolean', default: false },
  },
  strict: true,
});
if (!args.port || !/^\d+$/.test(args.port)) {
  process.stderr.write('usage: node server.mjs --port P [--compat-03]\n');
  process.exit(2);
}
const PORT = Number(args.port);
const COMPAT = args['compat-03'];
const REST_ONLY = args['rest-only'];
const TENANT = args.tenant;

const textPart = (text) => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

const now = () => new Date().toISOString();

class PeerExecutor {
  constructor() {
    /** taskId -> function that aborts the pending sleep */
    this.cancelers = new Map();
    this.cancelled = new Set();
  }

  /** Sleep that resolves early (returning false) when the task is cancelled. */
  sleep(taskId, ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.cancelers.delete(taskId);
        resolve(true);
      }, ms);
      this.cancelers.set(taskId, () => {
        clearTimeout(timer);
        this.cancelers.delete(taskId);
        resolve(false);
      });
    });
  }

  cancelTask = async (taskId, _eventBus) => {
    this.cancelled.add(taskId);
    const cancel = this.cancelers.get(taskId);
    if (cancel) cancel();
  };

  async execute(requestContext, eventBus) {
    const { taskId, contextId } = requestContext;
    const userMessage = requestContext.userMessage;
    const text = (userMessage.parts ?? [])
      .filter((p) => p.content?.$case === 'text')
      .map((p) => p.content.value)
      .join('\n');

    const status = (state, message = undefined) =>
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state, timestamp: now(), message },
        metadata: {},
      });

    try {
      // Every turn must start with a Task (or Message) event.
      eventBus.publish(
        AgentEvent.task(
          requestContext.task ?? {
            id: taskId,
            contextId,
            status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined },
            artifacts: [],
            history: [userMessage],
            metadata: {},
          }
        )
      );
      eventBus.publish(status(TaskState.TASK_STATE_WORKING));

      const sleepMatch = SLEEP_RE.exec(text);
      const chunksMatch = CHUNKS_RE.exec(text);
      let ok = true;
      if (sleepMatch) {
        // "sleep N": no 150 ms pause; N = 0 means no timer at all.
        const ms = Math.min(Number(sleepMatch[1]), MAX_SLEEP_MS);
        if (ms > 0) ok = await this.sleep(taskId, ms);
      } else if (chunksMatch) {
        const n = Math.min(Number(chunksMatch[1]), MAX_CHUNKS);
        const artifactId = randomUUID();
        for (let i = 0; i < n && ok; i++) {
          ok = await this.sleep(taskId, CHUNK_DELAY_MS);
          if (!ok || this.cancelled.has(taskId)) break;
          eventBus.publish(
            AgentEvent.artifactUpdate({
              taskId,
              contextId,
              artifact: {
                artifactId,
                name: 'chunks',
                description: '',
                parts: [textPart(`chunk ${i}`)],
                metadata: {},
                extensions: [],
              },
              append: i > 0,
              lastChunk: i === n - 1,
              metadata: {},
            })
          );
        }
        if (ok && !this.cancelled.has(taskId)) {
          eventBus.publish(status(TaskState.TASK_STATE_COMPLETED));
          return;
        }
      } else {
        ok = await this.sleep(taskId, WORK_DELAY_MS);
        if (ok && text.startsWith('slow')) ok = await this.sleep(taskId, SLOW_DELAY_MS);
      }
      if (!ok || this.cancelled.has(taskId)) {
        eventBus.publish(status(TaskState.TASK_STATE_CANCELED));
        return;
      }

      const agentSays = (t) => ({
        role: Role.ROLE_AGENT,
        messageId: randomUUID(),
        taskId,
        contextId,
        parts: [textPart(t)],
        metadata: {},
        extensions: [],
        referenceTaskIds: [],
      });
      if (requestContext.task) {
        // An answer on an existing task (it asked a question): book it.
        eventBus.publish(
          AgentEvent.artifactUpdate({
            taskId,
            contextId,
            artifact: {
              artifactId: randomUUID(),
              name: 'booking',
              description: '',
              parts: [textPart(`booked for ${text}`)],
              metadata: {},
              extensions: [],
            },
            append: false,
            lastChunk: true,
            metadata: {},
          })
        );
        eventBus.publish(status(TaskState.TASK_STATE_COMPLETED));
        return;
      }
      if (text.startsWith('ask')) {
        eventBus.publish(status(TaskState.TASK_STATE_INPUT_REQUIRED, agentSays('Which city?')));
        return;
      }

      if (text.startsWith('fail')) {
        eventBus.publish(
          status(TaskState.TASK_STATE_FAILED, {
            role: Role.ROLE_AGENT,
            messageId: randomUUID(),
            taskId,
            contextId,
            parts: [textPart(`deliberate failure: ${text}`)],
            metadata: {},
            extensions: [],
            referenceTaskIds: [],
          })
        );
        return;
      }

      eventBus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: {
            artifactId: randomUUID(),
            name: 'echo',
            description: '',
            parts: [textPart(`echo: ${text}`)],
            metadata: {},
            extensions: [],
          },
          append: false,
          lastChunk: true,
          metadata: {},
        })
      );
      eventBus.publish(status(TaskState.TASK_STATE_COMPLETED));
    } finally {
      this.cancelled.delete(taskId);
      this.cancelers.delete(taskId);
    }
  }
}

const url = REST_ONLY ? `http://${HOST}:${PORT}` : `http://${HOST}:${PORT}/`;
const BINDING = REST_ONLY ? 'HTTP+JSON' : 'JSONRPC';
const v1Interfaces = [
  { url, protocolBinding: BINDING, tenant: TENANT, protocolVersion: A2A_PROTOCOL_VERSION },
];

const skill = (id, description) => ({
  id,
  name: id,
  description,
  tags: [id],
  examples: [],
  inputModes: [],
  outputModes: [],
  securityRequirements: [],
});

const card = {
  name: 'js-agent',
  description: '@a2a-js/sdk interop peer: echo / fail / slow',
  // With --compat-03 every binding is also advertised at protocolVersion 0.3;
  // the SDK only routes v0.3 traffic to bindings the card declares at 0.3.
  // --card-03: only the 0.3 ones (the 1.0 routes are served all the same).
  supportedInterfaces: COMPAT
    ? duplicateInterfacesForLegacy(v1Interfaces, [BINDING]).filter(
        (i) => !args['card-03'] || i.protocolVersion !== A2A_PROTOCOL_VERSION
      )
    : v1Interfaces,
  provider: { organization: 'interop-tests', url: 'http://127.0.0.1/' },
  version: '1.0.0',
  documentationUrl: '',
  capabilities: {
    streaming: !args['no-streaming'],
    pushNotifications: false,
    extensions: [],
    extendedAgentCard: false,
  },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [skill('echo', 'Echo the task back'), skill('fail', 'Always fails')],
  signatures: [],
};

const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new PeerExecutor());
const legacyCompat = COMPAT ? { enabled: true } : undefined;

const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
if (REST_ONLY) {
  app.use('/', restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
} else {
  app.use('/', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
}

const server = app.listen(PORT, HOST, () => {
  process.stdout.write(`listening on http://${HOST}:${PORT}\n`);
});
server.on('error', (err) => {
  process.stderr.write(`server error: ${err?.stack ?? err}\n`);
  process.exit(1);
});

let stopping = false;
const shutdown = () => {
  if (stopping) return;
  stopping = true;
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
