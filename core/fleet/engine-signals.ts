// What a router reads from an engine's /metrics page: running and waiting
// requests, KV-cache usage, the LoRA adapters in use, and a few capacity and
// cache facts for the admin view. vLLM V1 and SGLang name these differently
// and split them over several series; this file turns one parsed page into
// one set of numbers per replica.
import type { Engine } from '../../sdk/types.ts';
import type { Sample } from './prometheus-text.ts';

export interface EngineSignals {
  /** Requests in the engine's running batch, summed over its engines / DP ranks. */
  readonly running?: number;
  /** Requests waiting in the engine's queue, summed likewise. */
  readonly queueDepth?: number;
  /** Fraction of the KV cache in use, 0..1 (the mean over DP ranks: their caches are equal). */
  readonly kvUsage?: number;
  /** Adapters with running or waiting requests at the engine's latest LoRA report. */
  readonly loadedAdapters?: readonly string[];
  readonly runningAdapters?: readonly string[];
  readonly waitingAdapters?: readonly string[];
  /** Engine wall-clock ms of that report (vLLM stores the time as the gauge's value). */
  readonly adaptersReportedAt?: number;
  /** Most adapters the engine holds at once (vLLM's max_lora). */
  readonly maxLoras?: number;
  readonly blockSize?: number;
  /** KV blocks on the GPU, summed over engines. */
  readonly numGpuBlocks?: number;
  /** KV capacity in tokens: blocks × block size (vLLM), max_total_num_tokens (SGLang). */
  readonly kvCapacityTokens?: number;
  /** vLLM's cumulative prefix-cache counters, in tokens. */
  readonly prefixCacheHits?: number;
  readonly prefixCacheQueries?: number;
  /** SGLang's own prefix-cache hit rate gauge, 0..1. */
  readonly prefixCacheHitRate?: number;
}

const VLLM = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  kvUsage: 'vllm:kv_cache_usage_perc',
  /** The name before vLLM 0.9 renamed it. */
  kvUsageOld: 'vllm:gpu_cache_usage_perc',
  lora: 'vllm:lora_requests_info',
  cacheConfig: 'vllm:cache_config_info',
  prefixHits: 'vllm:prefix_cache_hits_total',
  prefixQueries: 'vllm:prefix_cache_queries_total',
  prefixHitsOld: 'vllm:gpu_prefix_cache_hits_total',
  prefixQueriesOld: 'vllm:gpu_prefix_cache_queries_total',
} as const;

const SGLANG = {
  running: 'sglang:num_running_reqs',
  waiting: 'sglang:num_queue_reqs',
  kvUsage: 'sglang:token_usage',
  cacheHitRate: 'sglang:cache_hit_rate',
  kvCapacityTokens: 'sglang:max_total_num_tokens',
} as const;

/** Every series name the extractor reads, per engine: the parser's `keep` filter. */
export const ENGINE_METRIC_NAMES: Readonly<Record<Engine, ReadonlySet<string>>> = {
  vllm: new Set(Object.values(VLLM)),
  sglang: new Set(Object.values(SGLANG)),
};

/**
 * Labels that tell apart ranks reporting the same scheduler. SGLang writes one
 * series per TP/PP/EP rank when every scheduler reports, each with the same
 * counts; summing them would multiply the load. Series that differ only in
 * these are one scheduler (the largest value is kept); `dp_rank` and
 * `model_name` do tell schedulers apart and are summed.
 */
const SGLANG_MIRROR_LABELS: ReadonlySet<string> = new Set(['tp_rank', 'pp_rank', 'moe_ep_rank']);
const NO_MIRRORS: ReadonlySet<string> = new Set();

export function extractSignals(engine: Engine, samples: readonly Sample[]): EngineSignals {
  const byName = groupByName(samples, ENGINE_METRIC_NAMES[engine]);
  return engine === 'vllm' ? extractVllm(byName) : extractSglang(byName);
}

