// Identity through the package, under Node, over real HTTP on 127.0.0.1:
// - createA2AHandler({auth}): API keys, and JWTs whose signatures the
//   handler checks with WebCrypto (HS256 with a secret from `env`; RS256,
//   ES256 and EdDSA with keys from a JWKS served here), forged tokens refused;
// - createA2AHandler({authenticate}): a JS verifier, each caller's tasks its own;
// - the package client calling protected agents with each credential shape
//   (bearer, apiKey, oauth2 client credentials with a token endpoint run
//   here, getToken), and credentials kept to the card's origin.

import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { importShim, killChildren, listen, serveFetch } from './helpers.mjs';

const tn = await importShim('esm.mjs');
const closers = [];
after(async () => {
  await Promise.all(closers.map((c) => c()));
  await killChildren();
});

const b64u = (buf) => Buffer.from(buf).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

/** A compact JWS of `claims` with `header`, signed by `signer(bytes) -> Buffer`. */
function jws(header, claims, signer) {
  const input = `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(claims))}`;
  return `${input}.${b64u(signer(Buffer.from(input)))}`;
}
const hs256 = (secret) => (data) => createHmac('sha256', secret).update(data).digest();

/** Serves a handler over HTTP; returns {url, cardUrl}. */
async function served(handler) {
  const s = await serveFetch(handler);
  closers.push(s.close);
  return { url: s.url, cardUrl: `${s.url}/.well-known/agent-card.json` };
}

