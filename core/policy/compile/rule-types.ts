// Rules checked against the facts' types before they go live: a value of the
// wrong type (`value: 16k` against the number promptTokens), an unknown enum
// value (`bach` for priority) or an operator that can't apply (greaterThan on
// a string) is a problem at FILE:LINE:COL, not a rule that silently never
// matches. json-rules-engine itself would accept all of these.
import { textCondition } from '../../rules/compile.ts';
import { RULE_FACTS, type FactType } from '../../rules/rule-facts.ts';
import { textOperandProblem } from '../../rules/text-match.ts';
import { closest, type PathSegment } from '../../diagnostics/schema-problems.ts';

export interface TypeProblem {
  readonly path: readonly PathSegment[];
  readonly message: string;
}

const COMPARISONS = ['lessThan', 'lessThanInclusive', 'greaterThan', 'greaterThanInclusive'];
const EQUALITY = ['equal', 'notEqual'];
const MEMBERSHIP = ['in', 'notIn'];
const LIST_OPERATORS = ['contains', 'doesNotContain'];
const ARRAY_DECORATORS = ['someFact', 'everyFact', 'swap'];
const VALUE_DECORATORS = ['someValue', 'everyValue'];

const describe = (type: FactType) =>
  type.kind === 'enum' ? `one of ${type.values.join(', ')}` : type.kind === 'string' && type.nullable ? 'a string or null' : `a ${type.kind}`;

/** Why `value` is not a value of `type`, or null when it is. */
function valueProblem(fact: string, type: FactType, value: unknown): string | null {
  switch (type.kind) {
    case 'number':
      if (typeof value === 'number' && Number.isFinite(value)) return null;
      return `${fact} is a number; ${JSON.stringify(value)} is not one${typeof value === 'string' && /^\d+(\.\d+)?k$/i.test(value) ? ` (write ${Number.parseFloat(value) * 1000}, not ${value})` : ''}`;
    case 'boolean':
      if (typeof value === 'boolean') return null;
      return `${fact} is true or false; ${JSON.stringify(value)} is not${value === 'true' || value === 'false' ? ` (write ${value} without quotes)` : ''}`;
    case 'string':
      if (typeof value === 'string' || (value === null && type.nullable)) return null;
      return `${fact} is ${describe(type)}; ${JSON.stringify(value)} is not`;
    case 'enum': {
      if (typeof value === 'string' && type.values.includes(value)) return null;
      const hint = typeof value === 'string' ? closest(value, [...type.values]) : undefined;
      return `${fact} is ${describe(type)}; ${JSON.stringify(value)} is not${hint ? ` (did you mean "${hint}"?)` : ''}`;
    }
    case 'text':
      return `${fact} is the prompt's text: use containsAny or matches`;
  }
}

