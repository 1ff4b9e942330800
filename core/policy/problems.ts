// A problem found in a policy file, located as FILE:LINE:COL so editors and
// CI logs can jump to it.

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
