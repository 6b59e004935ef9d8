// Writes the WebAssembly GEMM micro-kernels that use the relaxed-SIMD fused multiply-add (f32x4.relaxed_madd),
// which Emscripten 3.1.6's clang cannot emit (it knows only the proposal's old opcode, which V8 rejects).
// Each kernel is its own tiny module in the WebAssembly text format, assembled by wabt's wat2wasm (Debian's
// wabt), and the modules' bytes become a C++ include that simd/wasm_fma.cpp hands to the browser at run time.
//
//   node wasm_fma_gen.mjs WAT2WASM OUT.inc MR NR
//
// Kernel (rows R, TransA t, memory shared or not): k(K, a, lda, b, c, ldc, init), every argument an i32, lda and
// ldc in floats. C[R x NR] (row stride ldc) = S + A[R x K] * panel[K x NR], the panel k-major; A row-major
// (stride lda) or, with TransA, element (r, k) at a[k * lda + r]; S zero (init 0), C itself (init 1) or every row
// the NR floats at address init (a bias). Each accumulator starts from S and takes its products
// in k order, one fused multiply-add each, as the C++ micro-kernel (simd/layer_impl.hpp) does with xsimd::fma.
// Also the FMA peak's probe (rows 0 in the list), for the benchmarks. One module per kernel, each well under the 4 kB that Chromium compiles synchronously on the main thread.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const [wat2wasm, out, mrArg, nrArg] = process.argv.slice(2);
const MR = Number(mrArg), NR = Number(nrArg);
if (!wat2wasm || !out || !(MR >= 1 && MR <= 8) || NR !== 8) {
  console.error('usage: node wasm_fma_gen.mjs WAT2WASM OUT.inc MR 8');
  process.exit(2);
}
const V = NR / 4;  // v128 vectors per row
const U = 8;  // terms of k per iteration of the main loop: 8 ran the page 8-10% faster than 4, 16 no faster

function kernel(R, trans, shared) {
  const l = [];
  // Shared memory (the threaded module) must declare a maximum; an unshared import without one accepts any.
  l.push(`(module (import "env" "memory" (memory 1${shared ? ' 65536 shared' : ''}))`);
  l.push('(func (export "k") (param $K i32) (param $a i32) (param $lda i32) (param $b i32) (param $c i32) (param $ldc i32)' +
         ' (param $init i32)');
  for (let r = 0; r < R; r++) l.push(`(local $a${r} i32)` + Array.from({ length: V }, (_, v) => ` (local $c${r}_${v} v128)`).join(''));
  l.push(Array.from({ length: V }, (_, v) => `(local $b${v} v128)`).join(' ') + ' (local $x v128)');
  l.push('(local.set $lda (i32.shl (local.get $lda) (i32.const 2)))');
  l.push('(local.set $ldc (i32.shl (local.get $ldc) (i32.const 2)))');
  const cRow = (r) => `(i32.add (local.get $c) (i32.mul (local.get $ldc) (i32.const ${r})))`;
  for (let r = 0; r < R; r++)
    if (!trans) l.push(`(local.set $a${r} (i32.add (local.get $a) (i32.mul (local.get $lda) (i32.const ${r}))))`);
  // The accumulators start as locals do, at zero (init 0), from C (init 1) or from the bias at address init.
  l.push('(if (i32.eq (local.get $init) (i32.const 1)) (then');
  for (let r = 0; r < R; r++)
    for (let v = 0; v < V; v++) l.push(`(local.set $c${r}_${v} (v128.load offset=${16 * v} align=4 ${cRow(r)}))`);
  l.push(') (else (if (local.get $init) (then');
  for (let v = 0; v < V; v++) l.push(`(local.set $b${v} (v128.load offset=${16 * v} align=4 (local.get $init)))`);
  for (let r = 0; r < R; r++) for (let v = 0; v < V; v++) l.push(`(local.set $c${r}_${v} (local.get $b${v}))`);
  l.push('))))');
  // K counted down (an end address could wrap at the top of a 4 GB memory). The main loop takes U terms of k
  // an iteration, addressed by immediate offsets, so the pointers step and the loop branches once per U terms;
  // a second loop takes the last K mod U one at a time. Each accumulator still takes its products in k order.
  const body = (u) => {
    for (let v = 0; v < V; v++)
      l.push(`(local.set $b${v} (v128.load offset=${4 * NR * u + 16 * v} (local.get $b)))`);
    for (let r = 0; r < R; r++) {
      // TransA: the k-th column of A's block, row r at 4 r bytes from its start; else each row's own pointer.
      l.push(trans ? `(local.set $x (v128.load32_splat offset=${4 * r} (local.get $a)))`
                   : `(local.set $x (v128.load32_splat offset=${4 * u} (local.get $a${r})))`);
      for (let v = 0; v < V; v++)
        l.push(`(local.set $c${r}_${v} (f32x4.relaxed_madd (local.get $x) (local.get $b${v}) (local.get $c${r}_${v})))`);
    }
    if (trans) l.push('(local.set $a (i32.add (local.get $a) (local.get $lda)))');
  };
  const step = (u) => {
    if (!trans) for (let r = 0; r < R; r++) l.push(`(local.set $a${r} (i32.add (local.get $a${r}) (i32.const ${4 * u})))`);
    l.push(`(local.set $b (i32.add (local.get $b) (i32.const ${4 * NR * u})))`);
  };
  l.push(`(if (i32.ge_s (local.get $K) (i32.const ${U})) (then (loop $ku`);
  for (let u = 0; u < U; u++) body(u);
  step(U);
  l.push(`(br_if $ku (i32.ge_s (local.tee $K (i32.sub (local.get $K) (i32.const ${U}))) (i32.const ${U}))))))`);
  l.push('(if (i32.gt_s (local.get $K) (i32.const 0)) (then (loop $k');
  body(0);
  step(1);
  l.push('(br_if $k (local.tee $K (i32.sub (local.get $K) (i32.const 1)))))))');
  for (let r = 0; r < R; r++)
    for (let v = 0; v < V; v++) l.push(`(v128.store offset=${16 * v} align=4 ${cRow(r)} (local.get $c${r}_${v}))`);
  l.push('))');
  return l.join('\n') + '\n';
}

