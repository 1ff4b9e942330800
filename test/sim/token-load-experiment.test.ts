// Experiment I (docs/experiments.md) on a small run: the direction of its
// result. With 100k-token prompts among short ones below capacity, the token
// valve (prefill in flight, counted by the router as serve counts it) must
// lower the short requests' p99 TTFT against the KV-usage valve alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenLoadRows } from '../../sim/experiments/token-load.ts';
import { experimentNamed } from '../../sim/experiments/registry.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

test("experiment token-load at 10 req/s: the token valve lowers short requests' p99 TTFT", { timeout: 120_000 }, () => {
  assert.equal(experimentNamed('token-load')?.letter, 'I');
  const rows = tokenLoadRows({ seed: 1, scale: 1, log: () => {}, registry: builtinRegistry }, 4000, [10]);
  const kv = rows.find((r) => r.valve === 'kv')!;
  const token = rows.find((r) => r.valve === 'token')!;
  assert.ok(Number(kv.long_requests) >= 20, `long requests in the run: ${kv.long_requests}`);
  assert.ok(
    Number(token.short_ttft_p99_ms) < 0.6 * Number(kv.short_ttft_p99_ms),
    `short p99 ${token.short_ttft_p99_ms} ms with the token valve, ${kv.short_ttft_p99_ms} ms with the KV valve`,
  );
  assert.equal(token.rejected_share, 0);
  assert.equal(kv.rejected_share, 0);
});