/** True when the page carried at least one load signal: otherwise it is not this engine's page. */
export function hasLoadSignals(signals: EngineSignals): boolean {
  return signals.running !== undefined || signals.queueDepth !== undefined || signals.kvUsage !== undefined;
}

export interface PrefixWindow {
  readonly hits: number;
  readonly queries: number;
  readonly ratio?: number;
}

/**
 * The prefix-cache hit ratio over the last scrape interval, from vLLM's
 * cumulative counters: a lifetime ratio barely moves after a day of uptime.
 * With no new queries the previous ratio stands; after a counter reset (an
 * engine restart) or on the first scrape the lifetime ratio is the best guess.
 */
export function prefixHitRatioSince(previous: PrefixWindow | undefined, hits: number, queries: number): number | undefined {
  const lifetime = queries > 0 ? clamp01(hits / queries) : undefined;
  if (!previous || hits < previous.hits || queries < previous.queries) return lifetime;
  const newQueries = queries - previous.queries;
  if (newQueries === 0) return previous.ratio;
  return clamp01((hits - previous.hits) / newQueries);
}

function extractVllm(byName: Map<string, Sample[]>): EngineSignals {
  const kvSeries = byName.get(VLLM.kvUsage) ?? byName.get(VLLM.kvUsageOld);
  const hitsSeries = byName.get(VLLM.prefixHits) ?? byName.get(VLLM.prefixHitsOld);
  const queriesSeries = byName.get(VLLM.prefixQueries) ?? byName.get(VLLM.prefixQueriesOld);
  const cache = cacheConfig(byName.get(VLLM.cacheConfig));
  const lora = newestLoraReport(byName.get(VLLM.lora));
  return defined({
    running: count(combine(byName.get(VLLM.running), 'sum', NO_MIRRORS)),
    queueDepth: count(combine(byName.get(VLLM.waiting), 'sum', NO_MIRRORS)),
    kvUsage: fraction(combine(kvSeries, 'mean', NO_MIRRORS)),
    prefixCacheHits: count(combine(hitsSeries, 'sum', NO_MIRRORS)),
    prefixCacheQueries: count(combine(queriesSeries, 'sum', NO_MIRRORS)),
    ...cache,
    ...lora,
  });
}

function extractSglang(byName: Map<string, Sample[]>): EngineSignals {
  const series = (name: string): Sample[] | undefined => aggregateOnly(byName.get(name));
  return defined({
    running: count(combine(series(SGLANG.running), 'sum', SGLANG_MIRROR_LABELS)),
    queueDepth: count(combine(series(SGLANG.waiting), 'sum', SGLANG_MIRROR_LABELS)),
    kvUsage: fraction(combine(series(SGLANG.kvUsage), 'mean', SGLANG_MIRROR_LABELS)),
    prefixCacheHitRate: fraction(combine(series(SGLANG.cacheHitRate), 'mean', SGLANG_MIRROR_LABELS)),
    kvCapacityTokens: count(combine(series(SGLANG.kvCapacityTokens), 'sum', SGLANG_MIRROR_LABELS)),
  });
}

/**
 * With priority scheduling SGLang writes per-priority series beside an
 * aggregate whose `priority` label is empty; count the aggregate only.
 */
function aggregateOnly(series: Sample[] | undefined): Sample[] | undefined {
  if (!series || !series.some((s) => s.labels.priority === '')) return series;
  return series.filter((s) => s.labels.priority === undefined || s.labels.priority === '');
}

/**
 * vLLM keeps one `lora_requests_info` series per label combination it ever
 * reported and stamps each with the time it was set, so the newest value is
 * the current report. It lists adapters with requests at that step, not every
 * adapter resident in GPU memory: an idle engine reports none.
 */
