// The conformance suite: what the router assumes of every strategy, checked
// against a seeded, varied workload. A strategy that fails a check here is
// one the router would skip (or worse) in production.
import { AssertionError } from 'node:assert';
import { Ajv } from 'ajv';
import { leastLoaded } from '../load-score.ts';
import { chainBlockHashes, prefixSeed } from '../prefix.ts';
import { seededRandom } from '../random.ts';
import { isPass, type Candidate, type PickResult, type ReplicaPick, type RoutedRequest, type StrategyDefinition, type StrategyInstance } from '../types.ts';
import { definitionProblems, sdkRangeProblem } from '../definition-checks.ts';
import { candidate, context, request, type TestContext } from './fixtures.ts';

export type ConformanceCheck =
  | 'shape'
  | 'sdk-range'
  | 'config-defaults'
  | 'create'
  | 'empty-fleet'
  | 'single-candidate'
  | 'given-candidates-only'
  | 'hooks'
  | 'deterministic'
  | 'budget'
  | 'dispose'
  | 'state-handover';

export interface ConformanceFailure {
  readonly check: ConformanceCheck;
  readonly message: string;
}

export interface ConformanceOptions {
  /** The strategy's config, as a policy would give it; defaults are filled in from its configSchema. */
  readonly config?: Record<string, unknown>;
  /** Seeds the strategy's random source. Default 1. */
  readonly seed?: number | string;
  /** Wall-clock budget of one pick, ms: the router's default is 1. */
  readonly budgetMs?: number;
  /** Which percentile of pick times must stay under the budget. Default 99: one slow pick in a hundred (GC, a busy CI machine) is noise. */
  readonly budgetPercentile?: number;
  /** Picks timed for the budget. Default 2000. */
  readonly budgetPicks?: number;
  /** Requests in the workload the other checks replay. Default 300. */
  readonly steps?: number;
}

/** Pick-time percentiles of one instance over a heavy workload (16 candidates, 256-block prefixes), ms. */
export interface PickTiming {
  readonly picks: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** The percentile asked for (budgetPercentile). */
  readonly percentile: number;
  readonly atPercentile: number;
}

const ADAPTERS = ['adapter-a', 'adapter-b', 'adapter-c'];

