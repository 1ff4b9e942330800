// The limits around retries and ejection: at most max_retries retries, never
// twice on one replica, within the retry budget; at most max_ejection_percent
// of a pool ejected; panic rather than reject everything; the back-off grows,
// and a passing health check brings a replica back. Seen through the engines'
// hit counts, /admin/state and /metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { json, TEST_KEY, until } from '../helpers/router.ts';
import { faultFleet, requestId, type FaultFleet } from './harness.ts';

const post = (fleet: FaultFleet, id: string) =>
  fetch(`${fleet.t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}`, 'x-request-id': id },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });

const metricsOf = async (fleet: FaultFleet) => (await fetch(`${fleet.t.adminUrl}/metrics`)).text();

test('at most max_retries retries (default 2), each on a replica not tried yet; then a 502 in OpenAI shape', async () => {
  const fleet = await faultFleet(['a', 'b', 'c', 'd']);
  try {
    for (const engine of fleet.engines.values()) engine.fault = 'status_500';
    const id = requestId('max');
    const response = await post(fleet, id);
    assert.equal(response.status, 502);
    const body = await json(response);
    assert.equal(body.error.code, 'upstream_error');
    assert.match(body.error.message, /answered 500/);
    const reached = fleet.reached(id);
    assert.equal(reached.length, 3, `three attempts: ${reached}`);
    for (const name of reached) assert.equal(fleet.engine(name).hits(id), 1, `${name} tried once`);
    assert.match(await metricsOf(fleet), /switchyard_retries_refused_total\{pool="tiny@v1\/general",reason="attempts"\} 1/);
  } finally {
    await fleet.close();
  }
});

test('never twice on one replica: with every replica tried, 503 with Retry-After', async () => {
  const fleet = await faultFleet(['a', 'b'], { settings: ['retries: { max_retries: 5 }'] });
  try {
    for (const engine of fleet.engines.values()) engine.fault = 'status_500';
    const id = requestId('twice');
    const response = await post(fleet, id);
    assert.equal(response.status, 503);
    assert.ok(Number(response.headers.get('retry-after')) >= 1);
    assert.equal((await json(response)).error.code, 'no_healthy_replica');
    assert.deepEqual(fleet.reached(id).sort(), ['a', 'b']);
    assert.equal(fleet.engine('a').hits(id) + fleet.engine('b').hits(id), 2);
  } finally {
    await fleet.close();
  }
});

test('the retry budget: with none to spend, a failed request is not retried', async () => {
  const fleet = await faultFleet(['bad', 'good'], { settings: ['retries: { budget_percent: 0, min_concurrency: 0 }'] });
  try {
    fleet.engine('bad').fault = 'status_500';
    let refused = 0;
    for (let i = 0; i < 4; i++) {
      const id = requestId('budget');
      const response = await post(fleet, id);
      if (fleet.engine('bad').hits(id)) {
        assert.equal(response.status, 502);
        assert.deepEqual(fleet.reached(id), ['bad'], 'not retried');
        refused++;
      } else {
        assert.equal(response.status, 200);
      }
      await response.arrayBuffer().catch(() => undefined);
    }
    assert.ok(refused >= 1);
    assert.match(await metricsOf(fleet), new RegExp(`switchyard_retries_refused_total\\{pool="tiny@v1/general",reason="budget"\\} ${refused}`));
  } finally {
    await fleet.close();
  }
});

test('max_ejection_percent: with three of four replicas failing, at most half the pool is ejected', async () => {
  const fleet = await faultFleet(['a', 'b', 'c', 'good'], {
    settings: ['retries: { max_retries: 3 }', 'outlier_detection: { consecutive_5xx: 1, max_ejection_percent: 50, base_ejection_ms: 60000 }'],
  });
  try {
    for (const name of ['a', 'b', 'c']) fleet.engine(name).fault = 'status_500';
    for (let i = 0; i < 8; i++) {
      const response = await post(fleet, requestId('share'));
      assert.equal(response.status, 200, 'every request ends on the good replica');
      await response.arrayBuffer();
    }
    const health = ['a', 'b', 'c', 'good'].map((id) => fleet.t.router.fleet.replica(id)!.health);
    assert.equal(health.filter((h) => h === 'ejected').length, 2, `health: ${health}`);
    const gauges = (await metricsOf(fleet)).match(/^switchyard_replica_ejected\{[^}]*\} 1$/gm) ?? [];
    assert.equal(gauges.length, 2, 'the ejected gauge says the same');
    assert.equal(fleet.t.router.fleet.replica('good')!.health, 'ready');
  } finally {
    await fleet.close();
  }
});

