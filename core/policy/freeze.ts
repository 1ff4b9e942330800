// A compiled policy is shared by every generation built from it (several
// routers in the simulator, the live one and the shadow), so it is frozen
// to the bone: a runtime that tried to write into it throws instead of
// silently changing what another generation decides with.
import type { CompiledPolicy } from './compiled.ts';

/** Freezes the policy's plain objects and arrays, and what its maps and sets hold. Plugin definitions are the plugin's own, and left alone. */
export function freezePolicy(policy: CompiledPolicy): CompiledPolicy {
  freeze(policy, new Set());
  return policy;
}

function freeze(value: unknown, seen: Set<object>): void {
  if (typeof value !== 'object' || value === null || seen.has(value)) return;
  seen.add(value);
  if (value instanceof Map) {
    for (const item of value.values()) freeze(item, seen);
    return;
  }
  if (value instanceof Set) {
    for (const item of value) freeze(item, seen);
    return;
  }
  const proto = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return; // a class instance: its own business
  for (const [key, item] of Object.entries(value)) if (key !== 'definition') freeze(item, seen);
  Object.freeze(value);
}
