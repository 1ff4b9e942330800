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
  /** Names worked out ahead, off the router's thread (the tokenizer worker), for these very ids. */
  private readonly known?: Float64Array;

  constructor(
    private readonly tokens: ArrayLike<number>,
    readonly blockSize: number,
    adapter: string | null | undefined,
    maxBlocks: number,
  ) {
    this.length = blockSize > 0 ? Math.min(maxBlocks, Math.floor(tokens.length / blockSize)) : 0;
    this.root = rootKey(adapter);
    if (!adapter && this.length > 0) this.known = knownFor(tokens, blockSize);
  }

  /** How many of the names came worked out ahead (the rest are hashed here, when asked for). */
  get namedAhead(): number {
    return Math.min(this.length, this.known?.length ?? 0);
  }

  keyAt(j: number): number {
    const known = this.known;
    if (known !== undefined && j < known.length) return known[j];
    const keys = this.keys;
    while (keys.length <= j) {
      const i = keys.length;
      const parent = i === 0 ? this.root : known !== undefined && i - 1 < known.length ? known[i - 1] : keys[i - 1];
      keys.push(chainKey(parent, this.tokens, i * this.blockSize, (i + 1) * this.blockSize));
    }
    return keys[j];
  }
}

/** Most blocks of a prompt looked up: 8,192 blocks of 16 tokens is 131k tokens. */
export const MAX_LOOKUP_BLOCKS = 8_192;

/**
 * The adapter-less names of a sequence's full blocks (at most
 * MAX_LOOKUP_BLOCKS), going on from `prefixKeys`, the names of a prefix of
 * the same sequence. Hashing a 100k-token prompt takes milliseconds: the
 * tokenizer worker does it, next to encoding, so the router's thread only
 * looks names up (docs/tokens.md, "Speed").
 */
export function blockKeysOf(tokens: ArrayLike<number>, blockSize: number, prefixKeys?: Float64Array): Float64Array {
  const n = blockSize > 0 ? Math.min(MAX_LOOKUP_BLOCKS, Math.floor(tokens.length / blockSize)) : 0;
  const keys = new Float64Array(n);
  const from = Math.min(n, prefixKeys?.length ?? 0);
  if (from > 0) keys.set(prefixKeys!.subarray(0, from));
  let parent = from > 0 ? keys[from - 1] : rootKey(null);
  for (let j = from; j < n; j++) parent = keys[j] = chainKey(parent, tokens, j * blockSize, (j + 1) * blockSize);
  return keys;
}

interface Known {
  readonly tokens: ArrayLike<number>;
  readonly bySize: Map<number, Float64Array>;
}

/** Remembered by array, and by content for a copy of it (a caged plugin's lookup comes back with one), the most recent first. */
const knownKeys = new WeakMap<ArrayLike<number>, Known>();
const recent = new Map<string, Known>();
let recentBytes = 0;
/** Ids kept for matching copies, at most (the arrays themselves are the requests'). */
const RECENT_BYTES = 16 * 1024 * 1024;

const fingerprint = (t: ArrayLike<number>) => `${t.length}:${t[0]}:${t[t.length >> 1]}:${t[t.length - 1]}:${t[t.length >> 2]}`;

function sameTokens(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Names worked out ahead for these ids (or an equal copy of them), by block size. */
function knownFor(tokens: ArrayLike<number>, blockSize: number): Float64Array | undefined {
  const known = knownKeys.get(tokens) ?? recent.get(fingerprint(tokens));
  if (known === undefined || (known.tokens !== tokens && !sameTokens(known.tokens, tokens))) return undefined;
  return known.bySize.get(blockSize);
}

/** Names worked out elsewhere for these ids (adapter-less): TokenBlockKeys over the same ids uses them. */
export function rememberBlockKeys(tokens: ArrayLike<number>, blockSize: number, keys: Float64Array): void {
  let known = knownKeys.get(tokens);
  if (known === undefined) {
    known = { tokens, bySize: new Map() };
    knownKeys.set(tokens, known);
    const key = fingerprint(tokens);
    const old = recent.get(key);
    if (old) recentBytes -= old.tokens.length * 4;
    recent.delete(key);
    recent.set(key, known);
    recentBytes += tokens.length * 4;
    for (const [k, v] of recent) {
      if (recentBytes <= RECENT_BYTES) break;
      recent.delete(k);
      recentBytes -= v.tokens.length * 4;
    }
  }
  known.bySize.set(blockSize, keys);
}

const learned = new Set<number>();

/** A block size some engine publishes (the KV index learned it from events): prompts' blocks are named for it ahead. */
export function noteBlockSize(size: number): void {
  if (size > 0 && learned.size < 8) learned.add(size);
}

export function learnedBlockSizes(): number[] {
  return [...learned];
}
