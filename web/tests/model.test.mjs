// The whole-model view in headless Chromium: a GPT-2 weights file (the repository's small Hugging Face fixture)
// read through the file chooser and through drag and drop with its progress seen, a corrupt file and a file too
// large for the page refused with the view kept, typing that moves the thumbnails' pixels, the top 10 and the
// causal tools' keys equal to the native CLI's, and the layer and head of a link restored once the file named in
// it is chosen.
//   ATTNVIZ_SITE   the built site (default build/wasm-release/web/site)
//   ATTNVIZ_CLI    a native attnviz-cli (scripts/test passes the release build's) for the top-10 comparison
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { repo, start, openPage, load, clean } from './harness.mjs';

const folder = join(repo, 'tests', 'fixtures', 'gpt', 'hf-folder');
const folderFiles = ['model.safetensors', 'vocab.json', 'merges.txt', 'config.json'].map((f) => join(folder, f));
const TEXT = 'A rose is a rose is a rose';

let env;
before(async () => {
  env = await start();
});
after(async () => {
  await env?.close();
});


const model = (page) => page.evaluate(() => attnviz.status().model);

// Reads the fixture through the file chooser, in 64 kB pieces so that the progress is seen.
async function chooseFixture(page) {
  await page.evaluate(() => attnviz.setReadChunk(65536));
  const generation = (await model(page)).generation;
  await page.setInputFiles('#model-files', folderFiles);
  await page.waitForFunction((g) => {
    const m = attnviz.status().model;
    return m.open && m.generation > g;
  }, generation);
}

// The thumbnails' region of the canvas, once the view has drawn the model's current pass.
async function thumbsClip(page) {
  await page.waitForFunction(() => {
    const s = attnviz.status();
    return s.drawn_generation === s.generation && s.model.thumb_rects.length > 0;
  });
  const rects = (await model(page)).thumb_rects;
  const x0 = Math.min(...rects.map((r) => r.x0)), y0 = Math.min(...rects.map((r) => r.y0));
  const x1 = Math.max(...rects.map((r) => r.x1)), y1 = Math.max(...rects.map((r) => r.y1));
  return { x: Math.floor(x0), y: Math.floor(y0), width: Math.ceil(x1 - x0), height: Math.ceil(y1 - y0) };
}

test('a weights file through the file chooser: read in pieces with progress, every head drawn', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await chooseFixture(page);
  const m = await model(page);
  assert.equal(m.layers, 2);
  assert.equal(m.heads, 4);
  assert.equal(m.source.kind, 'file');
  assert.deepEqual(m.pieces.length, m.ids.length);
  await thumbsClip(page);
  assert.equal((await model(page)).thumb_rects.length, 8, 'one thumbnail per layer and head');
  const loads = await page.evaluate(() => attnviz.loads);
  const size = readFileSync(folderFiles[0]).length;
  assert.ok(loads.length >= Math.floor(size / 65536), `${loads.length} pieces`);
  assert.ok(loads.every((l) => l.visible), 'the progress bar was on screen for every piece');
  assert.equal(loads.at(-1).loaded, size);
  assert.equal(await page.locator('#busy').isHidden(), true, 'the progress panel is gone');
  const state = await page.evaluate(() => attnviz.getState());
  assert.equal(state.model, 'file:model.safetensors', 'the link names the file, not its data');
  clean(log);
  await context.close();
});

test('a weights folder dropped onto the page opens the same model', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  const files = folderFiles.map((f) => ({ name: f.slice(f.lastIndexOf('/') + 1), b64: readFileSync(f).toString('base64') }));
  await page.evaluate((list) => {
    const dt = new DataTransfer();
    for (const { name, b64 } of list) {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      dt.items.add(new File([bytes], name));
    }
    attnviz.setReadChunk(65536);
    window.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, files);
  await page.waitForFunction(() => attnviz.status().model.open);
  const m = await model(page);
  assert.equal(m.layers, 2);
  assert.ok((await page.evaluate(() => attnviz.loads)).length > 1);
  clean(log);
  await context.close();
});

