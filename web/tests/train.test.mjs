// The Train panel in headless Chromium, driven as a user drives it: real mouse clicks and drags on the canvas
// at the rectangles the panel reports for its controls (status().train.controls, from the last frame). The
// induction recipe trains between frames with its losses equal to the native attnviz-cli's; Pause stops it;
// dragging the step slider shows an earlier snapshot; the export buttons download their files; Open in model
// view shows the trained model. A text file dropped onto the page becomes the book recipe's text, and every
// refusal keeps the last good one; one chosen with the panel's "Choose a text file..." is the same thing (the
// same refusals, the same first loss). The book recipe's Start on a fresh page waits for GPT-2's vocabulary
// (fetched only then), and a failed fetch is one line. The API (attnviz.train) is checked on its own at the end.
//   ATTNVIZ_SITE   the built site (default build/wasm-release/web/site)
//   ATTNVIZ_CLI    a native attnviz-cli (scripts/test passes the release build's) for the losses
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { start, openPage, load, clean, repo, mouse } from './harness.mjs';
import { act, click, control, train } from './train_ui.mjs';

let env;
before(async () => {
  env = await start();
});
after(async () => {
  await env?.close();
});

// Clicks an export button and returns its downloads once there are `count`.
async function downloadsOf(page, name, count) {
  const downloads = [];
  page.on('download', (d) => downloads.push(d));
  await click(page, name);
  while (downloads.length < count) await new Promise((resolve) => setTimeout(resolve, 10));
  page.removeAllListeners('download');
  return downloads;
}

test('the Train panel by mouse: start, pause, the slider, exports and Open in model view', async (t) => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  await click(page, 'header');  // opens the panel
  await click(page, 'start');   // the induction recipe, reset and running
  await page.waitForFunction(() => attnviz.status().train.running && attnviz.status().train.steps >= 55, null,
                             { timeout: 120000 });
  await click(page, 'start');   // now Pause
  await page.waitForFunction(() => !attnviz.status().train.running);
  let s = await train(page);
  const paused = s.steps;
  assert.equal(s.recipe, 'Induction heads');
  await mouse(page, () => page.mouse.move(700, 300));  // frames drawn after Pause, each after a move
  await mouse(page, () => page.mouse.move(701, 301));
  assert.equal((await train(page)).steps, paused, 'paused: frames train nothing');
  t.diagnostic(`a step of the induction recipe in the page: ${s.ms_per_step.toFixed(1)} ms (a figure, not a check)`);
  t.diagnostic(`its slices: ${s.slices.count}, median ${s.slices.median_ms.toFixed(1)} ms, slowest ` +
               `${s.slices.max_ms.toFixed(1)} ms (figures, not checks)`);
  // the forward stages (embeddings, 2 blocks, the final norm with the head packed, the head), the backward
  // stages (the head packed, its dx, its weight's gradient, 2 blocks, the embeddings), the update, the
  // evaluation batch's forward stages, the snapshot
  assert.equal(s.pieces_ms.length, 5 + 6 + 1 + 5 + 1);
  assert.equal(s.pieces.length, s.pieces_ms.length);
  assert.deepEqual([s.pieces[3], s.pieces[8], s.pieces[11]], ['forward final norm, head packed', 'backward block 2', 'update']);

  // The same recipe's losses as the native build's, step for step (SIMD128 against the machine's kernels).
  const cli = process.env.ATTNVIZ_CLI;
  if (!cli) {
    t.diagnostic('ATTNVIZ_CLI is not set: the losses are not compared with the native build');
  } else {
    const lines = execFileSync(cli, ['train', '--task', 'induction', '--steps', '50', '--eval-freq', '10', '--json'])
      .toString().trim().split('\n').map((l) => JSON.parse(l));
    const evals = lines.filter((l) => l.event === 'eval' && l.step > 0);
    assert.equal(evals.length, 5);
    for (const e of evals) {
      const pageLoss = s.losses[e.step - 1];
      assert.ok(Math.abs(pageLoss - e.loss) <= 1e-4 * Math.abs(e.loss), `step ${e.step}: page ${pageLoss}, native ${e.loss}`);
    }
  }

  // The step slider, dragged from its right end to its left: the untrained heads of snapshot 0.
  assert.ok(s.snapshots >= 2);
  assert.equal(s.shown_step, 50 * (s.snapshots - 1), 'the latest snapshot (every 50 steps)');
  const slider = await control(page, 'slider');
  const y = slider.y + slider.h / 2;
  await mouse(page, () => page.mouse.move(slider.x + slider.w - 3, y));
  await mouse(page, () => page.mouse.down());
  for (const f of [0.75, 0.5, 0.25, 0]) await mouse(page, () => page.mouse.move(slider.x + 1 + f * (slider.w - 4), y));
  await mouse(page, () => page.mouse.up());
  await page.waitForFunction(() => attnviz.status().train.shown_step === 0);
  assert.equal((await train(page)).snapshot, 0);
  await click(page, 'latest');
  await page.waitForFunction((want) => attnviz.status().train.shown_step === want, 50 * (s.snapshots - 1));

  // The export buttons download: the loss log, a PNG of the plots, the checkpoint's three files.
  let d = await downloadsOf(page, 'csv', 1);
  assert.deepEqual(d.map((x) => x.suggestedFilename()), ['train-loss.csv']);
  const rows = readFileSync(await d[0].path()).toString().trim().split('\n');
  assert.equal(rows[0], 'step,tokens,loss,eval_train_loss,val_loss,in_context');
  assert.equal(rows.length, paused + 1);
  assert.equal(rows[1].split(',')[1], '2048', 'tokens seen after step 1: 32 sequences of 64');
  d = await downloadsOf(page, 'png', 1);
  assert.deepEqual(d.map((x) => x.suggestedFilename()), ['train-plots.png']);
  const png = readFileSync(await d[0].path());
  assert.ok(png.subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47])), 'a PNG');
  assert.ok(png.readUInt32BE(16) > 400 && png.readUInt32BE(20) > 300, 'the training view, not a sliver');
  d = await downloadsOf(page, 'save', 4);
  // (four downloads from one click: Chromium may report them in any order)
  assert.deepEqual(d.map((x) => x.suggestedFilename()).sort(),
                   ['checkpoint.json', 'config.json', 'model.safetensors', 'optimizer.safetensors']);

  // Open in model view: the trained model, without a tokenizer, on its probe's ids.
  await click(page, 'open');
  await page.waitForFunction(() => attnviz.status().model.open && attnviz.status().model.thumbs === 8);
  const m = await page.evaluate(() => attnviz.status().model);
  assert.equal(m.layers, 2);
  assert.equal(m.heads, 4);
  assert.ok(m.pieces.every((p) => p.startsWith('#')));
  assert.equal((await train(page)).show, false);
  clean(log);
});

