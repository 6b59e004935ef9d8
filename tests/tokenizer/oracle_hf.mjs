// The tokenizer.json oracle: Hugging Face's own `tokenizers` (Rust, npm @anush008/tokenizers, pinned in
// web/package-lock.json) encodes every string of a corpus with one tokenizer.json.
//   node tests/tokenizer/oracle_hf.mjs CORPUS.json TOKENIZER.json OUT.json
// OUT.json is {"oracle": "...", "ids": [[...], ...], "text": ["...", ...]}: per corpus string, in order, its ids
// as encode() gives them (special tokens added, as transformers does) and decode(ids) with special tokens
// skipped. ctest runs it before tokenizer.hf.*, which requires attnviz's Bpe to give the same.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const [corpusPath, tokenizerPath, outPath] = process.argv.slice(2);
if (!corpusPath || !tokenizerPath || !outPath) {
  console.error('usage: node oracle_hf.mjs CORPUS.json TOKENIZER.json OUT.json');
  process.exit(2);
}
const require = createRequire(fileURLToPath(new URL('../../web/package.json', import.meta.url)));
const { Tokenizer } = require('@anush008/tokenizers');
const { version } = require('@anush008/tokenizers/package.json');

const corpus = JSON.parse(readFileSync(corpusPath, 'utf8'));
if (!Array.isArray(corpus) || !corpus.every((s) => typeof s === 'string')) {
  console.error(`${corpusPath}: expected a JSON array of strings`);
  process.exit(1);
}
const tokenizer = await Tokenizer.fromFile(tokenizerPath);
const ids = [];
const text = [];
for (const s of corpus) {
  const e = await tokenizer.encode(s);
  const got = Array.from(e.getIds());
  ids.push(got);
  text.push(await tokenizer.decode(got, true));
}
const oracle = `@anush008/tokenizers ${version}`;
writeFileSync(outPath, JSON.stringify({ oracle, ids, text }) + '\n');
console.log(`${oracle}: ${corpus.length} strings, ${ids.flat().length} tokens -> ${outPath}`);
