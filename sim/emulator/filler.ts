// Generated text: one filler word per token, the same words for the same
// request every time, so tests and recorded runs can compare outputs.

const WORDS = [
  'the',
  'router',
  'sends',
  'each',
  'request',
  'to',
  'a',
  'replica',
  'that',
  'holds',
  'its',
  'prefix',
  'while',
  'load',
  'stays',
  'balanced',
  'across',
  'the',
  'fleet',
  'and',
  'tokens',
  'flow',
  'back',
  'one',
  'step',
  'at',
  'a',
  'time',
  'from',
  'warm',
  'caches',
  'quietly',
];

/** Token `index` of an output: a word with its leading space. */
export function fillerToken(index: number): string {
  return ' ' + WORDS[index % WORDS.length];
}

export function fillerText(tokens: number): string {
  let text = '';
  for (let i = 0; i < tokens; i++) text += fillerToken(i);
  return text;
}
