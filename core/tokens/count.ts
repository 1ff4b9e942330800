// Facts in tokens (docs/tokens.md): the estimate requestFacts made is
// replaced by the engine's own count when the requested model has a
// tokenizer folder. Which folder: the model's, an alias's model's, an
// adapter's base model's, or, for a cascade, the one folder all its models
// share (models with different tokenizers cannot be counted before the
// cascade picks one: those requests keep the estimate).
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Endpoint } from '../facts/request-schemas.ts';
import type { Generation } from '../decide/generation.ts';
import { chatInput, unsupportedChat } from './chat-template.ts';
import type { CountJob } from './counter.ts';
import type { EngineFallback } from './engine-tokenizer.ts';
import type { FallbackReason, TokenizerService } from './service.ts';

/** The tokenizer folder that counts requests for `requested`, if one does. */
export function tokenizerFor(snapshot: Generation, requested: string): string | undefined {
  const models = modelsServing(snapshot, requested);
  const folders = new Set(models.map((id) => snapshot.models.get(id)?.tokenizer));
  return folders.size === 1 ? [...folders][0] : undefined;
}

/** The models a request for `requested` may go to: the model, an alias's model, an adapter's base model, or a cascade's models. */
export function modelsServing(snapshot: Generation, requested: string): readonly string[] {
  const model = snapshot.models.get(requested) ?? snapshot.models.get(snapshot.aliases.get(requested)?.model ?? snapshot.adapters.get(requested) ?? '');
  if (model) return [model.id];
  return snapshot.aliases.get(requested)?.cascade?.models ?? [];
}

/** What the worker counts for this request, or why it can't be counted exactly. */
export function countJob(endpoint: Endpoint, body: Record<string, unknown>, now: number): CountJob | { unsupported: string } {
  if (endpoint === 'chat') {
    const why = unsupportedChat(body);
    return why ? { unsupported: why } : { kind: 'chat', chat: chatInput(body), now };
  }
  const prompt = endpoint === 'completions' ? body.prompt : body.input;
  if (typeof prompt === 'string') return { kind: 'texts', texts: [prompt] };
  if (Array.isArray(prompt) && prompt.every((p) => typeof p === 'string')) return { kind: 'texts', texts: prompt as string[] };
  return { unsupported: 'the prompt mixes text and token ids' };
}

export type FactsFallback = FallbackReason | EngineFallback | 'unsupported';

export interface CountedFacts {
  readonly facts: RequestFacts;
  /** Why the estimate stayed, when it did. */
  readonly fallback?: FactsFallback;
  readonly detail?: string;
}

/**
 * The facts with promptTokens counted by `dir`'s tokenizer, or as they were
 * (the estimate) with the reason. Waits at most `budgetMs`. Never throws.
 */
export async function countFacts(
  facts: RequestFacts,
  body: Record<string, unknown>,
  dir: string,
  service: TokenizerService,
  budgetMs: number,
  now = Date.now(),
): Promise<CountedFacts> {
  if (facts.promptTokensSource !== 'estimate') return { facts };
  const job = countJob(facts.endpoint, body, now);
  if ('unsupported' in job) return { facts, fallback: 'unsupported', detail: job.unsupported };
  const outcome = await service.count(dir, job, budgetMs);
  if (!outcome.ok) return { facts, fallback: outcome.reason, detail: outcome.detail };
  const total = outcome.ids.reduce((sum, ids) => sum + ids.length, 0);
  return {
    facts: { ...facts, promptTokens: total, promptTokenIds: outcome.ids.length === 1 ? outcome.ids[0] : undefined, promptTokensSource: 'tokenizer' },
  };
}
