// Shared test helpers: the bundled policy, requests as a client sends them,
// and a fleet whose signals a test sets by hand.
import assert from 'node:assert/strict';
import { commit, type CommitHooks } from '../../core/decide/commit.ts';
import { chosen, decide, type Admitted, type Decision, type DecideOptions, type Rejected } from '../../core/decide/decide.ts';
import { createEnv, type DecideEnv } from '../../core/decide/env.ts';
import { requestFacts } from '../../core/facts/request-facts.ts';
import type { Endpoint } from '../../core/facts/request-schemas.ts';
import type { FleetView, ReplicaState } from '../../core/fleet/types.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import type { Generation } from '../../core/decide/generation.ts';
import { listPolicyFiles } from '../../core/policy/source.ts';
import { readFileSync } from 'node:fs';
import { displayPath, formatProblem } from '../../core/diagnostics/problem.ts';
import { builtinRegistry } from './builtins.ts';

export { chosen };

export const POLICIES = new URL('../../policies/', import.meta.url).pathname;

/** A directory's policy files as texts (name → text), read the way the router lists them. */
export function policyDirTexts(dir: string): Record<string, string> {
  return Object.fromEntries(listPolicyFiles(dir).map((path) => [displayPath(path), readFileSync(path, 'utf8')]));
}

export function bundledPolicy(seed: number | string = 1): Generation {
  const result = buildSnapshot(policyInputsFromTexts(policyDirTexts(POLICIES), { registry: builtinRegistry }), { seed });
  if (!result.snapshot) throw new Error(result.problems.map(formatProblem).join('\n'));
  return result.snapshot;
}

export function policyFrom(files: Record<string, string>, seed: number | string = 1): Generation {
  const result = buildSnapshot(policyInputsFromTexts(files, { registry: builtinRegistry }), { seed });
  if (!result.snapshot) throw new Error(result.problems.map(formatProblem).join('\n'));
  return result.snapshot;
}

export interface TestRequest {
  model?: string;
  content?: string;
  messages?: { role: string; content: string }[];
  key?: string;
  conversation?: string;
  priority?: string;
  deadlineMs?: number;
  maxTokens?: number;
  endpoint?: Endpoint;
  body?: unknown;
  id?: string;
}

let counter = 0;

export function facts(r: TestRequest) {
  const headers: Record<string, string> = {};
  if (r.key) headers.authorization = `Bearer ${r.key}`;
  if (r.conversation) headers['x-conversation-id'] = r.conversation;
  if (r.priority) headers['x-priority'] = r.priority;
  if (r.deadlineMs !== undefined) headers['x-deadline-ms'] = String(r.deadlineMs);
  const body = r.body ?? {
    model: r.model ?? 'chat-small',
    messages: r.messages ?? [{ role: 'user', content: r.content ?? 'Hello there' }],
    ...(r.maxTokens !== undefined ? { max_tokens: r.maxTokens } : {}),
  };
  return requestFacts({ requestId: r.id ?? `t-${++counter}`, endpoint: r.endpoint ?? 'chat', headers, body });
}

/** A fleet whose replica states the test sets; unknown replicas are unobserved. */
export class ManualFleet implements FleetView {
  readonly states = new Map<string, ReplicaState>();
  constructor(private readonly now: () => number = () => 0) {}
  set(id: string, state: Partial<ReplicaState> & { ageMs?: number }): this {
    const { ageMs, ...rest } = state;
    this.states.set(id, { health: 'ready', inFlight: 0, scrapedAt: this.now() - (ageMs ?? 0), ...rest });
    return this;
  }
  replica(id: string): ReplicaState | undefined {
    return this.states.get(id);
  }
}

export function route(
  snapshot: Generation,
  r: TestRequest,
  fleet: FleetView = new ManualFleet(),
  env: DecideEnv = createEnv({ now: () => 0 }),
  options: DecideOptions = {},
  hooks?: CommitHooks,
): Decision {
  // The pick budget is wall-clock: a GC pause on a busy CI machine could trip
  // it and make an exact-outcome test flaky. Budget overruns have their own test.
  const decision = decide(facts(r), snapshot, fleet, env, { pickBudgetMs: 1000, ...options });
  commit(decision, env, hooks); // as the router does: quota taken, strategies told
  return decision;
}

/** route(), for a request the test expects admitted. */
export function routeAdmitted(...args: Parameters<typeof route>): Admitted {
  return admitted(route(...args));
}

export function admitted(decision: Decision): Admitted {
  assert.ok(decision.ok, `expected admitted, got ${chosen(decision).status}: ${chosen(decision).reason}`);
  return decision;
}

export function rejected(decision: Decision): Rejected {
  assert.ok(!decision.ok, `expected a rejection, got ${chosen(decision).reason}`);
  return decision;
}

/** A long prompt of about `tokens` tokens at 4 characters a token. */
/** A prompt of about `tokens` tokens, estimated or counted by Llama 3: three-letter words, one token each with their space. */
export function promptOf(tokens: number): string {
  return 'the cat sat and ate fig jam too '.repeat(Math.ceil(tokens / 8)).slice(0, tokens * 4);
}

/** One model, one general pool with `replicas` replicas and the given strategy chain. */
export function singlePool(options: {
  strategies: unknown[];
  replicas?: number;
  replicaFields?: string;
  pool?: string;
  tenants?: string;
  settings?: string;
  seed?: number | string;
}): Generation {
  const n = options.replicas ?? 4;
  const replicas = Array.from(
    { length: n },
    (_, i) => `      - { id: r${i}, url: "http://127.0.0.1:${9000 + i}"${options.replicaFields ? `, ${options.replicaFields}` : ''} }`,
  ).join('\n');
  return policyFrom(
    {
      'models.yaml': 'kind: models\nmodels:\n  - id: m\n    versions: [{ version: v1 }]\n',
      'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n${options.pool ?? ''}    strategies: ${JSON.stringify(options.strategies)}\n    replicas:\n${replicas}\n`,
      'tenants.yaml': options.tenants ?? 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free }\n',
      ...(options.settings ? { 'settings.yaml': options.settings } : {}),
    },
    options.seed ?? 1,
  );
}
