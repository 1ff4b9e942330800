import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { afterEach, test } from 'node:test';
import { LiveFleet, type LiveFleetOptions, type OutlierScope } from '../../core/fleet/live-fleet.ts';
import type { Logger } from '../../sdk/types.ts';
import { FakeEngine, vllmPage, waitFor } from './fake-engine.ts';

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');

// Short intervals keep the suite to a few seconds; the logic does not care.
const FAST = { scrapeIntervalMs: 20, healthIntervalMs: 20, requestTimeoutMs: 150 } as const;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function engine(metrics = vllmPage(0, 0, 0)): Promise<FakeEngine> {
  const fake = new FakeEngine(metrics);
  await fake.start();
  cleanups.push(() => fake.stop());
  return fake;
}

function fleet(options: LiveFleetOptions): LiveFleet {
  const live = new LiveFleet(options);
  cleanups.push(() => live.stop());
  return live;
}

interface Line {
  level: 'info' | 'warn';
  message: string;
  fields?: Record<string, unknown>;
}

function recordingLog(): Logger & { lines: Line[] } {
  const lines: Line[] = [];
  return {
    lines,
    info: (message, fields) => lines.push({ level: 'info', message, fields }),
    warn: (message, fields) => lines.push({ level: 'warn', message, fields }),
  };
}

test('scraped values are picked up, and follow the engine as it changes', async () => {
  const fake = await engine(fixture('vllm-lora.txt'));
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST });
  assert.deepEqual(live.replica('a'), { health: 'unknown', inFlight: 0 }, 'before any scrape: nothing but defaults');
  live.start();
  await waitFor('first scrape', () => live.replica('a')?.scrapedAt !== undefined);
  const first = live.replica('a')!;
  assert.equal(first.running, 7);
  assert.equal(first.queueDepth, 1);
  assert.equal(first.kvUsage, 0.6182);
  assert.deepEqual(first.loadedAdapters, ['sql-lora', 'chat-lora', 'summarize-lora']);
  assert.equal(first.maxLoras, 4);
  assert.equal(first.numGpuBlocks, 27120);
  assert.equal(first.kvCapacityTokens, 27120 * 16);

  fake.metrics = vllmPage(2, 9, 0.91);
  await waitFor('new values', () => live.replica('a')?.queueDepth === 9);
  assert.equal(live.replica('a')!.running, 2);
  assert.equal(live.replica('a')!.kvUsage, 0.91);
  await waitFor('ready', () => live.replica('a')?.health === 'ready');
});

test('an SGLang replica is read with SGLang names', async () => {
  const fake = await engine(fixture('sglang.txt'));
  const live = fleet({ replicas: [{ id: 's', url: fake.url, engine: 'sglang' }], ...FAST });
  live.start();
  await waitFor('first scrape', () => live.replica('s')?.scrapedAt !== undefined);
  const s = live.replica('s')!;
  assert.deepEqual([s.running, s.queueDepth, s.kvUsage], [12, 3, 0.28]);
  assert.equal(s.prefixCacheHitRatio, 0.007507552643049313);
  assert.equal(s.loadedAdapters, undefined);
});

test('when the engine stops answering, the last values stay and their age grows', async () => {
  const fake = await engine(vllmPage(4, 1, 0.5));
  let clock = 1_000;
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST, requestTimeoutMs: 60, now: () => clock });
  live.start();
  await waitFor('first scrape', () => live.replica('a')?.scrapedAt === 1_000);

  fake.mode = 'hang';
  await waitFor('a timed-out scrape', () => live.list()[0].consecutiveScrapeFailures >= 1);
  clock = 4_000;
  const failuresSoFar = live.list()[0].consecutiveScrapeFailures;
  await waitFor('another failed scrape', () => live.list()[0].consecutiveScrapeFailures > failuresSoFar);

  const state = live.replica('a')!;
  assert.equal(state.scrapedAt, 1_000, 'a failed scrape does not refresh the stamp');
  assert.deepEqual([state.running, state.queueDepth, state.kvUsage], [4, 1, 0.5], 'nor erase the values');
  const report = live.list()[0];
  assert.equal(report.scrapeAgeMs, 3_000);
  assert.match(report.lastScrapeError ?? '', /60 ms|timeout/i);

  fake.mode = 'serve';
  await waitFor('a fresh scrape', () => live.replica('a')?.scrapedAt === 4_000);
  assert.equal(live.list()[0].scrapeAgeMs, 0);
  assert.equal(live.list()[0].lastScrapeError, null);
});

