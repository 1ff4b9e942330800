// npm run bench:kv-feed — what a hostile or heavy KV-event feed costs the
// router's event loop and memory (docs/kv-events.md, "The feed's cost
// bound"): a publisher in its own process sends 21 maximal batches back to
// back (240 events × 65,536 hashes, ~15 MiB each: over the size bound,
// refused by ZeroMQ off the loop, after which the feed connects again), then one batch at the bounds (65,536 blocks and their
// 1M token ids: applied in slices); and the cost of looking a 4k-token
// prompt up in an index of 65,536 blocks. Prints the longest event-loop
// stall of each phase next to the stall of an idle second (what the
// machine's own load costs), and the resident memory.
import { KvIndex } from '../core/fleet/kv-index.ts';
import { KvEventFeed } from '../core/fleet/kv-subscriber.ts';
import { publisherProcess } from '../test/helpers/kv-publisher-process.ts';

async function longestStall(work: () => Promise<void>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(longest, performance.now() - last);
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
const publisher = await publisherProcess();
const index = new KvIndex({ now: Date.now });
const feed = new KvEventFeed(index, { info() {}, warn() {} });
feed.sync([{ replica: 'e', endpoint: publisher.endpoint }]);
await feed.connected('e');
await new Promise((resolve) => setTimeout(resolve, 300));

const rows: [string, string, string][] = [];
const idle = await longestStall(() => new Promise((resolve) => setTimeout(resolve, 1000)));
rows.push(['idle second (the machine’s load)', `${idle.toFixed(1)} ms`, `${mib(process.memoryUsage().rss)} MiB`]);

const rssBefore = process.memoryUsage().rss;
let peak = rssBefore;
const maximal = await longestStall(async () => {
  await publisher.send(21, 0, 'maximal');
  await until(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
    return index.counters.oversized >= 1;
  }, 300_000);
  await feed.connected('e');
});
rows.push(['21 maximal batches (refused by size; the feed connects again)', `${maximal.toFixed(1)} ms`, `+${mib(peak - rssBefore)} MiB peak`]);
await new Promise((resolve) => setTimeout(resolve, 300));

const started = performance.now();
const full = await longestStall(async () => {
  await publisher.send(1, 100, 'full');
  await until(() => index.blockCount('e') === 65_536, 120_000);
});
rows.push([
  `a batch at the bounds (65,536 blocks, applied in ${(performance.now() - started).toFixed(0)} ms)`,
  `${full.toFixed(1)} ms`,
  `${mib(process.memoryUsage().rss)} MiB`,
]);

// Lookups: the full batch's tokens are (16j + i) % 150,000; a prompt of its first 4,096 tokens matches 256 blocks.
const prompt = Uint32Array.from({ length: 4096 }, (_, i) => i % 150_000);
const times: number[] = [];
for (let round = 0; round < 2000; round++) {
  const t = performance.now();
  index.longestPrefixOfTokens(prompt);
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
const matched = index.longestPrefixOfTokens(prompt)[0].blocks;
rows.push([
  `lookup of a 4k-token prompt (${matched} blocks held), p50 / p99`,
  `${(times[1000] * 1000).toFixed(0)} / ${(times[1980] * 1000).toFixed(0)} µs`,
  '',
]);

feed.close();
await publisher.close();
console.log('| phase | longest event-loop stall | memory |\n| --- | --- | --- |');
for (const [phase, stall, memory] of rows) console.log(`| ${phase} | ${stall} | ${memory} |`);
console.log(`counters: ${JSON.stringify(index.counters)}`);
