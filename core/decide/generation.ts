// A generation: the decision runtime built from one compiled policy
// (core/policy/compiled.ts). It holds what deciding needs beyond the policy's
// plain data: the strategy instances of every pool's chain (handed their
// predecessors' state), their pick budgets, each pool's candidate cache, and
// what decide() would otherwise work out per request (pools by version, trace
// steps, plain model choices). A request keeps the generation it started on
// to its last byte (generation-leases.ts); a replaced one is disposed once the
// last of them ends. One compiled policy may back many generations: the
// simulator builds one per router, the shadow its own.
import { seededRandom, type KvIndexView, type Logger, type StrategyDefinition, type StrategyInstance } from '../../sdk/index.ts';
import type { PolicyProblem } from '../diagnostics/problem.ts';
import type { CompiledPolicy, ModelVersion, PoolSpec, TenantSpec } from '../policy/compiled.ts';
import { versionKey } from '../policy/compiled.ts';
import { getsOwnCandidates } from './own-candidates.ts';
import { PickBudget } from './budget.ts';
import { CandidateCache } from './candidates.ts';
import { plainChoices, poolsOfVersions, poolSteps, tenantSteps, type PoolSteps } from './derived.ts';
import type { ModelChosen } from './model.ts';
import type { StepTrace } from './trace.ts';

// The compiled policy's vocabulary, so that the layers above reach the policy through the runtime.
export * from '../policy/compiled.ts';

/** A tenant as decide() sees it: the policy's, with what is derived from it once per generation. */
export interface Tenant extends TenantSpec {
  /** The tenant's trace step by tenantStepSlot() (derived.ts). */
  readonly steps: readonly StepTrace[];
  /** The model choice of each name the tenant may ask for plainly. */
  readonly plainChoices: ReadonlyMap<string, ModelChosen>;
}

export interface StrategySlot {
  readonly name: string;
  readonly definition: StrategyDefinition<unknown>;
  readonly instance: StrategyInstance;
  /** Counted by commit(), read by decide(). */
  readonly budget: PickBudget;
  /** The strategy gets a copy of the candidates, not the shared frozen list (own-candidates.ts): worked out once, not per pick. */
  readonly ownCandidates: boolean;
}

/** A pool as decide() sees it: the policy's, with its created chain and its candidates. */
export interface Pool extends PoolSpec {
  readonly chain: readonly StrategySlot[];
  /** The pool's candidates as decide() last built them, reused while the fleet reports the same (candidates.ts). */
  readonly candidateCache: CandidateCache;
}

export interface Generation extends Omit<CompiledPolicy, 'tenantsByKeyHash' | 'tenantsById' | 'anonymousTenant' | 'pools'> {
  /** Counts reloads in one process; 1 for the first policy. */
  readonly generation: number;
  /** What this generation was built from. */
  readonly policy: CompiledPolicy;
  readonly tenantsByKeyHash: ReadonlyMap<string, Tenant>;
  readonly tenantsById: ReadonlyMap<string, Tenant>;
  readonly anonymousTenant?: Tenant;
  readonly pools: readonly Pool[];
  /** model@version → its pools, in policy order. */
  readonly poolsByVersion: ReadonlyMap<string, readonly Pool[]>;
  /** The pools of each model version object. */
  readonly poolsOfVersion: ReadonlyMap<ModelVersion, readonly Pool[]>;
  /** Each pool's shared trace steps. */
  readonly poolSteps: ReadonlyMap<Pool, PoolSteps>;
}

export interface GenerationOptions {
  /** The generation's number (default 1). */
  readonly generation?: number;
  /** Seeds every strategy's random source: same seed, same picks. */
  readonly seed?: number | string;
  readonly now?: () => number;
  readonly log?: Logger;
  /** The generation being replaced: strategies may carry state over (exportState). */
  readonly previous?: Generation;
  /** The engines' KV cache contents (KV events), for strategies' ctx.kvIndex. */
  readonly kvIndex?: KvIndexView;
}

export interface GenerationResult {
  readonly snapshot?: Generation;
  readonly problems: PolicyProblem[];
}

const silentLog: Logger = { info() {}, warn() {} };

/**
 * Builds a generation: creates every strategy instance, handing state over
 * from the previous generation. A plugin's create() may throw: that is a
 * problem reported where the policy names the strategy, and what was already
 * created is disposed (except instances that took over state, which the live
 * generation still shares).
 */