test('failing after failAfter missed checks, ready again after recoverAfter good ones', async () => {
  const fake = await engine();
  const log = recordingLog();
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST, failAfter: 2, recoverAfter: 3, log });
  live.start();
  await waitFor('ready', () => live.replica('a')?.health === 'ready');

  fake.mode = 'reset';
  await waitFor('failing', () => live.replica('a')?.health === 'failing');
  assert.ok(live.list()[0].consecutiveCheckFailures >= 2);
  assert.ok(live.list()[0].lastCheckError);

  const answersBefore = fake.healthAnswers;
  fake.mode = 'serve';
  await waitFor('ready again', () => live.replica('a')?.health === 'ready');
  assert.ok(fake.healthAnswers - answersBefore >= 3, 'not before three good answers');

  const changes = log.lines.filter((l) => l.message.startsWith('fleet: replica')).map((l) => `${l.fields?.from}->${l.fields?.to}`);
  assert.deepEqual(changes, ['unknown->ready', 'ready->failing', 'failing->ready']);
  assert.equal(log.lines.find((l) => l.fields?.to === 'failing')?.level, 'warn');
});

test('a replica that answers 503 before it was ever ready is loading: not_ready, then ready', async () => {
  const fake = await engine();
  fake.healthStatus = 503;
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST });
  live.start();
  await waitFor('not_ready', () => live.replica('a')?.health === 'not_ready');
  fake.healthStatus = 200;
  await waitFor('ready', () => live.replica('a')?.health === 'ready');
});

test('a failed scrape alone does not fail the replica: /metrics and /health are separate', async () => {
  const fake = await engine();
  fake.metricsStatus = 404;
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST });
  live.start();
  await waitFor('scrape failures', () => live.list()[0].consecutiveScrapeFailures >= 3);
  assert.equal(live.replica('a')!.health, 'ready');
  assert.equal(live.replica('a')!.scrapedAt, undefined);
  assert.equal(live.list()[0].lastScrapeError, 'HTTP 404');
});

test("a page without the engine's load metrics is a failed scrape, and says why", async () => {
  const fake = await engine(fixture('sglang.txt'));
  const log = recordingLog();
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST, log });
  live.start();
  await waitFor('scrape failures', () => live.list()[0].consecutiveScrapeFailures >= 2);
  assert.match(live.list()[0].lastScrapeError!, /no vllm load metrics/);
  assert.equal(log.lines.filter((l) => l.message === 'fleet: scrape failed').length, 1, 'one warning per run of failures');
});

test("the proxy's connect errors count: markFailure twice makes a replica failing at once", async () => {
  const fake = await engine();
  // One check, at start (the next is a minute away), given time to answer on a loaded machine: only the proxy's errors move it.
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST, healthIntervalMs: 60_000, requestTimeoutMs: 5000 });
  live.start();
  await waitFor('ready', () => live.replica('a')?.health === 'ready');
  live.markFailure('a', 'ECONNREFUSED');
  assert.equal(live.replica('a')!.health, 'ready');
  live.markFailure('a', 'ECONNREFUSED');
  assert.equal(live.replica('a')!.health, 'failing');
  assert.equal(live.list()[0].lastCheckError, 'ECONNREFUSED');
  live.markFailure('nobody');
});

