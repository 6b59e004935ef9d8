// The page's whole-model forward with WebAssembly threads against one thread, in the same headless Chromium
// (Debian's, through playwright-core), printed as a table and as JSON (last line). The same site is served twice
// from 127.0.0.1: cross-origin isolated (COOP + COEP, as scripts/demo serves it), where the page loads the
// threaded module (attnviz-mt) and runs a thread per core (at most 8), and without those headers, where it loads
// the single-thread module. The model is the seeded gpt2-small (torch.manual_seed(123), eval), every head's
// attention weights kept; each pass is a full one (the first word changes every time, nothing is reused), timed
// from JS around attnviz.setText (which recomputes synchronously) and by the engine (status().model.pass_ms).
// A third tab runs the threaded module on one thread (?threads=1): what the threaded build itself costs.
// Before timing, the pages' logits and weights at T = 16 are checked identical.
// With --ort (and bench/export_gpt2_onnx.py's exports), onnxruntime-web's wasm EP runs the same ids with the same
// thread counts: numThreads = the threaded page's count on the isolated origin, 1 on the other (ORT's threads
// need isolation too). Sides take turns over rounds, never at once, the order alternating; medians after a
// warm-up.
//   node web/bench/threads_page.mjs [--quick] [--T 16,128,512] [--rounds 5] [--ort] [--models build/bench]
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve } from '../tools/serve.mjs';
import { site, chromiumPath, chromiumArgs } from '../tests/harness.mjs';
import { args, load, median, models, ortDist, rounds, runsPerRound, Ts } from './peer_common.mjs';

const withOrt = args.includes('--ort');

const needed = [join(site, 'attnviz.wasm'), join(site, 'attnviz-mt.wasm')];
if (withOrt) needed.push(join(ortDist, 'ort.wasm.min.mjs'), join(models, 'gpt2-small-last.onnx'));
for (const f of needed)
  if (!existsSync(f))
    throw new Error(`${f} missing: cmake --build --preset wasm-release --target attnviz_page` +
                    (withOrt ? '; cd web && npm ci; /usr/bin/python3 bench/export_gpt2_onnx.py' : ''));

// The machine: its processor and the widest x86 SIMD it has (the page itself always runs SIMD128).
const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
const cpu = (cpuinfo.match(/^model name\s*:\s*(.*)$/m) || [])[1] || 'unknown';
const flags = (cpuinfo.match(/^flags\s*:\s*(.*)$/m) || [])[1] || '';
const isa = /\bavx512f\b/.test(flags) ? 'AVX-512' : /\bavx2\b/.test(flags) ? 'AVX2' : 'x86-64 or other';

// One root for both origins: site/, ort/ (onnxruntime-web's dist) and models/, linked into a temporary folder.
const root = mkdtempSync(join(tmpdir(), 'attnviz-threads-'));
symlinkSync(site, join(root, 'site'));
if (withOrt) {
  symlinkSync(ortDist, join(root, 'ort'));
  symlinkSync(models, join(root, 'models'));
}
writeFileSync(join(root, 'ort.html'), '<!doctype html><title>onnxruntime-web peer</title>\n');
const isolatedServer = await serve(root, 0, { isolated: true });
const plainServer = await serve(root, 0);
const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
const outside = [];
async function newTab() {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(isolatedServer.url) && !u.startsWith(plainServer.url) && !/^(data|blob):/.test(u)) outside.push(u);
  });
  page.on('pageerror', (e) => console.error('page error: ' + e.message));
  return page;
}

// The texts: T tokens, the first word alternating so that every pass is a full one.
const WORDS = [' the', ' cat', ' sat', ' on', ' a', ' mat'];
const text = (T, k) => ['One', 'Two'][k % 2] + Array.from({ length: T - 1 }, (_, i) => WORDS[i % WORDS.length]).join('');
const figures = { chromium: browser.version(), cpu, isa, load_start: load(), T: {} };
const samples = {};
const keep = (side, T, ms) => ((samples[side] ??= {})[T] ??= []).push(ms);

