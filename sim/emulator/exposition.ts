// Prometheus text exposition (format 0.0.4), written by hand: the emulator
// exposes a fixed, small set of series, several of them with label sets a
// client registry would not let it shape freely (vLLM's lora_requests_info
// keeps one series per label combination, valued with a timestamp).

export type Labels = Readonly<Record<string, string | number>>;

export interface Sample {
  readonly labels: Labels;
  readonly value: number;
  /** Appended to the metric name: _bucket, _sum, _count. */
  readonly suffix?: string;
}

export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export function formatLabels(labels: Labels): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(labels)) parts.push(`${name}="${escapeLabel(String(value))}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

export class Exposition {
  private readonly lines: string[] = [];

  /**
   * One metric family. Counters are named with their _total suffix, as
   * prometheus_client writes them in the text format.
   */
  family(name: string, type: 'gauge' | 'counter' | 'histogram', help: string, samples: readonly Sample[]): this {
    this.lines.push(`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${type}`);
    for (const sample of samples) {
      this.lines.push(`${name}${sample.suffix ?? ''}${formatLabels(sample.labels)} ${formatValue(sample.value)}`);
    }
    return this;
  }

  text(): string {
    return this.lines.join('\n') + '\n';
  }
}
