import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ENGINE_METRIC_NAMES, extractSignals, hasLoadSignals, prefixHitRatioSince } from '../../core/fleet/engine-signals.ts';
import { parsePrometheusText } from '../../core/fleet/prometheus-text.ts';
import type { Engine } from '../../sdk/types.ts';

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');
const signalsOf = (engine: Engine, text: string) => extractSignals(engine, parsePrometheusText(text).samples);

test('vLLM V1 with two engines (data parallel): counts are summed, KV usage averaged', () => {
  const s = signalsOf('vllm', fixture('vllm-v1-dp.txt'));
  assert.equal(s.running, 8);
  assert.equal(s.queueDepth, 2);
  assert.ok(Math.abs(s.kvUsage! - 0.3) < 1e-12);
  assert.equal(s.prefixCacheHits, 1_000_000);
  assert.equal(s.prefixCacheQueries, 2_000_000);
  assert.equal(s.blockSize, 16);
  assert.equal(s.numGpuBlocks, 2 * 29205);
  assert.equal(s.kvCapacityTokens, 2 * 29205 * 16);
  assert.equal(s.loadedAdapters, undefined, 'no LoRA gauge, no adapter list');
  assert.ok(hasLoadSignals(s));
});

test('vLLM before 0.9: gpu_cache_usage_perc and gpu_prefix_cache_* stand in for the new names', () => {
  const s = signalsOf('vllm', fixture('vllm-0.8.txt'));
  assert.equal(s.running, 4);
  assert.equal(s.queueDepth, 9);
  assert.equal(s.kvUsage, 0.9125);
  assert.equal(s.prefixCacheHits, 10000);
  assert.equal(s.prefixCacheQueries, 40000);
  assert.equal(s.numGpuBlocks, 11560);
  assert.equal(s.maxLoras, 0);
  assert.deepEqual(s.loadedAdapters, []);
  assert.equal(s.adaptersReportedAt, undefined, 'a gauge of 1.0 is no time');
});

test('the new KV name wins when a page carries both', () => {
  const page = ['vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9', 'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.4'].join('\n');
  assert.equal(signalsOf('vllm', page).kvUsage, 0.4);
});

test('vLLM LoRA: the newest lora_requests_info series is the current one', () => {
  const s = signalsOf('vllm', fixture('vllm-lora.txt'));
  assert.deepEqual(s.runningAdapters, ['sql-lora', 'chat-lora']);
  assert.deepEqual(s.waitingAdapters, ['summarize-lora']);
  assert.deepEqual(s.loadedAdapters, ['sql-lora', 'chat-lora', 'summarize-lora']);
  assert.equal(s.maxLoras, 4);
  assert.equal(s.adaptersReportedAt, 1747051938737);
  assert.equal(s.running, 7);
  assert.equal(s.queueDepth, 1);
  assert.equal(s.kvUsage, 0.6182);
  assert.equal(s.numGpuBlocks, 27120);
});

test('vLLM LoRA: an idle engine reports no adapters; a running and waiting adapter is listed once', () => {
  const idle = [
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="adapter_ko",waiting_lora_adapters="adapter_ko"} 1.7886264546318772e+09',
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.7886264577368872e+09',
    'vllm:num_requests_running{engine="0",model_name="m"} 0.0',
  ].join('\n');
  assert.deepEqual(signalsOf('vllm', idle).loadedAdapters, []);
  const busy = idle.replace('1.7886264546318772e+09', '1.79e+09');
  assert.deepEqual(signalsOf('vllm', busy).loadedAdapters, ['adapter_ko']);
});

test('vLLM: series from several model_name labels are summed', () => {
  const page = [
    'vllm:num_requests_running{engine="0",model_name="base"} 2',
    'vllm:num_requests_running{engine="0",model_name="other"} 3',
    'vllm:num_requests_waiting{engine="0",model_name="base"} 1',
    'vllm:num_requests_waiting{engine="0",model_name="other"} NaN',
  ].join('\n');
  const s = signalsOf('vllm', page);
  assert.equal(s.running, 5);
  assert.equal(s.queueDepth, 1, 'a NaN series carries nothing');
  assert.equal(s.kvUsage, undefined);
});

