// What an experiment is and what it leaves behind: a table (CSV), plots
// (vega-lite, rendered to SVG) and a short markdown summary with the numbers.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TopLevelSpec } from 'vega-lite';
import type { StrategyRegistry } from '../../core/plugins/registry.ts';
import { formatMs, formatPercent } from '../simulator/report.ts';
import { simulate, type SimOptions, type SimResult } from '../simulator/simulator.ts';
import { workloadFromSpec, type WorkloadSpec } from '../workload/load.ts';
import { fleetPolicy, type FleetPolicySpec } from './fleet-policy.ts';
import { renderSvg } from './plot.ts';

export type Row = Record<string, string | number>;

export interface ExperimentOptions {
  readonly seed: number;
  /** Scales every run's request count (1 = the experiment's default). */
  readonly scale: number;
  /** Progress lines. */
  readonly log: (line: string) => void;
  /** The strategies the runs' pools name: the built-ins, handed in by cli (sim never imports plugins/). */
  readonly registry: StrategyRegistry;
}

export interface ExperimentReport {
  readonly rows: readonly Row[];
  readonly plots: readonly { readonly name: string; readonly spec: TopLevelSpec }[];
  /** Markdown, without the title line. */
  readonly summary: string;
  /** Extra tables, written as NAME-KEY.csv. */
  readonly extraTables?: Readonly<Record<string, readonly Row[]>>;
}

export interface Experiment {
  readonly name: string;
  /** Former names, still accepted by `switchyard experiment`. */
  readonly aliases?: readonly string[];
  /** The experiment's letter in docs/experiments.md. */
  readonly letter: string;
  readonly title: string;
  run(options: ExperimentOptions): ExperimentReport;
}

export interface RunSpec {
  readonly policy: FleetPolicySpec;
  readonly workload: WorkloadSpec;
  readonly sim?: Omit<SimOptions, 'policy' | 'workload' | 'seed'>;
}

/** One simulation of an experiment. */
export function runOnce(label: string, spec: RunSpec, options: ExperimentOptions): SimResult {
  const workload = workloadFromSpec(`${label} (workload)`, spec.workload);
  const started = process.cpuUsage();
  const result = simulate({ ...spec.sim, policy: fleetPolicy(spec.policy, options.registry), workload, seed: options.seed });
  const used = process.cpuUsage(started);
  const o = result.overall;
  options.log(
    `  ${label.padEnd(44)} ttft p99 ${formatMs(o.ttftMs.p99).padStart(7)}  hit ${formatPercent(o.prefixHitRate).padStart(6)}  rejected ${String(o.rejected).padStart(5)}  (${o.requests} requests, ${((used.user + used.system) / 1e6).toFixed(1)} s CPU)`,
  );
  return result;
}

/** The request count of a run, scaled, and never below a few hundred. */
export function scaled(requests: number, options: ExperimentOptions): number {
  return Math.max(300, Math.round(requests * options.scale));
}

export const BASELINES = ['round-robin', 'random', 'least-load'] as const;

/** Rounds for tables: ms to 0.1, fractions to 0.0001. */
export function ms(x: number): number {
  return Number.isFinite(x) ? Math.round(x * 10) / 10 : NaN;
}

export function frac(x: number): number {
  return Number.isFinite(x) ? Math.round(x * 10000) / 10000 : NaN;
}

/** A markdown table from rows and the columns to show (header → key or function). */
export function markdownTable(rows: readonly Row[], columns: Record<string, string | ((row: Row) => string)>): string {
  const headers = Object.keys(columns);
  const lines = [`| ${headers.join(' | ')} |`, `| ${headers.map(() => '---').join(' | ')} |`];
  for (const row of rows) {
    lines.push(
      `| ${headers
        .map((h) => {
          const c = columns[h];
          return typeof c === 'function' ? c(row) : String(row[c] ?? '');
        })
        .join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

function csvOf(rows: readonly Row[]): string {
  if (rows.length === 0) return '';
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: string | number | undefined) =>
    v === undefined || (typeof v === 'number' && !Number.isFinite(v)) ? '' : /[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v);
  return [columns.join(','), ...rows.map((r) => columns.map((c) => cell(r[c])).join(','))].join('\n') + '\n';
}

/** Writes NAME.csv, NAME[-PLOT].svg and NAME.md into `dir`; returns the paths. */
export async function writeReport(experiment: Experiment, report: ExperimentReport, dir: string, context: string): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  const write = (file: string, text: string) => {
    const path = join(dir, file);
    writeFileSync(path, text);
    written.push(path);
  };
  write(`${experiment.name}.csv`, csvOf(report.rows));
  for (const [key, rows] of Object.entries(report.extraTables ?? {})) write(`${experiment.name}-${key}.csv`, csvOf(rows));
  const images: string[] = [];
  for (const plot of report.plots) {
    const file = plot.name ? `${experiment.name}-${plot.name}.svg` : `${experiment.name}.svg`;
    write(file, await renderSvg(plot.spec));
    images.push(file);
  }
  const md = [
    `# ${experiment.letter}. ${experiment.title}`,
    '',
    `_${context}_`,
    '',
    ...images.map((f) => `![${experiment.name}](${f})`),
    '',
    report.summary.trim(),
    '',
    `Data: [${experiment.name}.csv](${experiment.name}.csv)${Object.keys(report.extraTables ?? {})
      .map((k) => `, [${experiment.name}-${k}.csv](${experiment.name}-${k}.csv)`)
      .join('')}`,
    '',
  ].join('\n');
  write(`${experiment.name}.md`, md);
  return written;
}
