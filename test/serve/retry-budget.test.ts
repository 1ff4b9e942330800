// The retry budget: retries in progress at most budget_percent of the pool's
// requests in flight, or min_concurrency, whichever is more.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RetryBudget } from '../../core/serve/retry-budget.ts';

const settings = { maxRetries: 2, budgetPercent: 20, minConcurrency: 2 };

test('min_concurrency retries at low load, a share of the requests in flight at high load', () => {
  const budget = new RetryBudget();
  for (let i = 0; i < 5; i++) budget.begin('p');
  assert.equal(budget.tryRetry('p', settings, false), true);
  assert.equal(budget.tryRetry('p', settings, false), true);
  assert.equal(budget.tryRetry('p', settings, false), false, '20% of 5 is 1, the minimum 2');
  assert.equal(budget.tryRetry('p', settings, true), true, 'a request already retrying keeps its slot');
  for (let i = 0; i < 15; i++) budget.begin('p');
  assert.equal(budget.tryRetry('p', settings, false), true, '20% of 20 is 4');
  assert.equal(budget.tryRetry('p', settings, false), true);
  assert.equal(budget.tryRetry('p', settings, false), false);
  assert.deepEqual(budget.inFlight('p'), { active: 20, retrying: 4 });
  budget.end('p', true);
  budget.end('p', false);
  assert.deepEqual(budget.inFlight('p'), { active: 18, retrying: 3 });
  assert.equal(budget.tryRetry('q', settings, false), false, 'an unknown pool has nothing in flight');
});
