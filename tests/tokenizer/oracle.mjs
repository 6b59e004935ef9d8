// The tokenizer's oracle: npm gpt-3-encoder (pinned in web/package-lock.json) encodes every string of a corpus.
//   node tests/tokenizer/oracle.mjs tests/tokenizer/corpus.json OUT.json
// OUT.json is {"oracle": "gpt-3-encoder 1.1.4", "ids": [[...], ...]}, one id list per corpus string, in order.
// ctest runs it before tokenizer.oracle, which requires attnviz's Bpe to give the same ids.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const [corpusPath, outPath] = process.argv.slice(2);
if (!corpusPath || !outPath) {
  console.error('usage: node oracle.mjs CORPUS.json OUT.json');
  process.exit(2);
}
const web = fileURLToPath(new URL('../../web/package.json', import.meta.url));
const require = createRequire(web);
const { encode, decode } = require('gpt-3-encoder');
const { version } = require('gpt-3-encoder/package.json');

const corpus = JSON.parse(readFileSync(corpusPath, 'utf8'));
if (!Array.isArray(corpus) || !corpus.every((s) => typeof s === 'string')) {
  console.error(`${corpusPath}: expected a JSON array of strings`);
  process.exit(1);
}
const ids = corpus.map((s, i) => {
  const out = encode(s);
  // The oracle must itself round-trip and know every piece, or it is no oracle for this string.
  if (out.some((id) => !Number.isInteger(id)) || decode(out) !== s) {
    console.error(`corpus string ${i + 1}: gpt-3-encoder does not round-trip it`);
    process.exit(1);
  }
  return out;
});
writeFileSync(outPath, JSON.stringify({ oracle: `gpt-3-encoder ${version}`, ids }) + '\n');
console.log(`gpt-3-encoder ${version}: ${corpus.length} strings, ${ids.flat().length} tokens -> ${outPath}`);
