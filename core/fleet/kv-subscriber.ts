// One ZeroMQ SUB socket per replica that publishes KV cache events (the
// replica's `kv_events` endpoint in pools.yaml), each feeding the router's
// KvIndex. Sockets follow the policy: `sync` connects new endpoints and
// closes those that left.
//
// Cost bound, whatever a publisher sends: messages over 8 MiB are refused by
// ZeroMQ, which then drops the connection for good; the subscription notices
// (a disconnect with no reconnect attempt), logs, counts and connects again.
// Payloads are decoded off the event loop (kv-decoder.ts) with bounds on
// events, hashes and token ids per message; each replica is held to a rate of
// hashes and events per second; batches are applied in slices that yield.
//
// Missed batches (a sequence gap, a batch dropped for rate or backlog, the
// router starting after the engine) are asked again from the engine's replay
// socket when the replica names one (`kv_events_replay`, vLLM's
// replay_endpoint): [empty, start sequence (8 bytes)] answered with every
// buffered batch from there, then an end marker of sequence -1.
import type { Dealer, Subscriber } from 'zeromq';
import type { Logger } from '../../sdk/index.ts';
import type { ReplicaSpec } from '../policy/compiled.ts';
import { KvDecoder, type DecodeResult } from './kv-decoder.ts';
import { sequenceOf, type KvEventBatch } from './kv-events.ts';
import type { KvIndex } from './kv-index.ts';
import { loadZeroMq, type ZeroMq } from './zeromq.ts';

export interface KvEventSource {
  readonly replica: string;
  /** tcp://host:port (or ipc://path) of the engine's PUB socket. */
  readonly endpoint: string;
  /** Only messages whose topic starts with this; all when empty. */
  readonly topic?: string;
  /** The engine's replay (ROUTER) socket, to recover missed batches. */
  readonly replay?: string;
}

/**
 * Bound on one message. A scheduler step's events fit in well under 1 MiB;
 * a message at the per-message bounds (65,536 blocks, 1M token ids) in about
 * 5 MiB. Larger ones never reach the loop: ZeroMQ refuses them in its own
 * thread (the subscription then connects again), so even a copy is saved.
 */
export const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
/** Messages ZeroMQ holds for us: the loop reads continuously and bounds what it keeps itself. */
const RECEIVE_HIGH_WATER_MARK = 1_000;
/** Bytes received between turns given back to the event loop. */
const YIELD_EVERY_BYTES = 4 * 1024 * 1024;
/** Decoded batches waiting to be applied, per replica: beyond this they are dropped (and replayed). */
const MAX_WAITING_BATCHES = 256;
/** After a disconnect, how long ZeroMQ has to start reconnecting before the subscription does it. */
const RECONNECT_CHECK_MS = 250;
/** How long a replay may take before what it brought is applied and the rest counted as a gap. */
const REPLAY_TIMEOUT_MS = 2_000;
/** At most one replay per replica in this long: an engine whose replay never answers does not stall its feed. */
const REPLAY_INTERVAL_MS = 5_000;
/** vLLM buffers this many batches for replay. */
const REPLAY_BUFFER = 10_000n;
const END_OF_REPLAY = 0xffff_ffff_ffff_ffffn;

class Subscription {
  socket!: Subscriber;
  /** Resolves once the socket has connected to the publisher (a PUB drops what is sent before). */
  connected!: Promise<void>;
  private chain: Promise<void> = Promise.resolve();
  private waiting = 0;
  /** Batches were dropped here since the last applied one: ask the engine for them again. */
  private missed = false;
  private warned = false;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private lastReplayAt = -Infinity;

  constructor(
    readonly source: KvEventSource,
    private readonly index: KvIndex,
    private readonly decoder: KvDecoder,
    private readonly log: Logger,
    private readonly zmq: ZeroMq,
  ) {
    this.open();
  }

  private open(): void {
    const socket = new this.zmq.Subscriber({ maxMessageSize: MAX_MESSAGE_BYTES, receiveHighWaterMark: RECEIVE_HIGH_WATER_MARK, linger: 0 });
    this.socket = socket;
    this.connected = new Promise((resolve) => socket.events.on('connect', () => resolve()));
    socket.events.on('disconnect', () => {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = setTimeout(() => this.reopen(), RECONNECT_CHECK_MS);
    });
    const retrying = () => clearTimeout(this.reconnectTimer);
    socket.events.on('connect:retry', retrying);
    socket.events.on('connect', retrying);
    socket.connect(this.source.endpoint);
    socket.subscribe(this.source.topic ?? '');
    void this.receive(socket);
  }

