// The secret registry: a Redis URL's password is registered as written and
// decoded (never the user name), and what a strategy says is scrubbed of it
// before the cap, so a secret cut at 200 characters shows none of itself.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { cleanReason } from '../../core/decide/reason.ts';
import { addUrlCredentials, clearSecrets, redactSecrets } from '../../core/observe/secrets.ts';

afterEach(clearSecrets);

test('a Redis URL registers its password, as written and percent-decoded, and not its user name', () => {
  addUrlCredentials('redis://switchyard-user:p%40ss-w0rd-long@redis.internal:6379/0');
  assert.equal(redactSecrets('auth p%40ss-w0rd-long and p@ss-w0rd-long'), 'auth [redacted] and [redacted]');
  assert.equal(redactSecrets('switchyard-user connected'), 'switchyard-user connected');
  addUrlCredentials('redis://redis.internal:6379');
  addUrlCredentials('not a url');
  assert.equal(redactSecrets('nothing else'), 'nothing else');
});

test('a strategy reason is scrubbed before it is capped: a secret across the cap leaves no prefix', () => {
  const secret = 'adm-0123456789abcdef0123456789abcdef';
  addUrlCredentials(`rediss://:${secret}@cache:6380`);
  const reason = cleanReason(`${'x'.repeat(190)}${secret}`);
  assert.ok(reason.length <= 200);
  assert.ok(!reason.includes(secret.slice(0, 8)), reason);
  assert.match(reason, /x\[redacted\]$|x\[redac/);
});
