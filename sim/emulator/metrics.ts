// /metrics with exactly the names and label shapes the real engines expose
// (docs/design.md, "Facts we rely on"), so the router's scraper meets
// the emulator as it would meet vLLM V1 or SGLang.
import type { EngineModel } from '../engine/engine-model.ts';
import type { EngineMetrics } from '../engine/types.ts';
import { Exposition, type Labels } from './exposition.ts';
import { Histogram, TTFT_BUCKETS_SECONDS } from './histogram.ts';

export type EngineKind = 'vllm' | 'sglang';

/** vLLM keeps every label combination lora_requests_info ever had; we keep the newest few. */
const LORA_SERIES_KEPT = 16;

export class EngineExporter {
  readonly ttft = new Histogram(TTFT_BUCKETS_SECONDS);
  private readonly kind: EngineKind;
  private readonly modelName: string;
  private readonly engine: EngineModel;
  private readonly wallSeconds: () => number;
  // running|waiting adapter lists → when they were last current (Unix seconds).
  private readonly loraSeries = new Map<string, { running: string; waiting: string; at: number }>();

  constructor(kind: EngineKind, modelName: string, engine: EngineModel, wallSeconds: () => number = () => Date.now() / 1000) {
    this.kind = kind;
    this.modelName = modelName;
    this.engine = engine;
    this.wallSeconds = wallSeconds;
  }

  render(): string {
    const snapshot = this.engine.snapshot();
    return this.kind === 'vllm' ? this.renderVllm(snapshot) : this.renderSglang(snapshot);
  }

  private renderVllm(m: EngineMetrics): string {
    // vLLM V1 labels its per-engine series with the served model name and the engine index.
    const labels: Labels = { model_name: this.modelName, engine: '0' };
    const one = (value: number) => [{ labels, value }];
    return new Exposition()
      .family('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', one(m.running))
      .family('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', one(m.waiting))
      .family('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', one(m.kvUsage))
      .family(
        'vllm:gpu_cache_usage_perc',
        'gauge',
        'GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.',
        one(m.kvUsage),
      )
      .family('vllm:prefix_cache_queries_total', 'counter', 'Prefix cache queries, in terms of number of queried tokens.', one(m.prefixCacheQueries))
      .family('vllm:prefix_cache_hits_total', 'counter', 'Prefix cache hits, in terms of number of cached tokens.', one(m.prefixCacheHits))
      .family('vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.', one(m.preemptions))
      .family('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', one(m.promptTokens))
      .family('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.', one(m.generationTokens))
      .family(
        'vllm:request_success_total',
        'counter',
        'Count of successfully processed requests.',
        (['stop', 'length', 'abort'] as const).map((reason) => ({ labels: { ...labels, finished_reason: reason }, value: m.finished[reason] })),
      )
      .family('vllm:time_to_first_token_seconds', 'histogram', 'Histogram of time to first token in seconds.', this.ttft.samples(labels))
      .family('vllm:lora_requests_info', 'gauge', 'Running stats on lora requests.', this.loraSamples(m))
      .family('vllm:cache_config_info', 'gauge', 'Information of the LLMEngine CacheConfig', [
        {
          labels: {
            block_size: m.blockSize,
            cache_dtype: 'auto',
            enable_prefix_caching: 'True',
            engine: '0',
            gpu_memory_utilization: '0.9',
            num_gpu_blocks: m.numGpuBlocks,
          },
          value: 1,
        },
      ])
      .text();
  }

  /**
   * One series per adapter-list combination, valued with the time it was
   * last current, as vLLM's set_to_current_time leaves them: the newest value
   * is the present. Sampled when scraped.
   */
  private loraSamples(m: EngineMetrics): { labels: Labels; value: number }[] {
    const running = m.runningAdapters.join(',');
    const waiting = m.waitingAdapters.join(',');
    const key = `${running}|${waiting}`;
    this.loraSeries.delete(key);
    this.loraSeries.set(key, { running, waiting, at: this.wallSeconds() });
    if (this.loraSeries.size > LORA_SERIES_KEPT) this.loraSeries.delete(this.loraSeries.keys().next().value!);
    return [...this.loraSeries.values()].map((s) => ({
      labels: { max_lora: m.maxLoras, running_lora_adapters: s.running, waiting_lora_adapters: s.waiting },
      value: s.at,
    }));
  }

  private renderSglang(m: EngineMetrics): string {
    const labels: Labels = { model_name: this.modelName };
    const one = (value: number) => [{ labels, value }];
    const usedTokens = Math.round(m.kvUsage * m.numGpuBlocks) * m.blockSize;
    const finished = m.finished.stop + m.finished.length + m.finished.abort;
    return (
      new Exposition()
        .family('sglang:num_running_reqs', 'gauge', 'The number of running requests.', one(m.running))
        .family('sglang:num_queue_reqs', 'gauge', 'The number of requests in the waiting queue.', one(m.waiting))
        .family('sglang:max_total_num_tokens', 'gauge', 'Maximum total number of tokens in the KV cache pool.', one(m.numGpuBlocks * m.blockSize))
        .family('sglang:num_used_tokens', 'gauge', 'The number of used tokens.', one(usedTokens))
        .family('sglang:token_usage', 'gauge', 'The token usage.', one(m.kvUsage))
        // Cumulative here; SGLang reports it over its recent logging window.
        .family('sglang:cache_hit_rate', 'gauge', 'The prefix cache hit rate.', one(m.prefixCacheQueries === 0 ? 0 : m.prefixCacheHits / m.prefixCacheQueries))
        .family('sglang:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', one(m.promptTokens))
        .family('sglang:generation_tokens_total', 'counter', 'Number of generation tokens processed.', one(m.generationTokens))
        .family('sglang:num_requests_total', 'counter', 'Number of requests processed.', one(finished))
        .family('sglang:num_aborted_requests_total', 'counter', 'Number of requests aborted.', one(m.finished.abort))
        .family('sglang:time_to_first_token_seconds', 'histogram', 'Histogram of time to first token in seconds.', this.ttft.samples(labels))
        .text()
    );
  }
}
