// What a request tells the router, from its headers and OpenAI body: the
// facts every decision starts from. Transport-agnostic: serve, explain and
// the simulator build them the same way.
import { Ajv, type ValidateFunction } from 'ajv';
import { apiKeyHeaderHash, bearerKeyHash } from './api-key.ts';
import { parsePriorityHeader } from './priority.ts';
import { rejection, type Rejection } from '../errors.ts';
import { contentsLookLikeCode, looksLikeCode } from './code.ts';
import { conversationFrom, DEFAULT_CONVERSATION_HEADERS } from './conversation.ts';
import { endpointPrompt } from './endpoint-prompts.ts';
import { renderChat, renderPrompt, type RenderedChat } from './prompt.ts';
import { chatEstimate } from './chat-estimate.ts';
import { BODY_SCHEMAS, type Endpoint } from './request-schemas.ts';
import { characterClassEstimator, isCharacterClassEstimator } from '../tokens/estimate.ts';
import { ESTIMATE_FULL_CHARS, sampledEstimate } from './sampled-estimate.ts';
import type { TokenEstimator } from './tokens.ts';

export interface RequestFacts {
  readonly requestId: string;
  readonly endpoint: Endpoint;
  readonly requestedModel: string;
  /** The rendered prompt: source of prefix hashes. */
  readonly promptText: string;
  readonly promptTokens: number;
  /** How promptTokens was obtained: counted by the model's tokenizer, by a replica (`tokenizer: engine`), or estimated (docs/tokens.md). */
  readonly promptTokensSource: PromptTokensSource;
  /**
   * The exact token ids the engine will see for this prompt (chat template
   * applied, BOS as the engine adds it); present only when a tokenizer counted them.
   */
  readonly promptTokenIds?: Uint32Array;
  /** As the client asked, the larger of max_tokens and max_completion_tokens; undefined when it didn't say. */
  readonly maxTokens?: number;
  /** Sequences the engine generates: the larger of n and best_of (1 when neither is sent). */
  readonly choices?: number;
  readonly messageCount: number;
  readonly hasCode: boolean;
  readonly conversationId?: string;
  /** From x-priority: an integer, or a name the policy maps to one (core/facts/priority.ts); the tenant's default applies when absent. */
  readonly priority?: number | string;
  /** From x-deadline-ms: how long the client will wait for the first token. */
  readonly deadlineMs?: number;
  /** sha256 of the bearer key, hex; undefined when no key was sent. */
  readonly apiKeyHash?: string;
  readonly stream: boolean;
}

export type PromptTokensSource = 'tokenizer' | 'engine' | 'estimate';

export interface RequestInput {
  readonly requestId: string;
  readonly endpoint: Endpoint;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: unknown;
  /**
   * The bearer key already hashed, read instead of the Authorization header:
   * recorded traffic and the simulator's workloads carry hashes, never keys.
   */
  readonly apiKeyHash?: string;
  /** The prompt's exact token count when the sender knows it (the simulator's workload), instead of the estimate. */
  readonly promptTokens?: number;
  /** The conversation when the body itself names it (a Responses API chain), if no header does. */
  readonly conversationId?: string;
}

export interface FactsOptions {
  readonly estimator?: TokenEstimator;
  /** The body was already checked against BODY_SCHEMAS (by fastify): skip the second check. */
  readonly bodyValidated?: boolean;
  /** Headers naming a conversation, first present wins (settings conversation_headers). */
  readonly conversationHeaders?: readonly string[];
}

const ajv = new Ajv({ allErrors: false, strict: false });
const validators = Object.fromEntries(Object.entries(BODY_SCHEMAS).map(([endpoint, schema]) => [endpoint, ajv.compile(schema)])) as Record<
  Endpoint,
  ValidateFunction
>;
const defaultEstimator = characterClassEstimator(4);

/** An hour: a client that will wait longer for its first token has no deadline worth routing on. */
export const MAX_DEADLINE_MS = 3_600_000;
export const MAX_CONVERSATION_ID_CHARS = 256;

/** A header value echoed in an error: short and printable. */
function quoted(value: string): string {
  return (value.length > 64 ? `${value.slice(0, 64)}…` : value).replace(/[^\x20-\x7e…]/g, '?');
}

export { sha256Hex } from './api-key.ts';

