// One undici Pool per replica: keep-alive connections to the engine, with
// the connect timeout of the replica's pool (the time-to-headers and idle
// timeouts are set per request: they differ for streams). keepAliveTimeout
// stays under the engine's own idle timeout (uvicorn's is 5 s) so we never
// write to a socket it closed.
import { Pool as ConnectionPool } from 'undici';
import type { UpstreamSettings } from '../decide/generation.ts';

const KEEP_ALIVE_MS = 4000;

interface Entry {
  readonly pool: ConnectionPool;
  /** The settings object it was made for: the same object (same snapshot) needs no key. */
  settings: UpstreamSettings;
  readonly settingsKey: string;
}

export class Upstreams {
  private readonly pools = new Map<string, Entry>();

  /** The pool for `url`, created on first use or when its settings changed. */
  poolFor(url: string, settings: UpstreamSettings): ConnectionPool {
    const entry = this.pools.get(url);
    if (entry?.settings === settings) return entry.pool;
    const settingsKey = `${settings.connections}|${settings.connectTimeoutMs}`;
    if (entry && entry.settingsKey === settingsKey) {
      entry.settings = settings; // a reload that changed nothing here
      return entry.pool;
    }
    if (entry) void entry.pool.close().catch(() => {}); // in-flight requests finish first
    const pool = new ConnectionPool(url, {
      connections: settings.connections,
      pipelining: 1,
      keepAliveTimeout: KEEP_ALIVE_MS,
      keepAliveMaxTimeout: KEEP_ALIVE_MS,
      connect: { timeout: settings.connectTimeoutMs },
    });
    this.pools.set(url, { pool, settings, settingsKey });
    return pool;
  }

  /** Closes the pools of replicas a reload removed, once their requests finish. */
  retain(urls: ReadonlySet<string>): void {
    for (const [url, entry] of this.pools) {
      if (urls.has(url)) continue;
      this.pools.delete(url);
      void entry.pool.close().catch(() => {});
    }
  }

  async close(): Promise<void> {
    const pools = [...this.pools.values()].map((e) => e.pool);
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.destroy().catch(() => {})));
  }
}
