// The page's WebGPU backend in headless Chromium (--enable-unsafe-webgpu: SwiftShader's adapter, a CPU
// emulation, so only correctness is checked here): WebGPU results against the WASM engine's for a spread of
// configurations, the split of big layers into chunks of heads, refusals and a lost device falling back to
// WASM with a note, the automatic choice's calibration, and a browser without WebGPU.
//   node --test web/tests/gpu.test.mjs    (ATTNVIZ_SITE: the built site, default build/wasm-release/web/site)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { start, openPage, load } from './harness.mjs';

let env;
before(async () => {
  env = await start({ extraArgs: ['--enable-unsafe-webgpu'] });
});
after(async () => env && env.close());

const words = (n) => Array.from({ length: n }, (_, i) => 'w' + i).join(' ');

// Runs the page's current sentence and state on WASM, then on WebGPU, and compares every tensor in the page:
// max abs error and normalized MSE (sum of squared errors over sum of squares) per tensor.
function compareBackends(page) {
  return page.evaluate(async () => {
    const names = ['q', 'k', 'v', 'scores', 'scaled', 'weights', 'dropped', 'context', 'output'];
    assert(attnviz.setBackend('wasm') === '');
    let s = await attnviz.computed();
    if (s.error) return { error: s.error };
    const wasm = Object.fromEntries(names.map((n) => [n, attnviz.getTensor(n)]));
    assert(attnviz.setBackend('webgpu') === '');
    s = await attnviz.computed();
    const out = { backend: s.compute.backend, note: s.compute.note, error: s.error, tensors: {} };
    for (const n of names) {
      const g = attnviz.getTensor(n), c = wasm[n];
      if (!g || !c || g.length !== c.length) {
        out.tensors[n] = { missing: [g ? g.length : null, c ? c.length : null] };
        continue;
      }
      let maxAbs = 0, err = 0, sq = 0, infMismatch = 0;
      for (let i = 0; i < c.length; ++i) {
        if (!Number.isFinite(c[i]) || !Number.isFinite(g[i])) {
          if (c[i] !== g[i]) ++infMismatch;
          continue;
        }
        const d = g[i] - c[i];
        maxAbs = Math.max(maxAbs, Math.abs(d));
        err += d * d;
        sq += c[i] * c[i];
      }
      out.tensors[n] = { n: c.length, maxAbs, nmse: sq > 0 ? err / sq : err, infMismatch };
    }
    attnviz.setBackend('auto');
    return out;
    function assert(ok) {
      if (!ok) throw new Error('setBackend refused');
    }
  });
}

function checkClose(label, r) {
  assert.equal(r.error, '', `${label}: ${r.error}`);
  assert.equal(r.note, '', `${label}: fell back: ${r.note}`);
  assert.equal(r.backend, 'webgpu', label);
  const t = r.tensors;
  assert.ok(t.weights.n > 0, `${label}: weights`);
  assert.ok(t.weights.maxAbs <= 1e-5, `${label}: weights max abs ${t.weights.maxAbs}`);
  assert.ok(t.output.nmse <= 1e-8, `${label}: output nmse ${t.output.nmse}`);
  for (const [name, x] of Object.entries(t)) {
    if (x.missing) {
      assert.equal(x.missing[0], x.missing[1], `${label}: ${name} is in one result only`);
      continue;
    }
    assert.equal(x.infMismatch, 0, `${label}: ${name} masks differ`);
    assert.ok(x.nmse <= 1e-8, `${label}: ${name} nmse ${x.nmse}`);
  }
}

// Every variant with weights, 1 to 512 tokens, 1 to 25 heads, dropout on (both PyTorch flavours) and off,
// biases, the mask off, evaluation mode.
const spread = [
  ['self_v1, book', { variant: 'self_v1' }, 'Your journey starts with one step'],
  ['self_v2, one token', { variant: 'self_v2', 'd-in': 16, 'd-out': 8 }, 'hello'],
  ['causal, dropout 0.5, biases', { variant: 'causal', 'd-in': 32, 'd-out': 16, dropout: 0.5, 'qkv-bias': '' }, words(37)],
  ['wrapper, 25 heads, dropout 0.1', { variant: 'wrapper', 'd-in': 24, 'd-out': 4, heads: 25, dropout: 0.1 }, words(100)],
  ['mha, 512 tokens', { variant: 'mha', 'd-in': 64, 'd-out': 64, heads: 4 }, words(512)],
  ['mha, 12 heads, mkl dropout 0.2, biases',
   { variant: 'mha', 'd-in': 96, 'd-out': 96, heads: 12, dropout: 0.2, 'dropout-rng': 'mkl', 'qkv-bias': '' }, words(130)],
  ['mha, 25 heads, dropout 0.1', { variant: 'mha', 'd-in': 50, 'd-out': 100, heads: 25, dropout: 0.1 }, words(33)],
  ['mha, gpt2-small, 64 tokens', { preset: 'gpt2-small' }, words(64)],
  ['mha, mask off', { variant: 'mha', 'd-in': 8, 'd-out': 8, heads: 2, 'no-mask': '' }, words(20)],
  ['mha, eval mode', { variant: 'mha', 'd-in': 8, 'd-out': 8, heads: 2, dropout: 0.1, eval: '' }, words(70)],
  ['simplified', { variant: 'simplified' }, 'Your journey starts with one step'],
];

