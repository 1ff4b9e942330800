// Runs rules through json-rules-engine itself: the reference the compiled
// predicates are tested against. A fresh Engine per evaluation, because a
// shared Engine is not safe for concurrent run() calls (DESIGN.md).
import { Engine } from 'json-rules-engine';
import type { Facts, RuleSpec } from './compile.ts';

/** Names of the matching rules, in evaluation order (priority, then file order). */
export async function matchingRulesByEngine(specs: readonly RuleSpec[], facts: Facts): Promise<string[]> {
  const engine = new Engine([], { allowUndefinedFacts: true });
  specs.forEach((spec, index) => {
    engine.addRule({ ...spec, priority: spec.priority ?? 1, event: { type: spec.event.type, params: { ...spec.event.params, index } } } as never);
  });
  const { events } = await engine.run({ ...facts });
  return events
    .map((event) => ({ index: (event.params as { index: number }).index }))
    .sort((a, b) => (specs[b.index].priority ?? 1) - (specs[a.index].priority ?? 1) || a.index - b.index)
    .map(({ index }) => specs[index].name);
}
