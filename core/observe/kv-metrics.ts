// The KV event feed's health on /metrics: what was applied, what was
// dropped and why, and per replica how many blocks the index holds and how
// old its events are; and whether lookups ever match, so that an index that
// fills but never matches (a router whose token ids differ from the
// engine's) is loud. Read from the index when scraped (no work per event).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { KvIndex, KvIndexCounters } from '../fleet/kv-index.ts';

/** Blocks skipped while applying events, by reason. */
const SKIPPED: Record<'otherTier' | 'partialBlocks' | 'unknownParent', string> = {
  otherTier: 'other_tier',
  partialBlocks: 'partial',
  unknownParent: 'unknown_parent',
};

const RESULTS: Record<Exclude<keyof KvIndexCounters, keyof typeof SKIPPED | 'blockSizeChanges'>, string> = {
  batches: 'applied',
  events: 'events',
  malformed: 'malformed',
  outOfOrder: 'out_of_order',
  gaps: 'gap',
  unknownEvents: 'unknown_event',
  unknownReplica: 'unknown_replica',
  overflows: 'overflow',
  replayed: 'replayed',
  invalidEvents: 'invalid_event',
  rateLimited: 'rate_limited',
  oversized: 'oversized',
  overloaded: 'overloaded',
};

export function registerKvMetrics(registry: Registry, index: KvIndex): void {
  new Counter({
    name: 'switchyard_kv_event_batches_total',
    help: 'KV cache event messages from engines, by result (applied, replayed, malformed, out_of_order, gap, unknown_replica, overflow, rate_limited, oversized, overloaded; events and invalid_event/unknown_event count events).',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, result] of Object.entries(RESULTS)) this.inc({ result }, index.counters[key as keyof KvIndexCounters]);
    },
  });
  new Counter({
    name: 'switchyard_kv_blocks_skipped_total',
    help: 'Blocks in KV events the index did not keep, by reason (other_tier: CPU offload or sliding window; partial: no full block of token ids; unknown_parent: the parent was never seen).',
    labelNames: ['reason'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, reason] of Object.entries(SKIPPED)) this.inc({ reason }, index.counters[key as keyof typeof SKIPPED]);
      this.inc({ reason: 'block_size_change' }, index.counters.blockSizeChanges);
    },
  });
  new Counter({
    name: 'switchyard_kv_lookups_total',
    help: 'Prompts looked up in the KV index, by whether some replica held at least their first block.',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ result: 'matched' }, index.lookups.matched);
      this.inc({ result: 'unmatched' }, index.lookups.total - index.lookups.matched);
    },
  });
  new Gauge({
    name: 'switchyard_kv_index_last_match_age_seconds',
    help: 'Seconds since a lookup last found a block in the KV index (+Inf when none ever did). High while the index holds blocks and lookups happen: the router does not match the engines (docs/kv-events.md).',
    registers: [registry],
    collect() {
      this.set(index.lastMatchAgeMs() / 1000);
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
