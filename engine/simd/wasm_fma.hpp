// WebAssembly's fused multiply-add GEMM micro-kernels (relaxed SIMD's f32x4.relaxed_madd). Emscripten 3.1.6
// cannot emit that instruction, so simd/wasm_fma_gen.mjs writes the kernels in the WebAssembly text format,
// wabt assembles them at build time, and each thread hands them to the browser on its first GEMM
// (simd/wasm_fma.js): they join the module's function table, and the C++ calls them through it. Where the
// browser has no relaxed SIMD (and in node 20 without --experimental-wasm-relaxed-simd) the engine keeps its
// own multiply-then-add kernels.
//
// Bits: each output is still one sum over k in order, each product fused into it (where the processor has no
// FMA, V8 multiplies and adds separately, and every output is that sum instead), so a result does not depend
// on the thread count or the tiling, only on the kernels a browser runs. The native AVX2 and AVX-512 kernels
// fuse the same way.
#pragma once

#include <cstdint>

#ifdef __EMSCRIPTEN__  // every WebAssembly build of the engine (its SIMD128 kernels use it)

namespace attnviz::simd::wasm_fma {

// Rows of the tallest kernel, as engine/CMakeLists.txt asks wasm_fma_gen.mjs for: the GEMMs' row blocks where
// these kernels run (simd::detail::micro_table), one more than the engine's own SIMD128 kernels take.
inline constexpr int kRows = 6;

// k(K, a, lda, b, c, ldc, init): C[R x 8] = S + A[R x K] * panel[K x 8] (TransA: A's element (r, k) at
// a[k * lda + r]), S zero (init 0), C itself (init 1) or in every row the 8 floats at address init (a bias);
// every sum over k in order, lda and ldc in floats (wasm_fma_gen.mjs).
using Kernel = void (*)(int, const float*, int, const float*, float*, int, std::uintptr_t);

// This thread's kernel for `rows` rows (1..kRows), or null where the browser cannot run them (installed on
// the first call; the first thread's outcome holds for the process). ATTNVIZ_WASM_FMA=0 in the environment
// keeps the engine's own kernels: the test binary under node reads node's (tests/node_env.js).
Kernel kernel(int rows, bool trans);

// p(iterations, sink): the FMA peak's probe (simd::fma_probe) on relaxed_madd, 12 vectors of 4 floats fused
// once per iteration, their sum's 4 lanes stored at sink; null where the kernels are not in use.
using Probe = void (*)(int, float*);
Probe probe();

// Whether this thread runs the fused kernels (installing them first where it has not yet).
bool in_use();

}  // namespace attnviz::simd::wasm_fma

#endif
