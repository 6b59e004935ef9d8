// The Train panel's induction recipe in headless Chromium: the time until a head is first labelled induction
// (the page trains a slice each frame: the pieces of a step that fit the frame's budget), and how long the
// frames' slices took (median, 99th percentile, slowest), printed as figures.
//   node web/bench/train_page.mjs        (ATTNVIZ_SITE: the built site, default build/wasm-release/web/site)
import { start, openPage, load } from '../tests/harness.mjs';

// ATTNVIZ_ISOLATED=1: served cross-origin isolated, so the page runs its WebAssembly threads
const isolated = process.env.ATTNVIZ_ISOLATED === "1";
const env = await start({ isolated });
try {
  const { page } = await openPage(env);
  await load(page, env.url);
  await page.evaluate(() => attnviz.train({ action: 'reset', recipe: 'induction' }));
  const t0 = Date.now();
  await page.evaluate(() => attnviz.train({ action: 'start' }));
  await page.waitForFunction(() => attnviz.status().train.first_induction_step !== null, null,
                             { timeout: 900000, polling: 1000 });
  const s = await page.evaluate(() => attnviz.status().train);
  const threads = await page.evaluate(() => attnviz.status().threads);
  console.log(`page (${isolated ? 'isolated' : 'not isolated'}, threads ${JSON.stringify(threads)}): ` +
              `the first induction head by step ${s.first_induction_step}, after ${((Date.now() - t0) / 1000).toFixed(1)} s ` +
              `(${s.ms_per_step.toFixed(1)} ms a step at the end)`);
  const sl = s.slices;
  console.log(`slices: ${sl.count} over ${s.steps} steps; median ${sl.median_ms.toFixed(1)} ms, ` +
              `99th percentile ${sl.p99_ms.toFixed(1)} ms, slowest ${sl.max_ms.toFixed(1)} ms`);
  // the pieces' last times: forward, the backward stages (head, blocks from the last, embeddings), update,
  // evaluation, snapshot
  console.log(`pieces (ms): ${s.pieces_ms.map((x) => x.toFixed(1)).join(', ')}`);
} finally {
  await env.close();
}
