// npm run bench:shadow — what the shadow policy costs per shadowed request:
// the bundled policy live, a candidate (the bundled policy with its
// long-prompt threshold lowered to 500 tokens) in the shadow, over a mix of
// requests. Rounds alternate, in one process: the live decision alone
// (facts, decide, commit) and the live decision plus everything the proxy
// adds for the shadow (the observer call, then the shadow's decide and
// commit run from setImmediate). Prints µs per request and the ratio.
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commit } from '../core/decide/commit.ts';
import { decide } from '../core/decide/decide.ts';
import { createEnv } from '../core/decide/env.ts';
import { requestFacts, type RequestFacts } from '../core/facts/request-facts.ts';
import { EMPTY_FLEET } from '../core/fleet/types.ts';
import { PolicyStore } from '../core/decide/store.ts';
import { Shadow } from '../core/shadow/shadow.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const live = await PolicyStore.open({ dir: 'policies', builtins: BUILTIN_STRATEGIES, seed: 1 });
const candidate = mkdtempSync(join(tmpdir(), 'switchyard-bench-shadow-'));
cpSync('policies', candidate, { recursive: true });
writeFileSync(join(candidate, 'rules.yaml'), readFileSync(join(candidate, 'rules.yaml'), 'utf8').replace('value: 16000', 'value: 500'));
const shadow = new Shadow({ builtins: BUILTIN_STRATEGIES, watch: false, sampling: { maxPerSecond: Infinity, maxBusyMsPerSecond: Infinity } });
const set = await shadow.set(candidate);
if (set.result !== 'live') throw new Error(`the candidate policy was refused: ${set.result === 'refused' ? set.errors.join('; ') : ''}`);
const baseEnv = createEnv({ seed: 1 });
const env = shadow.attach({ env: baseEnv, fleet: EMPTY_FLEET });

const system = 'You are a helpful assistant for ACME Corp. Answer briefly and cite sources. '.repeat(12);
const snapshot = live.current();
const requests: RequestFacts[] = Array.from({ length: 2000 }, (_, i) => {
  const kind = i % 5;
  const headers: Record<string, string> = {};
  if (kind !== 4) headers['x-conversation-id'] = `conv-${i % 300}`;
  if (kind === 3) headers.authorization = 'Bearer sk-demo-lora';
  const long = i % 7 === 0 ? ' more context'.repeat(200) : '';
  const messages = [
    { role: 'system', content: system },
    { role: 'user', content: `Question number ${i}: what happens next in the story?${long}` },
  ];
  return requestFacts(
    { requestId: `b-${i}`, endpoint: 'chat', headers, body: { model: kind === 0 ? 'auto' : 'chat-small', messages, max_tokens: 128 } },
    { estimator: snapshot.settings.estimator },
  ) as RequestFacts;
});

const drain = () => new Promise((resolve) => setImmediate(resolve));

/** µs per request over one round of every request; with the shadow, until its last decision ran. */
async function round(withShadow: boolean): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < requests.length; i++) {
    const facts = requests[i];
    const decision = decide(facts, snapshot, EMPTY_FLEET, env);
    commit(decision, env);
    if (withShadow) shadow.decided(facts, decision);
    // The proxy awaits the engine between requests: shadow work queued by one request runs before the next.
    if (withShadow && i % 50 === 49) await drain();
  }
  await drain();
  return ((performance.now() - started) * 1000) / requests.length;
}

for (let i = 0; i < 3; i++) await round(i % 2 === 1); // warm up
const alone: number[] = [];
const shadowed: number[] = [];
for (let i = 0; i < 10; i++) {
  alone.push(await round(false));
  shadowed.push(await round(true));
}
const median = (list: number[]) => [...list].sort((a, b) => a - b)[list.length >> 1];
const summary = shadow.summary() as { totals: { shadowed: number; differs: number }; costMicros: { p50: number; p99: number } };
console.log(
  `bench:shadow — bundled policy live, candidate (long prompts from 500 tokens) in the shadow; ${requests.length} requests a round, 10 rounds each, alternated`,
);
console.log(`live decision alone (facts built once; decide + commit):   ${median(alone).toFixed(1)} µs/request (median of rounds)`);
console.log(`live decision + shadow (observer, decide + shadow commit): ${median(shadowed).toFixed(1)} µs/request`);
console.log(
  `added per shadowed request: ${(median(shadowed) - median(alone)).toFixed(1)} µs (${(median(shadowed) / median(alone)).toFixed(2)}× the live decision)`,
);
console.log(`shadow decision alone, measured inside the router (last 1000): p50 ${summary.costMicros.p50} µs, p99 ${summary.costMicros.p99} µs`);
console.log(`shadowed ${summary.totals.shadowed} requests since the last reset, ${summary.totals.differs} differed`);
console.log(`bound: at most 200 shadow decisions and 50 ms of shadow time a second by default (docs/changing-policy.md)`);
await shadow.close();
await live.close();
