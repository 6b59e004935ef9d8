// Whole models on the page's WebGPU backend in headless Chromium (--enable-unsafe-webgpu: SwiftShader's adapter,
// a CPU emulation, so only correctness is checked here). The repository's small Hugging Face fixture (2 layers,
// 4 heads, d 64, a vocabulary of 512) runs on WASM and on WebGPU, and the passes are compared: every layer's
// attention weights, every stage of each opened layer, the logits and the top 10. Also: every weight matrix
// split over a lowered per-buffer limit gives the same numbers, a size that cannot fit and a lost device fall
// back to WASM with a note, and the automatic choice's calibration keeps models on WASM here.
//   node --test web/tests/gpu_model.test.mjs    (ATTNVIZ_SITE: the built site, default build/wasm-release/web/site)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { repo, start, openPage, load, clean } from './harness.mjs';

const folder = join(repo, 'tests', 'fixtures', 'gpt', 'hf-folder');
const folderFiles = ['model.safetensors', 'vocab.json', 'merges.txt', 'config.json'].map((f) => join(folder, f));
const TEXT = 'A rose is a rose is a rose';
const STAGES = ['inputs', 'q', 'k', 'v', 'scores', 'scaled', 'weights', 'dropped', 'context', 'output'];

let env;
before(async () => {
  env = await start({ extraArgs: ['--enable-unsafe-webgpu'] });
});
after(async () => env && env.close());

// The page with the fixture open (in auto mode, so the model's calibration starts) and WebGPU up.
async function openFixture() {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#text=' + encodeURIComponent(TEXT));
  const ready = await page.waitForFunction(() => attnviz.status().compute.webgpu !== 'starting');
  await ready.dispose();
  const c = await page.evaluate(() => attnviz.status().compute);
  assert.equal(c.webgpu, 'ready', `WebGPU did not start: ${c.why}`);
  await page.setInputFiles('#model-files', folderFiles);
  const opened = await page.waitForFunction(() => attnviz.status().model.open);
  await opened.dispose();
  return { page, context, log };
}

async function calibrated(page) {
  const done = await page.waitForFunction(() => attnviz.status().compute.model.calibrated, null, { timeout: 120000 });
  await done.dispose();
}

// One backend's passes over the page's sentence: each layer opened in turn (every stage of it), then the grid
// (every layer's weights, the logits and the top 10, from getModelResult).
function passes(page, backend) {
  return page.evaluate(async ({ backend, STAGES }) => {
    if (attnviz.setBackend(backend) !== '') throw new Error('setBackend refused');
    const layers = attnviz.status().model.layers;
    const out = { layers: [], status: [] };
    for (let l = 0; l < layers; ++l) {
      attnviz.setState({ ...attnviz.getState(), layer: l });
      const s = await attnviz.computed();
      out.status.push({ backend: s.compute.backend, note: s.compute.note, error: s.model.error, layer: s.model.layer });
      const t = {};
      for (const n of STAGES) {
        const x = attnviz.getTensor(n);
        t[n] = x ? Array.from(x) : null;
      }
      out.layers.push(t);
    }
    const state = attnviz.getState();
    delete state.layer;
    delete state.head;
    attnviz.setState(state);
    const s = await attnviz.computed();
    out.status.push({ backend: s.compute.backend, note: s.compute.note, error: s.model.error, layer: s.model.layer });
    out.grid = attnviz.getModelResult();
    out.model = s.model;
    return out;
  }, { backend, STAGES });
}

// Max abs error and normalized MSE (sum of squared errors over sum of squares); -inf cells must agree.
function diff(got, want) {
  assert.equal(got.length, want.length);
  let maxAbs = 0, err = 0, sq = 0, infMismatch = 0;
  for (let i = 0; i < want.length; ++i) {
    if (!Number.isFinite(want[i]) || !Number.isFinite(got[i])) {
      if (want[i] !== got[i]) ++infMismatch;
      continue;
    }
    const d = got[i] - want[i];
    maxAbs = Math.max(maxAbs, Math.abs(d));
    err += d * d;
    sq += want[i] * want[i];
  }
  return { n: want.length, maxAbs, nmse: sq > 0 ? err / sq : err, infMismatch };
}

