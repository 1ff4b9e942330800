// The admin door, over the real router: /admin/* only on the admin listener,
// validated bodies and queries, decisions found by request id, and reloads
// that say what they found on disk.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { startRouter } from '../../core/serve/server.ts';
import { PolicyStore } from '../../core/decide/store.ts';
import { policyFrom } from '../helpers/core.ts';
import { json, OPEN_TENANTS, startTestRouter, TINY_MODELS, tinyPool } from '../helpers/router.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

const files = (pools: string) => ({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': pools });
const post = (url: string, body?: string) =>
  fetch(url, {
    method: 'POST',
    ...(body === undefined ? { headers: { 'x-switchyard-admin': '1' } } : { headers: { 'content-type': 'application/json' }, body }),
  });

test('the public listener serves no /admin/* and no /metrics; probes stay', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 1 })));
  try {
    assert.notEqual(new URL(t.adminUrl).port, new URL(t.url).port);
    assert.equal(new URL(t.adminUrl).hostname, '127.0.0.1');
    for (const [method, path] of [
      ['GET', '/admin/state'],
      ['GET', '/admin/decisions'],
      ['POST', '/admin/reload'],
      ['POST', '/admin/replicas/r0/drain'],
    ]) {
      const response = await fetch(`${t.url}${path}`, { method });
      assert.equal(response.status, 404, `${method} ${path} on the public port`);
      const body = await json(response);
      assert.equal(body.error.type, 'not_found_error');
      assert.ok('param' in body.error && 'code' in body.error && 'message' in body.error);
    }
    for (const base of [t.url, t.adminUrl]) {
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
    }
    // Metrics name pools, replicas and plugins: API clients are told where they are, not shown them.
    const hidden = await fetch(`${t.url}/metrics`);
    assert.equal(hidden.status, 404);
    const text = await hidden.text();
    assert.doesNotMatch(text, /switchyard_|r0|general/);
    assert.match(JSON.parse(text).error.message, /admin listener/);
    assert.match(await (await fetch(`${t.adminUrl}/metrics`)).text(), /switchyard_policy_generation/);
    assert.equal((await fetch(`${t.adminUrl}/admin/state`)).status, 200);
  } finally {
    await t.close();
  }
});

test('drain bodies are validated: {"draining":"no"} is a 400 and drains nothing', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 1 })));
  try {
    const drain = (body?: string) => post(`${t.adminUrl}/admin/replicas/r0/drain`, body);
    for (const bad of ['{"draining":"no"}', '{"draining":"true"}', '{"draining":1}', '{"drain":true}', '[true]', 'not json']) {
      const response = await drain(bad);
      assert.equal(response.status, 400, bad);
      assert.equal((await json(response)).error.type, 'invalid_request_error', bad);
    }
    const state = await json(await fetch(`${t.adminUrl}/admin/state`));
    assert.equal(state.replicas[0].draining, false, 'no bad body drained the replica');
    assert.deepEqual(await json(await drain('{"draining":true}')), { replica: 'r0', draining: true });
    assert.deepEqual(await json(await drain('{"draining":false}')), { replica: 'r0', draining: false });
    assert.deepEqual(await json(await drain()), { replica: 'r0', draining: true }, 'no body: drain');
    assert.equal((await post(`${t.adminUrl}/admin/replicas/nope/drain`, '{"draining":true}')).status, 404);
  } finally {
    await t.close();
  }
});

