// Continuing a training run in the page from a checkpoint folder on the visitor's disk, driven as a user does:
// the Train panel's "Continue from a folder..." (its chooser given the folder), the Model panel's folder
// chooser or a drop (a folder with optimizer.safetensors goes to the Train panel). The CLI's checkpoint at step
// N, continued in the panel for M steps by mouse, ends on the CLI's straight run to N + M (losses and in-context
// scores); the panel's own Save model, continued, goes on step for step as the run it saved; a folder without
// run state, a corrupted optimizer file and a torn set (an optimizer from another save) are refused in one line,
// and the session and the page stay.
//   ATTNVIZ_SITE   the built site (default build/wasm-release/web/site)
//   ATTNVIZ_CLI    a native attnviz-cli (scripts/test passes the release build's): the checkpoint and the
//                  straight run (without it the first test is skipped, saying so)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { start, openPage, load, clean, repo } from './harness.mjs';
import { act, click, train } from './train_ui.mjs';

let env, tmp;
before(async () => {
  env = await start();
  tmp = mkdtempSync(join(tmpdir(), 'attnviz-continue-'));
});
after(async () => {
  await env?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const message = (page) => page.evaluate(() => attnviz.status().message);

// The Train panel's "Continue from a folder...", clicked, and the folder given to the chooser it opens.
async function continueFromChooser(page, dir) {
  const chooser = page.waitForEvent('filechooser');
  await click(page, 'continue');
  await (await chooser).setFiles(dir);
}
// Waits until the page has taken a folder: continued (from `step`), or refused (an error in the panel).
const settled = (page, step) => page.waitForFunction(
  (n) => { const t = attnviz.status().train; return t.continued_from === n || t.error !== ''; }, step);

test('the CLI\'s checkpoint at step 20, continued in the Train panel for 30 steps, is the CLI\'s run to 50', async (t) => {
  const cli = process.env.ATTNVIZ_CLI;
  if (!cli) {
    t.skip('ATTNVIZ_CLI is not set: no native checkpoint to continue');
    return;
  }
  const N = 20, M = 30;
  const dir = join(tmp, 'cli-run');
  execFileSync(cli, ['train', '--task', 'induction', '--steps', String(N), '--eval-freq', '10', '--out', dir]);
  // The straight run evaluated after every step (its evaluations draw nothing the training draws: the same
  // losses as with --eval-freq 10), for the panel's in-context scores, which it takes after steps 21, 31, 41
  // (as train_model_simple: the steps whose 0-based index is a multiple of the interval).
  const straight = execFileSync(cli, ['train', '--task', 'induction', '--steps', String(N + M), '--eval-freq', '1',
                                      '--json']).toString().trim().split('\n').map((l) => JSON.parse(l))
    .filter((l) => l.event === 'eval' && l.step > N);
  assert.equal(straight.length, M);

  const { page, log } = await openPage(env);
  await load(page, env.url);
  await click(page, 'header');  // opens the panel
  await continueFromChooser(page, dir);
  await settled(page, N);
  let s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.recipe, 'Induction heads');
  assert.equal(s.steps, N);
  assert.equal(s.running, false);
  assert.equal(s.losses.length, 0, 'a checkpoint keeps no loss curve');
  assert.equal(await message(page), `continued 'cli-run' (Induction heads) from step ${N}: its loss curve starts ` +
               'there (a checkpoint keeps none); press Start');

  await click(page, 'start');
  await page.waitForFunction((n) => attnviz.status().train.steps >= n, N + M + 2, { timeout: 120000 });
  await click(page, 'start');  // Pause
  await page.waitForFunction(() => !attnviz.status().train.running);
  s = await train(page);
  assert.equal(s.continued_from, N);
  assert.deepEqual(s.in_context.slice(0, M).map((x, i) => (x === null ? null : N + 1 + i)).filter((x) => x !== null),
                   [21, 31, 41], 'the panel\'s evaluations');
  let worst = 0;
  for (const e of straight) {
    const i = e.step - N - 1;
    assert.ok(Math.abs(s.losses[i] - e.loss) <= 1e-4 * Math.abs(e.loss), `step ${e.step}: page ${s.losses[i]}, CLI ${e.loss}`);
    worst = Math.max(worst, Math.abs(s.losses[i] - e.loss) / Math.abs(e.loss));
    if (s.in_context[i] !== null)
      assert.ok(Math.abs(s.in_context[i] - e.in_context) <= 1e-4,
                `step ${e.step}: in-context score page ${s.in_context[i]}, CLI ${e.in_context}`);
  }
  t.diagnostic(`steps 21 to 50 continued in the page: largest relative loss difference from the CLI ${worst.toExponential(2)}`);
  clean(log);
});

// Writes `files` ({name: Buffer}) into a new folder `name` under the test's temporary folder.
function folder(name, files) {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  for (const [f, bytes] of Object.entries(files)) writeFileSync(join(dir, f), bytes);
  return dir;
}

// Drops files ({name: Buffer}) onto the page as the browser does (a DragEvent with a DataTransfer of files).
async function dropFiles(page, files) {
  await page.evaluate((list) => {
    const dt = new DataTransfer();
    for (const [name, b, type] of list) dt.items.add(new File([new Uint8Array(b)], name, { type }));
    window.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, Object.entries(files).map(([name, b]) => [name, Array.from(b), name.endsWith('.txt') ? 'text/plain' : '']));
}

// Save model clicked: its downloads, {name: Buffer}.
async function saveModel(page) {
  const downloads = [];
  page.on('download', (d) => downloads.push(d));
  await click(page, 'save');
  while (downloads.length < 4) await new Promise((resolve) => setTimeout(resolve, 10));
  page.removeAllListeners('download');
  const files = {};
  for (const d of downloads) files[d.suggestedFilename()] = readFileSync(await d.path());
  assert.deepEqual(Object.keys(files).sort(),
                   ['checkpoint.json', 'config.json', 'model.safetensors', 'optimizer.safetensors']);
  return files;
}

test('Save model in the page, continued from the saved folder, goes on as the run it saved', async () => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  await click(page, 'header');
  await click(page, 'start');
  await page.waitForFunction(() => attnviz.status().train.steps >= 12, null, { timeout: 120000 });
  await click(page, 'start');  // Pause (perhaps mid-step: Save model writes the last whole step)
  await page.waitForFunction(() => !attnviz.status().train.running);
  const saved = (await train(page)).steps;  // whole steps done

  // Save model: the checkpoint's three files, downloaded into a folder as the visitor keeps them.
  const dir = folder('trained-model', await saveModel(page));

  // The run it saved, 5 more steps: the oracle.
  for (let i = 0; i < 5; ++i) assert.equal(await act(page, { action: 'step' }), '');
  let s = await train(page);
  const mid = s.mid_step ? 1 : 0;  // a paused half step completes first
  const expected = s.losses.slice(saved, saved + 5 - mid);

  // The saved folder through the Model panel's folder chooser (routed to the Train panel by its optimizer file).
  await page.setInputFiles('#model-folder', dir);
  await settled(page, saved);
  s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.steps, saved);
  assert.equal(await page.evaluate(() => attnviz.status().model.open), false, 'not opened as a model');
  for (let i = 0; i < 5 - mid; ++i) assert.equal(await act(page, { action: 'step' }), '');
  s = await train(page);
  assert.deepEqual(s.losses, expected, 'the continued run\'s losses are the saved run\'s, bit for bit');
  clean(log);
});

