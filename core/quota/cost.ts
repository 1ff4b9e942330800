// What a request costs against its tenant's token quota (docs/quotas.md):
// at admission, an estimate of the most it can use; once the engine has
// answered, what its `usage` says it used. The difference is settled into the
// same bucket (settle-usage.ts in core/serve).
//
// The estimate follows what the engine will do with the request, as vLLM
// reads it: every choice (`n`, and `best_of` sequences when larger) may
// generate up to the larger of `max_tokens` and `max_completion_tokens`
// (vLLM's chat endpoint reads the latter first, its completions endpoint only
// the former: the larger is right on both); without either, up to the
// context length left after the prompt. Embeddings and scoring generate nothing.
import type { QuotaCost } from '../decide/quota.ts';

export interface TokenWeights {
  readonly prompt: number;
  /** Prompt tokens the engine served from its prefix cache (usage.prompt_tokens_details.cached_tokens). */
  readonly cachedPrompt: number;
  readonly completion: number;
}

export const UNIT_WEIGHTS: TokenWeights = Object.freeze({ prompt: 1, cachedPrompt: 1, completion: 1 });

/** The estimate taken at admission, with the parts settlement compares against. */
export interface TokenCharge extends QuotaCost {
  /** Prompt tokens estimated (or counted exactly where a tokenizer is configured). */
  readonly promptTokens: number;
  /** The most the engine may generate for this request, all choices together. */
  readonly completionTokens: number;
  /** completionTokens is a hard bound (max_tokens or the context length), not default_max_tokens standing in. */
  readonly bounded: boolean;
  readonly weights: TokenWeights;
}

/** Endpoints whose requests generate no tokens. */
const NON_GENERATING: ReadonlySet<string> = new Set(['embeddings', 'rerank', 'score', 'pooling', 'classify', 'tokenize', 'detokenize']);

/** Most choices counted: a larger n is refused by any engine, and the product must stay a sane number. */
const MAX_CHOICES = 1_000_000;

export interface CostFacts {
  readonly endpoint: string;
  readonly promptTokens: number;
  /** The larger of max_tokens and max_completion_tokens; undefined when neither was sent. */
  readonly maxTokens?: number;
  /** max(n, best_of, 1). */
  readonly choices?: number;
}

/**
 * The admission estimate. `contextTokens`: the model's context length on the
 * pool (max_model_len), or an upper bound over pools before the pool is
 * known; undefined when no pool says, and `defaultMaxTokens` stands in.
 */
export function admissionCost(facts: CostFacts, weights: TokenWeights, contextTokens: number | undefined, defaultMaxTokens: number): TokenCharge {
  const prompt = Math.max(0, facts.promptTokens);
  let perChoice = 0;
  let bounded = true;
  if (!NON_GENERATING.has(facts.endpoint)) {
    bounded = facts.maxTokens !== undefined || contextTokens !== undefined;
    perChoice = facts.maxTokens ?? (contextTokens === undefined ? defaultMaxTokens : Math.max(0, contextTokens - prompt));
  }
  const completion = perChoice * Math.min(MAX_CHOICES, Math.max(1, facts.choices ?? 1));
  return {
    requests: 1,
    tokens: prompt * weights.prompt + completion * weights.completion,
    promptTokens: prompt,
    completionTokens: completion,
    bounded,
    weights,
  };
}

/** An engine's `usage`, checked. */
export interface Usage {
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly completionTokens: number;
}

export type UsageProblem = 'missing' | 'invalid' | 'absurd';

/** More tokens than this in one request is no engine's real count. */
export const MAX_USAGE_TOKENS = 10_000_000;

const count = (x: unknown): number | undefined => (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0 ? x : undefined);

/**
 * The usage object an engine sent, or why it cannot be trusted: missing,
 * invalid (not counts, negative, cached above prompt), absurd (beyond any
 * real request: more completion than the request may generate, a prompt far
 * beyond the estimate, or past MAX_USAGE_TOKENS).
 */
export function readUsage(raw: unknown, charge: TokenCharge, generates: boolean): Usage | UsageProblem {
  if (raw === undefined || raw === null) return 'missing';
  if (typeof raw !== 'object' || Array.isArray(raw)) return 'invalid';
  const u = raw as Record<string, unknown>;
  const prompt = count(u.prompt_tokens);
  const completion = u.completion_tokens === undefined && !generates ? 0 : count(u.completion_tokens);
  const details = u.prompt_tokens_details;
  let cached: number | undefined = 0;
  if (details !== undefined && details !== null) {
    const c = typeof details === 'object' ? (details as Record<string, unknown>).cached_tokens : NaN;
    cached = c === undefined || c === null ? 0 : count(c);
  }
  if (prompt === undefined || completion === undefined || cached === undefined || cached > prompt) return 'invalid';
  if (prompt > MAX_USAGE_TOKENS || completion > MAX_USAGE_TOKENS) return 'absurd';
  if (charge.bounded && completion > charge.completionTokens) return 'absurd';
  // Tokenizers differ from the estimate, but not by a factor of ten.
  if (prompt > 10 * charge.promptTokens + 1000) return 'absurd';
  return { promptTokens: prompt, cachedTokens: cached, completionTokens: completion };
}

/** What the usage costs, weighted. */
export function usageCost(usage: Usage, weights: TokenWeights): number {
  return (usage.promptTokens - usage.cachedTokens) * weights.prompt + usage.cachedTokens * weights.cachedPrompt + usage.completionTokens * weights.completion;
}

export function generates(endpoint: string): boolean {
  return !NON_GENERATING.has(endpoint);
}