function header(headers: RequestInput['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The larger of two optional counts (non-integers are the schema's or the engine's to refuse: ignored here). */
function largerOf(a: unknown, b: unknown): number | undefined {
  const x = typeof a === 'number' && Number.isInteger(a) && a > 0 ? a : undefined;
  const y = typeof b === 'number' && Number.isInteger(b) && b > 0 ? b : undefined;
  return x === undefined ? y : y === undefined ? x : Math.max(x, y);
}

/** A prompt of token ids only (one list, or lists): the engine takes them as they are. */
function tokenIdPrompt(prompt: unknown): { ids?: Uint32Array; count: number } | undefined {
  if (!Array.isArray(prompt) || prompt.length === 0) return undefined;
  if (prompt.every((p) => typeof p === 'number')) {
    return { ids: prompt.every((p) => p >= 0 && p <= 0xffffffff) ? Uint32Array.from(prompt as number[]) : undefined, count: prompt.length };
  }
  if (!prompt.every((p) => Array.isArray(p) && p.every((x) => typeof x === 'number'))) return undefined;
  return { count: (prompt as number[][]).reduce((sum, p) => sum + p.length, 0) };
}

/** The prompt's estimate; a chat is summed by message, its long messages remembered (chat-estimate.ts, message-shares.ts). */
function estimatePrompt(text: string, chat: RenderedChat | undefined, estimator: TokenEstimator): number {
  if (chat !== undefined && text.length <= ESTIMATE_FULL_CHARS && isCharacterClassEstimator(estimator)) return chatEstimate(chat, estimator);
  return sampledEstimate(text, estimator, chat);
}

/** The facts, or the 400/401 a malformed request gets. Never throws on user input. */
export function requestFacts(input: RequestInput, options: FactsOptions = {}): RequestFacts | Rejection {
  const body = input.body as Record<string, unknown>;
  if (!options.bodyValidated) {
    const validate = validators[input.endpoint];
    if (!validate(body)) {
      const error = validate.errors![0];
      const field = error.instancePath
        ? error.instancePath.slice(1).replace(/\//g, '.')
        : ((error.params as { missingProperty?: string }).missingProperty ?? 'body');
      const message = error.keyword === 'required' ? `missing required field "${field}"` : `"${field}" ${error.message}`;
      return rejection('invalid_request', `Invalid request body: ${message}.`, { param: field });
    }
  }

  const authorization = input.apiKeyHash === undefined ? header(input.headers, 'authorization') : undefined;
  let apiKeyHash = input.apiKeyHash;
  if (authorization !== undefined && authorization !== '') {
    apiKeyHash = bearerKeyHash(authorization);
    if (apiKeyHash === undefined) return rejection('invalid_api_key', 'The Authorization header must be "Bearer <api key>".');
  } else if (input.apiKeyHash === undefined) {
    // Anthropic's clients send their key as x-api-key.
    const anthropicKey = header(input.headers, 'x-api-key');
    if (anthropicKey) apiKeyHash = apiKeyHeaderHash(anthropicKey);
  }

  const priorityHeader = header(input.headers, 'x-priority');
  const priority = priorityHeader === undefined ? undefined : parsePriorityHeader(priorityHeader);
  if (priorityHeader !== undefined && priority === undefined) {
    return rejection(
      'invalid_request',
      `x-priority must be an integer (e.g. 0, or -1 to be shed first) or a priority name such as "interactive" or "batch", not "${quoted(priorityHeader)}".`,
      { param: 'x-priority' },
    );
  }
  const deadlineHeader = header(input.headers, 'x-deadline-ms');
  let deadlineMs: number | undefined;
  if (deadlineHeader !== undefined) {
    // Plain decimal digits only: Number() would also take "0x10", " 5 " and "1e20".
    deadlineMs = /^[0-9]{1,10}$/.test(deadlineHeader) ? Number(deadlineHeader) : NaN;
    if (!(deadlineMs >= 1 && deadlineMs <= MAX_DEADLINE_MS)) {
      return rejection(
        'invalid_request',
        `x-deadline-ms must be a whole number of milliseconds from 1 to ${MAX_DEADLINE_MS}, not "${quoted(deadlineHeader)}".`,
        { param: 'x-deadline-ms' },
      );
    }
  }
  const conversation = conversationFrom(input.headers, options.conversationHeaders ?? DEFAULT_CONVERSATION_HEADERS);
  // Strategies keep conversation ids in their tables: a bounded key keeps those bounded.
  if (conversation !== undefined && conversation.value.length > MAX_CONVERSATION_ID_CHARS) {
    return rejection('invalid_request', `${conversation.header} must be at most ${MAX_CONVERSATION_ID_CHARS} characters.`, { param: conversation.header });
  }
  const conversationId = conversation?.value ?? input.conversationId;

  let promptText: string;
  let chat: RenderedChat | undefined;
  let messageCount = 1;
  let extraTokens = 0;
  let tokenIds: { ids?: Uint32Array; count: number } | undefined;
  let endpointMaxTokens: number | undefined;
  if (input.endpoint === 'chat' || (input.endpoint === 'embeddings' && Array.isArray(body.messages))) {
    const messages = body.messages as { role: string; content?: unknown }[];
    chat = renderChat(messages);
    promptText = chat.text;
    messageCount = messages.length;
  } else if (input.endpoint !== 'completions' && input.endpoint !== 'embeddings') {
    const prompt = endpointPrompt(input.endpoint, body);
    promptText = prompt.text;
    messageCount = prompt.messageCount;
    extraTokens = prompt.tokenIds ?? 0;
    endpointMaxTokens = prompt.maxTokens;
  } else {
    const rendered = renderPrompt(input.endpoint === 'completions' ? body.prompt : body.input);
    promptText = rendered.text;
    extraTokens = rendered.tokenIds ?? 0;
    tokenIds = tokenIdPrompt(input.endpoint === 'completions' ? body.prompt : body.input);
  }
  const estimator = options.estimator ?? defaultEstimator;
  // vLLM's chat endpoint reads max_completion_tokens first, its completions endpoint max_tokens only: the larger bounds both.
  const maxTokens = endpointMaxTokens ?? largerOf(body.max_tokens, body.max_completion_tokens);
  const choices = largerOf(body.n, body.best_of) ?? 1;

  return {
    requestId: input.requestId,
    endpoint: input.endpoint,
    requestedModel: body.model as string,
    promptText,
    promptTokens: input.promptTokens ?? tokenIds?.count ?? estimatePrompt(promptText, chat, estimator) + extraTokens,
    // A count the sender supplies (the simulator's workload) is the engine's own; token-id prompts are counted already.
    promptTokensSource: input.promptTokens !== undefined ? 'engine' : tokenIds ? 'tokenizer' : 'estimate',
    promptTokenIds: input.promptTokens === undefined ? tokenIds?.ids : undefined,
    maxTokens,
    choices,
    messageCount,
    // A chat's code marks are looked for in its messages' contents (code.ts), not in the rendered prompt's role headers.
    hasCode: input.endpoint === 'chat' ? contentsLookLikeCode(chat!.contents) : looksLikeCode(promptText),
    conversationId,
    priority,
    deadlineMs,
    apiKeyHash,
    stream: body.stream === true,
  };
}