// Drops files onto the canvas as the browser does (a DragEvent with a DataTransfer) and waits until the page
// has taken them: `done` is a condition on status().
async function drop(page, files, done, arg) {
  await page.evaluate((list) => {
    const dt = new DataTransfer();
    for (const f of list)
      dt.items.add(new File([f.fill ? new Uint8Array(f.fill).fill(97) : new Uint8Array(f.bytes)], f.name, { type: f.type }));
    document.getElementById('canvas').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, files);
  await page.waitForFunction(done, arg);
}
const text = (name, s, type = 'text/plain') => ({ name, bytes: Array.from(Buffer.from(s)), type });

test('a text file dropped onto the page is the book recipe\'s; each refusal keeps the last good one', async () => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  const story = readFileSync(join(repo, 'tests', 'fixtures', 'train', 'story.txt'));
  await drop(page, [text('story.txt', story)], () => attnviz.status().train.text.name === 'story.txt');
  let s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.text.size, story.length);
  assert.equal(s.recipe, 'The book\'s chapter 5');
  assert.equal(s.steps, 0);
  assert.equal(s.running, false);
  const max = s.text.max;
  assert.equal(max, 4 << 20);

  // Each refusal: one line naming the file; the text and the session stay.
  const refusals = [
    [text('empty.txt', ''), 'empty.txt is empty: there is no text to train on'],
    [{ name: 'latin1.txt', bytes: [0x63, 0x61, 0x66, 0xe9], type: 'text/plain' },
     'latin1.txt is not UTF-8 text (bad byte 0xE9 at offset 3)'],
    [text('short.txt', 'Hello, world.'), 'short.txt: the text is too short: its first 90% (4 tokens) needs one ' +
     'batch of 2 windows of 65 tokens'],
    [{ name: 'huge.txt', fill: max + 1, type: 'text/plain' }, // a byte over: both sizes to the byte (both read "4.2 MB")
     'huge.txt is 4.194305 MB: a text to train on may be at most 4.194304 MB'],
  ];
  for (const [file, why] of refusals) {
    await drop(page, [file], (name) => attnviz.status().train.error.startsWith(name), file.name);
    s = await train(page);
    assert.equal(s.error, why);
    assert.equal(s.text.name, 'story.txt');
    assert.equal(s.steps, 0);
  }
  // The session on the dropped text trains: GPT-2's vocabulary, so the first loss is near ln(50257) = 10.8.
  assert.equal(await act(page, { action: 'step' }), '');
  s = await train(page);
  assert.equal(s.steps, 1);
  assert.ok(Math.abs(s.losses[0] - 10.8) < 0.5, `first loss ${s.losses[0]}`);

  // A model's file dropped keeps the model path: a .safetensors file is read as weights (here refused).
  await drop(page, [{ name: 'x.safetensors', bytes: [1, 2, 3], type: '' }],
             () => attnviz.status().message.includes('x.safetensors'));
  assert.equal(await page.evaluate(() => attnviz.status().message), 'x.safetensors is not a safetensors file: 3 bytes');
  assert.equal((await train(page)).text.name, 'story.txt');
  clean(log);
});

