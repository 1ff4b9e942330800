// Trace replay: requests at the trace's timestamps with its lengths, read a
// chunk at a time so a trace of any size replays in bounded memory. CSV with
// a header (timestamp, input_tokens, output_tokens, and optionally hash_ids,
// conversation_id, model, api_key), or Mooncake's JSONL (timestamp,
// input_length, output_length, hash_ids). A hash id names one block of
// `block_tokens` tokens (512 in the Mooncake traces): prompts that share
// leading hash ids share that prefix.
import { closeSync, openSync, readSync } from 'node:fs';
import { sha256Hex } from '../../core/facts/request-facts.ts';
import { mixHashes, seededRandom } from '../../sdk/index.ts';
import { addRun, emptyRuns, type BlockRuns } from './block-runs.ts';
import { WeightedChoice } from './distributions.ts';
import { WorkloadError, type WorkloadSpec } from './load.ts';
import type { ResolvedTenant } from './synthetic.ts';
import { BLOCK_TOKENS, type RequestSource, type SimRequestSpec } from './types.ts';
import { displayPath } from '../../core/diagnostics/problem.ts';

/** Lines of a file, read 64 KiB at a time. */
class LineReader {
  private readonly fd: number;
  private readonly buffer = Buffer.alloc(64 * 1024);
  private pending = '';
  private lines: string[] = [];
  private index = 0;
  private eof = false;
  lineNumber = 0;

  constructor(path: string) {
    this.fd = openSync(path, 'r');
  }

  next(): string | undefined {
    while (this.index >= this.lines.length) {
      if (this.eof) return undefined;
      const n = readSync(this.fd, this.buffer, 0, this.buffer.length, null);
      if (n === 0) {
        this.eof = true;
        this.lines = this.pending ? [this.pending] : [];
        this.pending = '';
      } else {
        const text = this.pending + this.buffer.toString('utf8', 0, n);
        const parts = text.split('\n');
        this.pending = parts.pop()!;
        this.lines = parts;
      }
      this.index = 0;
    }
    this.lineNumber++;
    const line = this.lines[this.index++];
    return line.endsWith('\r') ? line.slice(0, -1) : line;
  }

  close(): void {
    closeSync(this.fd);
  }
}

interface Row {
  timestamp: number;
  input: number;
  output: number;
  hashIds?: number[];
  conversationId?: string;
  model?: string;
  apiKey?: string;
}

const COLUMN_NAMES: Record<string, keyof Row> = {
  timestamp: 'timestamp',
  time: 'timestamp',
  input_tokens: 'input',
  input_length: 'input',
  prompt_tokens: 'input',
  output_tokens: 'output',
  output_length: 'output',
  completion_tokens: 'output',
  hash_ids: 'hashIds',
  conversation_id: 'conversationId',
  model: 'model',
  api_key: 'apiKey',
};

export class TraceSource implements RequestSource {
  private readonly reader: LineReader;
  private readonly file: string;
  private readonly format: 'csv' | 'jsonl';
  private columns?: (keyof Row | undefined)[];
  private readonly unitMs: number;
  private readonly blockTokens: number;
  private readonly speed: number;
  private readonly limit: number;
  private readonly endMs: number;
  private readonly defaultModel: string;
  private readonly tenants: WeightedChoice<ResolvedTenant>;
  private readonly random: () => number;
  private readonly salt: number;
  private readonly keyHashes = new Map<string, string>();
  private first: number | undefined;
  private last = -Infinity;
  private issued = 0;
  private closed = false;

  constructor(spec: WorkloadSpec, path: string, seed: number | string, tenants: readonly ResolvedTenant[]) {
    const trace = spec.trace!;
    this.file = displayPath(path);
    this.reader = new LineReader(path);
    this.format = trace.format ?? (/\.jsonl?$/i.test(path) ? 'jsonl' : 'csv');
    this.unitMs = trace.time_unit === 's' ? 1000 : 1;
    this.blockTokens = trace.block_tokens ?? 512;
    this.speed = trace.speed ?? 1;
    this.limit = spec.requests ?? Infinity;
    this.endMs = spec.duration_s !== undefined ? spec.duration_s * 1000 : Infinity;
    this.defaultModel = spec.models?.[0]?.name ?? spec.model ?? 'chat-small';
    const list = tenants.length ? tenants : [{ weight: 1 }];
    this.tenants = new WeightedChoice(
      list,
      list.map((t) => t.weight),
    );
    this.random = seededRandom(`${seed}:trace-tenants`);
    this.salt = seededRandom(`${seed}:blocks`)() * 0x1_0000_0000;
  }

