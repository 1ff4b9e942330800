// `switchyard sim`: what would this policy do to this workload? Runs the
// simulator (sim/simulator/) in virtual time and prints the summary table.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SimError } from '../sim/simulator/errors.ts';
import { formatSummary, resultJson } from '../sim/simulator/report.ts';
import { simulate } from '../sim/simulator/simulator.ts';
import { loadWorkloadFile, WorkloadError } from '../sim/workload/load.ts';
import { PluginLoader } from '../core/plugins/loader.ts';
import { readPolicyInputs } from '../core/policy/inputs.ts';
import { compileInputs } from '../core/policy/load.ts';
import type { CompiledPolicy } from '../core/policy/compiled.ts';
import type { PolicyInputs } from '../core/policy/inputs.ts';
import { UsageError } from './usage.ts';
import { formatProblem, PolicyError } from '../core/diagnostics/problem.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';
import { RecordedSource } from '../sim/workload/recorded.ts';
import { RecordedOutcome, recordingWorkload } from './sim-replay.ts';

const HELP = `Usage: switchyard sim [--policies DIR] --workload FILE [--seed N] [--out DIR] [--json] [options]
       switchyard sim [--policies DIR] --replay FILE [options]

  --policies DIR          policy directory (default: policies/); replicas' emulate://PROFILE urls name the engine model
  --workload FILE         a workload file (docs/simulator.md; examples/workloads/)
  --replay FILE           recorded traffic (serve --record FILE) instead of a workload; the recorded outcome is printed beside
                          the simulated one (docs/changing-policy.md)
  --seed N                random seed (default: the workload's, else 1): same seed, same result
  --out DIR               write requests.csv (one row per request), timeline.csv and summary.json there
  --requests N            send N requests instead of the workload's count
  --scrape-interval-ms N  how often the router scrapes engine load (default: the policy's scrape_interval_ms)
  --staleness-ms N        extra age of every scrape when it reaches the router (default 0)
  --routers N             router instances sharing the fleet, each with its own in-flight counts (default 1)
  --default-profile NAME  simulate replicas with http(s) urls as this engine profile
  --exclude-saturated     exclude saturated replicas instead of deprioritizing them (the mistake docs/policies.md warns of)
  --json                  print the whole result as JSON instead of the table`;

export async function runSim(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      policies: { type: 'string', default: 'policies' },
      workload: { type: 'string' },
      replay: { type: 'string' },
      seed: { type: 'string' },
      out: { type: 'string' },
      requests: { type: 'string' },
      'scrape-interval-ms': { type: 'string' },
      'staleness-ms': { type: 'string' },
      routers: { type: 'string', default: '1' },
      'default-profile': { type: 'string' },
      'exclude-saturated': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (!values.workload && !values.replay)
    throw new UsageError('--workload FILE (see examples/workloads/) or --replay FILE (a recording of serve --record) is required');
  if (values.workload && values.replay) throw new UsageError('give --workload FILE or --replay FILE, not both');
  const number = (name: string, value: string | undefined, min: number, integer = true): number | undefined => {
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n)))
      throw new UsageError(`--${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, not "${value}"`);
    return n;
  };
  const requests = number('requests', values.requests, 1);
  const scrapeIntervalMs = number('scrape-interval-ms', values['scrape-interval-ms'], 1, false);
  const stalenessMs = number('staleness-ms', values['staleness-ms'], 0, false);
  const routers = number('routers', values.routers, 1)!;

  const inputs = await readPolicyInputs(values.policies!, { loader: new PluginLoader({ builtins: BUILTIN_STRATEGIES }) });
  if (inputs.problems.length) {
    for (const problem of inputs.problems) console.error(formatProblem(problem));
    console.error(`sim: the policies in ${values.policies} are invalid; run 'switchyard validate ${values.policies}'`);
    return 1;
  }

  try {
    const replay = values.replay;
    const workload = replay ? recordingWorkload(replay) : loadWorkloadFile(values.workload!);
    const recorded = replay ? new RecordedOutcome() : undefined;
    if (values.out) mkdirSync(values.out, { recursive: true });
    const cpu = process.cpuUsage();
    const result = simulate({
      policy: compiledOnce(inputs),
      workload,
      seed: values.seed,
      requests,
      scrapeIntervalMs,
      stalenessMs,
      routers,
      defaultProfile: values['default-profile'],
      excludeSaturated: values['exclude-saturated'],
      outDir: values.out,
      source: replay ? (seed) => new RecordedSource(replay, seed, { limit: requests, onRecord: (record) => recorded!.add(record) }) : undefined,
    });
    const used = process.cpuUsage(cpu);
    const cpuS = (used.user + used.system) / 1e6;
    if (values.out) {
      writeFileSync(join(values.out, 'summary.json'), resultJson(result) + '\n');
      writeFileSync(join(values.out, 'summary.txt'), formatSummary(result) + '\n');
    }
    if (values.json) {
      console.log(resultJson(result));
      return 0;
    }
    console.log(
      `${workload.file}: ${result.overall.requests} requests over ${(result.simulatedMs / 1000).toFixed(1)} s of virtual time, seed ${result.seed}` +
        ` (${result.events} events, ${cpuS.toFixed(2)} s CPU)\n`,
    );
    console.log(formatSummary(result));
    if (recorded)
      console.log(`\nrecorded (what the router did, by its own decisions; TTFB is the engine's first byte through the router):\n\n${recorded.format()}`);
    if (values.out) console.log(`\nwrote ${[...result.files, join(values.out, 'summary.json'), join(values.out, 'summary.txt')].join(', ')}`);
    return 0;
  } catch (error) {
    if (error instanceof WorkloadError || error instanceof PolicyError) {
      for (const problem of error.problems) console.error(formatProblem(problem));
      console.error(
        `sim: ${error instanceof WorkloadError ? (values.replay ? `the recording ${values.replay}` : `the workload ${values.workload}`) : `the policies in ${values.policies}`} cannot be used`,
      );
      return 1;
    }
    if (error instanceof SimError) {
      console.error(`sim: ${error.message}`);
      return 1;
    }
    throw error;
  }
}

/** The policy compiled once for every simulated router (each builds its own generation of it). */
function compiledOnce(inputs: PolicyInputs): CompiledPolicy {
  const compiled = compileInputs(inputs);
  if (!compiled.policy) throw new PolicyError(compiled.problems);
  return compiled.policy;
}
