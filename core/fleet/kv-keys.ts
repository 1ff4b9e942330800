// The router's own names for KV blocks, computed from token content: block
// j of a sequence is named by a chain over the token ids of blocks 0..j (and
// the LoRA adapter), never by the engine's hash. An engine's block hash
// depends on its hash algorithm, a per-process random seed and whether it
// sends integers or bytes (docs/kv-events.md); token ids do not. The index
// names each stored block this way from the event's `token_ids`, and a request
// is looked up by naming its prompt's token ids the same way, so any engine
// that publishes token ids is matched, whatever it hashes with.
//
// A name is a 52-bit integer (two 32-bit MurmurHash3 lanes, exact in a double):
// a false match between two different prefixes is about one in 2^52 per pair.
import { finalize, hashString, step } from '../../sdk/hashing.ts';

const LANE_A = 0x9747b28c;
const LANE_B = 0x5bd1e995;

/** MurmurHash3's final mix over a block of `length` tokens. */
function finalizeBlock(h: number, length: number): number {
  return finalize(h ^ length);
}

/** Two 32-bit hashes as one 52-bit name. */
function join(hi: number, lo: number): number {
  return (hi & 0xfffff) * 0x1_0000_0000 + lo;
}

/** The name before a sequence's first block: blocks of different adapters never share a name. */
export function rootKey(adapter: string | null | undefined): number {
  const name = adapter ?? '';
  return join(hashString(name, LANE_A), hashString(name, LANE_B));
}

/**
 * The name of the block holding tokens[start..end), after the block named
 * `parent`. `extra` (non-zero) stands for what else the engine keyed the block
 * by (multimodal inputs, a cache salt): such a block never matches text alone.
 */
export function chainKey(parent: number, tokens: ArrayLike<number>, start: number, end: number, extra = 0): number {
  const parentHi = Math.floor(parent / 0x1_0000_0000) | 0;
  const parentLo = parent >>> 0;
  let a = step(step(LANE_A, parentLo), parentHi);
  let b = step(step(LANE_B, parentHi), parentLo);
  if (extra !== 0) {
    a = step(a, extra);
    b = step(b, ~extra);
  }
  for (let i = start; i < end; i++) {
    const t = tokens[i] | 0;
    a = step(a, t);
    b = step(b, t ^ 0x5f356495);
  }
  const n = end - start;
  return join(finalizeBlock(b, n), finalizeBlock(a, n));
}

/**
 * The names of a token sequence's full blocks of `blockSize`, at most
 * `maxBlocks` of them, computed lazily: `keyAt(j)` costs one block's hashing
 * the first time, so a lookup that stops early stops hashing too.
 */
export class TokenBlockKeys {
  readonly length: number;
  private readonly root: number;
  private readonly keys: number[] = [];

  constructor(
    private readonly tokens: ArrayLike<number>,
    readonly blockSize: number,
    adapter: string | null | undefined,
    maxBlocks: number,
  ) {
    this.length = blockSize > 0 ? Math.min(maxBlocks, Math.floor(tokens.length / blockSize)) : 0;
    this.root = rootKey(adapter);
  }

  keyAt(j: number): number {
    const keys = this.keys;
    while (keys.length <= j) {
      const i = keys.length;
      keys.push(chainKey(i === 0 ? this.root : keys[i - 1], this.tokens, i * this.blockSize, (i + 1) * this.blockSize));
    }
    return keys[j];
  }
}
