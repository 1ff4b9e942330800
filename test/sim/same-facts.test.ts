// `switchyard sim` decides on the same facts as `serve`: both build them with
// one function (core/facts/request-facts.ts), so the bundled cascade's
// hasCode rule fires in the simulator as it does in the router.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { main } from '../../cli/main.ts';
import type { Decision } from '../../core/decide/decide.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { compileInputs } from '../../core/policy/load.ts';
import { simulate } from '../../sim/simulator/simulator.ts';
import { CODE_SNIPPET } from '../../sim/workload/synthetic.ts';
import { workloadFromSpec, type WorkloadSpec } from '../../sim/workload/load.ts';
import { chosen, POLICIES, policyDirTexts } from '../helpers/core.ts';
import { json, startTestRouter, type TestRouter } from '../helpers/router.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

const KEY = 'sk-demo-free';
const policyFiles = policyDirTexts(POLICIES);

/** One chat request for `auto`, as the workload describes it. */
function oneRequest(codeFraction: number): WorkloadSpec {
  return {
    kind: 'workload',
    requests: 1,
    arrivals: { rate: 1 },
    model: 'auto',
    tenants: [{ api_key: KEY }],
    prompt_tokens: { type: 'fixed', value: 64 },
    output_tokens: { type: 'fixed', value: 8 },
    code_fraction: codeFraction,
  } as WorkloadSpec;
}

function simulated(codeFraction: number): Decision {
  const decisions: Decision[] = [];
  simulate({
    policy: compileInputs(policyInputsFromTexts(policyFiles, { registry: builtinRegistry })).policy!,
    workload: workloadFromSpec('one request', oneRequest(codeFraction)),
    seed: 1,
    onDecision: (d) => decisions.push(d),
  });
  assert.equal(decisions.length, 1);
  return decisions[0];
}

describe('the simulator and the router evaluate the same facts', () => {
  let t: TestRouter;
  before(async () => {
    t = await startTestRouter(policyFiles, { apiKey: KEY });
  });
  after(() => t.close());

  it('a request with code meets the hasCode cascade rule in serve and in sim alike', async () => {
    await t.client.chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: CODE_SNIPPET }], max_tokens: 8 });
    const logged = (await json(await fetch(`${t.adminUrl}/admin/decisions?limit=1`))).decisions[0];
    assert.equal(logged.status, 200, logged.reason);
    assert.equal(logged.model, 'qwen2.5-coder-32b-instruct');
    assert.match(logged.trace.model.decidedBy, /rule "code goes to the coder"/);

    const sim = simulated(1);
    assert.equal(chosen(sim).model, logged.model);
    assert.equal(sim.trace.model?.decidedBy, logged.trace.model.decidedBy);
    // The same workload without code takes another rule: the rule fires on the text, not by default.
    const plain = simulated(0);
    assert.notEqual(chosen(plain).model, 'qwen2.5-coder-32b-instruct');
    assert.doesNotMatch(plain.trace.model?.decidedBy ?? '', /code goes to the coder/);
  });

  it('`switchyard sim` sends the code request to the coder model too', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sim-same-facts-'));
    const workload = join(dir, 'code.json');
    writeFileSync(workload, JSON.stringify(oneRequest(1)));
    const log = console.log;
    console.log = () => {};
    let code: number;
    try {
      code = await main(['sim', '--policies', POLICIES, '--workload', workload, '--out', join(dir, 'out')]);
    } finally {
      console.log = log;
    }
    assert.equal(code, 0);
    const [header, row] = readFileSync(join(dir, 'out', 'requests.csv'), 'utf8')
      .trim()
      .split('\n');
    const model = row.split(',')[header.split(',').indexOf('model')];
    assert.equal(model, 'qwen2.5-coder-32b-instruct');
  });
});