test('a folder without run state, a corrupted optimizer file and a torn set: one line, the session and the page stay', async () => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  await click(page, 'header');
  assert.equal(await act(page, { action: 'reset', recipe: 'induction' }), '');
  for (let i = 0; i < 3; ++i) assert.equal(await act(page, { action: 'step' }), '');
  const before = await train(page);

  // Save model's files, to make the bad folders from.
  const saved = await saveModel(page);
  const file = (f) => saved[f];

  // No optimizer.safetensors, given to the Train panel's chooser: the native line.
  await continueFromChooser(page, folder('weights-only', { 'model.safetensors': file('model.safetensors'),
                                                           'config.json': file('config.json') }));
  await settled(page, -1);
  let s = await train(page);
  assert.equal(s.error, '\'weights-only\' holds no run to continue: it has no optimizer.safetensors; Reset starts a new run');
  assert.equal(await message(page), s.error);
  assert.equal(s.steps, before.steps);
  assert.deepEqual(s.losses, before.losses);

  // A truncated optimizer file, and one whose header names sizes its bytes do not have, dropped with the
  // model's files onto the page (a drop of files, not a folder: the page calls it 'checkpoint').
  const opt = file('optimizer.safetensors');
  const n = Number(opt.readBigUInt64LE(0));
  const header = opt.subarray(8, 8 + n).toString();
  const wrong = header.replace(/"data_offsets":\[(\d+),(\d+)\]/, (_, a, b) => `"data_offsets":[${a},${Number(b) + 4}]`);
  assert.notEqual(wrong, header);
  const bad = [
    ['truncated', opt.subarray(0, opt.length - 100),
     /^checkpoint\/optimizer\.safetensors: tensor '[^']+': data_offsets \[\d+, \d+\) run past the end of the (\d+)-byte data section$/,
     (m) => assert.equal(Number(m[1]), opt.length - 100 - 8 - n)],
    ['wrong sizes', Buffer.concat([opt.subarray(0, 8), Buffer.from(wrong), opt.subarray(8 + n)]),
     /^checkpoint\/optimizer\.safetensors: tensor '[^']+': data_offsets \[\d+, \d+\) hold (\d+) bytes but shape \[[\d, ]+\] in F32 needs (\d+)$/,
     (m) => assert.equal(Number(m[1]), Number(m[2]) + 4)],
  ];
  for (const [what, bytes, why, check] of bad) {
    await page.evaluate(() => attnviz.train({ action: 'pause' }));  // clears the last error
    await dropFiles(page, { 'model.safetensors': file('model.safetensors'), 'config.json': file('config.json'),
                            'optimizer.safetensors': bytes });
    await page.waitForFunction(() => attnviz.status().train.error !== '');
    s = await train(page);
    assert.match(s.error, why, what);
    check(s.error.match(why));
    assert.ok(!s.error.includes('\n'), `${what}: one line`);
    assert.ok(!s.error.includes('/checkpoints/'), `${what}: the folder as the visitor named it`);
    assert.equal(await message(page), s.error);
    assert.equal(s.steps, before.steps, `${what}: the session stays`);
    assert.deepEqual(s.losses, before.losses);
  }
  // The page works on: the session steps, and the heatmaps draw.
  assert.equal(await act(page, { action: 'step' }), '');
  assert.equal((await train(page)).steps, before.steps + 1);
  await page.evaluate(() => attnviz.setState({ text: 'the page still computes' }));
  await page.waitForFunction(() => { const st = attnviz.status(); return st.drawn_generation === st.generation; });
  // A torn set: the saved folder with the optimizer of a later save (its own checkpoint.json kept), refused by
  // name as the native reader refuses it; the later save whole continues.
  const later = await saveModel(page);
  const stepped = await train(page);
  await page.evaluate(() => attnviz.train({ action: 'pause' }));  // clears the last error
  await continueFromChooser(page, folder('torn', { ...saved, 'optimizer.safetensors': later['optimizer.safetensors'] }));
  await page.waitForFunction(() => attnviz.status().train.error !== '');
  s = await train(page);
  assert.match(s.error, /^'torn' is a torn checkpoint: its optimizer\.safetensors holds other bytes than its checkpoint\.json lists/);
  assert.ok(!s.error.includes('\n'), 'torn: one line');
  assert.equal(s.steps, stepped.steps, 'torn: the session stays');
  await page.evaluate(() => attnviz.train({ action: 'pause' }));  // clears the last error
  await continueFromChooser(page, folder('whole', later));
  await settled(page, stepped.steps);
  assert.equal((await train(page)).error, '');
  assert.equal((await train(page)).continued_from, stepped.steps);
  clean(log);
});

