// npm run bench:proxy — the router against a bare fastify+undici pass-through
// (which parses each body and serializes it again), in one run:
// - sizes (the default): prompts of ~150 B, 16 KB, 220 KB and 1 MB, JSON and
//   SSE, in front of a fake engine that answers at once; closed loop, in
//   short slices interleaved round by round (docs/serving.md, "Reading
//   bench:proxy"); CPU µs per request of each proxy process, latency, the
//   router's CPU as a ratio of the pass-through's, and an A/A ratio (a second
//   router of the same tree) that shows the run's noise;
// - rate: router CPU µs per request and added latency p50/p99 at a fixed
//   request rate in front of an emulated engine, non-streaming and streaming;
// - saturation: CPU per request with 32 clients back to back.
// BENCH_ONLY=sizes,rate,saturation picks the parts (default: sizes);
// BENCH_SIZES=150,16k picks sizes, BENCH_MODES=json or sse one mode; `turns` and `turns16k` are next turns of
// conversations through a router whose model has a tokenizer (Llama 3.1's).
import { fork, type ChildProcess } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { Pool } from 'undici';
import { textOf } from './prompt-text.ts';

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

// BENCH_PROFILE=DIR writes a CPU profile of each router process, and of the bare pass-through, into DIR (open it in Chrome's DevTools).
const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];

function start(script: string, args: string[]): Promise<{ url: string; adminUrl?: string; child: ChildProcess }> {
  const execArgv = ['--import', 'tsx', ...(script.endsWith('/router.ts') || script.endsWith('/bare-proxy.ts') ? profile : [])];
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
        .request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-conversation-id': `c-${i % 50}` },
          body: body(stream, i),
        })
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
      const response = await pool.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-conversation-id': `c-${i % 50}` },
        body: body(false, i),
      });
      await response.body.text();
      if (response.statusCode !== 200) errors++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await pool.close();
  return errors;
}

function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
}

const parts = new Set((process.env.BENCH_ONLY ?? 'sizes').split(','));
if (parts.has('sizes')) await sizes();
if (!parts.has('rate') && !parts.has('saturation')) process.exit(0);

