// Does the prompt contain code? A cheap look for the marks code leaves:
// fences, definitions, includes, statements ending in semicolons or braces.
//
// It answers exactly what this regular expression (multiline) would:
//   /```|^\s*(def|class|import|from|function|fn|func|public|private|#include|package|const|let|var)\s+\S
//    |;\s*$|\)\s*\{\s*$|=>\s*\{|^\s*(if|for|while)\s*\(.*\)\s*\{/m
// but in one forward pass: the regex backtracks (`^\s*` over a run of
// newlines restarts at every line: 32 KB of newlines took seconds), and the
// prompt is the client's. Every whitespace run is walked a bounded number of
// times, so the cost is linear in the text.

import { MessageSlots } from './message-slot.ts';

/** Characters examined: code marks show early, and a huge prompt scanned whole would cost for nothing. */
export const CODE_SCAN_CHARS = 32_768;

const DEFINITIONS = ['def', 'class', 'import', 'from', 'function', 'fn', 'func', 'public', 'private', '#include', 'package', 'const', 'let', 'var'];
const BLOCKS = ['if', 'for', 'while'];

/**
 * The words of `words` by their first character (all ASCII), in their order: a line start
 * tries only the words its first character can begin: trying all 17 words at every line
 * start (a String#startsWith call each, ~10 ns) was most of the scan of a long prompt.
 */
function byFirst(words: readonly string[]): (readonly string[] | undefined)[] {
  const table: string[][] = [];
  for (const word of words) (table[word.charCodeAt(0)] ??= []).push(word);
  return Array.from({ length: 128 }, (_, c) => table[c]);
}
const DEFINITIONS_BY_FIRST = byFirst(DEFINITIONS);
const BLOCKS_BY_FIRST = byFirst(BLOCKS);

export function looksLikeCode(text: string): boolean {
  return scanForCode(text.length > CODE_SCAN_CHARS ? text.slice(0, CODE_SCAN_CHARS) : text);
}

/** What follows a message's end decides whether a mark crosses into the next: nothing, `{`, `(`, or any non-space. */
const enum Pending {
  None,
  Brace,
  Paren,
  Any,
}

/**
 * looksLikeCode of the messages' contents joined one a line, without
 * joining them (a 16 KB copy a request): each message is scanned alone, its
 * start a line start as in the joined text. A mark can cross a join only
 * through whitespace after a `)` or `=>` (then `{`), or after a line that is
 * a keyword alone (then `(`, or any non-space): where one might, the joined
 * text is scanned as before, so the answer is always the joined text's.
 */
export function contentsLookLikeCode(contents: readonly string[]): boolean {
  let used = 0;
  let pending = Pending.None;
  for (let m = 0; m < contents.length; m++) {
    if (used > 0 && ++used > CODE_SCAN_CHARS) break; // the line end joining it (none while the text is empty)
    const content = contents[m];
    const chars = Math.min(content.length, CODE_SCAN_CHARS - used);
    used += chars;
    let first = 0;
    while (first < chars && isSpace(content.charCodeAt(first))) first++;
    if (first === chars) continue; // whitespace only: what came before still ends at the next non-space
    if (pending !== Pending.None) {
      const c = content.charCodeAt(first);
      if (pending === Pending.Any || c === (pending === Pending.Brace ? 123 /* { */ : 40) /* ( */) return looksLikeCode(joinedLines(contents));
    }
    const short = chars < MIN_REMEMBERED_CHARS;
    // The last message's scan needs no pending mark (nothing follows it): scanForCode alone (a short one's is not remembered).
    if (short && m === contents.length - 1) return scanForCode(chars === content.length ? content : content.slice(0, chars));
    const scanned = short ? scan(chars === content.length ? content : content.slice(0, chars)) : rememberedScan(content, chars);
    if (scanned === CODE) return true;
    pending = scanned;
  }
  return false;
}

/** A message's scan: CODE, or what a mark ending it needs from the next message. */
const CODE = -1;
type Scan = Pending | typeof CODE;

function scan(text: string): Scan {
  return scanForCode(text) ? CODE : pendingAfter(text);
}

