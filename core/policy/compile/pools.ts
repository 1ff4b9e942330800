// Pools and replicas (kind: pools), and their strategy chains: each strategy
// registered, its config valid against the plugin's schema; instances are
// created only once the whole policy is known to be valid.
import { DEFAULT_LOAD_SCORE_WEIGHTS, seededRandom, type KvIndexView, type Logger } from '../../../sdk/index.ts';
import { OUTLIER_DEFAULTS } from '../../fleet/outlier.ts';
import { PickBudget } from '../../decide/budget.ts';
import { CandidateCache, DEFAULT_FULL_PREFILL_TOKENS } from '../../decide/candidates.ts';
import { replicaCapacity } from '../../decide/derived.ts';
import { SHEDDING_DEFAULTS } from '../../decide/shed.ts';
import { configValidator } from '../../plugins/config.ts';
import { versionKey, type Pool, type ReplicaSpec, type Snapshot, type StrategySlot } from '../snapshot.ts';
import type { PolicySource } from '../source.ts';
import type { CompileContext, Doc } from './context.ts';
import type { CompiledModels } from './models.ts';
import { checkOverflow, type OverflowRef } from './overflow.ts';
import { closest, schemaProblems, type PathSegment } from '../../diagnostics/schema-problems.ts';
import { replicaUrlProblem } from './replica-urls.ts';
import { engineKey } from './engine-keys.ts';

const DEFAULTS = {
  saturation: { kv_usage: 0.95, queue_depth: 32 },
  capacity: { queue_depth: 128, retry_after_s: 2 },
  token_load: { full_prefill_tokens: DEFAULT_FULL_PREFILL_TOKENS },
  shedding: { mode: SHEDDING_DEFAULTS.mode, exponent: SHEDDING_DEFAULTS.exponent, scale: SHEDDING_DEFAULTS.scale },
  wait_estimate: { ms_per_queued_request: 50, prefill_ms_per_1k_tokens: 20 },
  // docs/reliability.md gives each default's reason.
  upstream: { connect_timeout_ms: 2000, stream_headers_timeout_ms: 15_000, headers_timeout_ms: 300_000, stream_idle_timeout_ms: 120_000, body_timeout_ms: 60_000, connections: 128 },
  retries: { max_retries: 2, budget_percent: 20, min_concurrency: 3 },
  outlier_detection: {
    consecutive_5xx: OUTLIER_DEFAULTS.consecutive5xx,
    consecutive_gateway_failures: OUTLIER_DEFAULTS.consecutiveGatewayFailures,
    base_ejection_ms: OUTLIER_DEFAULTS.baseEjectionMs,
    max_ejection_ms: OUTLIER_DEFAULTS.maxEjectionMs,
    max_ejection_percent: OUTLIER_DEFAULTS.maxEjectionPercent,
    panic_threshold_percent: OUTLIER_DEFAULTS.panicThresholdPercent,
  },
  strategies: ['session-affinity', 'prefix-affinity', 'power-of-two'],
} as const;

/** A strategy the policy names, checked but not yet created. */
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

export interface PoolDrafts {
  /** Pools without their strategy instances. */
  readonly drafts: Pool[];
  readonly pending: Map<Pool, PendingSlot[]>;
  readonly replicas: Map<string, ReplicaSpec>;
  readonly poolNames: Set<string>;
  readonly poolsByVersion: Map<string, Pool[]>;
}

