// Strategies by registry name: what a pool's strategy chain refers to.
import type { StrategyDefinition } from '../../sdk/index.ts';

// `unknown`, not `any`: create() is a method, so a definition of any config type is one.
export type AnyStrategy = StrategyDefinition<unknown>;

export interface StrategyRegistry {
  get(name: string): AnyStrategy | undefined;
  names(): string[];
  /** The file a plugin strategy was loaded from; undefined for a built-in. */
  originOf?(name: string): string | undefined;
}

export function registryOf(definitions: Iterable<AnyStrategy>, origins?: ReadonlyMap<string, string>): StrategyRegistry {
  const byName = new Map<string, AnyStrategy>();
  for (const definition of definitions) byName.set(definition.name, definition);
  return {
    get: (name) => byName.get(name),
    names: () => [...byName.keys()].sort(),
    originOf: (name) => origins?.get(name),
  };
}
