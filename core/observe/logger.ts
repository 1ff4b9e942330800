// The router's log: pino, one JSON line per request. Lines are buffered and
// written by sonic-boom in batches (at most a second late when traffic is
// light), so logging costs no write syscall per request.
import pino, { type DestinationStream, type Logger } from 'pino';

export function routerLogger(options: { level?: string; destination?: number | string } = {}): Logger {
  // Buffer mode: in its default utf8 mode sonic-boom measures the whole
  // pending batch (a growing string, flattened each time) on every line,
  // which made a buffered line cost a copy of everything before it.
  const stream = pino.destination({ dest: options.destination ?? 1, sync: false, minLength: 8192, contentMode: 'buffer' });
  setInterval(() => stream.flush(), 1000).unref();
  // Whatever is buffered goes out before the process does.
  process.once('exit', () => stream.flushSync());
  // pino writes strings; buffer mode takes bytes.
  const lines: DestinationStream = { write: (line: string) => stream.write(Buffer.from(line) as unknown as string) };
  return pino({ level: options.level ?? 'info' }, lines);
}
