// Recorded traffic decided again under a policy, request by request, for
// `switchyard diff --replay` (docs/changing-policy.md): each policy decides on
// the recording's clock, with quota of its own (taken as it admits) and
// strategies that hear their own decisions, against an idle fleet (every
// replica up, no load: load effects are `sim --replay`'s job). The random
// draw of a request without a conversation id is seeded by its request id,
// so two policies with the same canary split draw the same.
import { seededRandom } from '../../sdk/index.ts';
import { commit } from '../decide/commit.ts';
import { decide } from '../decide/decide.ts';
import type { Decision } from '../decide/decision.ts';
import type { DecideEnv } from '../decide/env.ts';
import { MemoryQuotaStore } from '../decide/quota.ts';
import { EMPTY_FLEET } from '../fleet/types.ts';
import type { Generation } from '../decide/generation.ts';
import type { ReplayedRecord } from './record-format.ts';

export class ReplayDecider {
  readonly snapshot: Generation;
  readonly #quota = new MemoryQuotaStore();
  #now = 0;
  #clock = 0;
  #random: () => number = Math.random;
  readonly #env: DecideEnv;

  constructor(snapshot: Generation) {
    this.snapshot = snapshot;
    this.#env = { now: () => this.#now, clock: () => this.#clock, random: () => this.#random(), quota: this.#quota };
  }

  /** Decides and commits one recorded request (in recording order). */
  decide(record: ReplayedRecord): Decision {
    this.#now = record.at;
    this.#clock = Math.max(this.#clock, record.at);
    this.#random = seededRandom(`replay:${record.facts.requestId}`);
    const decision = decide(record.facts, this.snapshot, EMPTY_FLEET, this.#env, { blockHashes: record.blocks, pickBudgetMs: Infinity });
    commit(decision, this.#env);
    return decision;
  }
}
