// A tokenizer folder in the Hugging Face layout: `tokenizer.json` (the
// vocabulary, for @huggingface/tokenizers) and `tokenizer_config.json` (the
// chat template and the special tokens the template reads), the same files
// the engine loads (docs/tokens.md). Loading is slow and big (~0.5–1.5 s,
// ~185 MiB resident for Llama 3 while loading): the router does it once per
// folder, off the event loop (core/tokens/service.ts). The check `validate` runs is cheap.
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { renderChat } from './chat-template.ts';

export interface TokenizerConfig {
  readonly chat_template?: unknown;
  readonly [key: string]: unknown;
}

/** What the chat template needs: the parsed template and the special tokens it reads. */
export interface ChatTemplateFolder {
  readonly template?: Template;
  /** bos_token, eos_token, unk_token, pad_token as strings: what transformers passes a template. */
  readonly specialTokens: Readonly<Record<string, string>>;
}

export interface TokenizerFolder extends ChatTemplateFolder {
  readonly dir: string;
  readonly tokenizer: Tokenizer;
  readonly tokenizerJson: { readonly added_tokens?: readonly AddedTokenJson[]; readonly pre_tokenizer?: unknown; readonly model?: { readonly type?: unknown } };
}

export interface AddedTokenJson {
  readonly id: number;
  readonly content: string;
  readonly lstrip?: boolean;
  readonly rstrip?: boolean;
  readonly normalized?: boolean;
  readonly special?: boolean;
}

/**
 * Where `tokenizer: VALUE` in a models file points: a path relative to the
 * file (as plugin_dirs are to theirs) or absolute; or, when no such folder
 * exists and VALUE names an installed package (`@scope/name/subdir`), that
 * package's folder, so a copied policy directory keeps working.
 */
export function tokenizerDir(value: string, policyFile: string): string {
  const local = resolve(dirname(policyFile), value);
  if (existsSync(local) || value.startsWith('.') || isAbsolute(value)) return local;
  const parts = value.split('/');
  const name = parts.slice(0, value.startsWith('@') ? 2 : 1);
  // Node's own lookup: node_modules of this module's folder and every folder above.
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const found = join(dir, 'node_modules', ...name);
    if (existsSync(found)) return join(found, ...parts.slice(name.length));
    if (dirname(dir) === dir) return local;
  }
}

const SPECIAL_TOKEN_NAMES = ['bos_token', 'eos_token', 'unk_token', 'pad_token'];

/** A special token in tokenizer_config.json: a string, or {content: string} in older files. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}

/** The chat template of a config: a string, or the "default" of a list of named templates. */
export function chatTemplateText(config: TokenizerConfig): string | undefined {
  const t = config.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t.find((x) => x && typeof x === 'object' && (x as { name?: unknown }).name === 'default') ?? t[0];
    const text = named && typeof named === 'object' ? (named as { template?: unknown }).template : undefined;
    return typeof text === 'string' ? text : undefined;
  }
  return undefined;
}

function readConfig(dir: string): TokenizerConfig {
  const file = join(dir, 'tokenizer_config.json');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(
      `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): the folder must hold the model's tokenizer_config.json, as downloaded from Hugging Face`,
    );
  }
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new Error(`${file} is not JSON (${(error as Error).message}): download it again`);
  }
  if (!config || typeof config !== 'object' || Array.isArray(config)) throw new Error(`${file} must be a JSON object`);
  return config as TokenizerConfig;
}

function chatTemplateFolder(dir: string, config: TokenizerConfig): ChatTemplateFolder {
  const specialTokens: Record<string, string> = {};
  for (const name of SPECIAL_TOKEN_NAMES) {
    const text = tokenText(config[name]);
    if (text !== undefined) specialTokens[name] = text;
  }
  const text = chatTemplateText(config);
  let template: Template | undefined;
  if (text !== undefined) {
    try {
      template = new Template(text);
    } catch (error) {
      throw new Error(`the chat_template of ${join(dir, 'tokenizer_config.json')} does not parse: ${(error as Error).message}`);
    }
  }
  return { template, specialTokens };
}