// The two pages, the seeded model opened once in each.
async function pageTab(server, query = '') {
  const page = await newTab();
  await page.goto(server.url + 'site/' + query);
  await page.evaluate(() => attnviz.ready);
  const t0 = Date.now();
  const error = await page.evaluate(() => attnviz.openModel({ kind: 'seeded', size: 'gpt2-small', seed: 123 }));
  if (error) throw new Error('attnviz.openModel: ' + error);
  const info = await page.evaluate(() => ({ isolated: crossOriginIsolated, cores: navigator.hardwareConcurrency,
                                            threads: attnviz.status().threads }));
  return { page, calls: 0, open_s: (Date.now() - t0) / 1e3, ...info };
}
const threaded = await pageTab(isolatedServer);
const single = await pageTab(plainServer);
const mtOne = await pageTab(isolatedServer, '?threads=1');
if (!threaded.isolated || threaded.threads.module !== 'attnviz-mt' || single.threads.count !== 1 ||
    mtOne.threads.module !== 'attnviz-mt' || mtOne.threads.count !== 1)
  throw new Error(`the pages are not as asked: ${JSON.stringify([threaded.threads, single.threads, mtOne.threads])}`);
figures.threads = threaded.threads.count;
figures.cores = threaded.cores;
figures.open_s = { threaded: threaded.open_s, single: single.open_s, threaded_module_one_thread: mtOne.open_s };

async function pass(tab, T, { values = false } = {}) {
  await tab.page.bringToFront();
  const t = text(T, tab.calls++);
  const r = await tab.page.evaluate(({ t, values }) => {
    const t0 = performance.now();
    const error = attnviz.setText(t);
    const js = performance.now() - t0;
    const m = attnviz.status().model;
    const out = { error, js, pass: m.pass_ms, reused: m.reused, ids: m.ids };
    if (values) out.numbers = JSON.stringify({ ...attnviz.getModelResult(), engine: undefined });
    return out;
  }, { t, values });
  if (r.error) throw new Error(`attnviz.setText at T = ${T}: ${r.error}`);
  if (r.ids.length !== T || r.reused !== 0)
    throw new Error(`attnviz: ${r.ids.length} tokens, ${r.reused} reused (want ${T}, 0)`);
  return r;
}

