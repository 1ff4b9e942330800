// What rules may ask about the prompt's text, safely on hostile input:
// `containsAny` (keywords, whole words, any case) and `matches` (a regular
// expression with RE2 semantics). Both run in time linear in the text, and
// only on its last PROMPT_CHARS_EXAMINED characters, where the newest message
// is: a request's size never buys it more rule time.
import { RE2JS } from 're2js';

/** Characters of the prompt (its end) that text conditions examine. */
export const PROMPT_CHARS_EXAMINED = 4096;
export const MAX_KEYWORDS = 256;
export const MAX_KEYWORD_CHARS = 128;
export const MAX_PATTERN_CHARS = 512;

export const TEXT_OPERATORS = ['containsAny', 'matches'] as const;
export type TextOperator = (typeof TEXT_OPERATORS)[number];
export const isTextOperator = (name: string): name is TextOperator => (TEXT_OPERATORS as readonly string[]).includes(name);

export type TextTest = (text: string) => boolean;

const examined = (text: string) => (text.length > PROMPT_CHARS_EXAMINED ? text.slice(text.length - PROMPT_CHARS_EXAMINED) : text);

/** Why `value` can't be the operand of `operator`, or null when it can. */
export function textOperandProblem(operator: TextOperator, value: unknown): string | null {
  if (operator === 'containsAny') {
    if (!Array.isArray(value) || value.length === 0) return 'containsAny takes a non-empty list of keywords, e.g. [sql, select, "join on"]';
    if (value.length > MAX_KEYWORDS) return `containsAny takes at most ${MAX_KEYWORDS} keywords, not ${value.length}`;
    for (const keyword of value) {
      if (typeof keyword !== 'string' || keyword.trim().length === 0) return `containsAny keywords must be non-empty strings, not ${JSON.stringify(keyword)}`;
      if (keyword.length > MAX_KEYWORD_CHARS) return `a containsAny keyword may have at most ${MAX_KEYWORD_CHARS} characters`;
    }
    return null;
  }
  if (typeof value !== 'string' || value.length === 0) return 'matches takes a regular expression as a string, e.g. "(?i)\\bselect\\b.+\\bfrom\\b"';
  if (value.length > MAX_PATTERN_CHARS) return `a matches pattern may have at most ${MAX_PATTERN_CHARS} characters`;
  try {
    RE2JS.compile(value);
  } catch (error) {
    return `not a linear-time (RE2) regular expression: ${(error as Error).message} (RE2 has no backreferences or lookaround)`;
  }
  return null;
}

/** A compiled test for `operator` with `value` (checked with textOperandProblem first). */
export function compileTextTest(operator: TextOperator, value: unknown): TextTest {
  const problem = textOperandProblem(operator, value);
  if (problem) throw new Error(problem);
  if (operator === 'matches') {
    const pattern = RE2JS.compile(value as string);
    return (text) => typeof text === 'string' && pattern.matcher(examined(text)).find();
  }
  const keywords = new KeywordSet(value as string[]);
  return (text) => typeof text === 'string' && keywords.foundIn(examined(text));
}

interface Ending {
  readonly length: number;
  readonly wordStart: boolean;
  readonly wordEnd: boolean;
}

/** Keyword sets this small are looked for with String#indexOf before the automaton (KeywordSet.foundByAnchor). */
const FEW_KEYWORDS = 8;
/**
 * What an anchored look may spend before it leaves the text to the automaton: a unit a
 * character compared and PLACE_UNITS a place the anchor was found, up to the text's length
 * and SPARE_UNITS, so that a text full of near-matches costs about what the automaton's one
 * pass costs on top of it.
 */
const PLACE_UNITS = 16;
const SPARE_UNITS = 512;
/**
 * ASCII characters from the rarest in prose to the most common: a keyword is
 * looked for by its rarest character (found natively, a single character is
 * a fast search), then checked around it. Others are rarer than all of these
 * (`+`, `#`, `_`), but for the space and prose's punctuation, most common of all.
 */
const BY_RARITY = 'zqxj0123456789kvbpygfwmucldrhsnioate';
const PROSE_MARKS = ' \n\t\r.,-\'"';