const engine = await start(`${here}targets/engine.ts`, []);
const bare = await start(`${here}targets/bare-proxy.ts`, [engine.url]);
const router = await start(`${here}targets/router.ts`, [engine.url]);
// BENCH_EXPLORER=1: a decision explorer tab stays open on the router the whole
// time (a client reading its live decision stream), to show what watching costs.
let explorerEvents = 0;
if (process.env.BENCH_EXPLORER && router.adminUrl) {
  const stream = await fetch(`${router.adminUrl}/admin/decisions/stream`);
  void (async () => {
    for await (const chunk of stream.body as unknown as AsyncIterable<Uint8Array>)
      explorerEvents += Buffer.from(chunk).toString().split('event: decision').length - 1;
  })().catch(() => {});
  console.log("an explorer client is subscribed to the router's decision stream");
}
const targets: Target[] = [
  { name: 'engine (direct)', url: engine.url },
  { name: 'bare pass-through', url: bare.url, child: bare.child },
  { name: 'switchyard', url: router.url, child: router.child },
];

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
console.log(`bench:proxy — ${RATE} req/s for ${SECONDS} s per run, ${ROUNDS} interleaved rounds, one emulated engine, 16 output tokens`);
console.log("CPU µs per request is each server process's own CPU time (user+system) over the requests of a run; the table gives the median run.");
// BENCH_ONLY=saturation skips the fixed-rate runs.
for (const stream of parts.has('rate') ? [false, true] : []) {
  // Warm up every path (JIT, connections), then measure in interleaved rounds:
  // this machine is shared and noisy, and alternating spreads the noise evenly.
  for (const target of targets) await load(target, stream).catch(() => undefined);
  const runs = new Map<string, { cpu: number[]; user: number[]; latencies: number[]; errors: number }>(
    targets.map((t) => [t.name, { cpu: [], user: [], latencies: [], errors: 0 }]),
  );
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
    return {
      name: target.name,
      cpu: run.cpu.length ? median(run.cpu) : undefined,
      user: run.user.length ? median(run.user) : undefined,
      all: run.cpu,
      p50: pct(latencies, 0.5),
      p99: pct(latencies, 0.99),
      errors: run.errors,
    };
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
const baseline = process.env.BENCH_BASELINE
  ? { name: 'baseline router', ...(await start(`${process.env.BENCH_BASELINE}/bench/targets/router.ts`, [engine.url])) }
  : undefined;
// BENCH_TRACING=1 adds the router with OpenTelemetry tracing on (every request sampled).
const traced = process.env.BENCH_TRACING
  ? { name: 'traced router', ...(await start(new URL('./targets/router.ts', import.meta.url).pathname, [engine.url, '--tracing'])) }
  : undefined;
if (parts.has('saturation')) {
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
  console.log(
    `bare pass-through ${runs(targets[1])}, switchyard ${runs(targets[2])}: ${(routerCpu / bareCpu).toFixed(2)}× (goal ≤ 1.3×); round by round ${paired(targets[2], targets[1])}×`,
  );
  if (traced)
    console.log(
      `traced router ${runs(traced)}: tracing on costs ${(median(cpu[traced.name]) - routerCpu).toFixed(0)} µs a request (${(median(cpu[traced.name]) / routerCpu).toFixed(2)}× the router without tracing)`,
    );
  if (baseline)
    console.log(
      `baseline router ${runs(baseline)}: ${(median(cpu[baseline.name]) / bareCpu).toFixed(2)}× the bare pass-through; switchyard is ${(routerCpu / median(cpu[baseline.name])).toFixed(2)}× the baseline (round by round ${paired(targets[2], baseline)}×)`,
    );
}

if (process.env.BENCH_EXPLORER) console.log(`the explorer client received ${explorerEvents} decisions`);
// SIGINT: the targets exit cleanly on it, so a profiler gets to write its file.
for (const child of [engine.child, bare.child, router.child, baseline?.child, traced?.child]) child?.kill('SIGINT');
process.exit(0);

/** Prompt text of about `chars` characters: words, punctuation, a few accents, quotes and newlines (escapes in JSON). */
function promptText(chars: number, seed: number): string {
  const words = [
    'the',
    'router',
    'replica',
    'cache',
    'token',
    'prefix',
    'policy',
    'engine',
    'stream',
    'request',
    'model',
    'pool',
    'café',
    'naïve',
    '"quoted"',
    'line\n',
    'a',
    'of',
    'to',
    'and',
  ];
  return textOf(words, ' ', chars, seed);
}

/**
 * Request `i` of a next-turn lane (counted over the lane's slices, so a
 * conversation goes on from one slice of a target to its next): 16
 * conversations side by side, each `TURNS` turns long and then started anew.
 * Turn t carries the t turns before it (the engine's answers included) and one
 * new question, as a chat client sends them: all but the new question was in
 * the previous request.
 */
function turnBody(i: number, run: number, system: string, stream: boolean): { body: string; conversation: string } {
  const TURNS = 6;
  // The fixed engine's answer (bench/targets/fixed-engine.ts): what a next turn carries back as the assistant's message.
  const answer = ' word'.repeat(16);
  const slot = i % 16;
  const k = Math.floor(i / 16);
  const conversation = `${run}.${slot}.${Math.floor(k / TURNS)}`;
  const question = (t: number) => ({ role: 'user', content: `Conversation ${conversation}, question ${t}: what does part ${t} say, in one line?` });
  const messages: object[] = [{ role: 'system', content: system }];
  for (let t = 0; t < k % TURNS; t++) messages.push(question(t), { role: 'assistant', content: answer });
  messages.push(question(k % TURNS));
  return { body: JSON.stringify({ model: 'bench-model', messages, max_tokens: 16, stream }), conversation };
}

/** Prompt sizes × JSON/SSE: the router against the bare pass-through, closed loop, in short interleaved slices. */
async function sizes(): Promise<void> {
  // `turns`, `turns16k`: next turns of conversations (a short system prompt, or a 16 KB document in it)
  // through a router whose model has a tokenizer (Llama 3.1's), so that every prompt is counted in the engine's tokens.
  // `slice`: requests a target serves in one slice, a few to a few tens of milliseconds of this machine's time (at least
  // the 8 clients' worth); `rounds`: how many slices of each target are measured (fewer where a request costs milliseconds);
  // `warmUp`: slices each target serves first, unmeasured (JIT tiers, heap sizing, the decision log filling: ~2,000
  // requests at 150 B, as the runs before the slices warmed up with).
  const SIZES: Record<string, { chars: number; slice: number; rounds: number; warmUp: number; turns?: boolean }> = {
    '150': { chars: 60, slice: 40, rounds: 200, warmUp: 50 },
    '16k': { chars: 16 * 1024, slice: 16, rounds: 200, warmUp: 60 },
    '220k': { chars: 220 * 1024, slice: 8, rounds: 120, warmUp: 12 },
    // Under large_body_bytes (1 MiB, accents included): 8 clients' bodies at once are not the large-body bound's to refuse.
    '1m': { chars: 980_000, slice: 8, rounds: 60, warmUp: 3 },
    turns: { chars: 60, slice: 40, rounds: 200, warmUp: 50, turns: true },
    turns16k: { chars: 16 * 1024, slice: 16, rounds: 200, warmUp: 60, turns: true },
  };
  const chosen = (process.env.BENCH_SIZES ?? Object.keys(SIZES).join(',')).split(',').filter((name) => name in SIZES);
  const scale = Number(process.env.BENCH_SCALE ?? 1);
  const concurrency = 8;
  // BENCH_MODES=json or sse: one of the two (a profile of one mode alone).
  const modes = (process.env.BENCH_MODES ?? 'json,sse').split(',').flatMap((mode) => (mode === 'json' ? [false] : mode === 'sse' ? [true] : []));
  // Each lane and mode talks in conversations of its own, which every target of the lane is sent in the same order.
  let turnRun = 0;
  const engine = await start(`${here}targets/fixed-engine.ts`, []);
  const bare: Target = { name: 'bare pass-through', ...(await start(`${here}targets/bare-proxy.ts`, [engine.url])) };
  const router: Target = { name: 'switchyard', ...(await start(`${here}targets/router.ts`, [engine.url])) };
  // The A/A lane (BENCH_AA=0 drops it): a second router of this tree in the same rounds; its ratio to the first is the bench's noise.
  const twin: Target | undefined =
    process.env.BENCH_AA === '0' ? undefined : { name: 'switchyard (A/A twin)', ...(await start(`${here}targets/router.ts`, [engine.url])) };
  const baseline: Target | undefined = process.env.BENCH_BASELINE
    ? { name: 'baseline router', ...(await start(`${process.env.BENCH_BASELINE}/bench/targets/router.ts`, [engine.url])) }
    : undefined;
  // The next-turn lanes' router: its model counts prompts with a tokenizer (the baseline and the twin are left out of them).
  const tokenized = chosen.some((size) => SIZES[size].turns)
    ? { name: 'switchyard', ...(await start(`${here}targets/router.ts`, [engine.url, '--tokenizer'])) }
    : undefined;
  if (tokenized) await tokenizerReady(tokenized);
  // One client pool per target for the whole bench: a slice does not pay for new connections.
  const pools = new Map<Target, Pool>();
  const poolOf = (target: Target) => {
    let pool = pools.get(target);
    if (!pool) pools.set(target, (pool = new Pool(target.url, { connections: concurrency, keepAliveTimeout: 60_000 })));
    return pool;
  };
  console.log(
    `bench:proxy sizes — closed loop, ${concurrency} clients, rounds of short slices (one per target, in a rotated order) after warm-up slices; a fake engine answering 16 tokens at once`,
  );
  console.log(
    "CPU µs/req: each proxy process's own CPU time (every thread's, read from /proc between slices), median slice; ratio: the router's over the pass-through's round by round, median [95 % interval of that median]",
  );
  console.log(
    'size  mode | bare CPU µs/req | switchyard CPU µs/req | ratio              | bare p50/p99 ms | switchyard p50/p99 ms' +
      (twin ? ' | A/A: twin ÷ switchyard' : '') +
      (baseline ? ' | baseline CPU µs/req | ratio | switchyard ÷ baseline' : ''),
  );
  for (const size of chosen) {
    const { chars, slice: baseSlice, turns } = SIZES[size];
    const requests = Math.max(concurrency, Math.round(baseSlice * scale));
    // A round is one slice of every target of the lane, in a rotated order.
    const rounds = Number(process.env.BENCH_ROUNDS ?? SIZES[size].rounds);
    // A next-turn lane also runs the router without a tokenizer on the same bodies: what is the tokenizer's and what the base router's.
    const lane: Target[] = turns
      ? [bare, tokenized!, { ...router, name: 'switchyard, no tokenizer' }]
      : [bare, router, ...(twin ? [twin] : []), ...(baseline ? [baseline] : [])];
    for (const stream of modes) {
      // 16 distinct documents: prefix-affinity sees a realistic spread, and the client pre-builds every body.
      const system = (i: number) => (chars < 1024 ? 'You are a concise assistant.' : promptText(chars, i + 1));
      const bodies = Array.from({ length: 16 }, (_, i) =>
        Buffer.from(
          JSON.stringify({
            model: 'bench-model',
            messages: [
              { role: 'system', content: system(i) },
              { role: 'user', content: `Question ${i}: summarise it in one line.` },
            ],
            max_tokens: 16,
            stream,
          }),
        ),
      );
      const systems = Array.from({ length: 16 }, (_, i) => system(i));
      const errors = new Map<string, number>();
      const runId = ++turnRun;
      // Requests each target was sent in this lane and mode so far: where its next slice's conversations go on.
      const sentTo = new Map<Target, number>();
      /** One slice: `count` requests to one target; its CPU µs per request and its latencies. */
      const run = async (target: Target, count: number) => {
        const pool = poolOf(target);
        const latencies: number[] = [];
        let next = 0;
        const first = sentTo.get(target) ?? 0;
        sentTo.set(target, first + count);
        const before = await cpuMicros(target);
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (next < count) {
              const i = next++;
              // A next turn's body is built before its clock starts, as the other lanes' are built before the run.
              const turn = turns ? turnBody(first + i, runId, systems[(first + i) % 16], stream) : undefined;
              const sent = performance.now();
              const response = await pool.request({
                path: '/v1/chat/completions',
                method: 'POST',
                headers: { 'content-type': 'application/json', 'x-conversation-id': turn ? `t-${turn.conversation}` : `c-${i % 50}` },
                body: turn ? turn.body : bodies[i % bodies.length],
              });
              await response.body.text();
              if (response.statusCode !== 200) errors.set(target.name, (errors.get(target.name) ?? 0) + 1);
              latencies.push(performance.now() - sent);
            }
          }),
        );
        // A millisecond for what the target does after its last answer went out (the log line, the lifecycle's end).
        await new Promise((resolve) => setTimeout(resolve, 1));
        const after = await cpuMicros(target);
        return { cpu: (after - before) / count, latencies };
      };
      // BENCH_WARMUP: the warm-up slices of every size (the JIT's tiers settle over thousands of requests: docs/serving.md).
      const warmUp = Number(process.env.BENCH_WARMUP ?? SIZES[size].warmUp);
      for (const target of lane) for (let s = 0; s < warmUp; s++) await run(target, requests);
      errors.clear();
      const counted = tokenized && turns ? await tokenCounts(tokenized) : undefined;
      const cpu = new Map<string, number[]>(lane.map((t) => [t.name, []]));
      const latencies = new Map<string, number[]>(lane.map((t) => [t.name, []]));
      for (let round = 0; round < rounds; round++) {
        for (const target of rotated(lane, round)) {
          const result = await run(target, requests);
          cpu.get(target.name)!.push(result.cpu);
          latencies.get(target.name)!.push(...result.latencies);
        }
      }
      // BENCH_RAW=FILE: every slice's CPU µs per request, by target, one JSON line per lane (for other estimators).
      if (process.env.BENCH_RAW) appendFileSync(process.env.BENCH_RAW, `${JSON.stringify({ size, stream, cpu: Object.fromEntries(cpu) })}\n`);
      for (const [name, n] of errors) console.log(`${name}: ${n} of ${rounds * requests} requests failed at ${size} ${stream ? 'SSE' : 'JSON'}`);
      const [, routed, third] = lane;
      const ratio = (a: Target, b: Target) => medianWithInterval(cpu.get(a.name)!.map((c, r) => c / cpu.get(b.name)![r]));
      const lat = (t: Target) => {
        const sorted = latencies.get(t.name)!.sort((a, b) => a - b);
        return `${pct(sorted, 0.5).toFixed(2)} / ${pct(sorted, 0.99).toFixed(2)}`;
      };
      const slices = (t: Target) => {
        const sorted = [...cpu.get(t.name)!].sort((a, b) => a - b);
        // The median slice and the middle half of the slices.
        return `${pct(sorted, 0.5).toFixed(0)} (${pct(sorted, 0.25).toFixed(0)}–${pct(sorted, 0.75).toFixed(0)})`;
      };
      let line = `${size.padEnd(5)} ${stream ? 'SSE ' : 'JSON'} | ${slices(bare).padStart(15)} | ${slices(routed).padStart(21)} | ${ratio(routed, bare).padEnd(18)} | ${lat(bare).padStart(15)} | ${lat(routed).padStart(21)}`;
      if (turns) line += ` | no tokenizer ${slices(third)} ${ratio(third, bare)} (with/without ${ratio(routed, third)})`;
      else {
        if (twin) line += ` | ${ratio(twin, routed).padEnd(22)}`;
        if (baseline) line += ` | ${slices(baseline).padStart(19)} | ${ratio(baseline, bare)} | ${ratio(routed, baseline)}`;
      }
      console.log(line);
      if (counted) {
        const after = await tokenCounts(tokenized!);
        const by = Object.entries(after)
          .map(([kind, n]) => `${kind} ${n - (counted[kind] ?? 0)}`)
          .filter((text) => !text.endsWith(' 0'));
        console.log(`      the measured rounds' prompts were counted by: ${by.join(', ')}`);
      }
    }
  }
  await Promise.all([...pools.values()].map((pool) => pool.close()));
  for (const child of [engine.child, bare.child, router.child, twin?.child, baseline?.child, tokenized?.child]) child?.kill('SIGINT');
}

