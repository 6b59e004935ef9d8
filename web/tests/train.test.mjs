// The Train panel in headless Chromium, through attnviz.train (what its buttons do): the induction recipe
// trained between frames with its losses equal to the native attnviz-cli's, pause, the step slider, the
// exports downloaded, and Open in model view showing the trained model on its probe.
//   ATTNVIZ_SITE   the built site (default build/wasm-release/web/site)
//   ATTNVIZ_CLI    a native attnviz-cli (scripts/test passes the release build's) for the losses
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { start, openPage, load, clean } from './harness.mjs';

let env;
before(async () => {
  env = await start();
});
after(async () => {
  await env?.close();
});

const train = (page) => page.evaluate(() => attnviz.status().train);
const act = (page, c) => page.evaluate((x) => attnviz.train(x), c);

test('the Train panel: start, pause, the slider, exports and Open in model view', async (t) => {
  const { page, log } = await openPage(env);
  await load(page, env.url);
  assert.equal(await act(page, { action: 'start' }), 'nothing to train: reset first');
  assert.equal(await act(page, { action: 'reset', recipe: 'induction' }), '');
  let s = await train(page);
  assert.equal(s.steps, 0);
  assert.equal(s.snapshots, 1);
  assert.equal(s.kinds.length, 2);
  assert.equal(s.kinds[0].length, 4);

  // Start: frames train (a slice each) until paused; the page stays responsive meanwhile.
  assert.equal(await act(page, { action: 'start' }), '');
  await page.waitForFunction(() => attnviz.status().train.steps >= 55, null, { timeout: 120000 });
  assert.equal(await act(page, { action: 'pause' }), '');
  s = await train(page);
  const paused = s.steps;
  const frames = await page.evaluate(() => attnviz.status().frames);
  assert.equal(await page.evaluate(() => attnviz.setText('Your journey starts with one step')), '');
  await page.waitForFunction((f) => attnviz.status().frames > f, frames);
  assert.equal((await train(page)).steps, paused, 'paused: frames train nothing');
  assert.ok(s.ms_per_step > 0);
  t.diagnostic(`a step of the induction recipe in the page: ${s.ms_per_step.toFixed(1)} ms (a figure, not a check)`);

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
      const page_loss = s.losses[e.step - 1];
      assert.ok(Math.abs(page_loss - e.loss) <= 1e-4 * Math.abs(e.loss), `step ${e.step}: page ${page_loss}, native ${e.loss}`);
    }
  }

  // The step slider: snapshot 0 shows the untrained heads, -1 the latest again.
  assert.ok(s.snapshots >= 2);
  assert.equal(await act(page, { action: 'snapshot', snapshot: 0 }), '');
  assert.equal((await train(page)).shown_step, 0);
  assert.equal(await act(page, { action: 'snapshot', snapshot: -1 }), '');
  // the latest snapshot: every 50 steps, however many steps ran before the pause landed
  assert.equal((await train(page)).shown_step, 50 * (s.snapshots - 1));

  // Exports download: the loss log, then the checkpoint's three files.
  for (const [action, names] of [['csv', ['train-loss.csv']], ['png', ['train-plots.png']],
                                 ['save', ['model.safetensors', 'config.json', 'optimizer.safetensors']]]) {
    const downloads = [];
    page.on('download', (d) => downloads.push(d));
    assert.equal(await act(page, { action }), '');
    while (downloads.length < names.length) await new Promise((resolve) => setTimeout(resolve, 10));
    page.removeAllListeners('download');
    assert.deepEqual(downloads.map((d) => d.suggestedFilename()), names);
    if (action === 'png') {
      const png = (await import('node:fs')).readFileSync(await downloads[0].path());
      assert.ok(png.subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47])), 'a PNG');
    }
    if (action === 'csv') {
      const rows = (await import('node:fs')).readFileSync(await downloads[0].path()).toString().trim().split('\n');
      assert.equal(rows[0], 'step,tokens,loss,val_loss,in_context');
      assert.equal(rows.length, paused + 1);
    }
  }

  // Open in model view: the trained model, without a tokenizer, on its probe's ids.
  assert.equal(await act(page, { action: 'open' }), '');
  await page.waitForFunction(() => attnviz.status().model.open && attnviz.status().model.thumbs === 8);
  const m = await page.evaluate(() => attnviz.status().model);
  assert.equal(m.layers, 2);
  assert.equal(m.heads, 4);
  assert.ok(m.pieces.every((p) => p.startsWith('#')));
  assert.equal((await train(page)).show, false);
  clean(log);
});
