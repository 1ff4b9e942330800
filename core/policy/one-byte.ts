// A policy file with one character past Latin-1 (an arrow or a dash in a
// comment) is a two-byte text in V8, and every string the YAML parser cuts
// from it stays two-byte, though its own characters fit in one: replica ids,
// pool, model and tenant names. Every reason, trace and log line then built
// from them is two-byte too: twice the bytes to copy, scan and encode on
// every request. The parsed values' strings are copied here into V8's
// one-byte form where their characters allow; the values are the same.

/** Characters past Latin-1: such a string stays as it is. A character class, no backtracking. */
const PAST_LATIN1 = /[^\u0000-\u00ff]/;

/** A copy of `s` as a one-byte string when its characters allow (Latin-1 decoding makes one). */
export function oneByte(s: string): string {
  return PAST_LATIN1.test(s) ? s : Buffer.from(s, 'latin1').toString('latin1');
}

/**
 * `data` (parsed YAML or JSON: plain objects, arrays and scalars) with every
 * string value made one-byte where it can be, in place. Walked with a stack,
 * not recursion: a deeply nested file cannot overflow it; each object once
 * (YAML aliases share one, and may make a cycle).
 */
export function oneByteStrings(data: unknown): unknown {
  if (typeof data === 'string') return oneByte(data);
  const stack: object[] = [];
  const seen = new Set<object>();
  if (data !== null && typeof data === 'object') stack.push(data);
  while (stack.length > 0) {
    const node = stack.pop() as Record<string, unknown> | unknown[];
    if (seen.has(node)) continue;
    seen.add(node);
    const keys = Array.isArray(node) ? node.keys() : Object.keys(node);
    for (const key of keys) {
      const value = (node as Record<string | number, unknown>)[key];
      if (typeof value === 'string') (node as Record<string | number, unknown>)[key] = oneByte(value);
      else if (value !== null && typeof value === 'object') stack.push(value);
    }
  }
  return data;
}