test('vLLM: num_gpu_blocks "None" (before profiling) leaves the capacity unknown', () => {
  const page = 'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="None"} 1.0\nvllm:num_requests_running 0\n';
  const s = signalsOf('vllm', page);
  assert.equal(s.blockSize, 16);
  assert.equal(s.numGpuBlocks, undefined);
  assert.equal(s.kvCapacityTokens, undefined);
  assert.ok(!('numGpuBlocks' in s), 'absent, not present-but-undefined');
});

test('SGLang: running, queue, token usage, cache hit rate and KV capacity', () => {
  const s = signalsOf('sglang', fixture('sglang.txt'));
  assert.equal(s.running, 12);
  assert.equal(s.queueDepth, 3);
  assert.equal(s.kvUsage, 0.28);
  assert.equal(s.prefixCacheHitRate, 0.007507552643049313);
  assert.equal(s.kvCapacityTokens, 161721);
  assert.equal(s.loadedAdapters, undefined);
});

test('SGLang with DP attention: ranks are schedulers, summed (KV averaged)', () => {
  const s = signalsOf('sglang', fixture('sglang-dp.txt'));
  assert.equal(s.running, 64);
  assert.equal(s.queueDepth, 5);
  assert.ok(Math.abs(s.kvUsage! - 0.7) < 1e-12);
  assert.ok(Math.abs(s.prefixCacheHitRate! - 0.4) < 1e-12);
  assert.equal(s.kvCapacityTokens, 600000);
});

test('SGLang with every scheduler reporting: TP ranks of one scheduler are not added up', () => {
  const page = [
    'sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 4.0',
    'sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 4.0',
    'sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.0',
  ].join('\n');
  const s = signalsOf('sglang', page);
  assert.equal(s.running, 4);
  assert.equal(s.queueDepth, 3);
});

test('SGLang with priority scheduling: the aggregate series (priority="") counts, not the buckets', () => {
  const page = [
    'sglang:num_queue_reqs{model_name="m",priority="",tp_rank="0"} 5.0',
    'sglang:num_queue_reqs{model_name="m",priority="0",tp_rank="0"} 2.0',
    'sglang:num_queue_reqs{model_name="m",priority="1",tp_rank="0"} 3.0',
  ].join('\n');
  assert.equal(signalsOf('sglang', page).queueDepth, 5);
});

test("the wrong engine reads nothing: a page without load signals is not this engine's page", () => {
  const s = signalsOf('sglang', fixture('vllm-v1-dp.txt'));
  assert.ok(!hasLoadSignals(s));
  assert.deepEqual(s, {});
});

test('values out of range are clamped: counts at 0, fractions within 0..1', () => {
  const page = 'vllm:num_requests_running{engine="0"} -3\nvllm:kv_cache_usage_perc{engine="0"} 1.2\n';
  const s = signalsOf('vllm', page);
  assert.equal(s.running, 0);
  assert.equal(s.kvUsage, 1);
});

test('ENGINE_METRIC_NAMES lists what the extractor reads, so a kept-only parse gives the same signals', () => {
  for (const [engine, file] of [
    ['vllm', 'vllm-v1-dp.txt'],
    ['vllm', 'vllm-lora.txt'],
    ['sglang', 'sglang-dp.txt'],
  ] as const) {
    const names = ENGINE_METRIC_NAMES[engine];
    const kept = parsePrometheusText(fixture(file), { keep: (n) => names.has(n) }).samples;
    assert.deepEqual(extractSignals(engine, kept), signalsOf(engine, fixture(file)));
  }
});

test('prefix hit ratio: over the last interval, not the lifetime', () => {
  assert.equal(prefixHitRatioSince(undefined, 250, 1000), 0.25, 'first scrape: lifetime');
  assert.equal(prefixHitRatioSince(undefined, 0, 0), undefined);
  const previous = { hits: 250, queries: 1000, ratio: 0.25 };
  assert.equal(prefixHitRatioSince(previous, 340, 1100), 0.9);
  assert.equal(prefixHitRatioSince(previous, 250, 1000), 0.25, 'no new queries: the last ratio stands');
  assert.equal(prefixHitRatioSince(previous, 10, 20), 0.5, 'counters went back (a restart): lifetime again');
});