// The Train panel's recipe chosen by mouse: its combo opened, then the item clicked.
async function pickRecipe(page, recipe) {
  await click(page, 'recipe');
  await click(page, 'recipe:' + recipe);
}
// The Train panel's "Choose a text file...", clicked, and `file` (a path, or {name, mimeType, buffer}) given to
// the chooser it opens; waits until the page has taken it (`done`, a condition on status()).
async function chooseText(page, file, done, arg) {
  const chooser = page.waitForEvent('filechooser');
  await click(page, 'text');
  await (await chooser).setFiles(file);
  await page.waitForFunction(done, arg);
}
const hasVocabulary = (page) => page.evaluate(() => Module.FS.analyzePath('/gpt2/encoder.json').exists);

test('a text file chosen with the Train panel\'s button is the book recipe\'s, as a dropped one is', async (t) => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  assert.equal(await hasVocabulary(page), false, 'a fresh page has not fetched GPT-2\'s vocabulary');
  await click(page, 'header');  // opens the panel
  await pickRecipe(page, 'book');
  let s = await train(page);
  assert.equal(s.recipe, 'The book\'s chapter 5');
  assert.equal(s.steps, undefined, 'picking a recipe trains nothing yet');
  const path = join(repo, 'tests', 'fixtures', 'train', 'story.txt'), story = readFileSync(path);
  await chooseText(page, path, () => attnviz.status().train.text.name === 'story.txt');
  s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.text.size, story.length);
  assert.equal(s.recipe, 'The book\'s chapter 5');
  assert.equal(s.steps, 0);
  assert.equal(s.running, false);
  assert.equal(await page.evaluate(() => attnviz.status().message), 'training on \'story.txt\' (6.0 kB): press Start');
  assert.equal(await hasVocabulary(page), true, 'GPT-2\'s vocabulary fetched for the text');

  // Step, then Start and Pause, by mouse: it trains on the text.
  await click(page, 'step');
  await page.waitForFunction(() => attnviz.status().train.steps === 1);
  const first = (await train(page)).losses[0];
  assert.ok(Math.abs(first - 10.8) < 0.5, `first loss ${first}: near ln(50257) = 10.8`);
  await click(page, 'start');
  await page.waitForFunction(() => attnviz.status().train.steps >= 4, null, { timeout: 120000 });
  await click(page, 'start');  // Pause
  await page.waitForFunction(() => !attnviz.status().train.running);
  s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.losses.length, s.steps);
  assert.equal(s.losses[0], first);
  assert.ok(s.losses.every((l) => l > 5 && l < 12), `losses ${s.losses}`);
  const steps = s.steps;

  // A refusal through the chooser is a drop's: one line naming the file; the text and the session stay.
  await chooseText(page, { name: 'latin1.txt', mimeType: 'text/plain', buffer: Buffer.from([0x63, 0x61, 0x66, 0xe9]) },
                   () => attnviz.status().train.error !== '');
  s = await train(page);
  assert.equal(s.error, 'latin1.txt is not UTF-8 text (bad byte 0xE9 at offset 3)');
  assert.equal(s.text.name, 'story.txt');
  assert.equal(s.steps, steps);

  // The same text dropped: a new session on it, whose first step's loss is the chosen text's, to the bit.
  await drop(page, [text('story.txt', story)], () => attnviz.status().train.steps === 0);
  s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.text.name, 'story.txt');
  await click(page, 'step');
  await page.waitForFunction(() => attnviz.status().train.steps === 1);
  assert.equal((await train(page)).losses[0], first);
  t.diagnostic(`story.txt's first loss, chosen and dropped: ${first} (a figure; the check is that both are equal)`);
  clean(log);
});