// Compares a WebGPU pass with the WASM pass and returns the worst errors seen, per kind of tensor.
function compare(label, gpu, wasm) {
  const worst = {};
  const note = (name, d) => {
    const w = worst[name] || { maxAbs: 0, nmse: 0 };
    worst[name] = { maxAbs: Math.max(w.maxAbs, d.maxAbs), nmse: Math.max(w.nmse, d.nmse) };
  };
  for (const s of gpu.status) {
    assert.equal(s.error, '', `${label}: ${s.error}`);
    assert.equal(s.note, '', `${label}: fell back: ${s.note}`);
    assert.equal(s.backend, 'webgpu', label);
  }
  for (const s of wasm.status) assert.equal(s.backend, 'wasm', label);
  // Each opened layer: every chapter-3 stage.
  for (let l = 0; l < wasm.layers.length; ++l)
    for (const n of STAGES) {
      const g = gpu.layers[l][n], c = wasm.layers[l][n];
      assert.ok(c && c.length > 0, `${label}: WASM has no ${n} in layer ${l}`);
      assert.ok(g, `${label}: WebGPU has no ${n} in layer ${l}`);
      const d = diff(g, c);
      assert.equal(d.infMismatch, 0, `${label}: layer ${l} ${n}: masks differ`);
      assert.ok(d.nmse <= 1e-8, `${label}: layer ${l} ${n} nmse ${d.nmse}`);
      if (n === 'weights' || n === 'dropped') assert.ok(d.maxAbs <= 1e-5, `${label}: layer ${l} ${n} max abs ${d.maxAbs}`);
      note(n, d);
    }
  // The grid's pass: every layer's weights, the logits and the top 10.
  const G = gpu.grid, W = wasm.grid;
  assert.equal(G.engine.backend, 'webgpu');
  assert.equal(W.engine.backend, 'cpu');
  assert.deepEqual(G.tokens.map((t) => t.id), W.tokens.map((t) => t.id));
  assert.equal(G.layers.length, W.layers.length);
  for (let l = 0; l < W.layers.length; ++l) {
    assert.equal(G.layers[l].heads.length, W.layers[l].heads.length);
    for (let h = 0; h < W.layers[l].heads.length; ++h) {
      const d = diff(G.layers[l].heads[h].weights.flat(), W.layers[l].heads[h].weights.flat());
      assert.ok(d.maxAbs <= 1e-5, `${label}: grid layer ${l} head ${h} weights max abs ${d.maxAbs}`);
      note('every layer\'s weights', d);
    }
  }
  const d = diff(G.logits, W.logits);
  assert.ok(d.nmse <= 1e-8 && d.maxAbs <= 1e-4, `${label}: logits max abs ${d.maxAbs}, nmse ${d.nmse}`);
  note('logits', d);
  assert.equal(G.next.length, 10);
  assert.deepEqual(G.next.map((n) => n.id), W.next.map((n) => n.id), `${label}: top 10`);
  for (let k = 0; k < 10; ++k) {
    const p = Math.abs(G.next[k].probability - W.next[k].probability);
    assert.ok(p <= 1e-5, `${label}: top ${k} probability differs by ${p}`);
    note('top-10 probabilities', { maxAbs: p, nmse: 0 });
  }
  return worst;
}

const report = (t, label, worst) =>
  t.diagnostic(`${label}: ` + Object.entries(worst).map(([n, w]) => `${n} max abs ${w.maxAbs.toExponential(2)}` +
                                                          ` nmse ${w.nmse.toExponential(2)}`).join('; '));

test('WebGPU runs the whole model: every layer, every stage of an opened layer, the logits and the top 10', async (t) => {
  const { page, context, log } = await openFixture();
  const wasm = await passes(page, 'wasm');
  const gpu = await passes(page, 'webgpu');
  report(t, 'fixture, 14 tokens', compare('fixture', gpu, wasm));
  assert.equal(gpu.model.reused, 0, 'WebGPU passes are full passes');
  // Typing on WebGPU: each keystroke's pass comes from the GPU, and is the WASM engine's.
  assert.equal(await page.evaluate(() => attnviz.setText('A rose is a rose is a rose is a rose')), '');
  const after = await page.evaluate(() => attnviz.computed());
  assert.equal(after.compute.backend, 'webgpu');
  assert.ok(after.model.ids.length > 14);
  const longer = await passes(page, 'webgpu');
  const longerWasm = await passes(page, 'wasm');
  report(t, `fixture, ${after.model.ids.length} tokens`, compare('typed', longer, longerWasm));
  clean(log);
  await context.close();
});

