// The KV event feed's health on /metrics: what was applied, what was
// dropped and why, and per replica how many blocks the index holds and how
// old its events are. Read from the index when scraped (no work per event).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { KvIndex, KvIndexCounters } from '../fleet/kv-index.ts';

const RESULTS: Record<keyof KvIndexCounters, string> = {
  batches: 'applied',
  events: 'events',
  malformed: 'malformed',
  outOfOrder: 'out_of_order',
  gaps: 'gap',
  unknownEvents: 'unknown_event',
  unknownReplica: 'unknown_replica',
  overflows: 'overflow',
};

export function registerKvMetrics(registry: Registry, index: KvIndex): void {
  new Counter({
    name: 'switchyard_kv_event_batches_total',
    help: 'KV cache event messages from engines, by result (applied, malformed, out_of_order, gap, unknown_replica, overflow; events counts the events applied batches carried).',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, result] of Object.entries(RESULTS)) this.inc({ result }, index.counters[key as keyof KvIndexCounters]);
    },
  });
  new Gauge({
    name: 'switchyard_kv_index_blocks',
    help: 'KV blocks the router believes each replica holds, from its KV events.',
    labelNames: ['replica'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const replica of index.tracked()) this.set({ replica }, index.blockCount(replica));
    },
  });
  new Gauge({
    name: 'switchyard_kv_events_age_seconds',
    help: 'Seconds since the last KV event batch from each replica (+Inf before the first).',
    labelNames: ['replica'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const { replica, ageMs } of index.longestPrefix([])) this.set({ replica }, ageMs / 1000);
    },
  });
}
