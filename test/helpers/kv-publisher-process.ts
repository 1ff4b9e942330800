// A KV-event publisher in a process of its own, as an engine is: sending
// hundreds of MB from the process under test would charge its event loop
// for the copies. Used by the hostile feed test and bench:kv-feed.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/**
 * A publisher in a process of its own, as an engine is (sending 300 MB from
 * this process would cost this loop the copies): it binds, prints its
 * endpoint, and on each line `count seq kind` sends `count` messages of `kind`.
 */
const PUBLISHER = `
import { Packr } from 'msgpackr';
import { Publisher } from 'zeromq';
import { createInterface } from 'node:readline';
const packr = new Packr({ useRecords: false });
const seq = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
const payloads = {
  maximal: () => packr.pack([1, Array.from({ length: 240 }, () => ['BlockRemoved', Array.from({ length: 65536 }, (_, j) => j % 100), 'GPU']), 0]),
  full: () => packr.pack([1, [{ type: 'BlockStored', block_hashes: Array.from({ length: 65536 }, (_, i) => i), parent_block_hash: null,
    token_ids: Array.from({ length: 65536 * 16 }, (_, i) => i % 150000), block_size: 16, lora_id: null, medium: 'GPU', lora_name: null }], 0]),
};
const made = {};
const publisher = new Publisher({ linger: 0, sendHighWaterMark: 100000 });
await publisher.bind('tcp://127.0.0.1:*');
console.log(publisher.lastEndpoint);
for await (const line of createInterface({ input: process.stdin })) {
  const [count, first, kind] = line.split(' ');
  made[kind] ??= payloads[kind]();
  for (let i = 0; i < Number(count); i++) await publisher.send(['kv-events', seq(Number(first) + i), made[kind]]);
  console.log('sent');
}
publisher.close();
`;

export async function publisherProcess() {
  const child = spawn(process.execPath, ['--input-type=module', '-e', PUBLISHER], { cwd: process.cwd(), stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => String((await lines.next()).value);
  const endpoint = await next();
  return {
    endpoint,
    async send(count: number, first: number, kind: 'maximal' | 'full') {
      child.stdin!.write(`${count} ${first} ${kind}\n`);
      const answer = await next();
      if (answer !== 'sent') throw new Error(`the publisher process answered ${answer}`);
    },
    async close() {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}
