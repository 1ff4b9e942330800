// Rows to a CSV file as they come, through a small buffer: the file grows,
// memory does not.
import { closeSync, openSync, writeSync } from 'node:fs';

const FLUSH_AT = 256 * 1024;

export class CsvWriter {
  private readonly fd: number;
  private buffer = '';
  private closed = false;

  constructor(
    readonly path: string,
    header: readonly string[],
  ) {
    this.fd = openSync(path, 'w');
    this.buffer = header.join(',') + '\n';
  }

  /** One row, already joined (values must not contain commas or newlines). */
  line(text: string): void {
    this.buffer += text + '\n';
    if (this.buffer.length >= FLUSH_AT) this.flush();
  }

  row(values: readonly (string | number | undefined)[]): void {
    this.line(values.map(cell).join(','));
  }

  flush(): void {
    if (this.buffer) writeSync(this.fd, this.buffer);
    this.buffer = '';
  }

  close(): void {
    if (this.closed) return;
    this.flush();
    closeSync(this.fd);
    this.closed = true;
  }
}

/** A CSV cell: numbers as they are (NaN as empty), strings quoted when they need it. */
export function cell(value: string | number | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  return /[",\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}
