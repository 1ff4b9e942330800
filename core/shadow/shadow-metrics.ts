// The shadow policy's metrics (docs/changing-policy.md): how many requests it
// decided again and with what result, where it differed (step, and what
// decided that step on each side: rule, strategy or check), its own reloads
// and strategy faults, and the time each shadow decision took.
import { Counter, Histogram, type Registry } from 'prom-client';

export interface ShadowMetrics {
  readonly decisions: Counter<'result'>;
  readonly differences: Counter<'step' | 'live' | 'shadow'>;
  readonly reloads: Counter<'result'>;
  readonly strategyFaults: Counter<'strategy' | 'fault'>;
  readonly decideSeconds: Histogram<string>;
}

export function registerShadowMetrics(registry: Registry): ShadowMetrics {
  return {
    decisions: new Counter({
      name: 'switchyard_shadow_decisions_total',
      help: 'Requests the shadow policy looked at, by result: same, differs, failed (the shadow threw), sampled_out, over_budget.',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    differences: new Counter({
      name: 'switchyard_shadow_differences_total',
      help: 'Shadow decisions that differ from the live one, by step (model, pool, replica, admission) and what decided that step live and in the shadow.',
      labelNames: ['step', 'live', 'shadow'] as const,
      registers: [registry],
    }),
    reloads: new Counter({
      name: 'switchyard_shadow_policy_reloads_total',
      help: 'Reloads of the shadow policy, by result (live, unchanged, refused).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    strategyFaults: new Counter({
      name: 'switchyard_shadow_strategy_faults_total',
      help: "Faults of the shadow policy's strategies (they never affect a live request).",
      labelNames: ['strategy', 'fault'] as const,
      registers: [registry],
    }),
    decideSeconds: new Histogram({
      name: 'switchyard_shadow_decide_seconds',
      help: 'Time one shadow decision took (decide and the shadow-only commit), off the request path.',
      buckets: [0.000005, 0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01],
      registers: [registry],
    }),
  };
}
