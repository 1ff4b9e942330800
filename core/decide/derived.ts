// What decide() derives from a policy, computed once when a generation is
// built (generation.ts) instead of cached at request time: a request then
// only looks its answers up. Shared trace steps matter beyond
// speed: the decision log keeps a thousand traces, and the GC copies every
// byte of them, so a step that is the same for many requests is one object.
import type { Generation, ModelVersion, Pool, Tenant } from './generation.ts';
import type { RuleSet } from '../rules/compile.ts';
import type { DecideEnv } from './env.ts';
import { resolveModel, type ModelChosen } from './model.ts';
import type { StepTrace } from './trace.ts';

/** The tenant step, by slot: (keyed ? 2 : 0) + (batch ? 1 : 0). */
export function tenantSteps(id: string, tier: string): readonly StepTrace[] {
  const step = (keyed: boolean, priority: string): StepTrace =>
    Object.freeze({ decidedBy: keyed ? 'API key' : 'anonymous tenant', reason: `${id} (${tier})`, facts: Object.freeze({ priority }) });
  return Object.freeze([step(false, 'interactive'), step(false, 'batch'), step(true, 'interactive'), step(true, 'batch')]);
}

export function tenantStepSlot(keyed: boolean, batch: boolean): number {
  return (keyed ? 2 : 0) + (batch ? 1 : 0);
}

/** How a pool was chosen when nothing was skipped: one step per way, per pool. */
export interface PoolSteps {
  /** Pool rule name → the step when that rule chose this pool. */
  readonly byRule: ReadonlyMap<string, StepTrace>;
  /** No rule matched: the policy's default pool. */
  readonly byDefault: StepTrace;
  /** No rule's pool serves the version: its only (first) pool. */
  readonly onlyPool: StepTrace;
}

export function poolSteps(pool: Pick<Pool, 'name' | 'model' | 'version'>, poolRules: RuleSet<string>): PoolSteps {
  const byRule = new Map<string, StepTrace>();
  for (const rule of poolRules.rules) {
    if (rule.target === pool.name) byRule.set(rule.name, step(`pool rule "${rule.name}"`, `rule "${rule.name}" → ${pool.name}`));
  }
  return {
    byRule,
    byDefault: step('default pool', `no pool rule matched → ${pool.name}`),
    onlyPool: step('only pool of version', `no rule's pool serves ${pool.model}@${pool.version} → ${pool.name}`),
  };
}

function step(decidedBy: string, reason: string): StepTrace {
  return Object.freeze({ decidedBy, reason, alternatives: undefined });
}

/** The pools of each model version, by version object (a snapshot's versions are its own). */
export function poolsOfVersions(models: Generation['models'], poolsByVersion: Generation['poolsByVersion']): ReadonlyMap<ModelVersion, readonly Pool[]> {
  const byVersion = new Map<ModelVersion, readonly Pool[]>();
  for (const model of models.values()) {
    for (const version of model.versions) byVersion.set(version, poolsByVersion.get(`${model.id}@${version.version}`) ?? []);
  }
  return byVersion;
}

/** Deciding a plain name needs no random draw: one that asks for one is not plain. */
const NO_RANDOM: DecideEnv = {
  now: () => 0,
  clock: () => 0,
  random: () => {
    throw new Error('a plain model choice drew a random number');
  },
  quota: { check: () => ({ ok: true }), take: () => {} },
};

/**
 * Every model choice that depends only on the tenant and the name asked for
 * (a model id, an alias to one, the tenant's own adapter; one version; no
 * cascade), made now: such requests share one frozen choice and its trace.
 */
export function plainChoices(snapshot: Generation, tenant: Tenant): ReadonlyMap<string, ModelChosen> {
  const choices = new Map<string, ModelChosen>();
  const names = [...snapshot.models.keys(), ...tenant.adapters.keys()];
  for (const alias of snapshot.aliases.values()) if (alias.model !== undefined) names.push(alias.name);
  for (const name of names) {
    const model = snapshot.models.get(snapshot.aliases.get(name)?.model ?? snapshot.adapters.get(name) ?? name);
    if (!model || model.cold || model.versions.length !== 1) continue;
    const choice = resolveModel({ requestedModel: name }, {}, tenant, snapshot, NO_RANDOM);
    if (!choice.ok) continue;
    choices.set(name, freezeChoice(choice));
  }
  return choices;
}

function freezeChoice(choice: ModelChosen): ModelChosen {
  const trace = choice.trace;
  Object.freeze(trace.facts);
  for (const alternative of trace.alternatives ?? []) Object.freeze(alternative);
  Object.freeze(trace.alternatives);
  return Object.freeze({ ...choice, value: Object.freeze(choice.value), trace: Object.freeze(trace) });
}
