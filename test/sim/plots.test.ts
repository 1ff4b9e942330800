// Every experiment's plot, rendered at a tiny scale, as a reader sees it: no
// label cut off, a legend entry with a visible swatch for every series, and
// (C) one colour per policy in every panel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderSvg } from '../../sim/experiments/plot.ts';
import { EXPERIMENTS, experimentNamed } from '../../sim/experiments/registry.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

const decode = (text: string) =>
  text.replaceAll('&amp;', '&').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&#39;', "'");
const texts = (svg: string) => [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => decode(m[1]));
const legendLabels = (svg: string) => [...svg.matchAll(/role-legend-label[^>]*><text[^>]*>([^<]*)<\/text>/g)].map((m) => decode(m[1]));
const legendSwatches = (svg: string) => [...svg.matchAll(/role-legend-symbol[^>]*><path([^>]*)\/>/g)].map((m) => m[1]);
const visible = (attributes: string) => {
  const fill = /fill="([^"]+)"/.exec(attributes)?.[1];
  const fillOpacity = Number(/fill-opacity="([^"]+)"/.exec(attributes)?.[1] ?? 1);
  const stroke = /stroke="([^"]+)"/.exec(attributes)?.[1];
  const filled = fill !== undefined && fill !== 'none' && fill !== 'transparent' && fillOpacity > 0;
  const stroked = stroke !== undefined && stroke !== 'none' && stroke !== 'transparent';
  // A line swatch ("M-10,0L10,0") shows only with a stroke.
  return /d="M-?\d+,0L\d+,0"/.test(attributes) ? stroked : filled || stroked;
};

/** The series each plot must name in a legend: the values of its colour (and dash) fields. */
const SERIES: Record<string, (rows: readonly Record<string, string | number>[]) => string[]> = {
  'affinity-threshold': (rows) => [...new Set(rows.filter((r) => r.rate !== undefined).map((r) => `${r.rate} req/s`))],
  saturation: (rows) => [...new Set(rows.map((r) => String(r.policy)))],
  staleness: (rows) => [...new Set(rows.map((r) => String(r.strategy)))],
  'long-context': (rows) => [...new Set(rows.map((r) => String(r.strategy))), 'one pool', 'segregated'],
  lora: (rows) => [...new Set(rows.map((r) => `${r.rate} req/s`))],
  priority: () => ['shedding on', 'shedding off'],
  'token-load': () => ['KV-usage valve', 'token valve + score'],
};

test('every experiment plot: no label cut off, and a visible legend swatch for every series', { timeout: 300_000 }, async () => {
  assert.equal(EXPERIMENTS.length, 7);
  for (const experiment of EXPERIMENTS) {
    const report = experiment.run({ seed: 1, scale: 0.001, log: () => {}, registry: builtinRegistry });
    assert.ok(report.plots.length > 0, `${experiment.name} has a plot`);
    for (const plot of report.plots) {
      const svg = await renderSvg(plot.spec);
      const cut = texts(svg).filter((t) => t.includes('…'));
      assert.deepEqual(cut, [], `${experiment.name}: labels cut off`);
      const labels = legendLabels(svg);
      const swatches = legendSwatches(svg);
      assert.equal(swatches.length, labels.length, `${experiment.name}: one swatch per legend entry`);
      swatches.forEach((swatch, i) => assert.ok(visible(swatch), `${experiment.name}: the swatch of "${labels[i]}" is invisible: ${swatch}`));
      for (const series of SERIES[experiment.name](report.rows))
        assert.ok(labels.includes(series), `${experiment.name}: no legend entry for "${series}" (legend: ${labels.join(', ')})`);
    }
  }
});

test('experiment C (saturation): each policy has one colour in every panel, and the old name still works', async () => {
  const experiment = experimentNamed('cascade');
  assert.equal(experiment?.name, 'saturation');
  const report = experiment!.run({ seed: 1, scale: 0.001, log: () => {}, registry: builtinRegistry });
  const svg = await renderSvg(report.plots[0].spec);
  const colours = new Map<string, Set<string>>();
  for (const m of svg.matchAll(/<path aria-label="[^"]*policy: ([^"]+)"[^>]*?(?:stroke|fill)="(#[0-9a-f]{6})"/g)) {
    const policy = decode(m[1]);
    if (!colours.has(policy)) colours.set(policy, new Set());
    colours.get(policy)!.add(m[2]);
  }
  assert.ok(colours.size >= 5, `marks of every policy found: ${[...colours.keys()].join(', ')}`);
  for (const [policy, set] of colours) assert.equal(set.size, 1, `${policy} is drawn in ${[...set].join(' and ')}`);
  // The timeline panels draw the first two policies: their legend names exactly those.
  const labels = legendLabels(svg);
  assert.equal(labels.filter((l) => l === 'exclude (power-of-two)').length, 2, 'the sweep legend and the timeline legend both name it');
});
