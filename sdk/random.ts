import { hashString } from './hashing.ts';

/** A small, fast, seedable PRNG (sfc32): the same seed gives the same sequence. */
export function seededRandom(seed: number | string): () => number {
  let a = typeof seed === 'number' ? seed >>> 0 : hashString(seed);
  let b = 0x9e3779b9;
  let c = 0x243f6a88;
  let d = 0xb7e15162;
  const next = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 0x1_0000_0000;
  };
  for (let i = 0; i < 12; i++) next();
  return next;
}

/** Two distinct indexes in [0, n) (or one when n is 1). */
export function sampleTwo(n: number, random: () => number): [number, number] {
  const first = Math.floor(random() * n);
  if (n < 2) return [first, first];
  let second = Math.floor(random() * (n - 1));
  if (second >= first) second++;
  return [first, second];
}