/** A keyword's place in BY_RARITY's order: lower is rarer. */
function rarity(c: number): number {
  const at = BY_RARITY.indexOf(String.fromCharCode(c));
  if (at >= 0) return at;
  return PROSE_MARKS.includes(String.fromCharCode(c)) ? BY_RARITY.length : -1;
}

/** A keyword of a few, lower case, with its edges and the offset of its rarest character. */
interface Anchored extends Ending {
  readonly word: string;
  readonly offset: number;
}

/** The keywords whose rarest character is one character (`lower`, and `upper` when it is a letter). */
interface AnchorGroup {
  readonly lower: string;
  readonly upper: string | undefined;
  readonly keywords: readonly Anchored[];
}

function anchorGroups(keywords: readonly string[]): AnchorGroup[] {
  const groups = new Map<string, Anchored[]>();
  for (const k of keywords) {
    const word = k.replace(/[A-Z]/g, (c) => c.toLowerCase());
    let offset = 0;
    for (let i = 1; i < word.length; i++) if (rarity(word.charCodeAt(i)) < rarity(word.charCodeAt(offset))) offset = i;
    const anchor = word[offset];
    const group = groups.get(anchor) ?? [];
    group.push({ word, offset, length: k.length, wordStart: isWordCode(k.charCodeAt(0)), wordEnd: isWordCode(k.charCodeAt(k.length - 1)) });
    groups.set(anchor, group);
  }
  return [...groups].map(([anchor, group]) => ({ lower: anchor, upper: anchor >= 'a' && anchor <= 'z' ? anchor.toUpperCase() : undefined, keywords: group }));
}

const isWordCode = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const lower = (c: number) => (c >= 65 && c <= 90 ? c + 32 : c);

/**
 * Aho–Corasick over the keywords, ASCII letters folded to lower case: one
 * pass over the text whatever the number of keywords. A keyword counts only
 * as a whole word (not "select" inside "selection").
 */
class KeywordSet {
  private readonly next: Map<number, number>[] = [new Map()];
  private readonly fail: number[] = [0];
  /** The keywords that end at each state (its own and, through fail links, shorter ones). */
  private readonly ends: Ending[][] = [[]];
  /**
   * With ASCII keywords only (the usual case): every state's move on every
   * ASCII code, fail links folded in, so a character costs one array read.
   * A non-ASCII character then always leads back to the root.
   */
  private readonly ascii: Int32Array | undefined;
  /** 1 where a state ends a keyword: the common case, none, is one byte read. */
  private readonly ending: Uint8Array;
  /** A few ASCII keywords, lower case, with their edges, by their rarest character: looked for with String#indexOf first (`foundByAnchor`). */
  private readonly few: readonly AnchorGroup[] | undefined;

  constructor(keywords: readonly string[]) {
    for (const keyword of keywords) {
      let state = 0;
      for (let i = 0; i < keyword.length; i++) {
        const c = lower(keyword.charCodeAt(i));
        let to = this.next[state].get(c);
        if (to === undefined) {
          to = this.next.length;
          this.next.push(new Map());
          this.fail.push(0);
          this.ends.push([]);
          this.next[state].set(c, to);
        }
        state = to;
      }
      // A boundary is needed only where the keyword's own edge is a word character ("c++" may be followed by anything).
      this.ends[state].push({
        length: keyword.length,
        wordStart: isWordCode(keyword.charCodeAt(0)),
        wordEnd: isWordCode(keyword.charCodeAt(keyword.length - 1)),
      });
    }
    // Breadth first: a state's fail link is the longest proper suffix that is also a prefix.
    const queue: number[] = [...this.next[0].values()];
    for (let head = 0; head < queue.length; head++) {
      const state = queue[head];
      for (const [c, to] of this.next[state]) {
        let f = this.fail[state];
        while (f !== 0 && !this.next[f].has(c)) f = this.fail[f];
        const candidate = this.next[f].get(c);
        this.fail[to] = candidate !== undefined && candidate !== to ? candidate : 0;
        this.ends[to].push(...this.ends[this.fail[to]]);
        queue.push(to);
      }
    }
    if (keywords.every((k) => /^[\x00-\x7f]*$/.test(k))) {
      const table = new Int32Array(this.next.length * 128);
      for (const state of [0, ...queue]) {
        for (let c = 0; c < 128; c++) {
          const to = this.next[state].get(c);
          table[state * 128 + c] = to !== undefined ? to : state === 0 ? 0 : table[this.fail[state] * 128 + c];
        }
      }
      // Upper-case letters move as their lower case: the text is read as it is, folded by the table.
      for (let state = 0; state < this.next.length; state++) for (let c = 65; c <= 90; c++) table[state * 128 + c] = table[state * 128 + c + 32];
      this.ascii = table;
    }
    this.ending = Uint8Array.from(this.ends, (ends) => (ends.length === 0 ? 0 : 1));
    if (this.ascii && keywords.length <= FEW_KEYWORDS) {
      this.few = anchorGroups(keywords);
    }
  }

