// Reads the engine's `usage` from a response as it passes through, for the
// quota settlement (docs/quotas.md), without holding the response back:
// - a JSON body is copied aside (up to MAX_BODY_BYTES) and parsed at its end;
// - a stream is looked at one whole SSE event at a time (forward.ts hands
//   only whole events): an event is parsed only if it carries a usage object,
//   and the usage chunk the router asked for on the client's behalf
//   (stream_options.include_usage) is removed when the client did not ask.
// Content chunks are counted: a stream that breaks is charged what it delivered.
const USAGE_KEY = Buffer.from('"usage"');
const DATA = Buffer.from('data:');
const DONE = Buffer.from('[DONE]');
/** A JSON body larger than this is passed on unread: its usage is missing and the estimate stands. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export class UsageTap {
  /** Usage objects seen: the first one, and how many there were (more than one is not trusted). */
  usage: unknown;
  usageCount = 0;
  /** Stream events with content delivered to the client (about one token each, as vLLM streams by default). */
  delivered = 0;
  private body: Buffer[] | undefined;
  private bodyBytes = 0;
  private tooLarge = false;

  /** `strip`: the client did not ask for the usage chunk; it must not see it. */
  constructor(private readonly strip: boolean) {}

  /** What to pass on of `chunk` (whole SSE events when `sse`). */
  data(chunk: Buffer, sse: boolean): Buffer {
    if (!sse) {
      if (!this.tooLarge) {
        this.bodyBytes += chunk.length;
        if (this.bodyBytes > MAX_BODY_BYTES) {
          this.tooLarge = true;
          this.body = undefined;
        } else (this.body ??= []).push(Buffer.from(chunk));
      }
      return chunk;
    }
    if (chunk.indexOf(USAGE_KEY) < 0) {
      this.delivered += countData(chunk, 0, chunk.length);
      return chunk;
    }
    // Some event carries "usage": look at each one.
    const kept: Buffer[] = [];
    let dropped = false;
    let start = 0;
    while (start < chunk.length) {
      const end = eventEnd(chunk, start);
      if (this.readEvent(chunk.subarray(start, end))) dropped = true;
      else kept.push(chunk.subarray(start, end));
      start = end;
    }
    return dropped ? Buffer.concat(kept) : chunk;
  }

  /** After the end of a JSON body: reads its usage. */
  finish(): void {
    if (!this.body) return;
    const text = Buffer.concat(this.body).toString('utf8');
    this.body = undefined;
    try {
      const parsed = JSON.parse(text) as unknown;
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) && 'usage' in parsed) this.record((parsed as { usage: unknown }).usage);
      // A second "usage" key in the same object: JSON.parse keeps the last; the text says there were two.
      if (countOf(text, '"usage"') > 1) this.usageCount = Math.max(this.usageCount, 2);
    } catch {
      // Not JSON: no usage.
    }
  }

  /** One SSE event; true when it is the usage chunk to remove from what the client sees. */
  private readEvent(event: Buffer): boolean {
    const at = event.indexOf(USAGE_KEY);
    if (at < 0 || !objectFollows(event, at + USAGE_KEY.length)) {
      this.delivered += countData(event, 0, event.length);
      return false;
    }
    const payload = parseData(event);
    if (payload === undefined || payload.usage === null || typeof payload.usage !== 'object') {
      this.delivered += countData(event, 0, event.length);
      return false;
    }
    this.record(payload.usage);
    const usageOnly = Array.isArray(payload.choices) && payload.choices.length === 0;
    if (!usageOnly) this.delivered++;
    return this.strip && usageOnly;
  }

  private record(usage: unknown): void {
    if (usage === undefined || usage === null) return;
    this.usageCount++;
    if (this.usageCount === 1) this.usage = usage;
  }
}

/** Where the SSE event starting at `from` ends: past its blank line, or the buffer's end. */
function eventEnd(data: Buffer, from: number): number {
  for (let i = from; i < data.length; i++) {
    const c = data[i];
    if (c !== 0x0a && c !== 0x0d) continue;
    const j = c === 0x0d && data[i + 1] === 0x0a ? i + 2 : i + 1;
    const d = data[j];
    if (d === 0x0a) return j + 1;
    if (d === 0x0d) return data[j + 1] === 0x0a ? j + 2 : j + 1;
    i = j - 1;
  }
  return data.length;
}

/** `"usage"` then optional blanks, a colon, blanks and `{`: a usage object, not `"usage":null`. */
function objectFollows(data: Buffer, i: number): boolean {
  while (data[i] === 0x20) i++;
  if (data[i] !== 0x3a) return false;
  i++;
  while (data[i] === 0x20) i++;
  return data[i] === 0x7b;
}

/** The JSON of an event's data lines, or undefined. */
function parseData(event: Buffer): Record<string, unknown> | undefined {
  const lines = event.toString('utf8').split(/\r\n|\r|\n/);
  const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(l.startsWith('data: ') ? 6 : 5));
  if (data.length === 0) return undefined;
  try {
    const parsed = JSON.parse(data.join('\n')) as unknown;
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** `data:` lines in data[from, to) that are not `[DONE]`. */
function countData(data: Buffer, from: number, to: number): number {
  let n = 0;
  for (let i = data.indexOf(DATA, from); i >= 0 && i < to; i = data.indexOf(DATA, i + DATA.length)) {
    let j = i + DATA.length;
    if (data[j] === 0x20) j++;
    if (data.compare(DONE, 0, DONE.length, j, j + DONE.length) !== 0) n++;
  }
  return n;
}

function countOf(text: string, needle: string): number {
  let n = 0;
  for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + needle.length)) n++;
  return n;
}
