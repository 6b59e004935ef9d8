// Hostile model files dropped onto the page: a header with 100,000 entries, weights whose scores overflow, a file
// cut short inside its data, a config.json with an activation the engine does not compute, a tokenizer with a
// million merges, and a tokenizer.json whose normalizers would grow a text without end. Each must end in a one-line message with the model that was open kept, and the module alive:
// never a hung tab or a dead module. Every file is made here from the repository's small Hugging Face fixture.
//   ATTNVIZ_SITE   the built site (default build/wasm-release/web/site)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repo, start, openPage, load, clean } from './harness.mjs';

const folder = join(repo, 'tests', 'fixtures', 'gpt', 'hf-folder');
const fixture = Object.fromEntries(['model.safetensors', 'vocab.json', 'merges.txt', 'config.json']
  .map((f) => [f, readFileSync(join(folder, f))]));
const TEXT = 'A rose is a rose is a rose';

let env;
before(async () => {
  env = await start();
});
after(async () => {
  await env?.close();
});

const model = (page) => page.evaluate(() => attnviz.status().model);

// Drops `files` ({name: bytes}) onto the page as a user drops a folder's files.
async function drop(page, files) {
  const list = Object.entries(files).map(([name, bytes]) => ({ name, b64: Buffer.from(bytes).toString('base64') }));
  await page.evaluate((l) => {
    const dt = new DataTransfer();
    for (const { name, b64 } of l) {
      const bin = atob(b64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; ++i) bytes[i] = bin.charCodeAt(i);
      dt.items.add(new File([bytes], name));
    }
    window.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, list);
}

// A safetensors file: u64 header length, the header, the data.
function safetensors(header, data = Buffer.alloc(0)) {
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, json, data]);
}

// IEEE half to a JavaScript number.
function half(h) {
  const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

// The fixture (F16) written again in F32, every tensor as `change(name, values)` returns it.
function fixtureF32(change) {
  const bytes = fixture['model.safetensors'];
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString());
  const data = bytes.subarray(8 + n);
  const out = {}, pieces = [];
  let at = 0;
  const names = Object.keys(header).filter((k) => k !== '__metadata__')
    .sort((a, b) => header[a].data_offsets[0] - header[b].data_offsets[0]);
  for (const name of names) {
    const t = header[name];
    const [begin, end] = t.data_offsets;
    let values = [];
    if (t.dtype === 'F16') for (let i = begin; i < end; i += 2) values.push(half(data.readUInt16LE(i)));
    else for (let i = begin; i < end; i += 4) values.push(data.readFloatLE(i));
    values = change(name, values);
    const piece = Buffer.alloc(values.length * 4);
    values.forEach((v, i) => piece.writeFloatLE(v, i * 4));
    out[name] = { dtype: 'F32', shape: t.shape, data_offsets: [at, at + piece.length] };
    at += piece.length;
    pieces.push(piece);
  }
  return safetensors(out, Buffer.concat(pieces));
}

// Opens the fixture, then drops `files`: the page must say `expected` (a RegExp) in one line, keep the model that
// was open, and compute again afterwards.
async function refusedAndKept(files, expected) {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await drop(page, fixture);
  await page.waitForFunction(() => attnviz.status().model.open);
  const before = await model(page);
  const generation = (await page.evaluate(() => attnviz.status())).generation;
  await drop(page, files);
  // The page's own checks answer in the message line; the module's, in the Model panel's error as well.
  const said = () => page.evaluate(() => [attnviz.status().message, attnviz.status().model.open_error]);
  await page.waitForFunction((re) => [attnviz.status().message, attnviz.status().model.open_error]
    .some((m) => new RegExp(re).test(m || '')), expected.source, { timeout: 60000 });
  const message = (await said()).find((m) => expected.test(m || ''));
  assert.equal(message.includes('\n'), false, 'one line');
  const after = await model(page);
  assert.equal(after.open, true, 'the model stays open');
  assert.deepEqual(after.source, before.source, 'the model that was open stays');
  assert.deepEqual(after.ids, before.ids);
  // The module is alive: an edit computes.
  assert.equal(await page.evaluate(() => attnviz.setText('A rose is a rose')), '');
  await page.waitForFunction((g) => attnviz.status().generation > g, generation);
  const shorter = (await model(page)).ids;
  assert.ok(shorter.length > 0 && shorter.length < before.ids.length, `${shorter.length} tokens after the edit`);
  clean(log);
  await context.close();
  return message;
}

test('a header with 100,000 entries is answered at once, not parsed for minutes', async () => {
  const header = {};
  for (let i = 0; i < 100000; ++i) header[`t${i}`] = { dtype: 'F32', shape: [0], data_offsets: [0, 0] };
  const message = await refusedAndKept({ 'many.safetensors': safetensors(header) }, /many\.safetensors/);
  console.log(`# ${message}`);
});

