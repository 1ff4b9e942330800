// Counting one request's prompt with one loaded tokenizer folder, as the
// engine would: chat → template rendered, encoded with no special tokens
// added (vLLM's chat path; templates write BOS themselves); completions and
// embeddings text → encoded with the special tokens the tokenizer's
// post-processor adds (BOS for Llama), as vLLM's add_special_tokens default
// does. Runs in the tokenizer worker (core/tokens/worker.ts).
import { renderChat, type ChatInput } from './chat-template.ts';
import type { TokenizerFolder } from './folder.ts';
import { IncrementalRenderer, type RenderLink } from './incremental-render.ts';
import { PieceEncoder } from './piece-encoder.ts';
import { AddedTokenSplitter, coldChars, encodeSegments, SegmentCache, segmentable, type Piece } from './segments.ts';

export type CountJob =
  | { readonly kind: 'chat'; readonly chat: ChatInput /** ms since the epoch: the template's strftime_now */; readonly now: number }
  | { readonly kind: 'texts'; readonly texts: readonly string[] };

/**
 * One prompt made ready to encode: the ids of a remembered start of it
 * (`head`), the pieces after that, and, for a chat rendered by links, where
 * to remember this rendering's ids for the conversation's next turn.
 */
export interface PromptPlan {
  readonly head?: Uint32Array;
  readonly pieces: readonly Piece[];
  readonly remember?: { readonly link: RenderLink; readonly cut: number; readonly tail: string };
}

/** A job made ready to encode: its prompts, and how much of it is not cached yet. */
export interface CountPlan {
  readonly prompts: readonly PromptPlan[];
  readonly coldChars: number;
  /** Too long to split within the wait: not ready to encode (plan again without a limit). */
  readonly unsplit?: boolean;
}

/**
 * Splitting at added tokens costs about a hundredth of encoding per character (a character class check against
 * 500 characters a millisecond encoded): a chat up to this many times the characters a wait can encode is split
 * to find what is cold, instead of being taken as cold whole.
 */
const SPLIT_PER_WAIT_CHAR = 16;

/** Bytes of remembered renderings (and their ids) per folder. */
const RENDER_CACHE_BYTES = 32 * 1024 * 1024;

export class FolderCounter {
  readonly cache: SegmentCache;
  readonly #folder: TokenizerFolder;
  readonly #splitter: AddedTokenSplitter;
  /** Stretches encoded piece by piece, each piece's ids cached (core/tokens/piece-encoder.ts). */
  readonly pieces: PieceEncoder;
  readonly #segmentable: boolean;
  /** What the post-processor puts around a text when special tokens are added; undefined when that is not a plain prefix/suffix. */
  readonly #wrap?: { readonly prefix: number[]; readonly suffix: number[] };
  /** The template rendered message by message, when its shape allows (core/tokens/template-loop.ts). */
  readonly renderer?: IncrementalRenderer;
  /** Why the template is rendered whole, when it is. */
  readonly wholeRender?: string;

  constructor(folder: TokenizerFolder, cacheBytes: number, renderBytes = RENDER_CACHE_BYTES) {
    this.#folder = folder;
    this.cache = new SegmentCache(cacheBytes);
    this.#splitter = new AddedTokenSplitter(folder);
    this.pieces = new PieceEncoder(folder.tokenizer, folder.tokenizerJson.model?.type);
    this.#segmentable = segmentable(folder);
    const bare = folder.tokenizer.encode('a', { add_special_tokens: false }).ids;
    const wrapped = folder.tokenizer.encode('a', { add_special_tokens: true }).ids;
    const at = wrapped.indexOf(bare[0]);
    if (bare.length === 1 && at >= 0) this.#wrap = { prefix: wrapped.slice(0, at), suffix: wrapped.slice(at + 1) };
    const renderer = this.#segmentable ? IncrementalRenderer.for(folder, renderBytes) : { whole: 'the tokenizer is encoded whole' };
    if (renderer instanceof IncrementalRenderer) this.renderer = renderer;
    else this.wholeRender = renderer.whole;
  }

  /**
   * `waitChars`: a chat whose text still to split (its new messages) is longer
   * than SPLIT_PER_WAIT_CHAR times that is not split: the plan says so in
   * `unsplit`, with that length as coldChars, and only a later plan (for
   * warming) splits it. Shorter text is split and only what the segment
   * cache lacks counts as cold: a new conversation over a document seen
   * before (a shared system prompt) encodes only its question.
   */
  plan(job: CountJob, waitChars = Infinity): CountPlan {
    const prompts: PromptPlan[] = [];
    if (job.kind === 'chat') {
      const chat = this.#planChat(job.chat, new Date(job.now), waitChars);
      if ('unsplit' in chat) return { prompts: [], coldChars: chat.unsplit, unsplit: true };
      prompts.push(chat);
    } else for (const text of job.texts) prompts.push({ pieces: this.#segmentable ? this.#splitter.split(text) : [{ text }] });
    return { prompts, coldChars: prompts.reduce((sum, prompt) => sum + coldChars(prompt.pieces, this.cache), 0) };
  }

  /**
   * A chat's pieces. Rendered by links where the template allows: from the
   * deepest link whose ids are remembered, only the text after its stable
   * cut and the new messages' outputs are split; otherwise rendered whole.
   */
  #planChat(chat: ChatInput, now: Date, waitChars: number): PromptPlan | { unsplit: number } {
    const rendered = this.renderer?.render(chat, now);
    if (rendered === undefined) {
      const text = renderChat(this.#folder, chat, now);
      return { pieces: this.#segmentable ? this.#splitter.split(text) : [{ text }] };
    }
    const { links, post } = rendered;
    let from = links.length - 1;
    while (from >= 0 && links[from].state === undefined) from--;
    const start = from >= 0 ? links[from].state! : { ids: new Uint32Array(0), tail: '' };
    let text = start.tail;
    for (let i = from + 1; i < links.length; i++) text += links[i].output;
    if (text.length > waitChars * SPLIT_PER_WAIT_CHAR) return { unsplit: text.length };
    const upToLast = this.#splitter.splitWithCut(text);
    const rest = this.#splitter.split(text.slice(upToLast.cutAt) + post);
    return {
      head: start.ids,
      pieces: [...upToLast.pieces.slice(0, upToLast.cut), ...rest],
      remember: { link: links[links.length - 1], cut: upToLast.cut, tail: text.slice(upToLast.cutAt) },
    };
  }

  /** Token ids per prompt. Chat prompts get no special tokens added; text prompts get the post-processor's. */
  encode(job: CountJob, plan: CountPlan): Uint32Array[] {
    if (plan.unsplit) plan = this.plan(job);
    const encode = (text: string) => this.pieces.encode(text);
    return plan.prompts.map(({ head, pieces, remember }, i) => {
      if (job.kind === 'chat') {
        if (!remember) return encodeSegments(pieces, this.cache, encode);
        const before = encodeSegments(pieces.slice(0, remember.cut), this.cache, encode, head);
        const after = encodeSegments(pieces.slice(remember.cut), this.cache, encode);
        this.renderer!.links.setState(remember.link, { ids: before, tail: remember.tail });
        return concat(before, after);
      }
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

function concat(a: Uint32Array | undefined, b: Uint32Array): Uint32Array {
  if (!a || a.length === 0) return b;
  const out = new Uint32Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