test('draining takes a replica out while set, whatever its checks say', async () => {
  const fake = await engine();
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST });
  live.start();
  await waitFor('ready', () => live.replica('a')?.health === 'ready');
  assert.equal(live.setDraining('a', true), true);
  assert.equal(live.replica('a')!.health, 'draining');
  await new Promise((resolve) => setTimeout(resolve, 60)); // checks keep running
  assert.equal(live.replica('a')!.health, 'draining');
  assert.deepEqual([live.list()[0].draining, live.list()[0].probedHealth], [true, 'ready']);
  live.setDraining('a', false);
  assert.equal(live.replica('a')!.health, 'ready');
  assert.equal(live.setDraining('nobody', true), false);
});

test('in-flight counts are exact, fresh without a scrape, and never negative', () => {
  const live = fleet({ replicas: [{ id: 'a', url: 'http://127.0.0.1:9', engine: 'vllm' }] });
  const end1 = live.acquire('a');
  const end2 = live.acquire('a');
  assert.equal(live.replica('a')!.inFlight, 2);
  end1();
  end1(); // a second call does nothing
  assert.equal(live.replica('a')!.inFlight, 1);
  live.release('a');
  live.release('a');
  assert.equal(live.replica('a')!.inFlight, 0);
  end2();
  assert.equal(live.replica('a')!.inFlight, 0);
  live.acquire('nobody')();
  live.release('nobody');
});

test('the snapshot is frozen and stays the same object until something changes', () => {
  const live = fleet({ replicas: [{ id: 'a', url: 'http://127.0.0.1:9', engine: 'vllm' }] });
  const before = live.replica('a')!;
  assert.ok(Object.isFrozen(before));
  assert.equal(live.replica('a'), before);
  const end = live.acquire('a');
  assert.notEqual(live.replica('a'), before);
  assert.equal(before.inFlight, 0, 'an old snapshot does not change under a reader');
  end();
});

test('every new snapshot of a replica is named in the change feed, so decisions can skip the rest', () => {
  const replicas = ['a', 'b', 'c'].map((id, i) => ({ id, url: `http://127.0.0.1:${9 + i}`, engine: 'vllm' as const }));
  const live = fleet({ replicas });
  const scope: OutlierScope = {
    key: 'pool',
    replicas,
    outlier: {
      consecutive5xx: 1,
      consecutiveGatewayFailures: 1,
      baseEjectionMs: 1000,
      maxEjectionMs: 10_000,
      maxEjectionPercent: 100,
      panicThresholdPercent: 0,
    },
  };
  const ops: [string, () => void][] = [
    ['acquire a', () => void live.acquire('a')],
    ['release a', () => live.release('a')],
    ['drain b', () => void live.setDraining('b', true)],
    ['undrain b', () => void live.setDraining('b', false)],
    ['connect error on c', () => live.markFailure('c')],
    ['5xx ejects a', () => live.recordUpstream('a', 'status_5xx', scope)],
    ['c removed, d added', () => live.update([replicas[0], replicas[1], { id: 'd', url: 'http://127.0.0.1:20', engine: 'vllm' }])],
  ];
  for (const [what, op] of ops) {
    const ids = ['a', 'b', 'c', 'd'];
    const before = new Map(ids.map((id) => [id, live.replica(id)]));
    const count = live.changes.count;
    op();
    const named = new Set(live.changes.since(count));
    const moved = ids.filter((id) => live.replica(id) !== before.get(id));
    assert.ok(moved.length > 0, `${what}: changes something`);
    for (const id of moved) assert.ok(named.has(id), `${what}: ${id} changed but the feed does not name it`);
  }
});