test('decisions: found by request id (path or query), queries validated', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 2 })));
  try {
    const ids = ['find-me-1', 'find-me-2', 'find-me-3'];
    for (const id of ids) {
      const response = await fetch(`${t.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': id },
        body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 1 }),
      });
      assert.equal(response.status, 200);
      await response.arrayBuffer();
    }
    const one = await json(await fetch(`${t.adminUrl}/admin/decisions/find-me-2`));
    assert.equal(one.requestId, 'find-me-2');
    assert.equal(one.model, 'tiny');
    assert.ok(one.trace, 'with its trace');
    const byQuery = await json(await fetch(`${t.adminUrl}/admin/decisions?requestId=find-me-1`));
    assert.deepEqual(
      byQuery.decisions.map((d: { requestId: string }) => d.requestId),
      ['find-me-1'],
    );
    assert.deepEqual((await json(await fetch(`${t.adminUrl}/admin/decisions?requestId=nobody`))).decisions, []);
    const missing = await fetch(`${t.adminUrl}/admin/decisions/nobody`);
    assert.equal(missing.status, 404);
    assert.equal((await json(missing)).error.type, 'not_found_error');
    const two = await json(await fetch(`${t.adminUrl}/admin/decisions?limit=2`));
    assert.deepEqual(
      two.decisions.map((d: { requestId: string }) => d.requestId),
      ['find-me-3', 'find-me-2'],
    );
    for (const query of [
      'limit=abc',
      'limit=0',
      'limit=-1',
      'limit=1001',
      'limit=1e2',
      'limit=',
      'limit=2&limit=3',
      'colour=red',
      `requestId=${'x'.repeat(200)}`,
    ]) {
      const response = await fetch(`${t.adminUrl}/admin/decisions?${query}`);
      assert.equal(response.status, 400, query);
      assert.equal((await json(response)).error.type, 'invalid_request_error', query);
    }
  } finally {
    await t.close();
  }
});

test('an admin listener beyond loopback needs a token: the router refuses to start without one', async () => {
  await assert.rejects(
    startRouter({ policy: fixedPolicy(policyFrom(files(tinyPool({ replicas: 1 })))), port: 0, logger: false, admin: { host: '0.0.0.0', port: 0 } }),
    /SWITCHYARD_ADMIN_TOKEN/,
  );
});

const BOMB = `kind: models
a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
`;

test('POST /admin/reload answers live, unchanged or refused with every problem; /admin/state clears old errors once the files are good', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-admin-reload-'));
  for (const [name, text] of Object.entries(files(tinyPool({ replicas: 1 })))) writeFileSync(join(dir, name), text);
  const store = await PolicyStore.open({ dir, builtins: BUILTIN_STRATEGIES, seed: 1 });
  const t = await startTestRouter({}, { policy: store });
  const reload = async () => json(await post(`${t.adminUrl}/admin/reload`));
  const state = async () => (await json(await fetch(`${t.adminUrl}/admin/state`))).policy;
  try {
    assert.equal((await reload()).result, 'unchanged');

    // An alias bomb and a typo in another file: both reported, located, nothing thrown.
    writeFileSync(join(dir, 'bomb.yaml'), BOMB);
    writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 1 }).replace('model: tiny', 'model: tinny'));
    const refused = await reload();
    assert.equal(refused.result, 'refused');
    assert.equal(refused.generation, 1);
    assert.ok(
      refused.errors.some((e: string) => /bomb\.yaml:3:\d+: YAML: Excessive alias count/.test(e)),
      refused.errors.join('\n'),
    );
    // Parse failures stop the reference checks; the typo shows once the bomb is gone.
    const broken = await state();
    assert.equal(broken.disk.matchesLive, false);
    assert.deepEqual(broken.disk.errors, refused.errors);
    assert.deepEqual(broken.lastError.errors, refused.errors);
    // Asking again gives the same truthful answer, not "unchanged".
    const again = await reload();
    assert.equal(again.result, 'refused');
    assert.deepEqual(again.errors, refused.errors);

    writeFileSync(join(dir, 'bomb.yaml'), 'kind: settings\n');
    const typo = await reload();
    assert.equal(typo.result, 'refused');
    assert.match(typo.errors.join('\n'), /pools\.yaml:\d+:\d+: .*tinny/);

    writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 2 }));
    const live = await reload();
    assert.equal(live.result, 'live');
    assert.equal(live.generation, 2);
    assert.deepEqual(live.errors, []);
    const good = await state();
    assert.equal(good.disk.matchesLive, true);
    assert.deepEqual(good.disk.errors, []);
    assert.equal(good.lastError, undefined, 'the old error is gone');
    assert.equal(good.generation, 2);

    const metrics = await (await fetch(`${t.adminUrl}/metrics`)).text();
    assert.match(metrics, /switchyard_policy_reloads_total\{result="refused"\} 3/);
    // The initial load counts, as /admin/state counts it.
    assert.equal(good.reloads.live, 2);
    assert.match(metrics, /switchyard_policy_reloads_total\{result="live"\} 2/);
  } finally {
    await t.close();
    await store.close();
  }
});

/** A request to the admin listener with headers fetch would not let a test set (Host). */
function adminRequest(url: string, method: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test("the admin listener refuses a foreign Host (DNS rebinding), another site's page (CSRF) and a bare body-less state change", async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 1 })));
  try {
    const port = new URL(t.adminUrl).port;
    const drained = async () => (await json(await fetch(`${t.adminUrl}/admin/state`))).replicas[0].draining as boolean;
    // A page on attacker.example whose name now resolves to 127.0.0.1.
    for (const path of ['/admin/state', '/admin/explorer', '/metrics', '/nope']) {
      const rebound = await adminRequest(`${t.adminUrl}${path}`, 'GET', { host: `attacker.example:${port}` });
      assert.equal(rebound.status, 403, path);
      assert.match(JSON.parse(rebound.body).error.message, /does not answer to Host "attacker\.example/);
    }
    // A form on another site posting to the drain route: no body, a simple content type.
    for (const headers of <Record<string, string>[]>[
      { host: `127.0.0.1:${port}`, origin: 'http://attacker.example', 'content-type': 'text/plain' },
      { host: `127.0.0.1:${port}`, 'sec-fetch-site': 'cross-site' },
      { host: `localhost:${port}`, 'sec-fetch-site': 'same-site', 'x-switchyard-admin': '1' },
      { host: `127.0.0.1:${port}`, origin: `http://localhost:${port}`, 'x-switchyard-admin': '1' },
    ]) {
      const answer = await adminRequest(`${t.adminUrl}/admin/replicas/r0/drain`, 'POST', headers);
      assert.equal(answer.status, 403, JSON.stringify(headers));
      assert.equal(JSON.parse(answer.body).error.type, 'permission_error');
      assert.equal(JSON.parse(answer.body).error.code, 'permission_denied', 'the key was fine: this is about where the request came from');
    }
    // Same origin but a simple request (what `mode: "no-cors"` could send): no state change either.
    const bare = await adminRequest(`${t.adminUrl}/admin/replicas/r0/drain`, 'POST', { host: `127.0.0.1:${port}`, 'content-type': 'text/plain' });
    assert.equal(bare.status, 403);
    assert.match(JSON.parse(bare.body).error.message, /x-switchyard-admin: 1/);
    assert.equal(JSON.parse(bare.body).error.code, 'permission_denied');
    assert.equal((await adminRequest(`${t.adminUrl}/admin/reload`, 'POST', { host: `localhost:${port}` })).status, 403);
    assert.equal(await drained(), false, 'nothing above drained the replica');

    // What operators and the explorer page send still works.
    assert.equal((await adminRequest(`${t.adminUrl}/admin/state`, 'GET', { host: `localhost:${port}`, 'sec-fetch-site': 'same-origin' })).status, 200);
    assert.equal((await adminRequest(`${t.adminUrl}/admin/replicas/r0/drain`, 'POST', { host: `127.0.0.1:${port}`, 'x-switchyard-admin': '1' })).status, 200);
    assert.equal(await drained(), true);
    const json2 = await adminRequest(
      `${t.adminUrl}/admin/replicas/r0/drain`,
      'POST',
      { host: `localhost:${port}`, origin: `http://localhost:${port}`, 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' },
      '{"draining":false}',
    );
    assert.equal(json2.status, 200);
    assert.equal(await drained(), false);
    const explain = await adminRequest(
      `${t.adminUrl}/admin/explain`,
      'POST',
      { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' },
      JSON.stringify({ body: { model: 'tiny', messages: [{ role: 'user', content: 'hi' }] } }),
    );
    assert.equal(explain.status, 200, explain.body);
  } finally {
    await t.close();
  }
});