// Long messages' scans, remembered: a shared system prompt or document and a
// conversation's earlier turns come again in every request, and comparing a
// message with the remembered one (===, natively) costs a fraction of
// scanning it. A message longer than the scanned part is remembered by that
// part (its first characters), which alone decides the scan. Two entries a
// set (message-slot.ts).
/** Shorter messages cost less to scan than to look up. */
const MIN_REMEMBERED_CHARS = 128;
/** Scanned parts up to this long are kept in 256 entries (at most 4 M characters alive)... */
const SHORT_CHARS = 16_384;
const shortScans = new MessageSlots(256);
/** ...longer ones (up to CODE_SCAN_CHARS) in 64, four a set (at most 2 M characters): in 16, two a set, bench:facts' 16 documents of 220 KB took each other's and were scanned again. */
const longScans = new MessageSlots(64, 4);

/** scan() of the first `chars` characters of `content`, remembered. */
function rememberedScan(content: string, chars: number): Scan {
  const slots = chars > SHORT_CHARS ? longScans : shortScans;
  const found = slots.find(content, chars);
  if (found >= 0) return slots.values[found] as Scan;
  const scanned = scan(chars === content.length ? content : content.slice(0, chars));
  slots.values[slots.take(content, chars)] = scanned;
  return scanned;
}

/** What a mark ending `text` needs next to match across the join (text has a non-space). */
function pendingAfter(text: string): Pending {
  let last = text.length - 1;
  while (isSpace(text.charCodeAt(last))) last--;
  const c = text.charCodeAt(last);
  if (c === 41 /* ) */ || c === 62 /* > */) return Pending.Brace;
  // A keyword alone on the last line: its word, then only whitespace back to a line start.
  let start = last;
  while (start > 0 && last - start < 8 && !isSpace(text.charCodeAt(start - 1))) start--;
  if (start > 0 && !isSpace(text.charCodeAt(start - 1))) return Pending.None;
  const word = text.slice(start, last + 1);
  const kind = DEFINITIONS.includes(word) ? Pending.Any : BLOCKS.includes(word) ? Pending.Paren : Pending.None;
  if (kind === Pending.None) return kind;
  for (let i = start - 1; i >= 0; i--) {
    const b = text.charCodeAt(i);
    if (isLineEnd(b)) return kind;
    if (!isSpace(b)) return Pending.None;
  }
  return kind;
}

/** The contents one a line, up to the scanned length: the text the answer is defined on. */
function joinedLines(contents: readonly string[]): string {
  let text = '';
  for (const content of contents) {
    text += (text === '' ? '' : '\n') + content;
    if (text.length >= CODE_SCAN_CHARS) break;
  }
  return text;
}

/** JavaScript's `\s`. */
function isSpace(c: number): boolean {
  if (c === 32 || (c >= 9 && c <= 13)) return true;
  if (c < 160) return false;
  return (
    c === 160 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  );
}

/** A line terminator: where `^` and `$` match in multiline mode, and what `.` does not cross. */
function isLineEnd(c: number): boolean {
  return c === 10 || c === 13 || c === 0x2028 || c === 0x2029;
}

/** The first index at or after `i` that is not whitespace (text.length if none). */
function skipSpaces(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** `\s*$` at `i`: only whitespace up to a line end or the end of the text. */
function endsLine(text: string, i: number): boolean {
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isLineEnd(c)) return true;
    if (!isSpace(c)) return false;
  }
  return true;
}

/** text.startsWith(word, i) for a short word: compared here, a builtin call costs more than the few characters. */
function wordAt(text: string, i: number, word: string): boolean {
  if (i + word.length > text.length) return false;
  for (let k = 0; k < word.length; k++) if (text.charCodeAt(i + k) !== word.charCodeAt(k)) return false;
  return true;
}

function startsWithAny(text: string, i: number, byFirst: readonly (readonly string[] | undefined)[]): number {
  const words = byFirst[text.charCodeAt(i)];
  if (words !== undefined) for (const word of words) if (wordAt(text, i, word)) return i + word.length;
  return -1;
}

