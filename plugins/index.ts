// The strategies that ship with Switchyard. Each uses only the SDK, exactly
// like a third-party plugin; cli/ hands this list to core (core never
// imports plugins/), and tests and benchmarks import it directly.
import type { StrategyDefinition } from '../sdk/index.ts';
import leastLoad from './least-load.ts';
import loraAffinity from './lora-affinity.ts';
import powerOfTwo from './power-of-two.ts';
import precisePrefix from './precise-prefix.ts';
import prefixAffinity from './prefix-affinity.ts';
import random from './random.ts';
import roundRobin from './round-robin.ts';
import sessionAffinity from './session-affinity.ts';

export const BUILTIN_STRATEGIES: readonly StrategyDefinition<unknown>[] = [
  sessionAffinity,
  precisePrefix,
  prefixAffinity,
  loraAffinity,
  powerOfTwo,
  leastLoad,
  roundRobin,
  random,
];
