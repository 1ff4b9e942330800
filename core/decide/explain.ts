// "Where would this request go, and why?" for a request that is not sent:
// the same facts and decide() as the router, with no pick budget (a cold
// start must not change the answer). `switchyard explain` and the
// explorer's explain form both use it.
import type { Endpoint } from '../facts/request-schemas.ts';
import { requestFacts } from '../facts/request-facts.ts';
import type { FleetView } from '../fleet/types.ts';
import type { Snapshot } from '../policy/snapshot.ts';
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

export function explainRequest(input: ExplainInput, snapshot: Snapshot, fleet: FleetView, env: DecideEnv): Decision {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers)) headers[name.toLowerCase()] = value;
  const facts = requestFacts(
    { requestId: input.requestId ?? 'explain', endpoint: input.endpoint ?? endpointOf(input.body), headers, body: input.body },
    { estimator: snapshot.settings.estimator },
  );
  return decide(facts, snapshot, fleet, env, { pickBudgetMs: Infinity });
}
