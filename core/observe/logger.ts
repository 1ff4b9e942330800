// The router's log: pino, one JSON line per request. Lines are buffered and
// written by sonic-boom in batches (at most a second late when traffic is
// light), so logging costs no write syscall per request.
import pino, { type Logger } from 'pino';

export function routerLogger(options: { level?: string; destination?: number | string } = {}): Logger {
  const stream = pino.destination({ dest: options.destination ?? 1, sync: false, minLength: 8192 });
  setInterval(() => stream.flush(), 1000).unref();
  // Whatever is buffered goes out before the process does.
  process.once('exit', () => stream.flushSync());
  return pino({ level: options.level ?? 'info' }, stream);
}
