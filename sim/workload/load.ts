// Reads a workload file (YAML or JSON): schema-checked with the same
// machinery as policy files, so every mistake comes back as FILE:LINE:COL.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parsePolicyText, type PolicySource } from '../../core/policy/source.ts';
import type { DistributionSpec } from './distributions.ts';
import { formatProblem, type PolicyProblem, displayPath } from '../../core/diagnostics/problem.ts';
import { ajv } from '../../core/diagnostics/ajv.ts';
import { formatPath, schemaProblems, type PathSegment } from '../../core/diagnostics/schema-problems.ts';

export interface AdapterMixSpec {
  fraction?: number;
  names?: string[];
  count?: number;
  prefix?: string;
  zipf?: number;
}

export interface TenantSpec {
  api_key?: string;
  tenant?: string;
  anonymous?: boolean;
  weight?: number;
  model?: string;
  batch_fraction?: number;
  adapters?: AdapterMixSpec;
}

/** A workload file as the schema defines it. */
export interface WorkloadSpec {
  kind: 'workload';
  description?: string;
  seed?: number | string;
  requests?: number;
  duration_s?: number;
  arrivals?: { process?: 'poisson' | 'gamma'; rate: number; rate_end?: number; cv?: number };
  model?: string;
  models?: { name: string; weight?: number }[];
  tenants?: TenantSpec[];
  prompt_tokens?: DistributionSpec;
  output_tokens?: DistributionSpec;
  max_tokens?: number;
  batch_fraction?: number;
  deadline_ms?: number;
  code_fraction?: number;
  sessions?: {
    fraction?: number;
    turns?: DistributionSpec;
    think_time_s?: DistributionSpec;
    follow_up_tokens?: DistributionSpec;
    max_context_tokens?: number;
    conversation_id?: boolean;
  };
  system_prompts?: { count: number; fraction?: number; zipf?: number; tokens?: DistributionSpec };
  adapters?: AdapterMixSpec;
  long_context?: { fraction: number; prompt_tokens?: DistributionSpec; output_tokens?: DistributionSpec };
  trace?: { file: string; format?: 'csv' | 'jsonl'; time_unit?: 'ms' | 's'; block_tokens?: number; speed?: number };
}

export interface Workload {
  readonly spec: WorkloadSpec;
  /** As the user should see it. */
  readonly file: string;
  /** The trace file, resolved against the workload file. */
  readonly tracePath?: string;
  /** A problem located at `path` in the workload file (for checks against the policy). */
  problemAt(path: readonly PathSegment[], message: string): PolicyProblem;
}

/** Thrown for a workload that cannot be used: every problem, located. */
export class WorkloadError extends Error {
  constructor(readonly problems: readonly PolicyProblem[]) {
    super(problems.map(formatProblem).join('\n'));
    this.name = 'WorkloadError';
  }
}

let validate: ReturnType<typeof ajv.compile> | undefined;

function validator() {
  validate ??= ajv.compile(JSON.parse(readFileSync(new URL('./workload.schema.json', import.meta.url), 'utf8')));
  return validate;
}

export function loadWorkloadFile(path: string): Workload {
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new WorkloadError([{ file: displayPath(path), line: 1, col: 1, message: 'no such workload file' }]);
  }
  return parseWorkload(displayPath(path), readFileSync(path, 'utf8'), dirname(resolve(path)));
}

/** Parses and checks a workload's text; `baseDir` resolves a trace's path. */
export function parseWorkload(file: string, text: string, baseDir = process.cwd()): Workload {
  const parsed = parsePolicyText(file, text);
  if (!parsed.source) throw new WorkloadError(parsed.problems);
  const source = parsed.source;
  const data = source.data;
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new WorkloadError([{ file, ...source.locate([]), message: 'a workload file must be a mapping with `kind: workload`' }]);
  }
  const problems = schemaProblems(validator(), data, source).sort((a, b) => a.line - b.line || a.col - b.col);
  if (problems.length) throw new WorkloadError(problems);
  const spec = data as WorkloadSpec;
  const tracePath = spec.trace ? resolve(baseDir, spec.trace.file) : undefined;
  const more = checkMeaning(spec, source, tracePath);
  if (more.length) throw new WorkloadError(more);
  return { spec, file, tracePath, problemAt: (path, message) => ({ file, ...source.locate(path), message }) };
}

