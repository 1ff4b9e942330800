// npm run bench:proxy — the router against a bare fastify+undici pass-through,
// in one run, in front of the same emulated engine: router CPU µs per request
// (each server process's own CPU time) and added latency p50/p99 at a fixed
// request rate, non-streaming and streaming.
import { fork, type ChildProcess } from 'node:child_process';
import { Pool } from 'undici';

// Requests per second, open loop. At low rates the router's fixed background
// work (health checks, scrapes: ~7.5 ms/s) dominates "CPU per request";
// BENCH_RATE=200 shows that regime.
const RATE = Number(process.env.BENCH_RATE ?? 500);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const here = new URL('.', import.meta.url).pathname;

interface Target {
  name: string;
  url: string;
  child?: ChildProcess;
}

// BENCH_PROFILE=DIR writes a CPU profile of each router process into DIR (open it in Chrome's DevTools).
const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];

function start(script: string, args: string[]): Promise<{ url: string; adminUrl?: string; child: ChildProcess }> {
  const execArgv = ['--import', 'tsx', ...(script.endsWith('/router.ts') ? profile : [])];
  const child = fork(script, args, { execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ ...(m as { url: string; adminUrl?: string }), child }));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

interface Cpu {
  userMicros: number;
  systemMicros: number;
}

function cpuOf(child: ChildProcess): Promise<Cpu> {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve(m as Cpu));
    child.send('cpu');
  });
}

const body = (stream: boolean, i: number) =>
  JSON.stringify({
    model: 'bench-model',
    messages: [
      { role: 'system', content: 'You are a concise assistant. '.repeat(20) },
      { role: 'user', content: `Question ${i}: summarise the plot of a novel in one line.` },
    ],
    max_tokens: 16,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });

async function load(target: Target, stream: boolean): Promise<{ latencies: number[]; errors: number }> {
  const pool = new Pool(target.url, { connections: 256 });
  const latencies: number[] = [];
  let errors = 0;
  const total = RATE * SECONDS;
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const sent = performance.now();
    inFlight.push(
      pool
        .request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', 'x-conversation-id': `c-${i % 50}` }, body: body(stream, i) })
        .then(async (response) => {
          await response.body.text();
          if (response.statusCode !== 200) errors++;
          else latencies.push(performance.now() - sent);
        })
        .catch(() => {
          errors++;
        }),
    );
  }
  await Promise.all(inFlight);
  await pool.close();
  return { latencies: latencies.sort((a, b) => a - b), errors };
}

