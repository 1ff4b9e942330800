// Policies for experiments and benchmarks, generated in code: one 8B model
// behind the alias chat-small, an anonymous tenant without quotas, and the
// pools and strategy chains each experiment varies. They go through the
// same loader and checks as a policy directory.
import { stringify } from 'yaml';
import { compileInputs } from '../../core/policy/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import type { CompiledPolicy } from '../../core/policy/compiled.ts';
import type { StrategyRegistry } from '../../core/plugins/registry.ts';
import { PolicyError } from '../../core/diagnostics/problem.ts';

export const MODEL = 'llama-3-8b-instruct';
export const PROFILE = 'llama-3.1-8b-h100';

export type StrategySpec = string | { name: string; config?: Record<string, unknown> };

export interface PoolSpec {
  readonly name: string;
  readonly replicas: number;
  readonly strategies: readonly StrategySpec[];
  readonly maxModelLen?: number;
  readonly profile?: string;
  /** Adapters pinned (pre-loaded) per replica: adapters[i] for replica i. */
  readonly adapters?: readonly (readonly string[])[];
  readonly maxLoras?: number;
  readonly saturation?: { kv_usage?: number; queue_depth?: number };
  readonly capacity?: { queue_depth?: number; retry_after_s?: number };
  /** pools.yaml token_load and load_score (docs/policies.md, "Load in tokens"). */
  readonly tokenLoad?: { full_prefill_tokens: number };
  readonly loadScore?: Record<string, number>;
  /** pools.yaml shedding (docs/policies.md, "Shedding"); the loader's default when absent. */
  readonly shedding?: { mode: 'probabilistic' | 'off'; exponent?: number; scale?: number };
  /** Replicas publish KV cache events (pools.yaml kv_events). */
  readonly kvEvents?: boolean;
}

export interface FleetPolicySpec {
  readonly pools: readonly PoolSpec[];
  /** Pool rules: { name, fact, operator, value, pool }; the first pool is the default. */
  readonly rules?: readonly { name: string; fact: string; operator: string; value: unknown; pool: string }[];
  readonly settings?: Record<string, unknown>;
  /** Adapters of the anonymous tenant (all of them, on the 8B model). */
  readonly tenantAdapters?: readonly string[];
}

/** The policy files (name → YAML text). */
export function fleetPolicyFiles(spec: FleetPolicySpec): Record<string, string> {
  const models = {
    kind: 'models',
    models: [{ id: MODEL, versions: [{ version: 'v1' }] }],
    aliases: [{ name: 'chat-small', model: MODEL }],
  };
  const pools = {
    kind: 'pools',
    pools: spec.pools.map((p) => ({
      name: p.name,
      model: MODEL,
      version: 'v1',
      ...(p.maxModelLen ? { limits: { max_model_len: p.maxModelLen } } : {}),
      strategies: p.strategies,
      ...(p.saturation ? { saturation: p.saturation } : {}),
      ...(p.capacity ? { capacity: p.capacity } : {}),
      ...(p.shedding ? { shedding: p.shedding } : {}),
      ...(p.tokenLoad ? { token_load: p.tokenLoad } : {}),
      ...(p.loadScore ? { load_score: p.loadScore } : {}),
      replicas: Array.from({ length: p.replicas }, (_, i) => ({
        id: `${p.name}-${i}`,
        url: `emulate://${p.profile ?? PROFILE}`,
        ...(p.adapters?.[i]?.length ? { adapters: p.adapters[i] } : {}),
        ...(p.maxLoras !== undefined ? { max_loras: p.maxLoras } : {}),
        ...(p.kvEvents ? { kv_events: `tcp://127.0.0.1:${5557 + i}` } : {}),
      })),
    })),
  };
  const rules = {
    kind: 'rules',
    pool_rules: {
      default_pool: spec.pools[0].name,
      rules: (spec.rules ?? []).map((r, i) => ({
        name: r.name,
        priority: 100 - i,
        conditions: { all: [{ fact: r.fact, operator: r.operator, value: r.value }] },
        event: { type: 'route-pool', params: { pool: r.pool } },
      })),
    },
  };
  const tenants = {
    kind: 'tenants',
    anonymous: 'everyone',
    tenants: [
      {
        id: 'everyone',
        tier: 'standard',
        ...(spec.tenantAdapters?.length ? { adapters: spec.tenantAdapters.map((name) => ({ name, model: MODEL })) } : {}),
      },
    ],
  };
  const settings = { kind: 'settings', max_staleness_ms: 5000, scrape_interval_ms: 1000, ...spec.settings };
  return {
    'models.yaml': stringify(models),
    'pools.yaml': stringify(pools),
    'rules.yaml': stringify(rules),
    'tenants.yaml': stringify(tenants),
    'settings.yaml': stringify(settings),
  };
}

/** The compiled policy for the simulator, with the strategies of `registry`; each simulated router builds its own generation of it. */
export function fleetPolicy(spec: FleetPolicySpec, registry: StrategyRegistry): CompiledPolicy {
  const compiled = compileInputs(policyInputsFromTexts(fleetPolicyFiles(spec), { registry }));
  if (!compiled.policy) throw new PolicyError(compiled.problems);
  return compiled.policy;
}

/** The bundled policy's chain: session affinity, prefix affinity, then power of two. */
export function affinityChain(releaseThreshold = 0.85): StrategySpec[] {
  return [
    { name: 'session-affinity', config: { release_threshold: releaseThreshold } },
    { name: 'prefix-affinity', config: { release_threshold: releaseThreshold } },
    'power-of-two',
  ];
}

/** The default fleet of benchmarks: 4 replicas of the 8B profile, power of two with affinity. */
export const DEFAULT_FLEET: FleetPolicySpec = { pools: [{ name: 'general', replicas: 4, strategies: affinityChain() }] };
