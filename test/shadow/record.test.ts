// Recording and replay (docs/changing-policy.md): what the router records
// holds no prompt text, rotates within its bounds, and replays to the same
// decisions under the same policy; diff names exactly the requests a
// candidate policy decides differently.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';
import { decisionSide } from '../../core/shadow/compare.ts';
import { parseRecordLine } from '../../core/shadow/record-format.ts';
import { RecordReader } from '../../core/shadow/record-reader.ts';
import { promptBlockKeys, recordedFacts } from '../../core/shadow/recorded-facts.ts';
import { TrafficRecorder } from '../../core/shadow/recorder.ts';
import { ReplayDecider } from '../../core/shadow/replay.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { chainBlockHashes, prefixHashes, prefixSeed } from '../../sdk/index.ts';
import { policyFrom } from '../helpers/core.ts';
import { startTestRouter } from '../helpers/router.ts';
import { livePolicyFiles, longPromptPolicyFiles, promptOf, writePolicyDir } from './policies.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SECRET = 'ultramarine-walrus';

/** Records `count` requests (every third one long, one with a secret phrase in every message) through the real router. */
async function recordTraffic(count: number): Promise<{ file: string; long: Set<string> }> {
  const file = join(mkdtempSync(join(tmpdir(), 'switchyard-record-')), 'traffic.jsonl');
  const recorder = await TrafficRecorder.open({ file });
  const r = await startTestRouter({}, { policy: fixedPolicy(policyFrom(livePolicyFiles())), recorder });
  const long = new Set<string>();
  try {
    for (let i = 0; i < count; i++) {
      const id = `rec-${i}`;
      const isLong = i % 3 === 1;
      if (isLong) long.add(id);
      const content = `${SECRET} ${isLong ? promptOf(300) : 'short question'}`;
      const response = await fetch(`${r.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': id, 'x-conversation-id': `conv-${i % 5}` },
        body: JSON.stringify({
          model: 'tiny',
          messages: [
            { role: 'system', content: `${SECRET} system` },
            { role: 'user', content },
          ],
          max_tokens: 4,
        }),
      });
      await response.arrayBuffer();
      assert.equal(response.status, 200);
    }
    // A rejected request is recorded too.
    const missing = await fetch(`${r.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'rec-missing' },
      body: JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: SECRET }] }),
    });
    await missing.arrayBuffer();
    assert.equal(missing.status, 404);
  } finally {
    await r.close();
    await recorder.close();
  }
  return { file, long };
}

test('the recording holds facts, block keys and outcomes, and no prompt text', async () => {
  const { file } = await recordTraffic(6);
  const text = readFileSync(file, 'utf8');
  assert.ok(!text.includes(SECRET), 'no prompt text in the recording');
  assert.ok(!/promptText|promptTokenIds|"messages"/.test(text));
  const lines = text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  assert.equal(lines.length, 7);
  const [first] = lines;
  assert.equal(first.facts.requestId, 'rec-0');
  assert.equal(first.facts.requestedModel, 'tiny');
  assert.equal(first.facts.conversationId, 'conv-0');
  assert.equal(first.facts.maxTokens, 4);
  assert.equal(typeof first.facts.promptTokens, 'number');
  assert.equal(first.live.pool, 'general');
  assert.equal(first.end.outcome, 'ok');
  assert.equal(first.end.status, 200);
  assert.ok(lines[1].blocks.length > 10, 'a long prompt has its block keys');
  const rejected = lines.find((l) => l.facts.requestId === 'rec-missing');
  assert.equal(rejected.end.outcome, 'rejected');
  assert.equal(rejected.live.code, 'model_not_found');
  assert.ok(Math.abs(first.at - Date.now()) < 60_000);
});

test('block keys chain to exactly the prefix hashes the router computes from the text', () => {
  const settings = policyFrom(livePolicyFiles()).settings;
  const facts = requestFacts({
    requestId: 'x',
    endpoint: 'chat',
    headers: {},
    body: { model: 'tiny', messages: [{ role: 'user', content: `${promptOf(1500)} ünïcødé 🚀 tail` }] },
  }) as RequestFacts;
  const keys = promptBlockKeys(facts.promptText, settings);
  assert.ok(keys.length > 50);
  for (const seed of [prefixSeed('tiny'), prefixSeed('tiny', 'adapter-a')]) {
    assert.deepEqual(chainBlockHashes(keys, seed), prefixHashes(facts.promptText, seed, settings.prefixBlockChars, settings.prefixMaxBlocks));
  }
  // Whatever new facts appear, text and token ids never reach the recording.
  const recorded = recordedFacts({ ...facts, promptTokenIds: new Uint32Array([1, 2, 3]), someNewFact: 7, longText: 'x'.repeat(1000) } as RequestFacts);
  assert.equal(recorded.someNewFact, 7);
  assert.ok(!('promptText' in recorded) && !('promptTokenIds' in recorded) && !('longText' in recorded));
});

