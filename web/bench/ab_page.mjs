// Two builds of the page against each other: the seeded gpt2-small's full pass (every head's weights kept, the
// last position's logits) in two tabs of one headless Chromium, taking turns pass by pass, the order alternating,
// so that a machine whose speed drifts moves both alike. For a change to the engine: copy the site before it,
// rebuild, and compare. The two must give the same numbers: the whole model result at T = 16 is compared first
// (with --close TOL, a change that rounds differently, such as fused multiply-adds: every number within TOL of
// the other build's, the largest difference printed).
//
//   cp -r build/wasm-release/web/site /tmp/site-before; (change, cmake --build --preset wasm-release)
//   node web/bench/ab_page.mjs --a /tmp/site-before --b build/wasm-release/web/site [--T 16,128,512] [--rounds 5]
//       [--ort]   onnxruntime-web's last-position export in a third tab, taking turns with them
//       [--close TOL]
import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { serve } from '../tools/serve.mjs';
import { args, launch, load, median, models, opt, ortDist, ortPass, ortTab, pagePass, pageTab, rounds,
         runsPerRound, Ts } from './peer_common.mjs';

const sites = { a: opt('--a', ''), b: opt('--b', '') };
for (const [k, dir] of Object.entries(sites))
  if (!dir || !existsSync(join(dir, 'attnviz.wasm'))) throw new Error(`--${k} DIR: a built site (attnviz.wasm in it)`);
const withOrt = args.includes('--ort');
const close = args.includes('--close') ? Number(opt('--close', '')) : null;
if (close !== null && !(close > 0 && close < 1)) throw new Error('--close TOL: a tolerance between 0 and 1, such as 1e-4');
if (withOrt)
  for (const f of [join(ortDist, 'ort.wasm.min.mjs'), join(models, 'gpt2-small-last.onnx')])
    if (!existsSync(f)) throw new Error(`${f} missing: cd web && npm ci; /usr/bin/python3 bench/export_gpt2_onnx.py`);
if (!(Number.isInteger(rounds) && rounds >= 1)) throw new Error('--rounds: a whole number, at least 1');
if (!Ts.length || !Ts.every((T) => Number.isInteger(T) && T >= 1 && T <= 1024))
  throw new Error('--T: a list of token counts from 1 to 1024, such as 16,128,512');

