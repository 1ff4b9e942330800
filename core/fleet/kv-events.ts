// Decodes KV cache event messages from vLLM and SGLang. A message is ZeroMQ
// multipart [topic, sequence number (8 bytes, big-endian), msgpack payload];
// the payload is msgspec's encoding of KVEventBatch, checked against vLLM's
// vllm/distributed/kv_events.py (docs/kv-events.md lists the versions):
//   the batch: [ts, events, data_parallel_rank?] (also read as a map)
//   older events, positional: ["BlockStored", block_hashes, parent_block_hash,
//     token_ids, block_size, lora_id, medium?, lora_name?, extra_keys?,
//     group_idx?, kv_cache_spec_kind?, ...], ["BlockRemoved", block_hashes,
//     medium?, group_idx?], ["AllBlocksCleared"]
//   vLLM 0.26, maps: {"type": "BlockStored", "block_hashes": [...], ...}
//     (fields left at their default are omitted)
// Block hashes are unsigned integers of any width (vLLM), signed 64-bit
// integers (SGLang) or bytes (vLLM without VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES);
// each is folded to a 52-bit number, which is all the index needs to follow
// removals and parents: blocks are named by their token ids (kv-keys.ts).
// Every count is bounded before anything is kept, and anything wrong is an
// error string or an `invalid` event, never an exception: the bytes come from
// the network. This runs off the event loop (kv-decoder.ts).
import { Unpackr } from 'msgpackr';
import { hashString } from '../../sdk/hashing.ts';

export type KvEvent =
  /** Blocks named by the router's own prefix hashes (the simulator's engines; never from the network). */
  | { readonly type: 'stored'; readonly hashes: readonly number[] }
  | { readonly type: 'removed'; readonly hashes: readonly number[] }
  | BlocksStored
  | BlocksRemoved
  | { readonly type: 'cleared' }
  | { readonly type: 'unknown'; readonly tag: string }
  /** An event of a known kind whose fields are wrong: skipped and counted. */
  | { readonly type: 'invalid'; readonly reason: string };

/** vLLM's BlockStored (SGLang's too), every field decoded. */
export interface BlocksStored {
  readonly type: 'blocks-stored';
  /** The engine's block hashes, folded to 52 bits. */
  readonly hashes: Float64Array;
  /** The engine's hash of the block before the first, folded; null for a sequence's first block. */
  readonly parent: number | null;
  readonly tokenIds: Uint32Array;
  readonly blockSize: number;
  readonly loraId: number | null;
  readonly loraName: string | null;
  /** "GPU" (or null from versions before tiers) is the engine's own cache; "CPU" etc. are offload tiers. */
  readonly medium: string | null;
  /** Per block: non-zero when the engine keyed it by more than tokens and adapter (multimodal, cache salt). */
  readonly extra: Uint32Array | null;
  readonly groupIdx: number | null;
  /** "full_attention", "sliding_window", ...; null from versions before hybrid models. */
  readonly specKind: string | null;
}

export interface BlocksRemoved {
  readonly type: 'blocks-removed';
  readonly hashes: Float64Array;
  readonly medium: string | null;
  readonly groupIdx: number | null;
}

export interface KvEventBatch {
  readonly seq: bigint;
  readonly ts: number;
  readonly events: readonly KvEvent[];
  readonly dataParallelRank?: number | null;
  /** Block hashes the batch carries, for the per-replica rate bound. */
  readonly hashCount?: number;
}

/**
 * Bounds on one message. A vLLM scheduler step stores at most its token
 * budget (max_num_batched_tokens, 8k–64k) and evicts what it needs for it: a
 * few thousand blocks. These allow 16× that; a message past them is dropped.
 */
export const KV_MESSAGE_LIMITS = {
  events: 8_192,
  hashes: 65_536,
  tokenIds: 1_048_576,
  blockSize: 4_096,
  /** Characters of a LoRA name, medium or spec kind; of one block's extra keys, rendered. */
  text: 256,
  extraKeys: 4_096,
} as const;

// No records or extensions: plain msgpack, as msgspec writes it.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });

/** The sequence number of a message's second frame, or undefined when it is not 8 bytes. */
export function sequenceOf(frame: Uint8Array): bigint | undefined {
  if (frame.length !== 8) return undefined;
  return new DataView(frame.buffer, frame.byteOffset, 8).getBigUint64(0);
}

/** The batch in a message, or why it is not one. */
export function decodeKvMessage(frames: readonly Uint8Array[]): KvEventBatch | string {
  if (frames.length !== 3) return `expected 3 frames (topic, sequence, payload), got ${frames.length}`;
  const seq = sequenceOf(frames[1]);
  if (seq === undefined) return `the sequence frame has ${frames[1].length} bytes, not 8`;
  return decodeKvPayload(seq, frames[2]);
}