/** `def … \s+\S` and the like: a definition keyword, whitespace, and some non-space somewhere after. */
function definitionAt(text: string, start: number, lastNonSpace: number): boolean {
  const words = DEFINITIONS_BY_FIRST[text.charCodeAt(start)];
  if (words === undefined) return false;
  for (const word of words) {
    const end = start + word.length;
    if (wordAt(text, start, word) && end < text.length && isSpace(text.charCodeAt(end)) && end < lastNonSpace) return true;
  }
  return false;
}

/** `(if|for|while)\s*\(.*\)\s*\{` from `end`, just past the keyword. */
function blockAt(text: string, end: number): boolean {
  const n = text.length;
  const open = skipSpaces(text, end);
  if (text.charCodeAt(open) !== 40 /* ( */) return false;
  // `.*\)\s*\{`: a `)` on this line, then whitespace (any), then `{`.
  for (let i = open + 1; i < n; i++) {
    const c = text.charCodeAt(i);
    if (isLineEnd(c)) return false;
    if (c === 41 /* ) */) {
      let next = i + 1;
      let crossedLine = false;
      for (; next < n && isSpace(text.charCodeAt(next)); next++) if (isLineEnd(text.charCodeAt(next))) crossedLine = true;
      if (text.charCodeAt(next) === 123 /* { */) return true;
      // No `)` after this one on the line (`.` stops at a line end): walk on only if the line goes on.
      if (crossedLine) return false;
      i = next - 1;
    }
  }
  return false;
}

/** A line's first non-space character at `start`: a definition or a block statement begins here? */
function codeLineAt(text: string, start: number, lastNonSpace: number): boolean {
  if (start >= text.length) return false;
  if (definitionAt(text, start, lastNonSpace)) return true;
  const end = startsWithAny(text, start, BLOCKS_BY_FIRST);
  return end >= 0 && blockAt(text, end);
}

/**
 * The characters the scan stops at: the three that end code marks, and the
 * line ends (a line's first word may be a keyword). Everything between is
 * skipped by String#indexOf, which runs natively: prose has few of these,
 * and reading every character in JavaScript was most of a request's cost.
 */
const STOPS = [';', ')', '=', '\n', '\r', '\u2028', '\u2029'];
const FIRST_LINE_END = 3;

function nextStop(text: string, stop: number, from: number): number {
  const at = text.indexOf(STOPS[stop], from);
  return at < 0 ? text.length : at;
}

/** The regex above, without backtracking. Exported for tests; use looksLikeCode. */
export function scanForCode(text: string): boolean {
  if (text.includes('```')) return true;
  const n = text.length;
  // `\s+\S` after a definition keyword: some non-space must follow somewhere.
  let lastNonSpace = n - 1;
  while (lastNonSpace >= 0 && isSpace(text.charCodeAt(lastNonSpace))) lastNonSpace--;

  let lineStart = skipSpaces(text, 0);
  if (codeLineAt(text, lineStart, lastNonSpace)) return true;
  // Where each stop character next occurs; line ends inside a line's leading whitespace were walked already.
  const next = STOPS.map((_, stop) => nextStop(text, stop, stop >= FIRST_LINE_END ? lineStart : 0));
  for (;;) {
    let stop = 0;
    for (let s = 1; s < STOPS.length; s++) if (next[s] < next[stop]) stop = s;
    const i = next[stop];
    if (i >= n) return false;
    next[stop] = nextStop(text, stop, i + 1);
    if (stop === 0) {
      if (endsLine(text, i + 1)) return true; // `;\s*$`
    } else if (stop === 1) {
      const brace = skipSpaces(text, i + 1); // `\)\s*\{\s*$`
      if (text.charCodeAt(brace) === 123 /* { */ && endsLine(text, brace + 1)) return true;
    } else if (stop === 2) {
      if (text.charCodeAt(i + 1) === 62 /* > */ && text.charCodeAt(skipSpaces(text, i + 2)) === 123) return true; // `=>\s*\{`
    } else {
      // A line end: the next line's first non-space character, past any blank lines.
      lineStart = skipSpaces(text, i + 1);
      if (codeLineAt(text, lineStart, lastNonSpace)) return true;
      for (let s = FIRST_LINE_END; s < STOPS.length; s++) if (next[s] < lineStart) next[s] = nextStop(text, s, lineStart);
    }
  }
}
