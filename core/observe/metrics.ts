// The router's Prometheus metrics (prom-client). Labels are bounded: model,
// pool, replica, outcome, reason — never conversation ids, prefixes or
// request ids, whose values grow without end.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { AdmissionMetrics } from './admission-metrics.ts';
import { HotCounter, HotHistogram } from './hot-series.ts';

/** Every per-pool series is labelled with the pool's key (`model@version/name`): a pool's name alone is shared by the pools of several models. */
export const poolLabel = (model: string, version: string, pool: string): string => `${model}@${version}/${pool}`;

const RELOAD_RESULTS = ['live', 'unchanged', 'refused'] as const;
const RETRY_CAUSES = ['connect', 'status_5xx', 'timeout', 'protocol'] as const;
const RETRY_REFUSALS = ['attempts', 'budget', 'no_replica'] as const;

export class RouterMetrics {
  readonly registry = new Registry();

  readonly requests = new HotCounter({
    name: 'switchyard_requests_total',
    help: 'Requests by model, pool and outcome (ok, rejected, upstream_error, aborted).',
    labelNames: ['model', 'pool', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly decisions = new HotCounter({
    name: 'switchyard_replica_decisions_total',
    help: 'Replica picks by pool, replica and the strategy that picked.',
    labelNames: ['pool', 'replica', 'strategy'] as const,
    registers: [this.registry],
  });
  readonly rejections = new Counter({
    name: 'switchyard_rejections_total',
    help: 'Rejected requests by reason code.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly decisionSeconds = new HotHistogram({
    name: 'switchyard_decision_duration_seconds',
    help: 'Time to build the request facts and make the four decisions.',
    buckets: [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005],
    registers: [this.registry],
  });
  readonly ttfbSeconds = new HotHistogram({
    name: 'switchyard_upstream_ttfb_seconds',
    help: "Time from dispatch to the engine's first response byte, by pool.",
    labelNames: ['pool'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly upstreamSeconds = new HotHistogram({
    name: 'switchyard_upstream_duration_seconds',
    help: 'Time from dispatch to the last response byte, by pool.',
    labelNames: ['pool'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: 'switchyard_retries_total',
    help: 'Requests retried on another replica before the first byte, by pool and cause (connect, status_5xx, timeout, protocol).',
    labelNames: ['pool', 'cause'] as const,
    registers: [this.registry],
  });
  readonly promptTokenCounts = new HotCounter({
    name: 'switchyard_prompt_token_counts_total',
    help: 'Requests by how their prompt tokens were obtained (source: tokenizer, engine, estimate) and, for an estimate where a tokenizer is configured, why (docs/tokens.md).',
    labelNames: ['source', 'fallback'] as const,
    registers: [this.registry],
  });
  readonly retriesRefused = new Counter({
    name: 'switchyard_retries_refused_total',
    help: 'Failed requests not retried, by pool and reason (attempts: max_retries reached; budget: the retry budget is spent; no_replica: no other replica to try).',
    labelNames: ['pool', 'reason'] as const,
    registers: [this.registry],
  });
  readonly ejections = new Counter({
    name: 'switchyard_replica_ejections_total',
    help: 'Replicas ejected by outlier detection, by pool, replica and the failure that tipped it (connect, status_5xx, timeout, protocol).',
    labelNames: ['pool', 'replica', 'cause'] as const,
    registers: [this.registry],
  });
  readonly strategyFaults = new Counter({
    name: 'switchyard_strategy_faults_total',
    help: 'Strategy picks skipped because the strategy threw, answered badly, overran its budget or (caged) gave no answer in time.',
    labelNames: ['strategy', 'fault'] as const,
    registers: [this.registry],
  });
  readonly pluginQuarantined = new Gauge({
    name: 'switchyard_plugin_quarantined',
    help: 'A caged plugin that is quarantined (stuck, crashed or flooding): 1, skipped until its file changes; 0 while it runs.',
    labelNames: ['plugin', 'reason'] as const,
    registers: [this.registry],
  });
  readonly policyGeneration = new Gauge({
    name: 'switchyard_policy_generation',
    help: 'Generation of the policy snapshot in use.',
    registers: [this.registry],
  });
  readonly policyReloads = new Counter({
    name: 'switchyard_policy_reloads_total',
    help: 'Policy loads and reloads by result (live, unchanged, refused); the initial load counts as one.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly policyDiskLive = new Gauge({
    name: 'switchyard_policy_disk_matches_live',
    help: '1 while the policy files on disk are what is live; 0 while they hold a change that was refused (the last good policy keeps running).',
    registers: [this.registry],
  });
  /** Registered on the first control-plane report: a router without a control plane exports no series to alert on. */
  readonly controlPlaneUp = new Gauge({
    name: 'switchyard_control_plane_up',
    help: '1 while the control plane serves a valid routing table, 0 while the router runs on its last good one.',
    registers: [],
  });
  readonly quotaStoreUp = new Gauge({
    name: 'switchyard_quota_store_up',
    help: '1 while the quota store answers (always, in memory), 0 while a shared one (Redis) is out and quotas follow on_unavailable.',
    registers: [this.registry],
  });
  readonly quotaStoreFailures = new Counter({
    name: 'switchyard_quota_store_failures_total',
    help: 'Shared quota store calls that failed, by reason (timeout, error, garbage).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly quotaLeaseSeconds = new Histogram({
    name: 'switchyard_quota_lease_fetch_seconds',
    help: 'Time of each lease fetch from the shared quota store (most admissions fetch nothing).',
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1],
    registers: [this.registry],
  });
  readonly replicaKvUsage = this.replicaGauge('switchyard_replica_kv_usage', 'KV cache usage (0..1) last scraped from each replica.');
  readonly replicaQueue = this.replicaGauge('switchyard_replica_queue_depth', 'Requests waiting in each replica, last scraped.');
  readonly replicaInFlight = this.replicaGauge('switchyard_replica_in_flight', 'Requests this router has in flight on each replica.');
  readonly replicaSignalAge = this.replicaGauge(
    'switchyard_replica_signal_age_seconds',
    'Age of the scraped load signals of each replica (+Inf before the first scrape).',
  );
  readonly replicaHealthy = this.replicaGauge('switchyard_replica_ready', '1 when the replica takes new requests (ready or not yet checked), else 0.');
  readonly replicaEjected = this.replicaGauge('switchyard_replica_ejected', '1 while outlier detection has the replica ejected, else 0.');
  /** Shedding, quota settlement, load in tokens (admission-metrics.ts). */
  readonly admission = new AdmissionMetrics(this.registry);

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'switchyard_process_' });
  }

  setControlPlaneUp(up: boolean): void {
    if (!this.registry.getSingleMetric('switchyard_control_plane_up')) this.registry.registerMetric(this.controlPlaneUp);
    this.controlPlaneUp.set(up ? 1 : 0);
  }

  /**
   * Counters start at 0 for every value an alert or panel looks at, so
   * that `increase()` sees the first event (a series born at 1 has no rise).
   * `reloads`: the counts so far (the initial load included).
   */
  seedReloads(reloads: Partial<Record<(typeof RELOAD_RESULTS)[number], number>> = {}): void {
    for (const result of RELOAD_RESULTS) this.policyReloads.inc({ result }, reloads[result] ?? 0);
  }

  /** Zero series for a pool's retries and refused retries (see seedReloads). */
  seedPool(pool: string): void {
    for (const cause of RETRY_CAUSES) this.retries.inc({ pool, cause }, 0);
    for (const reason of RETRY_REFUSALS) this.retriesRefused.inc({ pool, reason }, 0);
  }

  private replicaGauge(name: string, help: string) {
    return new Gauge({ name, help, labelNames: ['replica', 'pool'] as const, registers: [this.registry] });
  }
}
