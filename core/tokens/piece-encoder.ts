// A stretch of text (no added token in it) encoded as the tokenizer encodes
// it, with the ids of each pre-tokenized piece cached (docs/tokens.md,
// "Speed"). @huggingface/tokenizers encodes a stretch as: normalizer, then
// its pre-tokenizer, then the model on the pre-tokens, then ids. A Sequence
// pre-tokenizer applies its first step (Llama 3's and Qwen3's: a regex
// Split) to the text and each further step (ByteLevel) to each piece on its
// own, and a BPE model without fuse_unk encodes each pre-token on its own;
// so the ids of a stretch are the ids of each first-step piece, one after
// the other. A conversation's next turn is mostly words seen before: their
// ids come from here, and the library's byte mapping and BPE (with its own
// LRU, whose every hit re-inserts into a Map) run only for new pieces.
// Everything here calls the library's own objects; anything it cannot show
// to be element-wise is encoded by the library whole.
import type { Tokenizer } from '@huggingface/tokenizers';
import { RecentCache } from './recent-cache.ts';

/** Pieces longer than this are not cached (as the library's BPE cache skips them): a long one is rarely seen twice. */
const MAX_PIECE_CHARS = 256;
/** Bytes of cached piece ids per folder. */
export const PIECE_CACHE_BYTES = 8 * 1024 * 1024;

type PreTokenizer = {
  pre_tokenize(text: string | string[], options?: { section_index?: number }): string[];
  /** A Split pre-tokenizer's (0.2): its config and compiled pattern. */
  readonly config?: { readonly type?: unknown; readonly invert?: unknown; readonly behavior?: unknown };
  readonly pattern?: unknown;
};
interface Splitter {
  split(text: string): string[];
}
/** The parts of @huggingface/tokenizers' Tokenizer (0.2) this reads; its published types leave them out. */
interface TokenizerParts {
  readonly splitter_unnormalized: Splitter;
  readonly splitter_normalized: Splitter;
  readonly added_tokens_map: Map<string, { readonly id: number }>;
  readonly normalizer: ((text: string) => string) | null;
  readonly pre_tokenizer: (PreTokenizer & { readonly tokenizers?: (PreTokenizer | null)[] }) | null;
  readonly model: ((tokens: string[]) => string[]) & {
    readonly fuse_unk?: boolean;
    readonly tokens_to_ids: Map<string, number>;
    readonly unk_token_id?: number;
    readonly bpe?: unknown;
  };
  readonly post_processor: ((tokens: string[], pair: null, addSpecial: boolean) => { tokens: string[] }) | null;
  readonly remove_space?: boolean;
  readonly do_lowercase_and_remove_accent?: boolean;
}

export class PieceEncoder {
  readonly #tokenizer: Tokenizer;
  readonly #parts: TokenizerParts;
  /** The pre-tokenizer's first step and the steps applied to each of its pieces; undefined: encode whole. */
  readonly #first?: PreTokenizer;
  readonly #rest: readonly PreTokenizer[] = [];
  /** The first step's pattern, where it is a Split that isolates each match: its pieces are cut here (splitByPattern). */
  readonly #pattern?: RegExp;
  readonly cache = new RecentCache<readonly number[]>(PIECE_CACHE_BYTES);
  /** Why stretches are encoded whole by the library, when they are. */
  readonly whole?: string;
  /** Pieces found in the cache, and encoded by the library. */
  hits = 0;
  misses = 0;

  constructor(tokenizer: Tokenizer, modelType: unknown) {
    this.#tokenizer = tokenizer;
    const parts = tokenizer as unknown as TokenizerParts;
    this.#parts = parts;
    this.whole = PieceEncoder.#whyWhole(parts, modelType);
    if (this.whole !== undefined) return;
    const pre = parts.pre_tokenizer!;
    if (Array.isArray(pre.tokenizers) && pre.tokenizers.length > 0 && pre.tokenizers[0]) {
      this.#first = pre.tokenizers[0];
      this.#rest = pre.tokenizers.slice(1).filter((t): t is PreTokenizer => t !== null && t !== undefined);
    } else this.#first = pre;
    this.#pattern = isolatingPattern(this.#first);
  }

