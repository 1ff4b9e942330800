// A request shed for priority (core/decide/shed.ts), counted by its pool and priority.
import type { Rejected } from '../decide/decision.ts';
import { poolLabel, type RouterMetrics } from '../observe/metrics.ts';

export function countShed(metrics: RouterMetrics, decision: Rejected): void {
  if (decision.rejection.code !== 'shed_for_priority') return;
  const pool = decision.pool && decision.model && decision.version ? poolLabel(decision.model, decision.version, decision.pool) : 'none';
  metrics.admission.shed.inc({ pool, priority: String(decision.priority) });
}
