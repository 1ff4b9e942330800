// Decision 2 — which pool: the pool rules, first match wins, among the pools
// that serve the chosen model version; then the pool's length limit.
import { rejection } from '../errors.ts';
import { firstMatch, type Facts } from '../rules/compile.ts';
import type { StepResult } from './decision.ts';
import type { ModelVersion, Pool, Generation } from './generation.ts';
import type { StepTrace } from './trace.ts';

export function choosePool(model: string, modelVersion: ModelVersion, ruleFacts: Facts, requiredTokens: number, snapshot: Generation): StepResult<Pool> {
  const version = modelVersion.version;
  const pools = snapshot.poolsOfVersion.get(modelVersion) ?? NO_POOLS;
  const match = firstMatch(snapshot.poolRules.rules, ruleFacts, poolRefusal, { pools, model, version });

  // The pool's shared steps, made when the snapshot was compiled (derived.ts).
  let pool: Pool;
  let plain: StepTrace;
  if (match.rule) {
    pool = poolNamed(pools, match.rule.target)!;
    plain = snapshot.poolSteps.get(pool)!.byRule.get(match.rule.name)!;
  } else {
    const fallback = poolNamed(pools, snapshot.poolRules.defaultPool);
    pool = fallback ?? pools[0];
    plain = fallback ? snapshot.poolSteps.get(pool)!.byDefault : snapshot.poolSteps.get(pool)!.onlyPool;
  }
  const tooLong = pool.maxModelLen !== undefined && requiredTokens > pool.maxModelLen;
  if (match.skipped.length === 0 && !tooLong) return { ok: true, value: pool, trace: plain };
  const alternatives = match.skipped.map((s) => ({ name: s.rule, note: s.why }));
  let decidedBy = plain.decidedBy;
  let reason = plain.reason;

  // Too long for the chosen pool: a roomier pool of the same version, or 400.
  if (tooLong) {
    const roomier = pools
      .filter((p) => p.maxModelLen === undefined || requiredTokens <= p.maxModelLen)
      .sort((a, b) => (a.maxModelLen ?? Infinity) - (b.maxModelLen ?? Infinity))[0];
    if (!roomier) {
      const largest = Math.max(...pools.map((p) => p.maxModelLen ?? 0));
      return {
        ok: false,
        rejection: rejection(
          'context_length_exceeded',
          // Worded as OpenAI's and vLLM's ("maximum context length"): clients (LangChain) recognise an overflow by it.
          `This model's maximum context length is ${largest} tokens. However, you requested about ${requiredTokens} tokens (prompt plus max_tokens), more than any pool of ${model} allows. Shorten the prompt or lower max_tokens.`,
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
  return { ok: true, value: pool, trace: { decidedBy, reason, alternatives } };
}

const NO_POOLS: readonly Pool[] = Object.freeze([]);

/** Why a pool rule's target cannot take the request: the chosen version has no pool of that name. */
function poolRefusal(name: string, on: { readonly pools: readonly Pool[]; readonly model: string; readonly version: string }): string | null {
  return poolNamed(on.pools, name) ? null : `${on.model}@${on.version} has no ${name} pool`;
}

// Module-level rather than a closure in choosePool: tsx (esbuild keepNames) would name a new closure every request.
function poolNamed(pools: readonly Pool[], name: string): Pool | undefined {
  for (const pool of pools) if (pool.name === name) return pool;
  return undefined;
}
