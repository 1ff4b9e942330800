// `switchyard diff --replay FILE --policies A --policies B`: two policies
// decide the same recorded traffic, request by request, and the differences
// are listed by step, rule and strategy, with examples
// (docs/changing-policy.md). Each policy decides as core/shadow/replay.ts
// says; the recording's own decision is the third column.
import { parseArgs } from 'node:util';
import { formatProblem, PolicyError } from '../core/diagnostics/problem.ts';
import { PluginLoader } from '../core/plugins/loader.ts';
import { readPolicyInputs } from '../core/policy/inputs.ts';
import { buildSnapshot } from '../core/decide/load.ts';
import type { Generation } from '../core/decide/generation.ts';
import { compareSides, decisionSide, describePair, SHADOW_STEPS, type DecisionSide, type ShadowStep, type StepDifference } from '../core/shadow/compare.ts';
import { RecordReader } from '../core/shadow/record-reader.ts';
import { ReplayDecider } from '../core/shadow/replay.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';
import { UsageError } from './usage.ts';

const HELP = `Usage: switchyard diff --replay FILE --policies A --policies B [--examples N] [--json]

  --replay FILE   a recording made by 'switchyard serve --record FILE' (older parts: FILE.1, FILE.2, ...)
  --policies DIR  twice: the policy decided first (A, say the live one) and the candidate (B)
  --examples N    differing requests to list (default 10)
  --json          print the whole comparison as JSON

Each policy decides every recorded request in order, on the recording's clock,
with its own quota and strategy state, against an idle fleet (for load, use
'switchyard sim --replay'). Exit code 0 either way; differences are not errors.`;

interface Tally {
  admitted: number;
  rejected: Record<string, number>;
  pools: Record<string, number>;
  /** Requests whose model, pool and admission equal the recorded decision's. */
  matchesRecorded: number;
}

export async function loadSnapshot(dir: string, command: string): Promise<Generation> {
  const inputs = await readPolicyInputs(dir, { loader: new PluginLoader({ builtins: BUILTIN_STRATEGIES }) });
  const built = inputs.problems.length ? undefined : buildSnapshot(inputs, { seed: 1 });
  const problems = inputs.problems.length ? inputs.problems : built?.snapshot ? [] : built!.problems;
  if (problems.length)
    throw new PolicyError([
      ...problems,
      { file: dir, line: 1, col: 1, message: `${command}: the policies in ${dir} are invalid; run 'switchyard validate ${dir}'` },
    ]);
  return built!.snapshot!;
}

/** Model, pool and admission as the recording has them (the replica depends on a fleet the replay does not have). */
export function sameAsRecorded(recorded: DecisionSide | undefined, side: DecisionSide): boolean {
  if (!recorded) return false;
  return compareSides(recorded, side).every((d) => d.step === 'replica');
}

