// The KV event decoder's thread (kv-decoder.ts): decoding a 16 MiB message
// takes ~150 ms, which must not stop the router's event loop. It receives a
// message's sequence number and payload and answers with the decoded batch,
// its typed arrays moved, not copied, or with why the payload is not a batch.
import { parentPort } from 'node:worker_threads';
import { decodeKvPayload } from './kv-events.ts';

interface Job {
  readonly id: number;
  readonly seq: bigint;
  readonly payload: Uint8Array;
}

const port = parentPort!;
port.on('message', (job: Job) => {
  let batch;
  try {
    batch = decodeKvPayload(job.seq, job.payload);
  } catch (error) {
    batch = `the decoder failed: ${String((error as Error)?.message).slice(0, 200)}`;
  }
  if (typeof batch === 'string') {
    port.postMessage({ id: job.id, error: batch });
    return;
  }
  const moved: ArrayBuffer[] = [];
  for (const event of batch.events) {
    if (event.type === 'blocks-stored') {
      moved.push(event.hashes.buffer as ArrayBuffer, event.tokenIds.buffer as ArrayBuffer);
      if (event.extra) moved.push(event.extra.buffer as ArrayBuffer);
    } else if (event.type === 'blocks-removed') moved.push(event.hashes.buffer as ArrayBuffer);
  }
  port.postMessage({ id: job.id, batch }, moved);
});
