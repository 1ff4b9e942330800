// A hostile KV-event publisher over real ZeroMQ on loopback: maximal
// batches, a flood of them, a message over the size bound, and a feed of
// real-looking batches with gaps. The router's event loop must never block
// long, its memory must stay bounded, an oversized message must not end the
// feed, and missed batches come back from the engine's replay socket.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { Packr } from 'msgpackr';
import { Publisher, Router } from 'zeromq';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { KvEventFeed } from '../../core/fleet/kv-subscriber.ts';
import { waitFor } from '../fleet/fake-engine.ts';

const packr = new Packr({ useRecords: false });
const seqFrame = (n: number | bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
};
const warnings: string[] = [];
const log = { info() {}, warn: (message: string) => void warnings.push(message) };

/** The longest the event loop went without a turn while `work` ran, in ms. */
async function longestBlock(work: () => Promise<void>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 2);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(longest, performance.now() - last);
}

/** A stored event of `blocks` 16-token blocks, each its own sequence (no parent). */
const storedRun = (first: number, blocks: number, parent: number | null = null) => ({
  type: 'BlockStored',
  block_hashes: Array.from({ length: blocks }, (_, i) => first + i),
  parent_block_hash: parent,
  token_ids: Array.from({ length: blocks * 16 }, (_, i) => (first * 16 + i) % 150_000),
  block_size: 16,
  lora_id: null,
  medium: 'GPU',
  lora_name: null,
});

/**
 * A publisher in a process of its own, as an engine is (sending 300 MB from
 * this process would cost this loop the copies): it binds, prints its
 * endpoint, and on each line `count seq kind` sends `count` messages of `kind`.
 */
const PUBLISHER = `
import { Packr } from 'msgpackr';
import { Publisher } from 'zeromq';
import { createInterface } from 'node:readline';
const packr = new Packr({ useRecords: false });
const seq = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
const payloads = {
  maximal: () => packr.pack([1, Array.from({ length: 240 }, () => ['BlockRemoved', Array.from({ length: 65536 }, (_, j) => j % 100), 'GPU']), 0]),
  full: () => packr.pack([1, [{ type: 'BlockStored', block_hashes: Array.from({ length: 65536 }, (_, i) => i), parent_block_hash: null,
    token_ids: Array.from({ length: 65536 * 16 }, (_, i) => i % 150000), block_size: 16, lora_id: null, medium: 'GPU', lora_name: null }], 0]),
};
const made = {};
const publisher = new Publisher({ linger: 0, sendHighWaterMark: 100000 });
await publisher.bind('tcp://127.0.0.1:*');
console.log(publisher.lastEndpoint);
for await (const line of createInterface({ input: process.stdin })) {
  const [count, first, kind] = line.split(' ');
  made[kind] ??= payloads[kind]();
  for (let i = 0; i < Number(count); i++) await publisher.send(['kv-events', seq(Number(first) + i), made[kind]]);
  console.log('sent');
}
publisher.close();
`;

