// Decision 1 — which model: alias resolution, cascades, tenant restrictions
// and adapters, cold models, and the version (canary sticky by conversation).
import { unitInterval } from '../../sdk/index.ts';
import { rejection } from '../errors.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import { firstMatch, type Facts } from '../rules/compile.ts';
import type { ModelEntry, ModelVersion, Generation, Tenant } from './generation.ts';
import type { DecideEnv } from './env.ts';
import type { StepResult } from './decision.ts';

export interface ModelChoice {
  readonly model: ModelEntry;
  readonly version: ModelVersion;
  readonly adapter?: string;
}

/** The model step: a choice, or a refusal (a cold model's carries the load to ask for). */
export type ModelStep = StepResult<ModelChoice>;
export type ModelChosen = Extract<ModelStep, { ok: true }>;

const notFound = (name: string) => rejection('model_not_found', `The model \`${name}\` does not exist or you do not have access to it.`, { param: 'model' });

// Module-level rather than a closure in chooseModel: tsx (esbuild keepNames) would name a new closure every request.
function mayUse(tenant: Tenant, model: string): boolean {
  return !tenant.allowedModels || tenant.allowedModels.has(model);
}

/** Why a cascade rule's target cannot take the request: the tenant may not use that model. */
function tenantRefusal(target: string, tenant: Tenant): string | null {
  return mayUse(tenant, target) ? null : `tenant ${tenant.id} may not use ${target}`;
}

export function firstAllowed(tenant: Tenant, models: readonly string[]): string | undefined {
  for (const model of models) if (mayUse(tenant, model)) return model;
  return undefined;
}

export function chooseModel(facts: RequestFacts, ruleFacts: Facts, tenant: Tenant, snapshot: Generation, env: DecideEnv): ModelStep {
  // Most requests name a model plainly: their choice was made when the snapshot was compiled (derived.ts).
  return tenant.plainChoices.get(facts.requestedModel) ?? resolveModel(facts, ruleFacts, tenant, snapshot, env);
}

/** The model choice worked out in full. */
export function resolveModel(
  facts: Pick<RequestFacts, 'requestedModel' | 'conversationId'>,
  ruleFacts: Facts,
  tenant: Tenant,
  snapshot: Generation,
  env: DecideEnv,
): ModelStep {
  const requested = facts.requestedModel;
  let modelId: string;
  let adapter: string | undefined;
  let decidedBy: string;
  let reason: string;
  let alternatives: { name: string; note?: string }[] | undefined;

  const alias = snapshot.aliases.get(requested);
  if (alias?.model !== undefined) {
    modelId = alias.model;
    decidedBy = `alias ${alias.name}`;
    reason = `alias "${alias.name}" → ${modelId}`;
  } else if (alias?.cascade) {
    const cascade = alias.cascade;
    const match = firstMatch(cascade.rules, ruleFacts, tenantRefusal, tenant);
    alternatives = match.skipped.map((s) => ({ name: s.rule, note: s.why }));
    if (match.rule) {
      modelId = match.rule.target;
      decidedBy = `cascade ${cascade.name}: rule "${match.rule.name}"`;
      reason = `rule "${match.rule.name}" → ${modelId}`;
    } else if (mayUse(tenant, cascade.defaultModel)) {
      modelId = cascade.defaultModel;
      decidedBy = `cascade ${cascade.name}: default`;
      reason = `no cascade rule matched → default ${modelId}`;
    } else {
      // Never route a tenant into a 403 for a model it did not ask for.
      const allowed = firstAllowed(tenant, cascade.models);
      if (allowed === undefined) {
        return {
          ok: false,
          rejection: rejection('model_not_allowed', `Tenant "${tenant.id}" may use none of the models of \`${alias.name}\`.`, { param: 'model' }),
          trace: { decidedBy: 'tenant restrictions', reason: `cascade ${cascade.name} answers only with ${cascade.models.join(', ')}`, alternatives },
        };
      }
      modelId = allowed;
      decidedBy = `cascade ${cascade.name}: first allowed model`;
      reason = `no cascade rule matched; default ${cascade.defaultModel} is not allowed for ${tenant.id} → ${modelId}`;
    }
  } else if (snapshot.models.has(requested)) {
    modelId = requested;
    decidedBy = 'model id';
    reason = `requested ${requested}`;
  } else if (snapshot.adapters.has(requested)) {
    if (!tenant.adapters.has(requested)) {
      return {
        ok: false,
        rejection: rejection('adapter_not_allowed', `Tenant "${tenant.id}" may not use the adapter \`${requested}\`.`, { param: 'model' }),
        trace: { decidedBy: 'tenant adapters', reason: `adapter ${requested} belongs to another tenant` },
      };
    }
    adapter = requested;
    modelId = snapshot.adapters.get(requested)!;
    decidedBy = 'tenant adapter';
    reason = `adapter ${adapter} on ${modelId}`;
  } else {
    return { ok: false, rejection: notFound(requested), trace: { decidedBy: 'model lookup', reason: `no model, alias or adapter named "${requested}"` } };
  }

  if (!mayUse(tenant, modelId)) {
    return {
      ok: false,
      rejection: rejection('model_not_allowed', `Tenant "${tenant.id}" may not use the model \`${modelId}\`.`, { param: 'model' }),
      trace: { decidedBy: 'tenant restrictions', reason: `${modelId} is not in the allowed models of ${tenant.id}`, alternatives },
    };
  }
  const model = snapshot.models.get(modelId)!;
  if (model.cold) {
    const cold = model.cold;
    return {
      ok: false,
      rejection: rejection('model_cold', `The model \`${model.id}\` is not deployed right now; a load has been requested. Retry after ${cold.retryAfterS} s.`, {
        retryAfterS: cold.retryAfterS,
      }),
      trace: { decidedBy, reason: `${reason}; cold tier: not deployed`, alternatives },
      action: { type: 'trigger_load', model: model.id, url: cold.loadHook },
    };
  }
  if (!adapter) {
    adapter = tenant.defaultAdapters.get(modelId);
    if (adapter) reason += `; tenant's default adapter ${adapter}`;
  }

  const version = chooseVersion(model, facts, env);
  const versionNote =
    model.versions.length === 1
      ? ''
      : `; version ${version.version}${version.canary ? ' (canary)' : ''} by ${facts.conversationId ? 'conversation hash' : 'random draw (no conversation id)'}`;
  return {
    ok: true,
    value: { model, version, adapter },
    trace: {
      decidedBy,
      reason: reason + versionNote,
      facts: { requestedModel: requested, tenant: tenant.id },
      alternatives: alternatives ?? model.versions.map((v) => ({ name: `${model.id}@${v.version}`, score: v.weight / model.totalWeight })),
    },
  };
}

/**
 * Weighted version choice, sticky by conversation: the conversation id hashes
 * to the same point on every router instance, so a conversation never flips
 * between versions mid-dialogue.
 */
export function chooseVersion(model: ModelEntry, facts: Pick<RequestFacts, 'conversationId'>, env: Pick<DecideEnv, 'random'>): ModelVersion {
  if (model.versions.length === 1) return model.versions[0];
  const point = (facts.conversationId ? unitInterval(`${model.id}\0${facts.conversationId}`) : env.random()) * model.totalWeight;
  let cumulative = 0;
  for (const version of model.versions) {
    cumulative += version.weight;
    if (point < cumulative) return version;
  }
  return model.versions[model.versions.length - 1];
}