/** A probe chat every chat template must render: what `validate` tries. */
export const PROBE_CHAT = {
  messages: [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: 'Where is the capital of China?' },
  ],
  add_generation_prompt: true,
};

/**
 * The cheap check of a folder, for `validate` and every reload: both files
 * are there and readable, the config parses, and its chat template renders
 * the probe chat. Returns what is wrong, or undefined. Reads only the first
 * bytes of tokenizer.json (it is megabytes); the full load reports the rest.
 */
export function checkTokenizerFolder(dir: string): string | undefined {
  try {
    if (!statSync(dir).isDirectory()) return `${dir} is not a folder: name the folder that holds tokenizer.json and tokenizer_config.json`;
  } catch {
    return `the tokenizer folder ${dir} does not exist: name the folder that holds the model's tokenizer.json and tokenizer_config.json, or remove the line to estimate`;
  }
  const vocab = join(dir, 'tokenizer.json');
  try {
    const fd = openSync(vocab, 'r');
    const head = Buffer.alloc(64);
    const n = readSync(fd, head, 0, 64, 0);
    closeSync(fd);
    if (!head.subarray(0, n).toString('utf8').trimStart().startsWith('{'))
      return `${vocab} is not a tokenizer.json (it does not start with "{"): download it again`;
  } catch (error) {
    return `cannot read ${vocab} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): the folder must hold the model's tokenizer.json`;
  }
  try {
    const folder = chatTemplateFolder(dir, readConfig(dir));
    if (folder.template) renderChat(folder, PROBE_CHAT, new Date(0));
  } catch (error) {
    const message = (error as Error).message;
    return message.includes(dir)
      ? message
      : `the chat template in ${join(dir, 'tokenizer_config.json')} fails on a probe chat (system + user message): ${message}`;
  }
  return undefined;
}

/**
 * Loads a folder: the tokenizer, the chat template and its special tokens.
 * Synchronous and slow: call it in the tokenizer worker (the router) or in a
 * one-shot tool. Throws an Error that says what to fix.
 */
export function loadTokenizerFolder(dir: string): TokenizerFolder {
  const config = readConfig(dir);
  const file = join(dir, 'tokenizer.json');
  let tokenizerJson: TokenizerFolder['tokenizerJson'];
  try {
    tokenizerJson = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`cannot load ${file}: ${(error as Error).message}`);
  }
  let tokenizer: Tokenizer;
  try {
    tokenizer = new Tokenizer(tokenizerJson, config);
  } catch (error) {
    throw new Error(`@huggingface/tokenizers cannot load ${file}: ${(error as Error).message}`);
  }
  dropSources(tokenizer);
  const { added_tokens, pre_tokenizer, model } = tokenizerJson;
  return { dir, tokenizer, tokenizerJson: { added_tokens, pre_tokenizer, model: { type: model?.type } }, ...chatTemplateFolder(dir, config) };
}

/**
 * What @huggingface/tokenizers (0.2) keeps of tokenizer.json once it has built its maps, and reads only while building
 * them: the parsed file itself, the model's vocabulary object and merge list (its maps hold them), and the BPE merge
 * pairs (bpe_ranks holds them). About a third of a loaded Llama 3 tokenizer's heap (docs/tokens.md, "Speed").
 */
function dropSources(tokenizer: Tokenizer): void {
  const parts = tokenizer as unknown as { tokenizer?: unknown; model?: { config?: Record<string, unknown>; merges?: unknown } };
  parts.tokenizer = undefined;
  if (parts.model?.config) parts.model.config = { ...parts.model.config, vocab: undefined, merges: undefined };
  if (parts.model && 'merges' in parts.model) parts.model.merges = undefined;
}
