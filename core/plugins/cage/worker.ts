// The plugin side of the cage: runs in a worker thread, imports one plugin
// module, and serves the router's calls through shared memory. Bundled on
// its own (esbuild) and started with an empty environment, no inherited
// flags and a capped heap (see cage.ts). Everything the router reads back
// is bounded by the codec; nothing here is trusted by the router.
import { deserialize, getHeapStatistics, serialize, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { parentPort, workerData } from 'node:worker_threads';
import { definitionProblems } from '../../../sdk/definition-checks.ts';
import { seededRandom } from '../../../sdk/random.ts';
import type { CachedPrefix, KvIndexView, StrategyDefinition, StrategyInstance } from '../../../sdk/types.ts';
import { readCachedPrefixes, readCandidates, StringList, WorkerRequest, writePickAnswer, writeThrew, type RequestData } from './codec.ts';
import {
  A_DONE,
  A_STATE,
  ANSWER_AT,
  ANSWER_BYTES,
  ANSWER_REGION,
  ANSWER_SEQ,
  ANSWERED,
  ASK_HASHES,
  ASK_KV_HASHES,
  ASK_KV_TOKENS,
  ASK_TOKENS,
  CALL_AT,
  CALL_BYTES,
  CALL_REGION,
  CALL_SEQ,
  CALLING,
  EXTERNAL_MB,
  FLAG_RESET_STRINGS,
  HEAP_MB,
  SIDE_COUNT,
  SIDE_AT,
  DATA_GIVEN,
  NEEDS_DATA,
  OP_COMPLETED,
  OP_CREATE,
  OP_DISPOSE,
  OP_END,
  OP_EXPORT,
  OP_PICK,
  OP_ROUTED,
  Reader,
  ROUTER_WAITING,
  SIDE_KIND,
  SIDE_OP,
  SIDE_REGION,
  STATE,
  Writer,
} from './wire.ts';

interface CageData {
  readonly shared: SharedArrayBuffer;
  /** Undefined in a plugin process started ahead of its plugin (plugin-process.ts): it comes in a message. */
  readonly moduleUrl?: string;
  /** Busy-wait this long for the next call before parking (CageLimits.spinMicros). */
  readonly spinMicros: number;
  /** The plugin's heap budget, MB (CageLimits.heapMb); V8's own cap sits well above it. */
  readonly heapMb: number;
}

/** Parked this long at most, then timers and promises of the plugin get a turn. */
const PARK_MS = 50;

const port = parentPort!;
const { shared, moduleUrl, spinMicros, heapMb } = workerData as CageData;
const heapBudget = heapMb * 1048576;
const ctrl = new Int32Array(shared, 0, 16);
const side = new DataView(shared, SIDE_AT, SIDE_REGION);
/** As on the router's side (cage.ts): what crosses in one ask. */
const MAX_HASHES = 8192;
const MAX_TOKEN_IDS = SIDE_REGION / 4;
/** The op of the message being handled, while one is: asks to the router are answered only then. */
let currentOp = -1;
/** Messages handled so far: a request belongs to one. */
let messages = 0;
const answer = new Writer(shared, ANSWER_AT, ANSWER_REGION);
const strings = new StringList();
const instances = new Map<number, StrategyInstance>();
let clock = 0;
let hookErrors = 0;
/** -Infinity: the first error is reported at once, even within the worker's first second (performance.now() counts from its start). */
let lastHookReport = Number.NEGATIVE_INFINITY;
let lastMemoryReport = 0;
/** How often the worker reports its off-heap memory, ms. */
const MEMORY_REPORT_MS = 50;
/** Set once the plugin's live heap is over its budget: no plugin code runs again. */
let overBudget = false;

const collectGarbage = garbageCollector();

/**
 * A full GC on demand, to tell a heap that is over budget with garbage from
 * one that holds it. Only a new context of this file's sees the function;
 * later contexts (the plugin's own, other workers') are made without it. The
 * flag is process-wide and workers start side by side: one may turn it off
 * between another's two steps, so a miss is tried again. Without a collector
 * (never seen), the count after the call is the verdict.
 */
function garbageCollector(): () => void {
  for (let attempt = 0; attempt < 20; attempt++) {
    setFlagsFromString('--expose-gc');
    try {
      const gc = runInNewContext('typeof gc === "function" ? gc : undefined') as (() => void) | undefined;
      if (gc) return gc;
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
  }
  return () => {};
}

// What the plugin prints goes to the router as messages it counts and rate-limits (a chatty or
// flooding plugin is seen there), not through the process's own stdout.
for (const stream of [process.stdout, process.stderr]) {
  stream.write = ((chunk: unknown, ...rest: unknown[]) => {
    port.postMessage({ type: 'output', text: String(chunk).slice(0, 500) });
    const callback = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    callback?.();
    return true;
  }) as typeof stream.write;
}

async function main(): Promise<void> {
  let namespace: { default?: unknown };
  try {
    const url = moduleUrl ?? (await new Promise<string>((resolve) => port.once('message', (message: { moduleUrl: string }) => resolve(message.moduleUrl))));
    namespace = await import(url);
  } catch (error) {
    port.postMessage({ type: 'load-error', message: messageOf(error), stack: error instanceof Error ? String(error.stack ?? '') : '' });
    return;
  }
  const definition = namespace.default as StrategyDefinition<unknown> | undefined;
  const problems = definition === undefined ? [] : definitionProblems(definition);
  const described =
    definition && problems.length === 0
      ? {
          name: definition.name,
          version: definition.version,
          sdk: definition.sdk,
          description: typeof definition.description === 'string' ? definition.description : undefined,
          configSchema: definition.configSchema,
        }
      : undefined;
  try {
    port.postMessage({ type: 'ready', exports: Object.keys(namespace), hasDefault: definition !== undefined, problems, definition: described });
  } catch {
    port.postMessage({ type: 'ready', exports: [], hasDefault: true, problems: ['"configSchema" must be plain data (a JSON Schema object)'] });
    return;
  }
  if (described) serve(definition!);
}

function serve(definition: StrategyDefinition<unknown>): void {
  let seen = Atomics.load(ctrl, CALL_SEQ);
  const loop = (): void => {
    for (;;) {
      let state = Atomics.load(ctrl, STATE);
      if (state !== CALLING || Atomics.load(ctrl, CALL_SEQ) === seen) {
        const spinUntil = performance.now() + spinMicros / 1000;
        while ((state = Atomics.load(ctrl, STATE)) !== CALLING && performance.now() < spinUntil);
        if (state !== CALLING) {
          if (Atomics.wait(ctrl, STATE, state, PARK_MS) === 'timed-out') {
            // Let the plugin's own timers and promises run; what they keep is counted too.
            setImmediate(() => {
              checkHeap();
              loop();
            });
            return;
          }
          continue;
        }
      }
      seen = Atomics.load(ctrl, CALL_SEQ);
      handle(definition, seen);
    }
  };
  loop();
}

function handle(definition: StrategyDefinition<unknown>, seq: number): void {
  answer.reset();
  messages++;
  try {
    if (overBudget) throw new Error(`over its ${heapMb} MB heap budget`);
    const r = new Reader(shared, CALL_AT, Atomics.load(ctrl, CALL_BYTES));
    if (r.i32() & FLAG_RESET_STRINGS) strings.clear();
    let index = 0;
    let answered = false;
    for (let op = r.u8(); op !== OP_END; op = r.u8(), index++) {
      const id = r.i32();
      currentOp = index;
      switch (op) {
        case OP_PICK: {
          clock = r.f64();
          const request = new WorkerRequest(r, strings, requestData(index));
          const candidates = readCandidates(r, strings);
          const instance = instances.get(id);
          const started = performance.now();
          try {
            if (!instance) throw new Error(`no instance ${id}`);
            const result = instance.pick(request, candidates);
            writePickAnswer(answer, result, candidates, performance.now() - started);
          } catch (error) {
            answer.reset();
            writeThrew(answer, error, performance.now() - started);
          }
          answered = true;
          break;
        }
        case OP_ROUTED:
        case OP_COMPLETED: {
          clock = r.f64();
          const request = new WorkerRequest(r, strings, requestData(index));
          const replica = strings.read(r);
          const ok = op === OP_COMPLETED ? r.u8() === 1 : true;
          const instance = instances.get(id);
          try {
            if (op === OP_ROUTED) instance?.onRouted?.(request, replica);
            else instance?.onCompleted?.(request, replica, ok);
          } catch (error) {
            hookError(op === OP_ROUTED ? 'onRouted' : 'onCompleted', id, error);
          }
          break;
        }
        case OP_DISPOSE: {
          const instance = instances.get(id);
          instances.delete(id);
          try {
            instance?.dispose?.();
          } catch (error) {
            hookError('dispose', id, error);
          }
          break;
        }
        case OP_CREATE: {
          clock = r.f64();
          const init = deserialize(r.bytes(CALL_REGION)) as {
            config: unknown;
            pool: string;
            weights: { kvUsage: number; queue: number; running: number };
            seed: number;
            previousState: unknown;
            kv: number;
          };
          try {
            const instance = definition.create(init.config, {
              random: seededRandom(init.seed),
              now: () => clock,
              log: logger(id),
              pool: init.pool,
              loadScoreWeights: init.weights,
              previousState: init.previousState,
              ...(init.kv > 0 ? { kvIndex: kvIndexView(init.kv === 2) } : {}),
            });
            if (instance === null || typeof instance !== 'object' || typeof instance.pick !== 'function')
              throw new Error('create() must return an object with a pick() method');
            instances.set(id, instance);
            answer.u8(A_DONE);
            answer.u8((instance.onRouted ? 1 : 0) | (instance.onCompleted ? 2 : 0) | (instance.exportState ? 4 : 0) | (instance.dispose ? 8 : 0));
          } catch (error) {
            answer.reset();
            writeThrew(answer, error, 0);
          }
          answered = true;
          break;
        }
        case OP_EXPORT: {
          try {
            const bytes = serialize(instances.get(id)?.exportState?.());
            answer.u8(A_STATE);
            answer.bytes(bytes);
          } catch (error) {
            answer.reset();
            writeThrew(answer, error, 0);
          }
          answered = true;
          break;
        }
        default:
          throw new RangeError(`unknown op ${op}`);
      }
    }
    if (!answered) answer.u8(A_DONE);
  } catch (error) {
    answer.reset();
    writeThrew(answer, error, 0);
  }
  currentOp = -1;
  // Read with the answer (a fraction of a microsecond): the router sees a plugin over budget at once.
  const heapUsed = getHeapStatistics().used_heap_size;
  if (heapUsed <= heapBudget) Atomics.store(ctrl, HEAP_MB, Math.ceil(heapUsed / 1048576));
  Atomics.store(ctrl, ANSWER_BYTES, answer.length);
  Atomics.store(ctrl, ANSWER_SEQ, seq);
  Atomics.store(ctrl, STATE, ANSWERED);
  Atomics.notify(ctrl, STATE);
  // After the answer: the router is not kept waiting for it.
  if (heapUsed > heapBudget) checkHeap();
  const t = performance.now();
  if (t - lastMemoryReport >= MEMORY_REPORT_MS) {
    lastMemoryReport = t;
    Atomics.store(ctrl, EXTERNAL_MB, Math.round(getHeapStatistics().external_memory / 1048576));
  }
}

/**
 * Over budget by the cheap count: a full GC says whether it is garbage or held.
 * Held, the plugin is done: the router is told (the control word for the next
 * call, a message when no call comes) and quarantines it, long before V8's own
 * cap, where V8 may abort the whole process instead of the worker.
 */
function checkHeap(): void {
  if (overBudget || getHeapStatistics().used_heap_size <= heapBudget) return;
  collectGarbage();
  const used = getHeapStatistics().used_heap_size;
  Atomics.store(ctrl, HEAP_MB, Math.ceil(used / 1048576));
  if (used <= heapBudget) return;
  overBudget = true;
  port.postMessage({ type: 'memory', heapMb: Math.ceil(used / 1048576) });
}

/**
 * Asks the router, mid-call, for something only it has and waits for it (the
 * router answers while it waits for this call). Outside a call, or once the
 * router stopped waiting (the call ran over its time), nothing comes: false.
 */
function ask(kind: number, count: number): boolean {
  if (currentOp < 0 || Atomics.load(ctrl, ROUTER_WAITING) === 0) return false;
  Atomics.store(ctrl, SIDE_KIND, kind);
  Atomics.store(ctrl, SIDE_OP, currentOp);
  Atomics.store(ctrl, SIDE_COUNT, count);
  Atomics.store(ctrl, STATE, NEEDS_DATA);
  Atomics.notify(ctrl, STATE);
  // The router may have stopped waiting just now: it then answers an ask it saw, and one it missed is taken back.
  if (Atomics.load(ctrl, ROUTER_WAITING) === 0 && Atomics.compareExchange(ctrl, STATE, NEEDS_DATA, CALLING) === NEEDS_DATA) return false;
  Atomics.wait(ctrl, STATE, NEEDS_DATA, 1000);
  return Atomics.load(ctrl, STATE) === DATA_GIVEN;
}

/** Back to the call once the answer is read. */
function resume(): void {
  Atomics.store(ctrl, STATE, CALLING);
}

/** What a request of op `opIndex` fetches on first use: only during its own message (a request a plugin kept gets nothing later). */
function requestData(opIndex: number): RequestData {
  const message = messages;
  const at = () => message === messages && currentOp === opIndex;
  return {
    hashes() {
      if (!at() || !ask(ASK_HASHES, 0)) return [];
      const count = Math.max(0, Math.min(Atomics.load(ctrl, SIDE_COUNT), MAX_HASHES));
      const list = new Array<number>(count);
      for (let i = 0; i < count; i++) list[i] = side.getFloat64(i * 8, true);
      resume();
      return list;
    },
    tokens() {
      if (!at() || !ask(ASK_TOKENS, 0)) return undefined;
      const count = Atomics.load(ctrl, SIDE_COUNT);
      const ids = count < 0 ? undefined : new Uint32Array(shared, SIDE_AT, Math.min(count, MAX_TOKEN_IDS)).slice();
      resume();
      return ids;
    },
  };
}

/** ctx.kvIndex in the worker: each lookup is answered by the router's index, during a call (outside one: nothing cached). */
function kvIndexView(withTokens: boolean): KvIndexView {
  const lookup = (kind: number, count: number): readonly CachedPrefix[] => {
    if (!ask(kind, count)) return [];
    const n = Math.max(0, Math.min(Atomics.load(ctrl, SIDE_COUNT), 65_536));
    let entries: CachedPrefix[] = [];
    try {
      entries = readCachedPrefixes(new Reader(shared, SIDE_AT, SIDE_REGION), n);
    } finally {
      resume();
    }
    return entries;
  };
  const view: KvIndexView = {
    longestPrefix(hashes) {
      if (currentOp < 0) return [];
      const n = Math.min(hashes.length, MAX_HASHES);
      for (let i = 0; i < n; i++) side.setFloat64(i * 8, Number(hashes[i]), true);
      return lookup(ASK_KV_HASHES, n);
    },
  };
  if (!withTokens) return view;
  return {
    ...view,
    longestPrefixOfTokens(tokenIds, adapter) {
      if (currentOp < 0) return [];
      const n = Math.min(tokenIds.length, MAX_TOKEN_IDS - 256);
      const ids = new Uint32Array(shared, SIDE_AT, n);
      for (let i = 0; i < n; i++) ids[i] = tokenIds[i];
      const w = new Writer(shared, SIDE_AT + n * 4, SIDE_REGION - n * 4);
      if (adapter === undefined) w.u8(0);
      else {
        w.u8(1);
        w.str(String(adapter), 256);
      }
      return lookup(ASK_KV_TOKENS, n);
    },
  };
}

function logger(instance: number) {
  const send = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    try {
      port.postMessage({ type: 'log', level, instance, message: String(message).slice(0, 1000), fields });
    } catch {
      port.postMessage({ type: 'log', level, instance, message: String(message).slice(0, 1000) });
    }
  };
  return { info: send('info'), warn: send('warn') };
}

function hookError(hook: string, instance: number, error: unknown): void {
  hookErrors++;
  const now = performance.now();
  if (now - lastHookReport < 1000) return;
  lastHookReport = now;
  port.postMessage({ type: 'hook-error', hook, instance, message: messageOf(error).slice(0, 500), count: hookErrors });
  hookErrors = 0;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

void main();
