// Counting one request's prompt with one loaded tokenizer folder, as the
// engine would: chat → template rendered, encoded with no special tokens
// added (vLLM's chat path; templates write BOS themselves); completions and
// embeddings text → encoded with the special tokens the tokenizer's
// post-processor adds (BOS for Llama), as vLLM's add_special_tokens default
// does. Runs in the tokenizer worker (core/tokens/worker.ts).
import { renderChat, type ChatInput } from './chat-template.ts';
import type { TokenizerFolder } from './folder.ts';
import { AddedTokenSplitter, coldChars, encodeSegments, SegmentCache, segmentable, type Piece } from './segments.ts';

export type CountJob =
  | { readonly kind: 'chat'; readonly chat: ChatInput /** ms since the epoch: the template's strftime_now */; readonly now: number }
  | { readonly kind: 'texts'; readonly texts: readonly string[] };

/** A job made ready to encode: its pieces per prompt, and how much of it is not cached yet. */
export interface CountPlan {
  readonly prompts: readonly (readonly Piece[])[];
  readonly coldChars: number;
}

export class FolderCounter {
  readonly cache: SegmentCache;
  readonly #folder: TokenizerFolder;
  readonly #splitter: AddedTokenSplitter;
  readonly #segmentable: boolean;
  /** What the post-processor puts around a text when special tokens are added; undefined when that is not a plain prefix/suffix. */
  readonly #wrap?: { readonly prefix: number[]; readonly suffix: number[] };

  constructor(folder: TokenizerFolder, cacheBytes: number) {
    this.#folder = folder;
    this.cache = new SegmentCache(cacheBytes);
    this.#splitter = new AddedTokenSplitter(folder);
    this.#segmentable = segmentable(folder);
    const bare = folder.tokenizer.encode('a', { add_special_tokens: false }).ids;
    const wrapped = folder.tokenizer.encode('a', { add_special_tokens: true }).ids;
    const at = wrapped.indexOf(bare[0]);
    if (bare.length === 1 && at >= 0) this.#wrap = { prefix: wrapped.slice(0, at), suffix: wrapped.slice(at + 1) };
  }

  plan(job: CountJob): CountPlan {
    const texts = job.kind === 'chat' ? [renderChat(this.#folder, job.chat, new Date(job.now))] : job.texts;
    const prompts = texts.map((text) => (this.#segmentable ? this.#splitter.split(text) : [{ text }]));
    return { prompts, coldChars: prompts.reduce((sum, pieces) => sum + coldChars(pieces, this.cache), 0) };
  }

  /** Token ids per prompt. Chat prompts get no special tokens added; text prompts get the post-processor's. */
  encode(job: CountJob, plan: CountPlan): Uint32Array[] {
    const encode = (text: string) => this.#folder.tokenizer.encode(text, { add_special_tokens: false }).ids;
    return plan.prompts.map((pieces, i) => {
      if (job.kind === 'chat') return encodeSegments(pieces, this.cache, encode);
      if (!this.#wrap) return Uint32Array.from(this.#folder.tokenizer.encode(job.texts[i], { add_special_tokens: true }).ids);
      const body = encodeSegments(pieces, this.cache, encode);
      const { prefix, suffix } = this.#wrap;
      if (prefix.length === 0 && suffix.length === 0) return body;
      const out = new Uint32Array(prefix.length + body.length + suffix.length);
      out.set(prefix, 0);
      out.set(body, prefix.length);
      out.set(suffix, prefix.length + body.length);
      return out;
    });
  }
}