test('a corrupt file and a file too large for the page are refused, and the view stays', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await chooseFixture(page);
  const before = await model(page);
  const dir = mkdtempSync(join(tmpdir(), 'attnviz-model-'));
  // Corrupt: the header promises more data than the file holds.
  const truncated = join(dir, 'truncated.safetensors');
  writeFileSync(truncated, readFileSync(folderFiles[0]).subarray(0, 20000));
  const corrupt = await page.evaluate(async () => {
    const input = document.getElementById('model-files');
    return attnviz.loadModelFiles(Array.from(input.files || []));
  });
  assert.match(corrupt, /give one \.safetensors file/);
  await page.setInputFiles('#model-files', [truncated]);
  await page.waitForFunction(() => /truncated/.test(attnviz.status().message) || /truncated/.test(attnviz.status().model.open_error));
  let after = await model(page);
  assert.equal(after.open, true);
  assert.deepEqual(after.source, before.source, 'the open model stays');
  assert.deepEqual(after.ids, before.ids);
  assert.match(after.open_error, /truncated\.safetensors/);
  // Too large: gpt2-xl's tensors declared in a header, with no data behind it. Refused before reading.
  const header = { 'wte.weight': { dtype: 'F32', shape: [50257, 1600], data_offsets: [0, 0] },
                   'wpe.weight': { dtype: 'F32', shape: [1024, 1600], data_offsets: [0, 0] } };
  for (let i = 0; i < 48; ++i) {
    header[`h.${i}.attn.c_attn.weight`] = { dtype: 'F32', shape: [1600, 4800], data_offsets: [0, 0] };
    header[`h.${i}.attn.c_proj.weight`] = { dtype: 'F32', shape: [1600, 1600], data_offsets: [0, 0] };
    header[`h.${i}.mlp.c_fc.weight`] = { dtype: 'F32', shape: [1600, 6400], data_offsets: [0, 0] };
    header[`h.${i}.mlp.c_proj.weight`] = { dtype: 'F32', shape: [6400, 1600], data_offsets: [0, 0] };
  }
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  const huge = join(dir, 'gpt2-xl.safetensors');
  writeFileSync(huge, Buffer.concat([len, json]));
  const pieces = (await page.evaluate(() => attnviz.loads)).length;
  await page.setInputFiles('#model-files', [huge]);
  await page.waitForFunction(() => /gpt2-xl\.safetensors needs/.test(attnviz.status().message));
  const message = (await page.evaluate(() => attnviz.status())).message;
  assert.match(message, /needs 6\.\d GB as float32 .*the page can hold [\d.]+ [GM]B; use the desktop app/);
  assert.equal((await page.evaluate(() => attnviz.loads)).length, pieces, 'nothing was read');
  after = await model(page);
  assert.deepEqual(after.source, before.source);
  clean(log);
  await context.close();
});

test('Cancel stops the reading, and the view keeps what it had', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await page.evaluate(() => attnviz.setReadChunk(1024));  // many pieces: time to press Cancel
  await page.setInputFiles('#model-files', folderFiles);
  await page.locator('#busy-cancel').waitFor({ state: 'visible' });
  await page.locator('#busy-cancel').click();
  await page.waitForFunction(() => /was cancelled/.test(attnviz.status().message));
  assert.equal((await model(page)).open, false, 'still the chapter-3 layer');
  assert.equal(await page.locator('#busy').isHidden(), true);
  const loads = await page.evaluate(() => attnviz.loads);
  assert.ok(loads.at(-1).loaded < loads.at(-1).total, 'stopped before the end');
  // Nothing of the cancelled file stays in the module's file system.
  assert.equal(await page.evaluate(() => Module.FS.analyzePath('/models/model.safetensors').exists), false);
  clean(log);
  await context.close();
});

