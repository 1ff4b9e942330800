// Replicas whose url is emulate://PROFILE are emulated engines the router
// starts itself on loopback, so `npm start` needs no GPU. Kept in step with
// the policy: a reload starts new ones and stops removed ones.
import type { ReplicaAddresses } from '../../core/serve/replica-addresses.ts';
import { startEmulator, type Emulator } from './server.ts';
import type { ReplicaSpec, Generation } from '../../core/decide/generation.ts';

const EMULATE = 'emulate://';

/** Prompts an in-process emulator tokenizes (~8k tokens, a few ms); longer ones are estimated, so they never stall the router. */
const EMBEDDED_TOKENIZE_LIMIT_CHARS = 32_768;

/** A model's tokenizer folder, when it names one (not `engine`, which asks the replica itself). */
function tokenizerDir(model: unknown): string | undefined {
  const tokenizer = (model as { tokenizer?: unknown } | undefined)?.tokenizer;
  if (typeof tokenizer === 'string' && tokenizer !== 'engine') return tokenizer;
  const dir = (tokenizer as { dir?: unknown } | undefined)?.dir;
  return typeof dir === 'string' ? dir : undefined;
}

export const isEmulated = (url: string) => url.startsWith(EMULATE);

interface Running {
  readonly key: string;
  readonly emulator: Promise<Emulator>;
  url?: string;
}

export class EmbeddedFleet implements ReplicaAddresses {
  private readonly running = new Map<string, Running>();

  constructor(private readonly options: { speed?: number; host?: string } = {}) {}

  /** The URL a replica is reached at. */
  urlOf(replica: ReplicaSpec): string {
    if (!isEmulated(replica.url)) return replica.url;
    const url = this.running.get(replica.id)?.url;
    if (!url) throw new Error(`emulated replica ${replica.id} is not running`);
    return url;
  }

  /** Starts the emulated replicas `snapshot` names and stops those it no longer does. */
  async sync(snapshot: Generation): Promise<void> {
    const wanted = new Map<string, { spec: ReplicaSpec; model: string; adapters: string[] }>();
    for (const pool of snapshot.pools) {
      // Every adapter of the model is registered (as vLLM's --lora-modules);
      // only the replica's own are loaded into GPU slots at start.
      const modelAdapters = [...snapshot.adapters].filter(([, base]) => base === pool.model).map(([name]) => name);
      for (const spec of pool.replicas) if (isEmulated(spec.url)) wanted.set(spec.id, { spec, model: pool.model, adapters: modelAdapters });
    }
    const starts: Promise<unknown>[] = [];
    for (const [id, { spec, model, adapters }] of wanted) {
      // The model's tokenizer (models.yaml `tokenizer: DIR`) is the engine's too, as vLLM loads the model's folder.
      const tokenizer = tokenizerDir(snapshot.models.get(model));
      const key = `${spec.url}|${spec.engine}|${model}|${spec.adapters.join(',')}|${adapters.join(',')}|${spec.maxLoras}|${spec.maxNumSeqs}|${spec.kvEvents ?? ''}|${spec.kvEventsTopic}|${spec.kvEventsReplay ?? ''}|${tokenizer ?? ''}`;
      const current = this.running.get(id);
      if (current?.key === key) continue;
      if (current) void current.emulator.then((e) => e.close()).catch(() => {});
      const profile = spec.url.slice(EMULATE.length).split(/[/?]/)[0];
      const emulator = startEmulator({
        profile,
        engine: spec.engine,
        speed: this.options.speed ?? 1,
        host: this.options.host ?? '127.0.0.1',
        servedModelName: model,
        adapters: spec.adapters,
        registeredAdapters: adapters,
        maxLoras: spec.maxLoras,
        maxNumSeqs: spec.maxNumSeqs,
        // The router subscribes to this endpoint: the emulator binds it (tcp://127.0.0.1:PORT).
        kvEvents: spec.kvEvents,
        kvEventsTopic: spec.kvEventsTopic || undefined,
        kvEventsReplay: spec.kvEventsReplay,
        tokenizer,
        tokenizeLimitChars: EMBEDDED_TOKENIZE_LIMIT_CHARS,
      });
      const running: Running = { key, emulator };
      this.running.set(id, running);
      starts.push(emulator.then((e) => (running.url = e.url)));
    }
    for (const [id, running] of this.running) {
      if (wanted.has(id)) continue;
      this.running.delete(id);
      void running.emulator.then((e) => e.close()).catch(() => {});
    }
    await Promise.all(starts);
  }

  emulator(id: string): Promise<Emulator> | undefined {
    return this.running.get(id)?.emulator;
  }

  async close(): Promise<void> {
    const all = [...this.running.values()];
    this.running.clear();
    await Promise.all(all.map((r) => r.emulator.then((e) => e.close()).catch(() => {})));
  }
}
