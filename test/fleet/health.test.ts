import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HealthTracker, type CheckOutcome } from '../../core/fleet/health.ts';

function after(outcomes: CheckOutcome[], failAfter = 2, recoverAfter = 2): HealthTracker {
  const tracker = new HealthTracker({ failAfter, recoverAfter });
  for (const outcome of outcomes) tracker.observe(outcome);
  return tracker;
}

test('a fresh replica is unknown, and ready on its first good answer', () => {
  assert.equal(after([]).health, 'unknown');
  assert.equal(after(['ok']).health, 'ready');
});

test('one missed check does not pull a replica; failAfter consecutive ones do', () => {
  assert.equal(after(['ok', 'error']).health, 'ready');
  assert.equal(after(['ok', 'error', 'error']).health, 'failing');
  assert.equal(after(['ok', 'error', 'ok', 'error']).health, 'ready', 'not consecutive');
  assert.equal(after(['ok', 'error', 'error'], 3).health, 'ready');
});

test('a failing replica comes back only after recoverAfter consecutive good answers', () => {
  assert.equal(after(['ok', 'error', 'error', 'ok']).health, 'failing');
  assert.equal(after(['ok', 'error', 'error', 'ok', 'ok']).health, 'ready');
  assert.equal(after(['ok', 'error', 'error', 'ok', 'error', 'ok']).health, 'failing', 'a failure restarts the count');
  assert.equal(after(['ok', 'error', 'error', 'ok', 'ok', 'ok'], 2, 3).health, 'ready');
});

test('503 before the replica was ever ready means loading: not_ready at once, ready on the first 200', () => {
  assert.equal(after(['unready']).health, 'not_ready');
  assert.equal(after(['unready', 'unready', 'unready']).health, 'not_ready', 'loading is not failing');
  assert.equal(after(['unready', 'ok']).health, 'ready');
});

test('503 from a replica that served before counts as a failure (vLLM says 503 when its engine died)', () => {
  assert.equal(after(['ok', 'unready']).health, 'ready');
  assert.equal(after(['ok', 'unready', 'unready']).health, 'failing');
});

test('a replica never reached turns failing; once it answers it has to prove itself', () => {
  assert.equal(after(['error']).health, 'unknown');
  assert.equal(after(['error', 'error']).health, 'failing');
  assert.equal(after(['error', 'error', 'ok']).health, 'failing');
  assert.equal(after(['error', 'error', 'ok', 'ok']).health, 'ready');
  assert.equal(after(['error', 'error', 'unready']).health, 'not_ready', 'answering now, still loading');
});

test('observe reports each change once, with where it came from', () => {
  const tracker = new HealthTracker({ failAfter: 2, recoverAfter: 1 });
  assert.deepEqual(tracker.observe('ok'), { from: 'unknown', to: 'ready' });
  assert.equal(tracker.observe('ok'), undefined);
  assert.equal(tracker.observe('error'), undefined);
  assert.deepEqual(tracker.observe('error'), { from: 'ready', to: 'failing' });
  assert.equal(tracker.consecutiveFailures, 2);
  assert.deepEqual(tracker.observe('ok'), { from: 'failing', to: 'ready' });
  assert.equal(tracker.consecutiveFailures, 0);
  assert.equal(tracker.consecutiveSuccesses, 1);
});
