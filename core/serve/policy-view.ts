// The live policy as an operator reads it (the explorer's policy view):
// models, aliases and cascades, pool rules, tenants, pools and their chains.
// API key hashes are left out: a tenant is named by id.
import type { RuleSet } from '../rules/compile.ts';
import type { Generation } from '../decide/generation.ts';

const rulesView = (set: RuleSet<string>) => set.rules.map((r) => ({ name: r.name, priority: r.priority, target: r.target, conditions: r.conditions }));

export function policyView(snapshot: Generation, status: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    generation: snapshot.generation,
    // The hash logs and /admin/state name (policy files, plugins and routing table), when the source keeps one.
    hash: typeof status.hash === 'string' ? status.hash : snapshot.hash,
    files: snapshot.files,
    status,
    models: [...snapshot.models.values()].map((m) => ({
      id: m.id,
      versions: m.versions.map((v) => ({ version: v.version, weight: v.weight, canary: v.canary })),
      cold: m.cold ? { retryAfterS: m.cold.retryAfterS } : null,
    })),
    aliases: [...snapshot.aliases.values()].map((a) =>
      a.cascade
        ? { name: a.name, cascade: { name: a.cascade.name, defaultModel: a.cascade.defaultModel, rules: rulesView(a.cascade.rules) } }
        : { name: a.name, model: a.model },
    ),
    poolRules: { defaultPool: snapshot.poolRules.defaultPool, rules: rulesView(snapshot.poolRules.rules) },
    tenants: [...snapshot.tenantsById.values()].map((t) => ({
      id: t.id,
      tier: t.tier,
      anonymous: t === snapshot.anonymousTenant,
      defaultPriority: t.defaultPriority,
      allowedModels: t.allowedModels ? [...t.allowedModels] : null,
      adapters: [...t.adapters.values()].map((a) => ({ name: a.name, model: a.model, default: a.isDefault })),
      quotas: t.quotas,
    })),
    pools: snapshot.pools.map((p) => ({
      key: p.key,
      name: p.name,
      model: p.model,
      version: p.version,
      maxModelLen: p.maxModelLen ?? null,
      chain: p.chain.map((slot) => ({ name: slot.name, version: slot.definition.version })),
      replicas: p.replicas.map((r) => ({ id: r.id, engine: r.engine, adapters: r.adapters, draining: r.draining })),
    })),
  };
}
