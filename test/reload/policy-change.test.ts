// Which paths the watcher may report as policy changes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isPolicyChange } from '../../core/policy/watch.ts';

test('policy files, plugin sources and the watched folders count; temp and backup files do not', () => {
  const yes = ['/p/pools.yaml', '/p/rules.yml', '/p/tenants.json', '/p', '/plug/least-kv.ts', '/plug/_helpers.mjs', '/plug'];
  const no = [
    '/p/sedLmAWW0',
    '/p/4913',
    '/p/.pools.yaml.swp',
    '/p/pools.yaml~',
    '/p/#pools.yaml#',
    '/p/..data',
    '/p/..2026_11_30',
    '/p/notes.txt',
    '/plug/x.ts~',
    '/plug/.x.ts.swp',
    '/elsewhere/pools.yaml',
    '/p/sub/pools.yaml',
  ];
  for (const path of yes) assert.equal(isPolicyChange(path, '/p', ['/plug']), true, path);
  for (const path of no) assert.equal(isPolicyChange(path, '/p', ['/plug']), false, path);
});