test('weights whose attention scores overflow are refused, not drawn as inf', async () => {
  // q and k of 1e30 per unit of input: their products pass float32's 3.4e38. The file itself is valid, so it
  // opens; its pass is refused in the Model panel's line, and the good model opens again afterwards.
  const weights = fixtureF32((name, v) => (name === 'h.0.attn.c_attn.weight' ? v.map(() => 1e30) : v));
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await drop(page, fixture);
  await page.waitForFunction(() => attnviz.status().model.open && !attnviz.status().model.error);
  const before = await model(page);
  await drop(page, { ...fixture, 'model.safetensors': weights });
  await page.waitForFunction(() => /not finite/.test(attnviz.status().model.error));
  const message = (await model(page)).error;
  assert.equal(message, 'the result is not finite (weights): the inputs are too large for float32 arithmetic');
  // The module is alive: the good model opens again and computes the same tokens.
  await drop(page, fixture);
  await page.waitForFunction(() => attnviz.status().model.open && !attnviz.status().model.error);
  assert.deepEqual((await model(page)).ids, before.ids);
  clean(log);
  await context.close();
  console.log(`# ${message}`);
});

test('a file cut short inside its data is refused', async () => {
  const bytes = fixture['model.safetensors'];
  const message = await refusedAndKept({ 'cut.safetensors': bytes.subarray(0, bytes.length - 1000) },
                                       /cut\.safetensors/);
  console.log(`# ${message}`);
});

test('a config.json with an activation the engine does not compute is refused by name', async () => {
  const config = JSON.parse(fixture['config.json'].toString());
  config.activation_function = 'relu';
  const message = await refusedAndKept({ ...fixture, 'config.json': Buffer.from(JSON.stringify(config)) },
                                       /activation_function/);
  console.log(`# ${message}`);
});

test('a tokenizer with a million merges ends in a message, and the tab stays alive', async () => {
  // GPT-2's byte alphabet, then 1,000,000 merges of its first 100 symbols into pairs and triples.
  const bytes = [];
  for (let b = 33; b <= 126; ++b) bytes.push(b);
  for (let b = 161; b <= 172; ++b) bytes.push(b);
  for (let b = 174; b <= 255; ++b) bytes.push(b);
  const symbols = [...bytes.map((b) => String.fromCodePoint(b))];
  for (let b = 0, n = 0; b < 256; ++b) if (!bytes.includes(b)) symbols.push(String.fromCodePoint(256 + n++));
  const vocab = new Map(symbols.map((s, i) => [s, i]));
  const merges = ['#version: 0.2'];
  const letters = symbols.slice(0, 100);
  const add = (a, b) => {
    if (vocab.has(a + b)) return;
    vocab.set(a + b, vocab.size);
    merges.push(`${a} ${b}`);
  };
  for (const a of letters) for (const b of letters) add(a, b);
  outer: for (const a of letters)
    for (const b of letters)
      for (const c of letters) {
        if (merges.length > 1000000) break outer;
        add(a + b, c);
      }
  const files = { ...fixture, 'vocab.json': Buffer.from(JSON.stringify(Object.fromEntries(vocab))),
                  'merges.txt': Buffer.from(merges.join('\n') + '\n') };
  const message = await refusedAndKept(files, /tokenizer|vocabulary|merges/);
  console.log(`# ${message}`);
});

test('a tokenizer.json whose normalizers would grow a text without end is refused per text, in one line', async () => {
  // 40 Replace steps that each double every "a" (2^40 times the text before the cap): the text with "a"s is
  // refused in the Model panel's line, naming the step; a text without one computes with the same tokenizer.
  const vocab = {};
  for (let i = 0; i < 26; ++i) vocab[String.fromCharCode(97 + i)] = i;
  vocab[' '] = 26;
  const steps = [];
  for (let i = 0; i < 40; ++i) steps.push({ type: 'Replace', pattern: { String: 'a' }, content: 'aa' });
  const tokenizer = { model: { type: 'BPE', vocab, merges: [] },
                      normalizer: { type: 'Sequence', normalizers: steps } };
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent('bad'));
  await drop(page, { 'model.safetensors': fixture['model.safetensors'], 'config.json': fixture['config.json'],
                     'tokenizer.json': Buffer.from(JSON.stringify(tokenizer)) });
  await page.waitForFunction(() => /makes the text longer than/.test(attnviz.status().model.error || ''));
  const message = (await model(page)).error;
  assert.match(message, /tokenizer\.json'?: normalizer\.normalizers\[10\] \(Replace\) makes the text longer than 1072 bytes/);
  assert.equal(message.includes('\n'), false, 'one line');
  // The same tokenizer computes a text without an "a".
  const generation = (await page.evaluate(() => attnviz.status())).generation;
  assert.equal(await page.evaluate(() => attnviz.setText('bcd')), '');
  await page.waitForFunction((g) => attnviz.status().generation > g && !attnviz.status().model.error, generation);
  assert.deepEqual((await model(page)).ids, [1, 2, 3]);
  clean(log);
  await context.close();
  console.log(`# ${message}`);
});
