// What the page-against-a-peer benchmarks share (model_peer.mjs, threads_page.mjs): their flags, where the peer's
// files are, the median, the load average, how many passes a round times at each T, the texts, the served
// folder, the browser's tabs, and a pass on each side (the page's, onnxruntime-web's).
import { mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumArgs, chromiumPath, repo, site } from '../tests/harness.mjs';

export const args = process.argv.slice(2);
export const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
export const quick = args.includes('--quick');
export const Ts = opt('--T', '16,128,512').split(',').map(Number);
export const rounds = Number(opt('--rounds', quick ? '2' : '5'));
export const models = opt('--models', join(repo, 'build', 'bench'));
export const ortDist = join(repo, 'web', 'node_modules', 'onnxruntime-web', 'dist');
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
export const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
export const runsPerRound = (T) => (T <= 32 ? 5 : T <= 128 ? 2 : 1);

// The texts: T tokens, the first word alternating so that every pass is a full one (nothing is reused).
const WORDS = [' the', ' cat', ' sat', ' on', ' a', ' mat'];
export const text = (T, k) =>
  ['One', 'Two'][k % 2] + Array.from({ length: T - 1 }, (_, i) => WORDS[i % WORDS.length]).join('');

// Each side's times at each T, for the medians: samples[side][T].
export const samples = {};
export const keep = (side, T, ms) => ((samples[side] ??= {})[T] ??= []).push(ms);

// One temporary folder that the servers serve: site/ (the page), and with `withOrt` ort/ (onnxruntime-web's
// dist), models/ (the ONNX exports) and an empty ort.html for ORT's tabs. Removed by the caller.
export function linkedRoot(prefix, withOrt) {
  const root = mkdtempSync(join(tmpdir(), prefix));
  symlinkSync(site, join(root, 'site'));
  if (withOrt) {
    symlinkSync(ortDist, join(root, 'ort'));
    symlinkSync(models, join(root, 'models'));
    writeFileSync(join(root, 'ort.html'), '<!doctype html><title>onnxruntime-web peer</title>\n');
  }
  return root;
}

// Headless Chromium, and a maker of tabs (each in its own context) that records in `outside` every request
// that goes anywhere but the given origins (the benchmark fails on one).
export async function launch(urls) {
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const outside = [];
  const newTab = async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on('request', (r) => {
      const u = r.url();
      if (!urls.some((url) => u.startsWith(url)) && !/^(data|blob):/.test(u)) outside.push(u);
    });
    page.on('pageerror', (e) => console.error('page error: ' + e.message));
    return page;
  };
  return { browser, outside, newTab };
}

// A tab of the page at `url` with the seeded gpt2-small (torch.manual_seed(123)) opened once: drawing it takes a
// while in WebAssembly. `calls` counts its passes, which pick the text.
export async function pageTab(newTab, url) {
  const page = await newTab();
  await page.goto(url);
  await page.evaluate(() => attnviz.ready);
  const t0 = Date.now();
  const error = await page.evaluate(() => attnviz.openModel({ kind: 'seeded', size: 'gpt2-small', seed: 123 }));
  if (error) throw new Error('attnviz.openModel: ' + error);
  const info = await page.evaluate(() => ({ isolated: crossOriginIsolated, cores: navigator.hardwareConcurrency,
                                            threads: attnviz.status().threads }));
  return { page, calls: 0, open_s: (Date.now() - t0) / 1e3, ...info };
}

// One full pass on a page's tab: attnviz.setText (which recomputes synchronously), timed from JS and by the
// engine (status().model.pass_ms). With `values`, the whole model result as JSON, less the engine's name.
export async function pagePass(tab, T, { values = false } = {}) {
  await tab.page.bringToFront();
  const r = await tab.page.evaluate(({ t, values }) => {
    const t0 = performance.now();
    const error = attnviz.setText(t);
    const js = performance.now() - t0;
    const m = attnviz.status().model;
    const out = { error, js, pass: m.pass_ms, reused: m.reused, ids: m.ids };
    if (values) out.numbers = JSON.stringify({ ...attnviz.getModelResult(), engine: undefined });
    return out;
  }, { t: text(T, tab.calls++), values });
  if (r.error) throw new Error(`attnviz.setText at T = ${T}: ${r.error}`);
  if (r.ids.length !== T || r.reused !== 0)
    throw new Error(`attnviz: ${r.ids.length} tokens, ${r.reused} reused (want ${T}, 0)`);
  return r;
}

// A tab of onnxruntime-web's wasm execution provider (SIMD128) with `threads` threads, on models/`file`.
export async function ortTab(newTab, url, file, threads) {
  const page = await newTab();
  await page.goto(url + 'ort.html');
  const info = await page.evaluate(async ({ file, threads }) => {
    const ort = await import('/ort/ort.wasm.min.mjs');
    ort.env.wasm.wasmPaths = '/ort/';
    ort.env.wasm.numThreads = threads;
    ort.env.wasm.simd = true;
    ort.env.wasm.proxy = false;
    const t0 = performance.now();
    window.session = await ort.InferenceSession.create('/models/' + file, { executionProviders: ['wasm'],
                                                                           graphOptimizationLevel: 'all' });
    window.ort = ort;
    return { create_s: (performance.now() - t0) / 1e3, version: ort.env.versions?.web ?? ort.env.versions?.common,
             threads: ort.env.wasm.numThreads, isolated: crossOriginIsolated };
  }, { file, threads });
  return { page, ...info };
}

// session.run on the ids (int64), timed from JS with the copy of its outputs out of ORT's memory. With
// `values`, the last position's logits and each layer's weights.
export async function ortPass(tab, ids, { values = false } = {}) {
  await tab.page.bringToFront();
  return tab.page.evaluate(async ({ ids, values }) => {
    const input = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);
    const t0 = performance.now();
    const out = await session.run({ ids: input });
    const js = performance.now() - t0;
    const r = { js };
    if (values) {
      const logits = out.logits.data, V = out.logits.dims[2];
      r.last_logits = Array.from(logits.subarray(logits.length - V));
      r.weights = Object.keys(out).filter((k) => k.startsWith('weights_')).map((k) => Array.from(out[k].data));
    }
    for (const t of Object.values(out)) t.dispose();
    input.dispose();
    return r;
  }, { ids, values });
}