/** One JSON-RPC call; {status, headers, body (parsed when JSON)}. */
async function rpc(url, method, params, headers = {}) {
  const resp = await fetch(`${url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'A2A-Version': '1.0', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await resp.text();
  let body = text;
  try { body = JSON.parse(text); } catch {}
  return { status: resp.status, headers: resp.headers, body };
}
const message = (text) => ({ message: { role: 'ROLE_USER', messageId: `m-${text}-${Math.random()}`, parts: [{ text }] } });

const ISS = 'https://issuer.test';
const AUD = 'toolnexus-npm';

describe('createA2AHandler({auth}): verifiers of the a2a.auth block', () => {
  test('API keys from env and HS256 JWTs checked with WebCrypto: 401 with a challenge without, the card stays public', async () => {
    const secret = 'npm-hs256-secret';
    const handler = tn.createA2AHandler({
      client: 'echo',
      auth: {
        apiKeys: { keys: { alice: '${ALICE_KEY}' } },
        jwt: { secretEnv: 'JWT_SECRET', issuer: ISS, audience: AUD },
      },
      env: { ALICE_KEY: 'alice-key', JWT_SECRET: secret },
    });
    const { url, cardUrl } = await served(handler);
    const card = await (await fetch(cardUrl)).json();
    assert.ok(card.securitySchemes && Object.keys(card.securitySchemes).length >= 2, JSON.stringify(card.securitySchemes));

    const none = await rpc(url, 'SendMessage', message('anon'));
    assert.equal(none.status, 401, JSON.stringify(none.body));
    assert.ok(none.headers.get('www-authenticate'), 'a challenge');
    assert.equal((await rpc(url, 'SendMessage', message('k'), { 'X-API-Key': 'wrong' })).status, 401);
    const byKey = await rpc(url, 'SendMessage', message('by key'), { 'X-API-Key': 'alice-key' });
    assert.equal(byKey.status, 200, JSON.stringify(byKey.body));
    assert.equal(byKey.body.result.task.status.state, 'TASK_STATE_COMPLETED');

    const claims = { sub: 'carol', iss: ISS, aud: AUD, exp: now() + 600 };
    const good = jws({ alg: 'HS256', typ: 'JWT' }, claims, hs256(secret));
    const byJwt = await rpc(url, 'SendMessage', message('by jwt'), { authorization: `Bearer ${good}` });
    assert.equal(byJwt.status, 200, JSON.stringify(byJwt.body));
    // carol does not see alice's task.
    const got = await rpc(url, 'GetTask', { id: byKey.body.result.task.id }, { authorization: `Bearer ${good}` });
    assert.equal(got.body.error?.code, -32001, JSON.stringify(got.body));

    const [h, p] = good.split('.');
    const forged = {
      'another secret': jws({ alg: 'HS256' }, claims, hs256('guess')),
      expired: jws({ alg: 'HS256' }, { ...claims, exp: now() - 3600 }, hs256(secret)),
      'not yet valid': jws({ alg: 'HS256' }, { ...claims, nbf: now() + 3600 }, hs256(secret)),
      'wrong iss': jws({ alg: 'HS256' }, { ...claims, iss: 'https://evil.test' }, hs256(secret)),
      'wrong aud': jws({ alg: 'HS256' }, { ...claims, aud: 'other' }, hs256(secret)),
      'alg none': `${b64u(JSON.stringify({ alg: 'none' }))}.${p}.`,
      'tampered payload': `${h}.${b64u(JSON.stringify({ ...claims, sub: 'alice' }))}.${good.split('.')[2]}`,
      garbage: 'not.a.jwt',
    };
    for (const [what, token] of Object.entries(forged)) {
      const r = await rpc(url, 'GetTask', { id: 'x' }, { authorization: `Bearer ${token}` });
      assert.equal(r.status, 401, `${what}: ${JSON.stringify(r.body)}`);
    }
  });

  test('RS256, ES256 and EdDSA JWTs checked with WebCrypto against a JWKS served here; forged and unknown-kid tokens refused, the JWKS fetched once per unknown kid', async () => {
    const keys = {
      RS256: generateKeyPairSync('rsa', { modulusLength: 2048 }),
      ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
      EdDSA: generateKeyPairSync('ed25519'),
    };
    const jwks = { keys: Object.entries(keys).map(([alg, k]) => ({ ...k.publicKey.export({ format: 'jwk' }), kid: `k-${alg}`, alg, use: 'sig' })) };
    let fetches = 0;
    const jwksServer = await listen((req, res) => {
      fetches++;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=600' });
      res.end(JSON.stringify(jwks));
    });
    closers.push(jwksServer.close);
    const handler = tn.createA2AHandler({
      client: 'echo',
      auth: { jwt: { jwksUrl: `${jwksServer.url}/jwks.json`, issuer: ISS, audience: AUD, algorithms: ['RS256', 'ES256', 'EdDSA'] } },
    });
    const { url } = await served(handler);
    const claims = { sub: 'dave', iss: ISS, aud: AUD, exp: now() + 600 };
    const signer = {
      RS256: (data) => sign('sha256', data, keys.RS256.privateKey),
      // JWS ES256 is the raw r || s (IEEE P1363), not DER.
      ES256: (data) => sign('sha256', data, { key: keys.ES256.privateKey, dsaEncoding: 'ieee-p1363' }),
      EdDSA: (data) => sign(null, data, keys.EdDSA.privateKey),
    };
    for (const alg of Object.keys(keys)) {
      const token = jws({ alg, kid: `k-${alg}`, typ: 'JWT' }, claims, signer[alg]);
      const r = await rpc(url, 'SendMessage', message(alg), { authorization: `Bearer ${token}` });
      assert.equal(r.status, 200, `${alg}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.result.task.status.state, 'TASK_STATE_COMPLETED', alg);
    }
    assert.equal(fetches, 1, 'one JWKS fetch for all three (cached by max-age)');

    const rsaJwk = jwks.keys[0];
    const forged = {
      // The RS public key used as an HMAC secret (algorithm confusion).
      'HS256 with the RS public key': jws({ alg: 'HS256', kid: 'k-RS256' }, claims, hs256(JSON.stringify(rsaJwk))),
      'signed by another key': jws({ alg: 'ES256', kid: 'k-ES256' }, claims, (d) => sign('sha256', d, { key: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, dsaEncoding: 'ieee-p1363' })),
      'an RS key signing for the ES kid': jws({ alg: 'ES256', kid: 'k-RS256' }, claims, signer.RS256),
      'wrong aud': jws({ alg: 'RS256', kid: 'k-RS256' }, { ...claims, aud: 'x' }, signer.RS256),
      'alg none': `${b64u(JSON.stringify({ alg: 'none', kid: 'k-RS256' }))}.${b64u(JSON.stringify(claims))}.`,
    };
    for (const [what, token] of Object.entries(forged)) {
      const r = await rpc(url, 'GetTask', { id: 'x' }, { authorization: `Bearer ${token}` });
      assert.equal(r.status, 401, `${what}: ${JSON.stringify(r.body)}`);
    }
    const before = fetches;
    for (let i = 0; i < 5; i++) {
      const token = jws({ alg: 'RS256', kid: `unknown-${i}` }, claims, signer.RS256);
      const r = await rpc(url, 'GetTask', { id: 'x' }, { authorization: `Bearer ${token}` });
      assert.equal(r.status, 401, JSON.stringify(r.body));
    }
    assert.ok(fetches - before <= 1, `at most one re-fetch for unknown kids within the interval (got ${fetches - before})`);
  });

  test('a bad auth block is refused when the handler is made, saying where', () => {
    assert.throws(() => tn.createA2AHandler({ client: 'echo', auth: { jwt: { secretEnv: 'NOPE_NOT_SET' } }, env: {} }), (e) => e.kind === 'misuse' && /secretEnv/.test(e.message));
    assert.throws(() => tn.createA2AHandler({ client: 'echo', auth: { apiKey: {} } }), (e) => e.kind === 'misuse' && /unknown key/.test(e.message));
  });
});

