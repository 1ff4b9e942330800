// The heavy steps of large bodies (decoding, parsing, routing a multi-MB
// body: each a few to tens of milliseconds), run one step per turn of the
// event loop across all requests together. A step of its own per body was
// not enough: bodies that finish arriving together had their steps run in
// the same turn (node runs every ready I/O callback, then every immediate,
// before it looks at timers again), and eight 2.9 MB bodies blocked the loop
// over 100 ms. Here one shared queue runs a single step, then yields, so the
// longest block is one step of one body whatever the number of bodies; a
// body's next step goes to the back of the queue (round robin).

const queue: (() => void)[] = [];
let scheduled = false;

/** Runs `step` in a turn of the event loop of its own, after the steps queued before it. */
export function inTurnOfItsOwn(step: () => void): void {
  queue.push(step);
  if (!scheduled) {
    scheduled = true;
    setImmediate(runOne);
  }
}

function runOne(): void {
  const step = queue.shift()!;
  try {
    step();
  } finally {
    if (queue.length > 0) setImmediate(runOne);
    else scheduled = false;
  }
}

/** Steps waiting (for tests and metrics). */
export function heavyStepsWaiting(): number {
  return queue.length;
}
