// Load in tokens counts the prefill a replica has ahead of it: the prompt's
// uncached part only (docs/policies.md, "Load in tokens"). The cached part is
// what the KV event index says the chosen replica holds of the prompt's
// token ids when the request is sent. The engine's reported cached_tokens
// comes with its usage, after the first byte, when the prefill this count
// stands for is over: too late to correct it.
import type { RoutedRequest } from '../../sdk/index.ts';

/** The KV event index as the token load reads it (core/fleet/kv-index.ts). */
export interface CachedPrefixLookup {
  /** The leading tokens of `tokenIds` one replica's cache holds; 0 when none or unknown. */
  cachedTokens(replica: string, tokenIds: ArrayLike<number>, adapter?: string): number;
}

/** Prompt tokens `replica` has to prefill for `routed`: all of them unless the router knows the token ids and what the replica caches. */
export function uncachedPromptTokens(routed: RoutedRequest, replica: string, index: CachedPrefixLookup | undefined): number {
  const ids = routed.promptTokenIds;
  if (index === undefined || ids === undefined || ids.length === 0) return routed.promptTokens;
  const cached = index.cachedTokens(replica, ids, routed.adapter);
  return Math.max(0, routed.promptTokens - Math.min(cached, ids.length));
}
