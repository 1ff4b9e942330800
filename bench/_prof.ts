import { fork } from 'node:child_process';
import { Pool } from 'undici';
const here = '/work/main/bench/';
function start(script: string, args: string[], execArgv: string[] = []) {
  const child = fork(script, args, { execArgv: ['--import', 'tsx', ...execArgv], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise<{ url: string; child: any }>((resolve) => child.once('message', (m: any) => resolve({ url: m.url, child })));
}
const engine = await start(`${here}targets/engine.ts`, []);
const target = await start(`${here}targets/${process.argv[2]}.ts`, [engine.url], ['--cpu-prof', '--cpu-prof-dir=/tmp/prof-' + process.argv[2]]);
const pool = new Pool(target.url, { connections: 64 });
const body = (i: number) => JSON.stringify({ model: 'bench-model', messages: [{ role: 'system', content: 'You are a concise assistant. '.repeat(20) }, { role: 'user', content: `Q ${i}` }], max_tokens: 16, stream: false });
const started = performance.now();
const all: Promise<unknown>[] = [];
for (let i = 0; i < 2000; i++) {
  const wait = started + i * 5 - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  all.push(pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', 'x-conversation-id': `c-${i % 50}` }, body: body(i) }).then((r) => r.body.text()));
}
await Promise.all(all);
target.child.kill('SIGINT'); engine.child.kill();
await new Promise((r) => setTimeout(r, 1500));
process.exit(0);
