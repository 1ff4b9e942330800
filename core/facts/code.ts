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

/** Characters examined: code marks show early, and a huge prompt scanned whole would cost for nothing. */
export const CODE_SCAN_CHARS = 32_768;

const DEFINITIONS = ['def', 'class', 'import', 'from', 'function', 'fn', 'func', 'public', 'private', '#include', 'package', 'const', 'let', 'var'];
const BLOCKS = ['if', 'for', 'while'];

export function looksLikeCode(text: string): boolean {
  return scanForCode(text.length > CODE_SCAN_CHARS ? text.slice(0, CODE_SCAN_CHARS) : text);
}

/** JavaScript's `\s`. */
function isSpace(c: number): boolean {
  if (c === 32 || (c >= 9 && c <= 13)) return true;
  if (c < 160) return false;
  return c === 160 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
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

function startsWithAny(text: string, i: number, words: readonly string[], then: (end: number) => boolean): boolean {
  for (const word of words) if (text.startsWith(word, i) && then(i + word.length)) return true;
  return false;
}

/** The regex above, without backtracking. Exported for tests; use looksLikeCode. */
export function scanForCode(text: string): boolean {
  if (text.includes('```')) return true;
  const n = text.length;
  // `\s+\S` after a definition keyword: some non-space must follow somewhere.
  let lastNonSpace = n - 1;
  while (lastNonSpace >= 0 && isSpace(text.charCodeAt(lastNonSpace))) lastNonSpace--;

  const definitionAt = (end: number) => end < n && isSpace(text.charCodeAt(end)) && end < lastNonSpace;
  const blockAt = (end: number) => {
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
  };

  let lineStart = true; // only whitespace since the start of the text or a line end
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (isSpace(c)) {
      if (isLineEnd(c)) lineStart = true;
      continue;
    }
    if (lineStart) {
      lineStart = false;
      if (startsWithAny(text, i, DEFINITIONS, definitionAt) || startsWithAny(text, i, BLOCKS, blockAt)) return true;
    }
    if (c === 59 /* ; */ && endsLine(text, i + 1)) return true;
    if (c === 41 /* ) */) {
      const next = skipSpaces(text, i + 1);
      if (text.charCodeAt(next) === 123 && endsLine(text, next + 1)) return true;
    }
    if (c === 61 /* = */ && text.charCodeAt(i + 1) === 62 /* > */ && text.charCodeAt(skipSpaces(text, i + 2)) === 123) return true;
  }
  return false;
}