  static #whyWhole(parts: TokenizerParts, modelType: unknown): string | undefined {
    if (modelType !== 'BPE' || typeof parts.model?.bpe !== 'function') return 'the model is not BPE';
    if (parts.model.fuse_unk) return 'the model fuses unknown tokens across pieces';
    if (!parts.pre_tokenizer) return 'no pre-tokenizer';
    if (parts.remove_space === true || parts.do_lowercase_and_remove_accent === true) return 'the tokenizer rewrites whole sections';
    if (!parts.splitter_unnormalized || !parts.splitter_normalized || !(parts.added_tokens_map instanceof Map)) return 'an unknown tokenizer layout';
    if (parts.post_processor) {
      // Without special tokens added the post-processor must hand the tokens on as they are (ByteLevel, TemplateProcessing do).
      const probe = ['\uE000a', '\uE001b'];
      const out = parts.post_processor([...probe], null, false)?.tokens;
      if (!Array.isArray(out) || out.length !== 2 || out[0] !== probe[0] || out[1] !== probe[1])
        return 'the post-processor changes tokens without special tokens';
    }
    return undefined;
  }

  /** The ids the tokenizer gives `text` with no special tokens added: what `tokenizer.encode(text, { add_special_tokens: false }).ids` gives. */
  encode(text: string): readonly number[] {
    if (this.#first === undefined || text.length === 0) return this.#library(text);
    const parts = this.#parts;
    // As the library's encode_text, for a text that is one section: anything else (an added token in it) goes to the library.
    const sections = parts.splitter_unnormalized.split(text);
    if (sections.length !== 1 || parts.added_tokens_map.has(sections[0])) return this.#library(text);
    const processed = parts.normalizer !== null ? parts.normalizer(sections[0]) : sections[0];
    if (processed.length === 0) return [];
    const subsections = parts.splitter_normalized.split(processed);
    if (subsections.length !== 1 || parts.added_tokens_map.has(subsections[0])) return this.#library(text);
    const options = { section_index: 0 };
    const ids: number[] = [];
    const pieces = this.#pattern !== undefined ? splitByPattern(subsections[0], this.#pattern) : this.#first.pre_tokenize(subsections[0], options);
    for (const piece of pieces) {
      let pieceIds = this.cache.get(piece);
      if (pieceIds === undefined) {
        this.misses++;
        pieceIds = this.#encodePiece(piece, options);
        if (piece.length <= MAX_PIECE_CHARS) this.cache.set(piece, pieceIds, piece.length * 2 + pieceIds.length * 8 + 64);
      } else this.hits++;
      for (let i = 0; i < pieceIds.length; i++) ids.push(pieceIds[i]);
    }
    return ids;
  }

  /** One first-step piece: the further pre-tokenizer steps, the model, and ids as the library's encode maps tokens. */
  #encodePiece(piece: string, options: { section_index: number }): number[] {
    const parts = this.#parts;
    let tokens = [piece];
    for (const step of this.#rest) tokens = step.pre_tokenize(tokens, options);
    return parts.model(tokens).map((t) => parts.added_tokens_map.get(t)?.id ?? parts.model.tokens_to_ids.get(t) ?? (parts.model.unk_token_id as number));
  }

  #library(text: string): number[] {
    return this.#tokenizer.encode(text, { add_special_tokens: false }).ids;
  }
}

/**
 * A copy of a Split pre-tokenizer's pattern where the library splits with it as `regex_split` does (no `invert`, not
 * `removed`: every match and every stretch between matches is a piece), or undefined. The library's call goes through
 * `matchAll` (a clone of the pattern and an iterator per call) and copies the result with `flat()`; splitByPattern
 * gives the same pieces with one `exec` per piece (test/tokens/piece-encoder.test.ts holds them equal).
 */
function isolatingPattern(step: PreTokenizer): RegExp | undefined {
  const { config, pattern } = step;
  if (config?.type !== 'Split' || config.invert !== false || !(pattern instanceof RegExp) || !pattern.global) return undefined;
  if (typeof config.behavior === 'string' && config.behavior.toLowerCase() === 'removed') return undefined;
  return new RegExp(pattern.source, pattern.flags);
}

/** The library's `regex_split(text, pattern)`: the stretches between matches and the non-empty matches, in order. */
export function splitByPattern(text: string, pattern: RegExp): string[] {
  const pieces: string[] = [];
  const unicode = pattern.unicode || pattern.flags.includes('v');
  let prev = 0;
  pattern.lastIndex = 0;
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    const full = match[0];
    if (prev < match.index) pieces.push(text.slice(prev, match.index));
    if (full.length > 0) pieces.push(full);
    else pattern.lastIndex = advance(text, pattern.lastIndex, unicode); // as matchAll steps past an empty match
    prev = match.index + full.length;
  }
  if (prev < text.length) pieces.push(text.slice(prev));
  return pieces;
}

/** The spec's AdvanceStringIndex: one code unit, or a whole surrogate pair under the u and v flags. */
function advance(text: string, index: number, unicode: boolean): number {
  if (!unicode || index + 1 >= text.length) return index + 1;
  const lead = text.charCodeAt(index);
  if (lead < 0xd800 || lead > 0xdbff) return index + 1;
  const trail = text.charCodeAt(index + 1);
  return trail >= 0xdc00 && trail <= 0xdfff ? index + 2 : index + 1;
}
