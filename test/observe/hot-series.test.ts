// The request path's counters and histograms (core/observe/hot-series.ts)
// skip prom-client's per-call label hashing: what /metrics shows must be
// exactly what prom-client itself shows for the same updates, through
// reset(), remove() and series made by its own inc()/observe() meanwhile.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram, Registry } from 'prom-client';
import { HotCounter, HotHistogram } from '../../core/observe/hot-series.ts';

function pair() {
  const plain = new Registry();
  const hot = new Registry();
  return {
    plain,
    hot,
    counters: [
      new Counter({ name: 'c_total', help: 'c', labelNames: ['model', 'pool', 'outcome'] as const, registers: [plain] }),
      new HotCounter({ name: 'c_total', help: 'c', labelNames: ['model', 'pool', 'outcome'] as const, registers: [hot] }),
    ] as const,
    histograms: [
      new Histogram({ name: 'h_seconds', help: 'h', labelNames: ['pool'] as const, buckets: [0.005, 0.01, 0.25, 1], registers: [plain] }),
      new HotHistogram({ name: 'h_seconds', help: 'h', labelNames: ['pool'] as const, buckets: [0.005, 0.01, 0.25, 1], registers: [hot] }),
    ] as const,
    unlabelled: [
      new Histogram({ name: 'd_seconds', help: 'd', buckets: [0.00001, 0.000025, 0.001], registers: [plain] }),
      new HotHistogram({ name: 'd_seconds', help: 'd', buckets: [0.00001, 0.000025, 0.001], registers: [hot] }),
    ] as const,
  };
}

test('hot counters and histograms expose exactly what prom-client does for the same updates', async () => {
  const { plain, hot, counters, histograms, unlabelled } = pair();
  // A series prom-client made first (a seeded zero) is the one the hot path adds to.
  counters[0].inc({ model: 'm', pool: 'p', outcome: 'ok' }, 0);
  counters[1].inc({ model: 'm', pool: 'p', outcome: 'ok' }, 0);
  for (let i = 0; i < 500; i++) {
    const model = `m${i % 3}`;
    const outcome = i % 5 === 0 ? 'engine_error' : 'ok';
    counters[0].inc({ model, pool: 'p', outcome }, i % 4);
    counters[1].add(i % 4, model, 'p', outcome);
    // Values on the bounds, between them and past the last one (only +Inf, sum and count grow).
    const seconds = [0.005, 0.007, 0.25, 3, 0][i % 5];
    histograms[0].observe({ pool: `p${i % 2}` }, seconds);
    histograms[1].record(seconds, `p${i % 2}`);
    unlabelled[0].observe(i * 1e-6);
    unlabelled[1].record(i * 1e-6);
  }
  counters[0].inc({ model: 'm', pool: 'p', outcome: 'ok' });
  counters[1].add(1, 'm', 'p', 'ok');
  assert.equal(await hot.metrics(), await plain.metrics());
  assert.match(await hot.metrics(), /h_seconds_bucket\{le="\+Inf",pool="p0"\} 250/);
});

test('after reset() and remove() the hot path counts into the new series, not the dropped ones', async () => {
  const { plain, hot, counters, histograms } = pair();
  for (const [c, h] of [
    [counters[0], histograms[0]],
    [counters[1], histograms[1]],
  ] as const) {
    c.inc({ model: 'm', pool: 'p', outcome: 'ok' });
    h.observe({ pool: 'p' }, 0.1);
  }
  counters[1].add(2, 'm', 'p', 'ok');
  counters[0].inc({ model: 'm', pool: 'p', outcome: 'ok' }, 2);
  histograms[1].record(0.1, 'p');
  histograms[0].observe({ pool: 'p' }, 0.1);
  for (const c of counters) c.reset();
  for (const h of histograms) h.remove({ pool: 'p' });
  counters[0].inc({ model: 'm', pool: 'p', outcome: 'ok' });
  counters[1].add(1, 'm', 'p', 'ok');
  histograms[0].observe({ pool: 'p' }, 0.002);
  histograms[1].record(0.002, 'p');
  const shown = await hot.metrics();
  assert.equal(shown, await plain.metrics());
  assert.match(shown, /c_total\{model="m",pool="p",outcome="ok"\} 1\n/);
  assert.match(shown, /h_seconds_count\{pool="p"\} 1\n/);
});

test('a hot counter refuses what prom-client refuses: a negative or non-finite amount', () => {
  const { counters, histograms } = pair();
  assert.throws(() => counters[1].add(-1, 'm', 'p', 'ok'));
  assert.throws(() => counters[1].add(Number.NaN, 'm', 'p', 'ok'));
  assert.throws(() => histograms[1].record(Number.POSITIVE_INFINITY, 'p'));
});
