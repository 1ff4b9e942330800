// Turns schema-checked policy documents into a Snapshot, checking what a
// schema can't: references between documents (an unknown model, pool,
// tenant or strategy), duplicates, weights, rules. Every problem is reported;
// nothing is built from a policy set that has one.
import { createHash } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { DEFAULT_LOAD_SCORE_WEIGHTS, seededRandom, type Logger, type Priority } from '../../sdk/index.ts';
import { configValidator } from '../plugins/config.ts';
import type { StrategyRegistry } from '../plugins/registry.ts';
import { compileRuleSet, RuleCompileError, type RuleSet, type RuleSpec } from '../rules/compile.ts';
import type { PolicyProblem } from './problems.ts';
import { closest, schemaProblems, type PolicyKind } from './schemas.ts';
import {
  versionKey,
  type AliasEntry,
  type CascadeEntry,
  type ModelEntry,
  type Pool,
  type ReplicaSpec,
  type RouterSettings,
  type Snapshot,
  type StrategySlot,
  type Tenant,
  type TenantAdapter,
} from './snapshot.ts';
import type { PathSegment, PolicySource } from './source.ts';

export interface CheckedSource {
  readonly source: PolicySource;
  readonly kind: PolicyKind;
}

export interface CompileOptions {
  readonly registry: StrategyRegistry;
  readonly generation?: number;
  /** Seeds every strategy's random source: same seed, same picks. */
  readonly seed?: number | string;
  readonly now?: () => number;
  readonly log?: Logger;
  /** The snapshot being replaced: strategies may carry state over (exportState). */
  readonly previous?: Snapshot;
}

// The policy documents as the schemas define them (defaults filled in).
/* eslint-disable @typescript-eslint/no-explicit-any */
type Doc = any;

const DEFAULTS = {
  saturation: { kv_usage: 0.95, queue_depth: 32 },
  capacity: { queue_depth: 128, retry_after_s: 2 },
  wait_estimate: { ms_per_queued_request: 50, prefill_ms_per_1k_tokens: 20 },
  upstream: { connect_timeout_ms: 2000, headers_timeout_ms: 600_000, body_timeout_ms: 600_000, connections: 128 },
  strategies: ['session-affinity', 'prefix-affinity', 'power-of-two'],
} as const;

const SETTINGS_DEFAULTS: RouterSettings = {
  maxStalenessMs: 5000,
  scrapeIntervalMs: 1000,
  healthIntervalMs: 1000,
  charsPerToken: 4,
  defaultMaxTokens: 256,
  prefixBlockChars: 64,
  prefixMaxBlocks: 256,
  bodyLimitBytes: 8 * 1024 * 1024,
  pluginDirs: [],
};

interface PendingSlot {
  readonly name: string;
  readonly definition: StrategySlot['definition'];
  readonly config: unknown;
  /** Identifies the slot across reloads, for handing state over. */
  readonly slotKey: string;
  /** Where the policy names this strategy: create() failures are reported there. */
  readonly source: PolicySource;
  readonly at: PathSegment[];
}

const silentLog: Logger = { info() {}, warn() {} };

