// The strategies that ship with Switchyard. Each lives in plugins/ and uses
// only the SDK, exactly like a third-party plugin.
import leastLoad from '../../plugins/least-load.ts';
import loraAffinity from '../../plugins/lora-affinity.ts';
import powerOfTwo from '../../plugins/power-of-two.ts';
import precisePrefix from '../../plugins/precise-prefix.ts';
import prefixAffinity from '../../plugins/prefix-affinity.ts';
import random from '../../plugins/random.ts';
import roundRobin from '../../plugins/round-robin.ts';
import sessionAffinity from '../../plugins/session-affinity.ts';
import { registryOf, type AnyStrategy, type StrategyRegistry } from './registry.ts';

export const BUILTIN_STRATEGIES: readonly AnyStrategy[] = [
  sessionAffinity,
  precisePrefix,
  prefixAffinity,
  loraAffinity,
  powerOfTwo,
  leastLoad,
  roundRobin,
  random,
];

export const builtinRegistry: StrategyRegistry = registryOf(BUILTIN_STRATEGIES);
