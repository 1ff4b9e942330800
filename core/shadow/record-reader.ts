// Reads a traffic recording line by line (64 KiB at a time, so a file of any
// size replays in bounded memory). Every line is checked (record-format.ts);
// a bad one is an error naming FILE:LINE, never a crash.
import { closeSync, openSync, readSync } from 'node:fs';
import { displayPath, PolicyError } from '../diagnostics/problem.ts';
import { parseRecordLine, type ReplayedRecord } from './record-format.ts';

/** A line longer than this is not one the router wrote. */
const MAX_LINE_BYTES = 1024 * 1024;

export class RecordReader {
  readonly file: string;
  readonly #fd: number;
  readonly #buffer = Buffer.alloc(64 * 1024);
  #pending = '';
  #lines: string[] = [];
  #index = 0;
  #eof = false;
  #closed = false;
  lineNumber = 0;

  /** Throws PolicyError (one located problem) when the file cannot be opened. */
  constructor(path: string) {
    this.file = displayPath(path);
    try {
      this.#fd = openSync(path, 'r');
    } catch (error) {
      throw new PolicyError([{ file: this.file, line: 1, col: 1, message: `cannot read the recording: ${(error as Error).message}` }]);
    }
  }

  /** The next record, or undefined at the end. Throws PolicyError for a malformed line. */
  next(): ReplayedRecord | undefined {
    for (;;) {
      const line = this.#nextLine();
      if (line === undefined) return undefined;
      if (line.trim() === '') continue;
      try {
        return parseRecordLine(line);
      } catch (error) {
        this.close();
        throw new PolicyError([{ file: this.file, line: this.lineNumber, col: 1, message: (error as Error).message }]);
      }
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeSync(this.#fd);
  }

  #nextLine(): string | undefined {
    while (this.#index >= this.#lines.length) {
      if (this.#eof || this.#closed) return undefined;
      const n = readSync(this.#fd, this.#buffer, 0, this.#buffer.length, null);
      if (n === 0) {
        this.#eof = true;
        this.#lines = this.#pending ? [this.#pending] : [];
        this.#pending = '';
      } else {
        const parts = (this.#pending + this.#buffer.toString('utf8', 0, n)).split('\n');
        this.#pending = parts.pop()!;
        if (this.#pending.length > MAX_LINE_BYTES) {
          this.close();
          throw new PolicyError([
            { file: this.file, line: this.lineNumber + parts.length + 1, col: 1, message: `a line longer than ${MAX_LINE_BYTES} bytes: not a recording` },
          ]);
        }
        this.#lines = parts;
      }
      this.#index = 0;
    }
    this.lineNumber++;
    return this.#lines[this.#index++];
  }
}
