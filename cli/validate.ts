// `switchyard validate [DIR]`: schema and meaning of a policy directory.
// Each problem as FILE:LINE:COL: message and exit 1; a summary and exit 0.
import { parseArgs } from 'node:util';
import { loadPolicy } from '../core/policy/load.ts';
import { formatProblem } from '../core/diagnostics/problem.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';
import { PROFILE_NAMES } from '../sim/engine/profiles.ts';

export async function runValidate(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({ args: argv, allowPositionals: true, options: { help: { type: 'boolean', short: 'h' } } });
  if (values.help) {
    console.log('Usage: switchyard validate [DIR]   (default: policies/)');
    return 0;
  }
  const dir = positionals[0] ?? 'policies';
  const result = await loadPolicy(dir, { builtins: BUILTIN_STRATEGIES, emulatedProfiles: PROFILE_NAMES });
  if (result.problems.length > 0) {
    for (const problem of result.problems) console.error(formatProblem(problem));
    console.error(`${result.problems.length} problem${result.problems.length === 1 ? '' : 's'} in ${dir}`);
    return 1;
  }
  const s = result.policy!;
  console.log(
    `${dir}: valid — ${result.files.length} files, ${s.models.size} models, ${s.aliases.size} aliases, ${s.tenantsById.size} tenants, ` +
      `${s.pools.length} pools, ${s.replicas.size} replicas, ${s.poolRules.rules.rules.length} pool rules` +
      (result.plugins.length ? `, ${result.plugins.length} plugin${result.plugins.length === 1 ? '' : 's'}` : ''),
  );
  return 0;
}
