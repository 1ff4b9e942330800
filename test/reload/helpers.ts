// Shared by the reload tests: waiting for a condition, a strategy that counts
// its disposals and carries a counter over reloads, and a store per test that
// is always closed.
import type { PolicyStore, ReloadOutcome } from '../../core/decide/store.ts';
import type { StrategyDefinition } from '../../sdk/types.ts';

export async function waitFor(what: string, check: () => boolean, timeoutMs = 3000): Promise<number> {
  const started = performance.now();
  while (!check()) {
    if (performance.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return performance.now() - started;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Records what happens to instances of the `counting` strategy. */
export interface Ledger {
  created: number;
  disposed: Map<number, number>;
}

/** A strategy whose instances count routed requests (carried over reloads) and their own dispose() calls. */
export function countingStrategy(ledger: Ledger): StrategyDefinition {
  return {
    name: 'counting',
    version: '1.0.0',
    sdk: '^1',
    create(_config, ctx) {
      const id = ++ledger.created;
      const state = (ctx.previousState as { routed: number } | undefined) ?? { routed: 0 };
      return {
        pick: (_request, candidates) => (candidates[0] ? { replica: candidates[0].id, reason: `instance ${id}, routed ${state.routed}` } : null),
        onRouted: () => {
          state.routed++;
        },
        exportState: () => state,
        dispose: () => {
          ledger.disposed.set(id, (ledger.disposed.get(id) ?? 0) + 1);
        },
      };
    },
  };
}

/** Every outcome a store reports, in order. */
export function recordOutcomes(store: PolicyStore): ReloadOutcome[] {
  const outcomes: ReloadOutcome[] = [];
  store.on('reload', (outcome) => outcomes.push(outcome));
  return outcomes;
}
