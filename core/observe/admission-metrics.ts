// Metrics of admission (docs/quotas.md, docs/policies.md): requests shed by
// priority, quota settlement on the engines' usage, and the replicas' load in
// tokens. Labels stay bounded: priorities are integers in [-100, 100], usage
// problems a fixed set.
import { Counter, Gauge, type Registry } from 'prom-client';

export class AdmissionMetrics {
  readonly shed: Counter<'pool' | 'priority'>;
  readonly settlements: Counter<'outcome'>;
  readonly settledTokens: Counter<'direction'>;
  readonly shadowOverQuota: Counter<'tenant'>;
  readonly fallbacks: Counter<'from' | 'to'>;
  readonly replicaPrefillTokens: Gauge<'replica' | 'pool'>;
  readonly replicaActiveStreams: Gauge<'replica' | 'pool'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.shed = new Counter({
      name: 'switchyard_shed_total',
      help: 'Requests refused for priority (503 shed_for_priority) as their pool saturated, by pool and priority.',
      labelNames: ['pool', 'priority'] as const,
      registers,
    });
    this.settlements = new Counter({
      name: 'switchyard_quota_settlements_total',
      help: "Token-quota charges settled on the engine's usage (settled) or left at the estimate, by why (missing, invalid, absurd, duplicate, broken: charged what was delivered).",
      labelNames: ['outcome'] as const,
      registers,
    });
    this.settledTokens = new Counter({
      name: 'switchyard_quota_settled_tokens_total',
      help: "Weighted tokens given back to (refund) or taken from (charge) tenants' buckets once usage was known.",
      labelNames: ['direction'] as const,
      registers,
    });
    this.shadowOverQuota = new Counter({
      name: 'switchyard_quota_shadow_over_total',
      help: 'Requests a shadow quota (shadow: true) would have refused, by tenant; they were admitted.',
      labelNames: ['tenant'] as const,
      registers,
    });
    this.fallbacks = new Counter({
      name: 'switchyard_model_fallbacks_total',
      help: "Requests sent to a model's fallback model because every pool of the model they were routed to refused for capacity, by model left (from) and model used (to).",
      labelNames: ['from', 'to'] as const,
      registers,
    });
    this.replicaPrefillTokens = new Gauge({
      name: 'switchyard_replica_prefill_tokens',
      help: 'Uncached prompt tokens this router sent to each replica that have not reached their first byte yet.',
      labelNames: ['replica', 'pool'] as const,
      registers,
    });
    this.replicaActiveStreams = new Gauge({
      name: 'switchyard_replica_active_streams',
      help: 'Streams this router has open on each replica.',
      labelNames: ['replica', 'pool'] as const,
      registers,
    });
  }
}
