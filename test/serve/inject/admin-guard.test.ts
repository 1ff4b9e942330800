// The admin listener's guards through inject(): the token, the Host check
// against DNS rebinding, the cross-site checks, and bodies validated before
// anything changes (README.md, "The admin listener").
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildInjectRouter, errorOf, type InjectRouter } from '../../helpers/inject.ts';
import { OPEN_TENANTS, TINY_MODELS, tinyPool } from '../../helpers/router.ts';

const TOKEN = 's3cret';
const auth = { authorization: `Bearer ${TOKEN}`, host: '127.0.0.1:8081' };
let t: InjectRouter;

before(async () => {
  t = await buildInjectRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }) }, { adminToken: TOKEN });
});
after(() => t.close());

const draining = async () => (await t.admin({ method: 'GET', url: '/admin/state', headers: auth })).json().replicas[0].draining as boolean;

test('no token or a wrong one: 403 permission_error on every admin route; the right one is let in', async () => {
  for (const headers of [{ host: '127.0.0.1:8081' }, { host: '127.0.0.1:8081', authorization: 'Bearer wrong' }]) {
    for (const [method, url] of [
      ['GET', '/admin/state'],
      ['GET', '/admin/decisions'],
      ['POST', '/admin/reload'],
      ['POST', '/admin/replicas/r0/drain'],
    ] as const) {
      const answer = await t.admin({ method, url, headers: { ...headers, 'x-switchyard-admin': '1' } });
      assert.equal(answer.statusCode, 403, `${method} ${url} ${JSON.stringify(headers)}`);
      assert.equal(errorOf(answer).type, 'permission_error');
    }
  }
  assert.equal(await draining(), false, 'nothing refused changed anything');
  const state = await t.admin({ method: 'GET', url: '/admin/state', headers: auth });
  assert.equal(state.statusCode, 200);
  // Probes answer without a token: the kubelet has none.
  assert.equal((await t.admin({ method: 'GET', url: '/readyz', headers: { host: '127.0.0.1:8081' } })).statusCode, 200);
});

test("a foreign Host (DNS rebinding) and another site's page are refused even with the token", async () => {
  const rebound = await t.admin({ method: 'GET', url: '/admin/state', headers: { ...auth, host: 'attacker.example:8081' } });
  assert.equal(rebound.statusCode, 403);
  assert.match(errorOf(rebound).message, /does not answer to Host "attacker\.example:8081"; reach it as 127\.0\.0\.1/);
  const crossSite = await t.admin({ method: 'POST', url: '/admin/replicas/r0/drain', headers: { ...auth, 'sec-fetch-site': 'cross-site' } });
  assert.equal(crossSite.statusCode, 403);
  assert.equal(errorOf(crossSite).code, 'permission_denied');
  const otherOrigin = await t.admin({ method: 'POST', url: '/admin/replicas/r0/drain', headers: { ...auth, origin: 'http://attacker.example' } });
  assert.equal(otherOrigin.statusCode, 403);
  assert.equal(await draining(), false);
});

test('a drain body is checked before it acts: 400 for "no", and a real drain turns the public side away', async () => {
  const bad = await t.admin({
    method: 'POST',
    url: '/admin/replicas/r0/drain',
    headers: { ...auth, 'content-type': 'application/json' },
    payload: '{"draining":"no"}',
  });
  assert.equal(bad.statusCode, 400);
  assert.equal(errorOf(bad).type, 'invalid_request_error');
  assert.equal(await draining(), false);
  const drained = await t.admin({
    method: 'POST',
    url: '/admin/replicas/r0/drain',
    headers: { ...auth, 'content-type': 'application/json' },
    payload: '{"draining":true}',
  });
  assert.deepEqual(drained.json(), { replica: 'r0', draining: true });
  const refused = await t.post('/v1/completions', { model: 'tiny', prompt: 'x', max_tokens: 1 });
  assert.equal(refused.statusCode, 503, 'the only replica is draining');
  assert.ok(refused.headers['retry-after']);
  const undrained = await t.admin({
    method: 'POST',
    url: '/admin/replicas/r0/drain',
    headers: { ...auth, 'content-type': 'application/json' },
    payload: '{"draining":false}',
  });
  assert.equal(undrained.statusCode, 200);
  assert.equal((await t.post('/v1/completions', { model: 'tiny', prompt: 'x', max_tokens: 1 })).statusCode, 200);
});

test('the public app has no /admin/* and no /metrics', async () => {
  const admin = await t.router.app.inject({ method: 'GET', url: '/admin/state', headers: auth });
  assert.equal(admin.statusCode, 404);
  assert.equal(errorOf(admin).code, 'route_not_found');
  const metrics = await t.router.app.inject({ method: 'GET', url: '/metrics' });
  assert.notEqual(metrics.statusCode, 200);
});
