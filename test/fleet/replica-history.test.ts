// The Fleet tab's history (core/fleet/replica-history.ts): bounded per
// replica, oldest first, and a replica gone from the fleet is forgotten.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HISTORY_SAMPLES, ReplicaHistory } from '../../core/fleet/replica-history.ts';
import type { ReplicaReport } from '../../core/fleet/watched-replica.ts';

const report = (id: string, inFlight: number): ReplicaReport =>
  ({ id, inFlight, queueDepth: 1, kvUsage: 0.5, prefixCacheHitRatio: null }) as unknown as ReplicaReport;

test('the history keeps the last samples of each listed replica, oldest first, and forgets a replica that left', () => {
  const history = new ReplicaHistory(5000);
  for (let i = 0; i < HISTORY_SAMPLES + 30; i++) history.record(i * 5000, [report('a', i), report('b', 2 * i)]);
  const { intervalMs, replicas } = history.json();
  assert.equal(intervalMs, 5000);
  const a = replicas.find((r) => r.id === 'a')!;
  assert.equal(a.inFlight.length, HISTORY_SAMPLES);
  assert.equal(a.inFlight[0], 30);
  assert.equal(a.inFlight.at(-1), HISTORY_SAMPLES + 29);
  assert.equal(a.at.length, HISTORY_SAMPLES);
  assert.deepEqual(a.hitRate.slice(0, 2), [null, null], 'unknown stays null, not 0');
  history.record(1e9, [report('a', 0)]);
  assert.deepEqual(
    history.json().replicas.map((r) => r.id),
    ['a'],
  );
});
