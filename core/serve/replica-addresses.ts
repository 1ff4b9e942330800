// Where the router reaches each replica. Serve depends only on this
// interface: an embedder (the CLI's emulated fleet, a test) can start
// engines for some replicas and say where they listen.
import type { ReplicaSpec, Generation } from '../decide/generation.ts';

export interface ReplicaAddresses {
  /** Brings whatever backs the replicas in line with `snapshot` (called at start and after each reload). */
  sync(snapshot: Generation): Promise<void>;
  /** The base URL a replica is reached at. */
  urlOf(replica: ReplicaSpec): string;
  close(): Promise<void>;
}

/** Replicas are reached at the url their policy gives; only http(s) is routable. */
export const DIRECT_REPLICAS: ReplicaAddresses = {
  async sync(snapshot) {
    for (const replica of snapshot.replicas.values()) {
      if (!/^https?:\/\//.test(replica.url)) {
        throw new Error(
          `replica ${replica.id}: "${replica.url}" is not an http(s) URL this router can reach (emulate:// replicas need \`switchyard serve\`, which starts them)`,
        );
      }
    }
  },
  urlOf: (replica) => replica.url,
  async close() {},
};
