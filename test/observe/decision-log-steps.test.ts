// The decision log bounds each entry's trace steps (core/observe/decision-log.ts);
// a step object shared by many requests (a policy's tenant, model, pool steps)
// is bounded once and its size remembered. Every entry must still show its
// own steps cut and count the same bytes, and a new step at the same place
// is bounded anew, never shown as the one before.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Decision } from '../../core/decide/decision.ts';
import { DecisionLog, MAX_STRING_CHARS } from '../../core/observe/decision-log.ts';

const rejected = (requestId: string, pool: { decidedBy: string; reason: string }, admit: { decidedBy: string; reason: string }): Decision => ({
  ok: false,
  rejection: { code: 'capacity', status: 503, type: 'service_unavailable_error', message: 'full' } as never,
  known: { requestId, status: 503, reason: 'capacity: full' },
  trace: { pool, admit } as never,
});

test('a trace step shared by requests is cut and counted in every entry; a new one at its place is bounded on its own', () => {
  const log = new DecisionLog({ capacity: 10 });
  const shared = { decidedBy: 'rule-a', reason: 'p'.repeat(5 * MAX_STRING_CHARS) };
  log.add(rejected('r1', shared, { decidedBy: 'admit', reason: 'x'.repeat(3 * MAX_STRING_CHARS) }));
  const one = log.usage().bytes;
  log.add(rejected('r2', shared, { decidedBy: 'admit', reason: 'y'.repeat(3 * MAX_STRING_CHARS) }));
  assert.equal(log.usage().bytes, 2 * one, 'the second entry counts the shared step as the first did');
  const other = { decidedBy: 'rule-b', reason: 'q'.repeat(2 * MAX_STRING_CHARS) };
  log.add(rejected('r3', other, { decidedBy: 'admit', reason: 'short' }));
  const [r3, r2, r1] = log.recent(3) as { trace: { pool: { decidedBy: string; reason: string }; admit: { reason: string } } }[];
  for (const entry of [r1, r2]) {
    assert.equal(entry.trace.pool.decidedBy, 'rule-a');
    assert.ok(entry.trace.pool.reason.startsWith('p'.repeat(MAX_STRING_CHARS)) && entry.trace.pool.reason.length < 2 * MAX_STRING_CHARS);
  }
  assert.ok(r2.trace.admit.reason.startsWith('y') && r2.trace.admit.reason.length < 2 * MAX_STRING_CHARS);
  assert.equal(r3.trace.pool.decidedBy, 'rule-b');
  assert.ok(r3.trace.pool.reason.startsWith('q') && r3.trace.pool.reason.length < 2 * MAX_STRING_CHARS);
  assert.equal(r3.trace.admit.reason, 'short');
});
