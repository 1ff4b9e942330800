// The cache-pressured workload of docs/experiments.md (routing quality with
// one and three routers): conversations over a library of shared documents
// of ~3k tokens with Zipf 0.8 popularity, 2–4 turns each, so that the
// documents together hold several times the fleet's KV cache and caches
// evict. One definition for the simulator and bench:fleet.
import { seededRandom } from '../../sdk/index.ts';
import type { WorkloadSpec } from './load.ts';
import { BLOCK_TOKENS, type SimRequestSpec } from './types.ts';

export interface CachePressureOptions {
  /** Conversations started (the run: 4,000). */
  readonly conversations: number;
  /** Requests a second, follow-up turns included (22). */
  readonly rate: number;
  /** Mean think time between a conversation's turns, seconds (0.5 or 10). */
  readonly thinkS: number;
  /** Documents in the library (1,000). */
  readonly documents: number;
}

export const CACHE_PRESSURE_DEFAULTS: CachePressureOptions = { conversations: 4000, rate: 22, thinkS: 0.5, documents: 1000 };

/** 2, 3 or 4 turns, each as likely: 3 on average. */
export const MEAN_TURNS = 3;

export function cachePressureWorkload(options: CachePressureOptions): WorkloadSpec {
  return {
    kind: 'workload',
    requests: options.conversations * MEAN_TURNS,
    arrivals: { process: 'poisson', rate: options.rate },
    // The first turn: the document and a question on it.
    prompt_tokens: { type: 'lognormal', median: 3200, p99: 4200 },
    output_tokens: { type: 'lognormal', median: 150, p99: 600 },
    sessions: {
      fraction: 1,
      turns: {
        type: 'quantiles',
        points: [
          [0, 2],
          [0.3333, 2],
          [0.3334, 3],
          [0.6666, 3],
          [0.6667, 4],
          [1, 4],
        ],
      },
      think_time_s: { type: 'exponential', mean: options.thinkS },
      max_context_tokens: 16_000,
    },
    system_prompts: { count: options.documents, zipf: 0.8, tokens: { type: 'uniform', min: 2500, max: 3500 } },
  };
}

/** A chat message of a cache-pressure conversation, as bench:fleet-sockets sends it. */
export interface ConversationMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

// About one Llama token a word: the same key gives the same text (a document read by many conversations).
const WORDS =
  'time year people way day man thing woman life child world school state family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word business issue side kind head house service friend father power hour game line end member law car city community name president team minute idea kid body information back parent face others level office door health person art war history party result change morning reason research girl guy moment air teacher force education'.split(
    ' ',
  );

/** `count` words of text, the same for the same key. */
export function conversationWords(key: string, count: number): string {
  const random = seededRandom(key);
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(WORDS[Math.floor(random() * WORDS.length)]);
  return out.join(' ');
}

/**
 * The messages a turn adds to its conversation, as text: the first turn's
 * system prompt (its shared document) and question; a later turn's question,
 * as long as the turn's prompt grew beyond the previous turn and its answer.
 * The answers themselves are the engine's, appended by the caller.
 */
export function turnMessages(request: SimRequestSpec, previous?: SimRequestSpec): ConversationMessage[] {
  const session = request.session!;
  if (request.turn === 1 || previous === undefined) {
    const system = session.systemBlocks * BLOCK_TOKENS;
    return [
      { role: 'system', content: conversationWords(`doc:${session.systemBase}`, system) },
      { role: 'user', content: conversationWords(`q:${session.id}:1`, Math.max(8, request.promptTokens - system)) },
    ];
  }
  const added = request.promptTokens - previous.promptTokens - previous.outputTokens;
  return [{ role: 'user', content: conversationWords(`q:${session.id}:${request.turn}`, Math.max(8, added)) }];
}
