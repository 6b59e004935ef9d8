// tokenizer.hf.NAME.cli: `attnviz-cli --tokenize --vocab DIR --text S` against the oracle's ids
// (tests/tokenizer/oracle_hf.mjs wrote them), on a sample of the corpus: the strings that write an added token
// ("<"), and every 16th other one (each run loads the file again, and Gemma 3's is 33 MB).
//   node tests/tokenizer/check_cli.mjs CLI CORPUS.json ORACLE.json DIR
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const [cli, corpusPath, oraclePath, dir] = process.argv.slice(2);
const corpus = JSON.parse(readFileSync(corpusPath, 'utf8'));
const oracle = JSON.parse(readFileSync(oraclePath, 'utf8'));
let failures = 0;
let checked = 0;
corpus.forEach((s, i) => {
  // (a NUL byte cannot be an argument)
  if (s.includes('\0') || !(s.includes('<') || i % 16 === 0)) return;
  ++checked;
  // "--text=S" keeps a leading '-' a value; CLI11 takes an empty value only as its own argument
  const text = s.startsWith('-') ? [`--text=${s}`] : ['--text', s];
  const r = spawnSync(cli, ['--tokenize', '--vocab', dir, ...text], { encoding: 'utf8' });
  const want = JSON.stringify(oracle.ids[i]);
  const got = (r.stdout ?? '').trim();
  if (r.status !== 0 || got !== want) {
    ++failures;
    console.error(`string ${i + 1} ${JSON.stringify(s)}: exit ${r.status} ${r.error ?? (r.stderr ?? '').trim()}\n  oracle:  ${want}\n  attnviz-cli: ${got}`);
  }
});
console.log(`tokenizer.hf cli: ${checked} strings, ${failures} differ from ${oracle.oracle}`);
process.exit(failures || checked === 0 ? 1 : 0);
