// A small parser of the Prometheus text exposition format (0.0.4), written by
// hand because no maintained parser fits (docs/design.md, "Facts we rely on"). It runs every second for
// every replica, so it scans characters instead of splitting with regular
// expressions, and it never throws: a line it cannot read is skipped and
// counted, and the rest of the page still counts.

export interface Sample {
  /** The series name as written: `vllm:prefix_cache_hits_total`, `x_bucket`. */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** May be NaN, +Infinity or -Infinity. */
  readonly value: number;
  /** Milliseconds since the epoch, when the line carries a timestamp. */
  readonly timestampMs?: number;
}

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface ParsedMetrics {
  readonly samples: Sample[];
  /** `# TYPE` declarations by family name (for counters often the name with `_total`). */
  readonly types: Map<string, MetricType>;
  /** Lines that were neither blank, a comment nor a readable sample. */
  readonly skipped: number;
  /** 1-based number of the first skipped line, for a log message. */
  readonly firstSkippedLine?: number;
}

export interface ParseOptions {
  /**
   * Only series for which this returns true are kept. The others' labels and
   * values are never read, which makes a large page (hundreds of histogram
   * buckets) cheap when a caller needs a handful of gauges; their lines are
   * therefore not checked and never count as skipped.
   */
  readonly keep?: (name: string) => boolean;
}

const METRIC_TYPES: ReadonlySet<string> = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parsePrometheusText(text: string, options: ParseOptions = {}): ParsedMetrics {
  const samples: Sample[] = [];
  const types = new Map<string, MetricType>();
  const keep = options.keep;
  let skipped = 0;
  let firstSkippedLine: number | undefined;
  let lineNumber = 0;
  let start = 0;

  while (start <= text.length) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    lineNumber++;
    // A series the caller does not keep is skipped on its name alone, the line never copied:
    // a large page is mostly histogram buckets nobody reads.
    if (keep !== undefined) {
      const nameEnd = scanName(text, start);
      if (nameEnd > start && nameEnd < end && !keep(text.slice(start, nameEnd))) {
        start = end + 1;
        continue;
      }
    }
    // CRLF pages: the \r belongs to the line ending, not to the value.
    let lineEnd = end;
    if (lineEnd > start && text.charCodeAt(lineEnd - 1) === 13) lineEnd--;
    const line = text.slice(start, lineEnd);
    start = end + 1;

    const first = skipBlanks(line, 0);
    if (first === line.length) continue;
    if (line.charCodeAt(first) === 35 /* # */) {
      readTypeComment(line, first, types);
      continue;
    }
    const result = readSample(line, first, keep);
    if (result === DROPPED) continue;
    if (result === undefined) {
      skipped++;
      firstSkippedLine ??= lineNumber;
      continue;
    }
    samples.push(result);
  }
  return firstSkippedLine === undefined ? { samples, types, skipped } : { samples, types, skipped, firstSkippedLine };
}

/** Parses a sample value as Prometheus writes it: floats, exponents, NaN, +Inf, -Inf. */
export function parseSampleValue(text: string): number | undefined {
  // Number() alone would read '' as 0 and take hex ('0x1f'), yet refuse '+Inf'.
  if (FLOAT.test(text)) return Number(text);
  switch (text.toLowerCase()) {
    case 'nan':
      return NaN;
    case '+inf':
    case 'inf':
    case '+infinity':
    case 'infinity':
      return Infinity;
    case '-inf':
    case '-infinity':
      return -Infinity;
    default:
      return undefined;
  }
}

const FLOAT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const INTEGER = /^-?\d+$/;

const DROPPED = Symbol('dropped');

function readTypeComment(line: string, hash: number, types: Map<string, MetricType>): void {
  // '# TYPE <name> <type>'; HELP and free comments carry nothing a router reads.
  let i = skipBlanks(line, hash + 1);
  if (!line.startsWith('TYPE', i)) return;
  i += 4;
  const nameStart = skipBlanks(line, i);
  if (nameStart === i) return;
  const nameEnd = scanName(line, nameStart);
  if (nameEnd === nameStart) return;
  const typeStart = skipBlanks(line, nameEnd);
  const type = line.slice(typeStart).trimEnd();
  if (METRIC_TYPES.has(type)) types.set(line.slice(nameStart, nameEnd), type as MetricType);
}

