// Experiments B–F, H and I (docs/experiments.md), by name or former name.
import { affinityThreshold } from './affinity-threshold.ts';
import type { Experiment } from './experiment.ts';
import { longContext } from './long-context.ts';
import { lora } from './lora.ts';
import { priority } from './priority.ts';
import { saturation } from './saturation.ts';
import { staleness } from './staleness.ts';
import { tokenLoad } from './token-load.ts';

export const EXPERIMENTS: readonly Experiment[] = [affinityThreshold, saturation, staleness, longContext, lora, priority, tokenLoad];

export function experimentNamed(name: string): Experiment | undefined {
  return EXPERIMENTS.find((e) => e.name === name || e.aliases?.includes(name));
}