test('a book run continues only on the text it trained on, given by a dropped text file', async () => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  await click(page, 'header');
  const story = readFileSync(join(repo, 'tests', 'fixtures', 'train', 'story.txt'));
  const other = Buffer.concat([Buffer.from('Another beginning. '), story]);
  const dropText = async (name, bytes) => {
    await page.evaluate(() => attnviz.train({ action: 'pause' }));  // clears the last error
    await dropFiles(page, { [name]: bytes });
    await page.waitForFunction((n) => attnviz.status().train.text.name === n && attnviz.status().train.steps === 0, name);
  };
  await dropText('story.txt', story);
  assert.equal((await train(page)).recipe, 'The book\'s chapter 5');
  for (let i = 0; i < 2; ++i) assert.equal(await act(page, { action: 'step' }), '');
  const dir = folder('book-run', await saveModel(page));
  assert.equal(await act(page, { action: 'step' }), '');
  const third = (await train(page)).losses[2];  // the oracle: the saved run's next step

  // Another text: refused in one line, its session (step 0) kept.
  await dropText('other.txt', other);
  await page.setInputFiles('#model-folder', dir);
  await settled(page, 2);
  let s = await train(page);
  assert.match(s.error, /^'book-run''s run was over other data \(\d+ training and \d+ validation windows, against \d+ and \d+ in this text, or other tokens\): give the Train panel the text it trained on$/);
  assert.equal(s.steps, 0);
  assert.equal(s.text.name, 'other.txt');

  // The text it trained on, dropped again: continued from step 2, its next step the saved run's.
  await dropText('story.txt', story);
  await page.setInputFiles('#model-folder', dir);
  await settled(page, 2);
  s = await train(page);
  assert.equal(s.error, '');
  assert.equal(s.steps, 2);
  assert.equal(s.recipe, 'The book\'s chapter 5');
  assert.equal(await act(page, { action: 'step' }), '');
  assert.deepEqual((await train(page)).losses, [third]);
  clean(log);
});