export async function runDiff(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      replay: { type: 'string' },
      policies: { type: 'string', multiple: true },
      examples: { type: 'string', default: '10' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (!values.replay) throw new UsageError('--replay FILE is required (a recording of serve --record FILE)');
  const dirs = values.policies ?? [];
  if (dirs.length !== 2) throw new UsageError(`--policies must be given twice (A, then B), not ${dirs.length} time${dirs.length === 1 ? '' : 's'}`);
  const examples = /^\d{1,4}$/.test(values.examples!) ? Number(values.examples) : NaN;
  if (!Number.isInteger(examples)) throw new UsageError(`--examples must be a whole number, not "${values.examples}"`);

  try {
    const [a, b] = [new ReplayDecider(await loadSnapshot(dirs[0], 'diff')), new ReplayDecider(await loadSnapshot(dirs[1], 'diff'))];
    const reader = new RecordReader(values.replay);
    const tallies: [Tally, Tally] = [newTally(), newTally()];
    const byStep: Record<ShadowStep, number> = { model: 0, pool: 0, replica: 0, admission: 0 };
    const pairs = new Map<string, number>();
    const shown: { requestId: string; text: string; differences: StepDifference[] }[] = [];
    let requests = 0;
    let differing = 0;
    let first: number | undefined;
    let last = 0;
    try {
      for (let record = reader.next(); record; record = reader.next()) {
        requests++;
        first ??= record.at;
        last = record.at;
        const sides = [decisionSide(a.decide(record)), decisionSide(b.decide(record))] as const;
        sides.forEach((side, i) => count(tallies[i], side, record!.live));
        const differences = compareSides(sides[0], sides[1]);
        if (differences.length === 0) continue;
        differing++;
        for (const d of differences) {
          byStep[d.step]++;
          const key = `${d.step}\0${d.live}\0${d.shadow}`;
          if (pairs.has(key) || pairs.size < 1000) pairs.set(key, (pairs.get(key) ?? 0) + 1);
        }
        if (shown.length < examples)
          shown.push({
            requestId: record.facts.requestId,
            differences,
            text: describePair(sides[0], sides[1], differences)
              .replace(/^live:/, 'A:')
              .replace('; shadow:', '; B:'),
          });
      }
    } finally {
      reader.close();
    }
    const top = [...pairs.entries()]
      .sort((x, y) => y[1] - x[1])
      .slice(0, 20)
      .map(([key, n]) => {
        const [step, inA, inB] = key.split('\0');
        return { step, a: inA, b: inB, count: n };
      });
    const result = {
      replay: reader.file,
      policies: { a: dirs[0], b: dirs[1] },
      requests,
      differing,
      byStep,
      top,
      examples: shown,
      a: tallies[0],
      b: tallies[1],
      spanMs: first === undefined ? 0 : last - first,
    };
    if (values.json) {
      console.log(JSON.stringify(result, null, 2));
      return 0;
    }
    console.log(formatDiff(result));
    return 0;
  } catch (error) {
    if (error instanceof PolicyError) {
      for (const problem of error.problems) console.error(formatProblem(problem));
      return 1;
    }
    throw error;
  }
}

function newTally(): Tally {
  return { admitted: 0, rejected: {}, pools: {}, matchesRecorded: 0 };
}

function count(tally: Tally, side: DecisionSide, recorded: DecisionSide | undefined): void {
  if (side.admitted) tally.admitted++;
  else tally.rejected[side.code ?? 'rejected'] = (tally.rejected[side.code ?? 'rejected'] ?? 0) + 1;
  if (side.pool) tally.pools[side.pool] = (tally.pools[side.pool] ?? 0) + 1;
  if (sameAsRecorded(recorded, side)) tally.matchesRecorded++;
}

function formatDiff(r: {
  replay: string;
  policies: { a: string; b: string };
  requests: number;
  differing: number;
  byStep: Record<ShadowStep, number>;
  top: { step: string; a: string; b: string; count: number }[];
  examples: { requestId: string; text: string }[];
  a: Tally;
  b: Tally;
  spanMs: number;
}): string {
  const pct = (n: number) => (r.requests ? `${((n / r.requests) * 100).toFixed(1)}%` : '-');
  const lines = [`${r.replay}: ${r.requests} requests over ${(r.spanMs / 1000).toFixed(1)} s; A = ${r.policies.a}, B = ${r.policies.b}`, ''];
  const rows: [string, number, number][] = [['admitted', r.a.admitted, r.b.admitted]];
  for (const code of new Set([...Object.keys(r.a.rejected), ...Object.keys(r.b.rejected)]))
    rows.push([`rejected ${code}`, r.a.rejected[code] ?? 0, r.b.rejected[code] ?? 0]);
  for (const pool of new Set([...Object.keys(r.a.pools), ...Object.keys(r.b.pools)])) rows.push([`pool ${pool}`, r.a.pools[pool] ?? 0, r.b.pools[pool] ?? 0]);
  rows.push(['as recorded (model, pool, admission)', r.a.matchesRecorded, r.b.matchesRecorded]);
  const width = Math.max(...rows.map(([label]) => label.length)) + 2;
  lines.push(`${''.padEnd(width)}${'A'.padStart(10)}${'B'.padStart(10)}`);
  for (const [label, x, y] of rows) lines.push(`${label.padEnd(width)}${String(x).padStart(10)}${String(y).padStart(10)}`);
  lines.push(
    '',
    `B decides differently from A on ${r.differing} of ${r.requests} requests (${pct(r.differing)}): ${SHADOW_STEPS.map((s) => `${s} ${r.byStep[s]}`).join(', ')}`,
  );
  if (r.top.length) {
    lines.push('', 'by step, what decided it in A → in B:');
    for (const t of r.top) lines.push(`  ${String(t.count).padStart(7)}  ${t.step}: ${t.a} → ${t.b}`);
  }
  if (r.examples.length) {
    lines.push('', 'examples:');
    for (const e of r.examples) lines.push(`  ${e.requestId}: ${e.text}`);
  }
  return lines.join('\n');
}
