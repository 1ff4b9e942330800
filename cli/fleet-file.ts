// `explain --fleet FILE`: replica load given by hand, so an explanation is
// reproducible. The file maps replica ids to their signals.
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import type { FleetView, ReplicaState } from '../core/fleet/types.ts';
import { UsageError } from './usage.ts';

const schema = {
  type: 'object',
  required: ['replicas'],
  additionalProperties: false,
  properties: {
    replicas: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: {
          health: { enum: ['unknown', 'ready', 'not_ready', 'failing', 'ejected', 'draining'] },
          kv_usage: { type: 'number', minimum: 0, maximum: 1 },
          queue_depth: { type: 'integer', minimum: 0 },
          running: { type: 'integer', minimum: 0 },
          in_flight: { type: 'integer', minimum: 0 },
          loaded_adapters: { type: 'array', items: { type: 'string' } },
          age_ms: { type: 'number', minimum: 0, description: 'How old the scraped signals are (default 0).' },
        },
      },
    },
  },
};
const validate = new Ajv({ allErrors: true }).compile(schema);

interface FleetEntry {
  health?: ReplicaState['health'];
  kv_usage?: number;
  queue_depth?: number;
  running?: number;
  in_flight?: number;
  loaded_adapters?: string[];
  age_ms?: number;
}

export function readFleetFile(path: string, now: number): FleetView {
  let data: unknown;
  try {
    data = parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UsageError(`cannot read fleet file ${path}: ${(error as Error).message.split('\n')[0]}`);
  }
  if (!validate(data)) {
    const e = validate.errors![0];
    throw new UsageError(`fleet file ${path}: ${e.instancePath || '(document)'} ${e.message}`);
  }
  const states = new Map<string, ReplicaState>();
  for (const [id, entry] of Object.entries((data as { replicas: Record<string, FleetEntry> }).replicas)) {
    const scraped = entry.kv_usage !== undefined || entry.queue_depth !== undefined || entry.running !== undefined;
    states.set(id, {
      health: entry.health ?? 'ready',
      kvUsage: entry.kv_usage,
      queueDepth: entry.queue_depth,
      running: entry.running,
      loadedAdapters: entry.loaded_adapters,
      inFlight: entry.in_flight ?? 0,
      scrapedAt: scraped ? now - (entry.age_ms ?? 0) : undefined,
    });
  }
  return { replica: (id) => states.get(id) };
}
