// The one place that turns a request's facts into what a recording keeps,
// and back. What is kept: every fact that is a number, a boolean or a short
// string (tokens, tenant key hash, priority, model asked, conversation,
// deadline, ...), so facts added later flow in by themselves; never the
// prompt: not its text, not its token ids (they decode to the text), nothing
// long. The prompt's shape is kept as its prefix block keys: one 32-bit hash
// per full block of the rendered prompt, the values the router chains into
// prefix hashes (sdk/prefix.ts), so a replay routes prefixes exactly as the
// router did (docs/changing-policy.md, "What a recording holds").
import { hashRange } from '../../sdk/hashing.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import { BODY_SCHEMAS } from '../facts/request-schemas.ts';
import type { RouterSettings } from '../decide/generation.ts';

/** Facts never recorded, whatever their type. */
const NEVER_RECORDED: ReadonlySet<string> = new Set(['promptText', 'promptTokenIds']);
/** Longer strings are not recorded: a fact that long is text from the client, not a name. */
export const MAX_RECORDED_STRING = 256;

export type RecordedFacts = Readonly<Record<string, string | number | boolean>>;

/** The facts a recording keeps (see the file comment). */
export function recordedFacts(facts: RequestFacts): RecordedFacts {
  const out: Record<string, string | number | boolean> = {};
  for (const [name, value] of Object.entries(facts)) {
    if (NEVER_RECORDED.has(name) || /prompt(text|tokenids)/i.test(name)) continue;
    if (typeof value === 'number' ? Number.isFinite(value) : typeof value === 'boolean' || (typeof value === 'string' && value.length <= MAX_RECORDED_STRING)) {
      out[name] = value as string | number | boolean;
    }
  }
  return out;
}

/**
 * The prompt's block keys: block i's own hash (hashRange of its characters),
 * as sdk/prefix.ts hashes it before chaining: chainBlockHashes(keys, seed)
 * equals prefixHashes(prompt, seed). A trailing partial block is left out.
 */
export function promptBlockKeys(promptText: string, settings: Pick<RouterSettings, 'prefixBlockChars' | 'prefixMaxBlocks'>): number[] {
  const size = settings.prefixBlockChars;
  const blocks = Math.min(settings.prefixMaxBlocks, Math.floor(promptText.length / size));
  const keys = new Array<number>(blocks);
  for (let i = 0; i < blocks; i++) keys[i] = hashRange(promptText, i * size, (i + 1) * size) >>> 0;
  return keys;
}

/** Facts whose type decide() relies on: a recording is outside text and is checked before use. */
const TYPES: Record<string, 'string' | 'number' | 'boolean' | 'string|number'> = {
  requestId: 'string',
  endpoint: 'string',
  requestedModel: 'string',
  promptTokens: 'number',
  promptTokensSource: 'string',
  maxTokens: 'number',
  messageCount: 'number',
  hasCode: 'boolean',
  conversationId: 'string',
  priority: 'string|number',
  deadlineMs: 'number',
  apiKeyHash: 'string',
  stream: 'boolean',
};
const REQUIRED = ['requestId', 'endpoint', 'requestedModel', 'promptTokens', 'messageCount', 'hasCode', 'stream'];

/**
 * Request facts again from recorded ones, for decide(): the prompt text is
 * empty (rules on `prompt` see ""), its blocks come from the block keys.
 * Throws an Error saying what is wrong with a malformed record.
 */
export function replayedFacts(recorded: unknown): RequestFacts {
  if (typeof recorded !== 'object' || recorded === null || Array.isArray(recorded)) throw new Error('"facts" must be an object');
  const facts = recorded as Record<string, unknown>;
  for (const name of REQUIRED) if (facts[name] === undefined) throw new Error(`"facts.${name}" is missing`);
  for (const [name, value] of Object.entries(facts)) {
    const type = TYPES[name];
    if (type === undefined) {
      if (typeof value === 'object' && value !== null) throw new Error(`"facts.${name}" must be a number, a boolean or a string`);
      continue;
    }
    if (!type.split('|').includes(typeof value)) throw new Error(`"facts.${name}" must be a ${type.replace('|', ' or a ')}`);
    if (typeof value === 'string' && value.length > MAX_RECORDED_STRING) throw new Error(`"facts.${name}" is longer than ${MAX_RECORDED_STRING} characters`);
    // Priorities may be negative; counts and times may not.
    if (typeof value === 'number' && !(Number.isFinite(value) && (value >= 0 || name === 'priority')))
      throw new Error(`"facts.${name}" must be a finite number >= 0`);
  }
  if (!Object.hasOwn(BODY_SCHEMAS, facts.endpoint as string)) throw new Error(`"facts.endpoint" must be one of ${Object.keys(BODY_SCHEMAS).join(', ')}`);
  return { promptTokensSource: 'estimate', ...facts, promptText: '' } as unknown as RequestFacts;
}
