// WebAssembly threads in headless Chromium: the page served cross-origin isolated (COOP + COEP, as scripts/demo
// serves it) loads the threaded module and runs one thread per core the browser reports (at most 8); served
// without those headers it loads the single-thread module and says why. Both give the same numbers: a whole
// GPT-2's logits and every head's weights, and the chapter-3 layer's result, are identical between the two.
// A model downloaded from a (local imitation of the) hub still opens on the isolated page: COEP require-corp
// lets CORS requests through.
//   ATTNVIZ_SITE   the built site (default build/wasm-release/web/site), with attnviz-mt.* beside attnviz.*
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repo, start, openPage, load, clean } from './harness.mjs';
import { startHub } from './hub_server.mjs';

// 64 tokens or so: enough rows that the engine's passes split across the threads.
const TEXT = 'Every effort moves you forward, and the cat sat on the mat while the dog watched the door ' +
             'and the bird sang on the wire above the quiet street at dawn.';

let isolated, plain;
before(async () => {
  isolated = await start({ isolated: true });
  plain = await start();
});
after(async () => {
  await isolated?.close();
  await plain?.close();
});

// The page on `env`, ready; with what it says of its threads and the cores the browser reports.
async function openOn(env, hash = '') {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + hash);
  const seen = await page.evaluate(() => ({ isolated: crossOriginIsolated, cores: navigator.hardwareConcurrency,
                                            threads: attnviz.status().threads }));
  return { page, context, log, ...seen };
}

test('isolated, the page runs the threaded module on one thread per core (at most 8); else one, and says why', async () => {
  const a = await openOn(isolated);
  assert.equal(a.isolated, true, 'COOP + COEP make the page cross-origin isolated');
  const want = Math.max(1, Math.min(a.cores, 8));
  // Chromium has relaxed SIMD: the GEMMs run the fused kernels (engine/simd/wasm_fma.hpp), in either module.
  const fused = { relaxed_fma: true, kernels: 'CPU kernels: SIMD128 with fused multiply-adds (relaxed SIMD)' };
  assert.deepEqual({ ...a.threads, line: undefined },
                   { count: want, isolated: true, module: 'attnviz-mt', why: want > 1 ? '' : 'the browser reports one core',
                     line: undefined, ...fused });
  assert.equal(a.threads.line, want > 1 ? `CPU: ${want} threads (WebAssembly threads: the page is cross-origin isolated)`
                                        : 'CPU: 1 thread: the browser reports one core');
  const files = a.log.requests.map((u) => new URL(u).pathname.split('/').pop());
  assert.ok(files.includes('attnviz-mt.wasm') && files.includes('attnviz-mt.worker.js'), files.join(' '));
  assert.ok(!files.includes('attnviz.wasm'), 'the single-thread module is not fetched');
  clean(a.log);
  await a.context.close();

  // One thread asked for (as a browser that reports one core gets): the module still starts (its pool keeps
  // one idle Worker, since Emscripten 3.1.6 never starts a module whose pool is empty) and runs on one thread.
  const one = await openOn(isolated, '?threads=1');
  assert.deepEqual(one.threads, { count: 1, isolated: true, module: 'attnviz-mt',
                                  why: 'the page\'s address asks for one (?threads=1)',
                                  line: 'CPU: 1 thread: the page\'s address asks for one (?threads=1)', ...fused });
  clean(one.log);
  await one.context.close();

  const b = await openOn(plain);
  assert.equal(b.isolated, false);
  assert.equal(b.threads.count, 1);
  assert.equal(b.threads.isolated, false);
  assert.equal(b.threads.module, 'attnviz');
  assert.deepEqual({ relaxed_fma: b.threads.relaxed_fma, kernels: b.threads.kernels }, fused);
  assert.equal(b.threads.line, 'CPU: 1 thread: the page is not cross-origin isolated (served without the COOP and ' +
                               'COEP headers scripts/demo sends)');
  const plainFiles = b.log.requests.map((u) => new URL(u).pathname.split('/').pop());
  assert.ok(plainFiles.includes('attnviz.wasm') && !plainFiles.some((f) => f.startsWith('attnviz-mt')),
            plainFiles.join(' '));
  clean(b.log);
  await b.context.close();
});

