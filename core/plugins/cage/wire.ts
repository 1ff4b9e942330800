// The shared memory between the router and one plugin worker, and how bytes
// are written into it. Both sides use this file (the worker gets a bundled
// copy). Layout of the SharedArrayBuffer:
//
//   [0, 64)            control words (Int32): state, call sequence, answered
//                      sequence, message length, answer length, hashes length,
//                      off-heap memory, heap in use
//   [64, 64+CALL)      the call: ops the router sends (hooks, then one call)
//   [.., +ANSWER)      the worker's answer
//   [.., +SIDE)        what the worker asks for mid-call and the router's
//                      answer: a request's prefix hashes or token ids, a
//                      KV index lookup (ctx.kvIndex)
//
// Strings travel as UTF-16 code units (no TextDecoder on shared memory), and
// strings that repeat (replica ids, urls, model, pool, tenant) travel once:
// both sides keep the same table and later messages name them by index.

/** Control word indexes. */
export const STATE = 0;
export const CALL_SEQ = 1;
export const ANSWER_SEQ = 2;
export const CALL_BYTES = 3;
export const ANSWER_BYTES = 4;
/** How many items the side region holds (hashes, token ids, lookup entries): set by whoever wrote it. */
export const SIDE_COUNT = 5;
/** The worker's off-heap memory (ArrayBuffers, Buffers), MB: the heap cap does not cover it, so the router watches it. */
export const EXTERNAL_MB = 6;
/**
 * The worker's heap in use after its last call, MB, as the worker measured it
 * (past its budget only once a full GC confirmed it is live): over the budget,
 * the router quarantines the plugin before V8's own cap is reached.
 */
export const HEAP_MB = 7;
/** What the worker asks for (ASK_*), and the op of the message it asks about. */
export const SIDE_KIND = 8;
export const SIDE_OP = 9;
/** 1 while the router waits for the call in flight (and so answers asks); 0 once it stopped waiting. */
export const ROUTER_WAITING = 10;
/** How many bytes of the side region the router's answer to an ask takes (for the relay, which copies them to a plugin process). */
export const SIDE_BYTES = 11;

/** Values of ctrl[SIDE_KIND]. */
/** The prefix hashes of the op's request. */
export const ASK_HASHES = 1;
/** The prompt token ids of the op's request (SIDE_COUNT -1 when it has none). */
export const ASK_TOKENS = 2;
/** kvIndex.longestPrefix of the SIDE_COUNT hashes (f64) the worker wrote. */
export const ASK_KV_HASHES = 3;
/** kvIndex.longestPrefixOfTokens of the SIDE_COUNT token ids (u32) the worker wrote, then the adapter (a string). */
export const ASK_KV_TOKENS = 4;

/** Values of ctrl[STATE]. */
export const IDLE = 0;
/** The router wrote a call; the worker is on it. */
export const CALLING = 1;
/** The worker wrote its answer. */
export const ANSWERED = 2;
/** The worker asks for something mid-call (ctrl[SIDE_KIND], ctrl[SIDE_OP]). */
export const NEEDS_DATA = 3;
/** The router wrote them. */
export const DATA_GIVEN = 4;

export const CONTROL_BYTES = 64;
export const CALL_REGION = 2 * 1024 * 1024;
export const ANSWER_REGION = 1024 * 1024;
/** 1 MiB: a 128k-token prompt's ids (4 bytes each) fit with room to spare. */
export const SIDE_REGION = 1024 * 1024;
export const SHARED_BYTES = CONTROL_BYTES + CALL_REGION + ANSWER_REGION + SIDE_REGION;
export const CALL_AT = CONTROL_BYTES;
export const ANSWER_AT = CALL_AT + CALL_REGION;
export const SIDE_AT = ANSWER_AT + ANSWER_REGION;

