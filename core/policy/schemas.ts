// JSON Schema checks of policy documents (ajv), one schema per kind of
// document; the same files editors use through yaml-language-server.
import { readFileSync } from 'node:fs';
import type { ValidateFunction } from 'ajv';
import { ajv } from '../diagnostics/ajv.ts';
import type { PolicyProblem } from '../diagnostics/problem.ts';
import { schemaProblems, type PathSegment } from '../diagnostics/schema-problems.ts';
import type { PolicySource } from './source.ts';

export const POLICY_KINDS = ['models', 'tenants', 'pools', 'rules', 'settings'] as const;
export type PolicyKind = (typeof POLICY_KINDS)[number];

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
      problems: [
        { ...at(['kind']), message: `kind ${kind === undefined ? 'is missing' : `"${String(kind)}" is unknown`}; expected one of ${POLICY_KINDS.join(', ')}` },
      ],
    };
  }
  return { kind: kind as PolicyKind, problems: schemaProblems(validatorFor(kind as PolicyKind), data, source) };
}
