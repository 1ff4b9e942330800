// KV events from the network: vLLM's encodings decode to the same batch;
// garbage, reordering, unknown replicas and floods are counted and dropped,
// never thrown; the index answers longest-prefix questions exactly.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { decodeKvMessage, type KvEventBatch } from '../../core/fleet/kv-events.ts';
import { KvIndex } from '../../core/fleet/kv-index.ts';

const packr = new Packr({ useRecords: false });
const seqFrame = (n: number | bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
};
const message = (seq: number, payload: unknown) => [Buffer.from('kv-events'), seqFrame(seq), packr.pack(payload)];
const batch = (seq: number, payload: unknown): KvEventBatch => {
  const decoded = decodeKvMessage(message(seq, payload));
  assert.equal(typeof decoded, 'object', String(decoded));
  return decoded as KvEventBatch;
};

describe('decodeKvMessage', () => {
  it('reads vLLM’s array_like batches, with and without medium and data-parallel rank', () => {
    const v011 = batch(7, [1.5, [['BlockStored', [11, 12], null, [1, 2, 3], 16, null, 'GPU'], ['BlockRemoved', [9], 'GPU'], ['AllBlocksCleared']], 0]);
    assert.equal(v011.seq, 7n);
    assert.equal(v011.ts, 1.5);
    assert.deepEqual(v011.events, [{ type: 'stored', hashes: [11, 12] }, { type: 'removed', hashes: [9] }, { type: 'cleared' }]);
    // vLLM 0.9: no medium, no rank.
    const v09 = batch(8, [2, [['BlockStored', [11], 10, [1], 16, null], ['BlockRemoved', [11]]]]);
    assert.deepEqual(v09.events, [{ type: 'stored', hashes: [11] }, { type: 'removed', hashes: [11] }]);
  });

  it('reads the map encoding, 64-bit and bytes hashes', () => {
    const decoded = batch(1, { ts: 3, events: [{ type: 'BlockStored', block_hashes: [2n ** 63n + 5n, 42], parent_block_hash: null }, { type: 'BlockRemoved', block_hashes: [new Uint8Array([1, 2, 255])] }], data_parallel_rank: 0 });
    assert.deepEqual(decoded.events, [{ type: 'stored', hashes: [`i${2n ** 63n + 5n}`, 42] }, { type: 'removed', hashes: ['b0102ff'] }]);
  });

  it('keeps unknown event kinds as unknown (a newer vLLM), and refuses wrong shapes with a reason', () => {
    assert.deepEqual(batch(1, [1, [['BlockMoved', [1]]]]).events, [{ type: 'unknown', tag: 'BlockMoved' }]);
    const bad: [readonly Uint8Array[], RegExp][] = [
      [[Buffer.from('t'), seqFrame(1)], /3 frames/],
      [[Buffer.from('t'), Buffer.alloc(4), packr.pack([1, []])], /8/],
      [[Buffer.from('t'), seqFrame(1), Buffer.from([0xdc, 0xff])], /msgpack/],
      [message(1, 'hello'), /neither/],
      [message(1, [1, 'x']), /events is not an array/],
      [message(1, ['now', []]), /ts/],
      [message(1, [1, [['BlockStored', 'x']]]), /block_hashes/],
      [message(1, [1, [['BlockStored', [1.5]]]]), /integer or bytes/],
      [message(1, [1, [[42]]]), /type tag/],
      [message(1, [1, [null]]), /neither/],
    ];
    for (const [frames, reason] of bad) {
      const decoded = decodeKvMessage(frames);
      assert.equal(typeof decoded, 'string');
      assert.match(decoded as string, reason);
    }
  });

  it('never throws on random frames', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 4 }), (frames) => {
        const decoded = decodeKvMessage(frames);
        assert.ok(typeof decoded === 'string' || typeof decoded === 'object');
      }),
      { numRuns: 2000 },
    );
    // Valid msgpack of random shapes, in a well-formed envelope.
    fc.assert(
      fc.property(fc.anything(), (payload) => {
        let packed: Buffer;
        try {
          packed = packr.pack(payload);
        } catch {
          return;
        }
        decodeKvMessage([Buffer.from('t'), seqFrame(1), packed]);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('KvIndex', () => {
  const setup = () => {
    let t = 0;
    const index = new KvIndex({ now: () => t, maxBlocksPerReplica: 100 });
    index.track('a');
    index.track('b');
    return { index, tick: (ms: number) => (t += ms) };
  };
  const stored = (seq: number, hashes: number[]) => batch(seq, [0, [['BlockStored', hashes, null, [], 16, null, 'GPU']]]);
  const removed = (seq: number, hashes: number[]) => batch(seq, [0, [['BlockRemoved', hashes, 'GPU']]]);
  const depth = (index: KvIndex, hashes: number[]) => Object.fromEntries(index.longestPrefix(hashes).map((m) => [m.replica, m.blocks]));

  it('answers the longest prefix each replica holds, contiguous from the first block', () => {
    const { index, tick } = setup();
    assert.deepEqual(index.longestPrefix([1]).map((m) => m.ageMs), [Infinity, Infinity]);
    index.apply('a', stored(0, [1, 2, 3]));
    index.apply('b', stored(0, [1, 2, 4, 5]));
    tick(40);
    assert.deepEqual(depth(index, [1, 2, 3, 9]), { a: 3, b: 2 });
    assert.deepEqual(depth(index, [1, 2, 4, 5]), { a: 2, b: 4 });
    // A hole: b lost block 2, so it holds only block 1 of this prompt, though it has 4 and 5.
    index.apply('b', removed(1, [2]));
    assert.deepEqual(depth(index, [1, 2, 4, 5]), { a: 2, b: 1 });
    assert.deepEqual(depth(index, [7]), { a: 0, b: 0 });
    assert.deepEqual(index.longestPrefix([1]).map((m) => m.ageMs), [40, 0]);
  });

  it('drops reordered and duplicate batches, counts gaps, restarts at sequence 0, clears', () => {
    const { index } = setup();
    index.apply('a', stored(5, [1]));
    index.apply('a', stored(4, [2]));
    index.apply('a', stored(5, [3]));
    assert.equal(index.counters.outOfOrder, 2);
    assert.deepEqual(depth(index, [1]), { a: 1, b: 0 });
    assert.equal(index.blockCount('a'), 1);
    index.apply('a', stored(9, [2]));
    assert.equal(index.counters.gaps, 1);
    // A restarted engine numbers from 0 again, with an empty cache.
    index.apply('a', stored(0, [8]));
    assert.equal(index.blockCount('a'), 1);
    assert.deepEqual(depth(index, [8]), { a: 1, b: 0 });
    index.apply('a', batch(1, [0, [['AllBlocksCleared']]]));
    assert.equal(index.blockCount('a'), 0);
  });

  it('ignores unknown replicas and removals of blocks it never saw; bounds what a replica may claim', () => {
    const { index } = setup();
    index.apply('stranger', stored(0, [1]));
    assert.equal(index.counters.unknownReplica, 1);
    assert.deepEqual(depth(index, [1]), { a: 0, b: 0 });
    index.apply('a', removed(0, [77]));
    assert.equal(index.blockCount('a'), 0);
    index.apply('a', stored(1, Array.from({ length: 150 }, (_, i) => i)));
    assert.ok(index.blockCount('a') <= 100);
    assert.equal(index.counters.overflows, 1);
    index.forget('a');
    assert.deepEqual(index.tracked(), ['b']);
    assert.deepEqual(depth(index, [120]), { b: 0 });
  });
});
