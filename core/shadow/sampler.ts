// Which requests the shadow policy decides again. At low rates every one
// (share 1 by default); "low" is up to `maxPerSecond` requests a second
// (default 200). Above that the share adapts: it becomes maxPerSecond divided
// by the last second's arrival rate, so the shadow decides about
// maxPerSecond requests a second however busy the router is. On top of that
// a hard cap on the shadow's own time: once its decisions took
// `maxBusyMsPerSecond` (default 50 ms, 5% of one core) in the current
// second, it skips the rest of that second. Sampling is evenly spread
// (error diffusion, not a coin), so a share of 0.25 is every 4th request.

export interface SamplerSettings {
  /** Share of requests to shadow at low rates, 0..1. Default 1. */
  readonly share: number;
  /** Most shadowed requests per second. Default 200. */
  readonly maxPerSecond: number;
  /** Most shadow decision time per second, ms. Default 50. */
  readonly maxBusyMsPerSecond: number;
}

export const DEFAULT_SAMPLER: SamplerSettings = Object.freeze({ share: 1, maxPerSecond: 200, maxBusyMsPerSecond: 50 });

export type SampleVerdict = 'shadow' | 'sampled_out' | 'over_budget';

export class ShadowSampler {
  settings: SamplerSettings;
  #second = -1;
  #arrivals = 0;
  #previousArrivals = 0;
  #shadowed = 0;
  #busyMs = 0;
  #credit = 0;

  constructor(settings: Partial<SamplerSettings> = {}) {
    this.settings = { ...DEFAULT_SAMPLER, ...settings };
  }

  /** Changes the settings from now on. */
  configure(settings: Partial<SamplerSettings>): void {
    this.settings = { ...this.settings, ...settings };
  }

  /** The share applied now: the setting, or less when the last second was busier than maxPerSecond. */
  get effectiveShare(): number {
    const { share, maxPerSecond } = this.settings;
    return Math.min(share, maxPerSecond / Math.max(1, this.#previousArrivals));
  }

  /** One arrival: shadow it or not. `nowMs` is any millisecond clock. */
  admit(nowMs: number): SampleVerdict {
    const second = Math.floor(nowMs / 1000);
    if (second !== this.#second) {
      // A second with no arrivals in between counts as quiet.
      this.#previousArrivals = second === this.#second + 1 ? this.#arrivals : 0;
      this.#second = second;
      this.#arrivals = 0;
      this.#shadowed = 0;
      this.#busyMs = 0;
    }
    this.#arrivals++;
    this.#credit += this.effectiveShare;
    if (this.#credit < 1) return 'sampled_out';
    this.#credit -= 1;
    if (this.#shadowed >= this.settings.maxPerSecond || this.#busyMs >= this.settings.maxBusyMsPerSecond) return 'over_budget';
    this.#shadowed++;
    return 'shadow';
  }

  /** Time one shadow decision took, ms: counted against the second's budget. */
  spent(ms: number): void {
    this.#busyMs += ms;
  }
}
