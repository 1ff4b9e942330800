import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { main } from '../../cli/main.ts';

const EXAMPLES = new URL('../../examples/workloads/', import.meta.url).pathname;
const POLICIES = new URL('../../policies/', import.meta.url).pathname;

/** Runs `switchyard ARGS` in this process, capturing what it prints. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(' '));
  console.error = (...a: unknown[]) => void err.push(a.join(' '));
  try {
    const code = await main(args);
    return { code, out: out.join('\n'), err: err.join('\n') };
  } finally {
    console.log = log;
    console.error = error;
  }
}

describe('switchyard sim', () => {
  it('simulates the bundled policy and prints the summary table; --out writes the per-request CSV', async () => {
    const out = mkdtempSync(join(tmpdir(), 'sim-cli-'));
    const r = await cli(['sim', '--policies', POLICIES, '--workload', join(EXAMPLES, 'chat.yaml'), '--requests', '400', '--seed', '3', '--out', out]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /400 requests over [\d.]+ s of virtual time, seed 3/);
    assert.match(r.out, /TTFT p50 +p90 +p99 +E2E p50/);
    assert.match(r.out, /^overall all +400 +400 +0 /m);
    assert.match(r.out, /^tenant acme-premium /m);
    const csv = readFileSync(join(out, 'requests.csv'), 'utf8').trim().split('\n');
    assert.equal(csv.length, 401);
    assert.equal(
      csv[0],
      'id,arrival_ms,tenant,class,conversation,turn,model,adapter,pool,replica,status,reason,prompt_tokens,cached_tokens,output_tokens,ttft_ms,e2e_ms,preempted',
    );
    assert.ok(existsSync(join(out, 'timeline.csv')) && existsSync(join(out, 'summary.json')));
    assert.equal(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).overall.completed, 400);
  });

  it('replays a trace', async () => {
    const r = await cli(['sim', '--policies', POLICIES, '--workload', join(EXAMPLES, 'trace-replay.yaml'), '--requests', '300']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^overall all +300 +300 /m);
  });

  it('an invalid workload: FILE:LINE:COL problems and exit 1, no stack trace', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sim-cli-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'kind: workload\nrequests: 10\narrivals:\n  rate: -5\n');
    const r = await cli(['sim', '--policies', POLICIES, '--workload', file]);
    assert.equal(r.code, 1);
    assert.match(r.err, /bad\.yaml:4:9: arrivals\.rate: must be > 0/);
    assert.match(r.err, /sim: the workload .* cannot be used/);
    assert.doesNotMatch(r.err, /\n\s+at /);
  });

  it('a policy with no replicas: a clear error and exit 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sim-cli-'));
    mkdirSync(join(dir, 'policies'));
    for (const f of ['models.yaml', 'rules.yaml', 'settings.yaml', 'tenants.yaml'])
      writeFileSync(join(dir, 'policies', f), readFileSync(join(POLICIES, f), 'utf8'));
    const pools = readFileSync(join(POLICIES, 'pools.yaml'), 'utf8')
      .replace(/^ {6}- \{ id: .*\n/gm, '')
      .replace(/replicas:\n/g, 'replicas: []\n');
    writeFileSync(join(dir, 'policies', 'pools.yaml'), pools);
    const r = await cli(['sim', '--policies', join(dir, 'policies'), '--workload', join(EXAMPLES, 'chat.yaml'), '--requests', '10']);
    assert.equal(r.code, 1, r.out);
    // validate refuses a pool without replicas, so sim never gets to simulate nothing.
    assert.match(
      r.err,
      /pools\.yaml:\d+:\d+: pool "general" of llama-3-8b-instruct@v1\.0\.0 has no replicas: every request routed to it would get a 503; add a replica, or remove the pool/,
    );
    assert.match(r.err, /^sim: the policies in .* cannot be used$/m);
  });

  it('usage mistakes exit 2', async () => {
    assert.equal((await cli(['sim', '--policies', POLICIES])).code, 2);
    assert.equal((await cli(['sim', '--workload', 'x.yaml', '--requests', 'lots'])).code, 2);
    assert.equal((await cli(['experiment', 'nope'])).code, 2);
  });
});

describe('switchyard experiment', () => {
  it('writes CSV, an SVG plot and a markdown summary with the numbers', async () => {
    const out = mkdtempSync(join(tmpdir(), 'sim-exp-'));
    const r = await cli(['experiment', 'lora', '--out', out, '--scale', '0.05']);
    assert.equal(r.code, 0, r.err);
    const csv = readFileSync(join(out, 'lora.csv'), 'utf8').trim().split('\n');
    assert.match(csv[0], /^rate,policy,distinct_adapters_per_batch,/);
    assert.equal(csv.length, 1 + 2 * 6, 'two loads × (three policies + three baselines)');
    const svg = readFileSync(join(out, 'lora.svg'), 'utf8');
    assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.match(svg, /mean distinct adapters per batch/);
    const md = readFileSync(join(out, 'lora.md'), 'utf8');
    assert.match(md, /^# F\. LoRA adapter affinity/);
    assert.match(md, /!\[lora\]\(lora\.svg\)/);
    assert.match(md, /\*\*At 120 req\/s:\*\* [\d.]+ distinct adapters per batch without affinity/);
  });
});
