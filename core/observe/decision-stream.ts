// Live decisions for watchers (the decision explorer): each logged decision
// is serialised once and written to every subscriber as a server-sent event.
// A subscriber that reads too slowly misses events (counted, and told so)
// instead of making the router buffer for it: routing never waits on a watcher.
import type { ServerResponse } from 'node:http';

/** Bytes a subscriber may have unread before its events are dropped. */
const MAX_UNREAD_BYTES = 256 * 1024;
/** At most this many watchers at once; more get a 503 from the route. */
export const MAX_SUBSCRIBERS = 32;
const KEEPALIVE_MS = 15_000;

interface Subscriber {
  readonly response: ServerResponse;
  dropped: number;
}

export class DecisionStream {
  private readonly subscribers = new Set<Subscriber>();
  private keepalive: NodeJS.Timeout | undefined;

  get size(): number {
    return this.subscribers.size;
  }

  /** Sends `entry` to every subscriber; does nothing (not even serialise) when there is none. */
  publish(entry: () => Record<string, unknown>): void {
    if (this.subscribers.size === 0) return;
    const frame = `event: decision\ndata: ${JSON.stringify(entry())}\n\n`;
    for (const subscriber of this.subscribers) {
      if (subscriber.response.writableLength > MAX_UNREAD_BYTES) {
        subscriber.dropped++;
        continue;
      }
      if (subscriber.dropped > 0) {
        subscriber.response.write(`event: dropped\ndata: {"dropped":${subscriber.dropped}}\n\n`);
        subscriber.dropped = 0;
      }
      subscriber.response.write(frame);
    }
  }

  /** Takes over `response` as an event stream until the client goes away. False when full. */
  subscribe(response: ServerResponse): boolean {
    if (this.subscribers.size >= MAX_SUBSCRIBERS) return false;
    const subscriber: Subscriber = { response, dropped: 0 };
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    response.write(': switchyard decisions\n\n');
    this.subscribers.add(subscriber);
    response.on('close', () => {
      this.subscribers.delete(subscriber);
      if (this.subscribers.size === 0) this.stopKeepalive();
    });
    this.keepalive ??= setInterval(() => {
      for (const s of this.subscribers) s.response.write(': keepalive\n\n');
    }, KEEPALIVE_MS).unref();
    return true;
  }

  close(): void {
    for (const s of this.subscribers) s.response.end();
    this.subscribers.clear();
    this.stopKeepalive();
  }

  private stopKeepalive(): void {
    clearInterval(this.keepalive);
    this.keepalive = undefined;
  }
}