/** Ops of a call message, in the order the worker runs them. */
export const OP_END = 0;
export const OP_PICK = 1;
export const OP_ROUTED = 2;
export const OP_COMPLETED = 3;
export const OP_DISPOSE = 4;
export const OP_CREATE = 5;
export const OP_EXPORT = 6;

/** Answer kinds. */
export const A_PICK = 1;
export const A_PASS = 2;
export const A_NONE = 3;
export const A_THREW = 4;
export const A_DONE = 5;
export const A_STATE = 6;

/** Message flag: both sides clear their string tables first. */
export const FLAG_RESET_STRINGS = 1;

/** Past this many interned strings the router starts a fresh table. */
export const MAX_INTERNED = 8192;
/** Undefined, where a string may be missing. */
export const NO_STRING = -2;
/** A new string follows inline and joins the table. */
export const NEW_STRING = -1;

/** Thrown when a message does not fit its region. */
export class WireOverflow extends Error {}

export class Writer {
  readonly #view: DataView;
  readonly #start: number;
  readonly #end: number;
  at: number;

  constructor(buffer: SharedArrayBuffer, start: number, size: number) {
    this.#view = new DataView(buffer);
    this.#start = start;
    this.#end = start + size;
    this.at = start;
  }

  reset(): void {
    this.at = this.#start;
  }

  get length(): number {
    return this.at - this.#start;
  }

  #room(bytes: number): number {
    const at = this.at;
    if (at + bytes > this.#end) throw new WireOverflow('message too large');
    this.at = at + bytes;
    return at;
  }

  u8(value: number): void {
    this.#view.setUint8(this.#room(1), value);
  }

  i32(value: number): void {
    this.#view.setInt32(this.#room(4), value, true);
  }

  f64(value: number): void {
    this.#view.setFloat64(this.#room(8), value, true);
  }

  /** A string, cut at `max` code units. */
  str(text: string, max = 0x7fff_ffff): void {
    const length = Math.min(text.length, max);
    this.i32(length);
    const at = this.#room(length * 2);
    const view = this.#view;
    for (let i = 0; i < length; i++) view.setUint16(at + i * 2, text.charCodeAt(i), true);
  }

  bytes(data: Uint8Array): void {
    this.i32(data.length);
    const at = this.#room(data.length);
    new Uint8Array(this.#view.buffer, at, data.length).set(data);
  }
}

export class Reader {
  readonly #view: DataView;
  readonly #end: number;
  at: number;

  constructor(buffer: SharedArrayBuffer, start: number, length: number) {
    this.#view = new DataView(buffer);
    this.at = start;
    this.#end = start + length;
  }

  #take(bytes: number): number {
    const at = this.at;
    if (bytes < 0 || at + bytes > this.#end) throw new RangeError('message cut short');
    this.at = at + bytes;
    return at;
  }

  u8(): number {
    return this.#view.getUint8(this.#take(1));
  }

  i32(): number {
    return this.#view.getInt32(this.#take(4), true);
  }

  f64(): number {
    return this.#view.getFloat64(this.#take(8), true);
  }

  /** A string; longer than `max` code units is refused (the other side may be hostile). */
  str(max = 0x7fff_ffff): string {
    const length = this.i32();
    if (length < 0 || length > max) throw new RangeError(`string of ${length} code units (at most ${max})`);
    const at = this.#take(length * 2);
    const view = this.#view;
    let text = '';
    // Chunks keep the argument list short; most strings are one chunk.
    for (let i = 0; i < length; i += 256) {
      const n = Math.min(256, length - i);
      const codes = new Array<number>(n);
      for (let j = 0; j < n; j++) codes[j] = view.getUint16(at + (i + j) * 2, true);
      text += String.fromCharCode.apply(null, codes);
    }
    return text;
  }

  bytes(max: number): Uint8Array {
    const length = this.i32();
    if (length < 0 || length > max) throw new RangeError(`${length} bytes (at most ${max})`);
    const at = this.#take(length);
    return new Uint8Array(this.#view.buffer, at, length).slice();
  }
}
