// The emulated engine's own tokenizer, as vLLM loads one: a Hugging Face
// folder (`tokenizer.json`, `tokenizer_config.json` with its chat template),
// read with @huggingface/tokenizers and rendered with @huggingface/jinja. It
// stands for the engine, so it shares nothing with the router's tokenizer:
// a router that matches it has matched what a real vLLM would see.
// As vLLM's OpenAI server does: a chat is rendered with the template
// (add_generation_prompt, tools, chat_template_kwargs; the template writes the
// BOS itself) and encoded without special tokens; a completion prompt is
// encoded with them (the BOS of Llama's post-processor).
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';

export interface ChatInput {
  readonly messages: readonly { role: string; content?: unknown; [key: string]: unknown }[];
  readonly tools?: unknown;
  readonly chatTemplateKwargs?: Record<string, unknown>;
  readonly addGenerationPrompt?: boolean;
  /** The final message left open for the model to continue (vLLM's continue_final_message). */
  readonly continueFinalMessage?: boolean;
}

type Config = Record<string, unknown>;

function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}

/** A message's content as the chat templates expect it: a string (vLLM joins text parts with newlines). */
function flatContent(content: unknown): unknown {
  if (!Array.isArray(content)) return content ?? '';
  return content
    .map((part) => (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : ''))
    .filter((text) => text !== '')
    .join('\n');
}

export class EngineTokenizer {
  private constructor(
    readonly dir: string,
    private readonly tokenizer: Tokenizer,
    private readonly template: Template | undefined,
    private readonly specials: { bos_token?: string; eos_token?: string; pad_token?: string; unk_token?: string },
  ) {}

  /** Loads `dir` (1–2 s and ~200 MiB for a 128k vocabulary): one per folder per process, shared. */
  static load(dir: string): Promise<EngineTokenizer> {
    const key = resolve(dir);
    let loading = loaded.get(key);
    if (!loading) {
      loading = EngineTokenizer.read(key);
      loaded.set(key, loading);
      loading.catch(() => loaded.delete(key));
    }
    return loading;
  }

  private static async read(dir: string): Promise<EngineTokenizer> {
    let json: unknown;
    let config: Config;
    try {
      json = JSON.parse(await readFile(join(dir, 'tokenizer.json'), 'utf8'));
      config = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8')) as Config;
    } catch (error) {
      throw new Error(
        `cannot read the tokenizer folder ${dir} (it needs tokenizer.json and tokenizer_config.json, as on the Hugging Face hub): ${(error as Error).message}`,
      );
    }
    const tokenizer = new Tokenizer(json as never, config as never);
    const source = typeof config.chat_template === 'string' ? config.chat_template : undefined;
    return new EngineTokenizer(dir, tokenizer, source === undefined ? undefined : new Template(source), {
      bos_token: tokenText(config.bos_token),
      eos_token: tokenText(config.eos_token),
      pad_token: tokenText(config.pad_token),
      unk_token: tokenText(config.unk_token),
    });
  }

  /** The chat as the template renders it. */
  renderChat(chat: ChatInput): string {
    if (!this.template) throw new Error(`the tokenizer in ${this.dir} has no chat_template: chat requests need one`);
    const messages = chat.messages.map((m) => ({ ...m, content: flatContent(m.content) }));
    const rendered = this.template.render({
      ...this.specials,
      ...(chat.chatTemplateKwargs ?? {}),
      messages,
      tools: chat.tools ?? undefined,
      add_generation_prompt: chat.continueFinalMessage ? false : (chat.addGenerationPrompt ?? true),
    });
    if (!chat.continueFinalMessage) return rendered;
    // As transformers' apply_chat_template does for vLLM: the rendering ends right after the final message's text.
    const final = String(messages[messages.length - 1]?.content ?? '').trim();
    const at = final === '' ? -1 : rendered.lastIndexOf(final);
    if (at < 0) throw new Error('continue_final_message: the final message is not in the rendered chat');
    return rendered.slice(0, at + final.length);
  }

  encodeChat(chat: ChatInput): number[] {
    return this.encode(this.renderChat(chat), false);
  }

  encode(text: string, addSpecialTokens = true): number[] {
    // An emulate:// replica runs in the router's process: a prompt sent again (benchmarks, retries) is not encoded again.
    const key = addSpecialTokens ? `1${text}` : `0${text}`;
    const cached = text.length <= MAX_CACHED_CHARS ? this.encoded.get(key) : undefined;
    if (cached) return cached;
    const ids = this.tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids;
    if (text.length <= MAX_CACHED_CHARS) {
      if (this.encoded.size >= MAX_CACHED) this.encoded.delete(this.encoded.keys().next().value!);
      this.encoded.set(key, ids);
    }
    return ids;
  }

  private readonly encoded = new Map<string, number[]>();

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode([...ids], { skip_special_tokens: false });
  }

  /** The id of a token's text, when the vocabulary has it. */
  idOf(token: string): number | undefined {
    const ids = this.encode(token, false);
    return ids.length === 1 ? ids[0] : undefined;
  }

  get eosToken(): string | undefined {
    return this.specials.eos_token;
  }
}

const loaded = new Map<string, Promise<EngineTokenizer>>();
/** Encodings kept per tokenizer, and the longest text kept: at most ~256 × 64k characters and their ids. */
const MAX_CACHED = 256;
const MAX_CACHED_CHARS = 65_536;