test('the book recipe\'s Start on a fresh page waits for GPT-2\'s vocabulary, then trains; a failed fetch is one line', async () => {
  const { page, log } = await openPage(env);
  // GPT-2's vocabulary is fetched by the page only when it is needed: here its first fetch fails, its second is
  // held until the test lets it through.
  let mode = 'fail';
  const held = [];
  await page.route('**/gpt2/*', (route) => {
    if (mode === 'hold') held.push(route);
    else if (mode === 'fail' && route.request().url().endsWith('/encoder.json')) route.fulfill({ status: 404, body: '' });
    else route.continue();
  });
  await load(page, env.url);
  // the sentence box's text is the book recipe's: half the story (the view takes at most 1024 tokens)
  const story = readFileSync(join(repo, 'tests', 'fixtures', 'train', 'story.txt'), 'utf8').slice(0, 3000);
  assert.equal(await page.evaluate((x) => attnviz.setText(x), story), '');
  await click(page, 'header');
  await pickRecipe(page, 'book');
  await click(page, 'start');
  await page.waitForFunction(() => attnviz.status().train.error !== '');
  let s = await train(page);
  assert.equal(s.error, 'GPT-2\'s vocabulary did not load: gpt2/encoder.json: HTTP 404');
  assert.equal(s.waiting, '');
  assert.equal(s.running, false);
  assert.equal(s.steps, undefined);

  // Start again: the vocabulary is fetched again; Start waits for it, then goes on.
  mode = 'hold';
  await click(page, 'start');
  s = await train(page);
  assert.equal(s.waiting, 'start');
  assert.equal(s.error, '');
  assert.equal(s.running, false);
  assert.equal(s.steps, undefined);
  while (held.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
  mode = 'pass';
  for (const route of held) await route.continue();
  await page.waitForFunction(() => attnviz.status().train.running && attnviz.status().train.steps >= 2, null,
                             { timeout: 120000 });
  await click(page, 'start');  // Pause
  await page.waitForFunction(() => !attnviz.status().train.running);
  s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.waiting, '');
  assert.equal(s.text.name, '', 'the sentence box\'s text');
  assert.ok(Math.abs(s.losses[0] - 10.8) < 0.5, `first loss ${s.losses[0]}: near ln(50257) = 10.8`);
  // the 404 is the browser's console error; nothing else
  assert.deepEqual(log.errors.filter((e) => !/404/.test(e)), []);
  log.errors.length = 0;
  clean(log);
});

test('attnviz.train\'s reset of the book recipe on a fresh page says the vocabulary is on its way, then resets', async () => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  const story = readFileSync(join(repo, 'tests', 'fixtures', 'train', 'story.txt'), 'utf8').slice(0, 3000);
  assert.equal(await page.evaluate((x) => attnviz.setText(x), story), '');
  assert.equal(await act(page, { action: 'reset', recipe: 'book' }),
               'GPT-2\'s vocabulary is on its way (fetched now): reset again, which returns \'\' once it is there');
  assert.equal((await train(page)).error, '');
  await page.waitForFunction(() => attnviz.train({ action: 'reset', recipe: 'book' }) === '');
  const s = await train(page);
  assert.equal(s.recipe, 'The book\'s chapter 5');
  assert.equal(s.steps, 0);
  clean(log);
});

test('attnviz.train: the same controls as a script, and its refusals', async () => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  assert.equal(await act(page, { action: 'start' }), 'nothing to train: reset first');
  assert.equal(await act(page, { action: 'reset', recipe: 'nope' }), "unknown recipe 'nope' (induction, book, custom)");
  assert.equal(await act(page, { action: 'reset', recipe: 'induction' }), '');
  let s = await train(page);
  assert.equal(s.steps, 0);
  assert.equal(s.snapshots, 1);
  assert.deepEqual(s.kinds.map((l) => l.length), [4, 4]);
  for (let i = 0; i < 3; ++i) assert.equal(await act(page, { action: 'step' }), '');
  s = await train(page);
  assert.equal(s.steps, 3);
  assert.equal(s.losses.length, 3);
  assert.equal(await act(page, { action: 'snapshot', snapshot: 0 }), '');
  assert.equal((await train(page)).shown_step, 0);
  assert.equal(await act(page, { action: 'fly' }), "unknown training action 'fly'");
  assert.equal(await page.evaluate(() => attnviz.train('start')),
               'TypeError: train takes an object {action, ...}, not a string');
  clean(log);
});
