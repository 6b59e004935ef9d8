// The WebGPU backend's figures: ms per gpt2-small layer (mha, training mode: dropout 0.1, every stage read
// back for the heatmaps) on the page's WASM SIMD128 engine and on WebGPU, at T = 128, 512 and 1024, in
// headless Chromium with --enable-unsafe-webgpu. Printed as a table and as JSON (last line).
//
//   node web/bench/gpu.mjs [--T 128,512,1024] [--runs 3] [--chromium-arg --use-angle=vulkan ...]
//
// "engine" is the backend's own time (WebGPU: from the job's hand-over to its results in the module's memory,
// uploads and read-back included); "view" is from the edit to the result in the view. Each figure is the
// median over the runs, after one warm-up run per backend and size. With no GPU (the adapter is
// SwiftShader, a software fallback) the WebGPU figures say nothing about real GPUs.
import { chromium } from 'playwright-core';
import { serve } from '../tools/serve.mjs';
import { repo, chromiumPath, chromiumArgs } from '../tests/harness.mjs';
import { join } from 'node:path';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const sizes = opt('--T', '128,512,1024').split(',').map(Number);
const runs = Number(opt('--runs', '3'));
const extra = args.flatMap((a, i) => (args[i - 1] === '--chromium-arg' ? [a] : []));
const site = opt('--site', join(repo, 'build', 'wasm-release', 'web', 'site'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const { server, url } = await serve(site, 0);
const browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
                                        args: [...chromiumArgs, '--enable-unsafe-webgpu', ...extra] });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
await page.goto(url);
await page.evaluate(() => attnviz.ready);
await page.waitForFunction(() => attnviz.status().compute.webgpu !== 'starting');
const compute = await page.evaluate(() => attnviz.status().compute);
if (compute.webgpu !== 'ready') throw new Error('WebGPU is not available: ' + compute.why);

const rows = [];
for (const T of sizes) {
  const text = Array.from({ length: T }, (_, i) => 'w' + i).join(' ');
  const row = { T };
  for (const backend of ['wasm', 'webgpu']) {
    const times = await page.evaluate(async ({ backend, text, runs }) => {
      attnviz.setBackend(backend);
      const out = [];
      for (let i = 0; i <= runs; ++i) {
        // A different seed each run: new parameters, so nothing is cached between runs but the pipelines.
        const t0 = performance.now();
        const error = attnviz.setState({ preset: 'gpt2-small', seed: 1000 + i, text });
        if (error) throw new Error(error);
        const s = await attnviz.computed();
        if (s.compute.backend !== backend) throw new Error(`computed on ${s.compute.backend}: ${s.compute.note}`);
        if (i > 0) out.push({ engine: s.engine_ms, view: performance.now() - t0 });
      }
      return out;
    }, { backend, text, runs });
    row[backend] = { engine_ms: median(times.map((t) => t.engine)), view_ms: median(times.map((t) => t.view)) };
  }
  row.gflop = 2 * T * (3 * 768 * 768 + 768 * T + 768 * 768) / 1e9;
  rows.push(row);
}
const after = await page.evaluate(() => attnviz.status().compute);
await browser.close();
server.close();

console.log(`attnviz WebGPU benchmark: headless Chromium ${browser.version()}, adapter: ${compute.adapter}`);
console.log('gpt2-small layer (mha, dropout 0.1, every stage read back), median of ' + runs + ' runs, ms');
console.log('     T   GFLOP   WASM engine  WASM view   WebGPU engine  WebGPU view');
for (const r of rows)
  console.log(`${String(r.T).padStart(6)} ${r.gflop.toFixed(2).padStart(7)} ${r.wasm.engine_ms.toFixed(1).padStart(13)}` +
              `${r.wasm.view_ms.toFixed(1).padStart(11)} ${r.webgpu.engine_ms.toFixed(1).padStart(15)}` +
              `${r.webgpu.view_ms.toFixed(1).padStart(13)}`);
console.log(`auto: ${after.threshold_gflop === null ? 'WASM at every size (WebGPU not faster here)'
                                                  : 'WebGPU from ' + after.threshold_gflop.toFixed(2) + ' GFLOP'}`);
console.log(JSON.stringify({ adapter: compute.adapter, rows, calibration: after.calibration,
                             threshold_gflop: after.threshold_gflop }));
