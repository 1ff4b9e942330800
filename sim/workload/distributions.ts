// Random draws for workloads: lengths, think times, turn counts, popularity.
// Every sampler takes the random source it draws from, so separate streams
// (arrivals, lengths, sessions) stay independent: changing one part of a
// workload does not reshuffle the others.

export type Random = () => number;

export interface Sampler {
  /** One draw. */
  sample(random: Random): number;
  /** The distribution's mean (after clamping, approximately). */
  readonly mean: number;
}

/** A distribution as a workload file writes it (checked by the schema first). */
export type DistributionSpec =
  | number
  | { type: 'fixed'; value: number }
  | { type: 'uniform'; min: number; max: number }
  | { type: 'lognormal'; median: number; mean?: number; p99?: number; sigma?: number; min?: number; max?: number }
  | { type: 'exponential'; mean: number }
  | { type: 'geometric'; mean: number }
  | { type: 'quantiles'; points: readonly (readonly [number, number])[] };

const Z99 = 2.3263478740408408;

/**
 * The lognormal's σ from its median and one more figure: σ given; or the mean
 * (mean = median·e^{σ²/2}); or the 99th percentile (p99 = median·e^{2.326σ}).
 */
export function lognormalSigma(spec: { median: number; mean?: number; p99?: number; sigma?: number }): number {
  if (spec.sigma !== undefined) return spec.sigma;
  if (spec.mean !== undefined) return Math.sqrt(2 * Math.log(spec.mean / spec.median));
  if (spec.p99 !== undefined) return Math.log(spec.p99 / spec.median) / Z99;
  return 0;
}

/** A standard normal draw (Box–Muller; two uniforms per draw keeps streams simple). */
export function normal(random: Random): number {
  let u = random();
  while (u === 0) u = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/** Gamma(shape k, scale 1) by Marsaglia–Tsang; k < 1 through the k+1 boost. */
export function gamma(shape: number, random: Random): number {
  if (shape < 1) {
    let u = random();
    while (u === 0) u = random();
    return gamma(shape + 1, random) * Math.pow(u, 1 / shape);
  }
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normal(random);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = random();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/** A sampler for `spec`; `integer` rounds draws to whole numbers of at least 1 (token counts, turns). */
export function sampler(spec: DistributionSpec, integer: boolean): Sampler {
  const base = rawSampler(spec);
  if (!integer) return base;
  return {
    mean: Math.max(1, base.mean),
    sample(random) {
      const x = Math.round(base.sample(random));
      return x < 1 ? 1 : x;
    },
  };
}

function rawSampler(spec: DistributionSpec): Sampler {
  if (typeof spec === 'number') return fixed(spec);
  switch (spec.type) {
    case 'fixed':
      return fixed(spec.value);
    case 'uniform': {
      const { min, max } = spec;
      return { mean: (min + max) / 2, sample: (random) => min + (max - min) * random() };
    }
    case 'lognormal': {
      const mu = Math.log(spec.median);
      const sigma = lognormalSigma(spec);
      const min = spec.min ?? 0;
      const max = spec.max ?? Infinity;
      return {
        mean: Math.min(max, Math.max(min, Math.exp(mu + (sigma * sigma) / 2))),
        sample(random) {
          const x = Math.exp(mu + sigma * normal(random));
          return x < min ? min : x > max ? max : x;
        },
      };
    }
    case 'exponential': {
      const mean = spec.mean;
      return { mean, sample: (random) => -mean * Math.log(1 - random()) };
    }
    case 'geometric': {
      // On 1, 2, 3, ...: P(k) = (1-p)^(k-1)·p with mean 1/p.
      const mean = spec.mean;
      const p = 1 / mean;
      const log1p = Math.log(1 - p);
      return { mean, sample: (random) => (p >= 1 ? 1 : 1 + Math.floor(Math.log(1 - random()) / log1p)) };
    }
    case 'quantiles':
      return quantileTable(spec.points);
  }
}

function fixed(value: number): Sampler {
  return { mean: value, sample: () => value };
}

/**
 * A distribution given by points of its quantile function, [probability,
 * value], interpolated linearly in between: the way to match a trace's
 * published mean, median and tail at once.
 */
export function quantileTable(points: readonly (readonly [number, number])[]): Sampler {
  const p = Float64Array.from(points, (pt) => pt[0]);
  const x = Float64Array.from(points, (pt) => pt[1]);
  let mean = 0;
  for (let i = 1; i < p.length; i++) mean += ((p[i] - p[i - 1]) * (x[i] + x[i - 1])) / 2;
  const last = p.length - 1;
  return {
    mean,
    sample(random) {
      const u = random();
      let i = 1;
      while (i < last && p[i] < u) i++;
      const span = p[i] - p[i - 1];
      return span <= 0 ? x[i] : x[i - 1] + ((x[i] - x[i - 1]) * (u - p[i - 1])) / span;
    },
  };
}

/**
 * Zipf popularity over n items: item i (0-based) is drawn with weight
 * 1/(i+1)^s. s = 0 is uniform; s ≈ 1 is the classic "a few prompts dominate".
 */
export class ZipfSampler {
  private readonly cdf: Float64Array;

  constructor(n: number, exponent: number) {
    this.cdf = new Float64Array(n);
    let total = 0;
    for (let i = 0; i < n; i++) this.cdf[i] = total += 1 / Math.pow(i + 1, exponent);
    for (let i = 0; i < n; i++) this.cdf[i] /= total;
  }

  sample(random: Random): number {
    const u = random();
    const cdf = this.cdf;
    let lo = 0;
    let hi = cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The share of draws that land on item i. */
  share(i: number): number {
    return this.cdf[i] - (i > 0 ? this.cdf[i - 1] : 0);
  }
}

/** A weighted choice among a few items. */
export class WeightedChoice<T> {
  private readonly cumulative: number[] = [];
  private readonly total: number;

  constructor(
    private readonly items: readonly T[],
    weights: readonly number[],
  ) {
    let total = 0;
    for (const w of weights) this.cumulative.push((total += w));
    this.total = total;
  }

  pick(random: Random): T {
    if (this.items.length === 1) return this.items[0];
    const point = random() * this.total;
    const cumulative = this.cumulative;
    for (let i = 0; i < cumulative.length; i++) if (point < cumulative[i]) return this.items[i];
    return this.items[this.items.length - 1];
  }
}

/**
 * The Azure LLM inference trace 2023 (conversation) as quantile tables:
 * input tokens mean 1155 / median 1020 / p99 4142, output mean 211 /
 * median 129 / p99 601. Between the published points the tables are
 * piecewise linear, with the middle point chosen to hit the mean.
 */
export const AZURE_CONVERSATION = {
  prompt: {
    type: 'quantiles',
    points: [
      [0, 20],
      [0.1, 450],
      [0.5, 1020],
      [0.9, 1573],
      [0.99, 4142],
      [1, 8192],
    ],
  },
  output: {
    type: 'quantiles',
    points: [
      [0, 1],
      [0.5, 129],
      [0.8, 374],
      [0.99, 601],
      [1, 1500],
    ],
  },
} as const satisfies Record<string, DistributionSpec>;
