// The router's log: pino, one JSON line per request. Lines are batched here
// and written by sonic-boom a batch at a time (at most a second late when
// traffic is light), so logging costs no write and no copy per request.
// The per-request line can be built here field by field (PlainLine), the
// bytes pino would write, without pino's generic walk of a fields object.
import diagnostics_channel from 'node:diagnostics_channel';
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
  const logger = pino({ level: options.level ?? 'info' }, lines);
  routerLoggers.add(logger);
  return logger;
}

/** The loggers routerLogger made: no serializers, formatters, mixin, hooks or prefix beyond pino's defaults. */
const routerLoggers = new WeakSet<object>();
const {
  lsCacheSym,
  timeSym,
  chindingsSym,
  endSym,
  streamSym,
  levelValSym,
  messageKeySym,
  serializersSym,
  stringifiersSym,
  formattersSym,
  mixinSym,
  hooksSym,
  msgPrefixSym,
} = pino.symbols as typeof pino.symbols & { readonly msgPrefixSym: symbol }; // msgPrefixSym: in pino, not in its types
/** Serializers a child may add and still write plain lines: fastify's (its request, reply and error), for keys a PlainLine never writes. */
const FASTIFY_SERIALIZED = new Set(['req', 'res', 'err']);
/** Whether each logger seen is a routerLogger, or a child of one (fastify's app.log) adding nothing to a line but its bindings. */
const plainVerdicts = new WeakMap<object, boolean>();

export function writesPlainLines(logger: object): boolean {
  let verdict = plainVerdicts.get(logger);
  if (verdict === undefined) plainVerdicts.set(logger, (verdict = isPlainLogger(logger)));
  return verdict;
}

function isPlainLogger(logger: object): boolean {
  let made = false;
  for (let l: object | null = logger; l !== null && !made; l = Object.getPrototypeOf(l)) made = routerLoggers.has(l);
  if (!made) return false;
  const l = logger as Record<symbol, unknown>;
  const serializers = l[serializersSym] as Record<string, unknown>;
  for (const key in serializers) if (!FASTIFY_SERIALIZED.has(key)) return false;
  // Redaction (the redact option) works through per-key stringifiers.
  for (const _ in l[stringifiersSym] as object) return false;
  return (
    l[mixinSym] === undefined &&
    l[msgPrefixSym] === undefined &&
    (l[formattersSym] as { log?: unknown }).log === undefined &&
    (l[hooksSym] as { streamWrite?: unknown }).streamWrite === undefined
  );
}

/** pino's own tracing of its line building: with a subscriber, lines go through pino so that it sees them. */
const pinoAsJson = diagnostics_channel.tracingChannel('pino_asJson');
const INFO = 30;
/**
 * Characters pino escapes in a string, and lone surrogates (pino 10 on Node
 * 20 writes them as they are, JSON.stringify escapes them): a value holding
 * one makes the line go through pino. A character class: linear, no backtracking.
 */
const NOT_PLAIN = /[\u0000-\u001f"\\\ud800-\udfff]/;

/**
 * One info line of a routerLogger, built field by field: byte for byte what
 * `logger.info({ ...fields }, msg)` writes (fields in the same order,
 * undefined ones left out, a non-finite number as null), at a fraction of
 * the cost: pino walks the fields object, looks up serializers and escapes
 * each key and value on every line. Keys must be plain ASCII names other
 * than req, res and err; a value pino would escape gives up (`plain` false),
 * and the caller logs through pino.
 */
export class PlainLine {
  private text = '';
  plain = true;

  str(key: string, value: string | undefined): this {
    if (value === undefined) return this;
    if (NOT_PLAIN.test(value)) this.plain = false;
    else this.text += `,"${key}":"${value}"`;
    return this;
  }

  num(key: string, value: number | undefined): this {
    if (value !== undefined) this.text += `,"${key}":${Number.isFinite(value) ? value : null}`;
    return this;
  }

  bool(key: string, value: boolean | undefined): this {
    if (value !== undefined) this.text += `,"${key}":${value}`;
    return this;
  }

  /**
   * Writes the line with message `msg` (a plain string) if `logger` is a
   * routerLogger (or a child of one adding only bindings, and serializers
   * for req, res and err) and the line stayed plain; false when the caller
   * must log through pino instead.
   */
  writeInfo(logger: object, msg: string): boolean {
    if (!this.plain || !writesPlainLines(logger) || pinoAsJson.hasSubscribers) return false;
    const l = logger as unknown as Record<symbol, never>;
    if ((l[levelValSym] as number) > INFO) return true; // pino would write nothing either
    const head = (l[lsCacheSym] as Record<number, string>)[INFO] + (l[timeSym] as () => string)() + (l[chindingsSym] as string);
    (l[streamSym] as DestinationStream).write(`${head}${this.text},"${l[messageKeySym] as string}":"${msg}"${l[endSym] as string}`);
    return true;
  }
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
