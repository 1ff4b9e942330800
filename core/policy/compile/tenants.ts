// Tenants (kind: tenants): key hashes, allowed models, adapters, quotas.
import { priorityClass } from '../../facts/priority.ts';
import { UNIT_WEIGHTS } from '../../quota/cost.ts';
import type { AliasEntry, TenantSpec, TenantAdapter, TenantQuotas } from '../compiled.ts';
import type { PolicySource } from '../source.ts';
import { unknown, type CompileContext, type Doc } from './context.ts';
import type { CompiledModels } from './models.ts';

export interface CompiledTenants {
  readonly tenantsById: Map<string, TenantSpec>;
  readonly tenantsByKeyHash: Map<string, TenantSpec>;
  /** Adapter name → its base model. */
  readonly adapters: Map<string, string>;
  readonly anonymousTenant?: TenantSpec;
}

export function compileTenants(
  ctx: CompileContext,
  { models, unknownModel }: CompiledModels,
  aliases: ReadonlyMap<string, AliasEntry>,
  priorityNames: ReadonlyMap<string, number>,
): CompiledTenants {
  const tenantsById = new Map<string, TenantSpec>();
  const tenantsByKeyHash = new Map<string, TenantSpec>();
  const adapters = new Map<string, string>();
  let anonymous: { source: PolicySource; id: string } | undefined;
  for (const { source, doc } of ctx.ofKind('tenants')) {
    if (doc.anonymous !== undefined) {
      if (anonymous) ctx.report(source, ['anonymous'], `the anonymous tenant is already set in ${anonymous.source.file}`);
      else anonymous = { source, id: doc.anonymous };
    }
    (doc.tenants ?? []).forEach((t: Doc, i: number) => {
      const path = ['tenants', i];
      if (tenantsById.has(t.id)) return ctx.report(source, [...path, 'id'], `tenant "${t.id}" is defined twice`);
      if (Array.isArray(t.allowed_models)) {
        t.allowed_models.forEach((m: string, j: number) => {
          if (!models.has(m))
            ctx.report(source, [...path, 'allowed_models', j], aliases.has(m) ? `"${m}" is an alias: allowed_models lists model ids` : unknownModel(m));
        });
      }
      const tenantAdapters = new Map<string, TenantAdapter>();
      const defaultAdapters = new Map<string, string>();
      t.adapters.forEach((a: Doc, j: number) => {
        const at = [...path, 'adapters', j];
        if (!models.has(a.model)) return ctx.report(source, [...at, 'model'], unknownModel(a.model));
        if (models.has(a.name) || aliases.has(a.name)) return ctx.report(source, [...at, 'name'], `adapter "${a.name}" has the name of a model or alias`);
        const base = adapters.get(a.name);
        if (base !== undefined && base !== a.model) return ctx.report(source, [...at, 'model'], `adapter "${a.name}" is declared on "${base}" elsewhere`);
        if (a.default) {
          if (defaultAdapters.has(a.model)) return ctx.report(source, [...at, 'default'], `tenant "${t.id}" already has a default adapter for "${a.model}"`);
          defaultAdapters.set(a.model, a.name);
        }
        adapters.set(a.name, a.model);
        tenantAdapters.set(a.name, { name: a.name, model: a.model, isDefault: a.default });
      });
      // A priority is an integer or a name of settings' priority_names.
      const level = (field: string, fallback: number): number => {
        const value = t[field];
        if (value === undefined) return fallback;
        if (typeof value === 'number') return value;
        const named = priorityNames.get(value);
        if (named === undefined)
          ctx.report(
            source,
            [...path, field],
            `"${value}" is not a priority name (known: ${[...priorityNames.keys()].join(', ')}); use an integer or add it to settings' priority_names`,
          );
        return named ?? fallback;
      };
      const defaultLevel = level('default_priority', 0);
      const maxPriority = level('max_priority', Math.max(0, defaultLevel));
      if (defaultLevel > maxPriority)
        ctx.report(source, [...path, 'default_priority'], `default_priority (${defaultLevel}) is above max_priority (${maxPriority})`);
      const tenant: TenantSpec = {
        id: t.id,
        tier: t.tier,
        allowedModels: t.allowed_models === '*' ? undefined : new Set(t.allowed_models),
        adapters: tenantAdapters,
        defaultAdapters,
        quotas: tenantQuotas(t.quotas),
        defaultPriority: priorityClass(defaultLevel),
        defaultPriorityLevel: defaultLevel,
        maxPriority,
        decisionHeaders: t.decision_headers,
      };
      tenantsById.set(t.id, tenant);
      t.api_key_sha256.forEach((hash: string, j: number) => {
        const owner = tenantsByKeyHash.get(hash);
        if (owner) return ctx.report(source, [...path, 'api_key_sha256', j], `this key hash already belongs to tenant "${owner.id}"`);
        tenantsByKeyHash.set(hash, tenant);
      });
    });
  }
  const anonymousTenant = anonymous ? tenantsById.get(anonymous.id) : undefined;
  if (anonymous && !anonymousTenant) ctx.report(anonymous.source, ['anonymous'], unknown('tenant', anonymous.id, tenantsById.keys()));
  return { tenantsById, tenantsByKeyHash, adapters, anonymousTenant };
}

function tenantQuotas(doc: Doc | undefined): TenantQuotas {
  const w = doc?.token_weights;
  const prompt = w?.prompt ?? UNIT_WEIGHTS.prompt;
  return {
    requestsPerMinute: doc?.requests_per_minute,
    tokensPerMinute: doc?.tokens_per_minute,
    shadow: doc?.shadow === true,
    weights: w ? { prompt, cachedPrompt: w.cached_prompt ?? prompt, completion: w.completion ?? UNIT_WEIGHTS.completion } : UNIT_WEIGHTS,
  };
}
