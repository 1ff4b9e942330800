// Publishes the emulated engine's KV cache events as vLLM does
// (--kv-events-config publisher "zmq"): a ZeroMQ PUB socket, each message
// [topic, sequence number as 8 bytes big-endian, msgpack payload], the
// payload msgspec's array_like KVEventBatch [ts, events, data_parallel_rank]
// with events ["BlockStored", block_hashes, parent_block_hash, token_ids,
// block_size, lora_id, medium] / ["BlockRemoved", block_hashes, medium] /
// ["AllBlocksCleared"] (docs/kv-events.md names the vLLM source it matches).
// The events of one turn of the event loop (a scheduler step) go out as one
// batch. The first batch clears: a subscriber that was listening to an
// earlier run of this engine drops what it knew.
import { Packr } from 'msgpackr';
import type { Publisher } from 'zeromq';
import { loadZeroMq } from '../../core/fleet/zeromq.ts';
import type { KvBlockEvent } from '../engine/kv-events.ts';

const packr = new Packr({ useRecords: false });

export class KvEventPublisher {
  private readonly socket: Publisher;
  private readonly topic: Buffer;
  private readonly blockSize: number;
  private pending: unknown[] = [];
  private scheduled = false;
  private seq = 0n;
  private sending: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(socket: Publisher, topic: string, blockSize: number) {
    this.socket = socket;
    this.topic = Buffer.from(topic);
    this.blockSize = blockSize;
  }

  /** Binds a PUB socket (tcp://127.0.0.1:5557; port * picks a free one, see `endpoint`). */
  static async bind(endpoint: string, topic: string, blockSize: number): Promise<KvEventPublisher> {
    const { Publisher } = await loadZeroMq();
    const socket = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
    await socket.bind(endpoint);
    const publisher = new KvEventPublisher(socket, topic, blockSize);
    publisher.record({ type: 'cleared' });
    return publisher;
  }

  /** The bound address, with the port when `*` was asked for. */
  get endpoint(): string {
    return this.socket.lastEndpoint ?? '';
  }

  /** Queues one event; the turn's events leave together. */
  record(event: KvBlockEvent): void {
    if (this.closed) return;
    this.pending.push(this.encode(event));
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flush);
    }
  }

  private encode(event: KvBlockEvent): unknown[] {
    switch (event.type) {
      case 'stored':
        return ['BlockStored', event.hashes, event.parent, event.tokenIds, this.blockSize, null, 'GPU'];
      case 'removed':
        return ['BlockRemoved', event.hashes, 'GPU'];
      case 'cleared':
        return ['AllBlocksCleared'];
    }
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.closed || this.pending.length === 0) return;
    const payload = packr.pack([Date.now() / 1000, this.pending, 0]);
    this.pending = [];
    const seq = Buffer.alloc(8);
    seq.writeBigUInt64BE(this.seq++);
    const frames = [this.topic, seq, payload];
    // One send at a time (the socket's rule); PUB never blocks: past the high-water mark it drops.
    this.sending = this.sending.then(() => (this.closed ? undefined : this.socket.send(frames))).catch(() => undefined);
  };

  /** Waits for what was queued to be handed to the socket (tests). */
  async drain(): Promise<void> {
    while (this.scheduled) await new Promise((resolve) => setImmediate(resolve));
    await this.sending;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close();
  }
}
