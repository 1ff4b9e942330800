import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogHistogram } from '../../sim/simulator/log-histogram.ts';
import { seededRandom } from '../../sdk/index.ts';

describe('LogHistogram', () => {
  it('reads percentiles within 1% of the exact order statistics, in fixed memory', () => {
    const random = seededRandom(7);
    const h = new LogHistogram();
    const values: number[] = [];
    for (let i = 0; i < 20_000; i++) {
      const v = Math.exp(3 + 2 * (random() + random() + random() - 1.5));
      values.push(v);
      h.record(v);
    }
    values.sort((a, b) => a - b);
    for (const q of [0.5, 0.9, 0.99, 0.999]) {
      const exact = values[Math.ceil(q * values.length) - 1];
      assert.ok(Math.abs(h.quantile(q) - exact) / exact < 0.01, `q${q}: ${h.quantile(q)} vs ${exact}`);
    }
    assert.equal(h.count, 20_000);
    assert.equal(h.max, values[values.length - 1]);
    assert.ok(Math.abs(h.mean - values.reduce((a, b) => a + b, 0) / values.length) < 1e-6);
  });

  it('merges, ignores NaN, and is NaN when empty', () => {
    const a = new LogHistogram();
    const b = new LogHistogram();
    assert.ok(Number.isNaN(a.quantile(0.5)));
    a.record(NaN);
    for (let i = 1; i <= 100; i++) (i % 2 ? a : b).record(i);
    a.merge(b);
    assert.equal(a.count, 100);
    assert.ok(Math.abs(a.quantile(0.5) - 50) <= 0.5);
  });
});
