// `tokenizer: engine` (docs/tokens.md): a replica of the model's pools counts
// the prompt, through vLLM's POST /tokenize: a chat as `messages` (with
// add_generation_prompt, continue_final_message, tools and
// chat_template_kwargs, as vLLM's TokenizeChatRequest takes them), a
// completion prompt as `prompt`. The engine renders its own chat template,
// so the router needs no tokenizer files, at the price of a round trip.
//
// Bounded everywhere: one call waits at most ENGINE_TIMEOUT_MS, answers are
// read incrementally up to a size fitted to the prompt, at most MAX_IN_FLIGHT
// calls run at once, and a replica that failed is left alone for a while.
// Answers are cached per prompt (the engine renders the template, so the
// router cannot split a prompt into segments the engine would tokenize
// alike); identical prompts in flight share one call. Never throws: every
// failure is a reason to use the estimate.
import { createHash } from 'node:crypto';
import { request } from 'undici';
import type { ChatInput } from './chat-template.ts';
import { TokenizeResponseError, TokenizeResponseReader } from './tokenize-response.ts';

export type EngineFallback = 'no_replica' | 'timeout' | 'busy' | 'engine_error' | 'bad_answer' | 'too_long';
export type EngineOutcome =
  | { readonly ok: true; readonly ids: Uint32Array }
  | { readonly ok: false; readonly reason: EngineFallback; readonly detail?: string };

/** A replica that can be asked: where it is reached and the key it wants (api_key_env). */
export interface TokenizeTarget {
  readonly id: string;
  readonly url: string;
  readonly apiKey?: string;
}

export type EngineTokenizeJob = { readonly kind: 'chat'; readonly chat: ChatInput } | { readonly kind: 'text'; readonly text: string };

export interface EngineTokenizerOptions {
  /** One call's hard limit, past the request's wait (its answer still fills the cache). Default 2 s. */
  readonly timeoutMs?: number;
  /** Calls at once; more are answered with the estimate. Default 64. */
  readonly maxInFlight?: number;
  /** Bytes of cached ids. Default 32 MiB. */
  readonly cacheBytes?: number;
  /** A replica that failed is not asked again for this long. Default 10 s. */
  readonly cooldownMs?: number;
  /** Prompts (as the /tokenize body) longer than this are estimated without asking. Default 4 MB. */
  readonly maxPromptChars?: number;
  readonly now?: () => number;
}

/** Token ids per character of prompt, at the most, plus the template's own: bounds an answer. */
const MAX_IDS_PER_CHAR = 1;
const TEMPLATE_ALLOWANCE_IDS = 8192;
/** An id is at most 10 digits and a comma; JSON around it. */
const BYTES_PER_ID = 11;

interface CacheEntry {
  readonly ids: Uint32Array;
}

export class EngineTokenizer {
  static #shared?: EngineTokenizer;
  /** The process's one client: every snapshot and reload shares its cache. */
  static shared(): EngineTokenizer {
    return (EngineTokenizer.#shared ??= new EngineTokenizer());
  }

  readonly #options: Required<EngineTokenizerOptions>;
  readonly #cache = new Map<string, CacheEntry>();
  #cacheBytes = 0;
  readonly #inFlight = new Map<string, Promise<EngineOutcome>>();
  readonly #cooling = new Map<string, number>();
  #turn = 0;

  constructor(options: EngineTokenizerOptions = {}) {
    this.#options = {
      timeoutMs: 2000,
      maxInFlight: 64,
      cacheBytes: 32 * 1024 * 1024,
      cooldownMs: 10_000,
      maxPromptChars: 4_000_000,
      now: Date.now,
      ...options,
    };
  }

