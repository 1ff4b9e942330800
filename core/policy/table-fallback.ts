// Building with a control plane's routing table, and falling back when the
// newest table does not fit the local policy: the local files may have
// changed too, and must not wait for the control plane to fix its table. The
// last table that fitted (in use, or saved on disk from an earlier run) is
// tried instead, and the newest one is reported as rejected.
import { formatProblem, type PolicyProblem } from '../diagnostics/problem.ts';
import type { ControlPlaneSource } from './control-plane.ts';
import type { PolicyInputs } from './inputs.ts';
import type { RoutingTable } from './routing-table.ts';

/** What a build yields: the built thing (`snapshot`), or the problems that stop it. */
export interface TableBuildResult<T> {
  readonly snapshot?: T;
  readonly problems: readonly PolicyProblem[];
}

export interface TableBuildRequest<T> {
  /** Inputs read with the newest table (or without one). */
  readonly inputs: PolicyInputs;
  readonly newest?: RoutingTable;
  /** The table last used with success, if any. */
  readonly fallback?: RoutingTable;
  readonly controlPlane?: ControlPlaneSource;
  /** The hash of the live inputs ('' before the first load). */
  readonly liveHash: string;
  readonly read: (table: RoutingTable) => Promise<PolicyInputs>;
  readonly build: (inputs: PolicyInputs) => TableBuildResult<T>;
}

export type TableBuild<T> =
  | {
      readonly snapshot: T;
      readonly inputs: PolicyInputs;
      readonly table?: RoutingTable;
      readonly tableProblems: readonly PolicyProblem[];
      readonly rejectedHash?: string;
    }
  | { readonly snapshot?: undefined; readonly problems: readonly PolicyProblem[]; readonly failedHash: string };

export async function buildWithTableFallback<T>(request: TableBuildRequest<T>): Promise<TableBuild<T>> {
  const { inputs, newest, fallback, controlPlane } = request;
  const built = request.build(inputs);
  if (built.snapshot) return { snapshot: built.snapshot, inputs, table: newest, tableProblems: [] };
  if (!newest || !fallback || fallback.hash === newest.hash) return { problems: built.problems, failedHash: inputs.hash };

  const withNewest = built.problems;
  const retry = await request.read(fallback);
  if (request.liveHash && retry.hash === request.liveHash) {
    // Only the table changed, and the policy can't be built with it.
    controlPlane?.rejected(newest, withNewest);
    return { problems: withNewest, failedHash: inputs.hash };
  }
  if (retry.unsettled.length) return { problems: withNewest, failedHash: inputs.hash };
  const second = request.build(retry);
  if (second.snapshot) {
    controlPlane?.rejected(newest, withNewest);
    // Built with the older table: the same inputs again are nothing new.
    return { snapshot: second.snapshot, inputs: retry, table: fallback, tableProblems: withNewest, rejectedHash: inputs.hash };
  }
  return { problems: dedupe([...second.problems, ...withNewest]), failedHash: inputs.hash };
}

function dedupe(problems: readonly PolicyProblem[]): PolicyProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = formatProblem(p);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