/**
 * The order of a lane's targets in round `round`: rotated by one each round, and reversed every other
 * cycle, so that every target runs in every place, before and after each other one, equally often.
 */
function rotated<T>(lane: T[], round: number): T[] {
  const shift = round % lane.length;
  const order = [...lane.slice(shift), ...lane.slice(0, shift)];
  return Math.floor(round / lane.length) % 2 ? order.reverse() : order;
}

/** `median× [low–high]`: the median ratio and a distribution-free 95 % interval of it (order statistics n/2 ± 0.98√n). */
function medianWithInterval(ratios: number[]): string {
  const sorted = [...ratios].sort((a, b) => a - b);
  const n = sorted.length;
  const half = 0.98 * Math.sqrt(n);
  const low = sorted[Math.max(0, Math.floor(n / 2 - half))];
  const high = sorted[Math.min(n - 1, Math.ceil(n / 2 + half))];
  return `${median(sorted).toFixed(2)}× [${low.toFixed(2)}–${high.toFixed(2)}]`;
}

/**
 * A target process's CPU time so far, in µs: the sum over its threads (the tokenizer's worker thread included)
 * of the run time Linux keeps in /proc/PID/task/TID/schedstat, in nanoseconds. Read from outside, it costs the
 * target nothing and is exact to the slice; where /proc is missing, the target's own process.cpuUsage() over IPC.
 */
