// Decision 2 — which pool: the pool rules, first match wins, among the pools
// that serve the chosen model version; then the pool's length limit.
import { rejection, type Rejection } from '../errors.ts';
import { oncePer } from '../once-per.ts';
import { firstMatch, type Facts } from '../rules/compile.ts';
import { versionKey, type ModelVersion, type Pool, type Snapshot } from '../policy/snapshot.ts';
import type { StepTrace } from './trace.ts';

export function choosePool(
  model: string,
  modelVersion: ModelVersion,
  ruleFacts: Facts,
  requiredTokens: number,
  snapshot: Snapshot,
): { pool: Pool; trace: StepTrace } | { rejected: Rejection; trace: StepTrace } {
  const version = modelVersion.version;
  const pools = poolsServing(snapshot, modelVersion);
  const match = firstMatch(snapshot.poolRules.rules, ruleFacts, (name) => (poolNamed(pools, name) ? null : `${model}@${version} has no ${name} pool`));
  const alternatives = match.skipped.map((s) => ({ name: s.rule, note: s.why }));

  let pool: Pool;
  let decidedBy: string;
  let reason: string;
  if (match.rule) {
    pool = poolNamed(pools, match.rule.target)!;
    decidedBy = `pool rule "${match.rule.name}"`;
    reason = `rule "${match.rule.name}" → ${pool.name}`;
  } else {
    const fallback = poolNamed(pools, snapshot.poolRules.defaultPool);
    pool = fallback ?? pools[0];
    decidedBy = fallback ? 'default pool' : 'only pool of version';
    reason = fallback ? `no pool rule matched → ${pool.name}` : `no rule's pool serves ${model}@${version} → ${pool.name}`;
  }

  // Too long for the chosen pool: a roomier pool of the same version, or 400.
  if (pool.maxModelLen !== undefined && requiredTokens > pool.maxModelLen) {
    const roomier = pools
      .filter((p) => p.maxModelLen === undefined || requiredTokens <= p.maxModelLen)
      .sort((a, b) => (a.maxModelLen ?? Infinity) - (b.maxModelLen ?? Infinity))[0];
    if (!roomier) {
      const largest = Math.max(...pools.map((p) => p.maxModelLen ?? 0));
      return {
        rejected: rejection(
          'context_length_exceeded',
          `This request needs about ${requiredTokens} tokens (prompt plus max_tokens), more than the ${largest} any pool of ${model} allows. Shorten the prompt or lower max_tokens.`,
          { param: 'messages' },
        ),
        trace: { decidedBy: 'pool limits', reason: `${requiredTokens} tokens > max_model_len of every pool`, alternatives },
      };
    }
    alternatives.push({ name: pool.name, note: `max_model_len ${pool.maxModelLen} < ${requiredTokens} tokens` });
    reason += `; too long for it → ${roomier.name}`;
    decidedBy = 'pool limits';
    pool = roomier;
  }
  if (alternatives.length) return { pool, trace: { decidedBy, reason, alternatives } };
  return { pool, trace: plainPoolStep(pool, decidedBy, reason) };
}

// A pool step without alternatives is the same for every request that got the
// pool the same way: one shared object, not one a request (the decision log
// keeps a thousand traces, and the GC copies every byte of them). Reused only
// while it says the same.
const plainPoolSteps = new WeakMap<Pool, StepTrace>();

function plainPoolStep(pool: Pool, decidedBy: string, reason: string): StepTrace {
  let step = plainPoolSteps.get(pool);
  if (step?.decidedBy !== decidedBy || step.reason !== reason) plainPoolSteps.set(pool, (step = Object.freeze({ decidedBy, reason, alternatives: undefined })));
  return step;
}

// Module-level rather than a closure in choosePool: tsx (esbuild keepNames) would name a new closure every request.
function poolNamed(pools: readonly Pool[], name: string): Pool | undefined {
  for (const pool of pools) if (pool.name === name) return pool;
  return undefined;
}

// The pools of each model version, by version object (a snapshot's versions are its own), once
// per snapshot: building the "model@version" key and hashing it was a visible share of every decision.
const poolsByVersionObject = oncePer((snapshot: Snapshot): ReadonlyMap<ModelVersion, readonly Pool[]> => {
  const byVersion = new Map<ModelVersion, readonly Pool[]>();
  for (const model of snapshot.models.values()) {
    for (const version of model.versions) byVersion.set(version, snapshot.poolsByVersion.get(versionKey(model.id, version.version)) ?? []);
  }
  return byVersion;
});

function poolsServing(snapshot: Snapshot, version: ModelVersion): readonly Pool[] {
  return poolsByVersionObject(snapshot).get(version) ?? [];
}
