// npm run soak — steady load through a real router in front of three
// emulated engines, with faults injected at random: engines killed and
// restarted, engines frozen for a few seconds, and hostile requests (from the
// hostile-input suite) mixed into the traffic. It checks that every request
// is answered (no hang, no dropped connection before a status), that nothing
// is a 500 and no hostile request a 5xx, and that the router's memory stays
// flat; then prints a summary and exits non-zero on any failure. Floods
// (test/hostile/floods-kit.ts: pipelining, per-connection rate, large bodies,
// held connections) run now and then from their own client addresses, and
// the summary gives the router's longest event-loop block and peak RSS with
// and without a flood on.
//
// SOAK_SECONDS (default 120), SOAK_RATE requests/s (default 80),
// SOAK_FAULT_EVERY_MS (default 4000), SOAK_FLOOD_EVERY_MS (default 12000;
// 0 for no floods), SOAK_FLOOD_MS (each flood's length, default 3000),
// SOAK_FLOODS=TEXT (only the floods whose name contains TEXT), SOAK_SEED,
// SOAK_ROUTER_NODE_ARGS (node flags for the router, e.g. --cpu-prof),
// SOAK_ROUTER_LOG (a file for the router's log; /dev/null by default).
//
// Every process is a child of this one: the router (its memory is what is
// measured), and each engine (so that it can be killed for real).
import { fork, type ChildProcess } from 'node:child_process';
import { freePort } from '../observe/process.ts';
import { curatedCases, fetchBody, type HostileCase } from '../hostile/cases.ts';
import { rawExchange } from '../hostile/raw-http.ts';
import { CLIENT_FLOODS } from '../hostile/floods-kit.ts';

// ---------------------------------------------------------------- children

async function runEngine(port: number): Promise<void> {
  const { startEmulator } = await import('../../sim/emulator/server.ts');
  const emulator = await startEmulator({ profile: 'tiny', port, host: '127.0.0.1', speed: 20, servedModelName: 'soak' });
  process.send?.({ url: emulator.url });
}

