// A hostile KV-event publisher over real ZeroMQ on loopback: maximal
// batches, a flood of them, a message over the size bound, and a feed of
// real-looking batches with gaps. The router's event loop must never block
// long, its memory must stay bounded, an oversized message must not end the
// feed, and missed batches come back from the engine's replay socket.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Packr } from 'msgpackr';
import { Publisher, Router } from 'zeromq';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { KvEventFeed } from '../../core/fleet/kv-subscriber.ts';
import { waitFor } from '../fleet/fake-engine.ts';
import { publisherProcess } from '../helpers/kv-publisher-process.ts';

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

  it('maximal batches, twenty-one back to back, never block the loop long and are refused; a batch at the bounds is applied in slices', async () => {
    const publisher = await publisherProcess();
    closers.push(() => publisher.close());
    const index = new KvIndex({ now: Date.now });
    const feed = new KvEventFeed(index, log);
    closers.push(() => feed.close());
    feed.sync([{ replica: 'e', endpoint: publisher.endpoint }]);
    await feed.connected('e');
    await new Promise((resolve) => setTimeout(resolve, 200));
    // 240 events × 65,536 hashes: ~15 MiB, over the size bound: refused before the loop sees a byte.
    // What this machine's load alone costs the loop, so that the bound below measures the feed, not the neighbours.
    const idle = await longestBlock(() => new Promise((resolve) => setTimeout(resolve, 1000)));
    const bound = 400 + 2 * idle;
    const rssBefore = process.memoryUsage().rss;
    let peakRss = rssBefore;
    const blocked = await longestBlock(async () => {
      await publisher.send(21, 0, 'maximal');
      await waitFor(
        'the batches to be refused and the feed to connect again',
        () => {
          peakRss = Math.max(peakRss, process.memoryUsage().rss);
          return index.counters.oversized >= 1;
        },
        120_000,
      );
      await feed.connected('e');
    });
    // The subscription reaches the publisher before anything is sent (a PUB drops what comes before).
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(index.blockCount('e'), 0);
    // Generous bounds for a loaded machine; the goal (50 ms) is measured in docs/kv-events.md.
    assert.ok(blocked < bound, `the event loop was blocked ${blocked.toFixed(0)} ms (idle: ${idle.toFixed(0)} ms)`);
    assert.ok(peakRss - rssBefore < 700 * 1024 * 1024, `RSS grew ${((peakRss - rssBefore) / 2 ** 20).toFixed(0)} MiB`);

    // A batch at the bounds (65,536 blocks with their 1M token ids, ~5 MiB) is applied, in slices.
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
    assert.ok(
      warnings.some((w) => /size bound/.test(w)),
      warnings.join('; '),
    );
    // The publisher's next batches reach the index again.
    await waitFor(
      'a batch after the reconnect',
      () => {
        void publisher.send(['kv-events', seqFrame(1), packr.pack([1, [storedRun(0, 4)], 0])]);
        return index.blockCount('e') === 4;
      },
      20_000,
    );
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