  foundIn(text: string): boolean {
    if (this.few !== undefined) {
      const found = this.foundByAnchor(text, this.few);
      if (found !== undefined) return found;
    }
    const ascii = this.ascii;
    const ending = this.ending;
    let state = 0;
    if (ascii) {
      // One table read a character (the usual case: ASCII keywords).
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        state = c < 128 ? ascii[(state << 7) | c] : 0;
        if (ending[state] === 1 && this.endsHere(text, i, state)) return true;
      }
      return false;
    }
    for (let i = 0; i < text.length; i++) {
      const c = lower(text.charCodeAt(i));
      while (state !== 0 && !this.next[state].has(c)) state = this.fail[state];
      state = this.next[state].get(c) ?? 0;
      if (ending[state] === 1 && this.endsHere(text, i, state)) return true;
    }
    return false;
  }

  /**
   * The automaton's answer for a few ASCII keywords, found natively: each
   * keyword's rarest character looked for with String#indexOf (in both cases
   * when it is a letter), and the keyword checked around each place found as
   * the automaton would (ASCII case folding only, whole words). The automaton
   * reads the text a character at a time in JavaScript (~2 µs for a 1 KB
   * prompt); looking for whole keywords with indexOf in the text lower-cased
   * cost more (4.5 µs for bench:decide's six in its 1 KB prompt: a search for
   * a short word stops at every place its common first letter is). Undefined
   * (ask the automaton) once the places found cost more than the text's
   * length (PLACE_UNITS), so that a text full of near-matches costs about one
   * more pass.
   */
  private foundByAnchor(text: string, groups: readonly AnchorGroup[]): boolean | undefined {
    let units = text.length + SPARE_UNITS;
    for (const group of groups) {
      for (let pass = 0; pass < 2; pass++) {
        const anchor = pass === 0 ? group.lower : group.upper;
        if (anchor === undefined) break;
        for (let at = text.indexOf(anchor); at >= 0; at = text.indexOf(anchor, at + 1)) {
          units -= PLACE_UNITS;
          for (const keyword of group.keywords) {
            const start = at - keyword.offset;
            if (start >= 0 && start + keyword.word.length <= text.length && this.matchesAt(text, start, keyword)) return true;
            units -= keyword.word.length;
          }
          if (units < 0) return undefined;
        }
      }
    }
    return false;
  }

  /** `keyword` at text[at], ASCII letters in any case (Kelvin's K lower-cases to k, yet is not one), as a whole word. */
  private matchesAt(text: string, at: number, keyword: Anchored): boolean {
    const { word } = keyword;
    for (let k = 0; k < word.length; k++) if (lower(text.charCodeAt(at + k)) !== word.charCodeAt(k)) return false;
    const end = at + word.length;
    if (keyword.wordEnd && end < text.length && isWordCode(text.charCodeAt(end))) return false;
    return !keyword.wordStart || at === 0 || !isWordCode(text.charCodeAt(at - 1));
  }

  /** A keyword ending at `state` ends at text[i] as a whole word. */
  private endsHere(text: string, i: number, state: number): boolean {
    const wordAfter = i + 1 < text.length && isWordCode(text.charCodeAt(i + 1));
    for (const end of this.ends[state]) {
      if (end.wordEnd && wordAfter) continue;
      const start = i - end.length + 1;
      if (!end.wordStart || start === 0 || !isWordCode(text.charCodeAt(start - 1))) return true;
    }
    return false;
  }
}
