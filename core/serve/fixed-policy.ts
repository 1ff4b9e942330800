// A policy that never changes: for tests and embedding. `serve` uses the
// reloading PolicyStore instead.
import type { Snapshot } from '../policy/snapshot.ts';
import type { ServedPolicy } from './server.ts';

export function fixedPolicy(snapshot: Snapshot): ServedPolicy {
  const lease = { snapshot, release() {} };
  return { current: () => snapshot, acquire: () => lease };
}
