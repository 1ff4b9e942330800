// npm run bench:floods — the floods of docs/reliability.md ("Floods") against
// a router in its own process: for each, the longest event-loop block in the
// router, its peak RSS, and the latency of a normal chat sent every 100 ms
// meanwhile. FLOOD_SECONDS sets each flood's length (default 5); FLOODS=TEXT
// runs only the floods whose name contains TEXT; FLOOD_NODE_ARGS adds node
// flags to the router's process (e.g. --cpu-prof to see where its time goes).
import { fork, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';

const SECONDS = Number(process.env.FLOOD_SECONDS ?? 5);
const here = new URL('.', import.meta.url).pathname;
const KEY = 'sk-test';

interface Report {
  maxBlockMs: number;
  peakRssMb: number;
  rssMb: number;
}

function startRouter(env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess }> {
  const child = fork(`${here}targets/flood-router.ts`, [], { execArgv: ['--import', 'tsx', ...(process.env.FLOOD_NODE_ARGS ?? '').split(' ').filter(Boolean)], env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ url: (m as { url: string }).url, child }));
    child.once('exit', (code) => reject(new Error(`router exited with ${code}`)));
  });
}

const report = (child: ChildProcess) =>
  new Promise<Report>((resolve) => {
    child.once('message', (m) => resolve(m as Report));
    child.send('report');
  });

function socketTo(url: string, localAddress = '127.0.0.1'): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: u.hostname, port: Number(u.port), localAddress }, () => resolve(socket));
    socket.once('error', reject);
  });
}

const chatBody = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: 'hello' }] });

/** A normal chat every 100 ms until `stop()`: latencies in ms (failures as Infinity). */
async function normalTraffic(url: string, stop: () => boolean): Promise<number[]> {
  const latencies: number[] = [];
  while (!stop()) {
    const started = performance.now();
    try {
      const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body: chatBody, signal: AbortSignal.timeout(10_000) });
      await r.text();
      latencies.push(r.status === 200 ? performance.now() - started : Infinity);
    } catch {
      latencies.push(Infinity);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return latencies;
}

async function flood(name: string, env: Record<string, string>, run: (url: string, stop: () => boolean) => Promise<string | void>): Promise<void> {
  if (process.env.FLOODS && !name.includes(process.env.FLOODS)) return;
  const { url, child } = await startRouter(env);
  try {
    await new Promise((resolve) => setTimeout(resolve, 1500)); // a few scrapes first
    await report(child);
    const ends = Date.now() + SECONDS * 1000;
    const stop = () => Date.now() > ends;
    const [note, latencies] = await Promise.all([run(url, stop), normalTraffic(url, stop)]);
    const r = await report(child);
    const sorted = [...latencies].sort((a, b) => a - b);
    const failed = latencies.filter((l) => l === Infinity).length;
    const p50 = sorted[Math.floor(sorted.length / 2)];
    const max = sorted[sorted.length - 1];
    console.log(
      `${name.padEnd(44)} max block ${r.maxBlockMs.toFixed(0).padStart(4)} ms | peak rss ${r.peakRssMb.toFixed(0).padStart(4)} MB | normal chats p50 ${p50?.toFixed(1)} ms, max ${max === Infinity ? 'failed' : max?.toFixed(0)} ms, ${failed}/${latencies.length} failed${note ? ` | ${note}` : ''}`,
    );
  } finally {
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGINT'); // an orderly exit, so that --cpu-prof writes its profile
    });
  }
}

await flood('none (baseline)', {}, async (_url, stop) => {
  while (!stop()) await new Promise((resolve) => setTimeout(resolve, 100));
});

await flood('20 conns x 20,000 pipelined keyless /v1/models', {}, async (url, stop) => {
  let answered = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (!stop()) {
        const socket = await socketTo(url).catch(() => undefined);
        if (!socket) continue;
        socket.on('error', () => {});
        await new Promise<void>((resolve) => {
          socket.on('data', (chunk: Buffer) => (answered += chunk.toString('latin1').split('HTTP/1.1 ').length - 1));
          socket.on('close', () => resolve());
          socket.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(20_000));
          setTimeout(() => socket.destroy(), 2000);
        });
      }
    }),
  );
  return `${answered} answered before the connections were closed`;
});

const big = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: 'x'.repeat(2_900_000) }] });
for (const [label, authorization] of [['8 keyless clients x 2.9 MB bodies', ''], ['8 keyed clients x 2.9 MB bodies', `Bearer ${KEY}`]] as const) {
  await flood(label, {}, async (url, stop) => {
    const statuses = new Map<number, number>();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (!stop()) {
          try {
            const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) }, body: big, signal: AbortSignal.timeout(10_000) });
            await r.text();
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          } catch {
            statuses.set(0, (statuses.get(0) ?? 0) + 1);
          }
        }
      }),
    );
    return [...statuses].map(([s, n]) => `${s}x${n}`).join(' ');
  });
}

await flood('one 8 MB body every 500 ms', {}, async (url, stop) => {
  const body = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: 'y'.repeat(8_000_000) }] });
  while (!stop()) {
    const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body });
    await r.text();
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
});

for (const bytes of [3_500_000, 15_000_000]) {
  await flood(`engine /metrics page of ${(bytes / 1e6).toFixed(1)} MB`, { FLOOD_METRICS_BYTES: String(bytes) }, async (_url, stop) => {
    while (!stop()) await new Promise((resolve) => setTimeout(resolve, 100));
  });
}

await flood('one client holding 1,500 connections', {}, async (url, stop) => {
  const held: Socket[] = [];
  for (let i = 0; i < 1500; i++) {
    const s = await socketTo(url).catch(() => undefined);
    if (s) {
      s.on('error', () => {});
      held.push(s);
    }
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  const open = held.filter((s) => !s.destroyed).length;
  let ok = 0;
  let tried = 0;
  while (!stop() && tried < 200) {
    tried++;
    const s = await socketTo(url, '127.0.0.2').catch(() => undefined);
    if (!s) continue;
    s.on('error', () => {});
    const status = await new Promise<string>((resolve) => {
      let text = '';
      s.on('data', (c: Buffer) => (text += c));
      s.on('close', () => resolve(text.slice(9, 12)));
      s.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nConnection: close\r\n\r\n`);
    });
    if (status === '200') ok++;
  }
  for (const s of held) s.destroy();
  return `${open} of 1,500 held open; another client: ${ok}/${tried} new connections served`;
});