  /** Calls running now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /**
   * The prompt's ids as one of `targets` counts them, or why not. Waits at
   * most `waitMs`; the call itself may run on to ENGINE_TIMEOUT_MS and then
   * serves the same prompt from the cache.
   */
  count(targets: readonly TokenizeTarget[], job: EngineTokenizeJob, waitMs: number): Promise<EngineOutcome> | EngineOutcome {
    if (job.kind === 'text' && job.text.length > this.#options.maxPromptChars) return { ok: false, reason: 'too_long' };
    const body = JSON.stringify(tokenizeBody(job));
    // The body's length bounds the prompt's characters, and so the answer's size.
    const chars = body.length;
    if (chars > this.#options.maxPromptChars) return { ok: false, reason: 'too_long' };
    const key = createHash('sha256').update(body).digest('base64');
    const cached = this.#cache.get(key);
    if (cached) {
      // Most recently used last: Map order is the eviction order.
      this.#cache.delete(key);
      this.#cache.set(key, cached);
      return { ok: true, ids: cached.ids };
    }
    let call = this.#inFlight.get(key);
    if (!call) {
      const target = this.#pick(targets);
      if (!target) return { ok: false, reason: 'no_replica', detail: 'no replica of the model can be asked (none, or all failed in the last seconds)' };
      if (this.#inFlight.size >= this.#options.maxInFlight) return { ok: false, reason: 'busy' };
      call = this.#ask(target, body, chars).then((outcome) => {
        this.#inFlight.delete(key);
        if (outcome.ok) this.#remember(key, outcome.ids);
        else if (outcome.reason !== 'too_long') this.#cooling.set(target.id, this.#options.now() + this.#options.cooldownMs);
        return outcome;
      });
      this.#inFlight.set(key, call);
    }
    if (waitMs === Infinity) return call;
    if (waitMs <= 0) return { ok: false, reason: 'timeout' };
    return new Promise<EngineOutcome>((resolve) => {
      const timer = setTimeout(() => resolve({ ok: false, reason: 'timeout' }), waitMs);
      void call.then((outcome) => {
        clearTimeout(timer);
        resolve(outcome);
      });
    });
  }

  /** The next replica in turn that has not failed lately. */
  #pick(targets: readonly TokenizeTarget[]): TokenizeTarget | undefined {
    const now = this.#options.now();
    for (let i = 0; i < targets.length; i++) {
      const target = targets[(this.#turn + i) % targets.length];
      const until = this.#cooling.get(target.id);
      if (until !== undefined && until > now) continue;
      this.#cooling.delete(target.id);
      this.#turn = (this.#turn + i + 1) % targets.length;
      return target;
    }
    return undefined;
  }

  async #ask(target: TokenizeTarget, body: string, chars: number): Promise<EngineOutcome> {
    const maxIds = chars * MAX_IDS_PER_CHAR + TEMPLATE_ALLOWANCE_IDS;
    const maxBytes = maxIds * BYTES_PER_ID + 4096;
    const signal = AbortSignal.timeout(this.#options.timeoutMs);
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (target.apiKey) headers.authorization = `Bearer ${target.apiKey}`;
      const response = await request(`${target.url.replace(/\/+$/, '')}/tokenize`, { method: 'POST', headers, body, signal });
      if (response.statusCode !== 200) {
        const text = (await readBounded(response.body, 2048)).replace(/\s+/g, ' ').slice(0, 200);
        return { ok: false, reason: 'engine_error', detail: `${target.id} answered ${response.statusCode} to POST /tokenize: ${text}` };
      }
      const reader = new TokenizeResponseReader(maxIds);
      let bytes = 0;
      const decoder = new TextDecoder();
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > maxBytes) {
          response.body.destroy();
          return { ok: false, reason: 'bad_answer', detail: `${target.id}'s /tokenize answer is over ${maxBytes} bytes for a ${chars}-character prompt` };
        }
        reader.push(decoder.decode(chunk, { stream: true }));
      }
      reader.push(decoder.decode());
      return { ok: true, ids: reader.end() };
    } catch (error) {
      if (signal.aborted) return { ok: false, reason: 'timeout', detail: `${target.id} did not answer POST /tokenize within ${this.#options.timeoutMs} ms` };
      if (error instanceof TokenizeResponseError) return { ok: false, reason: 'bad_answer', detail: `${target.id}: ${error.message}` };
      return { ok: false, reason: 'engine_error', detail: `${target.id}: POST /tokenize failed: ${(error as Error).message}` };
    }
  }

  #remember(key: string, ids: Uint32Array): void {
    const bytes = ids.byteLength + 128;
    if (bytes > this.#options.cacheBytes / 4) return;
    this.#cache.set(key, { ids });
    this.#cacheBytes += bytes;
    for (const [old, entry] of this.#cache) {
      if (this.#cacheBytes <= this.#options.cacheBytes) break;
      this.#cache.delete(old);
      this.#cacheBytes -= entry.ids.byteLength + 128;
    }
  }
}

/** vLLM's TokenizeChatRequest / TokenizeCompletionRequest. No `model`: the engine's own (it may serve it under another name). */
export function tokenizeBody(job: EngineTokenizeJob): Record<string, unknown> {
  if (job.kind === 'text') return { prompt: job.text, add_special_tokens: true };
  const { chat } = job;
  const body: Record<string, unknown> = {
    messages: chat.messages,
    add_generation_prompt: chat.add_generation_prompt ?? true,
    continue_final_message: chat.continue_final_message ?? false,
    add_special_tokens: false,
  };
  if (chat.tools !== undefined) body.tools = chat.tools;
  if (chat.chat_template_kwargs !== undefined) body.chat_template_kwargs = chat.chat_template_kwargs;
  return body;
}

async function readBounded(body: AsyncIterable<Buffer> & { destroy(): void }, max: number): Promise<string> {
  let text = '';
  for await (const chunk of body) {
    text += chunk.toString('utf8');
    if (text.length >= max) {
      body.destroy();
      break;
    }
  }
  return text.slice(0, max);
}
