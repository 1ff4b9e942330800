// Recorded traffic (`serve --record FILE`) as a workload: each request at its
// recorded arrival time (relative to the first), with its recorded facts —
// model asked, key hash, conversation, priority, deadline, token counts,
// message count — and its prompt blocks from the recorded block keys, so
// prefixes shared in the recording are shared in the simulation. What a
// recording does not hold: the prompt text (rules on `prompt` see nothing;
// `hasCode` is carried as a code mark) and the tokens the engine generated
// (the request's max_tokens stands in, else `defaultOutputTokens`).
import { mixHashes, seededRandom } from '../../sdk/index.ts';
import { PolicyError } from '../../core/diagnostics/problem.ts';
import { RecordReader } from '../../core/shadow/record-reader.ts';
import type { ReplayedRecord } from '../../core/shadow/record-format.ts';
import { WorkloadError } from './load.ts';
import { addRun, emptyRuns, type BlockRuns } from './block-runs.ts';
import { BLOCK_TOKENS, type RequestSource, type SimRequestSpec } from './types.ts';
import type { Priority } from '../../sdk/index.ts';

/** A prompt the router's code detection marks as code (core/facts/code.ts): the recording says hasCode, not the code. */
const CODE_MARK = '```\nx = 1\n```';

export interface RecordedSourceOptions {
  /** Output tokens for a request that gave no max_tokens. Default 256. */
  readonly defaultOutputTokens?: number;
  /** Replay this many times faster. Default 1. */
  readonly speed?: number;
  /** Stop after this many requests. */
  readonly limit?: number;
  /** Every record read, in order (the CLI tallies the recorded outcome from them). */
  readonly onRecord?: (record: ReplayedRecord) => void;
}

export class RecordedSource implements RequestSource {
  readonly #reader: RecordReader;
  readonly #options: RecordedSourceOptions;
  readonly #salt: number;
  #first?: number;
  #issued = 0;

  constructor(path: string, seed: string, options: RecordedSourceOptions = {}) {
    try {
      this.#reader = new RecordReader(path);
    } catch (error) {
      throw error instanceof PolicyError ? new WorkloadError(error.problems) : error;
    }
    this.#options = options;
    this.#salt = seededRandom(`${seed}:recorded-blocks`)() * 0x1_0000_0000;
  }

  next(): SimRequestSpec | undefined {
    if (this.#issued >= (this.#options.limit ?? Infinity)) return undefined;
    let record: ReplayedRecord | undefined;
    try {
      record = this.#reader.next();
    } catch (error) {
      throw error instanceof PolicyError ? new WorkloadError(error.problems) : error;
    }
    if (!record) return undefined;
    this.#options.onRecord?.(record);
    this.#first ??= record.at;
    const facts = record.facts;
    const at = Math.max(0, record.at - this.#first) / (this.#options.speed ?? 1);
    const output = facts.maxTokens ?? this.#options.defaultOutputTokens ?? 256;
    const blocks = this.#blocksOf(record, Math.floor(facts.promptTokens / BLOCK_TOKENS));
    this.#issued++;
    return {
      at,
      model: facts.requestedModel,
      apiKeyHash: facts.apiKeyHash,
      conversationId: facts.conversationId,
      priority: facts.priority === undefined ? undefined : (String(facts.priority) as Priority),
      deadlineMs: facts.deadlineMs,
      promptTokens: Math.max(1, facts.promptTokens),
      outputTokens: Math.max(1, output),
      maxTokens: facts.maxTokens,
      messageCount: Math.max(1, facts.messageCount),
      text: facts.hasCode ? CODE_MARK : undefined,
      blocks,
      sequenceBlocks: withAnswer(blocks, mixHashes(this.#salt, 0x4000_0000 + this.#issued), Math.floor((facts.promptTokens + output) / BLOCK_TOKENS)),
      klass: 'recorded',
      turn: 1,
    };
  }

  followUp(): undefined {
    return undefined;
  }

  close(): void {
    this.#reader.close();
  }

  /** One run per recorded block key (equal keys, equal blocks), then the request's own blocks up to its token count. */
  #blocksOf(record: ReplayedRecord, full: number): BlockRuns {
    const runs = emptyRuns();
    const keyed = Math.min(record.blocks.length, full);
    for (let j = 0; j < keyed; j++) addRun(runs, record.blocks[j], 0, j + 1);
    addRun(runs, mixHashes(this.#salt, this.#issued), keyed, full);
    return runs;
  }
}

function withAnswer(prompt: BlockRuns, base: number, end: number): BlockRuns {
  const runs: BlockRuns = { ends: [...prompt.ends], bases: [...prompt.bases], firsts: [...prompt.firsts] };
  addRun(runs, base, 0, end);
  return runs;
}
