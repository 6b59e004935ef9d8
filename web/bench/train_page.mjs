// The Train panel in headless Chromium: the page trains a slice each frame (the pieces of a step that fit
// the frame's budget); printed are how long the frames' slices took (median, 99th percentile, slowest) and
// each piece's last time.
//   induction (default): the time until a head is first labelled induction
//   --recipe book [--steps N]: the book's recipe (GPT-2's vocabulary) on tests/fixtures/train/story.txt,
//     dropped onto the page as a user drops a text, for N steps (default 40: evaluations after steps 1, 6,
//     ..., 36); the time they took
//   node web/bench/train_page.mjs [--recipe book]   (ATTNVIZ_SITE: the built site, default
//   build/wasm-release/web/site)
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { start, openPage, load, repo } from '../tests/harness.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
};
const recipe = arg('--recipe', 'induction');
const steps = Number(arg('--steps', '40'));
if (recipe !== 'induction' && recipe !== 'book') throw new Error(`--recipe ${recipe}: induction or book`);

// ATTNVIZ_ISOLATED=1: served cross-origin isolated, so the page runs its WebAssembly threads
const isolated = process.env.ATTNVIZ_ISOLATED === "1";
const env = await start({ isolated });
try {
  const { page } = await openPage(env);
  await load(page, env.url);
  if (recipe === 'book') {
    // the text dropped onto the canvas as the browser drops a file: the book's recipe on it
    const story = Array.from(readFileSync(join(repo, 'tests', 'fixtures', 'train', 'story.txt')));
    await page.evaluate((bytes) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(bytes)], 'story.txt', { type: 'text/plain' }));
      document.getElementById('canvas').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, story);
    await page.waitForFunction(() => attnviz.status().train.text.name === 'story.txt');
  } else {
    await page.evaluate(() => attnviz.train({ action: 'reset', recipe: 'induction' }));
  }
  const t0 = Date.now();
  await page.evaluate(() => attnviz.train({ action: 'start' }));
  const threads = await page.evaluate(() => attnviz.status().threads);
  const where = `page (${isolated ? 'isolated' : 'not isolated'}, threads ${JSON.stringify(threads)})`;
  let s;
  if (recipe === 'book') {
    await page.waitForFunction((n) => attnviz.status().train.steps >= n, steps, { timeout: 1800000, polling: 500 });
    await page.evaluate(() => attnviz.train({ action: 'pause' }));
    s = await page.evaluate(() => attnviz.status().train);
    console.log(`${where}: the book's recipe, ${s.steps} steps in ${((Date.now() - t0) / 1000).toFixed(1)} s ` +
                `(${s.ms_per_step.toFixed(1)} ms a step at the end, evaluations and snapshots not counted)`);
  } else {
    await page.waitForFunction(() => attnviz.status().train.first_induction_step !== null, null,
                               { timeout: 900000, polling: 1000 });
    s = await page.evaluate(() => attnviz.status().train);
    console.log(`${where}: the first induction head by step ${s.first_induction_step}, after ` +
                `${((Date.now() - t0) / 1000).toFixed(1)} s (${s.ms_per_step.toFixed(1)} ms a step at the end)`);
  }
  const sl = s.slices;
  console.log(`slices: ${sl.count} over ${s.steps} steps; median ${sl.median_ms.toFixed(1)} ms, ` +
              `99th percentile ${sl.p99_ms.toFixed(1)} ms, slowest ${sl.max_ms.toFixed(1)} ms; ${sl.over_50_ms} over 50 ms` +
              (sl.over_50_ms ? ` (slices ${sl.over_50_ms_at.join(', ')} of ${sl.count})` : ''));
  // each piece's last time, in a step's order: forward stages, backward stages, update, an evaluation
  // batch's forward stages, snapshot
  console.log('pieces (ms):');
  s.pieces.forEach((name, i) => console.log(`  ${name}: ${s.pieces_ms[i].toFixed(1)}`));
} finally {
  await env.close();
}
