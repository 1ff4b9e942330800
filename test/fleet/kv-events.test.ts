// KV events from the network: vLLM's encodings (positional arrays of older
// versions, 0.26's maps; integer, 64-bit and bytes hashes) and SGLang's
// decode to the same blocks; the index names blocks by their token ids, so a
// prompt's token ids find them whatever the engine hashed with. Garbage,
// reordering, unknown parents, other tiers and floods are counted and
// dropped, never thrown.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { decodeKvMessage, KV_MESSAGE_LIMITS, type BlocksStored, type KvEventBatch } from '../../core/fleet/kv-events.ts';
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

/** A sequence of `blocks` blocks of 16 token ids, the first `shared` of them common to every seed's sequence. */
const tokens = (blocks: number, own = 0, shared = blocks) =>
  Array.from({ length: blocks * 16 }, (_, i) => (i < shared * 16 ? 1000 + i : 50_000 + own * 997 + i));

/**
 * An engine that hashes as vLLM does (SHA-256 over parent, tokens, extra keys,
 * from a random root), in one of three hash encodings: the index must not care.
 */
function engine(kind: 'int' | 'bytes' | 'signed') {
  const root = randomBytes(32);
  const hashOf = (digest: Buffer): unknown => {
    if (kind === 'bytes') return new Uint8Array(digest);
    const last = digest.readBigUInt64BE(24);
    return kind === 'int' ? last : BigInt.asIntN(64, last);
  };
  /** The event storing blocks [from, to) of `ids` (vLLM 0.26's map form). */
  return (ids: number[], from: number, to: number, extra: Record<string, unknown> = {}) => {
    let parent = root;
    const hashes: unknown[] = [];
    let parentHash: unknown = null;
    for (let j = 0; j < to; j++) {
      const digest = createHash('sha256')
        .update(parent)
        .update(Buffer.from(Uint32Array.from(ids.slice(j * 16, j * 16 + 16)).buffer))
        .digest();
      if (j === from - 1) parentHash = hashOf(digest);
      if (j >= from) hashes.push(hashOf(digest));
      parent = digest;
    }
    return {
      type: 'BlockStored',
      block_hashes: hashes,
      parent_block_hash: parentHash,
      token_ids: ids.slice(from * 16, to * 16),
      block_size: 16,
      lora_id: null,
      medium: 'GPU',
      lora_name: null,
      ...extra,
    };
  };
}

