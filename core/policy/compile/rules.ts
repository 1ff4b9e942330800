// Cascades and pool rules (kind: rules): json-rules-engine rules, compiled,
// whose events must name a known model or pool.
import { compileRuleSet, RuleCompileError, type RuleSet, type RuleSpec } from '../../rules/compile.ts';
import type { CascadeEntry, CompiledPolicy } from '../compiled.ts';
import type { PolicySource } from '../source.ts';
import { unknown, type CompileContext, type Doc } from './context.ts';
import { conditionTypeProblems } from './rule-types.ts';
import type { CompiledModels } from './models.ts';
import type { PathSegment } from '../../diagnostics/schema-problems.ts';

export interface RuleDocs {
  readonly cascades: Map<string, CascadeEntry>;
  /** The one document holding pool_rules, checked once the pools are known. */
  readonly poolRules?: { source: PolicySource; doc: Doc };
}

export function compileCascades(ctx: CompileContext, { models, unknownModel }: CompiledModels): RuleDocs {
  const cascades = new Map<string, CascadeEntry>();
  let poolRules: RuleDocs['poolRules'];
  for (const { source, doc } of ctx.ofKind('rules')) {
    (doc.cascades ?? []).forEach((c: Doc, i: number) => {
      const path = ['cascades', i];
      if (cascades.has(c.name)) return ctx.report(source, [...path, 'name'], `cascade "${c.name}" is defined twice`);
      if (!models.has(c.default_model)) ctx.report(source, [...path, 'default_model'], unknownModel(c.default_model));
      const rules = compileRules(ctx, source, [...path, 'rules'], c.rules, 'model');
      rules?.rules.forEach((rule) => {
        if (models.has(rule.target)) return;
        const index = c.rules.findIndex((spec: RuleSpec) => spec.name === rule.name);
        ctx.report(source, [...path, 'rules', index, 'event', 'params', 'model'], `rule "${rule.name}": ${unknownModel(rule.target)}`);
      });
      // A cascade with broken rules is still known, so aliases to it report nothing more: the set is refused anyway.
      const compiled = rules ?? { rules: [] };
      cascades.set(c.name, {
        name: c.name,
        defaultModel: c.default_model,
        rules: compiled,
        models: [...new Set([c.default_model, ...compiled.rules.map((r) => r.target)])],
      });
    });
    if (doc.pool_rules) {
      if (poolRules) ctx.report(source, ['pool_rules'], `pool_rules are already defined in ${poolRules.source.file}`);
      else poolRules = { source, doc };
    }
  }
  return { cascades, poolRules };
}

export function compilePoolRules(ctx: CompileContext, docs: RuleDocs, poolNames: ReadonlySet<string>): CompiledPolicy['poolRules'] {
  if (!docs.poolRules) return { defaultPool: 'general', rules: { rules: [] } };
  const { source, doc } = docs.poolRules;
  const rules = compileRules(ctx, source, ['pool_rules', 'rules'], doc.pool_rules.rules, 'pool');
  rules?.rules.forEach((rule) => {
    if (poolNames.has(rule.target)) return;
    const index = doc.pool_rules.rules.findIndex((spec: RuleSpec) => spec.name === rule.name);
    ctx.report(source, ['pool_rules', 'rules', index, 'event', 'params', 'pool'], `rule "${rule.name}": ${unknown('pool', rule.target, poolNames)}`);
  });
  if (!poolNames.has(doc.pool_rules.default_pool)) ctx.report(source, ['pool_rules', 'default_pool'], unknown('pool', doc.pool_rules.default_pool, poolNames));
  return { defaultPool: doc.pool_rules.default_pool, rules: rules ?? { rules: [] } };
}

/** Compiles rules one by one so every broken rule is reported, not just the first. */
function compileRules(ctx: CompileContext, source: PolicySource, path: PathSegment[], specs: RuleSpec[], param: string): RuleSet<string> | undefined {
  const names = new Set<string>();
  let ok = true;
  specs.forEach((spec, i) => {
    if (names.has(spec.name)) {
      ctx.report(source, [...path, i, 'name'], `rule "${spec.name}" is defined twice`);
      ok = false;
    }
    names.add(spec.name);
    const typeProblems = conditionTypeProblems(spec.conditions, [...path, i, 'conditions'], param === 'model');
    for (const problem of typeProblems) ctx.report(source, problem.path, `rule "${spec.name}": ${problem.message}`);
    if (typeProblems.length > 0) {
      ok = false;
      return;
    }
    try {
      compileRuleSet([spec], param);
    } catch (error) {
      if (!(error instanceof RuleCompileError)) throw error;
      const [, ...rest] = error.path;
      ctx.report(source, [...path, i, ...rest], error.message.startsWith('rule "') ? error.message : `rule "${spec.name}": ${error.message}`);
      ok = false;
    }
  });
  return ok ? compileRuleSet(specs, param) : undefined;
}