export function compilePools(ctx: CompileContext, { models, unknownModel }: CompiledModels): PoolDrafts {
  const drafts: Pool[] = [];
  const pending = new Map<Pool, PendingSlot[]>();
  const replicas = new Map<string, ReplicaSpec>();
  const poolNames = new Set<string>();
  const poolsByVersion = new Map<string, Pool[]>();
  const overflows: OverflowRef[] = [];
  for (const { source, doc } of ctx.ofKind('pools')) {
    const defaults = doc.defaults ?? {};
    (doc.pools ?? []).forEach((p: Doc, i: number) => {
      const path = ['pools', i];
      const model = models.get(p.model);
      if (!model) return ctx.report(source, [...path, 'model'], unknownModel(p.model));
      if (model.cold) return ctx.report(source, [...path, 'model'], `"${p.model}" is a cold-tier model: it has no pools until it is deployed`);
      if (!model.versions.some((v) => v.version === p.version)) {
        return ctx.report(source, [...path, 'version'], `"${p.model}" has no version "${p.version}" (it has ${model.versions.map((v) => v.version).join(', ')})`);
      }
      const key = `${versionKey(p.model, p.version)}/${p.name}`;
      if (drafts.some((other) => other.key === key)) return ctx.report(source, [...path, 'name'], `pool "${p.name}" of ${versionKey(p.model, p.version)} is defined twice`);
      const poolReplicas: ReplicaSpec[] = [];
      if (p.replicas.length === 0) {
        ctx.report(source, [...path, 'replicas'], `pool "${p.name}" of ${versionKey(p.model, p.version)} has no replicas: every request routed to it would get a 503; add a replica, or remove the pool`);
      }
      p.replicas.forEach((r: Doc, j: number) => {
        if (replicas.has(r.id)) return ctx.report(source, [...path, 'replicas', j, 'id'], `replica id "${r.id}" is used twice`);
        const urlProblem = replicaUrlProblem(r.url, ctx.emulatedProfiles);
        if (urlProblem) return ctx.report(source, [...path, 'replicas', j, 'url'], `replica "${r.id}": ${urlProblem}`);
        const replica: ReplicaSpec = {
          id: r.id,
          url: r.url.replace(/\/+$/, ''),
          engine: r.engine,
          adapters: r.adapters,
          maxLoras: r.max_loras,
          maxNumSeqs: r.max_num_seqs,
          maxQueue: r.max_queue,
          draining: r.draining,
          capacity: replicaCapacity({ maxLoras: r.max_loras, maxNumSeqs: r.max_num_seqs, maxQueue: r.max_queue }),
          kvEvents: r.kv_events,
          kvEventsTopic: r.kv_events_topic,
          kvEventsReplay: r.kv_events_replay,
        };
        const keyEnv: string | undefined = r.api_key_env ?? p.api_key_env ?? defaults.api_key_env;
        if (keyEnv !== undefined) {
          const key = engineKey(keyEnv);
          if (key === undefined) return ctx.report(source, [...path, 'replicas', j, 'id'], `api_key_env ${keyEnv} is not set in the router's environment: set it to the engine's key (vLLM --api-key), or remove api_key_env`);
          Object.defineProperty(replica, 'apiKey', { value: key, enumerable: false });
        }
        replicas.set(r.id, replica);
        poolReplicas.push(replica);
      });
      // A pool's own settings, over the file's defaults, over the built-in ones.
      const setting = <K extends keyof typeof DEFAULTS>(name: K) => ({ ...DEFAULTS[name], ...defaults[name], ...p[name] });
      const weightsDoc = { ...defaults.load_score, ...p.load_score };
      const saturation = setting('saturation');
      const capacity = setting('capacity');
      const shedding = setting('shedding');
      const tokenLoad = setting('token_load');
      const wait = setting('wait_estimate');
      const upstream = setting('upstream');
      const retries = setting('retries');
      const outlier = setting('outlier_detection');
      const strategies: Doc[] = p.strategies ?? defaults.strategies ?? DEFAULTS.strategies;
      const strategiesPath: PathSegment[] = p.strategies ? [...path, 'strategies'] : defaults.strategies ? ['defaults', 'strategies'] : path;
      const pool: Pool = {
        key,
        name: p.name,
        model: p.model,
        version: p.version,
        maxModelLen: p.limits?.max_model_len,
        replicas: poolReplicas,
        chain: [],
        candidateCache: new CandidateCache(poolReplicas),
        saturation: { kvUsage: saturation.kv_usage, queueDepth: saturation.queue_depth },
        capacity: { queueDepth: capacity.queue_depth, retryAfterS: capacity.retry_after_s },
        shedding: { mode: shedding.mode, exponent: shedding.exponent, scale: shedding.scale },
        forwardPriority: p.forward_priority ?? defaults.forward_priority ?? false,
        tokenLoad: { fullPrefillTokens: tokenLoad.full_prefill_tokens },
        overflow: p.overflow,
        weights: {
          kvUsage: weightsDoc.kv_usage ?? DEFAULT_LOAD_SCORE_WEIGHTS.kvUsage,
          queue: weightsDoc.queue ?? DEFAULT_LOAD_SCORE_WEIGHTS.queue,
          running: weightsDoc.running ?? DEFAULT_LOAD_SCORE_WEIGHTS.running,
          ...(weightsDoc.token_load ? { tokenLoad: weightsDoc.token_load } : {}),
        },
        waitEstimate: { msPerQueuedRequest: wait.ms_per_queued_request, prefillMsPer1kTokens: wait.prefill_ms_per_1k_tokens },
        upstream: {
          connectTimeoutMs: upstream.connect_timeout_ms,
          streamHeadersTimeoutMs: upstream.stream_headers_timeout_ms,
          headersTimeoutMs: upstream.headers_timeout_ms,
          streamIdleTimeoutMs: upstream.stream_idle_timeout_ms,
          bodyTimeoutMs: upstream.body_timeout_ms,
          connections: upstream.connections,
        },
        retries: { maxRetries: retries.max_retries, budgetPercent: retries.budget_percent, minConcurrency: retries.min_concurrency },
        outlier: {
          consecutive5xx: outlier.consecutive_5xx,
          consecutiveGatewayFailures: outlier.consecutive_gateway_failures,
          baseEjectionMs: outlier.base_ejection_ms,
          maxEjectionMs: outlier.max_ejection_ms,
          maxEjectionPercent: outlier.max_ejection_percent,
          panicThresholdPercent: outlier.panic_threshold_percent,
        },
      };
      drafts.push(pool);
      if (p.overflow !== undefined) overflows.push({ pool, source, at: [...path, 'overflow'] });
      pending.set(pool, checkChain(ctx, source, strategiesPath, strategies, key));
      poolNames.add(p.name);
      const vk = versionKey(p.model, p.version);
      poolsByVersion.set(vk, [...(poolsByVersion.get(vk) ?? []), pool]);
    });
  }
  checkOverflow(ctx, overflows, poolsByVersion);
  return { drafts, pending, replicas, poolNames, poolsByVersion };
}

