// Hashes that are identical on every router instance and every run: canary
// buckets, consistent hashing and prefix keys must agree across a fleet of
// routers, so nothing here may depend on process state.

/** MurmurHash3 (x86, 32-bit) of a string's UTF-16 code units. */
export function hashString(text: string, seed = 0): number {
  return hashRange(text, 0, text.length, seed);
}

/** MurmurHash3's scrambling of one 32-bit block. */
function scramble(k: number): number {
  k = Math.imul(k, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  return Math.imul(k, 0x1b873593);
}

/** MurmurHash3's step for one whole 32-bit block (exported for core's own chained keys, not by the SDK's index). */
export function step(h: number, k: number): number {
  h ^= scramble(k);
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** hashString of text.slice(start, end), without making the slice. */
export function hashRange(text: string, start: number, end: number, seed = 0): number {
  let h = seed >>> 0;
  let i = start;
  // Two UTF-16 code units make one 32-bit block.
  for (; i + 1 < end; i += 2) h = step(h, (text.charCodeAt(i) & 0xffff) | ((text.charCodeAt(i + 1) & 0xffff) << 16));
  if (i < end) h ^= scramble(text.charCodeAt(i) & 0xffff);
  h ^= end - start;
  return finalize(h);
}

/**
 * hashRange over code units already paired into 32-bit words (the low half
 * the first unit): words[start..end) hash as the 2 × (end - start) units
 * they hold.
 */
export function hashWords(words: Int32Array, start: number, end: number, seed = 0): number {
  let h = seed >>> 0;
  for (let i = start; i < end; i++) h = step(h, words[i]);
  h ^= 2 * (end - start);
  return finalize(h);
}

/** Combines two 32-bit hashes into one well-mixed 32-bit hash. */
export function mixHashes(a: number, b: number): number {
  let h = (a ^ Math.imul(b, 0x9e3779b1)) | 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** MurmurHash3's final mix (the length already folded in by the caller). */
export function finalize(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A number in [0, 1) from a key: the same key gives the same number everywhere. */
export function unitInterval(key: string, seed = 0): number {
  return hashString(key, seed) / 0x1_0000_0000;
}

// Replica ids repeat on every request: hash each once.
const idHashes = new Map<string, number>();
function idHash(id: string): number {
  let h = idHashes.get(id);
  if (h === undefined) {
    if (idHashes.size >= 65_536) idHashes.clear();
    h = hashString(id);
    idHashes.set(id, h);
  }
  return h;
}

/**
 * Every item's id hash, in order. Kept with a frozen list (the router shares
 * one frozen candidate list until the pool's membership changes), so that a
 * rendezvous over a large pool is one multiply-and-mix per item.
 */
interface KeptHashes {
  readonly idOf: (item: never) => string;
  readonly hashes: Uint32Array;
  /** Keys' rendezvous owners (positions) over this list: a conversation's next turn finds its owner without a walk. */
  readonly owners: Map<string, number>;
}
const listIdHashes = new WeakMap<readonly unknown[], KeptHashes>();
/** Owners kept per list; then they start afresh. Longer keys are not kept. */
const MAX_KEPT_OWNERS = 4096;
const MAX_KEPT_KEY_CHARS = 256;
/** The owners of a list that is not frozen: never written, since such a list may change. */
const NOT_KEPT: Map<string, number> = new Map();

function keptHashesOf<T>(items: readonly T[], idOf: (item: T) => string): KeptHashes {
  const kept = listIdHashes.get(items);
  if (kept !== undefined && kept.idOf === idOf) return kept;
  const hashes = new Uint32Array(items.length);
  for (let i = 0; i < items.length; i++) hashes[i] = idHash(idOf(items[i]));
  const frozen = Object.isFrozen(items);
  const made = { idOf, hashes, owners: frozen ? new Map<string, number>() : NOT_KEPT };
  if (frozen) listIdHashes.set(items, made);
  return made;
}

function idHashesOf<T>(items: readonly T[], idOf: (item: T) => string): Uint32Array {
  return keptHashesOf(items, idOf).hashes;
}

/**
 * Rendezvous (highest-random-weight) hashing: orders `items` by their weight
 * for `key`. Removing one of N items moves only the keys that item owned,
 * about 1/N of them, and every router computes the same order.
 */
export function rendezvousOrder<T>(key: string, items: readonly T[], idOf: (item: T) => string): T[] {
  const keyHash = hashString(key);
  const ids = idHashesOf(items, idOf);
  const weighted = items.map((item, i) => ({ item, weight: mixHashes(keyHash, ids[i]) }));
  weighted.sort((a, b) => b.weight - a.weight || (idOf(a.item) < idOf(b.item) ? -1 : 1));
  return weighted.map((w) => w.item);
}

/**
 * The item a key belongs to under rendezvous hashing, without sorting. Equal
 * weights go to the lower id, as in rendezvousOrder: the owner never depends
 * on the order a router lists its items in.
 */
export function rendezvousOwner<T>(key: string, items: readonly T[], idOf: (item: T) => string): T | undefined {
  // The owner depends on the key and the items' ids only, and a frozen list's ids cannot change: it is kept with the list.
  const kept = keptHashesOf(items, idOf);
  const known = kept.owners.get(key);
  if (known !== undefined) return items[known];
  const keyHash = hashString(key);
  const ids = kept.hashes;
  let best = -1;
  let bestWeight = -1;
  for (let i = 0; i < items.length; i++) {
    const weight = mixHashes(keyHash, ids[i]);
    if (weight > bestWeight || (weight === bestWeight && idOf(items[i]) < idOf(items[best]))) {
      best = i;
      bestWeight = weight;
    }
  }
  if (best < 0) return undefined;
  if (kept.owners !== NOT_KEPT && key.length <= MAX_KEPT_KEY_CHARS) {
    if (kept.owners.size >= MAX_KEPT_OWNERS) kept.owners.clear();
    kept.owners.set(key, best);
  }
  return items[best];
}

/**
 * Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam):
 * walks the key's rendezvous order and takes the first item whose load stays
 * within `balanceFactor` times the mean (HAProxy's hash-balance-factor), so
 * no item exceeds (1+ε)× the mean and locality survives overload.
 */
export function boundedLoadOwner<T>(
  key: string,
  items: readonly T[],
  idOf: (item: T) => string,
  loadOf: (item: T) => number,
  balanceFactor: number,
): { owner: T | undefined; skipped: T[] } {
  if (items.length === 0) return { owner: undefined, skipped: [] };
  let total = 0;
  for (const item of items) total += loadOf(item);
  // Counting the request being placed keeps the bound above zero on an idle fleet.
  const bound = Math.ceil(((total + 1) / items.length) * balanceFactor);
  const order = rendezvousOrder(key, items, idOf);
  const skipped: T[] = [];
  for (const item of order) {
    if (loadOf(item) + 1 <= bound) return { owner: item, skipped };
    skipped.push(item);
  }
  return { owner: order[0], skipped };
}
