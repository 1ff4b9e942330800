// Reads policy files (YAML or JSON, any mix) keeping where every value came
// from, so a problem found later can be reported as FILE:LINE:COL.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { isAlias, isMap, isPair, isScalar, LineCounter, parseDocument, visit, type Document, type Node } from 'yaml';
import { displayPath, type PolicyProblem } from '../diagnostics/problem.ts';
import type { LocatedDocument, PathSegment } from '../diagnostics/schema-problems.ts';
import { oneByteStrings } from './one-byte.ts';

export interface PolicySource extends LocatedDocument {
  readonly text: string;
  readonly data: unknown;
}

const POLICY_EXTENSIONS = /\.(ya?ml|json)$/i;

/** Policy files of a directory, sorted; hidden entries (ConfigMap ..data, editor temp files) skipped. */
export function listPolicyFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => !name.startsWith('.') && POLICY_EXTENSIONS.test(name))
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .sort();
}

/** Parses one file; YAML syntax errors come back as problems. */
export function parsePolicyText(file: string, text: string): { source?: PolicySource; problems: PolicyProblem[] } {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const position = (offset: number) => {
    const { line, col } = lineCounter.linePos(offset);
    return { line, col };
  };
  if (doc.errors.length > 0) {
    // The first syntax error only: the parser's later ones follow from it (one tab can make dozens).
    const [error] = doc.errors;
    const more = doc.errors.length > 1 ? ` (the parser found ${doc.errors.length - 1} more after it; fix this one first)` : '';
    return {
      problems: [
        { file, ...position(error.pos[0]), message: `${basename(file).endsWith('.json') ? 'JSON' : 'YAML'} syntax: ${firstLine(error.message)}${more}` },
      ],
    };
  }
  let data: unknown;
  try {
    data = oneByteStrings(doc.toJS({ maxAliasCount: 100 }));
  } catch (error) {
    // An alias bomb (yaml refuses past maxAliasCount) or any other failure to
    // build the value: a problem like every other, located at the first alias.
    return { problems: [{ file, ...position(firstAliasOffset(doc)), message: `YAML: ${firstLine((error as Error)?.message ?? String(error))}` }] };
  }
  return {
    problems: [],
    source: { file, text, data, locate: (path, key) => position(offsetOf(doc, path, key)) },
  };
}

export function readPolicySource(path: string): { source?: PolicySource; problems: PolicyProblem[] } {
  return parsePolicyText(displayPath(path), readFileSync(path, 'utf8'));
}

function offsetOf(doc: Document, path: readonly PathSegment[], key?: string): number {
  // Walk down as far as the path exists: a missing value is reported at its parent.
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const segment of path) {
    const child = (node as { get?: (k: unknown, keep: boolean) => unknown })?.get?.(segment, true);
    if (child === undefined) break;
    node = child;
    offset = rangeStart(node) ?? offset;
  }
  if (key !== undefined && isMap(node)) {
    const pair = node.items.find((item) => isPair(item) && isScalar(item.key) && item.key.value === key);
    if (pair && isPair(pair)) offset = rangeStart(pair.key) ?? offset;
  }
  return offset;
}

function firstAliasOffset(doc: Document): number {
  let offset = 0;
  visit(doc, {
    Alias(_key, node) {
      if (isAlias(node)) offset = node.range?.[0] ?? 0;
      return visit.BREAK;
    },
  });
  return offset;
}

function rangeStart(node: unknown): number | undefined {
  return (node as Node | null)?.range?.[0];
}

function firstLine(message: string): string {
  return message.split('\n')[0];
}
