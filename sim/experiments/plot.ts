// Charts as SVG, rendered in Node: a vega-lite spec compiled to vega and
// drawn by a headless view (no canvas, no browser).
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

const CONFIG = {
  font: 'Helvetica, Arial, sans-serif',
  axis: { labelFontSize: 11, titleFontSize: 12, grid: true, gridColor: '#e5e5e5' },
  legend: { labelFontSize: 11, titleFontSize: 12, labelLimit: 400 },
  title: { fontSize: 14, anchor: 'start' as const },
  view: { stroke: '#ccc' },
};

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const full = { ...spec, config: { ...CONFIG, ...(spec as { config?: object }).config }, background: 'white' } as TopLevelSpec;
  const view = new View(parse(compile(full).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
