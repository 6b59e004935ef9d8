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
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { serve } from '../tools/serve.mjs';
import { site } from '../tests/harness.mjs';
import { args, keep, launch, linkedRoot, load, median, models, ortDist, ortPass, ortTab, pagePass, pageTab, rounds,
         runsPerRound, samples, Ts } from './peer_common.mjs';

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
const root = linkedRoot('attnviz-threads-', withOrt);
const isolatedServer = await serve(root, 0, { isolated: true });
const plainServer = await serve(root, 0);
const { browser, outside, newTab } = await launch([isolatedServer.url, plainServer.url]);
const figures = { chromium: browser.version(), cpu, isa, load_start: load(), T: {} };

// The pages, the seeded model opened once in each.
const open = (server, query = '') => pageTab(newTab, server.url + 'site/' + query);
const threaded = await open(isolatedServer);
const single = await open(plainServer);
const mtOne = await open(isolatedServer, '?threads=1');
if (!threaded.isolated || threaded.threads.module !== 'attnviz-mt' || single.threads.count !== 1 ||
    mtOne.threads.module !== 'attnviz-mt' || mtOne.threads.count !== 1)
  throw new Error(`the pages are not as asked: ${JSON.stringify([threaded.threads, single.threads, mtOne.threads])}`);
figures.threads = threaded.threads.count;
figures.cores = threaded.cores;
figures.open_s = { threaded: threaded.open_s, single: single.open_s, threaded_module_one_thread: mtOne.open_s };

let ortThreaded, ortSingle;
if (withOrt) {
  ortThreaded = await ortTab(newTab, isolatedServer.url, 'gpt2-small-last.onnx', figures.threads);
  ortSingle = await ortTab(newTab, plainServer.url, 'gpt2-small-last.onnx', 1);
  figures.onnxruntime_web = { threads: [ortThreaded.threads, ortSingle.threads],
                              isolated: [ortThreaded.isolated, ortSingle.isolated],
                              session_create_s: [ortThreaded.create_s, ortSingle.create_s] };
}

// The same numbers on both pages (the engine's reductions do not depend on the thread count).
{
  const a = await pagePass(threaded, 16, { values: true });
  const b = await pagePass(single, 16, { values: true });
  const c = await pagePass(mtOne, 16, { values: true });
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
      const r = await pagePass(tabs[side], T);
      ids = r.ids;
      keep(side + '_js', T, r.js);
      keep(side + '_pass', T, r.pass);
    } else {
      // ORT runs the ids the page just ran (a page side comes first in every order below).
      keep(side, T, (await ortPass(side === 'ort_threaded' ? ortThreaded : ortSingle, ids)).js);
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
