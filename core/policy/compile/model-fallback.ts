// Model fallback (models.yaml `fallback`): the model that takes a model's
// requests when every pool of it would refuse them for capacity. The target
// must be another deployed model, and following fallbacks must never come
// back round (decide() follows them at run time: docs/policies.md).
import type { ModelEntry } from '../compiled.ts';
import type { PolicySource } from '../source.ts';
import { unknown, type CompileContext } from './context.ts';

export function checkModelFallbacks(
  ctx: CompileContext,
  models: ReadonlyMap<string, ModelEntry>,
  origins: ReadonlyMap<string, { source: PolicySource; index: number }>,
): void {
  for (const [id, { source, index }] of origins) {
    const model = models.get(id)!;
    if (model.fallback === undefined) continue;
    const at = ['models', index, 'fallback'];
    const target = models.get(model.fallback);
    if (model.fallback === id) {
      ctx.report(source, at, `model "${id}" falls back to itself; name another model or remove fallback`);
    } else if (model.cold) {
      ctx.report(source, at, `model "${id}" is cold (never at capacity, it is loaded on demand): a fallback would never be used; remove it`);
    } else if (!target) {
      ctx.report(source, at, `model "${id}" falls back to an ${unknown('model', model.fallback, models.keys())}`);
    } else if (target.cold) {
      ctx.report(
        source,
        at,
        `model "${id}" falls back to "${model.fallback}", which is cold (not deployed): a fallback must be able to answer at once; name a deployed model`,
      );
    } else {
      // Walk the chain: a model met twice is a loop.
      const seen = [id];
      for (let next: ModelEntry | undefined = target; next; next = next.fallback === undefined ? undefined : models.get(next.fallback)) {
        if (seen.includes(next.id)) {
          ctx.report(source, at, `model fallback loops: ${[...seen, next.id].join(' -> ')}; end the chain at a model without fallback`);
          break;
        }
        seen.push(next.id);
      }
    }
  }
}
