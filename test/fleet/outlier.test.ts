// Outlier detection on its own: thresholds, the growing back-off and its
// decay, and returns only after the back-off.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OUTLIER_DEFAULTS, OutlierDetector, type OutlierSettings } from '../../core/fleet/outlier.ts';

const settings: OutlierSettings = { ...OUTLIER_DEFAULTS, consecutive5xx: 3, consecutiveGatewayFailures: 2, baseEjectionMs: 1000, maxEjectionMs: 2500 };

test('consecutive 5xx and gateway failures have their own thresholds; a success starts the count over', () => {
  const d = new OutlierDetector();
  assert.equal(d.record('status_5xx', settings), false);
  assert.equal(d.record('status_5xx', settings), false);
  assert.equal(d.record('success', settings), false);
  assert.equal(d.record('status_5xx', settings), false);
  assert.equal(d.record('status_5xx', settings), false);
  assert.equal(d.record('status_5xx', settings), true, 'three 5xx in a row');
  const g = new OutlierDetector();
  assert.equal(g.record('timeout', settings), false);
  assert.equal(g.record('connect', settings), true, 'two gateway failures in a row');
  const mixed = new OutlierDetector();
  mixed.record('status_5xx', settings);
  mixed.record('protocol', settings);
  assert.equal(mixed.record('status_5xx', settings), true, 'every failure counts towards consecutive_5xx');
});

test('the back-off is base × recent ejections, capped, and decays while back in rotation', () => {
  const d = new OutlierDetector();
  let now = 1_000_000;
  const cycle = () => {
    const e = d.eject('timeout', 'x', now, settings);
    assert.equal(d.healthy(e.until - 1), undefined, 'not before its time');
    now = e.until;
    assert.equal(d.healthy(now), e);
    return e.until - e.ejectedAt;
  };
  assert.equal(cycle(), 1000);
  assert.equal(cycle(), 2000);
  assert.equal(cycle(), 2500, 'capped at max');
  assert.equal(d.ejection, undefined);
  now += 2000; // two base intervals in rotation: three recent ejections become one
  assert.equal(cycle(), 2000);
  now += 60_000;
  assert.equal(cycle(), 1000, 'forgotten after a long healthy time');
});

test('failures while ejected do not eject again; counts start over on ejection', () => {
  const d = new OutlierDetector();
  d.record('timeout', settings);
  assert.equal(d.record('timeout', settings), true);
  d.eject('timeout', 'no headers', 0, settings);
  assert.equal(d.consecutiveGatewayFailures, 0);
  assert.equal(d.record('timeout', settings), false);
  assert.equal(d.record('timeout', settings), false);
});
