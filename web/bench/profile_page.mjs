// Where the page's time goes: a CPU profile of the seeded gpt2-small's full passes (every head's weights kept, the
// last position's logits) in headless Chromium, on one thread, taken by V8's sampling profiler over the DevTools
// protocol. Prints each function's share of the samples and its milliseconds per pass, by self time. The fused
// GEMM kernels (engine/simd/wasm_fma.hpp) are modules of their own and show as wasm-function[0]. Function names
// need a module linked with --profiling-funcs; without it the engine's functions show as wasm-function[N]:
//
//   cmake --preset wasm-release -DATTNVIZ_PAGE_PROFILING=ON && cmake --build --preset wasm-release --target attnviz_page
//   node web/bench/profile_page.mjs [--site build/wasm-release/web/site] [--T 512] [--passes 3] [--top 25]
//                                   [--callers NAME] [--inclusive [--under NAME]]
//   cmake --preset wasm-release -DATTNVIZ_PAGE_PROFILING=OFF   (and build again: the site as it ships)
//
// The samples cover the passes and what lies between them (the harness's calls into the tab: "(program)"), so
// the shares of the engine's functions are the figures to read; the passes' own times are printed with them.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { serve } from '../tools/serve.mjs';
import { site as builtSite } from '../tests/harness.mjs';
import { launch, load, median, opt, pagePass, pageTab } from './peer_common.mjs';

const site = opt('--site', builtSite);
const T = Number(opt('--T', '512')), passes = Number(opt('--passes', '3')), top = Number(opt('--top', '25'));
const callersOf = opt('--callers', ''); // also print where NAME's self time is spent from: each call path's ms
const inclusive = process.argv.includes('--inclusive'); // also print each function's time with its callees'
const under = opt('--under', ''); // ... counting only the samples with NAME on their stack
if (!existsSync(join(site, 'attnviz.wasm'))) throw new Error(`--site ${site}: no attnviz.wasm (build the page)`);
if (!(Number.isInteger(T) && T >= 1 && T <= 1024)) throw new Error('--T: a token count from 1 to 1024');
if (!(Number.isInteger(passes) && passes >= 1)) throw new Error('--passes: a whole number, at least 1');

const { server, url } = await serve(site, 0);
const { browser, outside, newTab } = await launch([url]);
try {
  console.log(`site: ${site}\nload average at the start: ${load()}`);
  const tab = await pageTab(newTab, url);
  console.log(`kernels: ${tab.threads.kernels}; ${tab.threads.line}`);
  for (let warm = 0; warm < 2; ++warm) await pagePass(tab, T); // V8 tiers up the hot functions first
  const cdp = await tab.page.context().newCDPSession(tab.page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 200 }); // microseconds
  await cdp.send('Profiler.start');
  const js = [], engine = [];
  for (let i = 0; i < passes; ++i) {
    const r = await pagePass(tab, T);
    js.push(r.js);
    engine.push(r.pass);
  }
  const { profile } = await cdp.send('Profiler.stop');
  console.log(`T = ${T}, ${passes} passes: median ${median(js).toFixed(0)} ms in JS, ${median(engine).toFixed(0)} ms ` +
              `in the engine`);

  // self time per function name: each sample's node, weighted by the time to the next sample
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const name = nodes.get(id).callFrame.functionName || '(anonymous)';
    self.set(name, (self.get(name) ?? 0) + us);
    total += us;
  });
  console.log('\n share   ms/pass  function (self time)');
  for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1e3 / passes).toFixed(1).padStart(8)}  ` +
                name.slice(0, 160));
  // each node's caller, and a node's function name, for the listings below
  const parentOf = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const nameOf = (id) => nodes.get(id).callFrame.functionName || '(anonymous)';
  if (inclusive) {
    const within = new Map();
    profile.samples.forEach((id, i) => {
      const names = new Set();
      for (let p = id; p !== undefined; p = parentOf.get(p)) names.add(nameOf(p));
      if (under && !names.has(under)) return;
      for (const name of names) within.set(name, (within.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0));
    });
    console.log('\n ms/pass  function (with its callees)');
    for (const [name, us] of [...within].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`${(us / 1e3 / passes).toFixed(1).padStart(8)}  ${name.slice(0, 160)}`);
  }
  if (callersOf) {
    // the sampled nodes of NAME, keyed by the path of function names above them (innermost first, 6 deep)
    const paths = new Map();
    profile.samples.forEach((id, i) => {
      if (nameOf(id) !== callersOf) return;
      const names = [];
      for (let p = parentOf.get(id); p !== undefined && names.length < 6; p = parentOf.get(p)) names.push(nameOf(p));
      const key = names.join(' < ');
      paths.set(key, (paths.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0));
    });
    console.log(`\n ms/pass  ${callersOf} called from (innermost caller first)`);
    for (const [key, us] of [...paths].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`${(us / 1e3 / passes).toFixed(1).padStart(8)}  ${key.slice(0, 240)}`);
  }
  console.log(`load average at the end: ${load()}`);
  if (outside.length) throw new Error('requests left 127.0.0.1: ' + outside.join(', '));
} finally {
  await browser.close();
  await new Promise((done) => server.close(done));
}
