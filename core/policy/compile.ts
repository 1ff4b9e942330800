// Turns schema-checked policy documents into a Snapshot, checking what a
// schema can't: references between documents (an unknown model, pool,
// tenant or strategy), duplicates, weights, rules. Every problem is reported;
// nothing is built from a policy set that has one. Each kind of document has
// its stage in compile/.
import { createHash } from 'node:crypto';
import type { KvIndexView, Logger } from '../../sdk/index.ts';
import { plainChoices, poolsOfVersions, poolSteps, type PoolSteps } from '../decide/derived.ts';
import type { ModelChoice } from '../decide/model.ts';
import type { StrategyRegistry } from '../plugins/registry.ts';
import { CompileContext, type CheckedSource } from './compile/context.ts';
import { checkVersionsServed, compileAliases, compileModels } from './compile/models.ts';
import { compilePools, createStrategies } from './compile/pools.ts';
import { compileCascades, compilePoolRules } from './compile/rules.ts';
import { compileSettings } from './compile/settings.ts';
import { compileTenants } from './compile/tenants.ts';
import { versionKey, type Pool, type Snapshot } from './snapshot.ts';
import type { PolicySource } from './source.ts';
import type { PolicyProblem } from '../diagnostics/problem.ts';

export type { CheckedSource } from './compile/context.ts';

export interface CompileOptions {
  readonly registry: StrategyRegistry;
  readonly generation?: number;
  /** Seeds every strategy's random source: same seed, same picks. */
  readonly seed?: number | string;
  readonly now?: () => number;
  readonly log?: Logger;
  /** The snapshot being replaced: strategies may carry state over (exportState). */
  readonly previous?: Snapshot;
  /** The engines' KV cache contents (KV events), for strategies' ctx.kvIndex. */
  readonly kvIndex?: KvIndexView;
  /** The engine profiles an emulate:// replica may name: the CLI passes the emulator's, so that validate refuses what serve could not start. */
  readonly emulatedProfiles?: readonly string[];
}

const silentLog: Logger = { info() {}, warn() {} };

export function compilePolicy(checked: readonly CheckedSource[], options: CompileOptions): { snapshot?: Snapshot; problems: PolicyProblem[] } {
  const ctx = new CompileContext(checked, options.registry, options.emulatedProfiles);
  const settings = compileSettings(ctx);
  const models = compileModels(ctx);
  const rules = compileCascades(ctx, models); // before aliases, which name cascades
  const aliases = compileAliases(ctx, models, rules.cascades);
  const tenants = compileTenants(ctx, models, aliases, settings.priorityNames);
  const pools = compilePools(ctx, models);
  checkVersionsServed(ctx, models, pools.poolsByVersion);
  const poolRules = compilePoolRules(ctx, rules, pools.poolNames);
  if (ctx.problems.length) return { problems: ctx.problems };

  const finalPools = createStrategies(ctx, pools, { seed: options.seed ?? 1, now: options.now ?? Date.now, log: options.log ?? silentLog, previous: options.previous, kvIndex: options.kvIndex });
  if (!finalPools) return { problems: ctx.problems };
  const poolsByVersion = new Map<string, Pool[]>();
  for (const pool of finalPools) {
    const key = versionKey(pool.model, pool.version);
    poolsByVersion.set(key, [...(poolsByVersion.get(key) ?? []), pool]);
  }
  const steps = new Map<Pool, PoolSteps>();
  for (const pool of finalPools) steps.set(pool, poolSteps(pool, poolRules.rules));
  const snapshot: Snapshot = {
    generation: options.generation ?? 1,
    hash: contentHash(checked.map((c) => c.source)),
    files: checked.map((c) => c.source.file),
    models: models.models,
    aliases,
    adapters: tenants.adapters,
    tenantsByKeyHash: tenants.tenantsByKeyHash,
    tenantsById: tenants.tenantsById,
    anonymousTenant: tenants.anonymousTenant,
    poolsByVersion,
    pools: finalPools,
    replicas: pools.replicas,
    poolRules,
    settings,
    poolsOfVersion: poolsOfVersions(models.models, poolsByVersion),
    poolSteps: steps,
  };
  // What decide() can answer from the policy alone, answered now.
  for (const tenant of tenants.tenantsById.values()) {
    const table = tenant.plainChoices as Map<string, ModelChoice>;
    for (const [name, choice] of plainChoices(snapshot, tenant)) table.set(name, choice);
  }
  return { problems: [], snapshot };
}

function contentHash(sources: readonly PolicySource[]): string {
  const hash = createHash('sha256');
  for (const source of [...sources].sort((a, b) => (a.file < b.file ? -1 : 1))) {
    hash.update(source.file).update('\0').update(source.text).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}