describe('createA2AHandler({authenticate}): a JS verifier', () => {
  test('a principal accepts, a Response refuses as it is, null is 401, a throw is 401 (logged); tasks are scoped to their caller', async () => {
    const seen = [];
    const handler = tn.createA2AHandler({
      client: 'echo',
      authenticate: async (req) => {
        seen.push(req.headers.get('x-user'));
        const user = req.headers.get('x-user');
        if (user === 'boom') throw new Error('verifier bug');
        if (user === 'blocked') return new Response('blocked here', { status: 403, headers: { 'x-reason': 'listed' } });
        if (user === 'weird') return { subject: '' };
        return user ? { subject: user, issuer: 'https://idp.test', scopes: ['a'] } : null;
      },
    });
    const { url, cardUrl } = await served(handler);
    assert.equal((await fetch(cardUrl)).status, 200);
    assert.equal(seen.length, 0, 'the public card asks no verifier');
    const anon = await rpc(url, 'SendMessage', message('x'));
    assert.equal(anon.status, 401, JSON.stringify(anon.body));
    const blocked = await rpc(url, 'SendMessage', message('x'), { 'x-user': 'blocked' });
    assert.deepEqual([blocked.status, blocked.body, blocked.headers.get('x-reason')], [403, 'blocked here', 'listed']);
    assert.equal(blocked.headers.get('access-control-allow-origin'), '*', 'with the handler\'s CORS headers');
    assert.equal((await rpc(url, 'SendMessage', message('x'), { 'x-user': 'boom' })).status, 401);
    assert.equal((await rpc(url, 'SendMessage', message('x'), { 'x-user': 'weird' })).status, 401);

    const a = await rpc(url, 'SendMessage', message('from alice'), { 'x-user': 'alice' });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const id = a.body.result.task.id;
    assert.equal((await rpc(url, 'GetTask', { id }, { 'x-user': 'alice' })).body.result.id, id);
    assert.equal((await rpc(url, 'GetTask', { id }, { 'x-user': 'bob' })).body.error?.code, -32001);
    assert.equal((await rpc(url, 'CancelTask', { id }, { 'x-user': 'bob' })).body.error?.code, -32001);
    const bobs = (await rpc(url, 'ListTasks', {}, { 'x-user': 'bob' })).body.result;
    assert.equal(bobs.totalSize, 0, JSON.stringify(bobs));
    const alices = (await rpc(url, 'ListTasks', {}, { 'x-user': 'alice' })).body.result;
    assert.deepEqual(alices.tasks.map((t) => t.id), [id]);
  });

  test('a bad authenticate option is a misuse', () => {
    assert.throws(() => tn.createA2AHandler({ client: 'echo', authenticate: 'yes' }), (e) => e.kind === 'misuse' && /authenticate/.test(e.message));
  });
});

