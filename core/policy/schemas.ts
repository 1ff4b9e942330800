// JSON Schema checks of policy documents (ajv), one schema per kind of
// document; the same files editors use through yaml-language-server.
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { PolicyProblem } from './problems.ts';
import type { PathSegment, PolicySource } from './source.ts';

export const POLICY_KINDS = ['models', 'tenants', 'pools', 'rules', 'settings'] as const;
export type PolicyKind = (typeof POLICY_KINDS)[number];

/** One ajv for policies and plugin configs: defaults are filled in, every error reported. */
export const ajv = new Ajv({ allErrors: true, useDefaults: true, verbose: true, strict: false });

const validators = new Map<PolicyKind, ValidateFunction>();

export function schemaPath(kind: PolicyKind): URL {
  return new URL(`./schemas/${kind}.schema.json`, import.meta.url);
}

function validatorFor(kind: PolicyKind): ValidateFunction {
  let validate = validators.get(kind);
  if (!validate) {
    validate = ajv.compile(JSON.parse(readFileSync(schemaPath(kind), 'utf8')));
    validators.set(kind, validate);
  }
  return validate;
}

/** Checks a document against its kind's schema, filling in defaults. */
export function checkSchema(source: PolicySource): { kind?: PolicyKind; problems: PolicyProblem[] } {
  const data = source.data as { kind?: unknown } | null;
  const at = (path: PathSegment[], key?: string) => ({ file: source.file, ...source.locate(path, key) });
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    return { problems: [{ ...at([]), message: 'a policy file must be a mapping with a `kind`' }] };
  }
  const kind = data.kind;
  if (typeof kind !== 'string' || !(POLICY_KINDS as readonly string[]).includes(kind)) {
    return {
      problems: [{ ...at(['kind']), message: `kind ${kind === undefined ? 'is missing' : `"${String(kind)}" is unknown`}; expected one of ${POLICY_KINDS.join(', ')}` }],
    };
  }
  return { kind: kind as PolicyKind, problems: schemaProblems(validatorFor(kind as PolicyKind), data, source) };
}

/** Runs a compiled schema and turns its errors into located problems. */
export function schemaProblems(
  validate: ValidateFunction,
  data: unknown,
  source: PolicySource,
  basePath: PathSegment[] = [],
): PolicyProblem[] {
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
  return best;
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