function checkChain(ctx: CompileContext, source: PolicySource, strategiesPath: PathSegment[], strategies: Doc[], poolKey: string): PendingSlot[] {
  const pending: PendingSlot[] = [];
  strategies.forEach((entry: Doc, k: number) => {
    const name = typeof entry === 'string' ? entry : entry.name;
    const at = [...strategiesPath, k];
    const definition = ctx.registry.get(name);
    if (!definition) {
      const hint = closest(name, ctx.registry.names());
      return ctx.report(source, at, `strategy "${name}" is not registered${hint ? ` (did you mean "${hint}"?)` : `; registered: ${ctx.registry.names().join(', ')}`}`);
    }
    const config = structuredClone(typeof entry === 'string' ? {} : (entry.config ?? {}));
    const validate = configValidator(definition);
    if (validate) {
      const configProblems = schemaProblems(validate, config, source, typeof entry === 'string' ? at : [...at, 'config']);
      if (configProblems.length) {
        ctx.problems.push(...configProblems.map((problem) => ({ ...problem, message: `${ctx.strategyLabel(name)}: ${problem.message}` })));
        return;
      }
    }
    pending.push({ name, definition, config, slotKey: `${poolKey}#${k}:${name}`, source, at });
  });
  return pending;
}

export interface InstanceOptions {
  readonly seed: number | string;
  readonly now: () => number;
  readonly log: Logger;
  /** The snapshot being replaced: strategies may carry state over (exportState). */
  readonly previous?: Snapshot;
  /** The engines' KV cache contents, handed to strategies as ctx.kvIndex. */
  readonly kvIndex?: KvIndexView;
}

/**
 * Creates every strategy instance, handing state over from the previous
 * snapshot. A plugin's create() may throw: that is reported where the policy
 * names the strategy, and what was already created is disposed (except
 * instances that took over state, which the live snapshot still shares).
 */
export function createStrategies(ctx: CompileContext, { drafts, pending }: PoolDrafts, options: InstanceOptions): Pool[] | undefined {
  const previousSlots = new Map<string, StrategySlot>();
  for (const pool of options.previous?.pools ?? []) pool.chain.forEach((slot, i) => previousSlots.set(`${pool.key}#${i}:${slot.name}`, slot));
  const created: { instance: StrategySlot['instance']; tookState: boolean }[] = [];
  const pools = drafts.map((draft): Pool => {
    const chain: StrategySlot[] = [];
    for (const { name, definition, config, slotKey, source, at } of pending.get(draft)!) {
      const previous = previousSlots.get(slotKey);
      // Same strategy and version in the same place: the state's shape is the one this code knows.
      const sameCode = previous !== undefined && (previous.definition === definition || (previous.definition.name === definition.name && previous.definition.version === definition.version));
      let carryOver: unknown;
      if (sameCode) {
        try {
          carryOver = previous.instance.exportState?.();
        } catch (error) {
          options.log.warn(`strategy "${name}": exportState() threw; the new instance starts empty`, { pool: draft.key, error: (error as Error)?.message ?? String(error) });
        }
      }
      try {
        const instance = definition.create(config, {
          random: seededRandom(`${options.seed}:${slotKey}`),
          now: options.now,
          log: options.log,
          pool: draft.name,
          loadScoreWeights: draft.weights,
          previousState: carryOver,
          kvIndex: options.kvIndex,
        });
        created.push({ instance, tookState: carryOver !== undefined });
        chain.push({ name, definition, instance, budget: new PickBudget() });
      } catch (error) {
        ctx.report(source, at, `${ctx.strategyLabel(name)}: create() threw: ${(error as Error)?.message ?? String(error)}`);
      }
    }
    return { ...draft, chain };
  });
  if (ctx.problems.length === 0) return pools;
  for (const { instance, tookState } of created) {
    if (tookState) continue;
    try {
      instance.dispose?.();
    } catch {
      // Never used; nothing to report.
    }
  }
  return undefined;
}
