// One line of a traffic recording (JSON Lines): when a request arrived, its
// facts without the prompt (recorded-facts.ts), the prompt's block keys, what
// the router decided and how the request ended. `switchyard sim --replay`
// and `switchyard diff --replay` read it back (docs/changing-policy.md).
import type { Decision } from '../decide/decision.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';
import type { RequestEnd } from '../serve/request-observer.ts';
import { decisionSide, type DecisionSide } from './compare.ts';
import { promptBlockKeys, recordedFacts, replayedFacts, type RecordedFacts } from './recorded-facts.ts';

export const RECORD_VERSION = 1;

export interface RecordLine {
  readonly v: typeof RECORD_VERSION;
  /** Arrival, epoch ms. */
  readonly at: number;
  readonly facts: RecordedFacts;
  /** Prefix block keys (recorded-facts.ts). */
  readonly blocks: readonly number[];
  /** The router's decision (the last one, when retried). */
  readonly live: DecisionSide;
  /** The policy generation that decided. */
  readonly generation: number;
  readonly end: RequestEnd;
}

export function recordLine(facts: RequestFacts, decision: Decision, snapshot: Generation, end: RequestEnd, now = Date.now()): RecordLine {
  return {
    v: RECORD_VERSION,
    at: Math.round(now - end.durationMs),
    facts: recordedFacts(facts),
    blocks: promptBlockKeys(facts.promptText, snapshot.settings),
    live: decisionSide(decision),
    generation: snapshot.generation,
    end: {
      outcome: end.outcome,
      status: end.status,
      ttfbMs: end.ttfbMs === undefined ? undefined : Math.round(end.ttfbMs * 10) / 10,
      durationMs: Math.round(end.durationMs * 10) / 10,
      attempts: end.attempts,
    },
  };
}

/** A record line read back: facts ready for decide(), checked. */
export interface ReplayedRecord {
  readonly at: number;
  readonly facts: RequestFacts;
  readonly blocks: readonly number[];
  readonly live?: DecisionSide;
  readonly end?: RequestEnd;
}

/** Most block keys a line may carry (the router keeps at most prefix_max_blocks; 4096 is far beyond any setting). */
const MAX_BLOCKS = 4096;

/** Parses one line; throws an Error saying what is wrong. */
export function parseRecordLine(text: string): ReplayedRecord {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new Error(`not JSON: ${(error as Error).message}`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new Error('a record line must be a JSON object');
  const line = data as Record<string, unknown>;
  if (line.v !== RECORD_VERSION)
    throw new Error(`unknown record version ${JSON.stringify(line.v)?.slice(0, 20)} (this router writes and reads ${RECORD_VERSION})`);
  if (typeof line.at !== 'number' || !Number.isFinite(line.at)) throw new Error('"at" must be a number (epoch ms)');
  const blocks = line.blocks ?? [];
  if (!Array.isArray(blocks) || blocks.length > MAX_BLOCKS || blocks.some((b) => !Number.isInteger(b) || b < 0 || b > 0xffff_ffff)) {
    throw new Error(`"blocks" must be at most ${MAX_BLOCKS} unsigned 32-bit integers`);
  }
  const live = typeof line.live === 'object' && line.live !== null ? (line.live as DecisionSide) : undefined;
  const end = typeof line.end === 'object' && line.end !== null ? (line.end as RequestEnd) : undefined;
  return { at: line.at, facts: replayedFacts(line.facts), blocks: blocks as number[], live, end };
}
