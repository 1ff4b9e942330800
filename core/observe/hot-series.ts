// Counters and histograms updated on every request. prom-client's inc() and
// observe() hash and validate the label object on every call, and a
// histogram finds its bucket through number-keyed properties: ~4 µs a request
// for the router's six updates, most of the metrics' cost. Here each label
// tuple's series is looked up once, by its label values, and then updated in
// place. The series are prom-client's own objects, so /metrics, reset() and
// remove() see exactly what was counted.
import { Counter, Histogram } from 'prom-client';

/** A series as prom-client keeps it (lib/counter.js, lib/histogram.js). */
interface CounterSeries {
  value: number;
  readonly labels: Record<string, string>;
}
interface HistogramSeries {
  sum: number;
  count: number;
  readonly labels: Record<string, string>;
  readonly bucketValues: Record<string, number>;
}

/** prom-client's store of a metric's series, by its label hash (not in its types). */
type Store<S> = { hashMap: Record<string, S>; labelNames: readonly string[] };

/** Series by label values, one Map level per label (up to three labels: no key string is built). */
class SeriesIndex<S> {
  private root = new Map<string, unknown>();
  private only: S | undefined;

  constructor(private readonly depth: number) {
    if (depth > 3) throw new Error('hot series take at most three labels');
  }

  get(a: string | undefined, b: string | undefined, c: string | undefined): S | undefined {
    if (this.depth === 0) return this.only;
    const x = this.root.get(a!);
    if (this.depth === 1 || x === undefined) return x as S | undefined;
    const y = (x as Map<string, unknown>).get(b!);
    if (this.depth === 2 || y === undefined) return y as S | undefined;
    return (y as Map<string, unknown>).get(c!) as S | undefined;
  }

  set(a: string | undefined, b: string | undefined, c: string | undefined, series: S): void {
    if (this.depth === 0) {
      this.only = series;
      return;
    }
    const keys = [a!, b!, c!];
    let level = this.root;
    for (let i = 0; i < this.depth - 1; i++) {
      let next = level.get(keys[i]) as Map<string, unknown> | undefined;
      if (next === undefined) level.set(keys[i], (next = new Map()));
      level = next;
    }
    level.set(keys[this.depth - 1], series);
  }

  clear(): void {
    this.root = new Map();
    this.only = undefined;
  }
}

/** The series of these label values in prom-client's store, made there (by `create`) if it is not. */
function seriesOf<S extends { labels: Record<string, string> }>(
  metric: Store<S>,
  values: readonly (string | undefined)[],
  create: (labels: Record<string, string>) => void,
): S {
  const names = metric.labelNames;
  const labels: Record<string, string> = {};
  for (let i = 0; i < names.length; i++) labels[names[i]] = values[i]!;
  create(labels); // prom-client's own path: validates the labels and makes the series at 0
  for (const key in metric.hashMap) {
    const series = metric.hashMap[key];
    let same = true;
    for (let i = 0; i < names.length && same; i++) same = String(series.labels[names[i]]) === labels[names[i]];
    if (same) return series;
  }
  throw new Error('prom-client did not make the series');
}

/** A counter whose hot path is `add(by, ...label values in labelNames order)`; inc() works as ever. */
export class HotCounter<T extends string = string> extends Counter<T> {
  private index: SeriesIndex<CounterSeries> | undefined;

  /** Adds `by` (≥ 0) to the series of these label values, given in `labelNames` order. */
  add(by: number, a?: string, b?: string, c?: string): void {
    if (!(by >= 0) || by === Infinity) throw new Error(`A counter is increased by a finite amount ≥ 0, not ${by}`);
    const index = (this.index ??= new SeriesIndex((this as unknown as Store<CounterSeries>).labelNames.length));
    let series = index.get(a, b, c);
    if (series === undefined) {
      series = seriesOf(this as unknown as Store<CounterSeries>, [a, b, c], (labels) => this.inc(labels as never, 0));
      index.set(a, b, c, series);
    }
    series.value += by;
  }

  override reset(): void {
    super.reset();
    this.index?.clear(); // prom-client's constructor calls reset() before this class's fields exist
  }

  override remove(...args: unknown[]): void {
    (Counter.prototype.remove as (...a: unknown[]) => void).apply(this, args);
    this.index?.clear();
  }
}

/** A histogram whose hot path is `record(value, ...label values in labelNames order)`; observe() works as ever. */
export class HotHistogram<T extends string = string> extends Histogram<T> {
  private index: SeriesIndex<HistogramSeries> | undefined;
  /** The buckets' upper bounds, and the property names prom-client keeps their counts under. */
  private bounds: readonly number[] | undefined;
  private boundKeys: readonly string[] | undefined;

  /** Observes `value` in the series of these label values, given in `labelNames` order. */
  record(value: number, a?: string, b?: string, c?: string): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const store = this as unknown as Store<HistogramSeries> & { upperBounds: readonly number[] };
    const index = (this.index ??= new SeriesIndex(store.labelNames.length));
    let series = index.get(a, b, c);
    if (series === undefined) {
      series = seriesOf(store, [a, b, c], (labels) => this.zeroIfAbsent(labels));
      index.set(a, b, c, series);
    }
    const bounds = (this.bounds ??= store.upperBounds);
    const keys = (this.boundKeys ??= bounds.map(String));
    series.sum += value;
    series.count += 1;
    // Past the last bound, only the count (+Inf) and sum grow: prom-client's rule.
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]) {
        series.bucketValues[keys[i]] += 1;
        break;
      }
    }
  }

  /** Makes the series at zero, unless it has counts already. */
  private zeroIfAbsent(labels: Record<string, string>): void {
    const store = this as unknown as Store<HistogramSeries>;
    const names = store.labelNames;
    for (const key in store.hashMap) {
      const series = store.hashMap[key];
      if (names.every((name) => String(series.labels[name]) === labels[name])) return;
    }
    this.zero(labels as never);
  }

  override reset(): void {
    super.reset();
    this.index?.clear();
  }

  override remove(...args: unknown[]): void {
    (Histogram.prototype.remove as (...a: unknown[]) => void).apply(this, args);
    this.index?.clear();
  }

  override zero(...args: Parameters<Histogram<T>['zero']>): void {
    super.zero(...args);
    this.index?.clear();
  }
}
