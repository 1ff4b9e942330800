import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { affinityChain, fleetPolicy, type FleetPolicySpec } from '../../sim/experiments/fleet-policy.ts';
import { segregationPolicy, longContextWorkload } from '../../sim/experiments/long-context.ts';
import { loraPolicy, loraWorkload } from '../../sim/experiments/lora.ts';
import { PolicyError } from '../../core/diagnostics/problem.ts';
import { SimError } from '../../sim/simulator/errors.ts';
import { simulate, type SimOptions } from '../../sim/simulator/simulator.ts';
import { workloadFromSpec, WorkloadError, type WorkloadSpec } from '../../sim/workload/load.ts';
import { builtinRegistry } from '../helpers/builtins.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import type { StrategyDefinition } from '../../sdk/index.ts';

const chat = (requests: number, rate: number, extra: Partial<WorkloadSpec> = {}): WorkloadSpec =>
  ({
    kind: 'workload',
    requests,
    arrivals: { rate },
    system_prompts: { count: 20, zipf: 1, tokens: { type: 'uniform', min: 200, max: 800 } },
    ...extra,
  }) as WorkloadSpec;

function run(policy: FleetPolicySpec, workload: WorkloadSpec, extra: Partial<SimOptions> = {}) {
  return simulate({ policy: fleetPolicy(policy, builtinRegistry), workload: workloadFromSpec('test workload', workload), seed: 1, ...extra });
}

describe('simulate', () => {
  it('the same seed gives the same result, to the byte; another seed does not', () => {
    const dirs = [0, 1, 2].map(() => mkdtempSync(join(tmpdir(), 'sim-seed-')));
    const policy = { pools: [{ name: 'general', replicas: 3, strategies: affinityChain() }] };
    const workload = chat(1500, 80, { sessions: { fraction: 0.5, think_time_s: 1 } });
    const a = run(policy, workload, { outDir: dirs[0] });
    const b = run(policy, workload, { outDir: dirs[1] });
    const c = run(policy, workload, { outDir: dirs[2], seed: 2 });
    assert.deepEqual(a, { ...b, files: a.files });
    const csv = (dir: string) => readFileSync(join(dir, 'requests.csv'), 'utf8');
    assert.equal(csv(dirs[0]), csv(dirs[1]));
    assert.notEqual(csv(dirs[0]), csv(dirs[2]));
    assert.notDeepEqual(a.overall.ttftMs, c.overall.ttftMs);
    assert.equal(a.overall.completed, 1500);
    assert.equal(csv(dirs[0]).trim().split('\n').length, 1501, 'a header and one row per request');
  });

  it('session affinity beats random on prefix hit rate in a multi-turn workload', () => {
    const workload = chat(3000, 60, { sessions: { fraction: 1, turns: { type: 'geometric', mean: 6 }, think_time_s: { type: 'exponential', mean: 2 } } });
    const affinity = run({ pools: [{ name: 'general', replicas: 4, strategies: ['session-affinity', 'power-of-two'] }] }, workload);
    const random = run({ pools: [{ name: 'general', replicas: 4, strategies: ['random'] }] }, workload);
    assert.ok(
      affinity.overall.prefixHitRate > random.overall.prefixHitRate + 0.15,
      `affinity ${affinity.overall.prefixHitRate.toFixed(3)} vs random ${random.overall.prefixHitRate.toFixed(3)}`,
    );
  });

  it('segregating 64k-token requests lowers the other requests’ p99 TTFT', () => {
    const workload = longContextWorkload(1500, 15);
    const mixed = run(segregationPolicy(false, 'power-of-two'), workload);
    const segregated = run(segregationPolicy(true, 'power-of-two'), workload);
    const short = (r: typeof mixed) => r.classes['standard'].ttftMs.p99;
    assert.ok(mixed.classes['long-context'].completed > 10);
    assert.ok(short(segregated) * 5 < short(mixed), `segregated ${short(segregated)} ms vs one pool ${short(mixed)} ms`);
    assert.ok(segregated.pools['long-context'].completed === segregated.classes['long-context'].completed, 'every long request went to its pool');
  });

  it('adapter affinity lowers the distinct adapters per batch', () => {
    const workload = loraWorkload(2000, 60);
    const spread = run(loraPolicy(['power-of-two'], false), workload);
    const pinned = run(loraPolicy(['lora-affinity', 'power-of-two'], true), workload);
    assert.ok(pinned.overall.distinctAdaptersPerBatch! <= 5, `pinned ${pinned.overall.distinctAdaptersPerBatch}`);
    assert.ok(spread.overall.distinctAdaptersPerBatch! > 10, `spread ${spread.overall.distinctAdaptersPerBatch}`);
  });

  it('reports per pool, tenant and class, and rejections by reason', () => {
    const r = run(segregationPolicy(true, 'power-of-two'), longContextWorkload(600, 10));
    assert.deepEqual(Object.keys(r.pools), ['general', 'long-context']);
    assert.deepEqual(Object.keys(r.tenants), ['everyone']);
    assert.deepEqual(Object.keys(r.classes), ['long-context', 'standard']);
    assert.equal(r.overall.requests, r.pools.general.requests + r.pools['long-context'].requests);
    // A prompt too long for every pool is refused by the router, and counted by reason.
    const tooLong = run(segregationPolicy(true, 'power-of-two'), { ...longContextWorkload(600, 10), long_context: { fraction: 0.05, prompt_tokens: 200_000 } });
    assert.ok(tooLong.overall.rejections.context_length_exceeded > 10, JSON.stringify(tooLong.overall.rejections));
  });

  it('excluding saturated replicas refuses requests under bursts that deprioritizing absorbs', () => {
    const workload = chat(3000, 160, { arrivals: { process: 'gamma', rate: 160, cv: 4 } });
    const policy = { pools: [{ name: 'general', replicas: 4, strategies: ['power-of-two'] }] };
    const deprioritize = run(policy, workload);
    const exclude = run(policy, workload, { excludeSaturated: true });
    assert.equal(deprioritize.overall.rejected, 0);
    assert.ok((exclude.overall.rejections.no_healthy_replica ?? 0) > 0);
  });

  it('several routers with stale load data herd; least-load suffers more than random', () => {
    const workload = chat(6000, 180);
    const policy = (s: string) => ({ pools: [{ name: 'general', replicas: 4, strategies: [s] }], settings: { max_staleness_ms: 1_000_000 } });
    const options = { routers: 8, scrapeIntervalMs: 5000 };
    const least = run(policy('least-load'), workload, options);
    const random = run(policy('random'), workload, options);
    assert.ok(least.overall.ttftMs.p50 > 2 * random.overall.ttftMs.p50, `least-load ${least.overall.ttftMs.p50} vs random ${random.overall.ttftMs.p50}`);
  });
});

