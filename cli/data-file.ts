// A data file a command reads (explain's request body and fleet), JSON or
// YAML: a syntax error is one FILE:LINE:COL line, named as the format it is
// in (JSON is parsed as JSON, not as the YAML it happens to also be), and
// exit code 1 like every other bad file.
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { formatProblem } from '../core/diagnostics/problem.ts';
import { parsePolicyText } from '../core/policy/source.ts';

export function readDataFile(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (error) {
    throw new Error(`cannot read ${what} ${path}: ${(error as Error).message.split('\n')[0]}`);
  }
  const name = path === '-' ? '(stdin)' : path;
  if (path.endsWith('.json') || /^\s*[[{]/.test(text)) {
    try {
      return JSON.parse(text);
    } catch (error) {
      const message = (error as Error).message;
      // V8 names the position for some errors only; YAML's parser (a superset of JSON) finds the others.
      const at = Number(/at position (\d+)/.exec(message)?.[1] ?? parseDocument(text, { prettyErrors: false }).errors[0]?.pos[0] ?? text.length);
      const before = text.slice(0, at).split('\n');
      // Without V8's quote of the text around it (the location says where) or its position.
      const said = message
        .split('\n')[0]
        .replace(/( in JSON)? at position \d+.*$/, '')
        .replace(/, (\.\.\.)?".*$/, '');
      throw new Error(`${name}:${before.length}:${before[before.length - 1].length + 1}: JSON: ${said} (${what})`);
    }
  }
  const parsed = parsePolicyText(name, text);
  if (!parsed.source) throw new Error(`${formatProblem(parsed.problems[0])} (${what})`);
  return parsed.source.data;
}
