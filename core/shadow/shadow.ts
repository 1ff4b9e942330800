// The shadow policy: a second policy, loaded, validated and hot-reloaded by
// its own PolicyStore (a separate snapshot, with its own strategy instances,
// candidate caches and pick budgets), that decides a sampled share of the
// live requests again without acting on them. Nothing it does reaches the
// live generation: it never takes quota (its quota view only reads), never
// calls the live strategies, never sends anything upstream, and it runs in
// setImmediate after the live decision was committed, never on the request's
// path. Its own strategies hear where the shadow would have sent each
// request (commit() on the shadow's snapshot), so a shadow identical to the
// live policy decides identically. Differences are counted by step, rule and
// strategy (metrics, /admin/shadow) and kept as samples side by side.
// docs/changing-policy.md explains how to use it.
import { seededRandom, type KvIndexView, type Logger } from '../../sdk/index.ts';
import type { AnyStrategy } from '../plugins/registry.ts';
import { commit } from '../decide/commit.ts';
import { decide } from '../decide/decide.ts';
import { chosen, type Decision } from '../decide/decision.ts';
import type { DecideEnv } from '../decide/env.ts';
import type { QuotaCost, QuotaLimits, QuotaStore, QuotaVerdict } from '../decide/quota.ts';
import { formatProblem, PolicyError } from '../diagnostics/problem.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { FleetView } from '../fleet/types.ts';
import { redactSecrets } from '../observe/secrets.ts';
import type { PluginLoader } from '../plugins/loader.ts';
import { PolicyStore, type ReloadOutcome } from '../decide/store.ts';
import type { Generation } from '../decide/generation.ts';
import type { RequestObserver } from '../serve/request-observer.ts';
import { compareSides, decisionSide, describePair, type DecisionSide, type StepDifference } from './compare.ts';
import { RandomTape } from './random-tape.ts';
import { ShadowSampler, type SamplerSettings } from './sampler.ts';
import { ShadowStats, type ShadowSample } from './stats.ts';
import type { ShadowMetrics } from './shadow-metrics.ts';

export interface ShadowOptions {
  /** The strategies: the built-ins (the shadow gets a loader of its own) or a loader to share. */
  readonly builtins?: readonly AnyStrategy[];
  readonly loader?: PluginLoader;
  readonly kvIndex?: KvIndexView;
  readonly log?: Logger;
  readonly sampling?: Partial<SamplerSettings>;
  /** Watcher quiet time, ms (PolicyStore's). */
  readonly debounceMs?: number;
  /** Watch the shadow directory for changes (default true). */
  readonly watch?: boolean;
}

/** What setting the shadow policy answered. */
export type ShadowSetResult =
  | { readonly result: 'live'; readonly dir: string; readonly generation: number }
  | { readonly result: 'refused'; readonly dir: string; readonly errors: readonly string[]; readonly kept?: string };

