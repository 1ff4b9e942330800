// The routing table as a control plane serves it (docs/hot-reload.md, "The control plane"):
// which models exist with their versions and weights, and which pools of
// which replicas serve them. One document of kind `routing-table` holding the
// fields of a `models` document and of a `pools` document:
//
//   kind: routing-table
//   version: "2026-05-01T12:00:00Z"    # optional, shown in /admin/state
//   models: [...]    aliases: [...]     # as in kind: models
//   defaults: {...}  pools: [...]       # as in kind: pools
//
// It joins the local policy files as two more documents; every problem is
// located in the served text (URL:LINE:COL).
import { createHash } from 'node:crypto';
import { checkSchema } from './schemas.ts';
import { parsePolicyText, type PolicySource } from './source.ts';
import type { PolicyProblem } from '../diagnostics/problem.ts';

export const ROUTING_TABLE_KIND = 'routing-table';
const MODEL_FIELDS = ['models', 'aliases'] as const;
const POOL_FIELDS = ['defaults', 'pools'] as const;
const KNOWN_FIELDS = new Set<string>(['kind', 'version', ...MODEL_FIELDS, ...POOL_FIELDS]);

export interface RoutingTable {
  /** Where it came from (the control plane's URL): what problems name as the file. */
  readonly origin: string;
  readonly text: string;
  /** Content hash of `text`. */
  readonly hash: string;
  /** The control plane's own version label, when it gives one. */
  readonly version?: string;
  readonly etag?: string;
}

/** Parses and schema-checks a served table on its own; a table with problems is never used. */
export function parseRoutingTable(origin: string, text: string, etag?: string): { table?: RoutingTable; sources: PolicySource[]; problems: PolicyProblem[] } {
  const sources = routingTableSources(origin, text);
  if (sources.problems.length) return { sources: [], problems: sources.problems };
  const problems = sources.sources.flatMap((source) => checkSchema(source).problems);
  if (problems.length) return { sources: [], problems };
  const data = sources.root as { version?: unknown };
  return {
    table: {
      origin,
      text,
      hash: createHash('sha256').update(text).digest('hex').slice(0, 16),
      version: data.version === undefined ? undefined : String(data.version),
      etag,
    },
    sources: sources.sources,
    problems: [],
  };
}

/** The table as policy documents (kind models and kind pools), freshly parsed. */
export function routingTableSources(origin: string, text: string): { root?: unknown; sources: PolicySource[]; problems: PolicyProblem[] } {
  const parsed = parsePolicyText(origin, text);
  if (!parsed.source) return { sources: [], problems: parsed.problems };
  const whole = parsed.source;
  const data = whole.data as Record<string, unknown> | null;
  const at = (path: (string | number)[], key?: string) => ({ file: origin, ...whole.locate(path, key) });
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    return { sources: [], problems: [{ ...at([]), message: `a routing table is a mapping with kind: ${ROUTING_TABLE_KIND}` }] };
  }
  if (data.kind !== ROUTING_TABLE_KIND) {
    return { sources: [], problems: [{ ...at(['kind']), message: `kind must be "${ROUTING_TABLE_KIND}", not ${JSON.stringify(data.kind ?? null)}` }] };
  }
  const unknown = Object.keys(data).filter((key) => !KNOWN_FIELDS.has(key));
  if (unknown.length) {
    return {
      sources: [],
      problems: unknown.map((key) => ({ ...at([], key), message: `unknown field "${key}"; a routing table has ${[...KNOWN_FIELDS].join(', ')}` })),
    };
  }
  // The two documents keep the table's paths, so locations map one to one.
  const part = (kind: 'models' | 'pools', fields: readonly string[]): PolicySource | undefined => {
    if (!fields.some((field) => data[field] !== undefined)) return undefined;
    const doc: Record<string, unknown> = { kind };
    for (const field of fields) if (data[field] !== undefined) doc[field] = data[field];
    return {
      file: origin,
      text,
      data: doc,
      locate: (path, key) => (path.length === 1 && path[0] === 'kind' ? whole.locate(['kind']) : whole.locate(path, key)),
    };
  };
  const sources = [part('models', MODEL_FIELDS), part('pools', POOL_FIELDS)].filter((s): s is PolicySource => s !== undefined);
  return { root: data, sources, problems: [] };
}