  /** ZeroMQ dropped the connection and does not retry: it refused a message over the size bound. */
  private reopen(): void {
    if (this.closed) return;
    this.index.counters.oversized++;
    this.log.warn('kv events: the connection to the replica’s publisher dropped without reconnecting (a message over the size bound); connecting again', {
      replica: this.source.replica,
      maxMessageBytes: MAX_MESSAGE_BYTES,
    });
    this.missed = true;
    const old = this.socket;
    this.open();
    old.close();
  }

  private async receive(socket: Subscriber): Promise<void> {
    let bytesSinceYield = 0;
    try {
      for await (const frames of socket) {
        // Messages already queued arrive as resolved promises, all in one turn of
        // the loop: give the loop a turn every few MiB received.
        for (const frame of frames) bytesSinceYield += frame.length;
        if (bytesSinceYield > YIELD_EVERY_BYTES) {
          bytesSinceYield = 0;
          await new Promise((resolve) => setImmediate(resolve));
        }
        const seq = frames.length === 3 ? sequenceOf(frames[1]) : undefined;
        if (seq === undefined) {
          this.malformed(
            frames.length === 3
              ? `the sequence frame has ${frames[1].length} bytes, not 8`
              : `expected 3 frames (topic, sequence, payload), got ${frames.length}`,
          );
          continue;
        }
        if (this.waiting >= MAX_WAITING_BATCHES) {
          this.index.counters.overloaded++;
          this.missed = true;
          continue;
        }
        // Decoding starts now (in order, on the decoder's thread); batches are applied in order.
        const decoded = this.decoder.decode(seq, frames[2]);
        this.waiting++;
        this.chain = this.chain.then(async () => {
          try {
            await this.handle(await decoded, false);
          } finally {
            this.waiting--;
          }
        });
      }
    } catch (error) {
      if (!socket.closed && !this.closed)
        this.log.warn('kv events: the subscription stopped', { replica: this.source.replica, error: (error as Error).message });
    }
  }

  private malformed(problem: string): void {
    this.index.malformed();
    if (!this.warned) {
      // Once per subscription: a broken publisher would otherwise flood the log.
      this.warned = true;
      this.log.warn('kv events: a message from the replica is not a KV event batch; skipping such messages', { replica: this.source.replica, problem });
    }
  }

  private async handle(result: DecodeResult, replayed: boolean): Promise<void> {
    if (this.closed) return;
    if ('overloaded' in result) {
      this.index.counters.overloaded++;
      this.missed = true;
      return;
    }
    if ('error' in result) {
      this.malformed(result.error);
      this.missed = true;
      return;
    }
    const replica = this.source.replica;
    if (!replayed) {
      if (!this.index.admit(replica, result)) {
        this.missed = true;
        return;
      }
      const last = this.index.lastSeq(replica);
      const behind = last >= 0n ? result.seq > last + 1n : result.seq > 0n;
      if (this.source.replay && (behind || this.missed) && result.seq > 0n && Date.now() - this.lastReplayAt >= REPLAY_INTERVAL_MS) {
        this.lastReplayAt = Date.now();
        const from = last >= 0n ? last + 1n : result.seq > REPLAY_BUFFER ? result.seq - REPLAY_BUFFER : 0n;
        await this.replay(from, result.seq);
      }
      this.missed = false;
    } else {
      this.index.counters.replayed++;
    }
    await this.index.applySliced(replica, result);
  }