export class Shadow implements RequestObserver {
  readonly #options: ShadowOptions;
  readonly sampler: ShadowSampler;
  readonly #tape = new RandomTape();
  readonly #stats = new ShadowStats();
  #store?: PolicyStore;
  #since?: number;
  #fleet: FleetView = { replica: () => undefined };
  #quota?: QuotaStore;
  #metrics?: ShadowMetrics;
  #setting: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(options: ShadowOptions = {}) {
    this.#options = options;
    this.sampler = new ShadowSampler(options.sampling);
  }

  /** The shadow directory, or undefined when off. */
  get dir(): string | undefined {
    return this.#store?.dir;
  }

  /** The shadow's live snapshot, when on. */
  current(): Generation | undefined {
    return this.#store?.current();
  }

  /**
   * Joins the router: the live fleet and quota to read, the metrics to count
   * in. Returns the env the live decisions should use: the same, with its
   * random draws taped so that the shadow draws what the live decision drew.
   */
  attach(live: { readonly env: DecideEnv; readonly fleet: FleetView; readonly metrics?: ShadowMetrics }): DecideEnv {
    this.#fleet = live.fleet;
    this.#quota = live.env.quota;
    this.#metrics = live.metrics;
    return { ...live.env, random: this.#tape.wrap(live.env.random) };
  }

  /** Loads `dir` as the shadow policy (replacing the current one only if it is valid) and watches it. */
  set(dir: string): Promise<ShadowSetResult> {
    const run = this.#setting.then(() => this.#set(dir));
    this.#setting = run.catch(() => {});
    return run;
  }

  /** Turns the shadow off. */
  clear(): Promise<void> {
    const run = this.#setting.then(async () => {
      const old = this.#store;
      this.#store = undefined;
      this.#since = undefined;
      await old?.close();
    });
    this.#setting = run.catch(() => {});
    return run;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.clear();
  }

  decided(facts: RequestFacts, decision: Decision): void {
    const store = this.#store;
    // The draws belong to this decision whether or not it is shadowed.
    const draws = this.#tape.take();
    if (!store) return;
    const verdict = this.sampler.admit(performance.now());
    if (verdict !== 'shadow') {
      this.#stats.skipped(verdict);
      this.#metrics?.decisions.inc({ result: verdict });
      return;
    }
    setImmediate(() => this.#run(store, facts, decision, draws));
  }

  /** The rolling summary /admin/shadow answers. */
  summary(): Record<string, unknown> {
    const store = this.#store;
    const status = store?.status();
    return {
      state: store ? 'on' : 'off',
      dir: store?.dir ?? null,
      since: this.#since === undefined ? null : new Date(this.#since).toISOString(),
      policy: status
        ? {
            generation: status.generation,
            hash: status.hash,
            loadedAt: status.loadedAt,
            lastReload: status.lastReload ? { result: status.lastReload.result, at: status.lastReload.at, errors: status.lastReload.errors } : null,
            disk: status.disk,
            watching: status.watching,
          }
        : null,
      sampling: { ...this.sampler.settings, effectiveShare: Math.round(this.sampler.effectiveShare * 1000) / 1000 },
      ...this.#stats.summary(),
    };
  }

  /** The newest differing decisions side by side, at most `limit`. */
  samples(limit: number): readonly ShadowSample[] {
    return this.#stats.samples(limit);
  }

  async #set(dir: string): Promise<ShadowSetResult> {
    if (this.#closed) return { result: 'refused', dir, errors: ['the router is shutting down'] };
    const { builtins, loader } = this.#options;
    let store: PolicyStore;
    try {
      store = await PolicyStore.open({
        dir,
        ...(loader ? { loader } : { builtins: builtins ?? [] }),
        seed: Date.now(),
        log: this.#options.log,
        kvIndex: this.#options.kvIndex,
        debounceMs: this.#options.debounceMs,
      });
    } catch (error) {
      const errors = error instanceof PolicyError ? error.problems.map(formatProblem) : [redactSecrets((error as Error)?.message ?? String(error))];
      this.#options.log?.warn(`shadow policy ${dir} refused${this.#store ? `; keeping ${this.#store.dir}` : ''}`, { errors });
      return { result: 'refused', dir, errors, kept: this.#store?.dir };
    }
    if (this.#options.watch !== false) await store.watch();
    store.on('reload', (outcome: ReloadOutcome) => this.#metrics?.reloads.inc({ result: outcome.result }));
    const old = this.#store;
    this.#store = store;
    this.#since = Date.now();
    this.#stats.reset();
    await old?.close();
    this.#options.log?.info(`shadow policy ${store.dir} on (generation ${store.current().generation})`);
    return { result: 'live', dir: store.dir, generation: store.current().generation };
  }

  #run(store: PolicyStore, facts: RequestFacts, live: Decision, draws: readonly number[]): void {
    if (store !== this.#store) return; // replaced or cleared meanwhile
    const lease = store.acquire();
    const started = performance.now();
    let shadow: Decision;
    try {
      const env = this.#env(live, draws);
      shadow = decide(facts, lease.snapshot, this.#fleet, env);
      // The shadow's own strategies and budgets only; its quota view takes nothing.
      commit(shadow, env, { onFault: (_pool, strategy, fault) => this.#metrics?.strategyFaults.inc({ strategy, fault }) });
    } catch (error) {
      const ms = performance.now() - started;
      this.sampler.spent(ms);
      const message = redactSecrets((error as Error)?.message ?? String(error)).slice(0, 500);
      this.#stats.failed(facts.requestId, message);
      this.#metrics?.decisions.inc({ result: 'failed' });
      return;
    } finally {
      lease.release();
    }
    const ms = performance.now() - started;
    this.sampler.spent(ms);
    this.#metrics?.decideSeconds.observe(ms / 1000);
    const liveSide: DecisionSide = decisionSide(live);
    const shadowSide = decisionSide(shadow);
    const differences: StepDifference[] = compareSides(liveSide, shadowSide);
    // The side-by-side text only for a difference: it is kept as a sample.
    this.#stats.add(
      {
        requestId: facts.requestId,
        at: Date.now(),
        live: liveSide,
        shadow: shadowSide,
        differences,
        text: differences.length ? describePair(liveSide, shadowSide, differences) : '',
      },
      ms,
    );
    this.#metrics?.decisions.inc({ result: differences.length ? 'differs' : 'same' });
    for (const d of differences) this.#metrics?.differences.inc({ step: d.step, live: d.live, shadow: d.shadow });
  }

  /** The shadow's env: the live clocks, the live decision's random draw, the live quota read as it was before this request took its share. */
  #env(live: Decision, draws: readonly number[]): DecideEnv {
    return new ShadowEnv(this.#quota, live, draws);
  }
}

/**
 * A class, not an object of closures: one is made per shadowed request, and
 * methods cost no allocation. Its quota only reads: take() does nothing.
 */
class ShadowEnv implements DecideEnv, QuotaStore {
  readonly quota: QuotaStore = this;
  readonly #live?: QuotaStore;
  readonly #tenant?: string;
  readonly #taken?: QuotaCost;
  readonly #draws: readonly number[];
  #next = 0;
  #fallback?: () => number;
  readonly #requestId: string;

  constructor(live: QuotaStore | undefined, decision: Decision, draws: readonly number[]) {
    this.#live = live;
    this.#tenant = chosen(decision).tenant;
    this.#taken = decision.ok ? decision.handles.charge : undefined;
    this.#draws = draws;
    this.#requestId = chosen(decision).requestId;
  }

  now(): number {
    return Date.now();
  }

  clock(): number {
    return performance.now();
  }

  // decide() may pass these on detached (env.clock is): none of the three may rely on `this` but random, an arrow.
  readonly random = (): number => {
    if (this.#next < this.#draws.length) return this.#draws[this.#next++];
    return (this.#fallback ??= seededRandom(this.#requestId))();
  };

  check(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): QuotaVerdict {
    if (!this.#live) return FITS;
    return this.#live.check(tenant, tenant === this.#tenant && this.#taken ? minus(cost, this.#taken) : cost, limits, now);
  }

  take(): void {}
}

const FITS: QuotaVerdict = Object.freeze({ ok: true });

/** What a cost would need beyond what the live request took from the same bucket (check() of the difference answers "before the take"). */
function minus(cost: QuotaCost, taken: QuotaCost): QuotaCost {
  return { requests: cost.requests - taken.requests, tokens: cost.tokens - taken.tokens };
}
