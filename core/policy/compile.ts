// Turns schema-checked policy documents into a CompiledPolicy, checking what
// a schema can't: references between documents (an unknown model, pool,
// tenant or strategy), duplicates, weights, rules. Every problem is reported;
// nothing is built from a policy set that has one. Each kind of document has
// its stage in compile/. Compiling creates no strategy instance and needs no
// clock, seed, logger or KV index: those belong to the runtime, which builds a
// generation from the result (core/decide/generation.ts).
import { createHash } from 'node:crypto';
import type { StrategyRegistry } from '../plugins/registry.ts';
import { CompileContext, type CheckedSource } from './compile/context.ts';
import { checkVersionsServed, compileAliases, compileModels } from './compile/models.ts';
import { compilePools } from './compile/pools.ts';
import { compileCascades, compilePoolRules } from './compile/rules.ts';
import { compileSettings } from './compile/settings.ts';
import { compileTenants } from './compile/tenants.ts';
import type { CompiledPolicy } from './compiled.ts';
import { freezePolicy } from './freeze.ts';
import type { PolicySource } from './source.ts';
import type { PolicyProblem } from '../diagnostics/problem.ts';

export type { CheckedSource } from './compile/context.ts';

export interface CompileOptions {
  readonly registry: StrategyRegistry;
  /** The engine profiles an emulate:// replica may name: the CLI passes the emulator's, so that validate refuses what serve could not start. */
  readonly emulatedProfiles?: readonly string[];
}

export function compilePolicy(checked: readonly CheckedSource[], options: CompileOptions): { policy?: CompiledPolicy; problems: PolicyProblem[] } {
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
  const policy: CompiledPolicy = {
    hash: contentHash(checked.map((c) => c.source)),
    files: checked.map((c) => c.source.file),
    models: models.models,
    aliases,
    adapters: tenants.adapters,
    tenantsByKeyHash: tenants.tenantsByKeyHash,
    tenantsById: tenants.tenantsById,
    anonymousTenant: tenants.anonymousTenant,
    pools: pools.pools,
    replicas: pools.replicas,
    poolRules,
    settings,
  };
  return { problems: [], policy: freezePolicy(policy) };
}

function contentHash(sources: readonly PolicySource[]): string {
  const hash = createHash('sha256');
  for (const source of [...sources].sort((a, b) => (a.file < b.file ? -1 : 1))) {
    hash.update(source.file).update('\0').update(source.text).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}
