// Decodes vLLM's KV cache event messages. A message is ZeroMQ multipart
// [topic, sequence number (8 bytes, big-endian), msgpack payload]; the
// payload is msgspec's encoding of KVEventBatch. Checked against vLLM's
// vllm/distributed/kv_events.py (docs/kv-events.md lists the commits):
//   array_like (vLLM 0.9–0.11): [ts, events, data_parallel_rank?], each event
//     ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
//      lora_id, medium?, ...], ["BlockRemoved", block_hashes, medium?],
//     ["AllBlocksCleared"]
//   maps (later vLLM main): {ts, events, data_parallel_rank}, each event a map
//     tagged {"type": "BlockStored", "block_hashes": [...], ...}
// Block hashes are integers (any width) or bytes (newer vLLM). Only the
// hashes are kept: that is all the index needs. Anything else is an error
// string, never an exception: the bytes come from the network.
import { Unpackr } from 'msgpackr';
import type { BlockKey } from './kv-index.ts';

export type KvEvent =
  | { readonly type: 'stored'; readonly hashes: BlockKey[] }
  | { readonly type: 'removed'; readonly hashes: BlockKey[] }
  | { readonly type: 'cleared' }
  | { readonly type: 'unknown'; readonly tag: string };

export interface KvEventBatch {
  readonly seq: bigint;
  readonly ts: number;
  readonly events: readonly KvEvent[];
}

/** Most events in one batch and hashes in one event (vLLM sends one event per cached run). */
const MAX_EVENTS = 65_536;
const MAX_HASHES = 65_536;

// No records or extensions: plain msgpack, as msgspec writes it.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });

/** The batch in a message, or why it is not one. */
export function decodeKvMessage(frames: readonly Uint8Array[]): KvEventBatch | string {
  if (frames.length !== 3) return `expected 3 frames (topic, sequence, payload), got ${frames.length}`;
  const seqFrame = frames[1];
  if (seqFrame.length !== 8) return `the sequence frame has ${seqFrame.length} bytes, not 8`;
  const seq = new DataView(seqFrame.buffer, seqFrame.byteOffset, 8).getBigUint64(0);
  let payload: unknown;
  try {
    payload = unpackr.unpack(frames[2]);
  } catch (error) {
    return `payload is not msgpack: ${(error as Error).message}`;
  }
  return decodeBatch(seq, payload);
}

export function decodeBatch(seq: bigint, payload: unknown): KvEventBatch | string {
  let ts: unknown;
  let rawEvents: unknown;
  if (Array.isArray(payload)) [ts, rawEvents] = payload;
  else if (isMap(payload)) ({ ts, events: rawEvents } = payload);
  else return 'payload is neither an array nor a map';
  if (typeof ts !== 'number' && typeof ts !== 'bigint') return 'ts is not a number';
  if (!Array.isArray(rawEvents)) return 'events is not an array';
  if (rawEvents.length > MAX_EVENTS) return `more than ${MAX_EVENTS} events in one batch`;
  const events: KvEvent[] = [];
  for (const raw of rawEvents) {
    const event = decodeEvent(raw);
    if (typeof event === 'string') return event;
    events.push(event);
  }
  return { seq, ts: Number(ts), events };
}

function decodeEvent(raw: unknown): KvEvent | string {
  let tag: unknown;
  let hashes: unknown;
  if (Array.isArray(raw)) {
    tag = raw[0];
    hashes = raw[1];
  } else if (isMap(raw)) {
    tag = raw.type;
    hashes = raw.block_hashes;
  } else {
    return 'an event is neither an array nor a map';
  }
  if (typeof tag !== 'string') return 'an event has no type tag';
  switch (tag) {
    case 'BlockStored':
    case 'BlockRemoved': {
      const keys = blockKeys(hashes);
      if (typeof keys === 'string') return `${tag}: ${keys}`;
      return { type: tag === 'BlockStored' ? 'stored' : 'removed', hashes: keys };
    }
    case 'AllBlocksCleared':
      return { type: 'cleared' };
    default:
      return { type: 'unknown', tag: tag.slice(0, 64) };
  }
}

function blockKeys(raw: unknown): BlockKey[] | string {
  if (!Array.isArray(raw)) return 'block_hashes is not an array';
  if (raw.length > MAX_HASHES) return `more than ${MAX_HASHES} block hashes`;
  const keys: BlockKey[] = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const key = blockKey(raw[i]);
    if (key === undefined) return 'a block hash is not an integer or bytes';
    keys[i] = key;
  }
  return keys;
}

/** An integer hash as a number when exact (what the router's hashes are), else a string; bytes as hex. */
export function blockKey(hash: unknown): BlockKey | undefined {
  if (typeof hash === 'number') return Number.isSafeInteger(hash) ? hash : undefined;
  if (typeof hash === 'bigint') return hash >= BigInt(Number.MIN_SAFE_INTEGER) && hash <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(hash) : `i${hash}`;
  if (hash instanceof Uint8Array && hash.length <= 64) return `b${Buffer.from(hash.buffer, hash.byteOffset, hash.length).toString('hex')}`;
  return undefined;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}
