// The floods of docs/reliability.md ("Floods"), as drivers shared by
// `npm run bench:floods` (figures), `npm run soak` (mixed into steady load)
// and test/hostile/flood-bounds.test.ts (bounds asserted): each floods a
// router from one client address until `stop()` says so, and returns a short
// note of what it saw. A flood comes from its own loopback address (the whole
// 127/8 is ours) so that the bounds per client address it trips are its own.
import { fork, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { Agent, request } from 'undici';

/** The API key the flood router knows (sk-test); keyless floods send none. */
export const FLOOD_KEY = 'sk-test';

export interface Flood {
  readonly name: string;
  /** Environment for the flood router (bench:floods only: an engine-side flood). */
  readonly routerEnv?: Record<string, string>;
  /** Floods `url` from `from` until `stop()`; a note of what it saw. */
  run(url: string, stop: () => boolean, from: string): Promise<string | void>;
}

export interface FloodRouterReport {
  /** Longest event-loop block since the previous report. */
  readonly maxBlockMs: number;
  /** Peak RSS since the previous report. */
  readonly peakRssMb: number;
  /** RSS now. */
  readonly rssMb: number;
}

export interface FloodRouter {
  readonly url: string;
  readonly child: ChildProcess;
  /** The figures since the previous call (the first call only starts the count). */
  report(): Promise<FloodRouterReport>;
  /** How long the router's process takes, now, to JSON.parse an 8 MB body (ms): the machine's load, as a block. */
  parseMs(): Promise<number>;
  /** SIGINT (an orderly exit: a --cpu-prof profile gets written), awaited. */
  close(): Promise<void>;
}

/** The router of test/hostile/flood-router.ts in its own process, so that its loop and memory are its own. */
export function startFloodRouter(env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<FloodRouter> {
  const child = fork(new URL('./flood-router.ts', import.meta.url).pathname, [], {
    execArgv: ['--import', 'tsx', ...nodeArgs],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const report = () =>
    new Promise<FloodRouterReport>((resolve) => {
      child.once('message', (m) => resolve(m as FloodRouterReport));
      child.send('report');
    });
  const parseMs = () =>
    new Promise<number>((resolve) => {
      child.once('message', (m) => resolve((m as { parseMs: number }).parseMs));
      child.send('calibrate');
    });
  const close = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGINT');
    });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ url: (m as { url: string }).url, child, report, parseMs, close }));
    child.once('exit', (code) => reject(new Error(`flood router exited with ${code} before it was ready`)));
  });
}

export function socketTo(url: string, localAddress: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: u.hostname, port: Number(u.port), localAddress }, () => resolve(socket));
    socket.once('error', reject);
  });
}

const agents = new Map<string, Agent>();
/** An HTTP client whose connections come from `localAddress`. */
function agentFrom(localAddress: string): Agent {
  let agent = agents.get(localAddress);
  if (!agent) agents.set(localAddress, (agent = new Agent({ connect: { localAddress }, connections: 64 })));
  return agent;
}

/** POSTs `body` from `from`; the status (0 when the connection failed). */
export async function post(url: string, path: string, body: string, from: string, headers: Record<string, string> = {}, timeoutMs = 10_000): Promise<number> {
  try {
    const r = await request(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      dispatcher: agentFrom(from),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await r.body.dump();
    return r.statusCode;
  } catch {
    return 0;
  }
}

const chatBody = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: 'hello' }] });

/** A normal keyed chat every `everyMs` from `from` until `stop()`: latencies in ms (failures as Infinity). */
export async function normalTraffic(url: string, stop: () => boolean, from = '127.0.0.1', everyMs = 100): Promise<number[]> {
  const latencies: number[] = [];
  while (!stop()) {
    const started = performance.now();
    const status = await post(url, '/v1/chat/completions', chatBody, from, { authorization: `Bearer ${FLOOD_KEY}` });
    latencies.push(status === 200 ? performance.now() - started : Infinity);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return latencies;
}

export interface NormalTraffic {
  /** Normal chats until `ends` (a Date.now() time): their latencies in ms, failures as Infinity. */
  until(ends: number): Promise<number[]>;
  close(): void;
}

/** normalTraffic from a child process of its own: a flood sent from this process then does not slow the measurer. */
export function normalTrafficElsewhere(url: string, from = '127.0.0.1'): Promise<NormalTraffic> {
  const child = fork(new URL('./normal-traffic.ts', import.meta.url).pathname, [url, from], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const until = (ends: number) =>
    new Promise<number[]>((resolve) => {
      child.once('message', (m) => resolve((m as (number | null)[]).map((l) => l ?? Infinity)));
      child.send({ ends });
    });
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve({ until, close: () => void child.kill() }));
    child.once('exit', (code) => reject(new Error(`normal traffic exited with ${code} before it was ready`)));
  });
}

const tally = (statuses: Map<number, number>) => [...statuses].map(([s, n]) => `${s}x${n}`).join(' ');

/** Large bodies from `clients` clients at once, over and over. */
function bodies(clients: number, bytes: number, keyed: boolean): Flood['run'] {
  const body = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: 'x'.repeat(bytes) }] });
  return async (url, stop, from) => {
    const statuses = new Map<number, number>();
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (!stop()) {
          const status = await post(url, '/v1/chat/completions', body, from, keyed ? { authorization: `Bearer ${FLOOD_KEY}` } : {});
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
      }),
    );
    return tally(statuses);
  };
}

