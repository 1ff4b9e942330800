// Pool overflow (pools.yaml `overflow`): where a pool sends the requests it
// would refuse for capacity or shed. The target must be another pool of the
// same model version, and following overflows must never come back round.
import { versionKey, type PoolSpec } from '../compiled.ts';
import type { PolicySource } from '../source.ts';
import type { PathSegment } from '../../diagnostics/schema-problems.ts';
import type { CompileContext } from './context.ts';

export interface OverflowRef {
  readonly pool: PoolSpec;
  readonly source: PolicySource;
  readonly at: PathSegment[];
}

export function checkOverflow(ctx: CompileContext, refs: readonly OverflowRef[], poolsByVersion: ReadonlyMap<string, readonly PoolSpec[]>): void {
  const target = (pool: PoolSpec) =>
    pool.overflow === undefined ? undefined : poolsByVersion.get(versionKey(pool.model, pool.version))?.find((p) => p.name === pool.overflow);
  for (const { pool, source, at } of refs) {
    if (pool.overflow === undefined) continue;
    const siblings = poolsByVersion.get(versionKey(pool.model, pool.version)) ?? [];
    if (pool.overflow === pool.name) {
      ctx.report(source, at, `pool "${pool.name}" overflows into itself`);
      continue;
    }
    if (!target(pool)) {
      const names = siblings.filter((p) => p !== pool).map((p) => p.name);
      ctx.report(
        source,
        at,
        `pool "${pool.name}" overflows into "${pool.overflow}", which is not a pool of ${versionKey(pool.model, pool.version)}${names.length ? ` (its pools: ${names.join(', ')})` : ' (it has no other pool)'}`,
      );
      continue;
    }
    // Walk the chain: a pool met twice is a loop.
    const seen = [pool.name];
    for (let next = target(pool); next; next = target(next)) {
      if (seen.includes(next.name)) {
        ctx.report(source, at, `pool overflow loops: ${[...seen, next.name].join(' -> ')}; end the chain at a pool without overflow`);
        break;
      }
      seen.push(next.name);
    }
  }
}
