// A pool's base latency is the 10th percentile of its last 64 residuals
// (core/fleet/base-latency.ts), kept sorted as each stream adds one: over a
// long run of residuals (ties, zeros, clamped stalls) it must be what sorting
// the last 64 gives, at every step.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BaseLatency } from '../../core/fleet/base-latency.ts';

test('the base latency is the 10th percentile of the last 64 residuals at every step, ties and clamps included', () => {
  const base = new BaseLatency();
  const residuals: number[] = [];
  let x = 7;
  for (let i = 0; i < 3000; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    // Ties (a small range), faster-than-estimated first tokens (residual 0) and stalls past the clamp.
    const firstTokenMs = i % 97 === 0 ? 10_000_000 : i % 7 === 0 ? 1 : 40 + (x % 50);
    base.record('p', firstTokenMs, 30);
    residuals.push(Math.min(600_000, Math.max(0, firstTokenMs - 30)));
    const window = residuals.slice(-64).sort((a, b) => a - b);
    const expected = window.length < 3 ? undefined : window[Math.floor((window.length - 1) * 0.1)];
    assert.equal(base.baseMs('p'), expected, `after ${i + 1} streams`);
  }
});
