// No export of the SDK or its test kit may share a name with a global type
// (TypeScript's lib with the DOM, and Node's types): a plugin that imports
// one would silently shadow the global in its file (as `Pick` once shadowed
// `Pick<T, K>`, and the test kit's `RequestInit` fetch's).
import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const ROOT = resolve(import.meta.dirname, '..');
const ENTRIES = [join(ROOT, 'sdk', 'index.ts'), join(ROOT, 'sdk', 'testkit', 'index.ts')];

test('no SDK export shadows a global type name', () => {
  const program = ts.createProgram(ENTRIES, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    allowImportingTsExtensions: true,
    noEmit: true,
    skipLibCheck: true,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
    types: ['node'],
    typeRoots: [join(ROOT, 'node_modules', '@types')],
  });
  const checker = program.getTypeChecker();
  const exported = new Set<string>();
  for (const entry of ENTRIES) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(entry)!)!;
    for (const symbol of checker.getExportsOfModule(module)) exported.add(symbol.name);
  }
  // Every global a file without imports sees as a type: what an SDK import would shadow.
  const globals = new Set(
    checker
      .getSymbolsInScope(program.getSourceFile(ENTRIES[0])!.endOfFileToken, ts.SymbolFlags.Type)
      .filter((s) => !s.declarations?.some((d) => ENTRIES.includes(d.getSourceFile().fileName) || d.getSourceFile().fileName.startsWith(join(ROOT, 'sdk'))))
      .map((s) => s.name),
  );
  assert.ok(exported.size > 30 && exported.has('ReplicaPick') && exported.has('TestRequest'), `read ${exported.size} exports`);
  assert.ok(globals.has('Pick') && globals.has('RequestInit') && globals.size > 500, `read ${globals.size} global types`);
  const shadowing = [...exported].filter((name) => globals.has(name)).sort();
  assert.deepEqual(shadowing, [], `SDK exports named like a global type: ${shadowing.join(', ')}`);
});