test('exports in the model view: one JSON per layer in the CLI\'s format, and the PNG of the grid', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await chooseFixture(page);
  await thumbsClip(page);
  const downloads = [];
  page.on('download', (d) => downloads.push(d));
  assert.equal(await page.evaluate(() => attnviz.exportFiles('json')), '');
  await page.waitForFunction(() => /downloaded attnviz_layer00\.json and 1 more/.test(attnviz.status().message));
  assert.equal(await page.evaluate(() => attnviz.exportFiles('png')), '');
  await page.waitForFunction(() => /downloaded attnviz_view\.png/.test(attnviz.status().message));
  while (downloads.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));  // events still arriving
  const names = downloads.map((d) => d.suggestedFilename()).sort();
  assert.deepEqual(names, ['attnviz_layer00.json', 'attnviz_layer01.json', 'attnviz_view.png']);
  const layer1 = JSON.parse(readFileSync(await downloads.find((d) => d.suggestedFilename() === 'attnviz_layer01.json').path(), 'utf8'));
  assert.equal(layer1.layers.length, 1);
  assert.equal(layer1.layers[0].index, 1);
  assert.equal(layer1.layers[0].heads.length, 4);
  assert.equal(layer1.next.length, 10);
  // CSV needs a layer: refused from the grid, with the reason.
  assert.equal(await page.evaluate(() => attnviz.exportFiles('csv')), '');
  await page.waitForFunction(() => /open a layer/.test(attnviz.status().message));
  clean(log);
  await context.close();
});

test('typing moves the thumbnails\' pixels through the incremental path', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await chooseFixture(page);
  const clip = await thumbsClip(page);
  const before = await page.screenshot({ clip });
  const tokens = (await model(page)).ids.length;
  await page.keyboard.type(' is a rose');
  await page.waitForFunction((n) => attnviz.status().model.ids.length > n, tokens);
  const after = await page.screenshot({ clip: await thumbsClip(page) });
  assert.ok(!before.equals(after), 'the thumbnails changed');
  const m = await model(page);
  assert.ok(m.reused > 0, `the prefix was reused (${m.reused} rows)`);
  clean(log);
  await context.close();
});

test('the top 10 next tokens are the native CLI\'s', async (t) => {
  const cli = process.env.ATTNVIZ_CLI;
  if (!cli || !existsSync(cli)) {
    t.skip('ATTNVIZ_CLI is not set (scripts/test sets it)');
    return;
  }
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await chooseFixture(page);
  const web = await page.evaluate(() => attnviz.getModelResult());
  const native = JSON.parse(execFileSync(cli, ['--model', folder, '--text', TEXT, '--json', '--layers', '0', '--eval'],
                                         { maxBuffer: 1 << 28 }).toString());
  assert.equal(web.next.length, 10);
  assert.deepEqual(web.next.map((n) => n.id), native.next.map((n) => n.id));
  for (let k = 0; k < 10; ++k) {
    assert.ok(Math.abs(web.next[k].probability - native.next[k].probability) < 1e-5);
    assert.ok(Math.abs(web.next[k].logit - native.next[k].logit) < 1e-4);
  }
  assert.equal(web.options.train, false, 'the page opens models in eval mode, as the CLI with --eval');
  assert.deepEqual(web.tokens.map((x) => x.id), native.tokens.map((x) => x.id));
  clean(log);
  await context.close();
});

