import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startEmulator, type Emulator } from '../../sim/emulator/server.ts';
import { allSamples, sampleValue } from './prom-sample.ts';

// The tiny profile (5 ms steps, 4 sequences, 64 KV blocks) run 20× faster.
const SPEED = 20;
const MODEL = 'tiny-model';

const clientFor = (emulator: Emulator) => new OpenAI({ baseURL: `${emulator.url}/v1`, apiKey: 'unused', maxRetries: 0 });

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const metrics = async (emulator: Emulator) => (await fetch(`${emulator.url}/metrics`)).text();
const post = (emulator: Emulator, path: string, body: string) =>
  fetch(`${emulator.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

describe('emulator: OpenAI API', () => {
  let emulator: Emulator;
  let client: OpenAI;
  before(async () => {
    emulator = await startEmulator({ profile: 'tiny', speed: SPEED, adapters: ['support-v2'], defaultMaxTokens: 12 });
    client = clientFor(emulator);
  });
  after(() => emulator.close());

  it('answers a chat completion with vLLM’s shape and usage', async () => {
    const response = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 7 });
    assert.match(response.id, /^chatcmpl-/);
    assert.equal(response.object, 'chat.completion');
    assert.equal(response.model, MODEL);
    assert.equal(response.choices[0].message.role, 'assistant');
    assert.equal(response.choices[0].message.content!.trim().split(' ').length, 7);
    assert.equal(response.choices[0].finish_reason, 'length');
    assert.equal(response.usage!.completion_tokens, 7);
    // The prompt is rendered as the router renders it (core/facts/prompt.ts): role markers count.
    assert.equal(response.usage!.prompt_tokens, Math.ceil('<|user|>\nSay something.\n'.length / 4));
  });

  it('ends with finish_reason stop when the client sets no max_tokens', async () => {
    const response = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(response.choices[0].finish_reason, 'stop');
    assert.equal(response.usage!.completion_tokens, 12);
  });

  it('streams one chunk per token, then a usage chunk with no choices, then [DONE]', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Count to five.' },
      ],
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    const tokens = chunks.filter((c) => c.choices.length === 1 && c.choices[0].delta.content);
    assert.equal(tokens.length, 5);
    assert.equal(tokens.at(-1)!.choices[0].finish_reason, 'length');
    const last = chunks.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage!.completion_tokens, 5);
    assert.equal(last.usage!.total_tokens, last.usage!.prompt_tokens + 5);
  });

  it('paces the stream by the engine’s steps', async () => {
    const started = performance.now();
    const stream = await client.completions.create({ model: MODEL, prompt: 'x'.repeat(40), max_tokens: 60, stream: true });
    let count = 0;
    for await (const chunk of stream) count += chunk.choices.length;
    // 60 steps of at least 5 ms of model time, 20× faster.
    assert.equal(count, 60);
    assert.ok(performance.now() - started >= (60 * 5) / SPEED, 'stream finished faster than the engine could produce it');
  });

  it('serves completions for a list of prompts, one choice each', async () => {
    const response = await client.completions.create({ model: MODEL, prompt: ['first prompt', 'second prompt'], max_tokens: 3 });
    assert.equal(response.object, 'text_completion');
    assert.deepEqual(
      response.choices.map((c) => c.index),
      [0, 1],
    );
    assert.equal(response.usage!.completion_tokens, 6);
  });

  it('reports cached prompt tokens when a prompt repeats', async () => {
    const prompt = 'You are a helpful assistant. '.repeat(20);
    const first = await client.completions.create({ model: MODEL, prompt, max_tokens: 2 });
    const second = await client.completions.create({ model: MODEL, prompt, max_tokens: 2 });
    const cached = (r: typeof first) => (r.usage as { prompt_tokens_details?: { cached_tokens: number } }).prompt_tokens_details!.cached_tokens;
    assert.equal(cached(first), 0);
    assert.ok(cached(second) >= 128, `cached ${cached(second)}`);
  });

  it('lists the base model and its adapters, and selects an adapter by model name', async () => {
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    assert.deepEqual(ids, [MODEL, 'support-v2']);
    assert.equal((models.data[1] as unknown as { parent: string }).parent, MODEL);

    const loaded = await post(emulator, '/v1/load_lora_adapter', JSON.stringify({ lora_name: 'sql-v1', lora_path: '/adapters/sql' }));
    assert.equal(loaded.status, 200);
    const again = await post(emulator, '/v1/load_lora_adapter', JSON.stringify({ lora_name: 'sql-v1', lora_path: '/adapters/sql' }));
    assert.equal(again.status, 400);
    const response = await client.chat.completions.create({ model: 'sql-v1', messages: [{ role: 'user', content: 'SELECT' }], max_tokens: 2 });
    assert.equal(response.model, 'sql-v1');
    assert.ok(emulator.engine.isAdapterLoaded('sql-v1'));

    assert.equal((await post(emulator, '/v1/unload_lora_adapter', JSON.stringify({ lora_name: 'sql-v1' }))).status, 200);
    assert.equal((await post(emulator, '/v1/unload_lora_adapter', JSON.stringify({ lora_name: 'sql-v1' }))).status, 404);
    assert.deepEqual(
      (await client.models.list()).data.map((m) => m.id),
      [MODEL, 'support-v2'],
    );
  });

  it('answers an unknown model with 404 in vLLM’s error shape', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
      (error: unknown) => error instanceof OpenAI.NotFoundError,
    );
    const response = await post(emulator, '/v1/chat/completions', JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }));
    assert.equal(response.status, 404);
    assert.deepEqual(await response.json(), {
      error: { message: 'The model `no-such-model` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
    });
  });

  it('answers malformed JSON and invalid fields with 400 in vLLM’s error shape', async () => {
    const malformed = await post(emulator, '/v1/chat/completions', '{"model": ');
    assert.equal(malformed.status, 400);
    const body = (await malformed.json()) as { error: Record<string, unknown> };
    assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(body.error.code, 400);

    const invalid = await post(emulator, '/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [], max_tokens: 0 }));
    assert.equal(invalid.status, 400);
    assert.equal(((await invalid.json()) as { error: { param: string } }).error.param, 'messages');

    const tooLong = await post(emulator, '/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x'.repeat(4000), max_tokens: 100 }));
    assert.equal(tooLong.status, 400);
    assert.match(((await tooLong.json()) as { error: { message: string } }).error.message, /maximum context length is 1024 tokens/);
  });

  it('returns a deterministic embedding per input', async () => {
    const first = await client.embeddings.create({ model: MODEL, input: ['alpha', 'beta'] });
    const second = await client.embeddings.create({ model: MODEL, input: 'alpha', encoding_format: 'float' });
    assert.equal(first.data.length, 2);
    assert.equal(first.data[0].embedding.length, 32);
    first.data[0].embedding.forEach((value, i) => assert.ok(Math.abs(value - second.data[0].embedding[i]) < 1e-6));
    assert.notDeepEqual(first.data[0].embedding, first.data[1].embedding);
  });

  it('toggles /health between 200 and 503', async () => {
    assert.equal((await fetch(`${emulator.url}/health`)).status, 200);
    emulator.setHealthy(false);
    assert.equal((await fetch(`${emulator.url}/health`)).status, 503);
    emulator.setHealthy(true);
    assert.equal((await fetch(`${emulator.url}/health`)).status, 200);
  });
});

describe('emulator: options', () => {
  it('registers adapters without loading them, and overrides max_loras and max_num_seqs', async () => {
    const emulator = await startEmulator({
      profile: 'tiny',
      speed: SPEED,
      adapters: ['own'],
      registeredAdapters: ['own', 'other'],
      maxLoras: 1,
      maxNumSeqs: 2,
    });
    try {
      assert.deepEqual(
        (await clientFor(emulator).models.list()).data.map((m) => m.id),
        [MODEL, 'own', 'other'],
      );
      assert.equal(emulator.engine.isAdapterLoaded('own'), true);
      assert.equal(emulator.engine.isAdapterLoaded('other'), false);
      assert.equal(emulator.engine.profile.maxNumSeqs, 2);
      assert.ok(sampleValue(await metrics(emulator), 'vllm:lora_requests_info', { max_lora: '1' })! > 0);
      await clientFor(emulator).completions.create({ model: 'other', prompt: 'x', max_tokens: 1 });
      assert.deepEqual(emulator.engine.snapshot().loadedAdapters, ['other']);
    } finally {
      await emulator.close();
    }
  });
});

describe('emulator: /metrics', () => {
  it('exposes vLLM’s metric names, and they move under load', async () => {
    // Real time (speed 1): each request runs for ~0.6 s, so all eight are in the engine at once, four running, however slowly the client sends them.
    const emulator = await startEmulator({ profile: 'tiny', speed: 1, adapters: ['support-v2'] });
    try {
      const client = clientFor(emulator);
      const idle = await metrics(emulator);
      const labels = { model_name: MODEL };
      for (const name of [
        'vllm:num_requests_running',
        'vllm:num_requests_waiting',
        'vllm:kv_cache_usage_perc',
        'vllm:gpu_cache_usage_perc',
        'vllm:prefix_cache_hits_total',
        'vllm:prefix_cache_queries_total',
        'vllm:num_preemptions_total',
        'vllm:time_to_first_token_seconds_count',
      ]) {
        assert.equal(sampleValue(idle, name, labels), 0, name);
      }
      assert.equal(sampleValue(idle, 'vllm:cache_config_info', { block_size: '16', num_gpu_blocks: '64' }), 1);
      assert.ok(sampleValue(idle, 'vllm:lora_requests_info', { max_lora: '2', running_lora_adapters: '', waiting_lora_adapters: '' })! > 0);

      // Eight long requests on a replica that runs four at a time, two on an adapter.
      const requests = Array.from({ length: 8 }, (_, i) =>
        client.completions.create({ model: i < 2 ? 'support-v2' : MODEL, prompt: `request ${i} `.repeat(10), max_tokens: 100 }),
      );
      let busy = '';
      await until(async () => {
        busy = await metrics(emulator);
        // Requests arrive one by one: the first steps may run fewer while the rest queue up.
        return sampleValue(busy, 'vllm:num_requests_waiting', labels)! > 0 && sampleValue(busy, 'vllm:num_requests_running', labels) === 4;
      }, 'a queue to form behind a full batch');
      assert.equal(sampleValue(busy, 'vllm:num_requests_running', labels), 4);
      assert.ok(sampleValue(busy, 'vllm:kv_cache_usage_perc', labels)! > 0);
      assert.equal(sampleValue(busy, 'vllm:gpu_cache_usage_perc', labels), sampleValue(busy, 'vllm:kv_cache_usage_perc', labels));
      const loraSeries = allSamples(busy, 'vllm:lora_requests_info');
      const newest = loraSeries.reduce((a, b) => (b.value >= a.value ? b : a));
      assert.equal(newest.labels.running_lora_adapters, 'support-v2');

      await Promise.all(requests);
      const done = await metrics(emulator);
      assert.equal(sampleValue(done, 'vllm:num_requests_running', labels), 0);
      assert.equal(sampleValue(done, 'vllm:request_success_total', { ...labels, finished_reason: 'length' }), 8);
      assert.equal(sampleValue(done, 'vllm:time_to_first_token_seconds_count', labels), 8);
      assert.equal(sampleValue(done, 'vllm:generation_tokens_total', labels), 800);
      assert.ok(sampleValue(done, 'vllm:prefix_cache_queries_total', labels)! > 0);
    } finally {
      await emulator.close();
    }
  });

  it('speaks SGLang’s metric names with --engine sglang', async () => {
    const emulator = await startEmulator({ profile: 'tiny', speed: SPEED, engine: 'sglang' });
    try {
      const prompt = 'a shared system prompt '.repeat(10);
      await clientFor(emulator).completions.create({ model: MODEL, prompt, max_tokens: 2 });
      await clientFor(emulator).completions.create({ model: MODEL, prompt, max_tokens: 2 });
      const text = await metrics(emulator);
      for (const name of ['sglang:num_running_reqs', 'sglang:num_queue_reqs', 'sglang:token_usage']) {
        assert.equal(sampleValue(text, name, { model_name: MODEL }), 0, name);
      }
      assert.ok(sampleValue(text, 'sglang:cache_hit_rate', { model_name: MODEL })! > 0.3);
      assert.equal(text.includes('vllm:'), false);
    } finally {
      await emulator.close();
    }
  });
});

describe('emulator: client disconnects', () => {
  it('cancels the engine request when a streaming client goes away, freeing its KV', async () => {
    const emulator = await startEmulator({ profile: 'tiny', speed: SPEED });
    try {
      const stream = await clientFor(emulator).chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Write a very long story. '.repeat(10) }],
        max_tokens: 900,
        stream: true,
      });
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) break; // leaving the loop aborts the HTTP request
      }
      await until(() => emulator.engine.snapshot().finished.abort === 1, 'the engine to see the abort');
      assert.equal(emulator.engine.kvUsage, 0);
      assert.equal(emulator.engine.runningCount, 0);
      assert.equal(sampleValue(await metrics(emulator), 'vllm:request_success_total', { finished_reason: 'abort' }), 1);
    } finally {
      await emulator.close();
    }
  });

  it('cancels a non-streaming request whose client gives up', async () => {
    const emulator = await startEmulator({ profile: 'tiny', speed: SPEED });
    try {
      const controller = new AbortController();
      const pending = fetch(`${emulator.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 900 }),
        signal: controller.signal,
      });
      await until(() => emulator.engine.runningCount === 1, 'the request to start');
      controller.abort();
      await assert.rejects(pending);
      await until(() => emulator.engine.snapshot().finished.abort === 1, 'the engine to see the abort');
      assert.equal(emulator.engine.kvUsage, 0);
    } finally {
      await emulator.close();
    }
  });

  it('closes with requests in flight without waiting for them', async () => {
    const emulator = await startEmulator({ profile: 'tiny', speed: 1 });
    const pending = fetch(`${emulator.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 900, stream: true }),
    }).then((r) => r.text());
    await until(() => emulator.engine.runningCount === 1, 'the request to start');
    const started = performance.now();
    await emulator.close();
    assert.ok(performance.now() - started < 1000);
    await pending.catch(() => undefined);
  });
});
