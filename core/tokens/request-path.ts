// The request path's one call into tokens: the process's tokenizer service
// (a folder) or engine client (`tokenizer: engine`), within the wait the
// settings give (tokenize_wait_ms, docs/tokens.md).
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';
import type { ReplicaSpec } from '../policy/compiled.ts';
import { countFacts, tokenizerFor, type CountedFacts } from './count.ts';
import { countWithEngine, engineTargets } from './engine-count.ts';
import { ENGINE_TOKENIZER } from './defaults.ts';
import { EngineTokenizer } from './engine-tokenizer.ts';
import { TokenizerService } from './service.ts';

/**
 * The facts counted in the engine's tokens where the model says how;
 * as they were otherwise. `budgetMs` defaults to the settings' wait
 * (Infinity for one-shot tools). `urlOf` reaches a replica (emulate://
 * replicas run on loopback ports); the replica's own url otherwise.
 */
export function countRequestTokens(
  facts: RequestFacts,
  body: Record<string, unknown>,
  snapshot: Generation,
  budgetMs = snapshot.settings.tokenizeWaitMs,
  urlOf: (replica: ReplicaSpec) => string = (replica) => replica.url,
): Promise<CountedFacts> | CountedFacts {
  const dir = tokenizerFor(snapshot, facts.requestedModel);
  if (dir === undefined || facts.promptTokensSource !== 'estimate') return { facts };
  if (dir === ENGINE_TOKENIZER) return countWithEngine(facts, body, engineTargets(snapshot, facts.requestedModel, urlOf), EngineTokenizer.shared(), budgetMs);
  return countFacts(facts, body, dir, TokenizerService.shared(), budgetMs);
}
