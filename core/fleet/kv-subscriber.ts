// One ZeroMQ SUB socket per replica that publishes KV cache events (the
// replica's `kv_events` endpoint in pools.yaml), each feeding the router's
// KvIndex. Sockets follow the policy: `sync` connects new endpoints and
// closes those that left. ZeroMQ reconnects by itself; a message that is not
// a KV event batch is counted and skipped, and messages over the size bound
// never reach us (ZMQ_MAXMSGSIZE drops the connection, which reconnects).
import type { Subscriber } from 'zeromq';
import type { Logger } from '../../sdk/index.ts';
import type { ReplicaSpec } from '../policy/snapshot.ts';
import { decodeKvMessage } from './kv-events.ts';
import type { KvIndex } from './kv-index.ts';
import { loadZeroMq, type ZeroMq } from './zeromq.ts';

export interface KvEventSource {
  readonly replica: string;
  /** tcp://host:port (or ipc://path) of the engine's PUB socket. */
  readonly endpoint: string;
  /** Only messages whose topic starts with this; all when empty. */
  readonly topic?: string;
}

/** Bound on one message: a batch of a few thousand events fits in well under 1 MiB. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

class Subscription {
  readonly socket: Subscriber;
  /** Resolves once the socket has connected to the publisher (a PUB drops what is sent before). */
  readonly connected: Promise<void>;
  constructor(
    readonly source: KvEventSource,
    index: KvIndex,
    log: Logger,
    zmq: ZeroMq,
  ) {
    this.socket = new zmq.Subscriber({ maxMessageSize: MAX_MESSAGE_BYTES, receiveHighWaterMark: 100_000, linger: 0 });
    this.connected = new Promise((resolve) => this.socket.events.on('connect', () => resolve()));
    this.socket.connect(source.endpoint);
    this.socket.subscribe(source.topic ?? '');
    void this.receive(index, log);
  }

  private async receive(index: KvIndex, log: Logger): Promise<void> {
    let warned = false;
    try {
      for await (const frames of this.socket) {
        const batch = decodeKvMessage(frames);
        if (typeof batch === 'string') {
          index.malformed();
          if (!warned) {
            // Once per subscription: a broken publisher would otherwise flood the log.
            warned = true;
            log.warn('kv events: a message from the replica is not a KV event batch; skipping such messages', { replica: this.source.replica, problem: batch });
          }
          continue;
        }
        index.apply(this.source.replica, batch);
      }
    } catch (error) {
      if (!this.socket.closed) log.warn('kv events: the subscription stopped', { replica: this.source.replica, error: (error as Error).message });
    }
  }

  close(): void {
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
  private zmq: ZeroMq | undefined;
  private loading: Promise<void> | undefined;
  private wanted: readonly KvEventSource[] = [];
  private closed = false;

  constructor(
    private readonly index: KvIndex,
    private readonly log: Logger,
    private readonly load: () => Promise<ZeroMq> = loadZeroMq,
  ) {}

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
      if (source && source.endpoint === subscription.source.endpoint && (source.topic ?? '') === (subscription.source.topic ?? '')) continue;
      subscription.close();
      this.subscriptions.delete(replica);
      this.index.forget(replica);
    }
    const zmq = this.zmq;
    if (!zmq) return;
    for (const source of sources) {
      if (this.subscriptions.has(source.replica)) continue;
      try {
        this.index.track(source.replica);
        this.subscriptions.set(source.replica, new Subscription(source, this.index, this.log, zmq));
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
    return true;
  }

  close(): void {
    this.closed = true;
    for (const subscription of this.subscriptions.values()) subscription.close();
    this.subscriptions.clear();
  }
}

/** The replicas of a policy that publish KV events. */
export function kvEventSources(replicas: Iterable<ReplicaSpec>): KvEventSource[] {
  const sources: KvEventSource[] = [];
  for (const r of replicas) if (r.kvEvents) sources.push({ replica: r.id, endpoint: r.kvEvents, topic: r.kvEventsTopic });
  return sources;
}
