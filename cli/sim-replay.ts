// `switchyard sim --replay FILE`: the recorded traffic as the workload, and
// what the router recorded of it as a table beside the simulator's: the
// same columns where a recording knows them (requests, done, rejected,
// time to first byte as TTFT, duration as E2E, req/s), by pool and tenant
// as the router decided them.
import { displayPath } from '../core/diagnostics/problem.ts';
import type { ReplayedRecord } from '../core/shadow/record-format.ts';
import { formatMs } from '../sim/simulator/report.ts';
import type { Workload } from '../sim/workload/load.ts';

/** A stand-in workload that names the recording (the simulator's messages quote its file). */
export function recordingWorkload(path: string): Workload {
  const file = displayPath(path);
  return { spec: { kind: 'workload' }, file, problemAt: (_path, message) => ({ file, line: 1, col: 1, message }) };
}

interface Group {
  requests: number;
  done: number;
  rejected: number;
  ttfb: number[];
  e2e: number[];
  rejections: Record<string, number>;
}

/** Tallies the recorded outcome, record by record (bounded: two numbers a request, as the simulator's own per-request stats). */
export class RecordedOutcome {
  readonly #groups = new Map<string, Group>();
  #first?: number;
  #last = 0;

  add(record: ReplayedRecord): void {
    this.#first ??= record.at;
    this.#last = record.at;
    const live = record.live;
    const names = ['overall all', `pool ${live?.pool ?? 'none'}`, `tenant ${live?.tenant ?? '(unknown)'}`];
    for (const name of names) {
      let g = this.#groups.get(name);
      if (!g) this.#groups.set(name, (g = { requests: 0, done: 0, rejected: 0, ttfb: [], e2e: [], rejections: {} }));
      g.requests++;
      const outcome = record.end?.outcome;
      if (outcome === 'ok') {
        g.done++;
        if (typeof record.end?.ttfbMs === 'number') g.ttfb.push(record.end.ttfbMs);
        if (typeof record.end?.durationMs === 'number') g.e2e.push(record.end.durationMs);
      } else if (outcome === 'rejected' || live?.admitted === false) {
        g.rejected++;
        const code = String(live?.code ?? 'rejected').slice(0, 64);
        g.rejections[code] = (g.rejections[code] ?? 0) + 1;
      }
    }
  }

  format(): string {
    const spanS = Math.max(0.001, (this.#last - (this.#first ?? 0)) / 1000);
    const width = Math.max(22, ...[...this.#groups.keys()].map((k) => k.length + 2));
    const header = ['requests', 'done', 'rejected', 'TTFB p50', 'p90', 'p99', 'E2E p50', 'p99', 'req/s'];
    const widths = [9, 8, 8, 9, 9, 9, 9, 9, 7];
    const lines = [''.padEnd(width) + header.map((h, i) => h.padStart(widths[i])).join(' ')];
    const order = [...this.#groups.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    for (const name of order) {
      const g = this.#groups.get(name)!;
      const q = (list: number[], p: number) =>
        list.length ? formatMs([...list].sort((x, y) => x - y)[Math.min(list.length - 1, Math.floor(p * list.length))]) : '-';
      const cells = [
        String(g.requests),
        String(g.done),
        String(g.rejected),
        q(g.ttfb, 0.5),
        q(g.ttfb, 0.9),
        q(g.ttfb, 0.99),
        q(g.e2e, 0.5),
        q(g.e2e, 0.99),
        (g.requests / spanS).toFixed(1),
      ];
      lines.push(name.padEnd(width) + cells.map((c, i) => c.padStart(widths[i])).join(' '));
    }
    const rejections = order
      .filter((n) => this.#groups.get(n)!.rejected > 0)
      .map(
        (n) =>
          `  ${n}: ${Object.entries(this.#groups.get(n)!.rejections)
            .map(([c, k]) => `${c} ${k}`)
            .join(', ')}`,
      );
    if (rejections.length) lines.push('', 'rejections by reason:', ...rejections);
    return lines.join('\n');
  }
}

const rank = (name: string) => (name.startsWith('overall') ? 0 : name.startsWith('pool') ? 1 : 2);
