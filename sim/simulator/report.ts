// The summary table a simulation prints: overall, then per pool, tenant and
// request class; rejections by reason under it.
import type { GroupSummary } from './stats.ts';
import type { SimResult } from './simulator.ts';

const COLUMNS = [
  ['requests', 9],
  ['done', 8],
  ['rejected', 8],
  ['TTFT p50', 9],
  ['p90', 9],
  ['p99', 9],
  ['E2E p50', 9],
  ['p99', 9],
  ['req/s', 7],
  ['tok/s', 8],
  ['prefix hit', 10],
  ['preempt', 7],
  ['adapters/batch', 14],
] as const;

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  if (ms >= 10_000) return `${(ms / 1000).toFixed(1)}s`;
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)}s`;
  if (ms >= 100) return `${ms.toFixed(0)}ms`;
  return `${ms.toFixed(1)}ms`;
}

export function formatPercent(x: number): string {
  return Number.isFinite(x) ? `${(x * 100).toFixed(1)}%` : '-';
}

function row(label: string, s: GroupSummary, labelWidth: number): string {
  const cells = [
    String(s.requests),
    String(s.completed),
    String(s.rejected),
    formatMs(s.ttftMs.p50),
    formatMs(s.ttftMs.p90),
    formatMs(s.ttftMs.p99),
    formatMs(s.e2eMs.p50),
    formatMs(s.e2eMs.p99),
    s.throughputRps.toFixed(1),
    s.outputTokensPerS.toFixed(0),
    formatPercent(s.prefixHitRate),
    String(s.preemptions),
    s.distinctAdaptersPerBatch === undefined ? '' : s.distinctAdaptersPerBatch.toFixed(2),
  ];
  return label.padEnd(labelWidth) + cells.map((c, i) => c.padStart(COLUMNS[i][1])).join(' ');
}

export function formatSummary(result: SimResult): string {
  const sections: [string, Record<string, GroupSummary>][] = [
    ['overall', { all: result.overall }],
    ['pool', result.pools],
    ['tenant', result.tenants],
  ];
  if (Object.keys(result.classes).length > 1) sections.push(['class', result.classes]);
  if (Object.keys(result.priorities).length > 1) sections.push(['priority', result.priorities]);
  const labels = sections.flatMap(([kind, groups]) => Object.keys(groups).map((k) => `${kind} ${k}`));
  const width = Math.max(20, ...labels.map((l) => l.length)) + 2;
  const lines: string[] = [];
  lines.push(''.padEnd(width) + COLUMNS.map(([name, w]) => name.padStart(w)).join(' '));
  for (const [kind, groups] of sections) {
    for (const [name, summary] of Object.entries(groups)) lines.push(row(`${kind} ${name}`, summary, width));
  }
  const rejections: string[] = [];
  for (const [kind, groups] of sections) {
    for (const [name, summary] of Object.entries(groups)) {
      if (summary.rejected === 0 || (kind !== 'overall' && Object.keys(groups).length === 1)) continue;
      rejections.push(
        `  ${kind} ${name}: ${Object.entries(summary.rejections)
          .map(([code, n]) => `${code} ${n}`)
          .join(', ')}`,
      );
    }
  }
  if (rejections.length) lines.push('', 'rejections by reason:', ...rejections);
  return lines.join('\n');
}

/** The whole result as JSON (NaN → null). */
export function resultJson(result: SimResult): string {
  // A numeric seed (the usual case: --seed 42) prints as the number it is.
  const seed = /^-?\d{1,15}$/.test(result.seed) ? Number(result.seed) : result.seed;
  return JSON.stringify({ ...result, seed }, (_key, value) => (typeof value === 'number' && !Number.isFinite(value) ? null : value), 2);
}
