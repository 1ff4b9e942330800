// Routers agree without talking: given the same policy and replica set, every
// router sends a conversation to the same version and the same replica, even
// with its own random seeds, its own in-flight counts and its own order of
// candidates. (test/quota/three-routers.test.ts checks the same with real
// servers.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEnv } from '../../core/decide/env.ts';
import { rendezvousOwner, rendezvousOrder } from '../../sdk/index.ts';
import { admitted, chosen, ManualFleet, policyFrom, route } from '../helpers/core.ts';

function policy(seed: string) {
  const replicas = (prefix: string) => [0, 1, 2, 3].map((i) => `      - { id: ${prefix}${i}, url: "http://127.0.0.1:${9000 + i}" }`).join('\n');
  const pool = (name: string, version: string, prefix: string) =>
    `  - name: ${name}\n    model: m\n    version: ${version}\n    strategies: [{ name: session-affinity, config: { bounded_load: 1.25 } }, power-of-two]\n    replicas:\n${replicas(prefix)}\n`;
  return policyFrom(
    {
      'models.yaml':
        'kind: models\nmodels:\n  - id: m\n    versions:\n      - { version: v1, weight: 80 }\n      - { version: v2, weight: 20, canary: true }\n',
      'pools.yaml': `kind: pools\npools:\n${pool('stable', 'v1', 'a')}${pool('canary', 'v2', 'b')}`,
      'tenants.yaml': 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free }\n',
    },
    seed,
  );
}

test('three routers with their own seeds and in-flight counts agree on every conversation’s version and replica', () => {
  const routers = [0, 1, 2].map((i) => {
    const fleet = new ManualFleet();
    for (const prefix of ['a', 'b']) {
      for (let r = 0; r < 4; r++) {
        // The engines' load, as every router scrapes it; a3 and b1 are busy.
        const busy = (prefix === 'a' && r === 3) || (prefix === 'b' && r === 1);
        const running = busy ? 40 : 4 + r;
        // Each router's own share of that load differs.
        fleet.set(`${prefix}${r}`, { running, queueDepth: 0, kvUsage: 0.3, inFlight: (running * (i + 1)) / 4 });
      }
    }
    return { snapshot: policy(`seed-${i}`), env: createEnv({ seed: 7919 * (i + 1), now: () => 0 }), fleet };
  });
  const versions = new Map<string, number>();
  const replicas = new Set<string>();
  for (let c = 0; c < 400; c++) {
    const placements = routers.map((r) => {
      const d = route(r.snapshot, { model: 'm', conversation: `conversation-${c}` }, r.fleet, r.env);
      if (!d.ok) return assert.fail(`conversation-${c}: ${chosen(d).reason}`);
      return `${chosen(d).version} ${admitted(d).value.replica}`;
    });
    assert.equal(new Set(placements).size, 1, `conversation-${c}: ${placements.join(' | ')}`);
    const [version, replica] = placements[0].split(' ');
    versions.set(version, (versions.get(version) ?? 0) + 1);
    replicas.add(replica);
  }
  // Not trivially equal: the canary takes about its weight, and the busy replicas are bounded.
  assert.ok(versions.get('v2')! > 40 && versions.get('v2')! < 130, `canary share of 400: ${versions.get('v2')}`);
  assert.deepEqual([...replicas].sort(), ['a0', 'a1', 'a2', 'b0', 'b2', 'b3'], 'the busy replicas (a3, b1) are bounded out on every router');
});

test('the rendezvous owner does not depend on the order a router lists its replicas in', () => {
  const ids = Array.from({ length: 12 }, (_, i) => `replica-${i}`);
  const idOf = (id: string) => id;
  for (let k = 0; k < 500; k++) {
    const key = `conversation-${k}`;
    const owner = rendezvousOwner(key, ids, idOf);
    assert.equal(rendezvousOwner(key, [...ids].reverse(), idOf), owner);
    assert.equal(rendezvousOwner(key, [...ids.slice(5), ...ids.slice(0, 5)], idOf), owner);
    assert.equal(rendezvousOrder(key, [...ids].reverse(), idOf)[0], owner);
  }
});
