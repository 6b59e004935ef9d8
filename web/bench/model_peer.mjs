// The page's whole-model forward against onnxruntime-web (the engine Transformer Explainer runs), one thread
// each, in the same headless Chromium (Debian's, through playwright-core), printed as a table and as JSON (last
// line). The model is the seeded gpt2-small (torch.manual_seed(123); the book's GPTModel(GPT_CONFIG_124M), eval)
// on both sides, every layer's attention weights (every head's) kept by both:
//   attnviz             the page's model view: attnviz.openModel seeded, then attnviz.setText(text) per pass
//                       (a full pass: the first word changes every time, so nothing is reused); the engine's own
//                       time (status().model.pass_ms) and the call's time from JS (performance.now() around setText,
//                       which recomputes synchronously and draws the page's two frames before it returns);
//   onnxruntime-web     the wasm execution provider, numThreads = 1, SIMD128, on bench/export_gpt2_onnx.py's
//                       exports: session.run on the same T ids (int64), timed from JS; `gpt2-small.onnx` returns
//                       the logits of every position (GPTModel as it is), `gpt2-small-last.onnx` the last
//                       position's only (what attnviz computes); both return the 12 weights tensors (1, H, T, T).
// Each side has its own tab. They run one after the other, never at once, and take turns over rounds (the order
// alternating), so that the machine's other work moves them alike; the figures are medians after a warm-up.
// Before timing, the last position's logits and every head's weights at T = 16 are compared across the two.
// Everything is served from 127.0.0.1: the page, onnxruntime-web's dist/ (from web/node_modules) and the models.
//
//   /usr/bin/python3 bench/export_gpt2_onnx.py            # build/bench/gpt2-small{,-last}.onnx
//   node web/bench/model_peer.mjs [--quick] [--T 16,128,512] [--rounds 5] [--models build/bench]
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { serve } from '../tools/serve.mjs';
import { site } from '../tests/harness.mjs';
import { keep, launch, linkedRoot, load, median, models, ortDist, ortPass, ortTab, pagePass, pageTab, rounds,
         runsPerRound, samples, text, Ts } from './peer_common.mjs';

for (const f of [join(site, 'attnviz.wasm'), join(ortDist, 'ort.wasm.min.mjs'), join(models, 'gpt2-small.onnx'),
                 join(models, 'gpt2-small-last.onnx')])
  if (!existsSync(f))
    throw new Error(`${f} missing: cmake --build --preset wasm-release; cd web && npm ci; ` +
                    '/usr/bin/python3 bench/export_gpt2_onnx.py');

// One origin for everything: site/, ort/ (onnxruntime-web's dist) and models/, linked into a temporary root.
const root = linkedRoot('attnviz-peer-', true);
const { server, url } = await serve(root, 0);
const { browser, outside, newTab } = await launch([url]);
const figures = { chromium: browser.version(), load_start: load(), T: {} };

// attnviz's tab: the page, the seeded model opened once.
const av = await pageTab(newTab, url + 'site/');
figures.attnviz_open_s = av.open_s;
const idsOf = new Map(); // text -> its ids, as the page's tokenizer gave them
async function attnvizPass(T) {
  const r = await pagePass(av, T);
  idsOf.set(text(T, av.calls - 1), r.ids);
  return r;
}

// onnxruntime-web's tabs, one session each (each tab has its own 4 GB WebAssembly memory).
const ortAll = await ortTab(newTab, url, 'gpt2-small.onnx', 1);
const ortLast = await ortTab(newTab, url, 'gpt2-small-last.onnx', 1);
figures.onnxruntime_web = { version: ortAll.version, threads: ortAll.threads, cross_origin_isolated: ortAll.isolated,
                            session_create_s: [ortAll.create_s, ortLast.create_s] };

