// Rules are written in json-rules-engine's format and judged by its operators,
// but evaluated on the hot path as compiled synchronous predicates: a shared
// json-rules-engine Engine is not safe for concurrent run() calls (docs/design.md, "Facts we rely on"),
// costs 16–120 µs a run and is async, while a routing decision must be pure,
// synchronous and cheap. `reference.ts` runs the real engine, and the tests
// check that both agree on thousands of facts.
import { Engine, Rule } from 'json-rules-engine';
import { compileTextTest, isTextOperator, type TextOperator, type TextTest } from './text-match.ts';

export type Facts = Readonly<Record<string, unknown>>;
export type Predicate = (facts: Facts) => boolean;

/** A rule as written in policy (json-rules-engine's shape). */
export interface RuleSpec {
  readonly name: string;
  readonly priority?: number;
  readonly conditions: ConditionSpec;
  readonly event: { readonly type: string; readonly params?: Record<string, unknown> };
}

export type ConditionSpec = Record<string, unknown>;

export interface CompiledRule<Target> {
  readonly name: string;
  readonly priority: number;
  readonly target: Target;
  readonly test: Predicate;
  /** The conditions as written, for people reading the live policy. */
  readonly conditions: ConditionSpec;
}

/** Rules in evaluation order: higher priority first, then file order. */
export interface RuleSet<Target> {
  readonly rules: readonly CompiledRule<Target>[];
}

export interface RuleMatch<Target> {
  readonly rule?: CompiledRule<Target>;
  /** Rules that matched but whose target was not acceptable, and why. */
  readonly skipped: readonly { rule: string; why: string }[];
}

export class RuleCompileError extends Error {
  /** Path below the condition that is wrong. */
  readonly path: readonly (string | number)[];
  constructor(path: readonly (string | number)[], message: string) {
    super(message);
    this.path = path;
  }
}

// Only its operator map is used: read-only after construction, so sharing is safe.
const operatorSource = new Engine([], { allowUndefinedFacts: true });

interface OperatorLike {
  evaluate(factValue: unknown, jsonValue: unknown): boolean;
}

function operator(name: string, path: readonly (string | number)[]): OperatorLike {
  const op = (operatorSource as unknown as { operators: { get(n: string): OperatorLike | null | undefined } }).operators.get(name);
  if (!op) throw new RuleCompileError([...path, 'operator'], `unknown operator "${name}"`);
  return op;
}

/** A text operator (containsAny, matches), plain or under not:. */
export function textCondition(name: string): { operator: TextOperator; negated: boolean } | undefined {
  if (typeof name !== 'string') return undefined;
  const negated = name.startsWith('not:');
  const base = negated ? name.slice(4) : name;
  return isTextOperator(base) ? { operator: base, negated } : undefined;
}

const BOOLEAN_KEYS = ['all', 'any', 'not', 'fact'] as const;

export function compileCondition(condition: ConditionSpec, path: readonly (string | number)[] = []): Predicate {
  const present = BOOLEAN_KEYS.filter((key) => key in condition);
  if (present.length !== 1) {
    throw new RuleCompileError(
      path,
      present.length === 0
        ? 'a condition needs one of all, any, not, or fact + operator + value'
        : `a condition takes one of ${present.join(', ')}, not several`,
    );
  }
  if ('all' in condition) {
    const parts = (condition.all as ConditionSpec[]).map((c, i) => compileCondition(c, [...path, 'all', i]));
    // One condition needs no wrapper around it (the common `all: [one]`).
    if (parts.length === 1) return parts[0];
    return (facts) => {
      for (let i = 0; i < parts.length; i++) if (!parts[i](facts)) return false;
      return true;
    };
  }
  if ('any' in condition) {
    const parts = (condition.any as ConditionSpec[]).map((c, i) => compileCondition(c, [...path, 'any', i]));
    if (parts.length === 1) return parts[0];
    return (facts) => {
      for (let i = 0; i < parts.length; i++) if (parts[i](facts)) return true;
      return false;
    };
  }
  if ('not' in condition) {
    const inner = compileCondition(condition.not as ConditionSpec, [...path, 'not']);
    return (facts) => !inner(facts);
  }
  const fact = condition.fact as string;
  const text = textCondition(condition.operator as string);
  if (text) {
    let test: TextTest;
    try {
      test = compileTextTest(text.operator, condition.value);
    } catch (error) {
      throw new RuleCompileError([...path, 'value'], (error as Error).message);
    }
    return text.negated ? (facts) => !test(facts[fact] as string) : (facts) => test(facts[fact] as string);
  }
  const op = operator(condition.operator as string, path);
  const value = condition.value;
  // json-rules-engine lets a value name another fact: { fact: 'maxTokens' }.
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && 'fact' in value) {
    const other = (value as { fact: string }).fact;
    return (facts) => op.evaluate(facts[fact], facts[other]);
  }
  return comparison(condition.operator as string, fact, value) ?? ((facts) => op.evaluate(facts[fact], value));
}

