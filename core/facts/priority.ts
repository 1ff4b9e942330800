// Request priorities (docs/policies.md, "Priorities"): an integer, higher is
// more important, negative is sheddable. A client sends one in x-priority as
// an integer or a name the policy maps to one (`interactive` 0 and `batch` -1
// always exist); the tenant's max_priority caps it and its default_priority
// applies when the header is absent. Strategies and existing rules keep
// seeing the class (`interactive` for >= 0, `batch` below).
import type { Priority } from '../../sdk/index.ts';
import { rejection, type Rejection } from '../errors.ts';

/** The integers a priority may take: wide enough for any scheme, narrow enough to label metrics by. */
export const MIN_PRIORITY = -100;
export const MAX_PRIORITY = 100;

/** The names every policy knows; settings' priority_names may add more or move them. */
export const DEFAULT_PRIORITY_NAMES: ReadonlyMap<string, number> = new Map([
  ['interactive', 0],
  ['batch', -1],
]);

/** What x-priority may look like before the policy is asked: an integer, or a short lower-case name. */
const INTEGER = /^[+-]?[0-9]{1,4}$/;
const NAME = /^[a-z][a-z0-9_-]{0,31}$/;

/** The header parsed: an integer, a name still to look up, or undefined when malformed. */
export function parsePriorityHeader(value: string): number | string | undefined {
  if (INTEGER.test(value)) return Number(value);
  if (NAME.test(value)) return value;
  return undefined;
}

/** The class strategies and the `priority` rule fact see. */
export function priorityClass(level: number): Priority {
  return level < 0 ? 'batch' : 'interactive';
}

/**
 * The request's integer priority: the header's (a name looked up in `names`),
 * capped at the tenant's max, else the tenant's default; or the 400 naming
 * the header.
 */
export function resolvePriority(
  sent: number | string | undefined,
  tenant: { readonly defaultPriorityLevel: number; readonly maxPriority: number },
  names: ReadonlyMap<string, number>,
): number | Rejection {
  if (sent === undefined) return tenant.defaultPriorityLevel;
  let level: number | undefined;
  if (typeof sent === 'number') level = sent;
  else {
    level = names.get(sent);
    if (level === undefined) {
      return rejection(
        'invalid_request',
        `x-priority "${sent}" is not a priority this router knows: send an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY} or one of ${[...names.keys()].join(', ')}.`,
        { param: 'x-priority' },
      );
    }
  }
  if (!Number.isInteger(level) || level < MIN_PRIORITY || level > MAX_PRIORITY) {
    return rejection(
      'invalid_request',
      `x-priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY} (or one of ${[...names.keys()].join(', ')}), not ${level}.`,
      { param: 'x-priority' },
    );
  }
  return Math.min(level, tenant.maxPriority);
}