/** Problems of one `fact` + `operator` + `value` condition (path: the condition's). */
function leafProblems(condition: Record<string, unknown>, path: readonly PathSegment[], cascade: boolean): TypeProblem[] {
  const fact = condition.fact as string;
  const described = RULE_FACTS[fact];
  if (!described) return []; // the schema names unknown facts
  if (cascade && described.poolRulesOnly) {
    return [{ path: [...path, 'fact'], message: `${fact} is known only once the model is chosen: pool rules may use it, cascades may not` }];
  }
  const type = described.type;
  const operatorName = String(condition.operator);
  const value = condition.value;
  const text = textCondition(operatorName);
  if (type.kind === 'text' || text) {
    if (type.kind !== 'text')
      return [{ path: [...path, 'operator'], message: `${operatorName.replace(/^not:/, '')} applies to the prompt's text (fact: prompt), not to ${fact}` }];
    if (!text)
      return [
        { path: [...path, 'operator'], message: `the prompt's text takes containsAny or matches (or not:containsAny, not:matches), not ${operatorName}` },
      ];
    const problem = textOperandProblem(text.operator, value);
    return problem ? [{ path: [...path, 'value'], message: problem }] : [];
  }

  // json-rules-engine decorators: not: keeps the types; someValue:/everyValue: take a list of values.
  const parts = operatorName.split(':');
  const base = parts[parts.length - 1];
  const decorators = parts.slice(0, -1);
  const arrayDecorator = decorators.find((d) => ARRAY_DECORATORS.includes(d));
  if (arrayDecorator) return [{ path: [...path, 'operator'], message: `${arrayDecorator}: needs a list-valued fact; ${fact} is ${describe(type)}` }];
  const perValue = decorators.some((d) => VALUE_DECORATORS.includes(d));
  if (perValue && !Array.isArray(value)) return [{ path: [...path, 'value'], message: `${operatorName} takes a list of values` }];
  const operands = perValue ? (value as unknown[]) : [value];

  // A value naming another fact: the two facts' types must agree.
  if (!perValue && value !== null && typeof value === 'object' && !Array.isArray(value) && 'fact' in value) {
    const other = RULE_FACTS[(value as { fact: string }).fact];
    if (!other) return [{ path: [...path, 'value', 'fact'], message: `unknown fact "${(value as { fact: string }).fact}"` }];
    if (other.type.kind !== type.kind)
      return [
        {
          path: [...path, 'value'],
          message: `${fact} is ${describe(type)} but ${(value as { fact: string }).fact} is ${describe(other.type)}: they can't be compared`,
        },
      ];
    return COMPARISONS.includes(base) && type.kind !== 'number'
      ? [{ path: [...path, 'operator'], message: `${base} compares numbers; ${fact} is ${describe(type)}` }]
      : [];
  }

  if (LIST_OPERATORS.includes(base)) {
    return [
      {
        path: [...path, 'operator'],
        message: `${base} looks inside a list; ${fact} is ${describe(type)}${type.kind === 'string' || type.kind === 'enum' ? ' (use in: [...] to match one of several values)' : ''}`,
      },
    ];
  }
  if (COMPARISONS.includes(base)) {
    if (type.kind !== 'number') return [{ path: [...path, 'operator'], message: `${base} compares numbers; ${fact} is ${describe(type)}` }];
    return operands.flatMap((v, i) => {
      const problem = valueProblem(fact, type, v);
      return problem ? [{ path: perValue ? [...path, 'value', i] : [...path, 'value'], message: problem }] : [];
    });
  }
  if (MEMBERSHIP.includes(base)) {
    if (perValue) return [{ path: [...path, 'operator'], message: `${operatorName}: ${base} already takes a list` }];
    if (!Array.isArray(value))
      return [{ path: [...path, 'value'], message: `${base} takes a list of values, e.g. [${type.kind === 'enum' ? type.values.join(', ') : '...'}]` }];
    return value.flatMap((v, i) => {
      const problem = valueProblem(fact, type, v);
      return problem ? [{ path: [...path, 'value', i], message: problem }] : [];
    });
  }
  if (EQUALITY.includes(base)) {
    return operands.flatMap((v, i) => {
      const problem = valueProblem(fact, type, v);
      return problem ? [{ path: perValue ? [...path, 'value', i] : [...path, 'value'], message: problem }] : [];
    });
  }
  return []; // unknown operators are the rule compiler's to report
}

/** Every type problem in a condition tree (path: the condition's place in the document). */
export function conditionTypeProblems(condition: unknown, path: readonly PathSegment[], cascade: boolean): TypeProblem[] {
  if (!condition || typeof condition !== 'object') return [];
  const c = condition as Record<string, unknown>;
  if (Array.isArray(c.all)) return c.all.flatMap((inner, i) => conditionTypeProblems(inner, [...path, 'all', i], cascade));
  if (Array.isArray(c.any)) return c.any.flatMap((inner, i) => conditionTypeProblems(inner, [...path, 'any', i], cascade));
  if (c.not) return conditionTypeProblems(c.not, [...path, 'not'], cascade);
  if (typeof c.fact === 'string') return leafProblems(c, path, cascade);
  return [];
}