/** Runs every check; returns the failures, empty when the strategy conforms. Never throws. */
export function runConformance(definition: StrategyDefinition<unknown>, options: ConformanceOptions = {}): ConformanceFailure[] {
  const failures: ConformanceFailure[] = [];
  const fail = (check: ConformanceCheck, message: string) => failures.push({ check, message });

  const shape = definitionProblems(definition);
  if (shape.length) {
    for (const message of shape) fail('shape', message);
    return failures;
  }
  const range = sdkRangeProblem(definition);
  if (range) fail('sdk-range', range);

  const resolved = resolveConfig(definition, options.config);
  if (resolved.problems.length) {
    for (const message of resolved.problems) fail('config-defaults', message);
    return failures;
  }
  const config = resolved.config;
  const seed = options.seed ?? 1;
  const steps = options.steps ?? 300;

  const make = (ctx: TestContext): StrategyInstance | undefined => {
    try {
      const instance = definition.create(structuredClone(config), ctx);
      if (instance === null || typeof instance !== 'object' || typeof instance.pick !== 'function') {
        fail('create', 'create() must return an object with a pick(request, candidates) function');
        return undefined;
      }
      return instance;
    } catch (error) {
      fail('create', `create() threw: ${messageOf(error)}`);
      return undefined;
    }
  };

  // Zero and one candidate.
  const edge = make(context({ seed }));
  if (!edge) return failures;
  checkEdges(edge, fail);

  // The workload, twice on fresh instances with the same seed: only given candidates, same picks.
  const workload = buildWorkload(steps);
  const firstCtx = context({ seed });
  const secondCtx = context({ seed });
  const first = replay(make(firstCtx), firstCtx, workload, fail, true);
  const second = replay(make(secondCtx), secondCtx, workload, () => {}, false);
  if (first && second) {
    const at = first.picks.findIndex((pick, i) => pick !== second.picks[i]);
    if (at >= 0) {
      fail(
        'deterministic',
        `same seed, different picks: request ${at} got ${first.picks[at]} then ${second.picks[at]} (use ctx.random and ctx.now, not Math.random or Date.now)`,
      );
    }
  }

  // Budget.
  const timed = make(context({ seed }));
  if (timed) {
    const budgetMs = options.budgetMs ?? 1;
    const measure = () =>
      safely(
        () => measurePickTime(timed, { picks: options.budgetPicks, percentile: options.budgetPercentile }),
        (error) => fail('budget', `timing run threw: ${messageOf(error)}`),
      );
    let timing = measure();
    // A busy machine (descheduling, another process's burst) slows the tail, a
    // slow strategy its median: with a fast median, two more rounds, the best counts.
    for (let round = 1; round < 3 && timing && timing.atPercentile > budgetMs && timing.p50 < budgetMs / 4; round++) {
      const again = measure();
      if (again && again.atPercentile < timing.atPercentile) timing = again;
    }
    if (timing && timing.atPercentile > budgetMs) {
      fail(
        'budget',
        `p${timing.percentile} pick time ${timing.atPercentile.toFixed(3)} ms is over the ${budgetMs} ms budget (p50 ${timing.p50.toFixed(3)} ms, max ${timing.max.toFixed(3)} ms over ${timing.picks} picks of 16 candidates)`,
      );
    }
    disposeTwice(timed, fail);
  }

  // Dispose, on an instance that worked and on one that never picked.
  if (first) disposeTwice(first.instance, fail);
  disposeTwice(edge, fail);

  // State handed over on a reload, and state it doesn't recognize (an older version's).
  if (second) {
    if (second.instance.exportState) {
      const state = safely(
        () => second.instance.exportState!(),
        (error) => fail('state-handover', `exportState() threw: ${messageOf(error)}`),
      );
      const successorCtx = context({ seed, previousState: state });
      const successor = make(successorCtx);
      if (successor) {
        replay(
          successor,
          successorCtx,
          workload.slice(0, 50),
          (check, message) => fail(check === 'given-candidates-only' ? 'state-handover' : check, `after a handover: ${message}`),
          true,
        );
        disposeTwice(successor, fail);
      }
    }
    const stranger = safely(
      () => definition.create(structuredClone(config), context({ seed, previousState: { from: 'an unknown version', seen: 42 } })),
      (error) => fail('state-handover', `create() threw on a previousState it doesn't recognize (treat it as unknown): ${messageOf(error)}`),
    );
    if (stranger) disposeTwice(stranger, () => {});
    disposeTwice(second.instance, () => {});
  }
  // Several instances may fail the same way (dispose, say): report it once.
  const seen = new Set<string>();
  return failures.filter((f) => !seen.has(`${f.check}\0${f.message}`) && seen.add(`${f.check}\0${f.message}`));
}

/** Runs the suite and throws an AssertionError listing every failure: for node:test, jest, vitest alike. */
export function assertConformance(definition: StrategyDefinition<unknown>, options: ConformanceOptions = {}): void {
  const failures = runConformance(definition, options);
  if (failures.length === 0) return;
  const name = (definition as { name?: unknown })?.name ?? '(unnamed)';
  throw new AssertionError({
    message: `strategy ${String(name)} fails ${failures.length} conformance check${failures.length === 1 ? '' : 's'}:\n${failures.map((f) => `  - ${f.check}: ${f.message}`).join('\n')}`,
    actual: failures,
    expected: [],
    operator: 'runConformance',
  });
}

/**
 * The replica pick in what `pick()` returned: an AssertionError when the
 * strategy passed or returned nothing. For tests: `expectPick(result).replica`.
 */
export function expectPick(result: PickResult): ReplicaPick {
  if (result != null && !isPass(result) && typeof result.replica === 'string') return result;
  throw new AssertionError({
    message:
      result == null
        ? `the strategy returned ${result}, not a pick`
        : isPass(result)
          ? `the strategy passed: ${result.reason}`
          : 'the strategy returned no replica',
    actual: result,
    expected: 'a pick { replica, reason }',
    operator: 'expectPick',
  });
}

/**
 * The strategy's config with its schema's defaults filled in, validated as the
 * router validates it (ajv, defaults on, all errors).
 */
export function resolveConfig<Config>(
  definition: StrategyDefinition<Config>,
  config: Partial<Config> | Record<string, unknown> = {},
): { config: Config; problems: string[] } {
  const filled = structuredClone(config) as Config & Record<string, unknown>;
  if (!definition.configSchema) return { config: filled, problems: [] };
  let validate;
  try {
    const { $id: _ignored, ...schema } = definition.configSchema as { $id?: string };
    validate = new Ajv({ allErrors: true, useDefaults: true, strict: false }).compile(schema);
  } catch (error) {
    return { config: filled, problems: [`configSchema is not a valid JSON Schema: ${messageOf(error)}`] };
  }
  if (validate(filled)) return { config: filled, problems: [] };
  const given = Object.keys(config).length ? `config ${JSON.stringify(config)}` : 'the defaults (an empty config)';
  return {
    config: filled,
    problems: (validate.errors ?? []).map((e) => `${given} fails the configSchema: ${e.instancePath || '(config)'} ${e.message}`),
  };
}

