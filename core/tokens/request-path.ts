// The request path's one call into tokens: the process's tokenizer service,
// the per-request budget (docs/tokens.md).
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';
import { countFacts, tokenizerFor, type CountedFacts } from './count.ts';
import { TokenizerService } from './service.ts';

/** How long a request waits for its prompt to be counted before it goes on with the estimate. */
export const TOKENIZE_BUDGET_MS = 20;

export function countRequestTokens(facts: RequestFacts, body: Record<string, unknown>, snapshot: Generation, budgetMs = TOKENIZE_BUDGET_MS): Promise<CountedFacts> | CountedFacts {
  const dir = tokenizerFor(snapshot, facts.requestedModel);
  if (dir === undefined || facts.promptTokensSource !== 'estimate') return { facts };
  return countFacts(facts, body, dir, TokenizerService.shared(), budgetMs);
}
