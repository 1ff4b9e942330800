// What a request tells the router, from its headers and OpenAI body: the
// facts every decision starts from. Transport-agnostic: serve, explain and
// the simulator build them the same way.
import { createHash } from 'node:crypto';
import { Ajv, type ValidateFunction } from 'ajv';
import type { Priority } from '../../sdk/index.ts';
import { rejection, type Rejection } from '../errors.ts';
import { looksLikeCode } from './code.ts';
import { contentText, renderMessages, renderPrompt } from './prompt.ts';
import { BODY_SCHEMAS, type Endpoint } from './request-schemas.ts';
import { charsPerTokenEstimator, type TokenEstimator } from './tokens.ts';

export interface RequestFacts {
  readonly requestId: string;
  readonly endpoint: Endpoint;
  readonly requestedModel: string;
  /** The rendered prompt: source of prefix hashes. */
  readonly promptText: string;
  readonly promptTokens: number;
  /** As the client asked; undefined when it didn't say. */
  readonly maxTokens?: number;
  readonly messageCount: number;
  readonly hasCode: boolean;
  readonly conversationId?: string;
  /** From x-priority; the tenant's default applies when absent. */
  readonly priority?: Priority;
  /** From x-deadline-ms: how long the client will wait for the first token. */
  readonly deadlineMs?: number;
  /** sha256 of the bearer key, hex; undefined when no key was sent. */
  readonly apiKeyHash?: string;
  readonly stream: boolean;
}

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
}

export interface FactsOptions {
  readonly estimator?: TokenEstimator;
  /** The body was already checked against BODY_SCHEMAS (by fastify): skip the second check. */
  readonly bodyValidated?: boolean;
}

const ajv = new Ajv({ allErrors: false, strict: false });
const validators = Object.fromEntries(
  Object.entries(BODY_SCHEMAS).map(([endpoint, schema]) => [endpoint, ajv.compile(schema)]),
) as Record<Endpoint, ValidateFunction>;
const defaultEstimator = charsPerTokenEstimator(4);

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function header(headers: RequestInput['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The facts, or the 400/401 a malformed request gets. Never throws on user input. */
export function requestFacts(input: RequestInput, options: FactsOptions = {}): RequestFacts | Rejection {
  const body = input.body as Record<string, unknown>;
  if (!options.bodyValidated) {
    const validate = validators[input.endpoint];
    if (!validate(body)) {
      const error = validate.errors![0];
      const field = error.instancePath ? error.instancePath.slice(1).replace(/\//g, '.') : ((error.params as { missingProperty?: string }).missingProperty ?? 'body');
      const message = error.keyword === 'required' ? `missing required field "${field}"` : `"${field}" ${error.message}`;
      return rejection('invalid_request', `Invalid request body: ${message}.`, { param: field });
    }
  }

  const authorization = input.apiKeyHash === undefined ? header(input.headers, 'authorization') : undefined;
  let apiKeyHash = input.apiKeyHash;
  if (authorization !== undefined && authorization !== '') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match) return rejection('invalid_api_key', 'The Authorization header must be "Bearer <api key>".');
    apiKeyHash = sha256Hex(match[1]);
  }

  const priorityHeader = header(input.headers, 'x-priority');
  if (priorityHeader !== undefined && priorityHeader !== 'interactive' && priorityHeader !== 'batch') {
    return rejection('invalid_request', `x-priority must be "interactive" or "batch", not "${priorityHeader}".`, { param: 'x-priority' });
  }
  const deadlineHeader = header(input.headers, 'x-deadline-ms');
  let deadlineMs: number | undefined;
  if (deadlineHeader !== undefined) {
    deadlineMs = Number(deadlineHeader);
    if (!Number.isFinite(deadlineMs) || deadlineMs <= 0) {
      return rejection('invalid_request', `x-deadline-ms must be a positive number of milliseconds, not "${deadlineHeader}".`, { param: 'x-deadline-ms' });
    }
  }
  const conversationId = header(input.headers, 'x-conversation-id') || undefined;

  let promptText: string;
  let messageCount = 1;
  let extraTokens = 0;
  if (input.endpoint === 'chat') {
    const messages = body.messages as { role: string; content?: unknown }[];
    promptText = renderMessages(messages);
    messageCount = messages.length;
  } else {
    const rendered = renderPrompt(input.endpoint === 'completions' ? body.prompt : body.input);
    promptText = rendered.text;
    extraTokens = rendered.tokenIds ?? 0;
  }
  const estimator = options.estimator ?? defaultEstimator;
  const maxTokens = (body.max_completion_tokens ?? body.max_tokens ?? undefined) as number | undefined;
  const contents = input.endpoint === 'chat' ? (body.messages as { content?: unknown }[]).map((m) => contentText(m.content)).join('\n') : promptText;

  return {
    requestId: input.requestId,
    endpoint: input.endpoint,
    requestedModel: body.model as string,
    promptText,
    promptTokens: input.promptTokens ?? estimator.estimate(promptText) + extraTokens,
    maxTokens,
    messageCount,
    hasCode: looksLikeCode(contents),
    conversationId,
    priority: priorityHeader as Priority | undefined,
    deadlineMs,
    apiKeyHash,
    stream: body.stream === true,
  };
}

