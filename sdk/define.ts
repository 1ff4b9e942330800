import type { StrategyDefinition } from './types.ts';

/**
 * Types a strategy definition; does nothing at run time. A plugin may skip it
 * and default-export the plain object: the router needs no import from it.
 */
export function defineStrategy<Config = Record<string, unknown>>(definition: StrategyDefinition<Config>): StrategyDefinition<Config> {
  return definition;
}