const root = mkdtempSync(join(tmpdir(), 'attnviz-ab-'));
for (const [k, dir] of Object.entries(sites)) symlinkSync(resolve(dir), join(root, k));
if (withOrt) {
  symlinkSync(ortDist, join(root, 'ort'));
  symlinkSync(models, join(root, 'models'));
  writeFileSync(join(root, 'ort.html'), '<!doctype html><title>onnxruntime-web peer</title>\n');
}
const { server, url } = await serve(root, 0);
const { browser, outside, newTab } = await launch([url]);
try {
  console.log(`a: ${sites.a}\nb: ${sites.b}\nload average at the start: ${load()}`);
  const tabs = { a: await pageTab(newTab, url + 'a/'), b: await pageTab(newTab, url + 'b/') };
  const ort = withOrt ? await ortTab(newTab, url, 'gpt2-small-last.onnx', 1) : null;

  const first = { a: await pagePass(tabs.a, 16, { values: true }), b: await pagePass(tabs.b, 16, { values: true }) };
  if (close === null) {
    if (first.a.numbers !== first.b.numbers) throw new Error('the two builds give different numbers at T = 16');
  } else {
    // the same shape, names and strings; numbers within `close` of each other
    let largest = 0;
    const walk = (x, y, where) => {
      if (typeof x === 'number' && typeof y === 'number') {
        const d = Math.abs(x - y);
        if (!(d <= close)) throw new Error(`${where}: ${x} against ${y}, more than ${close} apart`);
        largest = Math.max(largest, d);
      } else if (x && y && typeof x === 'object' && typeof y === 'object') {
        const keys = Object.keys(x);
        if (keys.join() !== Object.keys(y).join()) throw new Error(`${where}: different fields`);
        for (const k of keys) walk(x[k], y[k], `${where}.${k}`);
      } else if (x !== y) throw new Error(`${where}: ${x} against ${y}`);
    };
    walk(JSON.parse(first.a.numbers), JSON.parse(first.b.numbers), 'result');
    console.log(`the two builds' numbers at T = 16: at most ${largest.toExponential(2)} apart`);
  }

  const ms = {}; // side -> T -> [ms]; a and b: the engine's time, aJS and bJS: setText's
  const put = (side, T, v) => ((ms[side] ??= {})[T] ??= []).push(v);
  async function pass(side, T) {
    if (side === 'ort') {
      // a's ids of this turn (the page's tokenizer gave them), so that both engines see the same tokens
      const ids = tabs.a.lastIds?.length === T ? tabs.a.lastIds
                                               : Array.from({ length: T }, (_, i) => (i * 7919) % 50257);
      put('ort', T, (await ortPass(ort, ids)).js);
      return;
    }
    const r = await pagePass(tabs[side], T);
    tabs[side].lastIds = r.ids;
    put(side, T, r.pass);
    put(side + 'JS', T, r.js);
  }
  for (let warm = 0; warm < 2; ++warm) // V8 tiers up the hot functions during the first passes
    for (const T of Ts) for (const side of ['a', 'b', ...(ort ? ['ort'] : [])]) await pass(side, T);
  for (const side of Object.keys(ms)) for (const T of Ts) ms[side][T] = [];
  for (let round = 0; round < rounds; ++round)
    for (const T of Ts)
      for (let i = 0; i < runsPerRound(T); ++i)
        for (const side of [...((round + i) % 2 ? ['b', 'a'] : ['a', 'b']), ...(ort ? ['ort'] : [])])
          await pass(side, T);

  console.log('\nmedian ms   a (JS / engine)   b (JS / engine)   a/b engine   b faster   a/b JS   b faster' +
              '   JS outside the engine, a / b' +
              (ort ? '   ORT-web last   ORT/a JS   ORT/b JS' : ''));
  for (const T of Ts) {
    const m = (side) => median(ms[side][T]);
    const faster = ms.b[T].filter((x, i) => x < ms.a[T][i]).length;
    // setText's time less the engine's, pass by pass: the page's own work (drawing, colouring, scoring)
    const outside = (side) => median(ms[side + 'JS'][T].map((js, i) => js - ms[side][T][i]));
    const fasterJS = ms.bJS[T].filter((x, i) => x < ms.aJS[T][i]).length; // a change outside the engine shows here
    let line = `T = ${String(T).padEnd(5)} ${m('aJS').toFixed(0).padStart(8)} / ${m('a').toFixed(0).padStart(6)}` +
               `   ${m('bJS').toFixed(0).padStart(8)} / ${m('b').toFixed(0).padStart(6)}` +
               `   ${(m('a') / m('b')).toFixed(3).padStart(8)}x   ${faster} of ${ms.b[T].length}` +
               `   ${(m('aJS') / m('bJS')).toFixed(3).padStart(6)}x   ${fasterJS} of ${ms.b[T].length}` +
               `   ${outside('a').toFixed(1).padStart(12)} / ${outside('b').toFixed(1)}`;
    if (ort)
      line += `   ${m('ort').toFixed(0).padStart(10)}   ${(m('ort') / m('aJS')).toFixed(2).padStart(7)}x` +
              `   ${(m('ort') / m('bJS')).toFixed(2).padStart(7)}x`;
    console.log(line);
  }
  console.log(`load average at the end: ${load()}`);
  if (outside.length) throw new Error('requests left 127.0.0.1: ' + outside.join(', '));
} finally {
  await browser.close();
  await new Promise((done) => server.close(done));
  rmSync(root, { recursive: true, force: true });
}