test('update keeps the replicas that stay, starts new ones and forgets removed ones', async () => {
  const a = await engine(vllmPage(1, 0, 0.1));
  const b = await engine(vllmPage(2, 0, 0.2));
  const c = await engine(vllmPage(3, 0, 0.3));
  const live = fleet({
    replicas: [
      { id: 'a', url: a.url, engine: 'vllm' },
      { id: 'b', url: b.url, engine: 'vllm' },
    ],
    ...FAST,
  });
  live.start();
  await waitFor('a and b scraped', () => live.replica('a')?.running === 1 && live.replica('b')?.running === 2);
  const endA = live.acquire('a');
  live.setDraining('a', true);

  live.update([
    { id: 'c', url: c.url, engine: 'vllm' },
    { id: 'a', url: a.url, engine: 'vllm' },
  ]);
  assert.equal(live.replica('b'), undefined);
  assert.deepEqual(
    live.list().map((r) => r.id),
    ['c', 'a'],
    'in the order given',
  );
  const kept = live.replica('a')!;
  assert.deepEqual([kept.health, kept.inFlight, kept.running], ['draining', 1, 1], 'a kept its state');
  await waitFor('c scraped', () => live.replica('c')?.running === 3);

  const bRequests = b.metricsRequests;
  await new Promise((resolve) => setTimeout(resolve, 80));
  assert.equal(b.metricsRequests, bRequests, 'b is no longer scraped');

  live.update([{ id: 'a', url: c.url, engine: 'vllm' }]);
  assert.deepEqual(live.replica('a'), { health: 'unknown', inFlight: 0 }, 'a new URL is a new replica');
  endA(); // the old replica's request ends: the new one is not touched
  assert.equal(live.replica('a')!.inFlight, 0);
  await waitFor('new a scraped', () => live.replica('a')?.running === 3);

  assert.throws(
    () =>
      live.update([
        { id: 'x', url: a.url, engine: 'vllm' },
        { id: 'x', url: b.url, engine: 'vllm' },
      ]),
    /listed twice/,
  );
  assert.throws(() => live.update([{ id: 'x', url: 'not a url', engine: 'vllm' }]), /not a URL/);
  assert.throws(() => live.update([{ id: 'x', url: a.url, engine: 'tgi' as never }]), /unknown engine/);
});

test('scrapes of one replica never overlap, even when the engine is slower than the interval', async () => {
  const fake = await engine();
  fake.metricsDelayMs = 60;
  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST, scrapeIntervalMs: 10, requestTimeoutMs: 500 });
  live.start();
  await waitFor('four slow scrapes', () => fake.metricsRequests >= 4);
  assert.equal(fake.maxConcurrentMetrics, 1);
});

test('stop() leaves no timers or sockets behind, and start() may follow', async () => {
  const fake = await engine(vllmPage(1, 0, 0.1));
  const handles = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'TCPSocketWrap').length;
  await new Promise((resolve) => setTimeout(resolve, 10));
  const baseline = handles();

  const live = fleet({ replicas: [{ id: 'a', url: fake.url, engine: 'vllm' }], ...FAST });
  live.start();
  await waitFor('scraped', () => live.replica('a')?.running === 1);
  assert.ok(handles() > baseline, 'running: connections are open');
  await live.stop();
  await waitFor('all handles gone', () => handles() <= baseline, 1000);
  const stoppedAt = fake.metricsRequests;
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.equal(fake.metricsRequests, stoppedAt, 'nothing is scraped after stop()');

  fake.metrics = vllmPage(5, 0, 0.1);
  live.start();
  await waitFor('scraped after restart', () => live.replica('a')?.running === 5);
  await live.stop();
});

test('options are checked when the fleet is built', () => {
  const replicas = [{ id: 'a', url: 'http://127.0.0.1:9', engine: 'vllm' as const }];
  assert.throws(() => new LiveFleet({ replicas, scrapeIntervalMs: 0 }), /scrapeIntervalMs/);
  assert.throws(() => new LiveFleet({ replicas, failAfter: 0 }), /failAfter/);
  assert.throws(() => new LiveFleet({ replicas, recoverAfter: 1.5 }), /recoverAfter/);
  assert.throws(() => new LiveFleet({ replicas: [{ id: 'a', url: 'ftp://x', engine: 'vllm' }] }), /http/);
});
