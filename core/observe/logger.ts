// The router's log: pino, one JSON line per request. Lines are batched here
// and written by sonic-boom a batch at a time (at most a second late when
// traffic is light), so logging costs no write and no copy per request.
import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Lines are joined until a batch holds this many characters, then written as
 * one buffer. Below sonic-boom's largest single write (16 KiB): one batch is
 * one write, and there is one write per ~40 request lines instead of one per ~13.
 */
const BATCH_CHARS = 15 * 1024;

export function routerLogger(options: { level?: string; destination?: number | string } = {}): Logger {
  // Buffer mode: in its default utf8 mode sonic-boom measures the whole
  // pending batch (a growing string, flattened each time) on every write.
  // It gets whole batches, so it need not hold any back (minLength 0).
  const stream = pino.destination({ dest: options.destination ?? 1, sync: false, minLength: 0, contentMode: 'buffer' });
  const lines = new LineBatch(stream);
  setInterval(() => lines.flush(), 1000).unref();
  // Whatever is batched goes out before the process does.
  process.once('exit', () => {
    lines.hand();
    stream.flushSync();
  });
  return pino({ level: options.level ?? 'info' }, lines);
}

/**
 * pino's destination: its lines (strings) appended to one batch, handed to
 * sonic-boom as one buffer when the batch is full or flushed. Appending is a
 * string concatenation (flattened once, when handed over), not a buffer per line.
 */
class LineBatch implements DestinationStream {
  private pending = '';

  constructor(private readonly stream: { write(data: string): boolean; flush(cb?: (error?: Error) => void): void }) {}

  write(line: string): void {
    this.pending += line;
    if (this.pending.length >= BATCH_CHARS) this.hand();
  }

  /** pino's logger.flush(): what is batched, then sonic-boom's own buffer. */
  flush(cb?: (error?: Error) => void): void {
    this.hand();
    // sonic-boom refuses a flush while its file is still opening or a write is failing: nothing is lost, the next one writes it.
    try {
      this.stream.flush(cb);
    } catch (error) {
      cb?.(error as Error);
    }
  }

  /** Hands the batch to sonic-boom (as bytes: buffer mode). */
  hand(): void {
    if (this.pending === '') return;
    const batch = Buffer.from(this.pending);
    this.pending = '';
    this.stream.write(batch as unknown as string);
  }
}
