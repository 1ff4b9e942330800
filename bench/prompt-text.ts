// Deterministic prompt text for the benches (bench:proxy, bench:facts): the
// same seed gives the same words, so two runs and two trees read the same prompts.

/** `chars` characters of words drawn from `words` by a xorshift seeded with `seed`, joined by `separator`. */
export function textOf(words: readonly string[], separator: string, chars: number, seed: number): string {
  let x = seed * 2654435761 || 1;
  const out: string[] = [];
  let length = 0;
  while (length < chars) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const word = words[(x >>> 0) % words.length];
    out.push(word);
    length += word.length + separator.length;
  }
  return out.join(separator).slice(0, chars);
}
