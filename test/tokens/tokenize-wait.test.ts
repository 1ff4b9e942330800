// How long a request waits for its token count: unset, a model whose replicas
// publish KV events waits longer than one whose replicas don't, because a
// prompt left estimated has no token ids and matches nothing in the KV index;
// a `tokenize_wait_ms` in settings is one value for every model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_KV_TOKENIZE_WAIT_MS, DEFAULT_TOKENIZE_WAIT_MS } from '../../core/tokens/defaults.ts';
import { tokenizeWaitFor } from '../../core/tokens/request-path.ts';
import { POLICIES, policyDirTexts, policyFrom } from '../helpers/core.ts';

const bundled = policyDirTexts(POLICIES);
const unset = (settings: string) => settings.replace(/^tokenize_wait_ms:.*$/m, '');
/** The bundled policy with the 8B general pool's first replica publishing KV events. */
const publishing = (files: Record<string, string>) => ({
  ...files,
  'policies/pools.yaml': files['policies/pools.yaml'].replace(
    '{ id: l8-general-1, url: "emulate://llama-3.1-8b-h100" }',
    '{ id: l8-general-1, url: "emulate://llama-3.1-8b-h100", kv_events: "tcp://127.0.0.1:5557" }',
  ),
});

test('unset, models whose replicas publish KV events wait longer; aliases and adapters follow their model', () => {
  const files = publishing({ ...bundled, 'policies/settings.yaml': unset(bundled['policies/settings.yaml']) });
  assert.notEqual(files['policies/pools.yaml'], bundled['policies/pools.yaml'], 'the fixture found the replica to change');
  const snapshot = policyFrom(files);
  assert.equal(snapshot.settings.tokenizeWaitMs, DEFAULT_TOKENIZE_WAIT_MS);
  assert.equal(tokenizeWaitFor(snapshot, 'llama-3-8b-instruct'), DEFAULT_KV_TOKENIZE_WAIT_MS);
  assert.equal(tokenizeWaitFor(snapshot, 'chat-small'), DEFAULT_KV_TOKENIZE_WAIT_MS, 'an alias of the 8B model');
  assert.equal(tokenizeWaitFor(snapshot, 'llama-3-70b-instruct'), DEFAULT_TOKENIZE_WAIT_MS, 'no replica of the 70B model publishes');
  assert.ok(DEFAULT_KV_TOKENIZE_WAIT_MS > DEFAULT_TOKENIZE_WAIT_MS);
});

test('without KV events every model waits the short default', () => {
  const snapshot = policyFrom({ ...bundled, 'policies/settings.yaml': unset(bundled['policies/settings.yaml']) });
  for (const model of ['llama-3-8b-instruct', 'chat-small', 'llama-3-70b-instruct'])
    assert.equal(tokenizeWaitFor(snapshot, model), DEFAULT_TOKENIZE_WAIT_MS, model);
});

test('tokenize_wait_ms set in settings is the wait for every model, KV events or not', () => {
  const settings = `${unset(bundled['policies/settings.yaml'])}\ntokenize_wait_ms: 45\n`;
  const snapshot = policyFrom(publishing({ ...bundled, 'policies/settings.yaml': settings }));
  for (const model of ['llama-3-8b-instruct', 'chat-small', 'llama-3-70b-instruct']) assert.equal(tokenizeWaitFor(snapshot, model), 45, model);
});