test('a recorded file replays to the same decisions under the same policy', async () => {
  const { file } = await recordTraffic(12);
  const decider = new ReplayDecider(policyFrom(livePolicyFiles()));
  const reader = new RecordReader(file);
  let n = 0;
  for (let record = reader.next(); record; record = reader.next()) {
    n++;
    assert.deepEqual(JSON.parse(JSON.stringify(decisionSide(decider.decide(record)))), record.live, `request ${record.facts.requestId}`);
  }
  assert.equal(n, 13);
});

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['bin/switchyard.mjs', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

test('switchyard diff names exactly the requests the candidate sends elsewhere; the same policy twice differs nowhere', async () => {
  const { file, long } = await recordTraffic(12);
  const live = writePolicyDir(livePolicyFiles(), 'live');
  const candidate = writePolicyDir(longPromptPolicyFiles(), 'candidate');
  const diff = await run(['diff', '--replay', file, '--policies', live, '--policies', candidate, '--json']);
  assert.equal(diff.code, 0, diff.stderr);
  const result = JSON.parse(diff.stdout);
  assert.equal(result.requests, 13);
  assert.equal(result.differing, long.size);
  assert.deepEqual(result.byStep, { model: 0, pool: long.size, replica: 0, admission: 0 });
  assert.deepEqual(new Set(result.examples.map((e: { requestId: string }) => e.requestId)), long);
  assert.equal(result.a.matchesRecorded, 13);
  assert.equal(result.b.pools.long, long.size);

  const same = await run(['diff', '--replay', file, '--policies', live, '--policies', live]);
  assert.equal(same.code, 0, same.stderr);
  assert.match(same.stdout, /B decides differently from A on 0 of 13 requests/);

  const bad = await run(['diff', '--replay', file, '--policies', live]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--policies must be given twice/);
});

test('a malformed recording is one located error, not a crash', () => {
  assert.throws(() => parseRecordLine('{"v":1,"at":1,"facts":{"requestId":"a"}}'), /facts\.endpoint" is missing|is missing/);
  assert.throws(() => parseRecordLine('{"v":1,"at":1,"blocks":[-1],"facts":{}}'), /blocks/);
  assert.throws(() => parseRecordLine('[1]'), /JSON object/);
});

test('the recording rotates: never more than (keep + 1) files of at most maxBytes', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'switchyard-rotate-')), 'traffic.jsonl');
  const recorder = await TrafficRecorder.open({ file, maxBytes: 2000, keep: 2, flushMs: 1 });
  for (let i = 0; i < 60; i++) {
    recorder.write(JSON.stringify({ i, pad: 'x'.repeat(150) }));
    if (i % 7 === 0) await recorder.flush();
  }
  await recorder.close();
  for (const f of [file, `${file}.1`, `${file}.2`]) {
    assert.ok(existsSync(f), f);
    assert.ok(statSync(f).size <= 2000, `${f}: ${statSync(f).size} bytes`);
  }
  assert.ok(!existsSync(`${file}.3`));
  assert.ok(recorder.status().rotations >= 3);
  assert.equal(recorder.status().dropped, 0);
});

test('switchyard sim --replay runs the recording through a candidate policy and prints the recorded outcome beside it', async () => {
  const { file, long } = await recordTraffic(12);
  const candidate = writePolicyDir(longPromptPolicyFiles(), 'sim-candidate');
  const sim = await run(['sim', '--policies', candidate, '--replay', file]);
  assert.equal(sim.code, 0, sim.stderr);
  const [simulated, recorded] = sim.stdout.split('recorded (what the router did');
  assert.ok(recorded, sim.stdout);
  assert.match(simulated, /13 requests over/);
  // The candidate sends the long prompts to the long pool; the recording has everything in general.
  assert.match(simulated, new RegExp(`pool long\\s+${long.size}\\s+${long.size}\\s+0 `));
  assert.match(simulated, /rejections by reason:[\s\S]*model_not_found 1/);
  assert.match(recorded, /overall all\s+13\s+12\s+1 /);
  assert.match(recorded, /pool general\s+12\s+12\s+0 /);
  const json = await run(['sim', '--policies', candidate, '--replay', file, '--json']);
  assert.equal(JSON.parse(json.stdout).overall.requests, 13);
  const both = await run(['sim', '--replay', file, '--workload', 'x.yaml']);
  assert.equal(both.code, 2);
});

test('serve refuses an invalid --shadow directory at start (exit 1, every problem) and a bad --shadow-sample (exit 2)', async () => {
  const broken = writePolicyDir({ ...longPromptPolicyFiles(), 'rules.yaml': 'kind: rules\npool_rules: { default_pool: nowhere, rules: [] }\n' }, 'serve-bad');
  const bad = await run(['serve', '--port', '0', '--admin-port', '0', '--policies', writePolicyDir(livePolicyFiles(), 'serve-live'), '--shadow', broken]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /rules\.yaml:\d+:\d+: .*nowhere/);
  assert.match(bad.stderr, /the shadow policies in .* are invalid; nothing was started/);
  const sample = await run(['serve', '--port', '0', '--admin-port', '0', '--shadow-sample', '1.5']);
  assert.equal(sample.code, 2);
  assert.match(sample.stderr, /--shadow-sample must be a number from 0 to 1/);
});
