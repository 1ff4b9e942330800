// A problem found in a file a person wrote (a policy, a plugin, a workload),
// located as FILE:LINE:COL so editors and CI logs can jump to it. Shared by
// core/policy and core/plugins, which both report problems and neither of
// which may depend on the other for it.
import { relative } from 'node:path';

export interface PolicyProblem {
  readonly file: string;
  readonly line: number;
  readonly col: number;
  readonly message: string;
}

export function formatProblem(problem: PolicyProblem): string {
  return `${problem.file}:${problem.line}:${problem.col}: ${problem.message}`;
}

/** Thrown when a policy set is invalid: carries every problem, never a partial result. */
export class PolicyError extends Error {
  readonly problems: readonly PolicyProblem[];
  constructor(problems: readonly PolicyProblem[]) {
    super(problems.map(formatProblem).join('\n'));
    this.name = 'PolicyError';
    this.problems = problems;
  }
}

/** A path as users should see it: relative to the working directory when it is inside it. */
export function displayPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}