describe('decodeKvMessage', () => {
  it('reads every field of vLLM 0.26’s map-form BlockStored in the array batch, and the batch’s rank', () => {
    const decoded = batch(7, [
      1.5,
      [
        {
          type: 'BlockStored',
          block_hashes: [2n ** 63n + 5n, 42],
          parent_block_hash: new Uint8Array([9, 9]),
          token_ids: tokens(2),
          block_size: 16,
          lora_id: 3,
          medium: 'GPU',
          lora_name: 'sql',
          extra_keys: [['sql'], ['sql', 'img-hash']],
          group_idx: 0,
          kv_cache_spec_kind: 'full_attention',
        },
        { type: 'BlockRemoved', block_hashes: [42], medium: 'GPU' },
        { type: 'AllBlocksCleared' },
      ],
      2,
    ]);
    assert.equal(decoded.seq, 7n);
    assert.equal(decoded.dataParallelRank, 2);
    assert.equal(decoded.hashCount, 3);
    const stored = decoded.events[0] as BlocksStored;
    assert.equal(stored.type, 'blocks-stored');
    assert.deepEqual([...stored.hashes], [5, 42]);
    assert.equal(stored.parent, 0x0909);
    assert.equal(stored.tokenIds.length, 32);
    assert.equal(stored.blockSize, 16);
    assert.equal(stored.loraId, 3);
    assert.equal(stored.loraName, 'sql');
    assert.equal(stored.medium, 'GPU');
    assert.equal(stored.groupIdx, 0);
    assert.equal(stored.specKind, 'full_attention');
    // The LoRA name alone adds nothing (the adapter names the chain); an image hash does.
    assert.equal(stored.extra![0], 0);
    assert.notEqual(stored.extra![1], 0);
    assert.deepEqual(
      decoded.events.slice(1).map((e) => e.type),
      ['blocks-removed', 'cleared'],
    );
  });

  it('reads the positional arrays of older versions, with and without medium, LoRA name and rank', () => {
    const v011 = batch(1, [1, [['BlockStored', [11, 12], null, tokens(2), 16, null, 'GPU'], ['BlockRemoved', [9], 'GPU'], ['AllBlocksCleared']], 0]);
    assert.deepEqual(
      v011.events.map((e) => e.type),
      ['blocks-stored', 'blocks-removed', 'cleared'],
    );
    // vLLM 0.9: no medium, no rank.
    const v09 = batch(2, [
      2,
      [
        ['BlockStored', [11], 10, tokens(1), 16, null],
        ['BlockRemoved', [11]],
      ],
    ]);
    const stored = v09.events[0] as BlocksStored;
    assert.equal(stored.medium, null);
    assert.equal(stored.parent, 10);
    assert.equal(v09.dataParallelRank, null);
    // Later positional: lora_name, extra_keys, group_idx, spec kind appended.
    const later = batch(3, [3, [['BlockStored', [1], null, tokens(1), 16, 1, 'CPU', 'sql', null, 1, 'sliding_window']]]);
    const l = later.events[0] as BlocksStored;
    assert.deepEqual([l.loraName, l.medium, l.groupIdx, l.specKind, l.extra], ['sql', 'CPU', 1, 'sliding_window', null]);
  });

  it('skips events with bad fields (counted) and refuses messages over a bound or of the wrong shape', () => {
    const skipped = batch(1, [
      1,
      [['BlockMoved', [1]], ['BlockStored', [1], null, [-1, ...tokens(1).slice(1)], 16, null, 'GPU'], ['BlockStored', [1], null, tokens(1), 0], [42]],
    ]);
    assert.deepEqual(
      skipped.events.map((e) => e.type),
      ['unknown', 'invalid', 'invalid', 'invalid'],
    );
    const bad: [readonly Uint8Array[], RegExp][] = [
      [[Buffer.from('t'), seqFrame(1)], /3 frames/],
      [[Buffer.from('t'), Buffer.alloc(4), packr.pack([1, []])], /8/],
      [[Buffer.from('t'), seqFrame(1), Buffer.from([0xdc, 0xff])], /msgpack/],
      [message(1, 'hello'), /neither/],
      [message(1, [1, 'x']), /events is not an array/],
      [message(1, ['now', []]), /ts/],
      [message(1, [1, Array.from({ length: KV_MESSAGE_LIMITS.events + 1 }, () => ['AllBlocksCleared'])]), /events/],
      [
        message(1, [
          1,
          [
            ['BlockRemoved', Array.from({ length: 40_000 }, (_, i) => i)],
            ['BlockRemoved', Array.from({ length: 40_000 }, (_, i) => i)],
          ],
        ]),
        /block hashes/,
      ],
      [message(1, [1, [['BlockStored', [1], null, new Array(KV_MESSAGE_LIMITS.tokenIds + 1).fill(1), 16]]]), /token ids/],
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

describe('KvIndex in token space', () => {
  const setup = (maxBlocksPerReplica = 10_000) => {
    let t = 0;
    const index = new KvIndex({ now: () => t, maxBlocksPerReplica });
    index.track('a');
    index.track('b');
    return { index, tick: (ms: number) => (t += ms) };
  };
  const depth = (index: KvIndex, ids: number[], adapter?: string) =>
    Object.fromEntries(index.longestPrefixOfTokens(ids, adapter).map((m) => [m.replica, m.blocks]));

  for (const kind of ['int', 'bytes', 'signed'] as const) {
    it(`matches a prompt's token ids whatever the engine hashes with (${kind} hashes, random seeds)`, () => {
      const { index } = setup();
      const a = engine(kind);
      const b = engine(kind);
      const conversation = tokens(6, 1, 2);
      // a caches the whole conversation in two steps (the second's parent is the first's last block); b its first 2 blocks.
      index.apply('a', batch(0, [0, [a(conversation, 0, 4)]]));
      index.apply('a', batch(1, [0, [a(conversation, 4, 6)]]));
      index.apply('b', batch(0, [0, [b(conversation, 0, 2)]]));
      assert.deepEqual(depth(index, conversation), { a: 6, b: 2 });
      // The next turn repeats the conversation and adds 20 tokens (a partial block too).
      assert.deepEqual(depth(index, [...conversation, ...tokens(1, 9, 0), 5, 6, 7, 8]), { a: 6, b: 2 });
      const other = tokens(6, 2, 2);
      assert.deepEqual(depth(index, other), { a: 2, b: 2 });
      assert.equal(index.longestPrefixOfTokens(other)[0].tokens, 32);
      // Removal by the engine's hash: a evicts block 3 (and keeps 4, 5: a hole).
      const hash3 = a(conversation, 3, 4).block_hashes;
      index.apply('a', batch(2, [0, [{ type: 'BlockRemoved', block_hashes: hash3, medium: 'GPU' }]]));
      assert.deepEqual(depth(index, conversation), { a: 3, b: 2 });
      assert.equal(index.counters.unknownParent, 0);
    });
  }

  it('skips blocks whose parent never arrived, partial blocks, other tiers and sliding-window groups; follows a block size change', () => {
    const { index } = setup();
    const a = engine('int');
    const ids = tokens(4);
    // The batch with blocks 0..1 was missed: blocks 2..3 have an unknown parent.
    index.apply('a', batch(0, [0, [a(ids, 2, 4)]]));
    assert.equal(index.counters.unknownParent, 2);
    assert.equal(index.blockCount('a'), 0);
    // Three hashes but two blocks of token ids: the third is partial.
    const stored = a(ids, 0, 3);
    index.apply('a', batch(1, [0, [{ ...stored, token_ids: stored.token_ids.slice(0, 40) }]]));
    assert.equal(index.counters.partialBlocks, 1);
    assert.deepEqual(depth(index, ids), { a: 2, b: 0 });
    index.apply(
      'b',
      batch(0, [
        0,
        [
          { ...a(ids, 0, 4), medium: 'CPU' },
          { ...a(ids, 0, 4), group_idx: 1, kv_cache_spec_kind: 'sliding_window' },
        ],
      ]),
    );
    assert.equal(index.counters.otherTier, 8);
    assert.equal(index.blockCount('b'), 0);
    // The engine now caches 32-token blocks: what was held is dropped, new blocks count.
    index.apply('a', batch(2, [0, [{ ...a(ids, 0, 2), block_size: 32, block_hashes: [77, 78].slice(0, 1), token_ids: ids.slice(0, 32) }]]));
    assert.equal(index.counters.blockSizeChanges, 1);
    assert.equal(index.blockSize('a'), 32);
    assert.deepEqual(depth(index, ids), { a: 1, b: 0 });
    assert.equal(index.longestPrefixOfTokens(ids)[0].tokens, 32);
  });

  it('keeps adapters apart (lora_name), and blocks keyed by more than text (an image) never match text', () => {
    const { index } = setup();
    const a = engine('int');
    const ids = tokens(2);
    index.apply('a', batch(0, [0, [a(ids, 0, 2, { lora_name: 'sql', extra_keys: [['sql'], ['sql']] })]]));
    index.apply('b', batch(0, [0, [a(ids, 0, 2, { extra_keys: [['mm-hash-1'], ['mm-hash-1']] })]]));
    assert.deepEqual(depth(index, ids, 'sql'), { a: 2, b: 0 });
    assert.deepEqual(depth(index, ids), { a: 0, b: 0 });
  });

  it('reads SGLang’s events: signed 64-bit hashes, one page per event', () => {
    const { index } = setup();
    const ids = tokens(3);
    const hashes = [-5n, 7n, -(2n ** 62n)];
    const events = hashes.map((h, j) => ['BlockStored', [h], j === 0 ? null : hashes[j - 1], ids.slice(j * 16, j * 16 + 16), 16, null, null]);
    index.apply('a', batch(0, [0, events]));
    assert.deepEqual(depth(index, ids), { a: 3, b: 0 });
    index.apply('a', batch(1, [0, [['BlockRemoved', [-(2n ** 62n)], null]]]));
    assert.deepEqual(depth(index, ids), { a: 2, b: 0 });
  });

  it('drops reordered and duplicate batches, counts gaps, restarts at sequence 0, clears', () => {
    const { index } = setup();
    const a = engine('int');
    const ids = tokens(3);
    index.apply('a', batch(5, [0, [a(ids, 0, 1)]]));
    index.apply('a', batch(4, [0, [a(ids, 1, 2)]]));
    index.apply('a', batch(5, [0, [a(ids, 1, 2)]]));
    assert.equal(index.counters.outOfOrder, 2);
    assert.deepEqual(depth(index, ids), { a: 1, b: 0 });
    index.apply('a', batch(9, [0, [a(ids, 1, 2)]]));
    assert.equal(index.counters.gaps, 1);
    assert.deepEqual(depth(index, ids), { a: 2, b: 0 });
    // A restarted engine numbers from 0 again, with an empty cache.
    index.apply('a', batch(0, [0, [engine('int')(ids, 0, 1)]]));
    assert.equal(index.blockCount('a'), 1);
    index.apply('a', batch(1, [0, [['AllBlocksCleared']]]));
    assert.equal(index.blockCount('a'), 0);
  });

  it('bounds what a replica may claim, and what it may send per second', () => {
    const { index, tick } = setup(100);
    const ids = tokens(150);
    index.apply('a', batch(0, [0, [engine('int')(ids, 0, 150)]]));
    assert.ok(index.blockCount('a') <= 100);
    assert.equal(index.counters.overflows, 1);
    const limited = new KvIndex({ now: () => 0, hashesPerSecond: 1000 });
    limited.track('a');
    const big = batch(0, [0, [['BlockRemoved', Array.from({ length: 600 }, (_, i) => i)]]]);
    assert.equal(limited.admit('a', big), true);
    assert.equal(limited.admit('a', big), false);
    assert.equal(limited.counters.rateLimited, 1);
    tick(0);
  });

  it('applies a batch in slices with the same result as at once', async () => {
    const ids = tokens(20_000, 0, 20_000);
    const stored = engine('int')(ids, 0, 20_000);
    const once = setup(100_000).index;
    once.apply('a', batch(0, [0, [stored]]));
    const sliced = setup(100_000).index;
    let turns = 0;
    const counting = setInterval(() => turns++, 0);
    await sliced.applySliced('a', batch(0, [0, [stored]]));
    clearInterval(counting);
    assert.ok(turns >= 1, 'the event loop ran between slices');
    assert.equal(sliced.blockCount('a'), 20_000);
    assert.deepEqual(depth(sliced, ids), depth(once, ids));
  });

  it('counts lookups that match and those that do not', () => {
    const { index, tick } = setup();
    index.apply('a', batch(0, [0, [engine('int')(tokens(2), 0, 2)]]));
    tick(10);
    index.longestPrefixOfTokens(tokens(2));
    tick(10);
    index.longestPrefixOfTokens(tokens(2, 5, 0));
    assert.deepEqual({ total: index.lookups.total, matched: index.lookups.matched }, { total: 2, matched: 1 });
    assert.equal(index.lastMatchAgeMs(), 10);
  });
});
