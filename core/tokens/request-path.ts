// The request path's one call into tokens: the process's tokenizer service
// (a folder) or engine client (`tokenizer: engine`), within the wait the
// settings give (tokenize_wait_ms, docs/tokens.md).
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';
import type { ReplicaSpec } from '../policy/compiled.ts';
import { countFacts, modelsServing, tokenizerFor, type CountedFacts } from './count.ts';
import { countWithEngine, engineTargets } from './engine-count.ts';
import { ENGINE_TOKENIZER } from './defaults.ts';
import { EngineTokenizer } from './engine-tokenizer.ts';
import { TokenizerService } from './service.ts';

/**
 * The facts counted in the engine's tokens where the model says how;
 * as they were otherwise. `budgetMs` defaults to the settings' wait for
 * the model (tokenizeWaitFor; Infinity for one-shot tools). `urlOf` reaches a replica (emulate://
 * replicas run on loopback ports); the replica's own url otherwise.
 */
export function countRequestTokens(
  facts: RequestFacts,
  body: Record<string, unknown>,
  snapshot: Generation,
  budgetMs?: number,
  urlOf: (replica: ReplicaSpec) => string = (replica) => replica.url,
): Promise<CountedFacts> | CountedFacts {
  const dir = tokenizerFor(snapshot, facts.requestedModel);
  if (dir === undefined || facts.promptTokensSource !== 'estimate') return { facts };
  budgetMs ??= tokenizeWaitFor(snapshot, facts.requestedModel);
  if (dir === ENGINE_TOKENIZER) return countWithEngine(facts, body, engineTargets(snapshot, facts.requestedModel, urlOf), EngineTokenizer.shared(), budgetMs);
  return countFacts(facts, body, dir, TokenizerService.shared(), budgetMs);
}

const waits = new WeakMap<Generation, Map<string, number>>();

/**
 * How long a request for `requested` waits for its count: settings'
 * kvTokenizeWaitMs where a replica of the model's pools publishes KV events
 * (a prompt without token ids matches nothing in the KV index), tokenizeWaitMs
 * elsewhere. Remembered per generation and model name (names of the policy's
 * models only: the caller has found the model's tokenizer).
 */
export function tokenizeWaitFor(snapshot: Generation, requested: string): number {
  const { tokenizeWaitMs, kvTokenizeWaitMs } = snapshot.settings;
  if (tokenizeWaitMs === kvTokenizeWaitMs) return tokenizeWaitMs;
  let perModel = waits.get(snapshot);
  if (!perModel) waits.set(snapshot, (perModel = new Map()));
  let wait = perModel.get(requested);
  if (wait === undefined) {
    const models = new Set(modelsServing(snapshot, requested));
    const publishing = snapshot.pools.some((pool) => models.has(pool.model) && pool.replicas.some((replica) => replica.kvEvents !== undefined));
    wait = publishing ? kvTokenizeWaitMs : tokenizeWaitMs;
    perModel.set(requested, wait);
  }
  return wait;
}