/** Closed loop: `concurrency` clients back to back, for CPU per request with nothing idle to amortize. */
async function saturate(target: Target, total: number, concurrency: number): Promise<number> {
  const pool = new Pool(target.url, { connections: concurrency });
  let next = 0;
  let errors = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const response = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', 'x-conversation-id': `c-${i % 50}` }, body: body(false, i) });
      await response.body.text();
      if (response.statusCode !== 200) errors++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await pool.close();
  return errors;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;

const engine = await start(`${here}targets/engine.ts`, []);
const bare = await start(`${here}targets/bare-proxy.ts`, [engine.url]);
const router = await start(`${here}targets/router.ts`, [engine.url]);
// BENCH_EXPLORER=1: a decision explorer tab stays open on the router the whole
// time (a client reading its live decision stream), to show what watching costs.
let explorerEvents = 0;
if (process.env.BENCH_EXPLORER && router.adminUrl) {
  const stream = await fetch(`${router.adminUrl}/admin/decisions/stream`);
  void (async () => {
    for await (const chunk of stream.body as unknown as AsyncIterable<Uint8Array>) explorerEvents += Buffer.from(chunk).toString().split('event: decision').length - 1;
  })().catch(() => {});
  console.log('an explorer client is subscribed to the router\'s decision stream');
}
const targets: Target[] = [
  { name: 'engine (direct)', url: engine.url },
  { name: 'bare pass-through', url: bare.url, child: bare.child },
  { name: 'switchyard', url: router.url, child: router.child },
];

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
console.log(`bench:proxy — ${RATE} req/s for ${SECONDS} s per run, ${ROUNDS} interleaved rounds, one emulated engine, 16 output tokens`);
console.log('CPU µs per request is each server process\'s own CPU time (user+system) over the requests of a run; the table gives the median run.');
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
// BENCH_ONLY=saturation skips the fixed-rate runs.
for (const stream of process.env.BENCH_ONLY === 'saturation' ? [] : [false, true]) {
  // Warm up every path (JIT, connections), then measure in interleaved rounds:
  // this machine is shared and noisy, and alternating spreads the noise evenly.
  for (const target of targets) await load(target, stream).catch(() => undefined);
  const runs = new Map<string, { cpu: number[]; user: number[]; latencies: number[]; errors: number }>(targets.map((t) => [t.name, { cpu: [], user: [], latencies: [], errors: 0 }]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...targets].reverse() : targets;
    for (const target of order) {
      const before = target.child ? await cpuOf(target.child) : undefined;
      const { latencies, errors } = await load(target, stream);
      const after = target.child ? await cpuOf(target.child) : undefined;
      const run = runs.get(target.name)!;
      run.latencies.push(...latencies);
      run.errors += errors;
      if (before && after) {
        const n = latencies.length + errors;
        run.user.push((after.userMicros - before.userMicros) / n);
        run.cpu.push((after.userMicros - before.userMicros + after.systemMicros - before.systemMicros) / n);
      }
    }
  }
  const rows = targets.map((target) => {
    const run = runs.get(target.name)!;
    const latencies = run.latencies.sort((a, b) => a - b);
    return { name: target.name, cpu: run.cpu.length ? median(run.cpu) : undefined, user: run.user.length ? median(run.user) : undefined, all: run.cpu, p50: pct(latencies, 0.5), p99: pct(latencies, 0.99), errors: run.errors };
  });
  const direct = rows[0];
  console.log(`\n${stream ? 'streaming (SSE)' : 'non-streaming'}`);
  console.log('target              | CPU µs/req (user) | every run          | latency p50 ms | p99 ms | added p50 ms | added p99 ms | errors');
  for (const row of rows) {
    console.log(
      `${row.name.padEnd(19)} | ${row.cpu === undefined ? '                -' : `${row.cpu.toFixed(0).padStart(10)} (${row.user!.toFixed(0).padStart(4)})`} | ${(row.all.map((c) => c.toFixed(0)).join(' ') || '-').padEnd(18)} | ${row.p50.toFixed(2).padStart(14)} | ${row.p99.toFixed(2).padStart(6)} | ${(row.p50 - direct.p50).toFixed(2).padStart(12)} | ${(row.p99 - direct.p99).toFixed(2).padStart(12)} | ${row.errors}`,
    );
  }
  console.log(`router CPU per request = ${(rows[2].cpu! / rows[1].cpu!).toFixed(2)}× the bare pass-through's (median runs; goal ≤ 1.3×)`);
}

// At saturation: per-request cost with no idle time and no background work to spread.
// BENCH_BASELINE=DIR adds the router of another checkout (e.g. `git worktree add
// /tmp/base main`, with its node_modules) to the same interleaved rounds: what a
// change costs, measured in one run.
const baseline = process.env.BENCH_BASELINE ? { name: 'baseline router', ...(await start(`${process.env.BENCH_BASELINE}/bench/targets/router.ts`, [engine.url])) } : undefined;
// BENCH_TRACING=1 adds the router with OpenTelemetry tracing on (every request sampled).
const traced = process.env.BENCH_TRACING ? { name: 'traced router', ...(await start(new URL('./targets/router.ts', import.meta.url).pathname, [engine.url, '--tracing'])) } : undefined;
{
  const SATURATION_REQUESTS = Number(process.env.BENCH_SATURATION_REQUESTS ?? 6000);
  const proxies: Target[] = [targets[1], targets[2], ...(baseline ? [baseline] : []), ...(traced ? [traced] : [])];
  // Warm up with a full run each: after only 2,000 requests the first measured
  // run still cost both proxies 40-50% more (JIT tiers, heap sizing).
  for (const target of proxies) await saturate(target, SATURATION_REQUESTS, 32);
  const cpu: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const target of round % 2 ? [...proxies].reverse() : proxies) {
      const before = await cpuOf(target.child!);
      const errors = await saturate(target, SATURATION_REQUESTS, 32);
      const after = await cpuOf(target.child!);
      if (errors) console.log(`${target.name}: ${errors} errors at saturation`);
      (cpu[target.name] ??= []).push((after.userMicros - before.userMicros + after.systemMicros - before.systemMicros) / SATURATION_REQUESTS);
    }
  }
  const runs = (target: Target) => `${median(cpu[target.name]).toFixed(0)} µs/req (${cpu[target.name].map((c) => c.toFixed(0)).join(' ')})`;
  // Each round's two runs share that minute's noise (the machine is shared): the median of the rounds' ratios is steadier than a ratio of medians.
  const paired = (a: Target, b: Target) => median(cpu[a.name].map((c, round) => c / cpu[b.name][round])).toFixed(2);
  const bareCpu = median(cpu[targets[1].name]);
  const routerCpu = median(cpu[targets[2].name]);
  console.log(`\nat saturation (non-streaming, 32 concurrent clients, ${SATURATION_REQUESTS} requests a run, median of ${ROUNDS})`);
  console.log(`bare pass-through ${runs(targets[1])}, switchyard ${runs(targets[2])}: ${(routerCpu / bareCpu).toFixed(2)}× (goal ≤ 1.3×); round by round ${paired(targets[2], targets[1])}×`);
  if (traced) console.log(`traced router ${runs(traced)}: tracing on costs ${(median(cpu[traced.name]) - routerCpu).toFixed(0)} µs a request (${(median(cpu[traced.name]) / routerCpu).toFixed(2)}× the router without tracing)`);
  if (baseline) console.log(`baseline router ${runs(baseline)}: ${(median(cpu[baseline.name]) / bareCpu).toFixed(2)}× the bare pass-through; switchyard is ${(routerCpu / median(cpu[baseline.name])).toFixed(2)}× the baseline (round by round ${paired(targets[2], baseline)}×)`);
}

if (process.env.BENCH_EXPLORER) console.log(`the explorer client received ${explorerEvents} decisions`);
// SIGINT: the targets exit cleanly on it, so a profiler gets to write its file.
for (const child of [engine.child, bare.child, router.child, baseline?.child, traced?.child]) child?.kill('SIGINT');
process.exit(0);
