// Models and their versions, and the aliases that name them (kind: models).
import { ENGINE_TOKENIZER } from '../../tokens/defaults.ts';
import { checkTokenizerFolder, tokenizerDir } from '../../tokens/folder.ts';
import { versionKey, type AliasEntry, type CascadeEntry, type ModelEntry, type PoolSpec } from '../compiled.ts';
import type { PolicySource } from '../source.ts';
import { unknown, type CompileContext, type Doc } from './context.ts';
import { checkModelFallbacks } from './model-fallback.ts';

export interface CompiledModels {
  readonly models: Map<string, ModelEntry>;
  /** Where each model is defined, for problems found later. */
  readonly origins: Map<string, { source: PolicySource; index: number }>;
  unknownModel(id: string): string;
}

export function compileModels(ctx: CompileContext): CompiledModels {
  const models = new Map<string, ModelEntry>();
  const origins = new Map<string, { source: PolicySource; index: number }>();
  const checkedFolders = new Map<string, string>();
  for (const { source, doc } of ctx.ofKind('models')) {
    (doc.models ?? []).forEach((m: Doc, i: number) => {
      const path = ['models', i];
      const first = origins.get(m.id);
      if (first)
        return ctx.report(
          source,
          [...path, 'id'],
          `model "${m.id}" is defined twice (first at ${first.source.file}:${first.source.locate(['models', first.index]).line})`,
        );
      if (!m.versions === !m.cold)
        return ctx.report(source, path, `model "${m.id}" needs either versions (deployed) or cold (loaded on demand), not ${m.cold ? 'both' : 'neither'}`);
      const seen = new Set<string>();
      (m.versions ?? []).forEach((v: Doc, j: number) => {
        if (seen.has(v.version)) ctx.report(source, [...path, 'versions', j, 'version'], `version "${v.version}" of "${m.id}" is listed twice`);
        seen.add(v.version);
      });
      const versions = (m.versions ?? []).map((v: Doc) => ({ version: v.version, weight: v.weight, canary: v.canary }));
      const totalWeight = versions.reduce((sum: number, v: { weight: number }) => sum + v.weight, 0);
      if (m.versions && totalWeight <= 0) ctx.report(source, [...path, 'versions'], `the weights of "${m.id}" add up to 0: no version would get traffic`);
      let tokenizer: string | undefined;
      if (m.tokenizer === 'engine') tokenizer = ENGINE_TOKENIZER;
      else if (typeof m.tokenizer === 'string') {
        tokenizer = tokenizerDir(m.tokenizer, source.file);
        const problem = checkedFolders.get(tokenizer) ?? checkTokenizerFolder(tokenizer) ?? '';
        checkedFolders.set(tokenizer, problem);
        if (problem) ctx.report(source, [...path, 'tokenizer'], `model "${m.id}": ${problem}`);
      }
      models.set(m.id, {
        id: m.id,
        tokenizer,
        versions,
        totalWeight,
        cold: m.cold ? { loadHook: m.cold.load_hook, retryAfterS: m.cold.retry_after_s } : undefined,
        fallback: m.fallback,
      });
      origins.set(m.id, { source, index: i });
    });
  }
  checkModelFallbacks(ctx, models, origins);
  return { models, origins, unknownModel: (id) => unknown('model', id, models.keys()) };
}

export function compileAliases(
  ctx: CompileContext,
  { models, unknownModel }: CompiledModels,
  cascades: ReadonlyMap<string, CascadeEntry>,
): Map<string, AliasEntry> {
  const aliases = new Map<string, AliasEntry>();
  const aliasModel = new Map<string, string | undefined>();
  for (const { doc } of ctx.ofKind('models')) for (const a of doc.aliases ?? []) if (!aliasModel.has(a.name)) aliasModel.set(a.name, a.model);
  for (const { source, doc } of ctx.ofKind('models')) {
    (doc.aliases ?? []).forEach((a: Doc, i: number) => {
      const path = ['aliases', i];
      if (aliases.has(a.name)) return ctx.report(source, [...path, 'name'], `alias "${a.name}" is defined twice`);
      if (models.has(a.name)) return ctx.report(source, [...path, 'name'], `alias "${a.name}" hides the model of the same name`);
      if (!a.model === !a.cascade) return ctx.report(source, path, `alias "${a.name}" needs either model or cascade, not ${a.model ? 'both' : 'neither'}`);
      if (a.model) {
        if (aliasModel.has(a.model) && !models.has(a.model)) {
          const target = aliasModel.get(a.model);
          return ctx.report(
            source,
            [...path, 'model'],
            `alias "${a.name}" points at alias "${a.model}": an alias names a model, not another alias${target ? ` (write model: ${target})` : ''}`,
          );
        }
        if (!models.has(a.model)) return ctx.report(source, [...path, 'model'], unknownModel(a.model));
        aliases.set(a.name, { name: a.name, model: a.model });
      } else {
        const cascade = cascades.get(a.cascade);
        if (!cascade) return ctx.report(source, [...path, 'cascade'], unknown('cascade', a.cascade, cascades.keys()));
        aliases.set(a.name, { name: a.name, cascade });
      }
    });
  }
  return aliases;
}

/** Every version that gets traffic needs a pool to go to. */
export function checkVersionsServed(ctx: CompileContext, { models, origins }: CompiledModels, poolsByVersion: ReadonlyMap<string, readonly PoolSpec[]>): void {
  for (const [id, { source, index }] of origins) {
    models.get(id)!.versions.forEach((v, j) => {
      if (v.weight > 0 && !poolsByVersion.has(versionKey(id, v.version))) {
        ctx.report(source, ['models', index, 'versions', j], `version "${v.version}" of "${id}" gets traffic but no pool serves it`);
      }
    });
  }
}
