// Charts as SVG, rendered in Node: a vega-lite spec compiled to vega and
// drawn by a headless view (no canvas, no browser). vega and vega-lite are
// development dependencies (a quarter of node_modules, needed by nothing but
// `switchyard experiment`): they load here, on the first plot, and a
// production install without them gets a message that says what to install.
import type { TopLevelSpec } from 'vega-lite';
import { SimError } from '../simulator/errors.ts';

type Plotter = { vega: typeof import('vega'); vegaLite: typeof import('vega-lite') };
let plotter: Promise<Plotter> | undefined;

/** vega and vega-lite, loaded once; a SimError naming the packages when they are not installed. */
export function loadPlotter(): Promise<Plotter> {
  plotter ??= Promise.all([import('vega'), import('vega-lite')]).then(
    ([vega, vegaLite]) => ({ vega, vegaLite }),
    (error: unknown) => {
      plotter = undefined;
      const code = (error as { code?: string }).code;
      if (code !== 'ERR_MODULE_NOT_FOUND') throw error;
      throw new SimError(
        'plots need the vega and vega-lite packages, which a production install (npm ci --omit=dev) leaves out: ' +
          'run `npm ci` (with dev dependencies) in the Switchyard checkout, or `npm install --no-save vega@5.33.1 vega-lite@5.23.0`',
      );
    },
  );
  return plotter;
}

const CONFIG = {
  font: 'Helvetica, Arial, sans-serif',
  axis: { labelFontSize: 11, titleFontSize: 12, grid: true, gridColor: '#e5e5e5' },
  legend: { labelFontSize: 11, titleFontSize: 12, labelLimit: 400 },
  title: { fontSize: 14, anchor: 'start' as const },
  view: { stroke: '#ccc' },
};

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const full = { ...spec, config: { ...CONFIG, ...(spec as { config?: object }).config }, background: 'white' } as TopLevelSpec;
  const { vega, vegaLite } = await loadPlotter();
  const view = new vega.View(vega.parse(vegaLite.compile(full).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