/** Times `picks` picks of one instance (after a warm-up), feeding onRouted as the router would. */
export function measurePickTime(instance: StrategyInstance, options: { picks?: number; percentile?: number } = {}): PickTiming {
  const picks = options.picks ?? 2000;
  const percentile = options.percentile ?? 99;
  const random = seededRandom('budget');
  const candidates = freezeAll(Array.from({ length: 16 }, (_, i) => randomCandidate(`b${i}`, random)));
  const requests = freezeAll(
    Array.from({ length: 64 }, (_, i) =>
      request({
        id: `budget-${i}`,
        conversationId: `conv-${i % 24}`,
        adapter: i % 3 === 0 ? ADAPTERS[i % ADAPTERS.length] : undefined,
        // 256 blocks: the router's most; a long shared system prompt, then the conversation.
        prefixHashes: chainBlockHashes(
          Array.from({ length: 256 }, (_, b) => (b < 64 ? b : i * 1000 + b)),
          'test-model',
        ),
      }),
    ),
  );
  const fallback = leastLoaded(candidates).best!;
  const times: number[] = [];
  const warmUp = Math.min(200, picks);
  for (let n = 0; n < warmUp + picks; n++) {
    const req = requests[n % requests.length];
    const started = performance.now();
    const result = instance.pick(req, candidates);
    const elapsed = performance.now() - started;
    if (n >= warmUp) times.push(elapsed);
    // The router tells every strategy of the chain where the request went, whoever picked.
    instance.onRouted?.(req, result && !isPass(result) && typeof result.replica === 'string' ? result.replica : fallback.id);
  }
  times.sort((a, b) => a - b);
  const at = (p: number) => times[Math.min(times.length - 1, Math.ceil((p / 100) * times.length) - 1)] ?? 0;
  return { picks, p50: at(50), p99: at(99), max: times[times.length - 1] ?? 0, percentile, atPercentile: at(percentile) };
}

// ---------------------------------------------------------------------------

interface Step {
  readonly request: RoutedRequest;
  readonly candidates: readonly Candidate[];
}

/** Varied requests over varied subsets of a 12-replica fleet, the same every run. */
function buildWorkload(steps: number): Step[] {
  const random = seededRandom('conformance-workload');
  const ids = Array.from({ length: 12 }, (_, i) => `w${i}`);
  const systemPrompts = Array.from({ length: 6 }, (_, s) => Array.from({ length: 8 }, (_, b) => s * 100 + b));
  const out: Step[] = [];
  for (let n = 0; n < steps; n++) {
    const size = 2 + Math.floor(random() * 7);
    const chosen = ids.filter(() => random() < size / ids.length);
    if (chosen.length === 0) chosen.push(ids[n % ids.length]);
    const adapter = random() < 0.3 ? ADAPTERS[Math.floor(random() * ADAPTERS.length)] : undefined;
    const conversation = random() < 0.7 ? `conv-${Math.floor(random() * 16)}` : undefined;
    const system = systemPrompts[Math.floor(random() * systemPrompts.length)];
    const own = Array.from({ length: Math.floor(random() * 12) }, () => Math.floor(random() * 1e9));
    out.push(
      freezeAll({
        request: request({
          id: `w-${n}`,
          adapter,
          conversationId: conversation,
          priority: random() < 0.2 ? 'batch' : 'interactive',
          promptTokens: 100 + Math.floor(random() * 4000),
          prefixHashes: random() < 0.1 ? [] : chainBlockHashes([...system, ...own], prefixSeed('test-model', adapter)),
        }),
        candidates: chosen.map((id) => randomCandidate(id, random)),
      }),
    );
  }
  return out;
}

function randomCandidate(id: string, random: () => number): Candidate {
  const kvUsage = random();
  const queueDepth = Math.floor(random() * 40);
  return candidate({
    id,
    kvUsage,
    queueDepth,
    running: Math.floor(random() * 256),
    inFlight: Math.floor(random() * 24),
    loadedAdapters: ADAPTERS.filter(() => random() < 0.4),
    saturated: kvUsage >= 0.95 || queueDepth >= 32,
    signals: random() < 0.1 ? { stale: true, ageMs: 9000 } : undefined,
  });
}

type Fail = (check: ConformanceCheck, message: string) => void;