  next(): SimRequestSpec | undefined {
    if (this.closed || this.issued >= this.limit) return undefined;
    const row = this.readRow();
    if (!row) {
      if (this.issued === 0) this.fail(this.reader.lineNumber || 1, 'the trace has no requests');
      return undefined;
    }
    this.first ??= row.timestamp;
    const at = ((row.timestamp - this.first) * this.unitMs) / this.speed;
    if (at > this.endMs) return undefined;
    this.issued++;
    const blocks = this.blocksOf(row);
    const tenant = this.tenants.pick(this.random);
    let apiKeyHash = tenant.apiKeyHash;
    if (row.apiKey) {
      apiKeyHash = this.keyHashes.get(row.apiKey);
      if (apiKeyHash === undefined) this.keyHashes.set(row.apiKey, (apiKeyHash = sha256Hex(row.apiKey)));
    }
    return {
      at,
      model: row.model ?? tenant.model ?? this.defaultModel,
      apiKeyHash,
      conversationId: row.conversationId,
      promptTokens: row.input,
      outputTokens: row.output,
      maxTokens: row.output,
      messageCount: 1,
      blocks,
      sequenceBlocks: withAnswer(blocks, mixHashes(this.salt, 0x2000_0000 + this.issued), Math.floor((row.input + row.output) / BLOCK_TOKENS)),
      klass: 'trace',
      turn: 1,
    };
  }

  followUp(): undefined {
    return undefined;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.reader.close();
  }

  private blocksOf(row: Row): BlockRuns {
    const full = Math.floor(row.input / BLOCK_TOKENS);
    const blocks = emptyRuns();
    const perId = Math.max(1, Math.floor(this.blockTokens / BLOCK_TOKENS));
    let j = 0;
    for (const id of row.hashIds ?? []) {
      if (j >= full) break;
      j = Math.min(j + perId, full);
      addRun(blocks, id >>> 0, 0, j);
    }
    addRun(blocks, mixHashes(this.salt, this.issued), j, full);
    return blocks;
  }

  private readRow(): Row | undefined {
    for (;;) {
      const line = this.reader.next();
      if (line === undefined) return undefined;
      if (line.trim() === '') continue;
      const at = this.reader.lineNumber;
      const row = this.format === 'jsonl' ? this.parseJson(line, at) : this.parseCsv(line, at);
      if (!row) continue; // the header
      if (!Number.isFinite(row.timestamp)) this.fail(at, 'timestamp is not a number');
      if (row.timestamp < this.last) this.fail(at, `timestamps must not go back in time (${row.timestamp} after ${this.last})`);
      this.last = row.timestamp;
      if (!Number.isInteger(row.input) || row.input < 1) this.fail(at, 'input tokens must be a positive integer');
      if (!Number.isInteger(row.output) || row.output < 1) this.fail(at, 'output tokens must be a positive integer');
      return row;
    }
  }

  private parseCsv(line: string, at: number): Row | undefined {
    const cells = line.split(',').map((c) => c.trim().replace(/^"(.*)"$/, '$1'));
    if (!this.columns) {
      this.columns = cells.map((c) => COLUMN_NAMES[c.toLowerCase()]);
      for (const needed of ['timestamp', 'input', 'output'] as const) {
        if (!this.columns.includes(needed)) {
          this.fail(at, `the header must name timestamp, input_tokens and output_tokens columns (found: ${cells.join(', ')})`);
        }
      }
      return undefined;
    }
    const row: Partial<Row> = {};
    this.columns.forEach((column, i) => {
      const cell = cells[i];
      if (column === undefined || cell === undefined || cell === '') return;
      if (column === 'hashIds')
        row.hashIds = cell
          .split(/[\s;|]+/)
          .filter(Boolean)
          .map(Number);
      else if (column === 'conversationId' || column === 'model' || column === 'apiKey') row[column] = cell;
      else row[column] = Number(cell);
    });
    if (row.hashIds?.some((h) => !Number.isFinite(h))) this.fail(at, 'hash_ids must be numbers separated by spaces, ; or |');
    return row as Row;
  }

  private parseJson(line: string, at: number): Row {
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(line);
    } catch (error) {
      this.fail(at, `not JSON: ${(error as Error).message}`);
    }
    const hashIds = data.hash_ids;
    if (hashIds !== undefined && (!Array.isArray(hashIds) || hashIds.some((h) => typeof h !== 'number'))) this.fail(at, 'hash_ids must be an array of numbers');
    return {
      timestamp: Number(data.timestamp),
      input: Number(data.input_length ?? data.input_tokens),
      output: Number(data.output_length ?? data.output_tokens),
      hashIds: hashIds as number[] | undefined,
      conversationId: typeof data.conversation_id === 'string' ? data.conversation_id : undefined,
      model: typeof data.model === 'string' ? data.model : undefined,
    };
  }

  private fail(line: number, message: string): never {
    this.close();
    throw new WorkloadError([{ file: this.file, line, col: 1, message }]);
  }
}

/** The prompt's blocks, then the answer's as a run of its own: a trace does not say what a later prompt repeats. */
function withAnswer(prompt: BlockRuns, base: number, end: number): BlockRuns {
  const runs: BlockRuns = { ends: [...prompt.ends], bases: [...prompt.bases], firsts: [...prompt.firsts] };
  addRun(runs, base, 0, end);
  return runs;
}