/** What the schema cannot say: combinations, orders, and whether the workload sends anything at all. */
function checkMeaning(spec: WorkloadSpec, source: PolicySource, tracePath: string | undefined): PolicyProblem[] {
  const problems: PolicyProblem[] = [];
  const report = (path: PathSegment[], message: string) => problems.push({ file: source.file, ...source.locate(path), message });

  if (spec.trace) {
    if (tracePath && (!existsSync(tracePath) || !statSync(tracePath).isFile())) {
      report(['trace', 'file'], `trace.file: no such file ${displayPath(tracePath)}`);
    }
    for (const key of ['arrivals', 'sessions', 'system_prompts', 'long_context', 'prompt_tokens', 'output_tokens'] as const) {
      if (spec[key] !== undefined) report([key], `${key}: a trace replay takes arrivals and lengths from the trace; remove ${key} or the trace`);
    }
  } else {
    if (!spec.arrivals) report([], 'missing "arrivals" (rate, process) or a "trace" to replay');
    if (spec.requests === undefined && spec.duration_s === undefined) {
      report([], 'the workload never ends: give "requests" (how many) or "duration_s" (for how long)');
    }
    if (spec.arrivals?.rate_end !== undefined && spec.duration_s === undefined) {
      report(['arrivals', 'rate_end'], 'arrivals.rate_end: a ramp needs "duration_s" to ramp over');
    }
    if (spec.arrivals?.cv !== undefined && spec.arrivals.process !== 'gamma' && spec.arrivals.cv !== 1) {
      report(['arrivals', 'cv'], 'arrivals.cv: only the gamma process takes cv (set process: gamma)');
    }
  }
  if (spec.model !== undefined && spec.models !== undefined) report(['models'], 'give either "model" or "models", not both');

  const checkAdapters = (mix: AdapterMixSpec | undefined, path: PathSegment[]) => {
    if (!mix) return;
    if (mix.names === undefined && mix.count === undefined) report(path, `${formatPath(path)}: give "names" or "count"`);
    if (mix.names !== undefined && mix.count !== undefined) report([...path, 'count'], `${formatPath(path)}: give "names" or "count", not both`);
  };
  checkAdapters(spec.adapters, ['adapters']);
  spec.tenants?.forEach((t, i) => {
    const ways = [t.api_key !== undefined, t.tenant !== undefined, t.anonymous === true].filter(Boolean).length;
    if (ways !== 1) report(['tenants', i], `tenants[${i}]: give exactly one of "api_key", "tenant" or "anonymous: true"`);
    checkAdapters(t.adapters, ['tenants', i, 'adapters']);
  });

  const checkDistribution = (d: DistributionSpec | undefined, path: PathSegment[]) => {
    if (d === undefined || typeof d === 'number') return;
    const where = formatPath(path);
    if (d.type === 'uniform' && d.min > d.max) report(path, `${where}: min ${d.min} is above max ${d.max}`);
    if (d.type === 'lognormal') {
      const given = [d.mean, d.p99, d.sigma].filter((x) => x !== undefined).length;
      if (given !== 1) report(path, `${where}: a lognormal takes the median and exactly one of mean, p99 or sigma`);
      if (d.mean !== undefined && d.mean < d.median) report([...path, 'mean'], `${where}: a lognormal's mean cannot be below its median`);
      if (d.p99 !== undefined && d.p99 < d.median) report([...path, 'p99'], `${where}: p99 cannot be below the median`);
      if (d.min !== undefined && d.max !== undefined && d.min > d.max) report(path, `${where}: min ${d.min} is above max ${d.max}`);
    }
    if (d.type === 'quantiles') {
      const pts = d.points;
      if (pts[0][0] !== 0 || pts[pts.length - 1][0] !== 1) report([...path, 'points'], `${where}.points: must run from probability 0 to 1`);
      for (let i = 1; i < pts.length; i++) {
        if (pts[i][0] < pts[i - 1][0] || pts[i][1] < pts[i - 1][1]) {
          report([...path, 'points', i], `${where}.points[${i}]: probabilities and values must not decrease`);
          break;
        }
      }
    }
  };
  checkDistribution(spec.prompt_tokens, ['prompt_tokens']);
  checkDistribution(spec.output_tokens, ['output_tokens']);
  checkDistribution(spec.sessions?.turns, ['sessions', 'turns']);
  checkDistribution(spec.sessions?.think_time_s, ['sessions', 'think_time_s']);
  checkDistribution(spec.sessions?.follow_up_tokens, ['sessions', 'follow_up_tokens']);
  checkDistribution(spec.system_prompts?.tokens, ['system_prompts', 'tokens']);
  checkDistribution(spec.long_context?.prompt_tokens, ['long_context', 'prompt_tokens']);
  checkDistribution(spec.long_context?.output_tokens, ['long_context', 'output_tokens']);
  return problems;
}

/** A workload built in code, checked like a file (experiments, benchmarks, tests). */
export function workloadFromSpec(name: string, spec: WorkloadSpec, baseDir = process.cwd()): Workload {
  return parseWorkload(name, JSON.stringify(spec, null, 1), baseDir);
}
