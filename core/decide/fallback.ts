// A model's fallback model (models.yaml `fallback`, docs/policies.md): when
// every pool of the chosen model would refuse a request for capacity (after
// pool overflow), the request goes to the fallback model instead, if its
// tenant may use it. Compiled policies have no fallback loops; decide() also
// bounds the walk.
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation, ModelEntry, ModelVersion, Tenant } from './generation.ts';
import type { DecideEnv } from './env.ts';
import { chooseVersion } from './model.ts';
import type { StepTrace, TraceAlternative } from './trace.ts';

/** Fallbacks followed at most for one request. */
export const MAX_FALLBACKS = 4;

export interface FallbackModel {
  readonly model: ModelEntry;
  readonly version: ModelVersion;
  /** The tenant's default adapter on the fallback model, if it has one. */
  readonly adapter?: string;
}

/**
 * The model `from`'s requests fall back to for `tenant`, or why not (a
 * string, for the trace); undefined when `from` names no fallback. A request
 * that named an adapter stays on its base model: the adapter exists nowhere else.
 */
export function fallbackModel(
  from: ModelEntry,
  tenant: Tenant,
  snapshot: Generation,
  facts: Pick<RequestFacts, 'requestedModel' | 'conversationId'>,
  env: Pick<DecideEnv, 'random'>,
): FallbackModel | string | undefined {
  if (from.fallback === undefined) return undefined;
  const model = snapshot.models.get(from.fallback);
  if (!model || model.cold || model.versions.length === 0) return `fallback ${from.fallback} is not deployed`;
  if (snapshot.adapters.has(facts.requestedModel)) return `adapter ${facts.requestedModel} exists only on ${from.id}`;
  if (tenant.allowedModels && !tenant.allowedModels.has(model.id)) return `tenant ${tenant.id} may not use fallback ${model.id}`;
  return { model, version: chooseVersion(model, facts, env), adapter: tenant.defaultAdapters.get(model.id) };
}

/** The model step after a fallback: what was chosen first, why it was left, and where the request went. */
export function fallbackStep(step: StepTrace | undefined, from: string, to: FallbackModel, why: string): StepTrace {
  const alternatives: TraceAlternative[] = [...(step?.alternatives ?? []), { name: from, note: why }];
  const target = `${to.model.id}${to.model.versions.length > 1 ? `@${to.version.version}` : ''}${to.adapter ? ` (tenant's default adapter ${to.adapter})` : ''}`;
  return {
    decidedBy: 'fallback',
    reason: `${step ? `${step.reason}; ` : ''}every pool of ${from} refused (${why}) → fallback to ${target}`,
    facts: { ...step?.facts, fallbackFrom: from },
    alternatives,
  };
}
