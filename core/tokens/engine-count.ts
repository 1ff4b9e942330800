// Counting a request's prompt with `tokenizer: engine` (docs/tokens.md): the
// replicas of the requested model's pools are asked in turn through vLLM's
// POST /tokenize (core/tokens/engine-tokenizer.ts); the facts then carry the
// engine's count and ids, source "engine". Anything else keeps the estimate,
// with the reason, counted by the caller.
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';
import { versionKey, type ReplicaSpec } from '../policy/compiled.ts';
import { chatInput, unsupportedChat } from './chat-template.ts';
import type { CountedFacts } from './count.ts';
import type { EngineTokenizeJob, EngineTokenizer, TokenizeTarget } from './engine-tokenizer.ts';

/** The replicas that can count prompts for `requested`: every undrained replica of its model's pools, once each. */
export function engineTargets(snapshot: Generation, requested: string, urlOf: (replica: ReplicaSpec) => string): TokenizeTarget[] {
  const modelId = snapshot.models.has(requested) ? requested : (snapshot.aliases.get(requested)?.model ?? snapshot.adapters.get(requested));
  const model = modelId === undefined ? undefined : snapshot.models.get(modelId);
  if (!model) return [];
  const targets = new Map<string, TokenizeTarget>();
  for (const version of model.versions) {
    for (const pool of snapshot.poolsByVersion.get(versionKey(model.id, version.version)) ?? []) {
      for (const replica of pool.replicas) {
        if (replica.draining || targets.has(replica.id)) continue;
        let url: string;
        try {
          url = urlOf(replica);
        } catch {
          continue; // an emulated replica still starting
        }
        targets.set(replica.id, { id: replica.id, url, apiKey: replica.apiKey });
      }
    }
  }
  return [...targets.values()];
}

/** What the engine is asked to count, or why it can't be asked. */
function engineJob(facts: RequestFacts, body: Record<string, unknown>): EngineTokenizeJob | { unsupported: string } {
  if (facts.endpoint === 'chat') {
    const why = unsupportedChat(body);
    if (why) return { unsupported: why };
    // vLLM's /tokenize takes no documents: its count would not be the chat's.
    if (body.documents !== undefined && body.documents !== null) return { unsupported: 'the chat carries documents, which /tokenize does not take' };
    return { kind: 'chat', chat: chatInput(body) };
  }
  if (facts.endpoint === 'completions' && typeof body.prompt === 'string') return { kind: 'text', text: body.prompt };
  return { unsupported: facts.endpoint === 'completions' ? 'the prompt is not one string' : `the ${facts.endpoint} endpoint is not counted by the engine` };
}

export async function countWithEngine(
  facts: RequestFacts,
  body: Record<string, unknown>,
  targets: readonly TokenizeTarget[],
  client: EngineTokenizer,
  waitMs: number,
): Promise<CountedFacts> {
  if (facts.promptTokensSource !== 'estimate') return { facts };
  const job = engineJob(facts, body);
  if ('unsupported' in job) return { facts, fallback: 'unsupported', detail: job.unsupported };
  const outcome = await client.count(targets, job, waitMs);
  if (!outcome.ok) return { facts, fallback: outcome.reason, detail: outcome.detail };
  return { facts: { ...facts, promptTokens: outcome.ids.length, promptTokenIds: outcome.ids, promptTokensSource: 'engine' } };
}
