// `switchyard experiment NAME --out DIR`: one of the experiments B–F, H and I
// (docs/experiments.md) in the simulator, written as CSV, SVG plots and a summary.
import { parseArgs } from 'node:util';
import { writeReport } from '../sim/experiments/experiment.ts';
import { loadPlotter } from '../sim/experiments/plot.ts';
import { EXPERIMENTS, experimentNamed } from '../sim/experiments/registry.ts';
import { SimError } from '../sim/simulator/errors.ts';
import { UsageError } from './usage.ts';
import { registryOf } from '../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const HELP = `Usage: switchyard experiment NAME|all [--out DIR] [--seed N] [--scale X]

  NAME          ${EXPERIMENTS.map((e) => `${e.name} (${e.letter})`).join(', ')}
  --out DIR     where NAME.csv, NAME.svg and NAME.md go (default: experiments-out/)
  --seed N      random seed (default 1)
  --scale X     multiply every run's request count by X (default 1; 0.2 for a quick look)`;

export async function runExperiment(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      out: { type: 'string', default: 'experiments-out' },
      seed: { type: 'string', default: '1' },
      scale: { type: 'string', default: '1' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`name one experiment (or all): ${EXPERIMENTS.map((e) => e.name).join(', ')}`);
  const name = positionals[0];
  const chosen = name === 'all' ? EXPERIMENTS : [experimentNamed(name)];
  if (!chosen[0]) throw new UsageError(`unknown experiment "${name}"; known: ${EXPERIMENTS.map((e) => e.name).join(', ')}, all`);
  if (name !== 'all' && chosen[0].name !== name)
    console.error(`experiment "${name}" is now called "${chosen[0].name}"; the old name will go in a later release`);
  const seed = Number(values.seed);
  if (!Number.isInteger(seed)) throw new UsageError(`--seed must be an integer, not "${values.seed}"`);
  const scale = Number(values.scale);
  if (!(scale > 0)) throw new UsageError(`--scale must be a positive number, not "${values.scale}"`);
  // Before minutes of simulation, not after: the plots' packages are there.
  try {
    await loadPlotter();
  } catch (error) {
    if (!(error instanceof SimError)) throw error;
    console.error(`experiment: ${error.message}`);
    return 1;
  }

  const registry = registryOf(BUILTIN_STRATEGIES);
  for (const experiment of chosen as typeof EXPERIMENTS) {
    console.log(`${experiment.letter}. ${experiment.title} (${experiment.name})`);
    const started = process.cpuUsage();
    let report;
    try {
      report = experiment.run({ seed, scale, log: (line) => console.log(line), registry });
    } catch (error) {
      if (error instanceof SimError) {
        console.error(`experiment ${experiment.name}: ${error.message}`);
        return 1;
      }
      throw error;
    }
    const used = process.cpuUsage(started);
    const context = `switchyard experiment ${experiment.name} --seed ${seed}${scale !== 1 ? ` --scale ${scale}` : ''}; ${((used.user + used.system) / 1e6).toFixed(0)} s CPU on ${process.platform}/${process.arch}, Node ${process.versions.node}`;
    const files = await writeReport(experiment, report, values.out!, context);
    console.log(
      `\n${report.summary
        .split('\n')
        .filter((l) => l.includes('**'))
        .join('\n')}`,
    );
    console.log(`wrote ${files.join(', ')}\n`);
  }
  return 0;
}