// onnxruntime-web's tabs: the last position's logits (what attnviz computes), threads as the page on that origin.
async function ortTab(server, threads) {
  const page = await newTab();
  await page.goto(server.url + 'ort.html');
  const info = await page.evaluate(async (threads) => {
    const ort = await import('/ort/ort.wasm.min.mjs');
    ort.env.wasm.wasmPaths = '/ort/';
    ort.env.wasm.numThreads = threads;
    ort.env.wasm.simd = true;
    ort.env.wasm.proxy = false;
    const t0 = performance.now();
    window.session = await ort.InferenceSession.create('/models/gpt2-small-last.onnx',
                                                       { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    window.ort = ort;
    return { create_s: (performance.now() - t0) / 1e3, threads: ort.env.wasm.numThreads, isolated: crossOriginIsolated };
  }, threads);
  return { page, ...info };
}
async function ortPass(tab, ids) {
  await tab.page.bringToFront();
  return tab.page.evaluate(async (ids) => {
    const input = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);
    const t0 = performance.now();
    const out = await session.run({ ids: input });
    const js = performance.now() - t0;
    for (const t of Object.values(out)) t.dispose();
    input.dispose();
    return js;
  }, ids);
}
let ortThreaded, ortSingle;
if (withOrt) {
  ortThreaded = await ortTab(isolatedServer, figures.threads);
  ortSingle = await ortTab(plainServer, 1);
  figures.onnxruntime_web = { threads: [ortThreaded.threads, ortSingle.threads],
                              isolated: [ortThreaded.isolated, ortSingle.isolated],
                              session_create_s: [ortThreaded.create_s, ortSingle.create_s] };
}

// The same numbers on both pages (the engine's reductions do not depend on the thread count).
{
  const a = await pass(threaded, 16, { values: true });
  const b = await pass(single, 16, { values: true });
  const c = await pass(mtOne, 16, { values: true });
  figures.identical_at_16 = a.numbers === b.numbers && JSON.stringify(a.ids) === JSON.stringify(b.ids) &&
                            c.numbers === b.numbers;
  if (!figures.identical_at_16) throw new Error('the threaded and the single-thread page disagree at T = 16');
}

const sides = ['threaded', 'single', 'mt1', ...(withOrt ? ['ort_threaded', 'ort_single'] : [])];
const tabs = { threaded, single, mt1: mtOne };
async function turn(T, order) {
  let ids;
  for (const side of order) {
    if (tabs[side]) {
      const r = await pass(tabs[side], T);
      ids = r.ids;
      keep(side + '_js', T, r.js);
      keep(side + '_pass', T, r.pass);
    } else {
      // ORT runs the ids the page just ran (a page side comes first in every order below).
      keep(side, T, await ortPass(side === 'ort_threaded' ? ortThreaded : ortSingle, ids));
    }
  }
}
for (const T of Ts) for (let k = 0; k < 2; ++k) await turn(T, sides);  // warm-up: V8's tiers, ORT's arena
for (let round = 0; round < rounds; ++round)
  for (const T of Ts)
    for (let k = 0; k < runsPerRound(T); ++k) {
      const order = (round + k) % 2 ? ['single', 'threaded', 'mt1', ...sides.slice(3).reverse()] : sides;
      await turn(T, order);
    }
figures.load_end = load();
for (const T of Ts) {
  const m = (side) => (samples[side] ? median(samples[side][T]) : null);
  figures.T[T] = { threaded_js_ms: m('threaded_js'), threaded_pass_ms: m('threaded_pass'),
                   single_js_ms: m('single_js'), single_pass_ms: m('single_pass'),
                   threaded_module_one_thread_js_ms: m('mt1_js'), threaded_module_one_thread_pass_ms: m('mt1_pass'),
                   ort_threaded_ms: m('ort_threaded'), ort_single_ms: m('ort_single'),
                   runs: samples.threaded_js[T].length };
}
figures.outside_requests = outside;
await browser.close();
await new Promise((r) => isolatedServer.server.close(r));
await new Promise((r) => plainServer.server.close(r));
rmSync(root, { recursive: true });
if (outside.length) throw new Error('requests left 127.0.0.1: ' + outside.join(', '));

const f0 = (x) => (x === null ? '     -' : x.toFixed(0).padStart(6)), f2 = (x) => x.toFixed(2).padStart(5);
console.log(`gpt2-small (seeded, eval), every head's attention weights kept, last position's logits; headless ` +
            `Chromium ${figures.chromium}; ${cpu} (${isa}), ${figures.cores} cores reported`);
console.log(`load average (1/5/15 min): ${figures.load_start} at the start, ${figures.load_end} at the end`);
console.log(`threaded page: ${figures.threads} threads (cross-origin isolated); single-thread page: 1 thread; ` +
            `numbers identical at T = 16: ${figures.identical_at_16}`);
console.log(`\nmedian ms   threaded (JS / engine)   1 thread (JS / engine)   speedup   threaded module on 1 thread` +
            (withOrt ? `   ORT-web ${figures.threads} threads   1 thread   attnviz/ORT threaded   1 thread` : '') + '   runs');
for (const T of Ts) {
  const t = figures.T[T];
  let line = `T = ${String(T).padEnd(6)}  ${f0(t.threaded_js_ms)} / ${f0(t.threaded_pass_ms)}         ` +
             `${f0(t.single_js_ms)} / ${f0(t.single_pass_ms)}          ${f2(t.single_js_ms / t.threaded_js_ms)}x` +
             `   ${f0(t.threaded_module_one_thread_js_ms)} / ${f0(t.threaded_module_one_thread_pass_ms)}`;
  if (withOrt)
    line += `          ${f0(t.ort_threaded_ms)}   ${f0(t.ort_single_ms)}              ` +
            `${f2(t.ort_threaded_ms / t.threaded_js_ms)}x      ${f2(t.ort_single_ms / t.single_js_ms)}x`;
  console.log(line + `   ${t.runs}`);
}
console.log(`speedup: 1-thread JS ms / threaded JS ms (target at T = 512 with 2 threads: >= 1.7)` +
            (withOrt ? '; attnviz/ORT: ORT ms / attnviz JS ms with the same threads' : ''));
console.log(JSON.stringify(figures));