describe('the package client calls protected agents', () => {
  const secret = 'client-side-secret';
  const token = (sub, extra = {}) => jws({ alg: 'HS256' }, { sub, iss: ISS, aud: AUD, exp: now() + 600, ...extra }, hs256(secret));

  /** A protected agent (API key in a header, HS256 bearer), and what it saw. */
  async function protectedAgent() {
    const saw = [];
    const inner = tn.createA2AHandler({
      client: 'echo',
      skills: [{ name: 'echo', description: 'Echoes' }],
      a2a: { name: 'protected' },
      auth: { apiKeys: { name: 'X-Key', keys: { alice: 'alice-key' } }, jwt: { secretEnv: 'S', issuer: ISS, audience: AUD } },
      env: { S: secret },
    });
    const s = await served(async (req) => {
      saw.push({ url: req.url, authorization: req.headers.get('authorization'), key: req.headers.get('x-key') });
      return inner(req);
    });
    return { ...s, saw };
  }

  test('{bearer} and {apiKey}: placed as the card says; without them the call fails with a clear error', async () => {
    const a = await protectedAgent();
    const bearer = await tn.agentTools(tn.agent({ card: a.cardUrl, pollEvery: 20, auth: { bearer: token('carol') } }));
    const r1 = await bearer[0].execute({ task: 'with a bearer' });
    assert.equal(r1.isError, false, r1.output);
    assert.equal(r1.output, 'with a bearer');
    const key = await tn.agentTools(tn.agent({ card: a.cardUrl, pollEvery: 20, auth: { apiKey: 'alice-key' } }));
    const r2 = await key[0].execute({ task: 'with a key' });
    assert.equal(r2.isError, false, r2.output);
    assert.ok(a.saw.some((s) => s.key === 'alice-key'), 'the key went in the header the card names');
    const none = await tn.agentTools(tn.agent({ card: a.cardUrl, pollEvery: 20 }));
    const r3 = await none[0].execute({ task: 'without' });
    assert.equal(r3.isError, true);
    assert.match(r3.output, /401/);
    // The descriptor keeps the credential's shape.
    assert.deepEqual(tn.agent({ card: a.cardUrl, auth: { apiKey: '${K}' }, allowedOrigins: ['https://api.example'] }),
      { card: a.cardUrl, auth: { apiKey: '${K}' }, allowedOrigins: ['https://api.example'] });
    assert.throws(() => tn.agent({ card: a.cardUrl, auth: { password: 'x' } }), (e) => e.kind === 'misuse');
  });

  test('{oauth2}: client credentials from a token endpoint run here; concurrent calls, toolkits and listTasks share one fetch', async () => {
    const a = await protectedAgent();
    const asked = [];
    const idp = await listen((req, res, body) => {
      asked.push({ auth: req.headers.authorization, body: body.toString() });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: token('service-app'), token_type: 'Bearer', expires_in: 600 }));
    });
    closers.push(idp.close);
    const desc = tn.agent({ card: a.cardUrl, pollEvery: 20, auth: { oauth2: { clientId: 'app', clientSecret: '${APP_SECRET}', tokenUrl: `${idp.url}/token`, scopes: ['tasks'] } } });
    process.env.APP_SECRET = 'app-secret';
    const tools = await tn.agentTools(desc);
    const results = await Promise.all([1, 2, 3, 4].map((i) => tools[0].execute({ task: `oauth ${i}` })));
    for (const r of results) assert.equal(r.isError, false, r.output);
    assert.equal(asked.length, 1, 'one token fetch for four concurrent calls');
    assert.match(asked[0].body, /grant_type=client_credentials/);
    const listed = await tn.listTasks(desc);
    assert.equal(listed.tasks.length, 4, JSON.stringify(listed));
    // listTasks and a toolkit's tools of the same agent use the token the tools fetched.
    const tk = await tn.createToolkit({ agents: [desc] });
    const again = await tk.execute(tk.tools()[0].name, { task: 'from a toolkit' });
    assert.equal(again.isError, false, again.output);
    assert.equal((await tn.listTasks(desc)).tasks.length, 5);
    assert.equal(asked.length, 1, 'the agent\'s tools, its toolkit and listTasks share one token');
  });

  test('toolnexus-wasm/client, the browser entry, has no OAuth2 client credentials: {oauth2} is refused saying to use getToken or the full entry, and nothing is sent', async () => {
    const client = await importShim('client.mjs');
    const a = await protectedAgent();
    let idpHits = 0;
    const idp = await listen((req, res) => { idpHits += 1; res.writeHead(500); res.end(); });
    closers.push(idp.close);
    const auth = { oauth2: { clientId: 'app', clientSecret: 'in-a-browser', tokenUrl: `${idp.url}/token` } };
    const refused = (e) => e.kind === 'misuse' && /toolnexus-wasm\/client/.test(e.message) && /getToken/.test(e.message) && /"toolnexus-wasm"/.test(e.message);
    assert.throws(() => client.agent({ card: a.cardUrl, auth }), refused);
    await assert.rejects(client.agentTools({ card: a.cardUrl, auth }), refused);
    // A config's OAuth2 agent is a failure of its own; its neighbours still work.
    const tk = await client.createToolkit({ config: { agents: { secretive: { card: a.cardUrl, auth }, open: { card: a.cardUrl, auth: { bearer: token('dave') } } } } });
    const failures = tk.failures();
    assert.equal(failures.length, 1, JSON.stringify(failures));
    assert.equal(failures[0].kind, 'misuse');
    assert.match(failures[0].message, /getToken/);
    assert.equal(tk.tools().length, 1);
    const r = await tk.execute(tk.tools()[0].name, { task: 'from the open one' });
    assert.equal(r.isError, false, r.output);
    assert.equal(idpHits, 0, 'the client secret went nowhere');
    // The full entry takes the same descriptor (Node, workers).
    assert.equal(tn.agent({ card: a.cardUrl, auth }).auth.oauth2.clientId, 'app');
  });

  test('getToken: asked before each call; a refused token is renewed once ({retry: true}); a throwing getToken fails the call, not the process', async () => {
    const a = await protectedAgent();
    const hints = [];
    const desc = tn.agent({ card: a.cardUrl, pollEvery: 20, getToken: async (hint) => { hints.push(hint.retry); return token('erin'); } });
    assert.equal(typeof desc.getToken, 'function');
    const tools = await tn.agentTools(desc);
    assert.deepEqual(hints, [], 'not asked to read the public card');
    const r = await tools[0].execute({ task: 'as erin' });
    assert.equal(r.isError, false, r.output);
    assert.deepEqual(hints, [false], 'asked once before the call');
    const again = await tools[0].execute({ task: 'as erin again' });
    assert.equal(again.isError, false, again.output);
    assert.deepEqual(hints, [false, false], 'asked again for the next call');

    // The first token is refused (expired): asked once more with retry, and the call goes through.
    const renewals = [];
    const expiring = tn.agent({
      card: a.cardUrl, pollEvery: 20,
      getToken: ({ retry }) => { renewals.push(retry); return retry ? token('erin') : token('erin', { exp: now() - 60 }); },
    });
    const seen = a.saw.length;
    const renewed = await (await tn.agentTools(expiring))[0].execute({ task: 'renewed' });
    assert.equal(renewed.isError, false, renewed.output);
    assert.deepEqual(renewals, [false, true], 'one renewal after the 401');
    const sends = a.saw.slice(seen).filter((s) => s.authorization);
    assert.equal(sends.length >= 2, true, 'the refused request, then the retry');

    // Always refused: one renewal, then a clear error naming the scheme (no loop).
    const stale = [];
    const never = tn.agent({ card: a.cardUrl, pollEvery: 20, getToken: ({ retry }) => { stale.push(retry); return 'not-a-jwt'; } });
    const refused = await (await tn.agentTools(never))[0].execute({ task: 'refused' });
    assert.equal(refused.isError, true);
    assert.match(refused.output, /refused a fresh token .*HTTP 401/);
    assert.deepEqual(stale, [false, true]);

    const failing = await tn.agentTools(tn.agent({ card: a.cardUrl, getToken: () => { throw new Error('logged out'); } }));
    const out = await failing[0].execute({ task: 'x' });
    assert.equal(out.isError, true);
    assert.match(out.output, /getToken threw: .*logged out/);
    assert.throws(() => tn.agent({ card: a.cardUrl, getToken: () => 'x', auth: { bearer: 'y' } }), (e) => e.kind === 'misuse');
  });

  test('credentials go only to the card\'s origin: a card naming an endpoint elsewhere gets no credential unless that origin is allowed', async () => {
    const a = await protectedAgent();
    // A card served from one origin whose endpoint is the protected agent (another origin).
    const card = await (await fetch(a.cardUrl)).json();
    const cardHost = await listen((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(card));
    });
    closers.push(cardHost.close);
    const foreign = `${cardHost.url}/.well-known/agent-card.json`;
    const seenBefore = a.saw.length;
    const tools = await tn.agentTools(tn.agent({ card: foreign, pollEvery: 20, auth: { apiKey: 'alice-key' } }));
    const r = await tools[0].execute({ task: 'elsewhere' });
    assert.equal(r.isError, true, 'refused or unauthenticated');
    assert.ok(a.saw.slice(seenBefore).every((s) => s.key === null), 'the other origin never saw the key');
    const allowed = await tn.agentTools(tn.agent({ card: foreign, pollEvery: 20, auth: { apiKey: 'alice-key' }, allowedOrigins: [a.url] }));
    const ok = await allowed[0].execute({ task: 'allowed' });
    assert.equal(ok.isError, false, ok.output);
  });
});
