// Numbers in reasons a person reads: as few decimals as tell them apart.

/**
 * `a` and `b` with 3 decimals, or more (up to 9) when 3 would print them
 * equal although they differ: "0.0001 vs 0.0003", never "0.000 vs 0.000".
 */
export function formatPair(a: number, b: number): [string, string] {
  let x = a.toFixed(3);
  let y = b.toFixed(3);
  // Each toFixed costs ~0.1 µs (power-of-two formats a pair per pick): the strings compared are the ones returned.
  for (let digits = 4; digits <= 9 && a !== b && x === y; digits++) {
    x = a.toFixed(digits);
    y = b.toFixed(digits);
  }
  return [x, y];
}
