// Edits to a JSON request body made on the client's bytes, not by
// serializing the parsed body again: the router changes a few top-level
// fields (`model`, `priority`, `request_id`, `stream_options.include_usage`)
// of a body that may hold megabytes of prompt. A linear scan finds where each
// top-level member's value lies (strings skipped with indexOf, escapes
// respected; UTF-8 never puts a byte below 0x80 inside a multi-byte
// character, so the structure can be read on bytes), the edits are spliced
// in, and everything else goes out byte for byte as the client sent it.
// Anything the scan does not expect returns undefined: the caller then
// serializes the parsed body instead (the slow path, always correct).

/** One top-level member: its key, decoded, and where its value's bytes lie (end exclusive). */
export interface JsonMember {
  readonly key: string;
  readonly valueStart: number;
  readonly valueEnd: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function skipSpace(bytes: Uint8Array, i: number): number {
  while (i < bytes.length && isSpace(bytes[i])) i++;
  return i;
}

/** The index of the quote closing the string whose opening quote is at `open`, or -1. */
function stringEnd(bytes: Buffer, open: number): number {
  let end = open;
  for (;;) {
    end = bytes.indexOf(QUOTE, end + 1);
    if (end < 0) return -1;
    let backslash = end - 1;
    while (bytes[backslash] === BACKSLASH) backslash--;
    if ((end - 1 - backslash) % 2 === 0) return end; // an even run of backslashes: not escaped
  }
}

/** Where the value starting at `i` ends (exclusive), or -1. Nested values are walked by their brackets only. */
function valueEnd(bytes: Buffer, i: number): number {
  const c = bytes[i];
  if (c === QUOTE) {
    const end = stringEnd(bytes, i);
    return end < 0 ? -1 : end + 1;
  }
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0;
    for (let j = i; j < bytes.length; j++) {
      const d = bytes[j];
      if (d === QUOTE) {
        j = stringEnd(bytes, j);
        if (j < 0) return -1;
      } else if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
        if (--depth === 0) return j + 1;
      }
    }
    return -1;
  }
  // A number, true, false or null: up to the next separator.
  let j = i;
  while (j < bytes.length) {
    const d = bytes[j];
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isSpace(d)) break;
    j++;
  }
  return j > i ? j : -1;
}

/** The key of the string at [open, close]: read as is when it has no escape, decoded otherwise. */
function keyOf(bytes: Buffer, open: number, close: number): string | undefined {
  let escaped = false;
  for (let i = open + 1; i < close && !escaped; i++) escaped = bytes[i] === BACKSLASH;
  if (!escaped) return bytes.toString('utf8', open + 1, close);
  try {
    return JSON.parse(bytes.toString('utf8', open, close + 1)) as string;
  } catch {
    return undefined;
  }
}

/**
 * The top-level members of a JSON object, in order (duplicates included), and
 * where its closing brace is; undefined when the bytes are not one object.
 */
export function topLevelMembers(bytes: Buffer): { members: JsonMember[]; close: number } | undefined {
  let i = skipSpace(bytes, 0);
  if (bytes[i] !== OPEN_BRACE) return undefined;
  const members: JsonMember[] = [];
  i = skipSpace(bytes, i + 1);
  if (bytes[i] === CLOSE_BRACE) return skipSpace(bytes, i + 1) === bytes.length ? { members, close: i } : undefined;
  for (;;) {
    if (bytes[i] !== QUOTE) return undefined;
    const keyClose = stringEnd(bytes, i);
    if (keyClose < 0) return undefined;
    const key = keyOf(bytes, i, keyClose);
    if (key === undefined) return undefined;
    i = skipSpace(bytes, keyClose + 1);
    if (bytes[i] !== COLON) return undefined;
    const start = skipSpace(bytes, i + 1);
    const end = valueEnd(bytes, start);
    if (end < 0) return undefined;
    members.push({ key, valueStart: start, valueEnd: end });
    i = skipSpace(bytes, end);
    if (bytes[i] === COMMA) {
      i = skipSpace(bytes, i + 1);
      continue;
    }
    if (bytes[i] !== CLOSE_BRACE) return undefined;
    return skipSpace(bytes, i + 1) === bytes.length ? { members, close: i } : undefined;
  }
}

