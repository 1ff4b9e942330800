// Shutdown never hangs on one part: a part that has not closed a while past
// its grace is logged by name and the parts after it still close.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Lifetime } from '../../core/serve/lifetime.ts';

function recording() {
  const errors: { fields: Record<string, unknown>; message: string }[] = [];
  return { errors, log: { error: (fields: object, message: string) => errors.push({ fields: fields as Record<string, unknown>, message }) } };
}

test('a part that never closes is logged by name after its grace and the slack, and the parts after it still close', async () => {
  const { errors, log } = recording();
  const lifetime = new Lifetime(log, 200);
  const closed: string[] = [];
  lifetime.own('replicas', () => closed.push('replicas'));
  lifetime.own('upstream pools', () => new Promise(() => {}));
  lifetime.own('listener', async () => {
    closed.push('listener');
  });
  const started = performance.now();
  await lifetime.close(100);
  const tookMs = performance.now() - started;
  assert.deepEqual(closed, ['listener', 'replicas'], 'newest first; the one that hangs is passed');
  assert.ok(tookMs >= 290 && tookMs < 5_000, `waited its grace and the slack: ${Math.round(tookMs)} ms`);
  assert.equal(errors.length, 1);
  assert.equal(errors[0].fields.part, 'upstream pools');
  assert.equal(errors[0].fields.waitedMs, 300);
  assert.match(errors[0].message, /did not close in time/);
});

test('a part that fails is logged, the rest close, and close() rejects with that failure once all are done', async () => {
  const { errors, log } = recording();
  const lifetime = new Lifetime(log, 200);
  const closed: string[] = [];
  lifetime.own('first', () => closed.push('first'));
  lifetime.own('broken', () => Promise.reject(new Error('socket already gone')));
  lifetime.own('watchdog', () => closed.push('watchdog'), { last: true });
  await assert.rejects(lifetime.close(0), /socket already gone/);
  assert.deepEqual(closed, ['first', 'watchdog']);
  assert.equal(errors[0].fields.part, 'broken');
});

test('parts that close at once are not held back by the deadline', async () => {
  const lifetime = new Lifetime(recording().log, 60_000);
  lifetime.own('a', async () => {});
  const started = performance.now();
  await lifetime.close(10_000);
  assert.ok(performance.now() - started < 1_000);
});