test('panic: with the whole pool ejected, requests still go to it rather than being rejected', async () => {
  const fleet = await faultFleet(['a', 'b'], { settings: ['outlier_detection: { consecutive_5xx: 1, max_ejection_percent: 100, base_ejection_ms: 60000 }'] });
  try {
    for (const engine of fleet.engines.values()) engine.fault = 'status_500';
    await (await post(fleet, requestId('eject'))).arrayBuffer();
    assert.deepEqual(
      ['a', 'b'].map((id) => fleet.t.router.fleet.replica(id)!.health),
      ['ejected', 'ejected'],
    );
    // The engines recover before the back-off ends: panic routing finds out.
    for (const engine of fleet.engines.values()) engine.fault = 'none';
    const id = requestId('panic');
    const response = await post(fleet, id);
    assert.equal(response.status, 200);
    assert.equal(fleet.reached(id).length, 1);
  } finally {
    await fleet.close();
  }
});

test('an ejection lasts base × recent ejections, shows in /admin/state and /metrics, and a passing health check ends it', async () => {
  const fleet = await faultFleet(['bad', 'good'], { settings: ['outlier_detection: { consecutive_5xx: 1, base_ejection_ms: 300, max_ejection_ms: 1000 }'] });
  try {
    const bad = fleet.engine('bad');
    bad.fault = 'status_500';
    const ejectionOf = async () => {
      const state = await json(await fetch(`${fleet.t.adminUrl}/admin/state`));
      return state.replicas.find((r: { id: string }) => r.id === 'bad').ejection;
    };
    const ejectBad = async () => {
      for (let i = 0; i < 4 && fleet.t.router.fleet.replica('bad')!.health !== 'ejected'; i++) await (await post(fleet, requestId('eject'))).arrayBuffer();
      assert.equal(fleet.t.router.fleet.replica('bad')!.health, 'ejected');
    };
    await ejectBad();
    const first = await ejectionOf();
    assert.equal(first.cause, 'status_5xx');
    assert.match(first.detail, /500/);
    assert.equal(first.until - first.ejectedAt, 300);
    assert.equal(first.multiplier, 1);
    const metrics = await metricsOf(fleet);
    assert.match(metrics, /switchyard_replica_ejections_total\{pool="tiny@v1\/general",replica="bad",cause="status_5xx"\} 1/);

    // Back after the back-off, at a passing health check (every 50 ms here).
    await until(() => fleet.t.router.fleet.replica('bad')!.health === 'ready', 3000, 'bad back in rotation');
    assert.equal(await ejectionOf(), null);
    // Ejected again at once: twice as long.
    await ejectBad();
    const second = await ejectionOf();
    assert.equal(second.multiplier, 2);
    assert.equal(second.until - second.ejectedAt, 600);
    // Passing health checks cannot bring it back before its time.
    const checks = bad.healthChecks;
    await until(() => bad.healthChecks >= checks + 2, 3000, 'two more passing health checks');
    if (Date.now() < second.until) assert.equal(fleet.t.router.fleet.replica('bad')!.health, 'ejected');
  } finally {
    await fleet.close();
  }
});

test('a hanging engine ejected by its streams: a non-streaming request waiting on it is retried elsewhere at once', async () => {
  const fleet = await faultFleet(['bad', 'good'], {
    upstream: { stream_headers_timeout_ms: 400, headers_timeout_ms: 30_000 },
    settings: ['outlier_detection: { consecutive_gateway_failures: 2, base_ejection_ms: 60000 }'],
  });
  try {
    const bad = fleet.engine('bad');
    bad.fault = 'hang';
    // A non-streaming request that lands on the hanging engine (round-robin: at most two tries).
    let waiting: { id: string; started: number; answer: Promise<Response> } | undefined;
    for (let i = 0; i < 2 && !waiting; i++) {
      const id = requestId('waits');
      const started = performance.now();
      const answer = post(fleet, id);
      await until(() => fleet.reached(id).length > 0, 3000, 'the request to reach an engine');
      if (bad.hits(id)) waiting = { id, started, answer };
      else await (await answer).arrayBuffer();
    }
    assert.ok(waiting, 'a request waits on the hanging engine');
    // Streams time out on it (400 ms) until it is ejected.
    for (let i = 0; i < 8 && fleet.t.router.fleet.replica('bad')!.health !== 'ejected'; i++) {
      const stream = await fleet.t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2, stream: true });
      for await (const _ of stream);
    }
    assert.equal(fleet.t.router.fleet.replica('bad')!.health, 'ejected');
    const response = await waiting.answer;
    assert.equal(response.status, 200);
    assert.equal((await json(response)).choices[0].message.content, 'from good');
    const ms = performance.now() - waiting.started;
    assert.ok(ms < 10_000, `answered after ${Math.round(ms)} ms, not after its 30 s timeout`);
    assert.deepEqual(fleet.reached(waiting.id).sort(), ['bad', 'good']);
  } finally {
    await fleet.close();
  }
});