/** What to change: top-level fields set to a value, and members added to a top-level object field. */
export interface JsonEdits {
  /** Every member of that key gets this value (JSON.stringify'd); one is appended when there is none. */
  readonly set?: readonly (readonly [key: string, value: unknown])[];
  /** The object under `key` (made when absent or null) gets a member `member: value`, after its own so that it wins. */
  readonly merge?: readonly [key: string, member: string, value: unknown];
}

/** Whether a value read from the bytes is the one the parser gave the body (the scan and JSON.parse agree). */
function sameValue(bytes: Buffer, member: JsonMember, parsed: unknown): boolean {
  if (parsed !== null && typeof parsed === 'object') return bytes[member.valueStart] === (Array.isArray(parsed) ? OPEN_BRACKET : OPEN_BRACE);
  try {
    return JSON.parse(bytes.toString('utf8', member.valueStart, member.valueEnd)) === parsed;
  } catch {
    return false;
  }
}

/**
 * The client's bytes with the edits spliced in, or undefined when they cannot
 * be made safely (the caller serializes `body` instead). `body` is what
 * JSON.parse made of `bytes`: the scan is checked against it (the same keys,
 * and the values it replaces are the parsed ones), so bytes the scan misreads
 * are never sent.
 */
export function spliceJson(bytes: Buffer, body: Record<string, unknown>, edits: JsonEdits): Buffer | undefined {
  const scanned = topLevelMembers(bytes);
  if (!scanned) return undefined;
  const { members, close } = scanned;
  const keys = new Set<string>();
  const last = new Map<string, JsonMember>();
  for (const member of members) {
    keys.add(member.key);
    last.set(member.key, member);
  }
  if (keys.size !== Object.keys(body).length) return undefined;
  for (const key of keys) if (!Object.hasOwn(body, key)) return undefined;

  // [start, end, text]: byte ranges replaced by text; an insertion has start === end.
  const changes: [number, number, string][] = [];
  let appended = '';
  const comma = () => (members.length > 0 || appended !== '' ? ',' : '');
  for (const [key, value] of edits.set ?? []) {
    const text = JSON.stringify(value);
    const current = last.get(key);
    if (current === undefined) {
      appended += `${comma()}${JSON.stringify(key)}:${text}`;
      continue;
    }
    if (!sameValue(bytes, current, body[key])) return undefined;
    for (const member of members) if (member.key === key) changes.push([member.valueStart, member.valueEnd, text]);
  }
  if (edits.merge) {
    const [key, name, value] = edits.merge;
    const entry = `${JSON.stringify(name)}:${JSON.stringify(value)}`;
    const current = last.get(key);
    const parsed = body[key];
    if (current === undefined) appended += `${comma()}${JSON.stringify(key)}:{${entry}}`;
    else if (parsed === null) changes.push([current.valueStart, current.valueEnd, `{${entry}}`]);
    else if (typeof parsed === 'object' && !Array.isArray(parsed) && bytes[current.valueStart] === OPEN_BRACE) {
      const inner = current.valueEnd - 1; // its closing brace
      const empty = skipSpace(bytes, current.valueStart + 1) === inner;
      changes.push([inner, inner, `${empty ? '' : ','}${entry}`]);
    } else return undefined;
  }
  if (appended !== '') changes.push([close, close, appended]);
  if (changes.length === 0) return bytes;
  changes.sort((a, b) => a[0] - b[0]);
  const parts: Buffer[] = [];
  let at = 0;
  for (const [start, end, text] of changes) {
    parts.push(bytes.subarray(at, start), Buffer.from(text));
    at = end;
  }
  parts.push(bytes.subarray(at));
  return Buffer.concat(parts);
}
