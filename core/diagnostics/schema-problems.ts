// JSON Schema errors (ajv) turned into located problems a person can act on:
// the field's path, what was wrong, and the known name a typo most likely meant.
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { PolicyProblem } from './problem.ts';

export type PathSegment = string | number;

/** A parsed document that knows where each of its values came from. */
export interface LocatedDocument {
  /** The file as the user should see it. */
  readonly file: string;
  /** Where the value at `path` (or, with `key`, that key of it) starts. */
  locate(path: readonly PathSegment[], key?: string): { line: number; col: number };
}

/** Runs a compiled schema and turns its errors into located problems. */
export function schemaProblems(validate: ValidateFunction, data: unknown, source: LocatedDocument, basePath: PathSegment[] = []): PolicyProblem[] {
  if (validate(data)) return [];
  return pickErrors(validate.errors ?? []).map((error) => {
    const path = [...basePath, ...pointerToPath(error.instancePath)];
    const key = error.keyword === 'additionalProperties' ? (error.params as { additionalProperty: string }).additionalProperty : undefined;
    return { file: source.file, ...source.locate(path, key), message: describe(error, path) };
  });
}

/** Drops the noise of oneOf: keep the errors of the branch that got furthest. */
function pickErrors(errors: ErrorObject[]): ErrorObject[] {
  let kept = errors;
  for (const oneOf of errors.filter((e) => e.keyword === 'oneOf')) {
    const prefix = `${oneOf.schemaPath}/`;
    const branches = new Map<string, ErrorObject[]>();
    for (const error of kept) {
      if (error === oneOf || !error.schemaPath.startsWith(prefix) || !error.instancePath.startsWith(oneOf.instancePath)) continue;
      const branch = error.schemaPath.slice(prefix.length).split('/')[0];
      branches.set(branch, [...(branches.get(branch) ?? []), error]);
    }
    if (branches.size === 0) continue;
    const depth = (list: ErrorObject[]) => Math.max(...list.map((e) => e.instancePath.length));
    const best = [...branches.values()].sort((a, b) => depth(b) - depth(a) || a.length - b.length)[0];
    const dropped = new Set([oneOf, ...[...branches.values()].filter((b) => b !== best).flat()]);
    kept = kept.filter((e) => !dropped.has(e));
  }
  return kept.filter((e) => e.keyword !== 'if');
}

function pointerToPath(pointer: string): PathSegment[] {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((part) => (/^\d+$/.test(part) ? Number(part) : part));
}

export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) out += typeof segment === 'number' ? `[${segment}]` : out ? `.${segment}` : segment;
  return out || '(document)';
}

function describe(error: ErrorObject, path: PathSegment[]): string {
  const where = formatPath(path);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${where}: missing required field "${params.missingProperty}"`;
    case 'additionalProperties': {
      const known = Object.keys((error.parentSchema as { properties?: object })?.properties ?? {});
      const name = String(params.additionalProperty);
      const hint = closest(name, known);
      return `${where}: unknown field "${name}"${hint ? ` (did you mean "${hint}"?)` : known.length ? `; known fields: ${known.join(', ')}` : ''}`;
    }
    case 'enum':
      return `${where}: ${JSON.stringify(error.data)} is not one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${where}: must be ${JSON.stringify(params.allowedValue)}`;
    case 'type':
      return `${where}: must be ${params.type}, not ${Array.isArray(error.data) ? 'array' : error.data === null ? 'null' : typeof error.data}`;
    case 'dependencies':
      return `${where}: "${params.property}" needs "${params.missingProperty}" too`;
    default:
      return `${where}: ${error.message}`;
  }
}

/** The known name a misspelling most likely meant (edit distance ≤ 2). */
export function closest(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const d = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  if (best !== undefined || name.length < 3) return best;
  // A name cut short or run on ("long" for "long-context"): the one known name it begins or ends.
  const lower = name.toLowerCase();
  const prefixed = known.filter((candidate) => candidate.toLowerCase().startsWith(lower) || lower.startsWith(candidate.toLowerCase()));
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length];
}