function readSample(line: string, at: number, keep: ParseOptions['keep']): Sample | undefined | typeof DROPPED {
  const nameEnd = scanName(line, at);
  if (nameEnd === at) return undefined;
  const name = line.slice(at, nameEnd);
  if (keep && !keep(name)) return DROPPED;

  let i = skipBlanks(line, nameEnd);
  let labels: Record<string, string> = NO_LABELS;
  if (line.charCodeAt(i) === 123 /* { */) {
    const read = readLabels(line, i + 1);
    if (!read) return undefined;
    labels = read.labels;
    i = skipBlanks(line, read.end);
  } else if (i === nameEnd && i < line.length) {
    return undefined; // the name runs straight into something that is not a name
  }

  const valueEnd = scanToken(line, i);
  if (valueEnd === i) return undefined;
  const value = parseSampleValue(line.slice(i, valueEnd));
  if (value === undefined) return undefined;

  i = skipBlanks(line, valueEnd);
  if (i === line.length) return { name, labels, value };
  const stampEnd = scanToken(line, i);
  const stampText = line.slice(i, stampEnd);
  if (!INTEGER.test(stampText) || skipBlanks(line, stampEnd) !== line.length) return undefined;
  const stamp = Number(stampText);
  if (!Number.isSafeInteger(stamp)) return undefined;
  return { name, labels, value, timestampMs: stamp };
}

const NO_LABELS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** Reads `a="x",b="y"}` starting after the `{`; undefined on any malformation. */
function readLabels(line: string, at: number): { labels: Record<string, string>; end: number } | undefined {
  const labels: Record<string, string> = {};
  let i = skipBlanks(line, at);
  for (;;) {
    if (line.charCodeAt(i) === 125 /* } */) return { labels, end: i + 1 };
    const nameEnd = scanLabelName(line, i);
    if (nameEnd === i) return undefined;
    const labelName = line.slice(i, nameEnd);
    // A label called __proto__ would replace the object's prototype instead
    // of becoming a key; no engine writes one, so the line counts as bad.
    if (labelName === '__proto__' || Object.hasOwn(labels, labelName)) return undefined;
    i = skipBlanks(line, nameEnd);
    if (line.charCodeAt(i) !== 61 /* = */) return undefined;
    i = skipBlanks(line, i + 1);
    if (line.charCodeAt(i) !== 34 /* " */) return undefined;
    const read = readQuoted(line, i + 1);
    if (!read) return undefined;
    labels[labelName] = read.value;
    i = skipBlanks(line, read.end);
    const c = line.charCodeAt(i);
    if (c === 44 /* , */) {
      i = skipBlanks(line, i + 1); // a trailing comma before } is allowed
      continue;
    }
    if (c !== 125) return undefined;
  }
}

/** Reads a label value after its opening quote, undoing \\, \" and \n escapes. */
function readQuoted(line: string, at: number): { value: string; end: number } | undefined {
  let i = at;
  // Fast path: most values have no escapes at all.
  for (;;) {
    const c = line.charCodeAt(i);
    if (Number.isNaN(c)) return undefined;
    if (c === 34) return { value: line.slice(at, i), end: i + 1 };
    if (c === 92 /* \ */) break;
    i++;
  }
  let value = line.slice(at, i);
  for (;;) {
    const c = line.charCodeAt(i);
    if (Number.isNaN(c)) return undefined;
    if (c === 34) return { value, end: i + 1 };
    if (c === 92) {
      const next = line.charCodeAt(i + 1);
      if (Number.isNaN(next)) return undefined;
      // Unknown escapes are kept as written, as Prometheus itself does.
      value += next === 110 /* n */ ? '\n' : next === 92 ? '\\' : next === 34 ? '"' : '\\' + line[i + 1];
      i += 2;
      continue;
    }
    value += line[i];
    i++;
  }
}

function skipBlanks(line: string, at: number): number {
  let i = at;
  for (;;) {
    const c = line.charCodeAt(i);
    if (c !== 32 && c !== 9) return i;
    i++;
  }
}

/** Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. Returns the end (== at when none). */
function scanName(line: string, at: number): number {
  let i = at;
  for (;;) {
    const c = line.charCodeAt(i);
    const letter = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 58;
    if (!letter && !(i > at && c >= 48 && c <= 57)) return i;
    i++;
  }
}

/** Label names: [a-zA-Z_][a-zA-Z0-9_]*. */
function scanLabelName(line: string, at: number): number {
  let i = at;
  for (;;) {
    const c = line.charCodeAt(i);
    const letter = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95;
    if (!letter && !(i > at && c >= 48 && c <= 57)) return i;
    i++;
  }
}

/** The end of a run of non-blank characters. */
function scanToken(line: string, at: number): number {
  let i = at;
  while (i < line.length) {
    const c = line.charCodeAt(i);
    if (c === 32 || c === 9) break;
    i++;
  }
  return i;
}
