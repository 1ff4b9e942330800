// The precise-prefix plugin in the simulator: every router reads the same
// engines' KV events, so three routers reach the prefix-cache hit rate one
// router does, and both beat session hashing when conversations share
// system prompts and the caches are under pressure.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PROFILES, type EngineProfile } from '../../sim/engine/profiles.ts';
import { fleetPolicy, type StrategySpec } from '../../sim/experiments/fleet-policy.ts';
import { simulate } from '../../sim/simulator/simulator.ts';
import { workloadFromSpec, type WorkloadSpec } from '../../sim/workload/load.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

// The 8B profile with a small cache: 40 system prompts of ~2k tokens overflow four of them.
const small: EngineProfile = { ...PROFILES['llama-3.1-8b-h100'], name: 'small-cache', numGpuBlocks: 1600, maxModelLen: 16_384 };
const workload: WorkloadSpec = {
  kind: 'workload',
  requests: 1200,
  arrivals: { process: 'poisson', rate: 20 },
  prompt_tokens: { type: 'uniform', min: 1800, max: 2600 },
  sessions: { fraction: 1, turns: { type: 'geometric', mean: 3 }, think_time_s: { type: 'exponential', mean: 3 }, max_context_tokens: 8000 },
  system_prompts: { count: 40, zipf: 0.6, tokens: { type: 'uniform', min: 1500, max: 2200 } },
};

function hitRate(strategies: StrategySpec[], routers: number, kvEvents: boolean): number {
  const result = simulate({
    policy: fleetPolicy({ pools: [{ name: 'general', replicas: 4, strategies, profile: small.name, kvEvents }] }, builtinRegistry),
    workload: workloadFromSpec('precise-prefix test', workload),
    seed: 3,
    routers,
    profiles: { [small.name]: small },
  });
  assert.equal(result.overall.completed, workload.requests);
  return result.overall.prefixHitRate;
}

describe('precise-prefix in the simulator', () => {
  it('three routers get the hit rate one router gets, ahead of session hashing', () => {
    const precise: StrategySpec[] = ['precise-prefix', 'prefix-affinity', 'power-of-two'];
    const one = hitRate(precise, 1, true);
    const three = hitRate(precise, 3, true);
    const session = hitRate(['session-affinity', 'power-of-two'], 3, false);
    // Not worse with three (each router's release valve sees a third of the in-flight load, so three balance a little differently).
    assert.ok(three >= one - 0.02, `3 routers ${three.toFixed(3)} vs 1 router ${one.toFixed(3)}`);
    assert.ok(three > session + 0.05, `precise ${three.toFixed(3)} vs session hashing ${session.toFixed(3)}`);
  });

  it('without KV events (no replica publishes) the plugin passes and the chain behaves as the approximate one', () => {
    // Round-robin, not power-of-two: a strategy's random stream depends on its place in the chain.
    const withPlugin = hitRate(['precise-prefix', 'prefix-affinity', 'round-robin'], 1, false);
    const without = hitRate(['prefix-affinity', 'round-robin'], 1, false);
    assert.equal(withPlugin, without);
  });
});
