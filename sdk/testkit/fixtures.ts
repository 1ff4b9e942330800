// Candidates, fleets, requests and a strategy context in a line each, with
// defaults that look like a healthy vLLM replica and an ordinary chat request.
import { DEFAULT_LOAD_SCORE_WEIGHTS } from '../load-score.ts';
import { prefixHashes, prefixSeed } from '../prefix.ts';
import { seededRandom } from '../random.ts';
import type { Candidate, Engine, KvIndexView, LoadScoreWeights, LoadSignals, Logger, ReplicaCapacity, RoutedRequest, StrategyContext } from '../types.ts';

/** A candidate: any field of Candidate, and the common signals as shorthands. */
export interface CandidateInit {
  readonly id?: string;
  readonly url?: string;
  readonly engine?: Engine;
  readonly saturated?: boolean;
  readonly signals?: Partial<LoadSignals>;
  readonly capacity?: Partial<ReplicaCapacity>;
  readonly kvUsage?: number;
  readonly queueDepth?: number;
  readonly running?: number;
  readonly inFlight?: number;
  readonly loadedAdapters?: readonly string[];
}

let candidateCount = 0;

/** One candidate: idle, fresh signals, vLLM, 4 LoRA slots, batch 256, full queue at 32. */
export function candidate(init: CandidateInit = {}): Candidate {
  const id = init.id ?? `r${candidateCount++}`;
  return {
    id,
    url: init.url ?? `http://${id}.test:8000`,
    engine: init.engine ?? 'vllm',
    saturated: init.saturated ?? false,
    signals: {
      kvUsage: init.kvUsage ?? 0,
      queueDepth: init.queueDepth ?? 0,
      running: init.running ?? 0,
      inFlight: init.inFlight ?? 0,
      loadedAdapters: init.loadedAdapters ?? [],
      ageMs: 100,
      stale: false,
      ...init.signals,
    },
    capacity: { maxLoras: 4, maxBatch: 256, maxQueue: 32, ...init.capacity },
  };
}

/** `n` candidates r0..r(n-1); `overrides` applies to all, or per index as a function. */
export function fleet(n: number, overrides: CandidateInit | ((index: number) => CandidateInit) = {}): Candidate[] {
  return Array.from({ length: n }, (_, i) => candidate({ id: `r${i}`, ...(typeof overrides === 'function' ? overrides(i) : overrides) }));
}

/** A request as a strategy sees it; `prompt` fills prefixHashes the way the router does. */
export interface TestRequest extends Partial<RoutedRequest> {
  readonly prompt?: string;
  /** Characters per prefix block (the router's prefix_block_chars, 64 by default). */
  readonly blockChars?: number;
}

let requestCount = 0;

export function request(init: TestRequest = {}): RoutedRequest {
  const { prompt, blockChars, ...fields } = init;
  const model = fields.model ?? 'test-model';
  return {
    id: `req-${++requestCount}`,
    model,
    version: 'v1',
    pool: 'general',
    tenant: 'tenant-a',
    priority: 'interactive',
    promptTokens: prompt ? Math.ceil(prompt.length / 4) : 1000,
    maxTokens: 256,
    prefixHashes: prompt ? prefixHashes(prompt, prefixSeed(model, fields.adapter), blockChars) : [],
    ...fields,
  };
}

export interface LogLine {
  readonly level: 'info' | 'warn';
  readonly message: string;
  readonly fields?: Record<string, unknown>;
}

/** A StrategyContext whose clock the test moves and whose log it reads. */
export interface TestContext extends StrategyContext {
  /** Sets the clock, ms. */
  setTime(ms: number): void;
  /** Moves the clock forward, ms. */
  advance(ms: number): void;
  readonly lines: LogLine[];
}

export interface ContextInit {
  /** Seeds `random`: the same seed, the same sequence. Default 1. */
  readonly seed?: number | string;
  /** The clock's start, ms. Default 1_000_000. */
  readonly startMs?: number;
  readonly pool?: string;
  readonly loadScoreWeights?: LoadScoreWeights;
  readonly previousState?: unknown;
  readonly kvIndex?: KvIndexView;
}

/** A replica's KV cache as a test states it: the block hashes it holds, and when its last event came. */
export interface TestKvHolding {
  readonly hashes: Iterable<number>;
  /** Clock time (ms) of the replica's last KV event; -Infinity: none yet. */
  lastEventAt?: number;
}

/**
 * A KvIndexView over holdings the test sets (and may change between picks):
 * what the router's index answers from the engines' KV events.
 */
export function kvIndex(holdings: Record<string, TestKvHolding>, now: () => number): KvIndexView {
  return {
    longestPrefix(hashes) {
      return Object.entries(holdings).map(([replica, holding]) => {
        const held = new Set(holding.hashes);
        let blocks = 0;
        while (blocks < hashes.length && held.has(hashes[blocks])) blocks++;
        const at = holding.lastEventAt ?? -Infinity;
        return { replica, blocks, ageMs: at === -Infinity ? Infinity : now() - at };
      });
    },
  };
}

export function context(init: ContextInit = {}): TestContext {
  let time = init.startMs ?? 1_000_000;
  const lines: LogLine[] = [];
  const log: Logger = {
    info: (message, fields) => lines.push({ level: 'info', message, fields }),
    warn: (message, fields) => lines.push({ level: 'warn', message, fields }),
  };
  return {
    random: seededRandom(init.seed ?? 1),
    now: () => time,
    log,
    pool: init.pool ?? 'general',
    loadScoreWeights: init.loadScoreWeights ?? DEFAULT_LOAD_SCORE_WEIGHTS,
    previousState: init.previousState,
    kvIndex: init.kvIndex,
    setTime: (ms) => {
      time = ms;
    },
    advance: (ms) => {
      time += ms;
    },
    lines,
  };
}