export function buildGeneration(policy: CompiledPolicy, options: GenerationOptions = {}): GenerationResult {
  const chains = createChains(policy, options);
  if ('problems' in chains) return { problems: chains.problems };
  const pools = policy.pools.map((spec, i): Pool => ({ ...spec, chain: chains.chains[i], candidateCache: new CandidateCache(spec.replicas) }));
  const poolsByVersion = new Map<string, Pool[]>();
  for (const pool of pools) {
    const key = versionKey(pool.model, pool.version);
    poolsByVersion.set(key, [...(poolsByVersion.get(key) ?? []), pool]);
  }
  const steps = new Map<Pool, PoolSteps>();
  for (const pool of pools) steps.set(pool, poolSteps(pool, policy.poolRules.rules));
  const choices: [Tenant, Map<string, ModelChosen>][] = [];
  const tenantOf = new Map<TenantSpec, Tenant>();
  for (const spec of policy.tenantsById.values()) {
    const table = new Map<string, ModelChosen>();
    const tenant: Tenant = { ...spec, steps: tenantSteps(spec.id, spec.tier), plainChoices: table };
    tenantOf.set(spec, tenant);
    choices.push([tenant, table]);
  }
  const remap = (tenants: ReadonlyMap<string, TenantSpec>) => new Map([...tenants].map(([key, spec]) => [key, tenantOf.get(spec)!]));
  const generation: Generation = {
    generation: options.generation ?? 1,
    policy,
    hash: policy.hash,
    files: policy.files,
    models: policy.models,
    aliases: policy.aliases,
    adapters: policy.adapters,
    replicas: policy.replicas,
    poolRules: policy.poolRules,
    settings: policy.settings,
    tenantsByKeyHash: remap(policy.tenantsByKeyHash),
    tenantsById: remap(policy.tenantsById),
    anonymousTenant: policy.anonymousTenant && tenantOf.get(policy.anonymousTenant),
    pools,
    poolsByVersion,
    poolsOfVersion: poolsOfVersions(policy.models, poolsByVersion),
    poolSteps: steps,
  };
  // What decide() can answer from the policy alone, answered now, before anyone holds the generation.
  for (const [tenant, table] of choices) for (const [name, choice] of plainChoices(generation, tenant)) table.set(name, choice);
  return { snapshot: generation, problems: [] };
}

function createChains(policy: CompiledPolicy, options: GenerationOptions): { chains: StrategySlot[][] } | { problems: PolicyProblem[] } {
  const seed = options.seed ?? 1;
  const now = options.now ?? Date.now;
  const log = options.log ?? silentLog;
  const previousSlots = new Map<string, StrategySlot>();
  for (const pool of options.previous?.pools ?? []) pool.chain.forEach((slot, i) => previousSlots.set(pool.strategies[i].slotKey, slot));
  const problems: PolicyProblem[] = [];
  const created: { instance: StrategyInstance; tookState: boolean }[] = [];
  const chains = policy.pools.map((pool) => {
    const chain: StrategySlot[] = [];
    for (const { name, label, definition, config, slotKey, at } of pool.strategies) {
      const previous = previousSlots.get(slotKey);
      // Same strategy and version in the same place: the state's shape is the one this code knows.
      const sameCode =
        previous !== undefined &&
        (previous.definition === definition || (previous.definition.name === definition.name && previous.definition.version === definition.version));
      let carryOver: unknown;
      if (sameCode) {
        try {
          carryOver = previous.instance.exportState?.();
        } catch (error) {
          log.warn(`strategy "${name}": exportState() threw; the new instance starts empty`, {
            pool: pool.key,
            error: (error as Error)?.message ?? String(error),
          });
        }
      }
      try {
        const instance = definition.create(structuredClone(config), {
          random: seededRandom(`${seed}:${slotKey}`),
          now,
          log,
          pool: pool.name,
          loadScoreWeights: pool.weights,
          previousState: carryOver,
          kvIndex: options.kvIndex,
        });
        created.push({ instance, tookState: carryOver !== undefined });
        chain.push({ name, definition, instance, budget: new PickBudget(), ownCandidates: getsOwnCandidates(definition) });
      } catch (error) {
        problems.push({ ...at, message: `${label}: create() threw: ${(error as Error)?.message ?? String(error)}` });
      }
    }
    return chain;
  });
  if (problems.length === 0) return { chains };
  for (const { instance, tookState } of created) {
    if (tookState) continue;
    try {
      instance.dispose?.();
    } catch {
      // Never used; nothing to report.
    }
  }
  return { problems };
}

/** Every strategy instance of a generation, for disposal when it is replaced. */
export function strategyInstances(generation: Generation): StrategyInstance[] {
  return generation.pools.flatMap((pool) => pool.chain.map((slot) => slot.instance));
}
