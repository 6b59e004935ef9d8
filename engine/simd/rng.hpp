// Vector kernels for torch_rng.cpp's bulk paths: AVX2 + FMA on x86-64, SIMD128 in WebAssembly. Every other
// build (and Isa::scalar) uses the scalar kernels in torch_rng.cpp, which give the same bits.
// Engine-internal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnviz::simd {

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
// out[i] = fma(float(bits[i] & 0xFFFFFF) * 2^-24, range, from): tensor.uniform_(from, from + range).
void uniform_from_bits_avx2(const std::uint32_t* bits, float* out, std::size_t n, float from, float range);

// PyTorch's normal_fill_16_AVX2 over `blocks` consecutive blocks of 16 uniforms, in place.
void normal_blocks_avx2(float* data, std::size_t blocks, float mean, float std);

// For the tests: fmaf with the FMA instruction the kernels use, and the kernels' log and sincos. They are the
// steps the two kernels above compute inside, exposed so tests/engine/test_rng_kernels.cpp can check each
// against the scalar kernels' bits on inputs no generator draws; they need the flags only rng_avx2.cpp gets,
// so they stay here rather than with the tests or the benchmarks.
void fma_avx2(const float* a, const float* b, const float* c, float* out, std::size_t n);
void log_avx2(const float* u, float* out, std::size_t n);
void sincos_avx2(const float* theta, float* sin_out, float* cos_out, std::size_t n);
#endif

#if defined(__wasm_simd128__)
// The same two kernels for SIMD128, with fmaf computed in double (no FMA instruction there).
void uniform_from_bits_simd128(const std::uint32_t* bits, float* out, std::size_t n, float from, float range);
void normal_blocks_simd128(float* data, std::size_t blocks, float mean, float std);
// For the tests: the kernels' vector fmaf, log and sincos.
void fma_simd128(const float* a, const float* b, const float* c, float* out, std::size_t n);
void log_simd128(const float* u, float* out, std::size_t n);
void sincos_simd128(const float* theta, float* sin_out, float* cos_out, std::size_t n);
#endif

}  // namespace attnviz::simd