function checkEdges(instance: StrategyInstance, fail: Fail): void {
  const requests = [
    request({ id: 'edge-plain' }),
    request({ id: 'edge-conversation', conversationId: 'conv-edge', prefixHashes: chainBlockHashes([1, 2, 3, 4], 'test-model') }),
    request({ id: 'edge-adapter', adapter: ADAPTERS[0], conversationId: 'conv-edge-2' }),
  ].map(freezeAll);
  for (const req of requests) {
    const none = attempt(instance, req, [], 'empty-fleet', fail);
    if (none.ok && none.replica !== undefined) fail('empty-fleet', `picked "${none.replica}" out of no candidates (${req.id}); pass instead`);
    const only = freezeAll([candidate({ id: 'only', kvUsage: 0.97, saturated: true })]);
    const one = attempt(instance, req, only, 'single-candidate', fail);
    if (one.ok && one.replica !== undefined && one.replica !== 'only')
      fail('single-candidate', `picked "${one.replica}", not the one candidate "only" (${req.id})`);
  }
}

/** One pick, checked: no throw, a well-formed answer naming a given candidate. */
function attempt(
  instance: StrategyInstance,
  req: RoutedRequest,
  candidates: readonly Candidate[],
  check: ConformanceCheck,
  fail: Fail,
): { ok: boolean; replica?: string } {
  let result: PickResult;
  try {
    result = instance.pick(req, candidates);
  } catch (error) {
    fail(check, `pick threw on ${candidates.length} candidate(s) (${req.id}): ${messageOf(error)}`);
    return { ok: false };
  }
  if (result == null || isPass(result)) return { ok: true };
  if (typeof result !== 'object' || typeof (result as { replica?: unknown }).replica !== 'string') {
    fail(check, `pick returned ${JSON.stringify(result)}: expected { replica, reason }, a pass, or null (${req.id})`);
    return { ok: false };
  }
  if (!candidates.some((c) => c.id === result.replica)) {
    fail(
      check === 'empty-fleet' || check === 'single-candidate' ? check : 'given-candidates-only',
      `picked "${result.replica}", which is not among the ${candidates.length} candidate(s) it was given (${req.id})`,
    );
    return { ok: false };
  }
  if (typeof result.reason !== 'string') fail(check, `a pick needs a string reason for the decision trace (${req.id})`);
  return { ok: true, replica: result.replica };
}

/** Replays the workload as the router would (pick, onRouted, onCompleted later); the picks, in order. */
function replay(
  instance: StrategyInstance | undefined,
  ctx: TestContext,
  workload: readonly Step[],
  fail: Fail,
  report: boolean,
): { instance: StrategyInstance; picks: string[] } | undefined {
  if (!instance) return undefined;
  const picks: string[] = [];
  const inFlight: { req: RoutedRequest; replica: string; ok: boolean }[] = [];
  let hooksFailed = false;
  const hook = (name: string, call: () => void) => {
    try {
      call();
    } catch (error) {
      if (!hooksFailed && report) fail('hooks', `${name} threw: ${messageOf(error)}`);
      hooksFailed = true;
    }
  };
  let reported = 0;
  workload.forEach((step, n) => {
    const outcome = attempt(
      instance,
      step.request,
      step.candidates,
      'given-candidates-only',
      report && reported < 3 ? (c, m) => (reported++, fail(c, m)) : () => {},
    );
    picks.push(outcome.ok ? (outcome.replica ?? 'pass') : 'fault');
    // Where the router sent it: this strategy's pick, or what the rest of the chain chose.
    const replica = outcome.replica ?? leastLoaded(step.candidates).best!.id;
    hook('onRouted', () => instance.onRouted?.(step.request, replica));
    inFlight.push({ req: step.request, replica, ok: n % 7 !== 0 });
    while (inFlight.length > 4) {
      const done = inFlight.shift()!;
      hook('onCompleted', () => instance.onCompleted?.(done.req, done.replica, done.ok));
    }
    ctx.advance(5);
  });
  return { instance, picks };
}

function disposeTwice(instance: StrategyInstance, fail: Fail): void {
  for (const round of ['first', 'second']) {
    try {
      instance.dispose?.();
    } catch (error) {
      fail('dispose', `dispose() threw on the ${round} call: ${messageOf(error)} (it must be idempotent)`);
      return;
    }
  }
}

function safely<T>(run: () => T, onError: (error: unknown) => void): T | undefined {
  try {
    return run();
  } catch (error) {
    onError(error);
    return undefined;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Deep-freezes fixtures: a strategy that writes to a request or candidate throws (ES modules are strict). */
function freezeAll<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) freezeAll(child);
  }
  return value;
}
