// The one way policy files become a CompiledPolicy: inputs (inputs.ts: read
// from a directory, or given as texts) are parsed, checked against their
// schemas, then compiled as a set. All or nothing: any problem in any file
// and nothing is compiled, so a broken policy never replaces a good one.
// validate stops here; the runtime builds a generation from the result
// (core/decide/load.ts), for the PolicyStore, explain, sim, tests and benches.
import type { PolicyProblem } from '../diagnostics/problem.ts';
import { loaderFor, type LoadedPlugin, type StrategySource } from '../plugins/loader.ts';
import { compilePolicy, type CheckedSource, type CompileOptions } from './compile.ts';
import { readPolicyInputs, type PolicyInputs } from './inputs.ts';
import { routingTableSources, type RoutingTable } from './routing-table.ts';
import { checkSchema } from './schemas.ts';
import { parsePolicyText, type PolicySource } from './source.ts';
import type { CompiledPolicy } from './compiled.ts';

export interface CompileResult {
  readonly policy?: CompiledPolicy;
  readonly problems: readonly PolicyProblem[];
  readonly files: readonly string[];
}

/** Compile options but the registry, which comes with the inputs' plugins. */
export type InputCompileOptions = Omit<CompileOptions, 'registry'>;

/** Compiles read inputs, or reports every problem that stops it. Never throws for bad input. */
export function compileInputs(inputs: PolicyInputs, options: InputCompileOptions = {}): CompileResult {
  const fileNames = inputs.files.map((f) => f.file);
  if (inputs.problems.length) return { problems: inputs.problems, files: fileNames };
  if (inputs.unsettled.length) {
    return {
      problems: inputs.unsettled.map((file) => ({ file, line: 1, col: 1, message: 'the file changed while it was read (a save in progress?)' })),
      files: fileNames,
    };
  }
  const parsed: { source?: PolicySource; problems: PolicyProblem[] }[] = inputs.files.map((f) => parsePolicyText(f.file, f.text));
  if (inputs.table) {
    const table = routingTableSources(inputs.table.origin, inputs.table.text);
    parsed.push({ problems: table.problems }, ...table.sources.map((source) => ({ source, problems: [] })));
  }
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
  const compiled = compilePolicy(checked, { ...options, registry: inputs.plugins.registry });
  return { policy: compiled.policy, problems: compiled.problems, files };
}

/**
 * Reads a policy directory (with the plugins its settings name and, when
 * given, a control plane's table) and compiles it: for `validate`. A
 * long-running router uses the PolicyStore, which does the same in two steps
 * so it can skip compiling unchanged inputs.
 */
export async function loadPolicy(
  dir: string,
  options: InputCompileOptions & StrategySource & { table?: RoutingTable },
): Promise<CompileResult & { plugins: readonly LoadedPlugin[] }> {
  // What is left is the compile options alone.
  const { loader: _loader, builtins: _builtins, table, ...build } = options;
  const { loader, owned } = loaderFor(options);
  const inputs = await readPolicyInputs(dir, { loader, table });
  // A loader of its own loads nothing more: its compiled files can go.
  if (owned) loader.clearCacheDir();
  return { ...compileInputs(inputs, build), plugins: inputs.plugins.plugins };
}
