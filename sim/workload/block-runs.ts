// A simulated prompt's blocks, described compactly: synthetic prompts are a
// shared system prompt followed by a conversation's own blocks, and a trace's
// hash id stands for a run of blocks, so a prompt of ~70 blocks is two or
// three runs. The router hashes raw block ids (`rawBlockIds`, chained like
// any prompt's blocks); the engine model works on the runs themselves
// (`engineBlocks`), which is what keeps the simulator's cost per request
// independent of prompt length.
import { hashString, mixHashes as mixHashesExport } from '../../sdk/hashing.ts';
import type { PromptBlocks } from '../engine/prompt-blocks.ts';

// Bound once: through tsx every use of an imported name is a getter call on the module's exports
// (two through sdk/index.ts's re-export), and rawBlockIds mixes ~110 ids a request.
const mixHashes = mixHashesExport;

export interface BlockRuns {
  /** Run r covers blocks [ends[r-1] (0 for the first), ends[r]); ends increase strictly. */
  readonly ends: number[];
  /** Block j of run r has the raw id mixHashes(bases[r], firsts[r] + j - start of r). */
  readonly bases: number[];
  readonly firsts: number[];
}

export function emptyRuns(): BlockRuns {
  return { ends: [], bases: [], firsts: [] };
}

/** Appends blocks [start of the next run, end) with raw ids from `base`, numbered from `first`; an empty run is skipped. */
export function addRun(runs: BlockRuns, base: number, first: number, end: number): void {
  const start = runs.ends.length === 0 ? 0 : runs.ends[runs.ends.length - 1];
  if (end <= start) return;
  runs.ends.push(end);
  runs.bases.push(base);
  runs.firsts.push(first);
}

/**
 * A shared run, blocks [0, sharedEnd) from `sharedBase`, then the prompt's own, [sharedEnd, end)
 * numbered from sharedEnd (a synthetic prompt: its system prompt, then its conversation): what
 * addRun twice on emptyRuns() gives, in arrays of their final length. Pushed onto empty arrays they
 * took room for 17 numbers each, six arrays a request (two runs each for the router and the engine):
 * ~1 KB of a request's allocation.
 */
export function sharedThenOwn(sharedBase: number, sharedEnd: number, ownBase: number, end: number): BlockRuns {
  const shared = sharedEnd > 0;
  const own = end > (shared ? sharedEnd : 0);
  if (shared && own) return { ends: [sharedEnd, end], bases: [sharedBase, ownBase], firsts: [0, sharedEnd] };
  if (shared) return { ends: [sharedEnd], bases: [sharedBase], firsts: [0] };
  if (own) return { ends: [end], bases: [ownBase], firsts: [0] };
  return emptyRuns();
}

export function runBlockCount(runs: BlockRuns): number {
  return runs.ends.length === 0 ? 0 : runs.ends[runs.ends.length - 1];
}

/** The raw ids of the first `limit` blocks, in order: what the router chains into prefix hashes. */
export function rawBlockIds(runs: BlockRuns, limit = Infinity): number[] {
  const count = Math.min(limit, runBlockCount(runs));
  const ids = new Array<number>(count);
  let start = 0;
  for (let r = 0; r < runs.ends.length && start < count; r++) {
    const end = Math.min(runs.ends[r], count);
    const offset = runs.firsts[r] - start;
    for (let j = start; j < end; j++) ids[j] = mixHashes(runs.bases[r], offset + j);
    start = runs.ends[r];
  }
  return ids;
}

/**
 * The runs as the engine model keys them: each run's stream chains the
 * model seed and every run up to it (base, first raw index and start), so
 * two prompts get the same stream only when their raw ids agree up to the
 * end of that run (the way chained per-block hashes identify a prefix).
 */
export function engineBlocks(runs: BlockRuns, seed: string): PromptBlocks {
  const n = runs.ends.length;
  const streams = new Array<number>(n);
  let previous = hashString(seed);
  let start = 0;
  for (let r = 0; r < n; r++) {
    previous = mixHashes(mixHashes(mixHashes(previous, runs.bases[r] >>> 0), runs.firsts[r]), start);
    streams[r] = previous;
    start = runs.ends[r];
  }
  return { streams, ends: runs.ends };
}
