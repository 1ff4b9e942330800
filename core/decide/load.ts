// Policy files to a generation in one call: compiled (core/policy/load.ts),
// then built (generation.ts). For explain, sim, the tests and the benchmarks;
// the PolicyStore does the same two steps itself, so that it can skip
// compiling unchanged inputs and refuse a generation that cannot be built.
import type { PolicyProblem } from '../diagnostics/problem.ts';
import type { LoadedPlugin, StrategySource } from '../plugins/loader.ts';
import type { PolicyInputs } from '../policy/inputs.ts';
import { compileInputs, loadPolicy, type InputCompileOptions } from '../policy/load.ts';
import type { RoutingTable } from '../policy/routing-table.ts';
import { buildGeneration, type Generation, type GenerationOptions } from './generation.ts';

export interface LoadResult {
  readonly snapshot?: Generation;
  readonly problems: readonly PolicyProblem[];
  readonly files: readonly string[];
}

export type BuildOptions = InputCompileOptions & GenerationOptions;

/** Compiles read inputs and builds their generation, or reports every problem that stops it. Never throws for bad input. */
export function buildSnapshot(inputs: PolicyInputs, options: BuildOptions = {}): LoadResult {
  const compiled = compileInputs(inputs, { emulatedProfiles: options.emulatedProfiles });
  if (!compiled.policy) return { problems: compiled.problems, files: compiled.files };
  const built = buildGeneration(compiled.policy, options);
  return { snapshot: built.snapshot, problems: built.problems, files: compiled.files };
}

/** Reads a policy directory (see loadPolicy), compiles it and builds its generation. */
export async function loadSnapshot(
  dir: string,
  options: BuildOptions & StrategySource & { table?: RoutingTable },
): Promise<LoadResult & { plugins: readonly LoadedPlugin[] }> {
  const { generation, seed, now, log, previous, kvIndex, ...compile } = options;
  const compiled = await loadPolicy(dir, compile);
  if (!compiled.policy) return { problems: compiled.problems, files: compiled.files, plugins: compiled.plugins };
  const built = buildGeneration(compiled.policy, { generation, seed, now, log, previous, kvIndex });
  return { snapshot: built.snapshot, problems: built.problems, files: compiled.files, plugins: compiled.plugins };
}