function newestLoraReport(series: Sample[] | undefined): Partial<EngineSignals> {
  let newest: Sample | undefined;
  for (const s of series ?? []) {
    if (Number.isFinite(s.value) && (!newest || s.value > newest.value)) newest = s;
  }
  if (!newest) return {};
  const runningAdapters = splitList(newest.labels.running_lora_adapters);
  const waitingAdapters = splitList(newest.labels.waiting_lora_adapters);
  const maxLoras = integer(newest.labels.max_lora);
  return {
    runningAdapters,
    waitingAdapters,
    loadedAdapters: [...new Set([...runningAdapters, ...waitingAdapters])],
    // vLLM writes seconds; an older engine that writes 1.0 has no time to give.
    adaptersReportedAt: newest.value > 1e9 ? Math.round(newest.value * 1000) : undefined,
    maxLoras,
  };
}

/** `cache_config_info` is an info gauge: one series per engine (DP rank), facts in its labels. */
function cacheConfig(series: Sample[] | undefined): Partial<EngineSignals> {
  const seenEngines = new Set<string>();
  let blockSize: number | undefined;
  let numGpuBlocks: number | undefined;
  let kvCapacityTokens: number | undefined;
  for (const s of series ?? []) {
    const engine = s.labels.engine ?? '';
    if (seenEngines.has(engine)) continue;
    seenEngines.add(engine);
    const size = integer(s.labels.block_size);
    const blocks = integer(s.labels.num_gpu_blocks); // "None" until the engine has profiled memory
    if (size !== undefined) blockSize ??= size;
    if (blocks === undefined) continue;
    numGpuBlocks = (numGpuBlocks ?? 0) + blocks;
    if (size !== undefined) kvCapacityTokens = (kvCapacityTokens ?? 0) + blocks * size;
  }
  return { blockSize, numGpuBlocks, kvCapacityTokens };
}

/**
 * One number from a metric's series: mirrors of one scheduler (series that
 * differ only in `mirrors` labels) collapse to their largest value, then the
 * schedulers are summed or averaged. NaN and infinite values carry nothing.
 */
function combine(series: Sample[] | undefined, how: 'sum' | 'mean', mirrors: ReadonlySet<string>): number | undefined {
  if (!series) return undefined;
  const bySchedule = new Map<string, number>();
  for (const s of series) {
    if (!Number.isFinite(s.value)) continue;
    const key = mirrors.size === 0 ? String(bySchedule.size) : schedulerKey(s.labels, mirrors);
    const seen = bySchedule.get(key);
    bySchedule.set(key, seen === undefined ? s.value : Math.max(seen, s.value));
  }
  if (bySchedule.size === 0) return undefined;
  let total = 0;
  for (const value of bySchedule.values()) total += value;
  return how === 'sum' ? total : total / bySchedule.size;
}

function schedulerKey(labels: Readonly<Record<string, string>>, mirrors: ReadonlySet<string>): string {
  const parts: string[] = [];
  for (const name of Object.keys(labels).sort()) {
    if (!mirrors.has(name)) parts.push(`${name}=${labels[name]}`);
  }
  return parts.join('\u0000');
}

function groupByName(samples: readonly Sample[], names: ReadonlySet<string>): Map<string, Sample[]> {
  const byName = new Map<string, Sample[]>();
  for (const s of samples) {
    if (!names.has(s.name)) continue;
    const list = byName.get(s.name);
    if (list) list.push(s);
    else byName.set(s.name, [s]);
  }
  return byName;
}

function splitList(value: string | undefined): string[] {
  if (!value) return [];
  const names: string[] = [];
  for (const part of value.split(',')) {
    const name = part.trim();
    if (name && !names.includes(name)) names.push(name);
  }
  return names;
}

function integer(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value);
}

function count(value: number | undefined): number | undefined {
  return value === undefined ? undefined : Math.max(0, value);
}

function fraction(value: number | undefined): number | undefined {
  return value === undefined ? undefined : clamp01(value);
}

function clamp01(value: number): number {
  return Math.min(1, Math.max(0, value));
}

/** Drops undefined fields, so a signal the page lacked is absent rather than present-but-undefined. */
function defined<T extends object>(value: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) if (field !== undefined) out[key] = field;
  return out as T;
}
