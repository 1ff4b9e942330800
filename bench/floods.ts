// npm run bench:floods — the floods of docs/reliability.md ("Floods") against
// a router in its own process: for each, the router's longest event-loop
// block, its peak RSS, and the latency of a normal chat (from another client
// address) sent every 100 ms meanwhile. The block is also given as the
// median of quarter-second windows' maxima, which a loaded machine's noise
// moves little. The floods themselves are in
// test/hostile/floods-kit.ts (the soak and the flood tests send them too).
// FLOOD_SECONDS sets each flood's length (default 5); FLOODS=TEXT runs only
// the floods whose name contains TEXT; FLOOD_NODE_ARGS adds node flags to the
// router's process (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p" to see where its time goes).
import { CLIENT_FLOODS, METRICS_PAGE, normalTrafficElsewhere, startFloodRouter, type Flood } from '../test/hostile/floods-kit.ts';

const SECONDS = Number(process.env.FLOOD_SECONDS ?? 5);
const nodeArgs = (process.env.FLOOD_NODE_ARGS ?? '').split(' ').filter(Boolean);

const BASELINE: Flood = {
  name: 'none (baseline)',
  run: async (_url, stop) => {
    while (!stop()) await new Promise((resolve) => setTimeout(resolve, 100));
  },
};

async function measure(flood: Flood): Promise<void> {
  if (process.env.FLOODS && !flood.name.includes(process.env.FLOODS)) return;
  const router = await startFloodRouter(flood.routerEnv, nodeArgs);
  const normal = await normalTrafficElsewhere(router.url, '127.0.0.1');
  try {
    await new Promise((resolve) => setTimeout(resolve, 1500)); // a few scrapes first
    const before = await router.report();
    const ends = Date.now() + SECONDS * 1000;
    const stop = () => Date.now() > ends;
    // The loop's block in quarter-second windows: the maximum, and the median window's (on a loaded machine the
    // maximum is often the machine's noise; a block the flood itself causes shows in most windows).
    const windows: number[] = [];
    let peakRssMb = 0;
    const sampling = (async () => {
      while (!stop()) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        const w = await router.report();
        windows.push(w.maxBlockMs);
        peakRssMb = Math.max(peakRssMb, w.peakRssMb);
      }
    })();
    const [note, latencies] = await Promise.all([flood.run(router.url, stop, '127.0.0.2'), normal.until(ends), sampling]);
    const last = await router.report();
    windows.push(last.maxBlockMs);
    const r = { maxBlockMs: Math.max(...windows), peakRssMb: Math.max(peakRssMb, last.peakRssMb) };
    const medianWindow = [...windows].sort((a, b) => a - b)[Math.floor(windows.length / 2)];
    const sorted = [...latencies].sort((a, b) => a - b);
    const failed = latencies.filter((l) => l === Infinity).length;
    const p50 = sorted[Math.floor(sorted.length / 2)];
    const max = sorted[sorted.length - 1];
    console.log(
      `${flood.name.padEnd(52)} max block ${r.maxBlockMs.toFixed(0).padStart(4)} ms, median window ${medianWindow.toFixed(0).padStart(3)} ms | rss ${before.rssMb.toFixed(0).padStart(4)} -> peak ${r.peakRssMb.toFixed(0).padStart(4)} MB | normal chats p50 ${p50?.toFixed(1)} ms, max ${max === Infinity ? 'failed' : max?.toFixed(0)} ms, ${failed}/${latencies.length} failed${note ? ` | ${note}` : ''}`,
    );
  } finally {
    normal.close();
    await router.close();
  }
}

for (const flood of [BASELINE, ...CLIENT_FLOODS, METRICS_PAGE(3_500_000), METRICS_PAGE(15_000_000)]) await measure(flood);
process.exit(0);