async function cpuMicros(target: Target): Promise<number> {
  const pid = target.child!.pid!;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    const { userMicros, systemMicros } = await cpuOf(target.child!);
    return userMicros + systemMicros;
  }
  let nanos = 0;
  for (const task of tasks) {
    try {
      nanos += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return nanos / 1000;
}

/** The router's prompt token counts by source and fallback (its switchyard_prompt_token_counts_total), from its admin listener. */
async function tokenCounts(target: Target & { adminUrl?: string }): Promise<Record<string, number>> {
  const page = await (await fetch(`${target.adminUrl}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of page.matchAll(/^switchyard_prompt_token_counts_total\{source="(\w+)",fallback="(\w+)"\} (\d+)/gm))
    counts[match[2] === 'none' ? match[1] : `${match[1]} (${match[2]})`] = Number(match[3]);
  return counts;
}

/** Waits (up to a minute) until the router counts a chat with its tokenizer: loading it takes seconds. */
async function tokenizerReady(target: Target & { adminUrl?: string }): Promise<void> {
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline) {
    const response = await fetch(`${target.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Are you there?' }], max_tokens: 16 }),
    });
    await response.text();
    if ((await tokenCounts(target)).tokenizer > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error("the next-turn lanes' router did not load its tokenizer within a minute");
}
