// What every compile stage shares: the documents by kind, the registry, and
// one list of problems, each located at FILE:LINE:COL.
import type { StrategyRegistry } from '../../plugins/registry.ts';
import type { PolicyKind } from '../schemas.ts';
import type { PolicySource } from '../source.ts';
import type { PolicyProblem } from '../../diagnostics/problem.ts';
import { closest, type PathSegment } from '../../diagnostics/schema-problems.ts';

export interface CheckedSource {
  readonly source: PolicySource;
  readonly kind: PolicyKind;
}

// The policy documents as the schemas define them (defaults filled in).
// Untyped: ajv checked them against the JSON Schemas, the source of truth for their shape.
// biome-ignore lint/suspicious/noExplicitAny: the schemas, not TypeScript types, describe a document
export type Doc = any;

export class CompileContext {
  readonly problems: PolicyProblem[] = [];

  constructor(
    private readonly checked: readonly CheckedSource[],
    readonly registry: StrategyRegistry,
    /** The engine profiles an emulate:// replica may name (unchecked when absent). */
    readonly emulatedProfiles?: readonly string[],
  ) {}

  /** Each problem once: a setting in a file's defaults is checked for every pool that inherits it. */
  report(source: PolicySource, path: readonly PathSegment[], message: string, key?: string): void {
    const problem = { file: source.file, ...source.locate(path, key), message };
    if (this.problems.some((p) => p.file === problem.file && p.line === problem.line && p.col === problem.col && p.message === message)) return;
    this.problems.push(problem);
  }

  ofKind(kind: PolicyKind): { source: PolicySource; doc: Doc }[] {
    return this.checked.filter((c) => c.kind === kind).map((c) => ({ source: c.source, doc: c.source.data as Doc }));
  }

  /** A plugin strategy's problems name its file too. */
  strategyLabel(name: string): string {
    const origin = this.registry.originOf?.(name);
    return `strategy "${name}"${origin ? ` (plugin ${origin})` : ''}`;
  }
}

/** "unknown X "name"", with the likeliest meant name when there is one. */
export function unknown(what: string, name: string, known: Iterable<string>): string {
  const hint = closest(name, [...known]);
  return `unknown ${what} "${name}"${hint ? ` (did you mean "${hint}"?)` : ''}`;
}
