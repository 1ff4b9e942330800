// Token ids per segment of a rendered prompt (docs/tokens.md, "Speed"). The
// tokenizer first cuts its input at its added (special) tokens and encodes
// each stretch between them on its own; so does this, with the same rules
// (longest match at the leftmost place, lstrip/rstrip), and it remembers each
// stretch's ids. A conversation's next turn then costs only its new text, and
// the ids equal whole-text encoding. Text that merely looks like a special
// token (`<|user|>` where the vocabulary has none) is not a cut.
import type { TokenizerFolder } from './folder.ts';
import { RecentCache } from './recent-cache.ts';

/** Added tokens starting with at most this many distinct characters are found by indexOf, one scan per character. */
const MAX_SCANNED_FIRST_CHARS = 4;

/** An added token as the splitter cuts at it. */
interface AddedToken {
  readonly content: string;
  readonly id: number;
  readonly lstrip: boolean;
  readonly rstrip: boolean;
}

/**
 * A node of the added tokens' trie, its children by UTF-16 code unit: a Map keyed by a number is looked up without
 * the one-character string and the dictionary look-up per character an object keyed by characters costs.
 */
interface TrieNode {
  readonly next: Map<number, TrieNode>;
  /** The token that ends here. */
  token?: AddedToken;
}

export interface Piece {
  /** A stretch of text to encode, or an added token's id. */
  readonly text?: string;
  readonly id?: number;
}

/** Cuts text at the tokenizer's added tokens, as @huggingface/tokenizers does before encoding. */
export class AddedTokenSplitter {
  readonly #trie: TrieNode = { next: new Map() };
  readonly #firstChars = new Set<string>();
  /** The same, as a list, when it is short enough to find the next candidate with indexOf (a native scan) per character. */
  #firstCharList?: readonly string[];

  constructor(folder: Pick<TokenizerFolder, 'tokenizerJson' | 'tokenizer'>) {
    const hasNormalizer = folder.tokenizer.normalizer !== null;
    for (const t of folder.tokenizerJson.added_tokens ?? []) {
      // Normalized added tokens are matched after normalization, inside a stretch: the tokenizer's own encode handles those.
      const normalized = t.normalized ?? !t.special;
      if (normalized && hasNormalizer) continue;
      if (!t.content) continue;
      this.#firstChars.add(t.content[0]);
      let node = this.#trie;
      for (let k = 0; k < t.content.length; k++) {
        const unit = t.content.charCodeAt(k);
        let child = node.next.get(unit);
        if (child === undefined) node.next.set(unit, (child = { next: new Map() }));
        node = child;
      }
      node.token = { content: t.content, id: t.id, lstrip: t.lstrip === true, rstrip: t.rstrip === true };
    }
    // Llama 3's and Qwen3's added tokens all start with "<": one indexOf finds each candidate instead of a Set look-up per character.
    if (this.#firstChars.size <= MAX_SCANNED_FIRST_CHARS) this.#firstCharList = [...this.#firstChars];
  }

  /** Where the next added token may start, at or after `from` (n: nowhere). */
  #nextCandidate(text: string, from: number, next: number[]): number {
    const n = text.length;
    const list = this.#firstCharList;
    if (list === undefined) {
      let i = from;
      while (i < n && !this.#firstChars.has(text[i])) i++;
      return i;
    }
    let best = n;
    for (let c = 0; c < list.length; c++) {
      // Each character's last found place is kept: it is searched again only once passed.
      if (next[c] < from) {
        const at = text.indexOf(list[c], from);
        next[c] = at < 0 ? n : at;
      }
      if (next[c] < best) best = next[c];
    }
    return best;
  }

  split(text: string): Piece[] {
    return this.splitWithCut(text).pieces;
  }

  /**
   * The pieces, and where appending text can no longer change them: `cut`
   * pieces end at char `cutAt`, right after an added token whose match no
   * longer text could extend (the longest-match walk ended inside the text or
   * at a token nothing longer starts with) and that strips nothing after it.
   * Text appended later is split again only from `cutAt`.
   */
  splitWithCut(text: string): { readonly pieces: Piece[]; readonly cut: number; readonly cutAt: number } {
    const pieces: { text: string; token?: AddedToken }[] = [];
    let start = 0;
    let i = 0;
    const n = text.length;
    /** The first position whose walk reached the end of the text still able to go on. */
    let unstableFrom = n;
    let cutIndex = 0;
    let cutAt = 0;
    const next: number[] = this.#firstCharList?.map(() => -1) ?? [];
    while (i < n) {
      i = this.#nextCandidate(text, i, next);
      if (i >= n) break;
      let node = this.#trie;
      let match: AddedToken | undefined;
      let j = i;
      for (; j < n; j++) {
        const child = node.next.get(text.charCodeAt(j));
        if (child === undefined) break;
        node = child;
        if (node.token !== undefined) match = node.token;
      }
      // The walk reached the text's end where a longer token goes on: appended text may still change this match.
      if (j === n && node.next.size > 0 && unstableFrom === n) unstableFrom = i;
      if (match === undefined) {
        i++;
        continue;
      }
      if (i > start) pieces.push({ text: text.slice(start, i) });
      pieces.push({ text: match.content, token: match });
      i += match.content.length;
      start = i;
      if (unstableFrom === n && !match.rstrip) {
        cutIndex = pieces.length;
        cutAt = i;
      }
    }
    if (start < n) pieces.push({ text: text.slice(start) });
    // lstrip/rstrip: the whitespace next to such a token belongs to it.
    for (let k = 0; k < pieces.length; k++) {
      const token = pieces[k].token;
      if (token === undefined) continue;
      if (token.lstrip && k > 0 && pieces[k - 1].token === undefined) pieces[k - 1] = { text: pieces[k - 1].text.trimEnd() };
      if (token.rstrip && k + 1 < pieces.length && pieces[k + 1].token === undefined) pieces[k + 1] = { text: pieces[k + 1].text.trimStart() };
    }
    const out: Piece[] = [];
    let cut = 0;
    for (let k = 0; k < pieces.length; k++) {
      const p = pieces[k];
      if (p.token === undefined && p.text === '') continue;
      out.push(p.token !== undefined ? { id: p.token.id } : { text: p.text });
      if (k < cutIndex) cut = out.length;
    }
    return { pieces: out, cut, cutAt };
  }
}

/**
 * Whether encoding stretch by stretch gives the same ids as the whole text.
 * It does unless a pre-tokenizer treats the first stretch differently
 * (Metaspace with prepend_scheme "first", as in Llama 2 and Mistral folders):
 * those are encoded whole.
 */
export function segmentable(folder: Pick<TokenizerFolder, 'tokenizerJson'>): boolean {
  const seen = JSON.stringify(folder.tokenizerJson.pre_tokenizer ?? null);
  return !/"Metaspace"/.test(seen) || !/"prepend_scheme":"first"/.test(seen);
}

/** Ids per stretch of text, bounded in bytes, those not used lately dropped first (core/tokens/recent-cache.ts). */
export class SegmentCache {
  readonly #entries: RecentCache<Uint32Array>;
  hits = 0;
  misses = 0;