describe('simulate: configurations that cannot make progress are errors, never hangs', () => {
  const workload = chat(50, 10);

  it('a policy without replicas is refused as the policy it is, at its place in pools.yaml', () => {
    assert.throws(
      () => run({ pools: [{ name: 'general', replicas: 0, strategies: ['random'] }] }, workload),
      (e: unknown) => e instanceof PolicyError && /pools\.yaml:\d+:\d+: pool "general" .* has no replicas/.test(e.message),
    );
  });

  it('a fleet that refuses every request', () => {
    // Every request uses an adapter, and no replica has a LoRA slot.
    const policy = { pools: [{ name: 'general', replicas: 2, strategies: ['random'], maxLoras: 0 }], tenantAdapters: ['a0'] };
    assert.throws(
      () => run(policy, chat(50, 10, { adapters: { names: ['a0'] } })),
      (e: unknown) => e instanceof SimError && /no request completed: all 50 were rejected \(engine_rejected: 50\)/.test(e.message),
    );
  });

  it('a strategy with onCompleted is told of every completed request, on the replica it was routed to', () => {
    // The simulator keeps a request's routing handles only for such a chain: this is the chain that needs them.
    const routed = new Map<string, string>();
    const told: string[] = [];
    const tracker: StrategyDefinition = {
      name: 'completion-tracker',
      version: '1.0.0',
      sdk: '^1',
      create: () => ({
        pick: () => ({ pass: true, reason: 'only listens' }),
        onRouted: (request, replica) => void routed.set(request.id, replica),
        onCompleted: (request, replica, ok) => {
          assert.equal(ok, true);
          assert.equal(replica, routed.get(request.id), `request ${request.id}`);
          assert.ok(request.prefixHashes.length > 0, 'the routed request as the strategies saw it');
          told.push(request.id);
        },
      }),
    };
    const registry = registryOf([...BUILTIN_STRATEGIES, tracker]);
    const policy = fleetPolicy({ pools: [{ name: 'general', replicas: 2, strategies: ['completion-tracker', 'power-of-two'] }] }, registry);
    const result = simulate({ policy, workload: workloadFromSpec('w', chat(300, 40)), seed: 1 });
    assert.equal(result.overall.completed, 300);
    assert.equal(told.length, 300);
    assert.equal(new Set(told).size, 300, 'each once');
  });

  it('a workload that sends nothing', () => {
    const none = { kind: 'workload', duration_s: 0.001, arrivals: { rate: 0.01 } } as WorkloadSpec;
    assert.throws(
      () => run({ pools: [{ name: 'general', replicas: 1, strategies: ['random'] }] }, none),
      (e: unknown) => e instanceof SimError && /sends no requests/.test(e.message),
    );
  });

  it('a replica with a real url and no profile to simulate it as', () => {
    const compiled = fleetPolicy({ pools: [{ name: 'general', replicas: 1, strategies: ['random'] }] }, builtinRegistry);
    const replica = { ...compiled.pools[0].replicas[0], url: 'http://10.0.0.7:8000' };
    const policy: SimOptions['policy'] = { ...compiled, pools: [{ ...compiled.pools[0], replicas: [replica] }] };
    assert.throws(() => simulate({ policy, workload: workloadFromSpec('w', workload) }), /is a real engine: .*--default-profile/);
    assert.equal(simulate({ policy, workload: workloadFromSpec('w', workload), defaultProfile: 'llama-3.1-8b-h100' }).overall.completed, 50);
  });

  it('a workload naming what the policy lacks is an error located in the workload', () => {
    const policy = { pools: [{ name: 'general', replicas: 1, strategies: ['random'] }] };
    assert.throws(
      () => run(policy, chat(10, 10, { models: [{ name: 'chat-large' }] })),
      (e: unknown) => e instanceof WorkloadError && e.problems[0].message === 'models[0].name: the policy has no model, alias or adapter named "chat-large"',
    );
    assert.throws(
      () => run(policy, chat(10, 10, { tenants: [{ tenant: 'acme' }] })),
      (e: unknown) => e instanceof WorkloadError && /no tenant "acme" in the policy \(known: everyone\)/.test(e.message),
    );
  });
});
