// The tokenizer worker: loads tokenizer folders (one instance per folder,
// for every model, pool and reload that names it) and counts prompts off the
// router's event loop. Messages: core/tokens/service.ts.
import { parentPort, workerData } from 'node:worker_threads';
import { FolderCounter, type CountJob } from './counter.ts';
import { loadTokenizerFolder } from './folder.ts';

export type ToWorker =
  | { readonly type: 'load'; readonly dir: string }
  | { readonly type: 'count'; readonly id: number; readonly dir: string; readonly job: CountJob; readonly waitChars: number; readonly warmChars: number };

export type FromWorker =
  | { readonly type: 'loaded'; readonly dir: string; readonly error?: string }
  | { readonly type: 'counted'; readonly id: number; readonly ids?: Uint32Array[]; readonly error?: string; readonly deferred?: boolean }
  | { readonly type: 'busy'; readonly id: number };

const cacheBytes = (workerData as { cacheBytes: number }).cacheBytes;
const counters = new Map<string, FolderCounter>();
const port = parentPort!;

port.on('message', (message: ToWorker) => {
  if (message.type === 'load') {
    if (counters.has(message.dir)) return port.postMessage({ type: 'loaded', dir: message.dir } satisfies FromWorker);
    try {
      counters.set(message.dir, new FolderCounter(loadTokenizerFolder(message.dir), cacheBytes));
      port.postMessage({ type: 'loaded', dir: message.dir } satisfies FromWorker);
    } catch (error) {
      port.postMessage({ type: 'loaded', dir: message.dir, error: (error as Error).message } satisfies FromWorker);
    }
    return;
  }
  const { id, dir, job, waitChars, warmChars } = message;
  const counter = counters.get(dir);
  if (!counter) return port.postMessage({ type: 'counted', id, error: `the tokenizer in ${dir} is not loaded` } satisfies FromWorker);
  try {
    // Tell the main thread when it starts: it measures how long a job runs.
    port.postMessage({ type: 'busy', id } satisfies FromWorker);
    const plan = counter.plan(job);
    if (plan.coldChars > waitChars) {
      // Too long to wait for: the request goes on with the estimate, and the ids
      // are still worked out so that the conversation's next turn is exact.
      port.postMessage({ type: 'counted', id, deferred: true } satisfies FromWorker);
      if (plan.coldChars <= warmChars) counter.encode(job, plan);
      return;
    }
    const ids = counter.encode(job, plan);
    port.postMessage(
      { type: 'counted', id, ids } satisfies FromWorker,
      ids.map((a) => a.buffer as ArrayBuffer),
    );
  } catch (error) {
    port.postMessage({ type: 'counted', id, error: (error as Error).message } satisfies FromWorker);
  }
});