async function runRouter(ports: number[]): Promise<void> {
  const { buildSnapshot } = await import('../../core/decide/load.ts');
  const { policyInputsFromTexts } = await import('../../core/policy/inputs.ts');
  const { registryOf } = await import('../../core/plugins/registry.ts');
  const { BUILTIN_STRATEGIES } = await import('../../plugins/index.ts');
  const { fixedPolicy } = await import('../../core/serve/fixed-policy.ts');
  const { routerLogger } = await import('../../core/observe/logger.ts');
  const { startRouter } = await import('../../core/serve/server.ts');
  const replicas = ports.map((port, i) => `      - { id: e${i}, url: "http://127.0.0.1:${port}" }`).join('\n');
  const files = {
    'models.yaml': 'kind: models\nmodels:\n  - id: soak\n    versions: [{ version: v1 }]\n',
    // The floods' keyed requests carry sk-test: the same tenant as the keyless traffic.
    'tenants.yaml':
      'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0] }\n',
    'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: soak\n    version: v1\n    limits: { max_model_len: 2048 }\n    strategies: [session-affinity, prefix-affinity, power-of-two]\n    replicas:\n${replicas}\n`,
  };
  const loaded = buildSnapshot(policyInputsFromTexts(files, { registry: registryOf(BUILTIN_STRATEGIES) }));
  if (!loaded.snapshot) throw new Error('soak policy invalid');
  const router = await startRouter({
    policy: fixedPolicy(loaded.snapshot),
    port: 0,
    admin: { port: 0 },
    logger: routerLogger({ destination: process.env.SOAK_ROUTER_LOG ?? '/dev/null' }),
    scrapeIntervalMs: 250,
    healthIntervalMs: 250,
  });
  const gc = (globalThis as { gc?: () => void }).gc;
  // The longest event-loop block (a 10 ms timer's lateness) and the peak RSS
  // since the previous sample; the collection a sample forces is not counted.
  let peakRss = process.memoryUsage().rss;
  let maxBlockMs = 0;
  let tickedAt = performance.now();
  let skipTick = false;
  setInterval(() => {
    const now = performance.now();
    if (!skipTick) maxBlockMs = Math.max(maxBlockMs, now - tickedAt - 10);
    skipTick = false;
    tickedAt = now;
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 10).unref();
  process.on('message', (message) => {
    if (message !== 'memory') return;
    const window = { maxBlockMs, peakRss: Math.max(peakRss, process.memoryUsage().rss) };
    gc?.();
    skipTick = true;
    const { rss, heapUsed } = process.memoryUsage();
    maxBlockMs = 0;
    peakRss = rss;
    process.send?.({ rss, heapUsed, ...window });
  });
  // An orderly exit (a --cpu-prof profile gets written): SOAK_ROUTER_NODE_ARGS.
  process.once('SIGTERM', () => void router.close(1000).finally(() => process.exit(0)));
  process.send?.({ url: router.url });
}

// ---------------------------------------------------------------- driver

const SECONDS = Number(process.env.SOAK_SECONDS ?? 120);
const RATE = Number(process.env.SOAK_RATE ?? 80);
const FAULT_EVERY_MS = Number(process.env.SOAK_FAULT_EVERY_MS ?? 4000);
const FLOOD_EVERY_MS = Number(process.env.SOAK_FLOOD_EVERY_MS ?? 12_000);
const FLOOD_MS = Number(process.env.SOAK_FLOOD_MS ?? 3000);
/** A request not answered within this is a hang. */
const ANSWER_BOUND_MS = 30_000;
const ENGINES = 3;

/** A small deterministic generator: a soak run can be replayed. */
let seed = Number(process.env.SOAK_SEED ?? 20261130) >>> 0;
const random = () => (seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32;
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];

function start(args: string[], execArgv: string[] = []): Promise<{ url: string; child: ChildProcess }> {
  const child = fork(new URL(import.meta.url).pathname, args, { execArgv: [...execArgv, '--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ url: (m as { url: string }).url, child }));
    child.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code} before it was ready`)));
  });
}

interface Tally {
  sent: number;
  answered: number;
  byStatus: Map<number, number>;
  unanswered: string[];
  failures: string[];
  streamsCut: number;
  slowestMs: number;
}

const tally = (): Tally => ({ sent: 0, answered: 0, byStatus: new Map(), unanswered: [], failures: [], streamsCut: 0, slowestMs: 0 });

async function drive(): Promise<void> {
  const ports = await Promise.all(Array.from({ length: ENGINES }, freePort));
  const engines: (ChildProcess | undefined)[] = await Promise.all(ports.map(async (port) => (await start(['engine', String(port)])).child));
  const router = await start(['router', ...ports.map(String)], ['--expose-gc', ...(process.env.SOAK_ROUTER_NODE_ARGS ?? '').split(' ').filter(Boolean)]);
  type Memory = { rss: number; heapUsed: number; maxBlockMs: number; peakRss: number };
  const memory = (): Promise<Memory> =>
    new Promise((resolve) => {
      router.child.once('message', (m) => resolve(m as Memory));
      router.child.send('memory');
    });

  // Light hostile cases only: the soak is about steady state, not the big-body cases.
  const hostile = curatedCases().filter((c) => (c.kind === 'raw' ? c.bytes.length : (c.body?.length ?? 0)) < 64 * 1024);
  const valid = tally();
  const attacks = tally();
  const faults = new Map<string, number>();
  const floods = new Map<string, number>();
  // A memory sample covers the time since the previous one: flooded if a flood was on in it.
  let floodsOn = 0;
  let floodEndedAt = 0;
  let sampledAt = Date.now();
  const samples: ({ at: number; flooded: boolean } & Memory)[] = [];
  const pending = new Set<Promise<void>>();
  const started = Date.now();
  const elapsed = () => (Date.now() - started) / 1000;
  console.log(
    `soak: ${SECONDS} s at ${RATE} req/s through ${router.url}, ${ENGINES} engines, a fault every ~${FAULT_EVERY_MS} ms, ${hostile.length} hostile cases in the mix, ${FLOOD_EVERY_MS > 0 ? `a ${FLOOD_MS} ms flood every ~${FLOOD_EVERY_MS} ms` : 'no floods'}`,
  );

  const count = (t: Tally, status: number, ms: number) => {
    t.answered++;
    t.byStatus.set(status, (t.byStatus.get(status) ?? 0) + 1);
    t.slowestMs = Math.max(t.slowestMs, ms);
  };

  const sendValid = async (n: number) => {
    valid.sent++;
    const kind = pick(['chat', 'chat', 'stream', 'completions']);
    const body =
      kind === 'completions'
        ? { model: 'soak', prompt: `soak request ${n}: once upon a time`, max_tokens: 8 }
        : {
            model: 'soak',
            max_tokens: 8,
            stream: kind === 'stream',
            messages: [
              { role: 'system', content: 'You are terse.' },
              { role: 'user', content: `soak request ${n % 50}` },
            ],
          };
    const t0 = Date.now();
    let status = 0;
    try {
      const response = await fetch(`${router.url}/v1/${kind === 'completions' ? 'completions' : 'chat/completions'}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-conversation-id': `c${n % 40}` },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(ANSWER_BOUND_MS),
      });
      status = response.status;
      const text = await response.text().catch(() => {
        valid.streamsCut++; // an engine killed mid-stream: the status went out, the body was cut
        return '';
      });
      count(valid, status, Date.now() - t0);
      if (status === 500) valid.failures.push(`500: ${text.slice(0, 200)}`);
      else if (status === 200 && kind === 'stream' && text !== '' && !text.includes('data: [DONE]') && !text.includes('"error"'))
        valid.failures.push('a stream ended without [DONE] or an error event');
      else if (status !== 200 && status !== 502 && status !== 503 && status !== 504) valid.failures.push(`status ${status}: ${text.slice(0, 200)}`);
    } catch (error) {
      if (status === 0) valid.unanswered.push(`${kind}: ${(error as Error).message}`);
    }
  };

  const sendHostile = async () => {
    attacks.sent++;
    const c: HostileCase = pick(hostile);
    const t0 = Date.now();
    try {
      let status: number;
      if (c.kind === 'raw') {
        status = (await rawExchange(router.url, c.bytes, ANSWER_BOUND_MS)).status ?? 0;
      } else {
        const response = await fetch(`${router.url}${c.path ?? '/v1/chat/completions'}`, {
          method: c.method ?? 'POST',
          headers: c.headers,
          body: fetchBody(c),
          signal: AbortSignal.timeout(ANSWER_BOUND_MS),
        });
        status = response.status;
        await response.arrayBuffer().catch(() => undefined);
      }
      count(attacks, status, Date.now() - t0);
      // A hostile request that reaches an engine may meet a fault like any other; the router's own answer is never a 500.
      if (status === 500) attacks.failures.push(`${c.name}: 500`);
    } catch (error) {
      attacks.unanswered.push(`${c.name}: ${(error as Error).message}`);
    }
  };

  const injectFault = async () => {
    const i = Math.floor(random() * ENGINES);
    const engine = engines[i];
    if (!engine) return; // already down
    const fault = pick(['kill', 'kill', 'freeze']);
    faults.set(fault, (faults.get(fault) ?? 0) + 1);
    if (fault === 'kill') {
      engines[i] = undefined;
      engine.kill('SIGKILL');
      await new Promise((resolve) => setTimeout(resolve, 1000 + random() * 2000));
      engines[i] = (await start(['engine', String(ports[i])])).child;
    } else {
      engine.kill('SIGSTOP');
      await new Promise((resolve) => setTimeout(resolve, 1000 + random() * 2000));
      engine.kill('SIGCONT');
    }
  };

  // Each flood from a new client address: the penalty one flood earns is not the next one's.
  let floodAddress = 0;
  const startFlood = async () => {
    const flood = pick(CLIENT_FLOODS.filter((f) => f.name.includes(process.env.SOAK_FLOODS ?? '')));
    floods.set(flood.name, (floods.get(flood.name) ?? 0) + 1);
    const ends = Date.now() + FLOOD_MS;
    floodsOn++;
    try {
      await flood.run(router.url, () => Date.now() > ends || elapsed() >= SECONDS, `127.0.0.${(floodAddress++ % 200) + 20}`);
    } finally {
      floodsOn--;
      floodEndedAt = Date.now();
    }
  };

  const track = (p: Promise<void>) => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };

  let n = 0;
  const interval = 1000 / RATE;
  let nextFault = Date.now() + FAULT_EVERY_MS;
  let nextFlood = FLOOD_EVERY_MS > 0 ? Date.now() + FLOOD_EVERY_MS / 2 : Infinity;
  let nextSample = Date.now() + 5000;
  const warmup = Math.min(20, SECONDS / 4);
  while (elapsed() < SECONDS) {
    const due = started + n * interval;
    if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
    track(random() < 0.2 ? sendHostile() : sendValid(n));
    n++;
    if (Date.now() >= nextFault) {
      nextFault = Date.now() + FAULT_EVERY_MS * (0.5 + random());
      track(injectFault());
    }
    if (Date.now() >= nextFlood) {
      nextFlood = Date.now() + FLOOD_EVERY_MS * (0.5 + random());
      track(startFlood());
    }
    if (Date.now() >= nextSample) {
      nextSample = Date.now() + 5000;
      const at = elapsed();
      const windowStart = sampledAt;
      void memory().then((m) => {
        sampledAt = Date.now();
        const sample = { at, flooded: floodsOn > 0 || floodEndedAt > windowStart, ...m };
        samples.push(sample);
        if (at > warmup)
          console.log(
            `  ${at.toFixed(0).padStart(4)} s  rss ${mb(m.rss)} MB  heap ${mb(m.heapUsed)} MB  peak rss ${mb(m.peakRss)} MB  max block ${m.maxBlockMs.toFixed(0)} ms${sample.flooded ? ' (flood)' : ''}  in flight ${pending.size}`,
          );
      });
    }
  }
  await Promise.all(pending);
  for (const engine of engines) engine?.kill('SIGCONT');
  const final = await memory();

  // Memory flat: the heap after a collection, last third against first third after warm-up.
  const steady = samples.filter((s) => s.at > warmup);
  const third = Math.max(1, Math.floor(steady.length / 3));
  const avg = (xs: typeof steady, key: 'rss' | 'heapUsed') => xs.reduce((sum, s) => sum + s[key], 0) / xs.length;
  const heapEarly = steady.length ? avg(steady.slice(0, third), 'heapUsed') : final.heapUsed;
  const heapLate = steady.length ? avg(steady.slice(-third), 'heapUsed') : final.heapUsed;
  const rssEarly = steady.length ? avg(steady.slice(0, third), 'rss') : final.rss;
  const rssLate = steady.length ? avg(steady.slice(-third), 'rss') : final.rss;
  const heapGrowth = heapLate - heapEarly;
  const memoryFlat = heapGrowth < Math.max(32 * 2 ** 20, heapEarly * 0.5);

  const statuses = (t: Tally) =>
    [...t.byStatus]
      .sort(([a], [b]) => a - b)
      .map(([s, c]) => `${s}×${c}`)
      .join(' ');
  console.log('\nsoak summary');
  console.log(`  duration          ${elapsed().toFixed(0)} s, ${n} requests (${(n / elapsed()).toFixed(0)}/s)`);
  console.log(`  faults            ${[...faults].map(([f, c]) => `${f}×${c}`).join(' ') || 'none'}`);
  console.log(`  floods            ${[...floods].map(([f, c]) => `${f} ×${c}`).join('; ') || 'none'}`);
  const worst = (flooded: boolean) => {
    const xs = samples.filter((s) => s.flooded === flooded);
    return xs.length
      ? `max block ${Math.max(...xs.map((s) => s.maxBlockMs)).toFixed(0)} ms, peak rss ${mb(Math.max(...xs.map((s) => s.peakRss)))} MB (${xs.length} samples)`
      : 'no samples';
  };
  console.log(`  router loop       with a flood on: ${worst(true)}; without: ${worst(false)}`);
  console.log(
    `  valid requests    ${valid.sent} sent, ${valid.answered} answered, ${valid.unanswered.length} unanswered; ${statuses(valid)}; ${valid.streamsCut} streams cut by a dying engine; slowest ${valid.slowestMs} ms`,
  );
  console.log(
    `  hostile requests  ${attacks.sent} sent, ${attacks.answered} answered, ${attacks.unanswered.length} unanswered; ${statuses(attacks)}; slowest ${attacks.slowestMs} ms`,
  );
  console.log(
    `  router memory     heap ${mb(heapEarly)} -> ${mb(heapLate)} MB (after gc), rss ${mb(rssEarly)} -> ${mb(rssLate)} MB; final rss ${mb(final.rss)} MB`,
  );
  const problems = [
    ...valid.unanswered.slice(0, 5).map((p) => `unanswered: ${p}`),
    ...attacks.unanswered.slice(0, 5).map((p) => `unanswered hostile: ${p}`),
    ...valid.failures.slice(0, 5),
    ...attacks.failures.slice(0, 5),
    ...(memoryFlat ? [] : [`router heap grew ${mb(heapGrowth)} MB`]),
  ];
  const failed = valid.unanswered.length + attacks.unanswered.length + valid.failures.length + attacks.failures.length + (memoryFlat ? 0 : 1);
  console.log(
    failed === 0
      ? '  result            PASS: every request answered, no 500, memory flat'
      : `  result            FAIL (${failed} problems)\n    ${problems.join('\n    ')}`,
  );

  await new Promise<void>((resolve) => {
    router.child.once('exit', () => resolve());
    router.child.kill('SIGTERM');
  });
  for (const engine of engines) engine?.kill('SIGKILL');
  process.exit(failed === 0 ? 0 : 1);
}

function mb(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}

// One file, three roles: the driver forks itself as the router and the engines.
const role = process.argv[2];
if (role === 'engine') await runEngine(Number(process.argv[3]));
else if (role === 'router') await runRouter(process.argv.slice(3).map(Number));
else await drive();
