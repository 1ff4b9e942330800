// What /admin/shadow shows: counts since the shadow policy was set, a
// rolling window over the last WINDOW shadowed requests (by step, and the
// most frequent "what decided it live → in the shadow" pairs), the cost of a
// shadow decision, and the newest differing decisions side by side. All of
// it bounded: fixed rings, at most MAX_PAIRS distinct pairs counted.
import { SHADOW_STEPS, type DecisionSide, type ShadowStep, type StepDifference } from './compare.ts';

export interface ShadowSample {
  readonly requestId: string;
  /** Epoch ms. */
  readonly at: number;
  readonly live: DecisionSide;
  readonly shadow: DecisionSide;
  readonly differences: readonly StepDifference[];
  /** "live: general / r2 by session-affinity; shadow: long / l0 by rule ..." */
  readonly text: string;
}

const WINDOW = 1000;
const SAMPLES = 100;
const MAX_PAIRS = 500;

export class ShadowStats {
  #shadowed = 0;
  #same = 0;
  #differs = 0;
  #failed = 0;
  #skipped = { sampled_out: 0, over_budget: 0 };
  #byStep: Record<ShadowStep, number> = { model: 0, pool: 0, replica: 0, admission: 0 };
  #pairs = new Map<string, number>();
  #lastError?: { requestId: string; message: string; at: number };
  /** The window: each entry the differences of one shadowed request (empty: same). */
  #window: (readonly StepDifference[] | undefined)[] = new Array(WINDOW);
  #windowNext = 0;
  #costs = new Float64Array(WINDOW);
  #costCount = 0;
  #samples: (ShadowSample | undefined)[] = new Array(SAMPLES);
  #samplesNext = 0;
  #sampleCount = 0;

  reset(): void {
    this.#shadowed = this.#same = this.#differs = this.#failed = 0;
    this.#skipped = { sampled_out: 0, over_budget: 0 };
    this.#byStep = { model: 0, pool: 0, replica: 0, admission: 0 };
    this.#pairs = new Map();
    this.#lastError = undefined;
    this.#window = new Array(WINDOW);
    this.#windowNext = 0;
    this.#costs = new Float64Array(WINDOW);
    this.#costCount = 0;
    this.#samples = new Array(SAMPLES);
    this.#samplesNext = 0;
    this.#sampleCount = 0;
  }

  skipped(reason: 'sampled_out' | 'over_budget'): void {
    this.#skipped[reason]++;
  }

  failed(requestId: string, message: string): void {
    this.#failed++;
    this.#lastError = { requestId, message, at: Date.now() };
  }

  add(sample: ShadowSample, costMs: number): void {
    this.#shadowed++;
    this.#costs[this.#costCount++ % WINDOW] = costMs;
    this.#window[this.#windowNext] = sample.differences;
    this.#windowNext = (this.#windowNext + 1) % WINDOW;
    if (sample.differences.length === 0) {
      this.#same++;
      return;
    }
    this.#differs++;
    for (const d of sample.differences) {
      this.#byStep[d.step]++;
      const key = `${d.step}\0${d.live}\0${d.shadow}`;
      if (this.#pairs.has(key) || this.#pairs.size < MAX_PAIRS) this.#pairs.set(key, (this.#pairs.get(key) ?? 0) + 1);
    }
    this.#samples[this.#samplesNext] = sample;
    this.#samplesNext = (this.#samplesNext + 1) % SAMPLES;
    this.#sampleCount = Math.min(SAMPLES, this.#sampleCount + 1);
  }

  samples(limit: number): ShadowSample[] {
    const out: ShadowSample[] = [];
    for (let i = 1; i <= Math.min(limit, this.#sampleCount); i++) out.push(this.#samples[(this.#samplesNext - i + SAMPLES) % SAMPLES]!);
    return out;
  }

  summary(): Record<string, unknown> {
    const recent = { requests: 0, same: 0, differs: 0, byStep: { model: 0, pool: 0, replica: 0, admission: 0 } as Record<ShadowStep, number> };
    for (const differences of this.#window) {
      if (differences === undefined) continue;
      recent.requests++;
      if (differences.length === 0) recent.same++;
      else recent.differs++;
      for (const d of differences) recent.byStep[d.step]++;
    }
    const costs = [...this.#costs.subarray(0, Math.min(WINDOW, this.#costCount))].sort((a, b) => a - b);
    const at = (q: number) => (costs.length ? Math.round(costs[Math.min(costs.length - 1, Math.floor(q * costs.length))] * 1000) : null);
    const top = [...this.#pairs.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 20)
      .map(([key, count]) => {
        const [step, live, shadow] = key.split('\0');
        return { step, live, shadow, count };
      });
    return {
      totals: { shadowed: this.#shadowed, same: this.#same, differs: this.#differs, failed: this.#failed, ...this.#skipped, byStep: { ...this.#byStep } },
      recent: { ...recent, differsShare: recent.requests ? Math.round((recent.differs / recent.requests) * 1000) / 1000 : null },
      topDifferences: top,
      costMicros: { p50: at(0.5), p99: at(0.99), max: costs.length ? Math.round(costs[costs.length - 1] * 1000) : null, over: costs.length },
      lastError: this.#lastError ? { ...this.#lastError, at: new Date(this.#lastError.at).toISOString() } : null,
      steps: SHADOW_STEPS,
    };
  }
}
