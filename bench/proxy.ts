// npm run bench:proxy — the router against a bare fastify+undici pass-through
// (which parses each body and serializes it again), in one run:
// - sizes (the default): prompts of ~150 B, 16 KB, 220 KB and 1 MB, JSON and
//   SSE, in front of a fake engine that answers at once; closed loop,
//   interleaved rounds; CPU µs per request of each proxy process, latency,
//   and the router's CPU as a ratio of the pass-through's;
// - rate: router CPU µs per request and added latency p50/p99 at a fixed
//   request rate in front of an emulated engine, non-streaming and streaming;
// - saturation: CPU per request with 32 clients back to back.
// BENCH_ONLY=sizes,rate,saturation picks the parts (default: sizes);
// BENCH_SIZES=150,16k picks sizes, BENCH_MODES=json or sse one mode; `turns` and `turns16k` are next turns of
// conversations through a router whose model has a tokenizer (Llama 3.1's).
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
  let x = seed * 2654435761 || 1;
  const out: string[] = [];
  let length = 0;
  while (length < chars) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const word = words[(x >>> 0) % words.length];
    out.push(word);
    length += word.length + 1;
  }
  return out.join(' ').slice(0, chars);
}

/**
 * Request `i` of a next-turn lane: 16 conversations side by side, each
 * `TURNS` turns long and then started anew. Turn t carries the t turns
 * before it (the engine's answers included) and one new question, as a chat
 * client sends them: all but the new question was in the previous request.
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

/** Prompt sizes × JSON/SSE: the router against the bare pass-through, closed loop, interleaved. */
async function sizes(): Promise<void> {
  // `turns`, `turns16k`: next turns of conversations (a short system prompt, or a 16 KB document in it)
  // through a router whose model has a tokenizer (Llama 3.1's), so that every prompt is counted in the engine's tokens.
  const SIZES: Record<string, { chars: number; requests: number; turns?: boolean }> = {
    '150': { chars: 60, requests: 3000 },
    '16k': { chars: 16 * 1024, requests: 1500 },
    '220k': { chars: 220 * 1024, requests: 300 },
    // Under large_body_bytes (1 MiB, accents included): 8 clients' bodies at once are not the large-body bound's to refuse.
    '1m': { chars: 980_000, requests: 80 },
    turns: { chars: 60, requests: 3000, turns: true },
    turns16k: { chars: 16 * 1024, requests: 1500, turns: true },
  };
  const chosen = (process.env.BENCH_SIZES ?? Object.keys(SIZES).join(',')).split(',').filter((name) => name in SIZES);
  const scale = Number(process.env.BENCH_SCALE ?? 1);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const concurrency = 8;
  // BENCH_MODES=json or sse: one of the two (a profile of one mode alone).
  const modes = (process.env.BENCH_MODES ?? 'json,sse').split(',').flatMap((mode) => (mode === 'json' ? [false] : mode === 'sse' ? [true] : []));
  // Each run of a next-turn lane talks in conversations of its own: nothing it sends was sent before.
  let turnRun = 0;
  const engine = await start(`${here}targets/fixed-engine.ts`, []);
  const bare: Target = { name: 'bare pass-through', ...(await start(`${here}targets/bare-proxy.ts`, [engine.url])) };
  const proxies: Target[] = [bare, { name: 'switchyard', ...(await start(`${here}targets/router.ts`, [engine.url])) }];
  if (process.env.BENCH_BASELINE)
    proxies.push({ name: 'baseline router', ...(await start(`${process.env.BENCH_BASELINE}/bench/targets/router.ts`, [engine.url])) });
  // The next-turn lanes' router: its model counts prompts with a tokenizer (the baseline, if any, is left out of them).
  const tokenized = chosen.some((size) => SIZES[size].turns)
    ? { name: 'switchyard', ...(await start(`${here}targets/router.ts`, [engine.url, '--tokenizer'])) }
    : undefined;
  if (tokenized) await tokenizerReady(tokenized);
  console.log(
    `bench:proxy sizes — closed loop, ${concurrency} clients, ${rounds} interleaved rounds after a warm-up run; a fake engine answering 16 tokens at once`,
  );
  console.log("CPU µs/req: each proxy process's own CPU time (user+system) over a run; ratio: the router's over the pass-through's, round by round, median");
  console.log(
    'size  mode | bare CPU µs/req | switchyard CPU µs/req | ratio | bare p50/p99 ms | switchyard p50/p99 ms' +
      (proxies[2] ? ' | baseline CPU µs/req | ratio' : ''),
  );
  for (const size of chosen) {
    const { chars, requests: baseRequests, turns } = SIZES[size];
    const requests = Math.max(20, Math.round(baseRequests * scale));
    // A next-turn lane also runs the router without a tokenizer on the same bodies: what is the tokenizer's and what the base router's.
    const lane: Target[] = turns ? [bare, tokenized!, { ...proxies[1], name: 'switchyard, no tokenizer' }] : proxies;
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
      const run = async (target: Target) => {
        const pool = new Pool(target.url, { connections: concurrency });
        const latencies: number[] = [];
        let next = 0;
        let errors = 0;
        const runId = ++turnRun;
        const before = await cpuOf(target.child!);
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (next < requests) {
              const i = next++;
              // A next turn's body is built before its clock starts, as the other lanes' are built before the run.
              const turn = turns ? turnBody(i, runId, systems[i % 16], stream) : undefined;
              const sent = performance.now();
              const response = await pool.request({
                path: '/v1/chat/completions',
                method: 'POST',
                headers: { 'content-type': 'application/json', 'x-conversation-id': turn ? `t-${turn.conversation}` : `c-${i % 50}` },
                body: turn ? turn.body : bodies[i % bodies.length],
              });
              await response.body.text();
              if (response.statusCode !== 200) errors++;
              latencies.push(performance.now() - sent);
            }
          }),
        );
        const after = await cpuOf(target.child!);
        await pool.close();
        if (errors) console.log(`${target.name}: ${errors} of ${requests} requests failed at ${size} ${stream ? 'SSE' : 'JSON'}`);
        return {
          cpu: (after.userMicros - before.userMicros + after.systemMicros - before.systemMicros) / requests,
          latencies: latencies.sort((a, b) => a - b),
        };
      };
      for (const target of lane) await run(target);
      const counted = tokenized && turns ? await tokenCounts(tokenized) : undefined;
      const cpu = new Map<string, number[]>(lane.map((t) => [t.name, []]));
      const latencies = new Map<string, number[]>(lane.map((t) => [t.name, []]));
      for (let round = 0; round < rounds; round++) {
        for (const target of round % 2 ? [...lane].reverse() : lane) {
          const result = await run(target);
          cpu.get(target.name)!.push(result.cpu);
          latencies.get(target.name)!.push(...result.latencies);
        }
      }
      const [, router, baseline] = lane;
      const ratio = (a: Target, b: Target) => median(cpu.get(a.name)!.map((c, r) => c / cpu.get(b.name)![r]));
      const lat = (t: Target) => {
        const sorted = latencies.get(t.name)!.sort((a, b) => a - b);
        return `${pct(sorted, 0.5).toFixed(2)} / ${pct(sorted, 0.99).toFixed(2)}`;
      };
      const runs = (t: Target) =>
        `${median(cpu.get(t.name)!).toFixed(0)} (${cpu
          .get(t.name)!
          .map((c) => c.toFixed(0))
          .join(' ')})`;
      console.log(
        `${size.padEnd(5)} ${stream ? 'SSE ' : 'JSON'} | ${runs(bare).padStart(15)} | ${runs(router).padStart(21)} | ${ratio(router, bare).toFixed(2).padStart(4)}× | ${lat(bare).padStart(15)} | ${lat(router).padStart(21)}` +
          (baseline && turns
            ? ` | no tokenizer ${runs(baseline)} ${ratio(baseline, bare).toFixed(2)}× (with/without ${ratio(router, baseline).toFixed(2)}×)`
            : baseline
              ? ` | ${runs(baseline).padStart(19)} | ${ratio(baseline, bare).toFixed(2)}× (switchyard/baseline ${ratio(router, baseline).toFixed(2)}×)`
              : ''),
      );
      if (counted) {
        const after = await tokenCounts(tokenized!);
        const by = Object.entries(after)
          .map(([kind, n]) => `${kind} ${n - (counted[kind] ?? 0)}`)
          .filter((text) => !text.endsWith(' 0'));
        console.log(`      the measured rounds' prompts were counted by: ${by.join(', ')}`);
      }
    }
  }
  for (const child of [engine.child, ...proxies.map((p) => p.child), tokenized?.child]) child?.kill('SIGINT');
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