// The FMA peak's probe (simd::fma_probe): p(iterations, sink), 12 independent chains acc = acc * m + add, one
// relaxed_madd each per iteration, their sum's lanes stored at `sink` (4 floats), as the C++ probe does.
function probe(shared) {
  const l = [];
  l.push(`(module (import "env" "memory" (memory 1${shared ? ' 65536 shared' : ''}))`);
  l.push('(func (export "k") (param $n i32) (param $sink i32)');
  l.push(Array.from({ length: 12 }, (_, i) => `(local $c${i} v128)`).join(' ') + ' (local $m v128) (local $d v128)');
  for (let i = 0; i < 12; i++) l.push(`(local.set $c${i} (f32x4.splat (f32.const ${(i * 1e-3).toFixed(3)})))`);
  l.push('(local.set $m (f32x4.splat (f32.const 0.999999)))');
  l.push('(local.set $d (f32x4.splat (f32.const 1e-7)))');
  l.push('(if (i32.gt_s (local.get $n) (i32.const 0)) (then (loop $it');
  for (let i = 0; i < 12; i++)
    l.push(`(local.set $c${i} (f32x4.relaxed_madd (local.get $c${i}) (local.get $m) (local.get $d)))`);
  l.push('(br_if $it (i32.gt_s (local.tee $n (i32.sub (local.get $n) (i32.const 1))) (i32.const 0))))))');
  let sum = '(local.get $c0)';
  for (let i = 1; i < 12; i++) sum = `(f32x4.add ${sum} (local.get $c${i}))`;
  l.push(`(v128.store align=4 (local.get $sink) ${sum})`);
  l.push('))');
  return l.join('\n') + '\n';
}

const dir = out + '.d';
fs.mkdirSync(dir, { recursive: true });
const lines = ['// Generated by engine/simd/wasm_fma_gen.mjs from its WebAssembly text: do not edit.', ''];
const entries = [];
// Assembles one module's text and lists its bytes: rows R (0 for the probe), TransA, shared memory.
function add(name, text, R, trans, shared) {
  const wat = path.join(dir, `${name}.wat`), wasm = path.join(dir, `${name}.wasm`);
  fs.writeFileSync(wat, text);
  execFileSync(wat2wasm, ['--enable-threads', '--enable-relaxed-simd', wat, '-o', wasm], { stdio: 'inherit' });
  const bytes = fs.readFileSync(wasm);
  if (bytes.length >= 4096) throw new Error(`${name}: ${bytes.length} bytes, over the 4 kB limit`);
  lines.push(`alignas(4) constexpr unsigned char k_${name}[] = {${[...bytes].join(',')}};`);
  entries.push(`{k_${name}, sizeof k_${name}, ${R}, ${trans}, ${shared}}`);
}
for (const shared of [false, true]) {
  const memory = shared ? 'shared' : 'own';
  for (const trans of [false, true])
    for (let R = 1; R <= MR; R++) add(`fma_${memory}_${trans ? 't' : 'n'}${R}`, kernel(R, trans, shared), R, trans, shared);
  add(`probe_${memory}`, probe(shared), 0, false, shared);
}
lines.push('', `constexpr FmaModule kFmaModules[] = {\n  ${entries.join(',\n  ')},\n};`, '');
const text = lines.join('\n');
// Rewritten only when it changes, so the engine is not recompiled for nothing.
if (!fs.existsSync(out) || fs.readFileSync(out, 'utf8') !== text) fs.writeFileSync(out, text);