  /** Asks the engine's replay socket for batches [from, upTo) and applies them. */
  private async replay(from: bigint, upTo: bigint): Promise<void> {
    let dealer: Dealer | undefined;
    try {
      dealer = new this.zmq.Dealer({ linger: 0, receiveTimeout: REPLAY_TIMEOUT_MS, maxMessageSize: MAX_MESSAGE_BYTES });
      dealer.connect(this.source.replay!);
      const start = Buffer.alloc(8);
      start.writeBigUInt64BE(from);
      await dealer.send([Buffer.alloc(0), start]);
      const deadline = Date.now() + REPLAY_TIMEOUT_MS;
      while (!this.closed && Date.now() < deadline) {
        const frames = await dealer.receive();
        // [empty delimiter, sequence, payload]; the end marker is sequence -1 with an empty payload.
        const body = frames.length === 3 && frames[0].length === 0 ? frames.slice(1) : frames;
        const seq = body.length === 2 ? sequenceOf(body[0]) : undefined;
        if (seq === undefined || seq === END_OF_REPLAY) break;
        if (seq < from || seq <= this.index.lastSeq(this.source.replica)) continue;
        if (seq >= upTo) break;
        await this.handle(await this.decoder.decode(seq, body[1]), true);
      }
    } catch (error) {
      // A timeout or an engine without replay: what was missed stays a counted gap.
      this.log.warn('kv events: replay from the engine did not complete; the missed batches stay a gap', {
        replica: this.source.replica,
        replay: this.source.replay,
        error: (error as Error).message,
      });
    } finally {
      dealer?.close();
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    if (!this.socket.closed) this.socket.close();
  }
}

/**
 * The subscriptions of a policy's replicas with `kv_events`. ZeroMQ is loaded
 * the first time a replica needs it (an optional dependency, zeromq.ts);
 * without it, the feed says once per policy what to install and the router
 * routes on without precise prefix information.
 */
export class KvEventFeed {
  private readonly subscriptions = new Map<string, Subscription>();
  private readonly decoder: KvDecoder;
  private zmq: ZeroMq | undefined;
  private loading: Promise<void> | undefined;
  private warming: Promise<void> | undefined;
  private wanted: readonly KvEventSource[] = [];
  private closed = false;

  constructor(
    private readonly index: KvIndex,
    private readonly log: Logger,
    private readonly load: () => Promise<ZeroMq> = loadZeroMq,
  ) {
    this.decoder = new KvDecoder(log);
  }

  /** Subscribes to every source given and drops the rest (and their blocks). */
  sync(sources: readonly KvEventSource[]): void {
    this.wanted = sources;
    if (this.zmq || sources.length === 0) {
      this.apply(sources);
      return;
    }
    this.loading ??= this.load().then(
      (zmq) => {
        this.zmq = zmq;
        if (!this.closed) this.apply(this.wanted);
      },
      (error: Error) => {
        this.loading = undefined; // the next policy tries again
        this.log.warn('kv events: not subscribing', { replicas: this.wanted.map((s) => s.replica), error: error.message });
      },
    );
  }

  private apply(sources: readonly KvEventSource[]): void {
    const wanted = new Map(sources.map((s) => [s.replica, s]));
    for (const [replica, subscription] of this.subscriptions) {
      const source = wanted.get(replica);
      if (
        source &&
        source.endpoint === subscription.source.endpoint &&
        (source.topic ?? '') === (subscription.source.topic ?? '') &&
        source.replay === subscription.source.replay
      )
        continue;
      subscription.close();
      this.subscriptions.delete(replica);
      this.index.forget(replica);
    }
    const zmq = this.zmq;
    if (!zmq) return;
    if (sources.length > 0) this.warming ??= this.decoder.warm();
    for (const source of sources) {
      if (this.subscriptions.has(source.replica)) continue;
      try {
        this.index.track(source.replica);
        this.subscriptions.set(source.replica, new Subscription(source, this.index, this.decoder, this.log, zmq));
      } catch (error) {
        // A malformed endpoint: the replica is routed without precise prefix information.
        this.index.forget(source.replica);
        this.log.warn('kv events: cannot subscribe', { replica: source.replica, endpoint: source.endpoint, error: (error as Error).message });
      }
    }
  }

  /** Resolves once the replica's subscription is connected; false when there is none. */
  async connected(replica: string): Promise<boolean> {
    await this.loading;
    const subscription = this.subscriptions.get(replica);
    if (!subscription) return false;
    await subscription.connected;
    await this.warming;
    return true;
  }

  close(): void {
    this.closed = true;
    for (const subscription of this.subscriptions.values()) subscription.close();
    this.subscriptions.clear();
    this.decoder.close();
  }
}

/** The replicas of a policy that publish KV events. */
export function kvEventSources(replicas: Iterable<ReplicaSpec>): KvEventSource[] {
  const sources: KvEventSource[] = [];
  for (const r of replicas) if (r.kvEvents) sources.push({ replica: r.id, endpoint: r.kvEvents, topic: r.kvEventsTopic, replay: r.kvEventsReplay });
  return sources;
}

export type { KvEventBatch };