export const PIPELINED_KEYLESS: Flood = {
  name: '20 conns x 20,000 pipelined keyless /v1/models',
  async run(url, stop, from) {
    let answered = 0;
    let connections = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (!stop()) {
          const socket = await socketTo(url, from).catch(() => undefined);
          if (!socket) continue;
          connections++;
          socket.on('error', () => {});
          await new Promise<void>((resolve) => {
            const timer = setTimeout(() => socket.destroy(), 2000);
            socket.on('data', (chunk: Buffer) => (answered += chunk.toString('latin1').split('HTTP/1.1 ').length - 1));
            socket.on('close', () => {
              clearTimeout(timer);
              resolve();
            });
            socket.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(20_000));
          });
        }
      }),
    );
    return `${answered} answered on ${connections} connections`;
  },
};

export const OPEN_THEN_PIPELINED: Flood = {
  name: '500 conns opened, then 2,000 pipelined keyless each',
  async run(url, stop, from) {
    let answered = 0;
    let rounds = 0;
    while (!stop()) {
      rounds++;
      const sockets = (await Promise.all(Array.from({ length: 500 }, () => socketTo(url, from).catch(() => undefined)))).filter(
        (s): s is Socket => s !== undefined,
      );
      const burst = 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(2000);
      await Promise.all(
        sockets.map(
          (socket) =>
            new Promise<void>((resolve) => {
              if (socket.destroyed) return resolve(); // closed by the router (a penalty) while the others connected
              const timer = setTimeout(() => socket.destroy(), 2000);
              socket.on('error', () => {});
              socket.on('data', (chunk: Buffer) => (answered += chunk.toString('latin1').split('HTTP/1.1 ').length - 1));
              socket.on('close', () => {
                clearTimeout(timer);
                resolve();
              });
              socket.write(burst);
            }),
        ),
      );
    }
    return `${answered} answered in ${rounds} rounds`;
  },
};

export const KEEP_ALIVE_RATE: Flood = {
  name: '20 keep-alive conns x back-to-back keyed /v1/models',
  async run(url, stop, from) {
    let answered = 0;
    let connections = 0;
    const request = `GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${FLOOD_KEY}\r\n\r\n`;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (!stop()) {
          const socket = await socketTo(url, from).catch(() => undefined);
          if (!socket) continue;
          connections++;
          socket.on('error', () => {});
          await new Promise<void>((resolve) => {
            // One request at a time: the next goes when the previous answer's head is in.
            socket.on('data', (chunk: Buffer) => {
              const heads = chunk.toString('latin1').split('HTTP/1.1 ').length - 1;
              answered += heads;
              if (heads > 0 && !stop()) socket.write(request);
              else if (stop()) socket.destroy();
            });
            socket.on('close', () => resolve());
            socket.write(request);
          });
        }
      }),
    );
    return `${answered} answered on ${connections} connections`;
  },
};

export const KEYLESS_BODIES: Flood = { name: '8 keyless clients x 2.9 MB bodies', run: bodies(8, 2_900_000, false) };
export const KEYED_BODIES: Flood = { name: '8 keyed clients x 2.9 MB bodies', run: bodies(8, 2_900_000, true) };

export const EIGHT_MB_BODIES: Flood = {
  name: 'one 8 MB body every 500 ms',
  async run(url, stop, from) {
    const body = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: 'y'.repeat(8_000_000) }] });
    const statuses = new Map<number, number>();
    while (!stop()) {
      const status = await post(url, '/v1/chat/completions', body, from, { authorization: `Bearer ${FLOOD_KEY}` });
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    return tally(statuses);
  },
};

export const HELD_CONNECTIONS: Flood = {
  name: 'one client holding 1,500 connections',
  async run(url, stop, from) {
    const held: Socket[] = [];
    for (let i = 0; i < 1500 && !stop(); i++) {
      const s = await socketTo(url, from).catch(() => undefined);
      if (s) {
        s.on('error', () => {});
        held.push(s);
      }
    }
    // Held until the flood ends; each second, how many the router still lets this client hold.
    let open = 0;
    while (!stop()) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      open = held.filter((s) => !s.destroyed).length;
    }
    for (const s of held) s.destroy();
    return `${open} of ${held.length} held open`;
  },
};

/** Waits with nothing sent: for the engine-side floods (the router's env makes the engine's /metrics page huge). */
const idle: Flood['run'] = async (_url, stop) => {
  while (!stop()) await new Promise((resolve) => setTimeout(resolve, 100));
};

export const METRICS_PAGE = (bytes: number): Flood => ({
  name: `engine /metrics page of ${(bytes / 1e6).toFixed(1)} MB`,
  routerEnv: { FLOOD_METRICS_BYTES: String(bytes) },
  run: idle,
});

/** The floods a client can send, mildest last. */
export const CLIENT_FLOODS: readonly Flood[] = [
  PIPELINED_KEYLESS,
  OPEN_THEN_PIPELINED,
  KEEP_ALIVE_RATE,
  KEYLESS_BODIES,
  KEYED_BODIES,
  EIGHT_MB_BODIES,
  HELD_CONNECTIONS,
];