export function decodeKvPayload(seq: bigint, bytes: Uint8Array): KvEventBatch | string {
  let payload: unknown;
  try {
    payload = unpackr.unpack(bytes);
  } catch (error) {
    return `payload is not msgpack: ${String((error as Error).message).slice(0, 200)}`;
  }
  return decodeBatch(seq, payload);
}

export function decodeBatch(seq: bigint, payload: unknown): KvEventBatch | string {
  let ts: unknown;
  let rawEvents: unknown;
  let rank: unknown;
  if (Array.isArray(payload)) [ts, rawEvents, rank] = payload;
  else if (isMap(payload)) ({ ts, events: rawEvents, data_parallel_rank: rank } = payload);
  else return 'payload is neither an array nor a map';
  if (typeof ts !== 'number' && typeof ts !== 'bigint') return 'ts is not a number';
  if (!Array.isArray(rawEvents)) return 'events is not an array';
  if (rawEvents.length > KV_MESSAGE_LIMITS.events) return `more than ${KV_MESSAGE_LIMITS.events} events in one batch`;
  const budget = { hashes: KV_MESSAGE_LIMITS.hashes, tokenIds: KV_MESSAGE_LIMITS.tokenIds };
  const events: KvEvent[] = [];
  for (const raw of rawEvents) {
    const event = decodeEvent(raw, budget);
    if (typeof event === 'string') return event;
    events.push(event);
  }
  return {
    seq,
    ts: Number(ts),
    events,
    dataParallelRank: typeof rank === 'number' ? rank : null,
    hashCount: KV_MESSAGE_LIMITS.hashes - budget.hashes,
  };
}

interface Budget {
  hashes: number;
  tokenIds: number;
}

/** Positional field order of each event kind (after the tag), oldest fields first. */
const STORED_FIELDS = [
  'block_hashes',
  'parent_block_hash',
  'token_ids',
  'block_size',
  'lora_id',
  'medium',
  'lora_name',
  'extra_keys',
  'group_idx',
  'kv_cache_spec_kind',
] as const;
const REMOVED_FIELDS = ['block_hashes', 'medium', 'group_idx'] as const;

function fields<K extends string>(raw: unknown[] | Record<string, unknown>, names: readonly K[]): Record<K, unknown> {
  if (!Array.isArray(raw)) return raw as Record<K, unknown>;
  const out = {} as Record<K, unknown>;
  for (let i = 0; i < names.length; i++) out[names[i]] = raw[i + 1];
  return out;
}

/** An event, or a string when the message as a whole is over a bound (it is dropped). */
function decodeEvent(raw: unknown, budget: Budget): KvEvent | string {
  let tag: unknown;
  if (Array.isArray(raw)) tag = raw[0];
  else if (isMap(raw)) tag = raw.type;
  else return { type: 'invalid', reason: 'an event is neither an array nor a map' };
  if (typeof tag !== 'string') return { type: 'invalid', reason: 'an event has no type tag' };
  const event = raw as unknown[] | Record<string, unknown>;
  switch (tag) {
    case 'BlockStored':
      return decodeStored(fields(event, STORED_FIELDS), budget);
    case 'BlockRemoved': {
      const f = fields(event, REMOVED_FIELDS);
      const hashes = engineHashes(f.block_hashes, budget);
      if (typeof hashes === 'string') return hashes;
      if (hashes === undefined) return { type: 'invalid', reason: 'BlockRemoved: block_hashes is not a list of integers or bytes' };
      return { type: 'blocks-removed', hashes, medium: text(f.medium), groupIdx: smallInt(f.group_idx) };
    }
    case 'AllBlocksCleared':
      return { type: 'cleared' };
    default:
      return { type: 'unknown', tag: tag.slice(0, 64) };
  }
}

