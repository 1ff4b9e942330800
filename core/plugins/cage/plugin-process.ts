// Relays to plugin processes (isolation: process), one kept ready. Starting
// a Node process and its plugin worker takes a few hundred ms on a busy
// machine, most of a plugin's load or reload: so once one plugin process was
// asked for, a spare relay with its process and worker booted waits for the
// next (with the same limits), and a new spare is started as one is taken.
// A spare runs no plugin code (its worker waits for the module's URL) and
// ends with the router like any plugin process.
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { CHILD_ENTRY, RELAY_ENTRY, scriptPath } from './bundle.ts';
import type { ProcessInit } from './child.ts';
import { SHARED_BYTES } from './wire.ts';

export interface Relay {
  readonly worker: Worker;
  readonly shared: SharedArrayBuffer;
  /** The plugin process's id, once the relay said it. */
  pid(): number | undefined;
  /** The relay's report that the process ended, when it did before the relay was handed out. */
  ended(): Record<string, unknown> | undefined;
}

let spare: { key: string; relay: Promise<Relay> } | undefined;

/** A relay whose plugin process loads `moduleUrl` under `init`; its first messages are the plugin worker's (`ready` …). */
export async function startRelay(init: ProcessInit, moduleUrl: string): Promise<Relay> {
  const key = JSON.stringify(init);
  const taken = spare;
  spare = undefined;
  let relay = taken ? await taken.relay.catch(() => undefined) : undefined;
  if (!relay || relay.ended() || taken?.key !== key) {
    if (relay) end(relay);
    relay = await newRelay(init);
  }
  spare = { key, relay: newRelay(init) };
  // A spare that fails to start is noticed by the one who takes it.
  spare.relay.catch(() => {});
  relay.worker.postMessage({ moduleUrl });
  return relay;
}

function end(relay: Relay): void {
  const pid = relay.pid();
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  void relay.worker.terminate();
}

async function newRelay(init: ProcessInit): Promise<Relay> {
  const [relayScript, childScript] = await Promise.all([scriptPath(RELAY_ENTRY), scriptPath(CHILD_ENTRY)]);
  const shared = new SharedArrayBuffer(SHARED_BYTES);
  // The relay runs no plugin code: a small heap of its own; the plugin's limits apply in its process.
  const worker = new Worker(pathToFileURL(relayScript), {
    workerData: { shared, childScript, init },
    env: {},
    argv: [],
    execArgv: [],
    resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 8, stackSizeMb: 4 },
    name: 'switchyard plugin relay',
  });
  worker.unref();
  let pid: number | undefined;
  let ended: Record<string, unknown> | undefined;
  const early = (message: Record<string, unknown>) => {
    if (message?.type === 'pid') pid = Number(message.pid) || undefined;
    else if (message?.type === 'process-exit') ended = message;
  };
  worker.on('message', early);
  worker.once('exit', () => (ended ??= { type: 'process-exit', code: null, signal: null, detail: 'lost its relay' }));
  // A listener refs the worker again: a spare must never keep the router's process alive.
  worker.unref();
  return { worker, shared, pid: () => pid, ended: () => ended };
}
