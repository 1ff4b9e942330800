// `serve --record FILE`: every routed request as one line of JSON
// (record-format.ts), written off the request path to a bounded rotating
// file. When FILE would pass `maxBytes`, it becomes FILE.1 (FILE.1 becomes
// FILE.2, ...; the oldest beyond `keep` is deleted), so the recording never
// holds more than (keep + 1) × maxBytes. Lines wait in memory for at most
// `flushMs`; if the disk falls behind by more than `maxPendingBytes`, new
// lines are dropped and counted instead of piling up.
import { open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import type { Logger } from '../../sdk/index.ts';
import type { Decision } from '../decide/decision.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';
import type { RequestEnd, RequestObserver } from '../serve/request-observer.ts';
import { recordLine } from './record-format.ts';

export interface RecorderOptions {
  readonly file: string;
  /** Largest size of one file before it rotates. Default 64 MiB. */
  readonly maxBytes?: number;
  /** Rotated files kept (FILE.1 ... FILE.keep). Default 3. */
  readonly keep?: number;
  /** Longest a line waits in memory, ms. Default 200. */
  readonly flushMs?: number;
  /** Lines beyond this many bytes not yet written are dropped. Default 4 MiB. */
  readonly maxPendingBytes?: number;
  readonly log?: Logger;
}

export interface RecorderStatus {
  readonly file: string;
  readonly written: number;
  readonly dropped: number;
  readonly rotations: number;
  readonly bytes: number;
  readonly maxBytes: number;
  readonly keep: number;
  readonly lastError?: string;
}

export class TrafficRecorder implements RequestObserver {
  readonly file: string;
  readonly #maxBytes: number;
  readonly #keep: number;
  readonly #flushMs: number;
  readonly #maxPending: number;
  readonly #log?: Logger;
  #handle?: FileHandle;
  #size = 0;
  #pending: string[] = [];
  #pendingBytes = 0;
  #timer?: NodeJS.Timeout;
  #writing: Promise<void> = Promise.resolve();
  #written = 0;
  #dropped = 0;
  #rotations = 0;
  #lastError?: string;
  #closed = false;

  private constructor(options: RecorderOptions) {
    this.file = options.file;
    this.#maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.#keep = options.keep ?? 3;
    this.#flushMs = options.flushMs ?? 200;
    this.#maxPending = options.maxPendingBytes ?? 4 * 1024 * 1024;
    this.#log = options.log;
  }

  /** Opens FILE for appending (creating it); throws when it cannot be written. */
  static async open(options: RecorderOptions): Promise<TrafficRecorder> {
    const recorder = new TrafficRecorder(options);
    recorder.#handle = await open(recorder.file, 'a', 0o600);
    recorder.#size = (await stat(recorder.file)).size;
    return recorder;
  }

  ended(facts: RequestFacts, decision: Decision, snapshot: Generation, end: RequestEnd): void {
    this.write(JSON.stringify(recordLine(facts, decision, snapshot, end)));
  }

  /** Queues one line (without its newline). */
  write(line: string): void {
    if (this.#closed) return;
    const bytes = Buffer.byteLength(line) + 1;
    if (this.#pendingBytes + bytes > this.#maxPending || bytes > this.#maxBytes) {
      this.#dropped++;
      return;
    }
    this.#pending.push(line);
    this.#pendingBytes += bytes;
    this.#timer ??= setTimeout(() => this.#flush(), this.#flushMs);
  }

  status(): RecorderStatus {
    return {
      file: this.file,
      written: this.#written,
      dropped: this.#dropped,
      rotations: this.#rotations,
      bytes: this.#size,
      maxBytes: this.#maxBytes,
      keep: this.#keep,
      lastError: this.#lastError,
    };
  }

  /** Writes what is queued now; resolves once it is on disk (tests, shutdown). */
  flush(): Promise<void> {
    this.#flush();
    return this.#writing;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.flush();
    this.#closed = true;
    await this.#handle?.close();
    this.#handle = undefined;
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.length === 0) return;
    const lines = this.#pending;
    this.#pending = [];
    this.#writing = this.#writing
      .then(() => this.#writeLines(lines))
      .catch((error) => {
        this.#lastError = (error as Error).message;
        this.#dropped += lines.length;
        this.#log?.warn('traffic recorder: could not write', { file: this.file, error: this.#lastError });
      })
      .finally(() => {
        for (const line of lines) this.#pendingBytes -= Buffer.byteLength(line) + 1;
      });
  }

  async #writeLines(lines: readonly string[]): Promise<void> {
    let chunk: string[] = [];
    let chunkBytes = 0;
    for (const line of lines) {
      const bytes = Buffer.byteLength(line) + 1;
      if (this.#size + chunkBytes + bytes > this.#maxBytes) {
        await this.#append(chunk, chunkBytes);
        chunk = [];
        chunkBytes = 0;
        await this.#rotate();
      }
      chunk.push(line);
      chunkBytes += bytes;
    }
    await this.#append(chunk, chunkBytes);
  }

  async #append(lines: readonly string[], bytes: number): Promise<void> {
    if (lines.length === 0 || !this.#handle) return;
    await this.#handle.write(lines.join('\n') + '\n');
    this.#size += bytes;
    this.#written += lines.length;
  }

  async #rotate(): Promise<void> {
    await this.#handle?.close();
    this.#handle = undefined;
    await rm(`${this.file}.${this.#keep}`, { force: true });
    for (let i = this.#keep - 1; i >= 1; i--) await rename(`${this.file}.${i}`, `${this.file}.${i + 1}`).catch(() => {});
    if (this.#keep > 0) await rename(this.file, `${this.file}.1`);
    else await rm(this.file, { force: true });
    this.#handle = await open(this.file, 'a', 0o600);
    this.#size = 0;
    this.#rotations++;
  }
}