export function compilePolicy(
  checked: readonly CheckedSource[],
  options: CompileOptions,
): { snapshot?: Snapshot; problems: PolicyProblem[] } {
  const problems: PolicyProblem[] = [];
  const report = (source: PolicySource, path: PathSegment[], message: string, key?: string) =>
    problems.push({ file: source.file, ...source.locate(path, key), message });
  // A plugin strategy's problems name its file too.
  const strategyLabel = (name: string) => {
    const origin = options.registry.originOf?.(name);
    return `strategy "${name}"${origin ? ` (plugin ${origin})` : ''}`;
  };
  const ofKind = (kind: PolicyKind) => checked.filter((c) => c.kind === kind).map((c) => ({ source: c.source, doc: c.source.data as Doc }));

  // Settings: at most one document.
  const settingsDocs = ofKind('settings');
  for (const extra of settingsDocs.slice(1)) report(extra.source, ['kind'], `a second settings document (the first is ${settingsDocs[0].source.file})`);
  const settings = settingsOf(settingsDocs[0]?.doc, settingsDocs[0]?.source);

  // Models and their versions.
  const models = new Map<string, ModelEntry>();
  const modelOrigin = new Map<string, { source: PolicySource; index: number }>();
  for (const { source, doc } of ofKind('models')) {
    (doc.models ?? []).forEach((m: Doc, i: number) => {
      const path = ['models', i];
      if (models.has(m.id)) return report(source, [...path, 'id'], `model "${m.id}" is defined twice (first at ${modelOrigin.get(m.id)!.source.file}:${modelOrigin.get(m.id)!.source.locate(['models', modelOrigin.get(m.id)!.index]).line})`);
      if (!m.versions === !m.cold) return report(source, path, `model "${m.id}" needs either versions (deployed) or cold (loaded on demand), not ${m.cold ? 'both' : 'neither'}`);
      const seen = new Set<string>();
      (m.versions ?? []).forEach((v: Doc, j: number) => {
        if (seen.has(v.version)) report(source, [...path, 'versions', j, 'version'], `version "${v.version}" of "${m.id}" is listed twice`);
        seen.add(v.version);
      });
      const versions = (m.versions ?? []).map((v: Doc) => ({ version: v.version, weight: v.weight, canary: v.canary }));
      const totalWeight = versions.reduce((sum: number, v: { weight: number }) => sum + v.weight, 0);
      if (m.versions && totalWeight <= 0) report(source, [...path, 'versions'], `the weights of "${m.id}" add up to 0: no version would get traffic`);
      models.set(m.id, {
        id: m.id,
        versions,
        totalWeight,
        cold: m.cold ? { loadHook: m.cold.load_hook, retryAfterS: m.cold.retry_after_s } : undefined,
      });
      modelOrigin.set(m.id, { source, index: i });
    });
  }
  const unknownModel = (id: string) => {
    const hint = closest(id, [...models.keys()]);
    return `unknown model "${id}"${hint ? ` (did you mean "${hint}"?)` : ''}`;
  };

  // Cascades (kind: rules) before aliases, which refer to them.
  const cascades = new Map<string, CascadeEntry>();
  let poolRuleDoc: { source: PolicySource; doc: Doc } | undefined;
  for (const { source, doc } of ofKind('rules')) {
    (doc.cascades ?? []).forEach((c: Doc, i: number) => {
      const path = ['cascades', i];
      if (cascades.has(c.name)) return report(source, [...path, 'name'], `cascade "${c.name}" is defined twice`);
      if (!models.has(c.default_model)) report(source, [...path, 'default_model'], unknownModel(c.default_model));
      const rules = compileRules(source, [...path, 'rules'], c.rules, 'model', report);
      rules?.rules.forEach((rule) => {
        if (!models.has(rule.target)) {
          const index = c.rules.findIndex((spec: RuleSpec) => spec.name === rule.name);
          report(source, [...path, 'rules', index, 'event', 'params', 'model'], `rule "${rule.name}": ${unknownModel(rule.target)}`);
        }
      });
      if (rules) cascades.set(c.name, { name: c.name, defaultModel: c.default_model, rules });
    });
    if (doc.pool_rules) {
      if (poolRuleDoc) report(source, ['pool_rules'], `pool_rules are already defined in ${poolRuleDoc.source.file}`);
      else poolRuleDoc = { source, doc };
    }
  }

  // Aliases.
  const aliases = new Map<string, AliasEntry>();
  for (const { source, doc } of ofKind('models')) {
    (doc.aliases ?? []).forEach((a: Doc, i: number) => {
      const path = ['aliases', i];
      if (aliases.has(a.name)) return report(source, [...path, 'name'], `alias "${a.name}" is defined twice`);
      if (models.has(a.name)) return report(source, [...path, 'name'], `alias "${a.name}" hides the model of the same name`);
      if (!a.model === !a.cascade) return report(source, path, `alias "${a.name}" needs either model or cascade, not ${a.model ? 'both' : 'neither'}`);
      if (a.model) {
        if (!models.has(a.model)) return report(source, [...path, 'model'], unknownModel(a.model));
        aliases.set(a.name, { name: a.name, model: a.model });
      } else {
        const cascade = cascades.get(a.cascade);
        if (!cascade) return report(source, [...path, 'cascade'], `unknown cascade "${a.cascade}"`);
        aliases.set(a.name, { name: a.name, cascade });
      }
    });
  }

  // Tenants.
  const tenantsById = new Map<string, Tenant>();
  const tenantsByKeyHash = new Map<string, Tenant>();
  const adapters = new Map<string, string>();
  let anonymous: { source: PolicySource; id: string } | undefined;
  for (const { source, doc } of ofKind('tenants')) {
    if (doc.anonymous !== undefined) {
      if (anonymous) report(source, ['anonymous'], `the anonymous tenant is already set in ${anonymous.source.file}`);
      else anonymous = { source, id: doc.anonymous };
    }
    (doc.tenants ?? []).forEach((t: Doc, i: number) => {
      const path = ['tenants', i];
      if (tenantsById.has(t.id)) return report(source, [...path, 'id'], `tenant "${t.id}" is defined twice`);
      if (Array.isArray(t.allowed_models)) {
        t.allowed_models.forEach((m: string, j: number) => {
          if (!models.has(m)) report(source, [...path, 'allowed_models', j], aliases.has(m) ? `"${m}" is an alias: allowed_models lists model ids` : unknownModel(m));
        });
      }
      const tenantAdapters = new Map<string, TenantAdapter>();
      const defaultAdapters = new Map<string, string>();
      t.adapters.forEach((a: Doc, j: number) => {
        const at = [...path, 'adapters', j];
        if (!models.has(a.model)) return report(source, [...at, 'model'], unknownModel(a.model));
        if (models.has(a.name) || aliases.has(a.name)) return report(source, [...at, 'name'], `adapter "${a.name}" has the name of a model or alias`);
        const base = adapters.get(a.name);
        if (base !== undefined && base !== a.model) return report(source, [...at, 'model'], `adapter "${a.name}" is declared on "${base}" elsewhere`);
        if (a.default) {
          if (defaultAdapters.has(a.model)) return report(source, [...at, 'default'], `tenant "${t.id}" already has a default adapter for "${a.model}"`);
          defaultAdapters.set(a.model, a.name);
        }
        adapters.set(a.name, a.model);
        tenantAdapters.set(a.name, { name: a.name, model: a.model, isDefault: a.default });
      });
      const tenant: Tenant = {
        id: t.id,
        tier: t.tier,
        allowedModels: t.allowed_models === '*' ? undefined : new Set(t.allowed_models),
        adapters: tenantAdapters,
        defaultAdapters,
        quotas: { requestsPerMinute: t.quotas?.requests_per_minute, tokensPerMinute: t.quotas?.tokens_per_minute },
        defaultPriority: t.default_priority as Priority,
      };
      tenantsById.set(t.id, tenant);
      t.api_key_sha256.forEach((hash: string, j: number) => {
        const owner = tenantsByKeyHash.get(hash);
        if (owner) return report(source, [...path, 'api_key_sha256', j], `this key hash already belongs to tenant "${owner.id}"`);
        tenantsByKeyHash.set(hash, tenant);
      });
    });
  }
  const anonymousTenant = anonymous ? tenantsById.get(anonymous.id) : undefined;
  if (anonymous && !anonymousTenant) report(anonymous.source, ['anonymous'], `unknown tenant "${anonymous.id}"`);

  // Pools and replicas.
  const pools: Pool[] = [];
  const poolsByVersion = new Map<string, Pool[]>();
  const replicas = new Map<string, ReplicaSpec>();
  const poolNames = new Set<string>();
  const pendingChains = new Map<Pool, PendingSlot[]>();
  const previousInstances = new Map<string, StrategySlot>();
  for (const pool of options.previous?.pools ?? []) pool.chain.forEach((slot, i) => previousInstances.set(`${pool.key}#${i}:${slot.name}`, slot));
  for (const { source, doc } of ofKind('pools')) {
    const defaults = doc.defaults ?? {};
    (doc.pools ?? []).forEach((p: Doc, i: number) => {
      const path = ['pools', i];
      const model = models.get(p.model);
      if (!model) return report(source, [...path, 'model'], unknownModel(p.model));
      if (model.cold) return report(source, [...path, 'model'], `"${p.model}" is a cold-tier model: it has no pools until it is deployed`);
      if (!model.versions.some((v) => v.version === p.version)) {
        return report(source, [...path, 'version'], `"${p.model}" has no version "${p.version}" (it has ${model.versions.map((v) => v.version).join(', ')})`);
      }
      const key = `${versionKey(p.model, p.version)}/${p.name}`;
      if (pools.some((other) => other.key === key)) return report(source, [...path, 'name'], `pool "${p.name}" of ${versionKey(p.model, p.version)} is defined twice`);
      const poolReplicas: ReplicaSpec[] = [];
      p.replicas.forEach((r: Doc, j: number) => {
        if (replicas.has(r.id)) return report(source, [...path, 'replicas', j, 'id'], `replica id "${r.id}" is used twice`);
        const replica: ReplicaSpec = {
          id: r.id,
          url: r.url.replace(/\/+$/, ''),
          engine: r.engine,
          adapters: r.adapters,
          maxLoras: r.max_loras,
          maxNumSeqs: r.max_num_seqs,
          maxQueue: r.max_queue,
          draining: r.draining,
        };
        replicas.set(r.id, replica);
        poolReplicas.push(replica);
      });
      const merged = (name: keyof typeof DEFAULTS) => p[name] ?? defaults[name] ?? DEFAULTS[name];
      const weightsDoc = { ...defaults.load_score, ...p.load_score };
      const weights = {
        kvUsage: weightsDoc.kv_usage ?? DEFAULT_LOAD_SCORE_WEIGHTS.kvUsage,
        queue: weightsDoc.queue ?? DEFAULT_LOAD_SCORE_WEIGHTS.queue,
        running: weightsDoc.running ?? DEFAULT_LOAD_SCORE_WEIGHTS.running,
      };
      const saturation = { ...DEFAULTS.saturation, ...defaults.saturation, ...p.saturation };
      const capacity = { ...DEFAULTS.capacity, ...defaults.capacity, ...p.capacity };
      const wait = { ...DEFAULTS.wait_estimate, ...defaults.wait_estimate, ...p.wait_estimate };
      const upstream = { ...DEFAULTS.upstream, ...defaults.upstream, ...p.upstream };
      const strategiesPath: PathSegment[] = p.strategies ? [...path, 'strategies'] : defaults.strategies ? ['defaults', 'strategies'] : path;
      const pending: PendingSlot[] = [];
      (merged('strategies') as Doc[]).forEach((entry: Doc, k: number) => {
        const name = typeof entry === 'string' ? entry : entry.name;
        const at = [...strategiesPath, k];
        const definition = options.registry.get(name);
        if (!definition) {
          const hint = closest(name, options.registry.names());
          return report(source, at, `strategy "${name}" is not registered${hint ? ` (did you mean "${hint}"?)` : `; registered: ${options.registry.names().join(', ')}`}`);
        }
        const config = structuredClone(typeof entry === 'string' ? {} : (entry.config ?? {}));
        const validate = configValidator(definition);
        if (validate) {
          const configProblems = schemaProblems(validate, config, source, typeof entry === 'string' ? at : [...at, 'config']);
          if (configProblems.length) {
            problems.push(...configProblems.map((problem) => ({ ...problem, message: `${strategyLabel(name)}: ${problem.message}` })));
            return;
          }
        }
        pending.push({ name, definition, config, slotKey: `${key}#${k}:${name}`, source, at });
      });
      const pool: Pool = {
        key,
        name: p.name,
        model: p.model,
        version: p.version,
        maxModelLen: p.limits?.max_model_len,
        replicas: poolReplicas,
        chain: [],
        saturation: { kvUsage: saturation.kv_usage, queueDepth: saturation.queue_depth },
        capacity: { queueDepth: capacity.queue_depth, retryAfterS: capacity.retry_after_s },
        weights,
        waitEstimate: { msPerQueuedRequest: wait.ms_per_queued_request, prefillMsPer1kTokens: wait.prefill_ms_per_1k_tokens },
        upstream: {
          connectTimeoutMs: upstream.connect_timeout_ms,
          headersTimeoutMs: upstream.headers_timeout_ms,
          bodyTimeoutMs: upstream.body_timeout_ms,
          connections: upstream.connections,
        },
      };
      pools.push(pool);
      pendingChains.set(pool, pending);
      poolNames.add(p.name);
      const vk = versionKey(p.model, p.version);
      poolsByVersion.set(vk, [...(poolsByVersion.get(vk) ?? []), pool]);
    });
  }

  // Every deployed version needs somewhere to go.
  for (const [id, { source, index }] of modelOrigin) {
    models.get(id)!.versions.forEach((v, j) => {
      if (v.weight > 0 && !poolsByVersion.has(versionKey(id, v.version))) {
        report(source, ['models', index, 'versions', j], `version "${v.version}" of "${id}" gets traffic but no pool serves it`);
      }
    });
  }

  // Pool rules.
  let poolRules: Snapshot['poolRules'] = { defaultPool: 'general', rules: { rules: [] } };
  if (poolRuleDoc) {
    const { source, doc } = poolRuleDoc;
    const rules = compileRules(source, ['pool_rules', 'rules'], doc.pool_rules.rules, 'pool', report);
    rules?.rules.forEach((rule) => {
      if (!poolNames.has(rule.target)) {
        const index = doc.pool_rules.rules.findIndex((spec: RuleSpec) => spec.name === rule.name);
        const hint = closest(rule.target, [...poolNames]);
        report(source, ['pool_rules', 'rules', index, 'event', 'params', 'pool'], `rule "${rule.name}": unknown pool "${rule.target}"${hint ? ` (did you mean "${hint}"?)` : ''}`);
      }
    });
    if (!poolNames.has(doc.pool_rules.default_pool)) report(source, ['pool_rules', 'default_pool'], `unknown pool "${doc.pool_rules.default_pool}"`);
    if (rules) poolRules = { defaultPool: doc.pool_rules.default_pool, rules };
  }

  if (problems.length) return { problems };

  // Valid: create the strategy instances, handing state over from the previous snapshot.
  const log = options.log ?? silentLog;
  const now = options.now ?? Date.now;
  const seed = options.seed ?? 1;
  // A plugin's create() may throw: report it where the policy names the
  // strategy and dispose what was already created (not instances that took
  // over state, which the current snapshot's instances still share).
  const created: { instance: StrategySlot['instance']; tookState: boolean }[] = [];
  const finalPools: Pool[] = [];
  for (const draft of pools) {
    const chain: StrategySlot[] = [];
    for (const { name, definition, config, slotKey, source, at } of pendingChains.get(draft)!) {
      const previous = previousInstances.get(slotKey);
      // Same strategy and version in the same place: the state's shape is the one this code knows.
      const sameCode = previous !== undefined && (previous.definition === definition || (previous.definition.name === definition.name && previous.definition.version === definition.version));
      let carryOver: unknown;
      if (sameCode) {
        try {
          carryOver = previous.instance.exportState?.();
        } catch (error) {
          log.warn(`strategy "${name}": exportState() threw; the new instance starts empty`, { pool: draft.key, error: (error as Error)?.message ?? String(error) });
        }
      }
      try {
        const instance = definition.create(config, {
          random: seededRandom(`${seed}:${slotKey}`),
          now,
          log,
          pool: draft.name,
          loadScoreWeights: draft.weights,
          previousState: carryOver,
        });
        created.push({ instance, tookState: carryOver !== undefined });
        chain.push({ name, definition, instance });
      } catch (error) {
        report(source, at, `${strategyLabel(name)}: create() threw: ${(error as Error)?.message ?? String(error)}`);
      }
    }
    finalPools.push({ ...draft, chain });
  }
  if (problems.length) {
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
  const finalByVersion = new Map<string, Pool[]>();
  for (const pool of finalPools) {
    const vk = versionKey(pool.model, pool.version);
    finalByVersion.set(vk, [...(finalByVersion.get(vk) ?? []), pool]);
  }

  return {
    problems: [],
    snapshot: {
      generation: options.generation ?? 1,
      hash: contentHash(checked.map((c) => c.source)),
      files: checked.map((c) => c.source.file),
      models,
      aliases,
      adapters,
      tenantsByKeyHash,
      tenantsById,
      anonymousTenant,
      poolsByVersion: finalByVersion,
      pools: finalPools,
      replicas,
      poolRules,
      settings,
    },
  };
}

function compileRules(
  source: PolicySource,
  path: PathSegment[],
  specs: RuleSpec[],
  param: string,
  report: (source: PolicySource, path: PathSegment[], message: string) => void,
): RuleSet<string> | undefined {
  const names = new Set<string>();
  let ok = true;
  specs.forEach((spec, i) => {
    if (names.has(spec.name)) {
      report(source, [...path, i, 'name'], `rule "${spec.name}" is defined twice`);
      ok = false;
    }
    names.add(spec.name);
    // Compile one by one so every broken rule is reported, not just the first.
    try {
      compileRuleSet([spec], param);
    } catch (error) {
      if (!(error instanceof RuleCompileError)) throw error;
      const [, ...rest] = error.path;
      report(source, [...path, i, ...rest], error.message.startsWith('rule "') ? error.message : `rule "${spec.name}": ${error.message}`);
      ok = false;
    }
  });
  return ok ? compileRuleSet(specs, param) : undefined;
}

function settingsOf(doc: Doc | undefined, source: PolicySource | undefined): RouterSettings {
  if (!doc || !source) return SETTINGS_DEFAULTS;
  const base = dirname(source.file);
  return {
    maxStalenessMs: doc.max_staleness_ms,
    scrapeIntervalMs: doc.scrape_interval_ms,
    healthIntervalMs: doc.health_interval_ms,
    charsPerToken: doc.chars_per_token,
    defaultMaxTokens: doc.default_max_tokens,
    prefixBlockChars: doc.prefix_block_chars,
    prefixMaxBlocks: doc.prefix_max_blocks,
    bodyLimitBytes: doc.body_limit_bytes,
    pluginDirs: doc.plugin_dirs.map((dir: string) => resolve(base, dir)),
  };
}

function contentHash(sources: readonly PolicySource[]): string {
  const hash = createHash('sha256');
  for (const source of [...sources].sort((a, b) => (a.file < b.file ? -1 : 1))) {
    hash.update(source.file).update('\0').update(source.text).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}