function decodeStored(f: Record<(typeof STORED_FIELDS)[number], unknown>, budget: Budget): KvEvent | string {
  const hashes = engineHashes(f.block_hashes, budget);
  if (typeof hashes === 'string') return hashes;
  if (hashes === undefined) return { type: 'invalid', reason: 'BlockStored: block_hashes is not a list of integers or bytes' };
  const parent = f.parent_block_hash == null ? null : foldHash(f.parent_block_hash);
  if (parent === undefined) return { type: 'invalid', reason: 'BlockStored: parent_block_hash is not an integer or bytes' };
  const raw = f.token_ids;
  if (!Array.isArray(raw)) return { type: 'invalid', reason: 'BlockStored: token_ids is not a list' };
  if (raw.length > budget.tokenIds) return `more than ${KV_MESSAGE_LIMITS.tokenIds} token ids in one batch`;
  budget.tokenIds -= raw.length;
  const tokenIds = new Uint32Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const id = raw[i];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 0x7fff_ffff)
      return { type: 'invalid', reason: 'BlockStored: a token id is not an integer in [0, 2^31)' };
    tokenIds[i] = id;
  }
  const blockSize = f.block_size;
  if (typeof blockSize !== 'number' || !Number.isInteger(blockSize) || blockSize < 1 || blockSize > KV_MESSAGE_LIMITS.blockSize) {
    return { type: 'invalid', reason: `BlockStored: block_size is not an integer in [1, ${KV_MESSAGE_LIMITS.blockSize}]` };
  }
  const loraName = text(f.lora_name);
  const extra = extraKeys(f.extra_keys, hashes.length, loraName);
  if (extra === undefined) return { type: 'invalid', reason: 'BlockStored: extra_keys is not a list with one entry per block' };
  return {
    type: 'blocks-stored',
    hashes,
    parent,
    tokenIds,
    blockSize,
    loraId: smallInt(f.lora_id),
    loraName,
    medium: text(f.medium),
    extra,
    groupIdx: smallInt(f.group_idx),
    specKind: text(f.kv_cache_spec_kind),
  };
}

function engineHashes(raw: unknown, budget: Budget): Float64Array | string | undefined {
  if (!Array.isArray(raw)) return undefined;
  if (raw.length > budget.hashes) return `more than ${KV_MESSAGE_LIMITS.hashes} block hashes in one batch`;
  budget.hashes -= raw.length;
  const out = new Float64Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const key = foldHash(raw[i]);
    if (key === undefined) return undefined;
    out[i] = key;
  }
  return out;
}

const LOW_52 = (1n << 52n) - 1n;

/** An engine's block hash as a 52-bit number: integers of any width and sign, or bytes (≤ 64). */
export function foldHash(hash: unknown): number | undefined {
  if (typeof hash === 'number') {
    if (!Number.isSafeInteger(hash)) return undefined;
    return hash >= 0 ? hash % 2 ** 52 : Number(BigInt(hash) & LOW_52);
  }
  if (typeof hash === 'bigint') return Number(hash & LOW_52);
  if (hash instanceof Uint8Array && hash.length > 0 && hash.length <= 64) {
    // The digest's last bytes, as vLLM's integer form takes its last 8.
    let hi = 0;
    let lo = 0;
    const n = hash.length;
    for (let i = Math.max(0, n - 7); i < n - 4; i++) hi = hi * 256 + hash[i];
    for (let i = Math.max(0, n - 4); i < n; i++) lo = lo * 256 + hash[i];
    return (hi & 0xfffff) * 0x1_0000_0000 + lo;
  }
  return undefined;
}

/**
 * Per block, a hash of the extra keys beyond the LoRA name (multimodal
 * hashes, cache salt), 0 when there are none; null when the event has none at all.
 * vLLM puts the LoRA name first when there is one; it is named by `lora_name`.
 */
function extraKeys(raw: unknown, blocks: number, loraName: string | null): Uint32Array | null | undefined {
  if (raw == null) return null;
  if (!Array.isArray(raw) || raw.length !== blocks) return undefined;
  const out = new Uint32Array(blocks);
  for (let i = 0; i < blocks; i++) {
    const keys = raw[i];
    if (keys == null) continue;
    if (!Array.isArray(keys)) return undefined;
    const rendered = renderKeys(keys, loraName);
    if (rendered === undefined) return undefined;
    if (rendered !== '') out[i] = hashString(rendered) | 1;
  }
  return out;
}

/** The keys as one bounded string, leaving out a leading LoRA name (the adapter names the chain already). */
function renderKeys(keys: unknown[], loraName: string | null): string | undefined {
  let out = '';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    if (i === 0 && loraName !== null && key === loraName) continue;
    let part: string;
    if (typeof key === 'string') part = key;
    else if (typeof key === 'number' || typeof key === 'bigint' || typeof key === 'boolean') part = String(key);
    else if (key instanceof Uint8Array) part = Buffer.from(key.buffer, key.byteOffset, Math.min(key.length, 64)).toString('hex');
    else if (key == null) part = '';
    else part = '?';
    out += `${part.length}:${part}`;
    if (out.length > KV_MESSAGE_LIMITS.extraKeys) return undefined;
  }
  return out;
}

function text(value: unknown): string | null {
  return typeof value === 'string' ? value.slice(0, KV_MESSAGE_LIMITS.text) : null;
}

function smallInt(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) ? value : null;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}
