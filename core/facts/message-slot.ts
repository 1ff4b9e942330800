// Where a long message is remembered (chat-estimate.ts, code.ts): a slot
// from its length and three of its characters, no pass over the text. The
// slot only spreads messages; whether a remembered one is the same message
// is decided by comparing the two with ===.

/** A slot in [0, 256). */
export function messageSlot(text: string): number {
  const n = text.length;
  let h = Math.imul(n ^ (text.charCodeAt(0) << 16), 0x9e3779b1);
  h = Math.imul(h ^ text.charCodeAt(n >> 1) ^ (text.charCodeAt(n - 1) << 16), 0x85ebca6b);
  return (h ^ (h >>> 15)) >>> 24;
}
