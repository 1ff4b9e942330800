// Loads a policy directory into a Snapshot: parse every file, check each
// against its schema, then compile the set. All or nothing: any problem in
// any file and no snapshot is built, so a broken policy never replaces a
// good one.
import { existsSync, statSync } from 'node:fs';
import { compilePolicy, type CheckedSource, type CompileOptions } from './compile.ts';
import type { PolicyProblem } from './problems.ts';
import { checkSchema } from './schemas.ts';
import { displayPath, listPolicyFiles, parsePolicyText, readPolicySource, type PolicySource } from './source.ts';
import type { Snapshot } from './snapshot.ts';

export interface LoadResult {
  readonly snapshot?: Snapshot;
  readonly problems: readonly PolicyProblem[];
  readonly files: readonly string[];
}

export function loadPolicyDir(dir: string, options: CompileOptions): LoadResult {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    return { problems: [{ file: displayPath(dir), line: 1, col: 1, message: 'not a directory of policy files' }], files: [] };
  }
  const paths = listPolicyFiles(dir);
  if (paths.length === 0) {
    return { problems: [{ file: displayPath(dir), line: 1, col: 1, message: 'no policy files (*.yaml, *.yml, *.json) here' }], files: [] };
  }
  return loadPolicySources(paths.map((path) => readPolicySource(path)), options);
}

/** Loads in-memory files (name → text): for tests and the simulator. */
export function loadPolicyTexts(files: Record<string, string>, options: CompileOptions): LoadResult {
  return loadPolicySources(
    Object.entries(files).map(([file, text]) => parsePolicyText(file, text)),
    options,
  );
}

export function loadPolicySources(
  parsed: readonly { source?: PolicySource; problems: PolicyProblem[] }[],
  options: CompileOptions,
): LoadResult {
  const problems: PolicyProblem[] = [];
  const checked: CheckedSource[] = [];
  for (const { source, problems: syntax } of parsed) {
    problems.push(...syntax);
    if (!source) continue;
    const { kind, problems: schema } = checkSchema(source);
    problems.push(...schema);
    if (kind && schema.length === 0) checked.push({ source, kind });
  }
  const files = parsed.flatMap((p) => (p.source ? [p.source.file] : []));
  // Reference checks need every file: skip them when one is already broken.
  if (problems.length) return { problems, files };
  const compiled = compilePolicy(checked, options);
  return { snapshot: compiled.snapshot, problems: compiled.problems, files };
}