async function publisherProcess() {
  const child = spawn(process.execPath, ['--input-type=module', '-e', PUBLISHER], { cwd: process.cwd(), stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => String((await lines.next()).value);
  const endpoint = await next();
  return {
    endpoint,
    async send(count: number, first: number, kind: 'maximal' | 'full') {
      child.stdin!.write(`${count} ${first} ${kind}\n`);
      assert.equal(await next(), 'sent');
    },
    async close() {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

describe('a hostile KV event feed', () => {
  const closers: (() => unknown)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  async function setup(replay = false) {
    const publisher = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
    await publisher.bind('tcp://127.0.0.1:*');
    closers.push(() => publisher.close());
    let router: Router | undefined;
    if (replay) {
      router = new Router({ linger: 0 });
      await router.bind('tcp://127.0.0.1:*');
      closers.push(() => router!.close());
    }
    const index = new KvIndex({ now: Date.now });
    const feed = new KvEventFeed(index, log);
    closers.push(() => feed.close());
    feed.sync([{ replica: 'e', endpoint: publisher.lastEndpoint!, replay: router?.lastEndpoint ?? undefined }]);
    await feed.connected('e');
    await new Promise((resolve) => setTimeout(resolve, 200));
    return { publisher, router, index };
  }

  it('maximal batches, one and twenty back to back, never block the loop long and are refused whole', async () => {
    const publisher = await publisherProcess();
    closers.push(() => publisher.close());
    const index = new KvIndex({ now: Date.now });
    const feed = new KvEventFeed(index, log);
    closers.push(() => feed.close());
    feed.sync([{ replica: 'e', endpoint: publisher.endpoint }]);
    await feed.connected('e');
    await new Promise((resolve) => setTimeout(resolve, 200));
    // 240 events × 65,536 hashes: ~15 MiB, under ZeroMQ's bound, over the per-message bounds.
    // What this machine's load alone costs the loop, so that the bound below measures the feed, not the neighbours.
    const idle = await longestBlock(() => new Promise((resolve) => setTimeout(resolve, 1000)));
    const bound = 400 + 2 * idle;
    const rssBefore = process.memoryUsage().rss;
    let peakRss = rssBefore;
    const blocked = await longestBlock(async () => {
      await publisher.send(21, 0, 'maximal');
      await waitFor('the 21 batches to be refused', () => {
        peakRss = Math.max(peakRss, process.memoryUsage().rss);
        return index.counters.malformed + index.counters.overloaded >= 21;
      }, 120_000);
    });
    assert.ok(index.counters.malformed >= 1, 'refused as over a bound');
    assert.equal(index.blockCount('e'), 0);
    // Generous bounds for a loaded machine; the goal (50 ms) is measured in docs/kv-events.md.
    assert.ok(blocked < bound, `the event loop was blocked ${blocked.toFixed(0)} ms (idle: ${idle.toFixed(0)} ms)`);
    assert.ok(peakRss - rssBefore < 700 * 1024 * 1024, `RSS grew ${((peakRss - rssBefore) / 2 ** 20).toFixed(0)} MiB`);

    // A batch at the bounds (65,536 blocks with their 1M token ids) is applied, in slices.
    const blockedFull = await longestBlock(async () => {
      await publisher.send(1, 100, 'full');
      await waitFor('the full batch to be applied', () => index.blockCount('e') === 65_536, 60_000);
    });
    assert.ok(blockedFull < bound, `applying blocked the loop ${blockedFull.toFixed(0)} ms (idle: ${idle.toFixed(0)} ms)`);
  });

  it('a message over the size bound drops the connection; the feed logs, counts and connects again', async () => {
    const { publisher, index } = await setup();
    warnings.length = 0;
    await publisher.send(['kv-events', seqFrame(0), Buffer.alloc(17 * 1024 * 1024)]);
    await waitFor('the reconnect', () => index.counters.oversized === 1, 20_000);
    assert.ok(warnings.some((w) => /size bound/.test(w)), warnings.join('; '));
    // The publisher's next batches reach the index again.
    await waitFor('a batch after the reconnect', () => {
      void publisher.send(['kv-events', seqFrame(1), packr.pack([1, [storedRun(0, 4)], 0])]);
      return index.blockCount('e') === 4;
    }, 20_000);
  });

  it('a sequence gap is filled from the engine’s replay socket, as vLLM serves it', async () => {
    const { publisher, router, index } = await setup(true);
    const batches = [storedRun(0, 2), storedRun(2, 2, 1), storedRun(4, 2, 3), storedRun(6, 2, 5)].map((e) => packr.pack([1, [e], 0]));
    // vLLM's replay: [client, "", start] answered with [client, "", seq, payload] per buffered batch, then [client, "", -1, ""].
    const requests: bigint[] = [];
    void (async () => {
      for await (const [client, , start] of router!) {
        const from = start.readBigUInt64BE(0);
        requests.push(from);
        for (let seq = Number(from); seq < batches.length; seq++) await router!.send([client, Buffer.alloc(0), seqFrame(seq), batches[seq]]);
        const end = Buffer.alloc(8);
        end.writeBigInt64BE(-1n);
        await router!.send([client, Buffer.alloc(0), end, Buffer.alloc(0)]);
      }
    })();
    await publisher.send(['kv-events', seqFrame(0), batches[0]]);
    await waitFor('the first batch', () => index.blockCount('e') === 2, 10_000);
    // Batches 1 and 2 are lost on the way; 3 arrives and reveals the gap.
    await publisher.send(['kv-events', seqFrame(3), batches[3]]);
    await waitFor('the replayed batches', () => index.blockCount('e') === 8, 10_000);
    assert.deepEqual(requests, [1n]);
    assert.equal(index.counters.replayed, 2);
    assert.equal(index.counters.gaps, 0);
    assert.equal(index.counters.unknownParent, 0);
  });
});
