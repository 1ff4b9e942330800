// The reference text's experiments B–F (section 11), by name.
import { affinityThreshold } from './affinity-threshold.ts';
import { cascade } from './cascade.ts';
import type { Experiment } from './experiment.ts';
import { longContext } from './long-context.ts';
import { lora } from './lora.ts';
import { staleness } from './staleness.ts';

export const EXPERIMENTS: readonly Experiment[] = [affinityThreshold, cascade, staleness, longContext, lora];

export function experimentNamed(name: string): Experiment | undefined {
  return EXPERIMENTS.find((e) => e.name === name);
}