/**
 * The default operators most rules use, as direct comparisons: what
 * json-rules-engine's own operator answers, without its callback and
 * validator calls on every request. Its numeric operators first check that
 * parseFloat of the fact is not NaN, which for a number is !Number.isNaN(a); a fact
 * that is not a number takes the engine's operator as before.
 */
function comparison(name: string, fact: string, value: unknown): Predicate | undefined {
  switch (name) {
    case 'equal':
      return (facts) => facts[fact] === value;
    case 'notEqual':
      return (facts) => facts[fact] !== value;
  }
  if (typeof value !== 'number') return undefined;
  const op = operator(name, []);
  switch (name) {
    case 'lessThan':
      return (facts) => {
        const a = facts[fact];
        return typeof a === 'number' ? !Number.isNaN(a) && a < value : op.evaluate(a, value);
      };
    case 'lessThanInclusive':
      return (facts) => {
        const a = facts[fact];
        return typeof a === 'number' ? !Number.isNaN(a) && a <= value : op.evaluate(a, value);
      };
    case 'greaterThan':
      return (facts) => {
        const a = facts[fact];
        return typeof a === 'number' ? !Number.isNaN(a) && a > value : op.evaluate(a, value);
      };
    case 'greaterThanInclusive':
      return (facts) => {
        const a = facts[fact];
        return typeof a === 'number' ? !Number.isNaN(a) && a >= value : op.evaluate(a, value);
      };
  }
  return undefined;
}

/**
 * Compiles rules whose event names a target in `event.params[param]`.
 * Also builds each with json-rules-engine's own Rule class, so anything the
 * engine itself would refuse is refused here too.
 */
export function compileRuleSet<Target = string>(
  specs: readonly RuleSpec[],
  param: string,
  toTarget: (value: string) => Target = (value) => value as Target,
): RuleSet<Target> {
  const compiled = specs.map((spec, index) => {
    const target = spec.event.params?.[param];
    if (typeof target !== 'string' || target.length === 0) {
      throw new RuleCompileError([index, 'event'], `rule "${spec.name}": its event names no ${param} (event.params.${param})`);
    }
    let test: Predicate;
    try {
      test = compileCondition(spec.conditions, [index, 'conditions']);
      new Rule(spec as unknown as ConstructorParameters<typeof Rule>[0]);
    } catch (error) {
      if (error instanceof RuleCompileError) throw error;
      throw new RuleCompileError([index], `rule "${spec.name}": ${(error as Error).message}`);
    }
    return { index, rule: { name: spec.name, priority: spec.priority ?? 1, target: toTarget(target), test, conditions: spec.conditions } };
  });
  compiled.sort((a, b) => b.rule.priority - a.rule.priority || a.index - b.index);
  return { rules: compiled.map((c) => c.rule) };
}

const NO_SKIPS: RuleMatch<never>['skipped'] = Object.freeze([]);
const NO_MATCH: RuleMatch<never> = Object.freeze({ skipped: NO_SKIPS });

/**
 * The first rule that matches and whose target `accept` takes (first match
 * wins). `accept` gets `context` as its second argument, so that a caller
 * need not make a closure per request. Most requests match no rule, or one
 * with nothing skipped: then a shared, frozen answer or list, not new ones.
 */
export function firstMatch<Target, Context = undefined>(
  set: RuleSet<Target>,
  facts: Facts,
  accept?: (target: Target, context: Context) => string | null,
  context?: Context,
): RuleMatch<Target> {
  let skipped: { rule: string; why: string }[] | undefined;
  for (const rule of set.rules) {
    if (!rule.test(facts)) continue;
    const refusal = accept?.(rule.target, context as Context) ?? null;
    if (refusal === null) return { rule, skipped: skipped ?? NO_SKIPS };
    (skipped ??= []).push({ rule: rule.name, why: refusal });
  }
  return skipped === undefined ? NO_MATCH : { skipped };
}
