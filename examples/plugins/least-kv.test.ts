// The example plugin's own tests, as its author would write them: the
// conformance suite, then its behaviour in a few lines each.
// Run: node --import tsx --test examples/plugins/least-kv.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertConformance, context, expectPick, fleet, request, resolveConfig } from '../../sdk/testkit/index.ts';
import leastKv from './least-kv.ts';

const create = (config = {}, ctx = context()) => leastKv.create(resolveConfig(leastKv, config).config, ctx);

test('least-kv passes the conformance suite', () => {
  assertConformance(leastKv);
});

test('picks the replica with the most free KV cache', () => {
  const result = create().pick(
    request(),
    fleet(3, (i) => ({ kvUsage: [0.7, 0.2, 0.5][i] })),
  );
  assert.equal(expectPick(result).replica, 'r1');
});

test('counts requests it sent since the last scrape: no herding on one stale "emptiest" replica', () => {
  const ctx = context();
  const strategy = create({ per_request_kv: 0.05 }, ctx);
  // Signals scraped 1 s ago: r0 looked a little emptier then.
  const replicas = fleet(2, (i) => ({ kvUsage: [0.3, 0.36][i], signals: { ageMs: 1000 } }));
  const picks = [];
  for (let n = 0; n < 4; n++) {
    const { replica } = expectPick(strategy.pick(request(), replicas));
    strategy.onRouted?.(request(), replica);
    picks.push(replica);
    ctx.advance(10);
  }
  assert.deepEqual(picks, ['r0', 'r0', 'r1', 'r0']);
});

test('passes when every candidate is past max_kv', () => {
  const result = create({ max_kv: 0.8 }).pick(request(), fleet(2, { kvUsage: 0.85 }));
  assert.equal(result && 'pass' in result && result.pass, true);
});

test('what it sent carries over to the instance that replaces it on a reload', () => {
  const ctx = context();
  const old = create({ per_request_kv: 0.5 }, ctx);
  old.onRouted?.(request(), 'r0');
  const successor = create({ per_request_kv: 0.5 }, context({ previousState: old.exportState?.() }));
  const replicas = fleet(2, (i) => ({ kvUsage: [0.1, 0.2][i], signals: { ageMs: Infinity } }));
  assert.equal(expectPick(successor.pick(request(), replicas)).replica, 'r1', 'r0 has a request in flight the scrape has not shown');
});
