import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { engineBlocks, rawBlockIds } from '../../sim/workload/block-runs.ts';
import { AZURE_CONVERSATION, sampler, ZipfSampler } from '../../sim/workload/distributions.ts';
import { parseWorkload, WorkloadError, type WorkloadSpec } from '../../sim/workload/load.ts';
import { SyntheticSource } from '../../sim/workload/synthetic.ts';
import { TraceSource } from '../../sim/workload/trace.ts';
import type { SimRequestSpec } from '../../sim/workload/types.ts';

function problemsOf(text: string): string[] {
  try {
    parseWorkload('w.yaml', text);
  } catch (error) {
    assert.ok(error instanceof WorkloadError, String(error));
    return error.problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`);
  }
  assert.fail('the workload was accepted');
}

function drain(source: { next(): SimRequestSpec | undefined }, max = 1e6): SimRequestSpec[] {
  const out: SimRequestSpec[] = [];
  for (let r = source.next(); r && out.length < max; r = source.next()) out.push(r);
  return out;
}

describe('workload files', () => {
  it('an invalid workload is an error with the path and FILE:LINE:COL in the file', () => {
    const problems = problemsOf(
      ['kind: workload', 'requests: 10', 'arrivals:', '  rate: 5', '  proces: gamma', 'prompt_tokens:', '  type: lognormal', '  medain: 3'].join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith('w.yaml:5:3: arrivals: unknown field "proces" (did you mean "process"?)')),
      problems.join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith('w.yaml:7:') && p.includes('prompt_tokens: missing required field "median"')),
      problems.join('\n'),
    );
  });

  it('reports wrong types and unknown distributions at their value', () => {
    const problems = problemsOf(['kind: workload', 'requests: many', 'arrivals: { rate: 5 }', 'output_tokens: { type: zipfian, mean: 3 }'].join('\n'));
    assert.ok(
      problems.some((p) => p.startsWith('w.yaml:2:11: requests: must be integer')),
      problems.join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith('w.yaml:4:') && p.includes('output_tokens.type')),
      problems.join('\n'),
    );
  });

  it('checks what the schema cannot: an endless workload, a lognormal over-specified, a ramp without a duration', () => {
    assert.match(problemsOf('kind: workload\narrivals: { rate: 5 }\n')[0], /never ends/);
    const two = problemsOf('kind: workload\nrequests: 5\narrivals: { rate: 5 }\nprompt_tokens: { type: lognormal, median: 100, mean: 120, p99: 500 }\n');
    assert.match(two[0], /^w\.yaml:4:16: prompt_tokens: a lognormal takes the median and exactly one of mean, p99 or sigma/);
    assert.match(
      problemsOf('kind: workload\nrequests: 5\narrivals: { rate: 5, rate_end: 9 }\n')[0],
      /w\.yaml:3:\d+: arrivals\.rate_end: a ramp needs "duration_s"/,
    );
  });

  it('a YAML syntax error is located too', () => {
    assert.match(problemsOf('kind: workload\narrivals: { rate: 5\n')[0], /^w\.yaml:\d+:\d+: YAML syntax/);
  });
});

describe('synthetic traffic', () => {
  const base = (extra: Partial<WorkloadSpec> = {}): WorkloadSpec => ({ kind: 'workload', requests: 20_000, arrivals: { rate: 50 }, ...extra }) as WorkloadSpec;

  it('defaults to the Azure 2023 conversation shape: input mean 1155 / median 1020, output mean 211 / median 129', () => {
    const input = sampler(AZURE_CONVERSATION.prompt, true);
    const output = sampler(AZURE_CONVERSATION.output, true);
    assert.ok(Math.abs(input.mean - 1155) < 1 && Math.abs(output.mean - 211) < 1);
    const requests = drain(new SyntheticSource(base(), 1, []));
    const sorted = (xs: number[]) => xs.sort((a, b) => a - b);
    const prompts = sorted(requests.map((r) => r.promptTokens));
    const outputs = sorted(requests.map((r) => r.outputTokens));
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const q = (xs: number[], p: number) => xs[Math.floor(p * (xs.length - 1))];
    assert.ok(Math.abs(mean(prompts) / 1155 - 1) < 0.03, `input mean ${mean(prompts)}`);
    assert.ok(Math.abs(q(prompts, 0.5) / 1020 - 1) < 0.03, `input median ${q(prompts, 0.5)}`);
    assert.ok(Math.abs(q(prompts, 0.99) / 4142 - 1) < 0.08, `input p99 ${q(prompts, 0.99)}`);
    assert.ok(Math.abs(mean(outputs) / 211 - 1) < 0.03, `output mean ${mean(outputs)}`);
    assert.ok(Math.abs(q(outputs, 0.5) / 129 - 1) < 0.05, `output median ${q(outputs, 0.5)}`);
    assert.ok(Math.abs(q(outputs, 0.99) / 601 - 1) < 0.08, `output p99 ${q(outputs, 0.99)}`);
    // Poisson at 50/s: 20,000 arrivals take ~400 s.
    assert.ok(Math.abs(requests[requests.length - 1].at / 400_000 - 1) < 0.03);
  });

  it('bursty gamma arrivals keep the rate but not the spacing', () => {
    const gaps = (spec: WorkloadSpec) => {
      const at = drain(new SyntheticSource(spec, 3, [])).map((r) => r.at);
      const g = at.slice(1).map((t, i) => t - at[i]);
      const m = g.reduce((a, b) => a + b, 0) / g.length;
      const sd = Math.sqrt(g.reduce((a, b) => a + (b - m) ** 2, 0) / g.length);
      return { mean: m, cv: sd / m };
    };
    const poisson = gaps(base());
    const bursty = gaps(base({ arrivals: { process: 'gamma', rate: 50, cv: 4 } }));
    assert.ok(Math.abs(poisson.mean - 20) < 1 && Math.abs(bursty.mean - 20) < 2);
    assert.ok(Math.abs(poisson.cv - 1) < 0.05, `poisson cv ${poisson.cv}`);
    assert.ok(bursty.cv > 3, `gamma cv ${bursty.cv}`);
  });

  it('shared system prompts: prompts of the same one share their leading blocks, Zipf-popular', () => {
    const requests = drain(new SyntheticSource(base({ requests: 4000, system_prompts: { count: 10, zipf: 1, tokens: 320 } }), 1, []));
    const ids = requests.map((r) => rawBlockIds(r.blocks));
    const heads = new Map<number, number>();
    for (const blocks of ids) heads.set(blocks[0], (heads.get(blocks[0]) ?? 0) + 1);
    assert.equal(heads.size, 10);
    const top = Math.max(...heads.values()) / requests.length;
    assert.ok(Math.abs(top - new ZipfSampler(10, 1).share(0)) < 0.03, `top share ${top}`);
    const a = ids.find((blocks, i) => blocks[0] === ids[0][0] && i !== 0)!;
    assert.deepEqual(a.slice(0, 20), ids[0].slice(0, 20));
    assert.notEqual(a[20], ids[0][20]);
    // The engine sees the same sharing: the same streams for the system prompt, then different ones.
    const engineA = engineBlocks(requests[ids.indexOf(a)].blocks, 'm');
    const engine0 = engineBlocks(requests[0].blocks, 'm');
    assert.equal(engineA.streams[0], engine0.streams[0]);
    assert.equal(engineA.ends[0], 20);
    assert.notEqual(engineA.streams[1], engine0.streams[1]);
  });

  it('a conversation turn extends the previous prompt and answer', () => {
    const source = new SyntheticSource(base({ requests: 100, sessions: { fraction: 1, turns: 3, think_time_s: 2 } }), 1, []);
    const first = source.next()!;
    assert.equal(first.conversationId, 'conv-0');
    const second = source.followUp(first, 5_000)!;
    assert.equal(second.conversationId, 'conv-0');
    assert.equal(second.turn, 2);
    assert.equal(second.at, 7_000);
    assert.ok(second.promptTokens > first.promptTokens + first.outputTokens);
    assert.deepEqual(rawBlockIds(second.blocks).slice(0, rawBlockIds(first.blocks).length), rawBlockIds(first.blocks));
    const third = source.followUp(second, 10_000)!;
    assert.equal(third.turn, 3);
    assert.equal(source.followUp(third, 20_000), undefined, 'three turns, then the conversation ends');
  });

  it('long-context requests and the adapter mix', () => {
    const requests = drain(
      new SyntheticSource(base({ requests: 5000, long_context: { fraction: 0.02, prompt_tokens: 65_536 }, adapters: { count: 4, fraction: 0.5 } }), 1, []),
    );
    const long = requests.filter((r) => r.klass === 'long-context');
    assert.ok(Math.abs(long.length / requests.length - 0.02) < 0.006, `${long.length} long`);
    assert.ok(long.every((r) => r.promptTokens === 65_536 && rawBlockIds(r.blocks).length === 4096));
    const withAdapter = requests.filter((r) => r.model.startsWith('adapter-'));
    assert.ok(Math.abs(withAdapter.length / (requests.length - long.length) - 0.5) < 0.03);
    assert.equal(new Set(withAdapter.map((r) => r.model)).size, 4);
  });
});

describe('trace replay', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sim-trace-'));

  it('replays a CSV at its timestamps, expanding hash ids into shared blocks', () => {
    const path = join(dir, 'trace.csv');
    writeFileSync(path, ['timestamp,input_tokens,output_tokens,hash_ids', '1000,1024,10,7 8', '1500,1100,20,7 8 9', '2500,600,5,'].join('\n'));
    const spec = { kind: 'workload', trace: { file: path, block_tokens: 512 } } as WorkloadSpec;
    const rows = drain(new TraceSource(spec, path, 1, []));
    assert.deepEqual(
      rows.map((r) => r.at),
      [0, 500, 1500],
    );
    assert.deepEqual(
      rows.map((r) => r.promptTokens),
      [1024, 1100, 600],
    );
    assert.equal(rawBlockIds(rows[0].blocks).length, 64);
    assert.deepEqual(rawBlockIds(rows[1].blocks).slice(0, 64), rawBlockIds(rows[0].blocks), 'hash ids 7 8 are the same 1024 tokens');
    assert.notEqual(rawBlockIds(rows[2].blocks)[0], rawBlockIds(rows[0].blocks)[0]);
  });

  it('reads Mooncake JSONL', () => {
    const path = join(dir, 'mooncake.jsonl');
    writeFileSync(
      path,
      '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}\n{"timestamp": 27, "input_length": 512, "output_length": 4, "hash_ids": [1]}\n',
    );
    const rows = drain(new TraceSource({ kind: 'workload', trace: { file: path } } as WorkloadSpec, path, 1, []));
    assert.equal(rows.length, 2);
    assert.deepEqual(rawBlockIds(rows[1].blocks), rawBlockIds(rows[0].blocks).slice(0, 32));
  });

  it('a bad row is an error with its line', () => {
    const path = join(dir, 'bad.csv');
    writeFileSync(path, 'timestamp,input_tokens,output_tokens\n0,10,1\n5,ten,1\n');
    const source = new TraceSource({ kind: 'workload', trace: { file: path } } as WorkloadSpec, path, 1, []);
    source.next();
    assert.throws(
      () => source.next(),
      (e: unknown) =>
        e instanceof WorkloadError && /bad\.csv$/.test(e.problems[0].file) && e.problems[0].line === 3 && /input tokens/.test(e.problems[0].message),
    );
  });
});