test('the causal tools\' keys (lens, attribution, ablation, patching) are the native CLI\'s', async (t) => {
  const cli = process.env.ATTNVIZ_CLI;
  if (!cli || !existsSync(cli)) {
    t.skip('ATTNVIZ_CLI is not set (scripts/test sets it)');
    return;
  }
  const CORRUPTED = 'A rose is a nose is a rose';  // the same 14 tokens, one word changed
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await chooseFixture(page);
  const asked = { lens: '', attribute: '', position: '11', versus: '#13', ablate: '1.2', patch: CORRUPTED };
  assert.equal(await page.evaluate((a) => attnviz.setState({ ...attnviz.getState(), ...a }), asked), '');
  // Patching runs a slice a frame once the typing has stopped; its maps are in the result once complete.
  await page.waitForFunction(() => attnviz.getModelResult()?.patching !== undefined, null, { polling: 100 });
  const web = await page.evaluate(() => attnviz.getModelResult());
  // The view's lens strip keeps the top 5 of each point.
  const native = JSON.parse(execFileSync(cli, ['--model', folder, '--text', TEXT, '--json', '--layers', '0', '--lens',
    '--attribute', '--position', '11', '--versus', '#13', '--ablate', '1.2', '--patch', CORRUPTED, '--top-k', '5'],
  { maxBuffer: 1 << 28 }).toString());
  const near = (a, b, tol, what) => {
    if (Array.isArray(b)) {
      assert.equal(a.length, b.length, what);
      b.forEach((x, i) => near(a[i], x, tol, `${what}[${i}]`));
    } else {
      assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} against ${b}`);
    }
  };
  assert.deepEqual(web.ablated, native.ablated);
  assert.equal(web.ablation, 'zero');
  assert.equal(web.lens.length, 3);
  web.lens.forEach((point, k) => {
    assert.equal(point.after, native.lens[k].after);
    point.positions.forEach((p, i) => {
      assert.deepEqual(p.top.map((x) => x.id), native.lens[k].positions[i].top.map((x) => x.id));
      near(p.top.map((x) => x.probability), native.lens[k].positions[i].top.map((x) => x.probability), 1e-5,
        `lens ${k} position ${i}`);
    });
  });
  const a = web.attribution, b = native.attribution;
  assert.equal(a.position, 11);
  assert.equal(a.target.id, b.target.id);
  assert.equal(a.versus.id, 13);
  const tol = 1e-4 * Math.max(1, Math.abs(b.value));
  near(a.value, b.value, tol, 'value');
  near(a.sum, a.value, tol, 'sum');
  for (const key of ['embeddings', 'heads', 'attention_bias', 'mlp', 'final_bias'])
    near(a.components[key], b.components[key], tol, key);
  assert.equal(a.components.heads[1][2], 0, 'a zero-ablated head writes nothing');
  assert.equal(web.patching.metric, 'logit_difference');
  near(web.patching.clean, native.patching.clean, tol, 'clean');
  near(web.patching.corrupted, native.patching.corrupted, tol, 'corrupted');
  near(web.patching.residual, native.patching.residual, 1e-3, 'residual');
  near(web.patching.heads, native.patching.heads, 1e-3, 'heads');
  assert.match(await page.evaluate(() => location.hash), /ablate=1\.2/);
  clean(log);
  await context.close();
});

test('a link keeps the layer and head: opened again, it asks for the file and restores them', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  await chooseFixture(page);
  assert.equal(await page.evaluate(() => attnviz.setState({ ...attnviz.getState(), layer: 1, head: 2 })), '');
  await page.waitForFunction(() => /layer=1/.test(location.hash) && /head=2/.test(location.hash));
  assert.equal((await model(page)).layer, 1);
  const link = await page.evaluate(() => location.href);
  // A fresh page on that link: the file is not there, so the page asks for it and keeps the link.
  const second = await openPage(env);
  await load(second.page, link);
  assert.equal((await model(second.page)).wanted_file, 'model.safetensors');
  assert.equal(await second.page.locator('#ask').isVisible(), true, 'the page asks for the file');
  assert.match(await second.page.evaluate(() => location.hash), /model=file%3Amodel\.safetensors/);
  await chooseFixture(second.page);
  const m = await model(second.page);
  assert.equal(m.layer, 1);
  assert.equal((await second.page.evaluate(() => attnviz.getState())).head, '2');
  assert.equal(await second.page.locator('#ask').isHidden(), true);
  clean(second.log);
  await second.context.close();
  clean(log);
  await context.close();
});
