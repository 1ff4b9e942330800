import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventClock, StalledClockError } from '../../sim/event-clock.ts';

describe('EventClock', () => {
  it('runs events in time order, same-time events in the order they were scheduled', () => {
    const clock = new EventClock();
    const seen: string[] = [];
    clock.schedule(30, () => seen.push(`c@${clock.now()}`));
    clock.schedule(10, () => {
      seen.push(`a@${clock.now()}`);
      clock.schedule(0, () => seen.push(`a2@${clock.now()}`));
    });
    clock.schedule(10, () => seen.push(`b@${clock.now()}`));
    clock.at(20, () => seen.push(`d@${clock.now()}`));
    const ran = clock.run();
    assert.deepEqual(seen, ['a@10', 'b@10', 'a2@10', 'd@20', 'c@30']);
    assert.equal(ran, 5);
    assert.equal(clock.now(), 30);
  });

  it('skips cancelled events and stops at `until`, leaving later ones queued', () => {
    const clock = new EventClock();
    const seen: number[] = [];
    const handle = clock.schedule(5, () => seen.push(5));
    clock.schedule(7, () => seen.push(7));
    clock.schedule(50, () => seen.push(50));
    handle.cancel();
    clock.run(20);
    assert.deepEqual(seen, [7]);
    assert.equal(clock.now(), 20);
    clock.run();
    assert.deepEqual(seen, [7, 50]);
  });

  it('keeps a large heap in order', () => {
    const clock = new EventClock();
    const times: number[] = [];
    let x = 12345;
    for (let i = 0; i < 5000; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const delay = x % 1000;
      clock.schedule(delay, () => times.push(clock.now()));
    }
    clock.run();
    assert.equal(times.length, 5000);
    for (let i = 1; i < times.length; i++) assert.ok(times[i] >= times[i - 1]);
  });

  it('gives up with an error instead of spinning when time stops moving', () => {
    const clock = new EventClock(1000);
    const again = (): void => void clock.schedule(0, again);
    clock.schedule(1, again);
    assert.throws(() => clock.run(), StalledClockError);
  });
});
