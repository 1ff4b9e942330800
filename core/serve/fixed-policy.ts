// A policy that never changes: for tests and embedding. `serve` uses the
// reloading PolicyStore instead.
import type { Generation } from '../decide/generation.ts';
import type { ServedPolicy } from './server.ts';

export function fixedPolicy(snapshot: Generation): ServedPolicy {
  const lease = { snapshot, release() {} };
  return { current: () => snapshot, acquire: () => lease };
}
