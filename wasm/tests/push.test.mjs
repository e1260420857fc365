// Push notifications from createA2AHandler (the package's full entry, as
// installed from the tarball). The configs are kept by the JS store
// (getPushConfigs/savePushConfigs), so a new handler on the same store (a new
// isolate) still answers for them and delivers a resumed task's states. Real
// HTTP on 127.0.0.1 for the webhook.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { eventually, importShim } from './helpers.mjs';

const tn = await importShim('esm.mjs');

const hits = [];
const hook = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    hits.push({ headers: req.headers, body: JSON.parse(body) });
    res.writeHead(204).end();
  });
});
await new Promise((ok) => hook.listen(0, '127.0.0.1', ok));
const webhook = `http://127.0.0.1:${hook.address().port}/hook`;
after(() => new Promise((ok) => { hook.closeAllConnections(); hook.close(ok); }));

/** Asks "Which city?" first; the answer books. */
function asks(request) {
  const asked = request.history.at(-1);
  if (asked?.role === 'agent' && asked.text === 'Which city?') return `booked for ${request.text}`;
  return { inputRequired: 'Which city?' };
}

const call = (handler, method, params) => handler(new Request('http://edge.test/', {
  method: 'POST', headers: { 'content-type': 'application/json', 'A2A-Version': '1.0' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
})).then((r) => r.json());

function jsStore({ push = true } = {}) {
  const tasks = new Map();
  const configs = new Map();
  const store = {
    get: async (id) => tasks.get(id) ?? null,
    save: async (task) => { tasks.set(task.id, structuredClone(task)); },
  };
  if (push) {
    store.getPushConfigs = async (taskId) => configs.get(taskId) ?? null;
    store.savePushConfigs = async (taskId, list) => { configs.set(taskId, structuredClone(list)); };
  }
  return { store, configs };
}

test('configs kept by the JS store outlive the handler, and the resumed task still delivers', async () => {
  const { store, configs } = jsStore();
  const options = { client: asks, store, push: { allowPrivateWebhooks: true } };
  const first = tn.createA2AHandler(options);
  const card = await (await first(new Request('http://edge.test/.well-known/agent-card.json'))).json();
  assert.equal(card.capabilities.pushNotifications, true);
  const asked = await call(first, 'SendMessage', { message: { role: 'ROLE_USER', messageId: 'm1', parts: [{ text: 'a trip' }] } });
  const id = asked.result.task.id;
  assert.equal(asked.result.task.status.state, 'TASK_STATE_INPUT_REQUIRED', JSON.stringify(asked));
  const set = await call(first, 'CreateTaskPushNotificationConfig', { taskId: id, url: webhook, token: 'tk',
    authentication: { scheme: 'Bearer', credentials: 's3cret' } });
  const cid = set.result.id;
  assert.ok(cid, JSON.stringify(set));
  assert.equal(configs.get(id)?.[0]?.url, webhook, 'saved through the store');

  // A new isolate on the same store.
  const second = tn.createA2AHandler(options);
  const got = await call(second, 'GetTaskPushNotificationConfig', { taskId: id, id: cid });
  assert.equal(got.result?.url, webhook, JSON.stringify(got));
  assert.ok(!JSON.stringify(got).includes('s3cret'), 'credentials never echoed');
  const listed = await call(second, 'ListTaskPushNotificationConfigs', { taskId: id });
  assert.deepEqual(listed.result.configs.map((c) => c.id), [cid]);
  const done = await call(second, 'SendMessage', { message: { role: 'ROLE_USER', messageId: 'm2', taskId: id, parts: [{ text: 'Oslo' }] } });
  assert.equal(done.result.task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(done));
  await eventually(() => hits.some((h) => h.body.task?.status?.state === 'TASK_STATE_COMPLETED'), 5000, 'the completed state at the webhook');
  for (const h of hits) {
    assert.equal(h.headers.authorization, 'Bearer s3cret');
    assert.equal(h.headers['x-a2a-notification-token'], 'tk');
    assert.equal(h.body.task.id, id);
  }
});

test('a JS store without the push methods keeps configs for the handler\'s life only; without push the methods are -32003', async () => {
  const { store } = jsStore({ push: false });
  const handler = tn.createA2AHandler({ client: asks, store, push: { allowPrivateWebhooks: true } });
  const asked = await call(handler, 'SendMessage', { message: { role: 'ROLE_USER', messageId: 'm1', parts: [{ text: 'a trip' }] } });
  const id = asked.result.task.id;
  const set = await call(handler, 'CreateTaskPushNotificationConfig', { taskId: id, url: webhook });
  assert.ok(set.result?.id, JSON.stringify(set));
  assert.equal((await call(handler, 'ListTaskPushNotificationConfigs', { taskId: id })).result.configs.length, 1);
  const again = tn.createA2AHandler({ client: asks, store, push: true });
  assert.deepEqual((await call(again, 'ListTaskPushNotificationConfigs', { taskId: id })).result.configs, []);
  // Public webhooks only with `push: true`.
  const refused = await call(again, 'CreateTaskPushNotificationConfig', { taskId: id, url: webhook });
  assert.equal(refused.error?.code, -32602, JSON.stringify(refused));
  const off = tn.createA2AHandler({ client: asks, store });
  assert.equal((await call(off, 'ListTaskPushNotificationConfigs', { taskId: id })).error?.code, -32003);
});