// A result with the engine's own figures (its thread count, its time) left out: what the view shows.
const numbers = (r) => JSON.stringify({ ...r, engine: undefined });

test('the threaded page gives the same numbers as the single-thread page: a whole GPT-2 and a layer', async () => {
  const a = await openOn(isolated, '#text=' + encodeURIComponent(TEXT));
  const b = await openOn(plain, '#text=' + encodeURIComponent(TEXT));
  // The chapter-3 layer (every stage of every head), at gpt2-small's width so that it splits across the threads
  // (a layer under 1 MFLOP runs on the calling thread).
  const layer = (page) => page.evaluate(() => {
    const error = attnviz.setState({ preset: 'gpt2-small' });
    return { error, result: attnviz.getResult() };
  });
  const layerA = await layer(a.page);
  const layerB = await layer(b.page);
  assert.equal(layerA.error, '');
  assert.equal(layerA.result.engine.threads, a.threads.count);
  assert.equal(layerB.result.engine.threads, 1);
  assert.ok(numbers(layerA.result) === numbers(layerB.result),
            'the layer\'s result differs between the threaded and the single-thread page');

  // The whole seeded gpt2-small: the last position's logits and every layer's every head's weights.
  const run = (page) => page.evaluate(async (text) => {
    const error = await attnviz.openModel({ kind: 'seeded', size: 'gpt2-small', seed: 123 });
    if (error) return { error };
    const set = attnviz.setText(text);
    return { error: set, result: attnviz.getModelResult(), ids: attnviz.status().model.ids };
  }, TEXT);
  const ra = await run(a.page);
  const rb = await run(b.page);
  assert.equal(ra.error, '');
  assert.equal(rb.error, '');
  assert.ok(ra.ids.length >= 32, `${ra.ids.length} tokens`);
  assert.deepEqual(ra.ids, rb.ids);
  assert.equal(ra.result.engine.threads, a.threads.count);
  assert.equal(rb.result.engine.threads, 1);
  assert.equal(ra.result.layers.length, 12);
  assert.ok(numbers(ra.result) === numbers(rb.result),
            'the whole model\'s logits or weights differ between the threaded and the single-thread page');
  // Not a comparison of two empty results: the weights' rows sum to 1 and the logits are finite.
  const row = ra.result.layers[11].heads[0].weights.at(-1);
  assert.ok(Math.abs(row.reduce((s, x) => s + x, 0) - 1) < 1e-5, 'a weights row sums to 1');
  const logits = Array.isArray(ra.result.logits) ? ra.result.logits.flat(Infinity) : Object.values(ra.result.logits);
  assert.ok(logits.length >= 50257 && logits.every(Number.isFinite), `${logits.length} finite logits`);
  for (const p of [a, b]) {
    clean(p.log);
    await p.context.close();
  }
});

test('a model from the hub downloads and opens on the isolated page (CORS passes COEP require-corp)', async () => {
  const dir = join(repo, 'tests', 'fixtures', 'gpt', 'hf-folder');
  const files = Object.fromEntries(readdirSync(dir).filter((f) => f !== 'expected.json')
                                     .map((f) => [f, readFileSync(join(dir, f))]));
  const hub = await startHub({ 'openai-community/gpt2': files });
  try {
    const a = await openOn(isolated, `?hub=${encodeURIComponent(hub.url)}#text=${encodeURIComponent('A rose is a rose')}`);
    assert.equal(a.isolated, true);
    const error = await a.page.evaluate(() => attnviz.hub.open('openai-community/gpt2'));
    assert.equal(error, '');
    await a.page.waitForFunction(() => attnviz.status().model.open, null, { timeout: 60000 });
    const m = await a.page.evaluate(() => attnviz.status().model);
    assert.equal(m.layers, 2);
    assert.equal(m.heads, 4);
    assert.ok(hub.requests.some((r) => r.server === 'cdn' && r.path.startsWith('/blobs/')),
              'the weights came from the other origin (the CDN)');
    // The hub answers 404 for the files a repository lacks (tokenizer.json here), as the real one does.
    a.log.errors = a.log.errors.filter((e) => !/^Failed to load resource: the server responded with a status of 404/.test(e));
    clean(a.log);
    await a.context.close();
  } finally {
    await hub.close();
  }
});
