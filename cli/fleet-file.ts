// `explain --fleet FILE`: replica load given by hand, so an explanation is
// reproducible. The file maps replica ids to their signals.
import { Ajv } from 'ajv';
import { closest } from '../core/diagnostics/schema-problems.ts';
import type { FleetView, ReplicaState } from '../core/fleet/types.ts';
import { readDataFile } from './data-file.ts';

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

/** `known`: the policy's replica ids; an id the policy does not have is refused (a typo would otherwise be ignored). */
export function readFleetFile(path: string, now: number, known: Iterable<string>): FleetView {
  const data = readDataFile(path, 'fleet file');
  if (!validate(data)) {
    const e = validate.errors![0];
    throw new Error(`fleet file ${path}: ${e.instancePath || '(document)'} ${e.message}`);
  }
  const ids = [...known];
  for (const id of Object.keys((data as { replicas: Record<string, unknown> }).replicas)) {
    if (ids.includes(id)) continue;
    const hint = closest(id, ids);
    throw new Error(
      `fleet file ${path}: replica "${id}" is not in the policy${hint ? ` (did you mean "${hint}"?)` : ''}; its replicas are ${ids.slice(0, 20).join(', ')}${ids.length > 20 ? ', ...' : ''}`,
    );
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