  constructor(readonly maxBytes: number) {
    this.#entries = new RecentCache(maxBytes);
  }

  get bytes(): number {
    return this.#entries.bytes;
  }

  has(text: string): boolean {
    return this.#entries.has(text);
  }

  get(text: string): Uint32Array | undefined {
    return this.#entries.get(text);
  }

  set(text: string, ids: Uint32Array): void {
    this.#entries.set(text, ids, SegmentCache.cost(text, ids));
  }

  static cost(text: string, ids: Uint32Array): number {
    return text.length * 2 + ids.byteLength + 64;
  }
}

/**
 * Encodes rendered text stretch by stretch through the cache; `encode` does one stretch with no special tokens added.
 * `head`: ids that go first (a remembered start of the prompt), written into the same array instead of joined after.
 */
export function encodeSegments(pieces: readonly Piece[], cache: SegmentCache, encode: (text: string) => readonly number[], head?: Uint32Array): Uint32Array {
  const parts: (Uint32Array | number)[] = [];
  let length = head?.length ?? 0;
  for (const piece of pieces) {
    if (piece.id !== undefined) {
      parts.push(piece.id);
      length++;
      continue;
    }
    let ids = cache.get(piece.text!);
    if (ids === undefined) {
      cache.misses++;
      ids = Uint32Array.from(encode(piece.text!));
      cache.set(piece.text!, ids);
    } else cache.hits++;
    parts.push(ids);
    length += ids.length;
  }
  const out = new Uint32Array(length);
  let at = 0;
  if (head !== undefined) {
    out.set(head, 0);
    at = head.length;
  }
  for (const part of parts) {
    if (typeof part === 'number') out[at++] = part;
    else {
      out.set(part, at);
      at += part.length;
    }
  }
  return out;
}

/** Characters of the pieces not in the cache yet: what encoding them will cost. */
export function coldChars(pieces: readonly Piece[], cache: SegmentCache): number {
  let n = 0;
  for (const piece of pieces) if (piece.text !== undefined && piece.id === undefined && !cache.has(piece.text)) n += piece.text.length;
  return n;
}