// The same numbers? The last position's logits and every head's weights at T = 16, attnviz against both exports.
{
  const r = await attnvizPass(16);
  const res = await av.page.evaluate(() => attnviz.getModelResult());
  const flat = (x) => (Array.isArray(x) ? x.flat(Infinity) : Object.values(x));
  const logits = flat(res.logits);
  const weights = res.layers.map((l) => l.heads.map((h) => flat(h.weights)).flat());
  figures.check = {};
  for (const [name, tab] of [['all', ortAll], ['last', ortLast]]) {
    const o = await ortPass(tab, r.ids, { values: true });
    const scale = Math.max(...logits.map(Math.abs));
    const dl = Math.max(...logits.map((x, i) => Math.abs(x - o.last_logits[i])));
    let dw = 0;
    weights.forEach((w, l) => w.forEach((x, i) => (dw = Math.max(dw, Math.abs(x - o.weights[l][i])))));
    const argmax = (xs) => xs.reduce((b, x, i) => (x > xs[b] ? i : b), 0);
    figures.check[name] = { logits_max_abs_diff: dl, logits_max_abs: scale, weights_max_abs_diff: dw,
                            same_argmax: argmax(logits) === argmax(o.last_logits), layers: o.weights.length };
    if (o.weights.length !== weights.length || dl > 1e-3 * scale || dw > 1e-4 || !figures.check[name].same_argmax)
      throw new Error(`attnviz and onnxruntime-web (${name}) disagree: ${JSON.stringify(figures.check[name])}`);
  }
}

// Warm-up (V8 compiles WebAssembly in tiers; ORT sizes its arena), then the rounds.
for (const T of Ts) {
  for (let k = 0; k < 2; ++k) {
    const { ids } = await attnvizPass(T);
    await ortPass(ortAll, ids);
    await ortPass(ortLast, ids);
  }
}
for (let round = 0; round < rounds; ++round) {
  for (const T of Ts) {
    for (let k = 0; k < runsPerRound(T); ++k) {
      const sides = ['attnviz', 'all', 'last'];
      if ((round + k) % 2) sides.reverse();
      let ids;
      for (const side of sides) {
        if (side === 'attnviz') {
          const r = await attnvizPass(T);
          ids = r.ids;
          keep('attnviz_js', T, r.js);
          keep('attnviz_pass', T, r.pass);
        } else {
          ids ??= idsOf.get(text(T, av.calls)); // when ORT goes first: the ids attnviz is about to run
          keep('ort_' + side, T, (await ortPass(side === 'all' ? ortAll : ortLast, ids)).js);
        }
      }
    }
  }
}
figures.load_end = load();
for (const T of Ts) {
  const m = (side) => median(samples[side][T]);
  figures.T[T] = { attnviz_js_ms: m('attnviz_js'), attnviz_pass_ms: m('attnviz_pass'), ort_ms: m('ort_all'),
                   ort_last_ms: m('ort_last'), runs: samples.attnviz_js[T].length };
}
figures.outside_requests = outside;
await browser.close();
await new Promise((r) => server.close(r));
rmSync(root, { recursive: true });
if (outside.length) throw new Error('requests left 127.0.0.1: ' + outside.join(', '));

const f0 = (x) => x.toFixed(0).padStart(6), f2 = (x) => x.toFixed(2);
console.log(`gpt2-small (seeded, eval), every head's attention weights kept; headless Chromium ${figures.chromium},` +
            ` one thread each; onnxruntime-web ${figures.onnxruntime_web.version} (wasm EP, SIMD128)`);
console.log(`load average (1/5/15 min): ${figures.load_start} at the start, ${figures.load_end} at the end`);
console.log(`attnviz seeded model opened in ${figures.attnviz_open_s.toFixed(1)} s; ORT sessions created in ` +
            figures.onnxruntime_web.session_create_s.map((s) => s.toFixed(1) + ' s').join(' and '));
console.log(`T = 16 check: last logits max |diff| ${figures.check.all.logits_max_abs_diff.toExponential(1)} ` +
            `(max |logit| ${f2(figures.check.all.logits_max_abs)}), weights max |diff| ` +
            `${figures.check.all.weights_max_abs_diff.toExponential(1)}`);
console.log('\nmedian ms   attnviz (JS / engine)   ORT-web, every logit   ratio   ORT-web, last logits   ratio   runs');
for (const T of Ts) {
  const t = figures.T[T];
  console.log(`T = ${String(T).padEnd(6)}  ${f0(t.attnviz_js_ms)} / ${f0(t.attnviz_pass_ms)}          ${f0(t.ort_ms)}` +
              `           ${f2(t.ort_ms / t.attnviz_js_ms).padStart(5)}x  ${f0(t.ort_last_ms)}` +
              `                 ${f2(t.ort_last_ms / t.attnviz_js_ms).padStart(5)}x   ${t.runs}`);
}
console.log('ratio: onnxruntime-web ms / attnviz JS ms (target >= 1.5)');
console.log(JSON.stringify(figures));
