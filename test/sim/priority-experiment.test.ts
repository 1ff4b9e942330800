// Experiment H (docs/experiments.md) on a small run: the direction of its
// result. At twice the pool's capacity, shedding batch traffic must lower the
// interactive tier's p99 TTFT and its refusals, and what it sheds is batch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { priorityRows } from '../../sim/experiments/priority.ts';
import { experimentNamed } from '../../sim/experiments/registry.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

const options = { seed: 1, scale: 1, log: () => {}, registry: builtinRegistry };

test('experiment priority at 2x capacity: shedding lowers interactive p99 TTFT, sheds batch, refuses less interactive', { timeout: 120_000 }, () => {
  assert.equal(experimentNamed('priority')?.letter, 'H');
  const rows = priorityRows(options, 3000, [2]);
  const on = rows.find((r) => r.shedding === 'probabilistic')!;
  const off = rows.find((r) => r.shedding === 'off')!;
  assert.ok(
    Number(on.interactive_ttft_p99_ms) < 0.8 * Number(off.interactive_ttft_p99_ms),
    `interactive p99 with shedding ${on.interactive_ttft_p99_ms} ms, without ${off.interactive_ttft_p99_ms} ms`,
  );
  assert.ok(
    Number(on.interactive_refused_share) < Number(off.interactive_refused_share),
    `interactive refused ${on.interactive_refused_share} with shedding, ${off.interactive_refused_share} without`,
  );
  assert.ok(Number(on.batch_shed_share) > 0.5, `batch shed at 2x: ${on.batch_shed_share}`);
  assert.equal(off.batch_shed_share, 0, 'nothing is shed with shedding off');
  // Overload is refused either way: shedding only chooses whom, so goodput stays within a tenth.
  assert.ok(Math.abs(Number(on.goodput_rps) - Number(off.goodput_rps)) < 0.1 * Number(off.goodput_rps), `goodput ${on.goodput_rps} vs ${off.goodput_rps}`);
});

test('experiment priority below capacity: shedding costs the interactive tier nothing', { timeout: 120_000 }, () => {
  const rows = priorityRows(options, 3000, [0.8]);
  for (const r of rows) assert.equal(r.interactive_refused_share, 0, `${r.shedding}: interactive refused ${r.interactive_refused_share}`);
  const on = rows.find((r) => r.shedding === 'probabilistic')!;
  assert.ok(Number(on.batch_shed_share) < 0.05, `batch shed at 0.8x: ${on.batch_shed_share}`);
});
