// Pools and replicas (kind: pools), and their strategy chains: each strategy
// registered, its config valid against the plugin's schema. Instances are
// the runtime's: each generation creates its own (core/decide/generation.ts).
import { DEFAULT_LOAD_SCORE_WEIGHTS } from '../../../sdk/index.ts';
import { OUTLIER_DEFAULTS } from '../../fleet/outlier.ts';
import { configValidator } from '../../plugins/config.ts';
import {
  DEFAULT_FULL_PREFILL_TOKENS,
  replicaCapacity,
  SHEDDING_DEFAULTS,
  versionKey,
  type PoolSpec,
  type ReplicaSpec,
  type StrategySpec,
} from '../compiled.ts';
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
  wait_estimate: { base_ms: 0, ms_per_queued_request: 50, prefill_ms_per_1k_tokens: 20 },
  // docs/reliability.md gives each default's reason.
  upstream: {
    connect_timeout_ms: 2000,
    stream_headers_timeout_ms: 15_000,
    headers_timeout_ms: 300_000,
    stream_idle_timeout_ms: 120_000,
    body_timeout_ms: 60_000,
    connections: 128,
  },
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

export interface CompiledPools {
  readonly pools: PoolSpec[];
  readonly replicas: Map<string, ReplicaSpec>;
  readonly poolNames: Set<string>;
  readonly poolsByVersion: Map<string, PoolSpec[]>;
}

export function compilePools(ctx: CompileContext, { models, unknownModel }: CompiledModels): CompiledPools {
  const pools: PoolSpec[] = [];
  const replicas = new Map<string, ReplicaSpec>();
  const poolNames = new Set<string>();
  const poolsByVersion = new Map<string, PoolSpec[]>();
  const overflows: OverflowRef[] = [];
  for (const { source, doc } of ctx.ofKind('pools')) {
    const defaults = doc.defaults ?? {};
    (doc.pools ?? []).forEach((p: Doc, i: number) => {
      const path = ['pools', i];
      const model = models.get(p.model);
      if (!model) return ctx.report(source, [...path, 'model'], unknownModel(p.model));
      if (model.cold) return ctx.report(source, [...path, 'model'], `"${p.model}" is a cold-tier model: it has no pools until it is deployed`);
      if (!model.versions.some((v) => v.version === p.version)) {
        return ctx.report(
          source,
          [...path, 'version'],
          `"${p.model}" has no version "${p.version}" (it has ${model.versions.map((v) => v.version).join(', ')})`,
        );
      }
      const key = `${versionKey(p.model, p.version)}/${p.name}`;
      if (pools.some((other) => other.key === key))
        return ctx.report(source, [...path, 'name'], `pool "${p.name}" of ${versionKey(p.model, p.version)} is defined twice`);
      const poolReplicas: ReplicaSpec[] = [];
      if (p.replicas.length === 0) {
        ctx.report(
          source,
          [...path, 'replicas'],
          `pool "${p.name}" of ${versionKey(p.model, p.version)} has no replicas: every request routed to it would get a 503; add a replica, or remove the pool`,
        );
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
          if (key === undefined)
            return ctx.report(
              source,
              [...path, 'replicas', j, 'id'],
              `api_key_env ${keyEnv} is not set in the router's environment: set it to the engine's key (vLLM --api-key), or remove api_key_env`,
            );
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
      const pool: PoolSpec = {
        key,
        name: p.name,
        model: p.model,
        version: p.version,
        maxModelLen: p.limits?.max_model_len,
        replicas: poolReplicas,
        strategies: checkChain(ctx, source, strategiesPath, strategies, key),
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
        waitEstimate: { baseMs: wait.base_ms, msPerQueuedRequest: wait.ms_per_queued_request, prefillMsPer1kTokens: wait.prefill_ms_per_1k_tokens },
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
      pools.push(pool);
      if (p.overflow !== undefined) overflows.push({ pool, source, at: [...path, 'overflow'] });
      poolNames.add(p.name);
      const vk = versionKey(p.model, p.version);
      poolsByVersion.set(vk, [...(poolsByVersion.get(vk) ?? []), pool]);
    });
  }
  checkOverflow(ctx, overflows, poolsByVersion);
  return { pools, replicas, poolNames, poolsByVersion };
}

function checkChain(ctx: CompileContext, source: PolicySource, strategiesPath: PathSegment[], strategies: Doc[], poolKey: string): StrategySpec[] {
  const pending: StrategySpec[] = [];
  strategies.forEach((entry: Doc, k: number) => {
    const name = typeof entry === 'string' ? entry : entry.name;
    const at = [...strategiesPath, k];
    const definition = ctx.registry.get(name);
    if (!definition) {
      const hint = closest(name, ctx.registry.names());
      return ctx.report(
        source,
        at,
        `strategy "${name}" is not registered${hint ? ` (did you mean "${hint}"?)` : `; registered: ${ctx.registry.names().join(', ')}`}`,
      );
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
    pending.push({
      name,
      label: ctx.strategyLabel(name),
      definition,
      config,
      slotKey: `${poolKey}#${k}:${name}`,
      at: { file: source.file, ...source.locate(at) },
    });
  });
  return pending;
}
