// Frames on the pipes between the relay (a worker thread of the router) and
// a plugin's own process (child.ts). Each frame: its length (u32, of what
// follows), a kind (u8), four i32 words whose meaning depends on the kind,
// then a body of bytes. The router's side reads the plugin process as
// hostile: a frame over MAX_FRAME_BYTES or of an unknown kind ends it.
import { CALL_REGION } from './wire.ts';

/** Relay → plugin process: how to start (body: JSON of ProcessInit). */
export const F_INIT = 1;
/** Relay → plugin process: the plugin module to import (body: its URL, UTF-8). */
export const F_LOAD = 4;
/** Relay → plugin process: a call (a: call sequence; body: the call region's bytes). */
export const F_CALL = 2;
/** Relay → plugin process: the router's answer to an ask (a: ask tag, b: SIDE_COUNT; body: the side region's bytes). */
export const F_ASK_REPLY = 3;
/** Plugin process → relay: a message of the plugin worker's (body: v8-serialized), as it posted it. */
export const F_MESSAGE = 10;
/** Plugin process → relay: a call's answer (a: sequence, b: heap MB, c: off-heap MB; body: the answer region's bytes). */
export const F_ANSWER = 11;
/** Plugin process → relay: an ask mid-call (a: tag, b: SIDE_KIND, c: SIDE_OP, d: SIDE_COUNT; body: what the worker wrote in the side region). */
export const F_ASK = 12;
/** Plugin process → relay: the worker's memory words changed between calls (b: heap MB, c: off-heap MB). */
export const F_MEMORY = 13;
/** Plugin process → relay: the plugin worker ended (a: exit code; body: JSON { message, code } of its last error). */
export const F_WORKER_EXIT = 14;

const HEAD_BYTES = 4 + 1 + 16;
/** The largest frame either side sends: a full call region and its head, with room. */
export const MAX_FRAME_BYTES = CALL_REGION + 64 * 1024;

export interface Frame {
  readonly kind: number;
  readonly a: number;
  readonly b: number;
  readonly c: number;
  readonly d: number;
  readonly body: Buffer;
}

/** One frame's bytes; `body` is copied in (it may be a view of shared memory). */
export function frame(kind: number, a = 0, b = 0, c = 0, d = 0, body?: Uint8Array): Buffer {
  const length = body?.length ?? 0;
  const out = Buffer.allocUnsafe(HEAD_BYTES + length);
  out.writeUInt32LE(HEAD_BYTES - 4 + length, 0);
  out.writeUInt8(kind, 4);
  out.writeInt32LE(a | 0, 5);
  out.writeInt32LE(b | 0, 9);
  out.writeInt32LE(c | 0, 13);
  out.writeInt32LE(d | 0, 17);
  if (body) out.set(body, HEAD_BYTES);
  return out;
}

export class FrameTooLarge extends Error {}

/** Cuts a byte stream into frames; throws FrameTooLarge on a length past MAX_FRAME_BYTES. */
export class FrameReader {
  #chunks: Buffer[] = [];
  #buffered = 0;

  /** The frames completed by `chunk`, in order. */
  push(chunk: Buffer): Frame[] {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.#buffered < 4) return frames;
      if (this.#chunks[0].length < 4) this.#merge();
      const length = this.#chunks[0].readUInt32LE(0);
      if (length > MAX_FRAME_BYTES || length < HEAD_BYTES - 4) throw new FrameTooLarge(`a frame of ${length} bytes (at most ${MAX_FRAME_BYTES})`);
      if (this.#buffered < 4 + length) return frames;
      if (this.#chunks[0].length < 4 + length) this.#merge();
      const head = this.#chunks[0];
      frames.push({
        kind: head.readUInt8(4),
        a: head.readInt32LE(5),
        b: head.readInt32LE(9),
        c: head.readInt32LE(13),
        d: head.readInt32LE(17),
        body: head.subarray(HEAD_BYTES, 4 + length),
      });
      const rest = head.subarray(4 + length);
      this.#buffered -= 4 + length;
      if (rest.length > 0) this.#chunks[0] = rest;
      else this.#chunks.shift();
    }
  }

  /** One buffer of everything held: a frame split over chunks is read whole (once per frame, not per chunk). */
  #merge(): void {
    this.#chunks = [Buffer.concat(this.#chunks, this.#buffered)];
  }
}

type WaitAsync = (typed: Int32Array, index: number, value: number) => { async: boolean; value: Promise<unknown> | string };

/** Resolves once `ctrl[index]` may no longer be `value` (Atomics.waitAsync: the thread's event loop runs meanwhile). */
export function changed(ctrl: Int32Array, index: number, value: number): Promise<unknown> | undefined {
  const waited = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync(ctrl, index, value);
  return waited.async ? (waited.value as Promise<unknown>) : undefined;
}
