// npm run bench:facts — CPU µs per requestFacts() call (core/facts/request-facts.ts)
// on chat bodies as the proxy gets them (validated already): ~150 B, 16 KB and
// 220 KB, Latin script and Chinese; 16 distinct long documents in turn as a
// system prompt, each followed by a new question (bench:proxy's sizes).
// BENCH_BASELINE=DIR runs another checkout's requestFacts in the same
// process, batch by batch in turn, checks that both give the same facts,
// and prints the ratio (the median of the batches' ratios): on the shared
// machine, only a ratio from one process is a figure.
//
// For callgrind (instruction counts, the same whatever the load):
//   BENCH_ONLY=16k-latin BENCH_CALLS=2000 [BENCH_TREE=DIR] node --import tsx bench/facts.ts
// runs one case a fixed number of times, untimed; subtract a run with BENCH_CALLS=0.
import { readFileSync } from 'node:fs';
import { requestFacts } from '../core/facts/request-facts.ts';
import { characterClassEstimator } from '../core/tokens/estimate.ts';
import { textOf } from './prompt-text.ts';

interface Tree {
  requestFacts: typeof requestFacts;
  characterClassEstimator: typeof characterClassEstimator;
}

async function treeAt(dir: string): Promise<Tree> {
  const modules = await Promise.all(['core/facts/request-facts.ts', 'core/tokens/estimate.ts'].map((p) => import(`${dir}/${p}`)));
  return Object.assign({}, ...modules);
}

const LATIN = 'the router replica cache token prefix policy engine stream request model pool café naïve "quoted" line\n a of to and'.split(' ');
// Chinese phrases, split at the sample's punctuation.
const CHINESE = readFileSync(new URL('samples/chinese.txt', import.meta.url), 'utf8')
  .split(/[，。、\n]/)
  .filter((s) => s.length > 0);

type Script = 'latin' | 'cjk';
const SIZES: Record<string, number> = { '150': 0, '16k': 16 * 1024, '220k': 220 * 1024 };
const DOCUMENTS = 16;

/** A case's bodies: 16 documents (or the short system prompt), each time a new question. */
function bodies(size: string, script: Script): (i: number) => Record<string, unknown> {
  const chars = SIZES[size];
  const docs = Array.from({ length: DOCUMENTS }, (_, d) =>
    chars === 0
      ? script === 'latin'
        ? 'You are a concise assistant.'
        : '你是一个简洁的助手。'
      : script === 'latin'
        ? textOf(LATIN, ' ', chars, d + 1)
        : textOf(CHINESE, '，', chars, d + 1),
  );
  return (i) => ({
    model: 'bench-model',
    messages: [
      { role: 'system', content: docs[i % DOCUMENTS] },
      { role: 'user', content: script === 'latin' ? `Question ${i}: summarise it in one line.` : `问题 ${i}：用一句话总结。` },
    ],
    max_tokens: 16,
  });
}

interface Case {
  name: string;
  body: (i: number) => Record<string, unknown>;
  calls: number;
}
const cases: Case[] = Object.keys(SIZES).flatMap((size) =>
  (['latin', 'cjk'] as const).map((script) => ({
    name: `${size}-${script}`,
    body: bodies(size, script),
    calls: size === '220k' ? 100 : size === '16k' ? 1000 : 4000,
  })),
);

/** A call as the proxy makes it (core/serve/proxy.ts): body validated by fastify, the settings' estimator. */
function caller(tree: Tree) {
  const estimator = tree.characterClassEstimator(4);
  const options = { estimator, bodyValidated: true };
  const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench', 'x-conversation-id': 'c-1' };
  return (body: Record<string, unknown>, i: number) => tree.requestFacts({ requestId: `r${i}`, endpoint: 'chat', headers, body }, options);
}

const only = process.env.BENCH_ONLY;
if (only !== undefined) {
  // The callgrind mode: one case, a fixed number of calls, nothing timed.
  const tree = process.env.BENCH_TREE ? await treeAt(process.env.BENCH_TREE) : { requestFacts, characterClassEstimator };
  const found = cases.find((c) => c.name === only);
  if (!found) throw new Error(`BENCH_ONLY: one of ${cases.map((c) => c.name).join(', ')}`);
  const call = caller(tree);
  const n = Number(process.env.BENCH_CALLS ?? 1000);
  const prepared = Array.from({ length: Math.min(n, 64) }, (_, i) => found.body(i));
  let sink = 0;
  for (let i = 0; i < n; i++) {
    const facts = call(prepared[i % prepared.length], i);
    if ('promptTokens' in facts) sink += facts.promptTokens;
  }
  console.log(`${only}: ${n} calls, tokens ${sink}`);
  process.exit(0);
}

const baseline = process.env.BENCH_BASELINE ? await treeAt(process.env.BENCH_BASELINE) : undefined;
const trees: { name: string; call: ReturnType<typeof caller> }[] = [
  ...(baseline ? [{ name: 'baseline', call: caller(baseline) }] : []),
  { name: 'this tree', call: caller({ requestFacts, characterClassEstimator }) },
];
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);

// Bodies built once (64 of each case: the 16 documents, new questions): building them is not the facts' cost.
const prepared = cases.map((c) => Array.from({ length: 64 }, (_, i) => c.body(i)));

const factsJson = (facts: unknown) => JSON.stringify(facts, (_, v) => (v instanceof Uint32Array ? Array.from(v) : v));

// Both trees give the same facts.
if (baseline) {
  for (const [k, c] of cases.entries()) {
    for (let i = 0; i < 64; i++) {
      const [a, b] = trees.map((t) => t.call(prepared[k][i], i));
      if (factsJson(a) !== factsJson(b)) throw new Error(`${c.name}: the facts differ from the baseline's on body ${i}`);
    }
  }
}

/** CPU ns per call over one batch: CPU time, not wall time, since a loaded machine takes the CPU away mid-batch. */
function batch(call: ReturnType<typeof caller>, k: number): number {
  const { calls } = cases[k];
  const bodiesOf = prepared[k];
  const start = process.cpuUsage();
  for (let i = 0; i < calls; i++) call(bodiesOf[i & 63], i);
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / calls;
}

// Warm-up, then rounds: every case and tree in turn, the order rotating, so the machine's load falls alike on all.
for (let w = 0; w < 3; w++) for (let k = 0; k < cases.length; k++) for (const t of trees) batch(t.call, k);
const times = cases.map(() => trees.map(() => [] as number[]));
for (let round = 0; round < ROUNDS; round++) {
  for (let k = 0; k < cases.length; k++) {
    const order = round % 2 === 0 ? trees.keys() : [...trees.keys()].reverse();
    for (const t of order) times[k][t].push(batch(trees[t].call, k));
  }
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const us = (ns: number) => (ns / 1000).toFixed(2).padStart(8);
console.log(`bench:facts — CPU µs per requestFacts() call, median of ${ROUNDS} rounds${baseline ? `; baseline ${process.env.BENCH_BASELINE}` : ''}`);
console.log(`case        | ${trees.map((t) => t.name.padStart(9)).join(' | ')}${baseline ? ' | ratio (per-round median)' : ''}`);
for (const [k, c] of cases.entries()) {
  const cells = times[k].map((xs) => us(median(xs)).padStart(9));
  const ratio = baseline ? ` | ${median(times[k][1].map((x, r) => x / times[k][0][r])).toFixed(3)}` : '';
  console.log(`${c.name.padEnd(11)} | ${cells.join(' | ')}${ratio}`);
}
