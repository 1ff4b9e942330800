// Publishes the emulated engine's KV cache events as vLLM 0.26 does
// (--kv-events-config publisher "zmq"): a ZeroMQ PUB socket, each message
// [topic, sequence number as 8 bytes big-endian, msgpack payload], the
// payload the batch [ts, events, data_parallel_rank] with map-form events
// {"type": "BlockStored", "block_hashes", "parent_block_hash", "token_ids",
// "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx",
// "kv_cache_spec_kind"} / {"type": "BlockRemoved", "block_hashes", "medium",
// "group_idx"} / {"type": "AllBlocksCleared"} (docs/kv-events.md names the
// vLLM source it matches). The events of one turn of the event loop (a
// scheduler step) go out as one batch. The first batch clears: a subscriber
// that was listening to an earlier run of this engine drops what it knew.
// With a replay endpoint, a ROUTER socket serves the last 10,000 batches as
// vLLM's does: [client, "", start] → [client, "", seq, payload]... then
// [client, "", -1, ""].
import { Packr } from 'msgpackr';
import type { Publisher, Router } from 'zeromq';
import { loadZeroMq } from '../../core/fleet/zeromq.ts';
import type { KvBlockEvent } from '../engine/kv-events.ts';
import type { PublishedHash } from './vllm-block-hash.ts';

const packr = new Packr({ useRecords: false, useBigIntExtension: false });
const REPLAY_BUFFER = 10_000;
const END_OF_REPLAY = Buffer.from('ffffffffffffffff', 'hex');

export class KvEventPublisher {
  private readonly topic: Buffer;
  private pending: unknown[] = [];
  private scheduled = false;
  private seq = 0n;
  private sending: Promise<void> = Promise.resolve();
  private closed = false;
  /** Sent batches, for replay: [sequence frame, payload]. */
  private readonly sent: [Buffer, Buffer][] = [];

  private constructor(
    private readonly socket: Publisher,
    private readonly replay: Router | undefined,
    topic: string,
    private readonly blockSize: number,
  ) {
    this.topic = Buffer.from(topic);
    if (replay) void this.serveReplay(replay);
  }

  /** Binds a PUB socket (tcp://127.0.0.1:5557; port * picks a free one, see `endpoint`), and the replay socket when asked. */
  static async bind(endpoint: string, topic: string, blockSize: number, replayEndpoint?: string): Promise<KvEventPublisher> {
    const { Publisher, Router } = await loadZeroMq();
    const socket = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
    await socket.bind(endpoint);
    let replay: Router | undefined;
    if (replayEndpoint !== undefined) {
      replay = new Router({ linger: 0 });
      await replay.bind(replayEndpoint);
    }
    const publisher = new KvEventPublisher(socket, replay, topic, blockSize);
    publisher.record({ type: 'cleared' });
    return publisher;
  }

  /** The bound address, with the port when `*` was asked for. */
  get endpoint(): string {
    return this.socket.lastEndpoint ?? '';
  }

  get replayEndpoint(): string | undefined {
    return this.replay?.lastEndpoint ?? undefined;
  }

  /** Queues one event; the turn's events leave together. */
  record(event: KvBlockEvent<PublishedHash>): void {
    if (this.closed) return;
    this.pending.push(this.encode(event));
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flush);
    }
  }

  private encode(event: KvBlockEvent<PublishedHash>): unknown {
    switch (event.type) {
      case 'stored': {
        const adapter = event.adapter ?? null;
        return {
          type: 'BlockStored',
          block_hashes: event.hashes,
          parent_block_hash: event.parent,
          token_ids: event.tokenIds,
          block_size: this.blockSize,
          lora_id: null,
          medium: 'GPU',
          lora_name: adapter,
          extra_keys: event.hashes.map(() => (adapter === null ? null : [adapter])),
          group_idx: 0,
          kv_cache_spec_kind: 'full_attention',
        };
      }
      case 'removed':
        return { type: 'BlockRemoved', block_hashes: event.hashes, medium: 'GPU', group_idx: 0 };
      case 'cleared':
        return { type: 'AllBlocksCleared' };
    }
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.closed || this.pending.length === 0) return;
    const payload = packr.pack([Date.now() / 1000, this.pending, 0]);
    this.pending = [];
    const seq = Buffer.alloc(8);
    seq.writeBigUInt64BE(this.seq++);
    this.sent.push([seq, payload]);
    if (this.sent.length > REPLAY_BUFFER) this.sent.shift();
    const frames = [this.topic, seq, payload];
    // One send at a time (the socket's rule); PUB never blocks: past the high-water mark it drops.
    this.sending = this.sending.then(() => (this.closed ? undefined : this.socket.send(frames))).catch(() => undefined);
  };

  private async serveReplay(replay: Router): Promise<void> {
    try {
      for await (const frames of replay) {
        if (frames.length !== 3 || frames[2].length !== 8) continue;
        const [client, , startFrame] = frames;
        const start = startFrame.readBigUInt64BE(0);
        for (const [seq, payload] of this.sent) if (seq.readBigUInt64BE(0) >= start) await replay.send([client, Buffer.alloc(0), seq, payload]);
        await replay.send([client, Buffer.alloc(0), END_OF_REPLAY, Buffer.alloc(0)]);
      }
    } catch {
      // Closed.
    }
  }

  /** Waits for what was queued to be handed to the socket (tests). */
  async drain(): Promise<void> {
    while (this.scheduled) await new Promise((resolve) => setImmediate(resolve));
    await this.sending;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close();
    this.replay?.close();
  }
}
