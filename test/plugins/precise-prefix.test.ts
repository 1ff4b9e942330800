// precise-prefix against a KV index the test states: longest held prefix
// wins, ties go to the less loaded, the release valve skips hot replicas,
// and a replica with stale or missing events is set aside (all of them: the
// next strategy decides).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import precisePrefix from '../../plugins/precise-prefix.ts';
import { candidate, context, kvIndex, request, resolveConfig, type TestKvHolding } from '../../sdk/testkit/index.ts';
import { isPass, type ReplicaPick } from '../../sdk/types.ts';

const system = 'You are a helpful assistant for the billing team. '.repeat(8);
const prompt = system + 'My invoice is wrong, what now? '.repeat(4);

function setup(holdings: Record<string, TestKvHolding>, config: Record<string, unknown> = {}) {
  const ctx = context();
  const instance = precisePrefix.create(resolveConfig(precisePrefix, config).config, { ...ctx, kvIndex: kvIndex(holdings, ctx.now) });
  return { ctx, instance };
}

describe('precise-prefix', () => {
  const req = request({ prompt });
  const hashes = req.prefixHashes;
  const systemBlocks = Math.floor(system.length / 64);

  it('picks the replica holding the longest prefix; a tie goes to the less loaded', () => {
    const now = 1_000_000;
    const { instance } = setup({
      a: { hashes: hashes.slice(0, systemBlocks), lastEventAt: now },
      b: { hashes, lastEventAt: now },
      c: { hashes: hashes.slice(0, systemBlocks), lastEventAt: now },
    });
    const fleet = [candidate({ id: 'a' }), candidate({ id: 'b', kvUsage: 0.5 }), candidate({ id: 'c' })];
    const pick = instance.pick(req, fleet) as ReplicaPick;
    assert.equal(pick.replica, 'b');
    assert.match(pick.reason, new RegExp(`holds ${hashes.length} of ${hashes.length}`));
    // A new conversation with the same system prompt: a and c tie, c is idler.
    const other = request({ prompt: system + 'Where is my refund? '.repeat(6) });
    const busyA = [candidate({ id: 'a', inFlight: 3, running: 3 }), candidate({ id: 'b', kvUsage: 0.5 }), candidate({ id: 'c', inFlight: 1 })];
    assert.equal((instance.pick(other, busyA) as ReplicaPick).replica, 'c');
  });

  it('skips replicas past the KV threshold or the bounded load, and passes when none holds the prompt', () => {
    const now = 1_000_000;
    const { instance } = setup({ a: { hashes, lastEventAt: now }, b: { hashes: hashes.slice(0, 2), lastEventAt: now } }, { bounded_load: 1.5 });
    assert.equal((instance.pick(req, [candidate({ id: 'a', kvUsage: 0.9 }), candidate({ id: 'b' })]) as ReplicaPick).replica, 'b');
    assert.equal((instance.pick(req, [candidate({ id: 'a', inFlight: 6 }), candidate({ id: 'b', inFlight: 0 })]) as ReplicaPick).replica, 'b');
    const cold = instance.pick(request({ prompt: 'Something else entirely. '.repeat(10) }), [candidate({ id: 'a' }), candidate({ id: 'b' })]);
    assert.ok(isPass(cold));
    assert.ok(isPass(instance.pick(request({ prompt: 'short' }), [candidate({ id: 'a' })])));
  });

  it('falls back while a replica’s events are missing or stale, and trusts them again when they come', () => {
    const holdings: Record<string, TestKvHolding> = { a: { hashes, lastEventAt: 1_000_000 }, b: { hashes: [], lastEventAt: 1_000_000 } };
    const { ctx, instance } = setup(holdings, { max_event_age_ms: 1000 });
    const fleet = [candidate({ id: 'a' }), candidate({ id: 'b' })];
    assert.equal((instance.pick(req, fleet) as ReplicaPick).replica, 'a');
    instance.onRouted!(req, 'a');
    // Routed to a, and no event from a since: fine for a while, stale after max_event_age_ms.
    ctx.advance(500);
    assert.equal((instance.pick(req, fleet) as ReplicaPick).replica, 'a');
    ctx.advance(1000);
    // a is set aside; b, trusted, holds nothing: the next strategy decides.
    const stale = instance.pick(req, fleet);
    assert.ok(isPass(stale));
    assert.match(stale.reason, /no replica holds .*set aside: a: no KV event for 1500 ms/);
    // One stale replica does not silence the others: b, trusted, holds the system prompt and is picked.
    holdings.b = { ...holdings.b, hashes: hashes.slice(0, systemBlocks) };
    const others = instance.pick(req, fleet) as ReplicaPick;
    assert.equal(others.replica, 'b');
    assert.match(others.alternatives?.find((a) => a.replica === 'a')?.note ?? '', /set aside/);
    holdings.b = { ...holdings.b, hashes: [] };
    holdings.a.lastEventAt = ctx.now();
    assert.equal((instance.pick(req, fleet) as ReplicaPick).replica, 'a');
    // A replica that publishes nothing at all is set aside; every replica set aside: a pass.
    const withSilent = instance.pick(req, [...fleet, candidate({ id: 'z' })]) as ReplicaPick;
    assert.equal(withSilent.replica, 'a');
    assert.match(withSilent.alternatives?.find((a) => a.replica === 'z')?.note ?? '', /set aside/);
    const silent = instance.pick(req, [candidate({ id: 'z' })]);
    assert.ok(isPass(silent));
    assert.match(silent.reason, /z publishes no KV events/);
    // A router without an index.
    const bare = precisePrefix.create(resolveConfig(precisePrefix).config, context());
    assert.ok(isPass(bare.pick(req, fleet)));
  });
});
