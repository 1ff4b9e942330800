// "Where would this request go, and why?" for a request that is not sent:
// the same facts and decide() as the router, with no pick budget (a cold
// start must not change the answer). `switchyard explain` and the
// explorer's explain form both use it.
import type { Endpoint } from '../facts/request-schemas.ts';
import { requestFacts, type RequestFacts } from '../facts/request-facts.ts';
import { countRequestTokens } from '../tokens/request-path.ts';
import type { FleetView } from '../fleet/types.ts';
import type { Generation } from './generation.ts';
import { decide, type Decision } from './decide.ts';
import type { DecideEnv } from './env.ts';

export interface ExplainInput {
  readonly body: unknown;
  /** Header names in any case. */
  readonly headers: Readonly<Record<string, string>>;
  /** Inferred from the body when absent: messages → chat, prompt → completions, input → embeddings. */
  readonly endpoint?: Endpoint;
  readonly requestId?: string;
}

export function endpointOf(body: unknown): Endpoint {
  if (!body || typeof body !== 'object' || 'messages' in body) return 'chat';
  if ('prompt' in body) return 'completions';
  if ('input' in body) return 'embeddings';
  return 'chat';
}

export function explainRequest(input: ExplainInput, snapshot: Generation, fleet: FleetView, env: DecideEnv): Decision {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers)) headers[name.toLowerCase()] = value;
  const facts = requestFacts(
    { requestId: input.requestId ?? 'explain', endpoint: input.endpoint ?? endpointOf(input.body), headers, body: input.body },
    { estimator: snapshot.settings.estimator },
  );
  return decide(facts, snapshot, fleet, env, { pickBudgetMs: Infinity });
}

/** The request facts as `explain --json` shows them (docs/tokens.md): what the rules saw, and how the tokens were counted. */
export function factsJson(facts: RequestFacts, fallback?: string): Record<string, unknown> {
  return {
    endpoint: facts.endpoint,
    requestedModel: facts.requestedModel,
    promptTokens: facts.promptTokens,
    promptTokensSource: facts.promptTokensSource,
    ...(fallback ? { promptTokensFallback: fallback } : {}),
    maxTokens: facts.maxTokens ?? null,
    messageCount: facts.messageCount,
    hasCode: facts.hasCode,
    conversationId: facts.conversationId ?? null,
    priority: facts.priority ?? null,
    stream: facts.stream,
  };
}

/**
 * explainRequest, with the prompt counted by the model's tokenizer when it
 * has one (waiting for it to load: a one-shot tool has no budget to keep).
 */
export async function explainCounted(
  input: ExplainInput,
  snapshot: Generation,
  fleet: FleetView,
  env: DecideEnv,
): Promise<{ decision: Decision; facts?: Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers)) headers[name.toLowerCase()] = value;
  const estimated = requestFacts(
    { requestId: input.requestId ?? 'explain', endpoint: input.endpoint ?? endpointOf(input.body), headers, body: input.body },
    { estimator: snapshot.settings.estimator },
  );
  if ('code' in estimated) return { decision: decide(estimated, snapshot, fleet, env, { pickBudgetMs: Infinity }) };
  const counted = await countRequestTokens(estimated, input.body as Record<string, unknown>, snapshot, Infinity);
  return { decision: decide(counted.facts, snapshot, fleet, env, { pickBudgetMs: Infinity }), facts: factsJson(counted.facts, counted.fallback) };
}
