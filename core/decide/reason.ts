// A strategy's reason is text from a plugin: it goes into the decision log,
// the trace and (when decision headers are on) a response header. Scrubbed of
// the router's secrets (a plugin can read them from /proc/self/environ),
// capped and made printable here, once, for every strategy and every piece
// of text it returns (reasons, alternatives, error messages).
import { redactSecrets } from '../observe/secrets.ts';

const MAX_REASON_CHARS = 200;
/** Redacted before the cap, so that a secret cut by the cap does not show its first characters; this bounds the scan. */
const SCANNED_CHARS = 4096;
// Control characters (C0, DEL, C1) and the Unicode line/paragraph separators.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

export function cleanReason(reason: unknown): string {
  const raw = typeof reason === 'string' ? reason : reason == null ? '' : String(reason);
  const text = redactSecrets(raw.length > SCANNED_CHARS ? raw.slice(0, SCANNED_CHARS) : raw);
  const capped = text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS - 1)}…` : text;
  UNPRINTABLE.lastIndex = 0;
  return UNPRINTABLE.test(capped) ? capped.replace(UNPRINTABLE, ' ') : capped;
}

/**
 * Texts known to be short enough and printable: what cleanReason leaves as
 * it is, unless it holds a secret. A property of the text alone, so it never
 * goes stale when secrets change; bounded (emptied when full).
 */
const printableTexts = new Set<string>();
const MAX_PRINTABLE_TEXTS = 4096;

/**
 * cleanReason for the texts a strategy returns again and again: replica ids,
 * its notes on alternatives, its pass reasons (up to 33 a decision at 512
 * replicas). Each is checked for length and printable characters once; then
 * only redacted (no work when the router holds no secrets). The same answer
 * as cleanReason's (test/core/reason.test.ts).
 */
export function cleanNote(text: unknown): string {
  if (typeof text !== 'string') return cleanReason(text);
  const slot = recentSlot(text);
  if (recentTexts[slot] === text || printableTexts.has(text)) {
    recentTexts[slot] = text;
    return redactSecrets(text) === text ? text : cleanReason(text);
  }
  const cleaned = cleanReason(text);
  if (cleaned === text) {
    if (printableTexts.size >= MAX_PRINTABLE_TEXTS) printableTexts.clear();
    printableTexts.add(text);
    recentTexts[slot] = text;
  }
  return cleaned;
}

/**
 * The printable texts met lately, one a slot named by the text's length and
 * last three characters: most of a decision's notes are the very strings
 * of the decision before (replica ids, a strategy's kept notes), and one
 * comparison with the slot's text costs less than a lookup in the set of
 * thousands (a cache miss each). Only texts found printable are kept, so
 * a slot never goes stale either.
 */
const RECENT_SLOTS = 1024;
const recentTexts: string[] = new Array<string>(RECENT_SLOTS).fill('');

function recentSlot(text: string): number {
  const n = text.length;
  // The empty text is printable: slot 0 holds it from the start. Texts under 3 characters share slot 0.
  if (n < 3) return 0;
  return (((text.charCodeAt(n - 1) * 31 + text.charCodeAt(n - 2)) * 31 + text.charCodeAt(n - 3)) * 31 + n) & (RECENT_SLOTS - 1);
}
