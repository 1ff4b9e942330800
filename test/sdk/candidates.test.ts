// What the SDK keeps with a frozen candidate list (the router's shared one)
// must answer as if computed afresh; a list that is not frozen is never kept.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { candidatePositions, rendezvousOrder, rendezvousOwner, type Candidate } from '../../sdk/index.ts';
import { candidate } from '../../sdk/testkit/index.ts';

const ids = Array.from({ length: 40 }, (_, i) => `replica-${i}`);

test('candidatePositions indexes a list by id; a frozen list keeps its index, another is indexed afresh', () => {
  const frozen = Object.freeze(ids.map((id) => candidate({ id })));
  const positions = candidatePositions(frozen);
  assert.deepEqual(
    [...positions],
    ids.map((id, i) => [id, i]),
  );
  assert.equal(candidatePositions(frozen), positions, 'kept with the frozen list');

  const open: Candidate[] = ids.slice(0, 3).map((id) => candidate({ id }));
  assert.equal(candidatePositions(open).get('replica-2'), 2);
  open.reverse(); // a list that is not frozen may change: never answered from a cache
  assert.equal(candidatePositions(open).get('replica-2'), 0);
});

test('rendezvous over a frozen list answers as over a copy of it, for any key', () => {
  const frozen = Object.freeze(ids.map((id) => candidate({ id })));
  const idOf = (c: Candidate) => c.id;
  for (let k = 0; k < 500; k++) {
    const key = `conversation-${k}`;
    assert.equal(rendezvousOwner(key, frozen, idOf)?.id, rendezvousOwner(key, [...frozen], idOf)?.id);
  }
  assert.deepEqual(rendezvousOrder('k', frozen, idOf).map(idOf), rendezvousOrder('k', [...frozen], idOf).map(idOf));
  // Another way to name the items over the same list is not answered from the first one's hashes.
  const reversedIds = (c: Candidate) => c.id.split('').reverse().join('');
  assert.deepEqual(rendezvousOrder('k', frozen, reversedIds).map(idOf), rendezvousOrder('k', [...frozen], reversedIds).map(idOf));
});

test("a key's rendezvous owner kept with a frozen list is the owner computed afresh, asked again, past the keep bound, and under another idOf", () => {
  const frozen = Object.freeze(Array.from({ length: 300 }, (_, i) => candidate({ id: `r-${i}` })));
  const idOf = (c: Candidate) => c.id;
  const reversedIds = (c: Candidate) => c.id.split('').reverse().join('');
  // 5,000 keys, each asked three times: more than one list keeps, so its kept owners start afresh on the way.
  for (let round = 0; round < 3; round++) {
    for (let k = 0; k < 5000; k++) {
      const key = `conversation-${(k * 7919) % 5000}`;
      assert.equal(rendezvousOwner(key, frozen, idOf)?.id, rendezvousOwner(key, [...frozen], idOf)?.id, key);
    }
  }
  for (let k = 0; k < 200; k++) {
    const key = `conversation-${k}`;
    assert.equal(rendezvousOwner(key, frozen, reversedIds)?.id, rendezvousOwner(key, [...frozen], reversedIds)?.id, `${key}, reversed ids`);
  }
  // A key longer than those kept is answered all the same.
  const long = 'x'.repeat(1000);
  assert.equal(rendezvousOwner(long, frozen, idOf)?.id, rendezvousOwner(long, [...frozen], idOf)?.id);
  assert.equal(rendezvousOwner('k', Object.freeze([] as Candidate[]), idOf), undefined);
});
