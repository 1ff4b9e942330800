// A request shed for priority (core/decide/shed.ts), counted by its pool and priority.
import type { Rejected } from '../decide/decision.ts';
import { poolLabel, type RouterMetrics } from '../observe/metrics.ts';

export function countShed(metrics: RouterMetrics, decision: Rejected): void {
  if (decision.rejection.code !== 'shed_for_priority') return;
  const { model, version, pool, priority } = decision.known;
  metrics.admission.shed.inc({ pool: pool && model && version ? poolLabel(model, version, pool) : 'none', priority: String(priority) });
}