test('every matrix split over a lowered per-buffer limit gives the same numbers; too large falls back', async (t) => {
  const { page, context, log } = await openFixture();
  await calibrated(page);  // its probes hold the GPU's weights otherwise
  const whole = await passes(page, 'webgpu');
  const pieces = await page.evaluate(() => attnviz.gpu.model.mats.map((m) => (m ? m.pieces.length : 0)));
  assert.ok(pieces.every((n) => n <= 1), `unsplit: ${pieces}`);
  // 40000 bytes per buffer: wte (512 x 64 floats, 128 KiB, the tied head too) in 4 pieces, each fc and
  // proj (256 x 64) in 2; every activation of 14 tokens still fits.
  await page.evaluate(() => (attnviz.gpu.testLimitBytes = 40000));
  const split = await passes(page, 'webgpu');
  const splitPieces = await page.evaluate(() => attnviz.gpu.model.mats.map((m) => (m ? m.pieces.length : 0)));
  assert.equal(splitPieces[0], 4, 'wte in pieces');
  assert.equal(splitPieces[5 + 12], 2, 'h.0.mlp.c_fc in pieces');
  assert.equal(splitPieces[5 + 14], 2, 'h.0.mlp.c_proj in pieces');
  const wasm = await passes(page, 'wasm');
  report(t, 'split', compare('split', split, wasm));
  // A piece's products are the whole matrix's, column for column: the same bits.
  assert.deepEqual(split.grid.logits, whole.grid.logits);
  assert.deepEqual(split.grid.layers, whole.grid.layers);
  for (let l = 0; l < whole.layers.length; ++l) assert.deepEqual(split.layers[l], whole.layers[l]);
  // Not even one head's scores (14 x 14 floats) fit: refused, with the sizes, and computed on WASM.
  await page.evaluate(() => (attnviz.gpu.testLimitBytes = 14 * 14 * 4 - 4));
  const refused = await page.evaluate(async () => {
    attnviz.setBackend('webgpu');
    return (await attnviz.computed()).compute;
  });
  assert.equal(refused.backend, 'wasm');
  assert.match(refused.note, /^WebGPU: .* need [\d.]+ KiB, more than this GPU's 0\.8 KiB per buffer: too large for WebGPU here/);
  assert.match(refused.note, /: this pass was computed by the CPU engine instead$/);
  const back = await page.evaluate(() => attnviz.getModelResult());
  assert.deepEqual(back.logits, wasm.grid.logits, 'the fallback is the WASM pass itself');
  await page.evaluate(() => (attnviz.gpu.testLimitBytes = 0));
  const again = await passes(page, 'webgpu');
  compare('limits restored', again, wasm);
  clean(log);
  await context.close();
});

test('a device lost in the middle of a pass: WASM computes it with a note; the next pass uploads again', async () => {
  const { page, context } = await openFixture();
  await calibrated(page);
  const wasm = await passes(page, 'wasm');
  compare('before', await passes(page, 'webgpu'), wasm);
  await page.evaluate(() => (attnviz.gpu.testLoseDevice = true));
  const lost = await page.evaluate(async () => {
    attnviz.setText('A rose is a rose is a rose');
    return (await attnviz.computed()).compute;
  });
  assert.equal(lost.backend, 'wasm');
  assert.match(lost.note, /^WebGPU: the GPU device was lost.*: this pass was computed by the CPU engine instead$/);
  assert.deepEqual((await page.evaluate(() => attnviz.getModelResult())).logits, wasm.grid.logits);
  compare('after', await passes(page, 'webgpu'), wasm);
  await context.close();
});

test('auto: the model calibration measures both backends and keeps models on WASM here', async (t) => {
  const { page, context, log } = await openFixture();
  await calibrated(page);
  const c = await page.evaluate(() => attnviz.status().compute);
  assert.equal(c.choice, 'auto');
  const points = c.model.calibration;
  assert.ok(points.filter((p) => p.backend === 'wasm').length >= 1, JSON.stringify(points));
  assert.ok(points.filter((p) => p.backend === 'webgpu').length >= 2, JSON.stringify(points));
  for (const p of points) assert.ok(p.ms > 0 && p.gflop > 0);
  t.diagnostic(`model calibration: ${JSON.stringify(points)}; WASM ${c.model.cpu_ms_per_gflop.toFixed(1)} ms/GFLOP, ` +
               `WebGPU ${c.model.gpu_overhead_ms.toFixed(1)} ms + ${c.model.gpu_ms_per_gflop.toFixed(1)} ms/GFLOP`);
  // SwiftShader emulates the GPU on the CPU: no probe beat WASM, so auto keeps every pass there.
  for (const p of points.filter((q) => q.backend === 'webgpu'))
    assert.ok(p.ms > c.model.cpu_ms_per_gflop * p.gflop, JSON.stringify(p));
  assert.equal(c.model.threshold_gflop, null);
  assert.equal(await page.evaluate(() => attnviz.setText('A rose is a rose is a rose is')), '');
  const s = await page.evaluate(() => attnviz.computed());
  assert.equal(s.compute.backend, 'wasm');
  assert.equal(s.compute.note, '');
  assert.ok(s.model.reused > 0, 'typing kept the engine\'s incremental path');
  clean(log);
  await context.close();
});
