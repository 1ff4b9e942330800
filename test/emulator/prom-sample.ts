// Reads samples out of Prometheus text for the emulator tests.

/** Every series of `name`, as label maps with their values. */
export function allSamples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([^{ ]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key] = value;
    out.push({ labels, value: Number(match[3]) });
  }
  return out;
}

/** The value of the first series of `name` whose labels include `labels`. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  return allSamples(text, name).find((s) => Object.entries(labels).every(([key, value]) => s.labels[key] === value))?.value;
}
