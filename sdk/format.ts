// Numbers in reasons a person reads: as few decimals as tell them apart.

/**
 * `a` and `b` with 3 decimals, or more (up to 9) when 3 would print them
 * equal although they differ: "0.0001 vs 0.0003", never "0.000 vs 0.000".
 */
export function formatPair(a: number, b: number): [string, string] {
  let digits = 3;
  while (digits < 9 && a !== b && a.toFixed(digits) === b.toFixed(digits)) digits++;
  return [a.toFixed(digits), b.toFixed(digits)];
}