test('WebGPU matches the WASM engine across variants, lengths, heads and dropout', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url);
  const ready = await page.waitForFunction(() => attnviz.status().compute.webgpu !== 'starting');
  await ready.dispose();
  const status = await page.evaluate(() => attnviz.status().compute);
  assert.equal(status.webgpu, 'ready', `WebGPU did not start: ${status.why}`);
  for (const [label, state, text] of spread) {
    const error = await page.evaluate(({ state, text }) => attnviz.setState({ ...state, text }), { state, text });
    assert.equal(error, '', `${label}: ${error}`);
    const r = await compareBackends(page);
    checkClose(label, r);
    const tokens = await page.evaluate(() => attnviz.status().tokens);
    assert.equal(tokens, text.split(' ').length, label);
  }
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('big layers go a chunk of heads at a time; too big is refused and computed on WASM with a note', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url);
  // 90 tokens, 6 heads of 2: one head's scores (32400 bytes) outweigh Q, K and V together (12960 bytes).
  await page.evaluate(() => attnviz.setState({ variant: 'mha', 'd-in': 32, 'd-out': 12, heads: 6, dropout: 0.3,
                                               text: Array.from({ length: 90 }, (_, i) => 'w' + i).join(' ') }));
  // Two heads' scores per buffer: three chunks.
  await page.evaluate(() => (attnviz.gpu.testLimitBytes = 2 * 90 * 90 * 4));
  checkClose('chunks of 2 heads', await compareBackends(page));
  // Not even one head's scores fit: refused, with the reason, and the view comes from WASM.
  await page.evaluate(() => (attnviz.gpu.testLimitBytes = 90 * 90 * 4 - 4));
  const r = await compareBackends(page);
  assert.equal(r.backend, 'wasm');
  assert.match(r.note, /one head's scores \(T x T\) need 31\.6 KiB, more than this GPU's 31\.6 KiB per buffer/);
  assert.match(r.note, /computed by the CPU engine instead/);
  assert.equal(r.tensors.weights.maxAbs, 0, 'the fallback is the WASM result itself');
  // The note shows on the page (it is in the status the UI draws from) until a job succeeds again.
  await page.evaluate(() => (attnviz.gpu.testLimitBytes = 0));
  checkClose('limits restored', await compareBackends(page));
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('a device lost in the middle of a job: WASM computes the view, the next job gets a new device', async () => {
  const { page, context } = await openPage(env);
  await load(page, env.url);
  await page.evaluate(() => attnviz.setState({ variant: 'mha', 'd-in': 16, 'd-out': 16, heads: 4, dropout: 0.1,
                                               text: 'the device goes away in the middle of this' }));
  checkClose('before', await compareBackends(page));
  // The calibration's probes share the device: lose it in the session's job, not in one of theirs.
  const calibrated = await page.waitForFunction(() => attnviz.status().compute.calibrated, null, { timeout: 60000 });
  await calibrated.dispose();
  await page.evaluate(() => (attnviz.gpu.testLoseDevice = true));
  const lost = await compareBackends(page);
  assert.equal(lost.backend, 'wasm');
  assert.match(lost.note, /WebGPU: the GPU device was lost/);
  assert.equal(lost.tensors.output.maxAbs, 0);
  checkClose('after', await compareBackends(page));
  await context.close();
});

test('auto: calibrated on this machine, and the view says which backend computed it', async () => {
  const { page, context } = await openPage(env);
  await load(page, env.url);
  const done = await page.waitForFunction(() => attnviz.status().compute.calibrated, null, { timeout: 60000 });
  await done.dispose();
  const c = await page.evaluate(() => attnviz.status().compute);
  assert.equal(c.choice, 'auto');
  assert.ok(c.calibration.filter((p) => p.backend === 'wasm').length >= 1);
  assert.ok(c.calibration.filter((p) => p.backend === 'webgpu').length >= 2, JSON.stringify(c.calibration));
  for (const p of c.calibration) assert.ok(p.ms > 0 && p.gflop > 0);
  // The book's layer is tiny: whatever the GPU, the CPU computes it faster than a GPU round trip.
  assert.equal(c.backend, 'wasm');
  // gpt2-small at 200 tokens: auto follows the fitted crossover.
  await page.evaluate(() => attnviz.setState({ preset: 'gpt2-small', text: Array.from({ length: 200 }, (_, i) => 'w' + i).join(' ') }));
  const s = await page.evaluate(() => attnviz.computed());
  const gflop = 2 * 200 * (3 * 768 * 768 + 768 * 200 + 768 * 768) / 1e9;
  const gpu = s.compute.threshold_gflop !== null && gflop >= s.compute.threshold_gflop;
  assert.equal(s.compute.backend, gpu ? 'webgpu' : 'wasm', JSON.stringify(s.compute));
  await context.close();
});

test('without WebGPU the page says so, runs on WASM, and a forced WebGPU falls back with a note', async () => {
  const plain = await start();  // no --enable-unsafe-webgpu
  try {
    const { page, log } = await openPage(plain);
    await load(page, plain.url);
    const ready = await page.waitForFunction(() => attnviz.status().compute.webgpu !== 'starting');
    await ready.dispose();
    const c = await page.evaluate(() => attnviz.status().compute);
    assert.equal(c.webgpu, 'unavailable');
    assert.match(c.why, /WebGPU|adapter/);
    await page.evaluate(() => attnviz.setState({ variant: 'mha', 'd-in': 8, 'd-out': 8, heads: 2 }));
    const r = await compareBackends(page);
    assert.equal(r.backend, 'wasm');
    assert.match(r.note, /^WebGPU: .*computed by the CPU engine instead$/);
    assert.equal(r.tensors.output.maxAbs, 0);
    assert.deepEqual(log.errors, []);
  } finally {
    await plain.close();
  }
});
