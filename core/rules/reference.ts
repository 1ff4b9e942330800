// Runs rules through json-rules-engine itself: the reference the compiled
// predicates are tested against. A fresh Engine per evaluation, because a
// shared Engine is not safe for concurrent run() calls (docs/design.md, "Facts we rely on").
import { Engine } from 'json-rules-engine';
import type { Facts, RuleSpec } from './compile.ts';
import { compileTextTest, TEXT_OPERATORS, type TextTest } from './text-match.ts';

// Our text operators, as json-rules-engine operators (compiled once per operand).
const textTests = new Map<string, TextTest>();
function textOperatorTest(operator: (typeof TEXT_OPERATORS)[number], value: unknown): TextTest {
  const key = `${operator}\0${JSON.stringify(value)}`;
  let test = textTests.get(key);
  if (!test) textTests.set(key, (test = compileTextTest(operator, value)));
  return test;
}

/** Names of the matching rules, in evaluation order (priority, then file order). */
export async function matchingRulesByEngine(specs: readonly RuleSpec[], facts: Facts): Promise<string[]> {
  const engine = new Engine([], { allowUndefinedFacts: true });
  for (const operator of TEXT_OPERATORS) engine.addOperator(operator, (fact: unknown, value: unknown) => textOperatorTest(operator, value)(fact as string));
  specs.forEach((spec, index) => {
    engine.addRule({ ...spec, priority: spec.priority ?? 1, event: { type: spec.event.type, params: { ...spec.event.params, index } } } as never);
  });
  const { events } = await engine.run({ ...facts });
  return events
    .map((event) => ({ index: (event.params as { index: number }).index }))
    .sort((a, b) => (specs[b.index].priority ?? 1) - (specs[a.index].priority ?? 1) || a.index - b.index)
    .map(({ index }) => specs[index].name);
}
