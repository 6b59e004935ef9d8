// The bulk kernels behind torch_uniform_ and torch_normal_, chosen as those functions choose them: the
// tests run them on inputs no generator draws (subnormals, float rounding midpoints, every possible uniform)
// to check that each kernel set gives the scalar kernels' bits. Engine-internal.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnviz/exec.hpp"

namespace attnviz::rng_kernels {

// `isa` as torch_uniform_ and torch_normal_ take it: Isa::scalar runs the scalar kernels; otherwise the
// vector kernels of resolve(isa) if this build has them (AVX2 + FMA for avx2 and avx512, SIMD128 for
// simd128).

// out[i] = fmaf(float(bits[i] & 0xFFFFFF) * 2^-24, range, from): uniform_(from, from + range) of the draws.
void uniform_from_bits(const std::uint32_t* bits, float* out, std::size_t n, float from, float range,
                       Isa isa);

// PyTorch's normal_fill_16 over `blocks` consecutive blocks of 16 uniforms in [0, 1), in place.
void normal_blocks(float* data, std::size_t blocks, float mean, float std, Isa isa);

// out[i] = fmaf(a[i], b[i], c[i]) as those kernels compute it: fma_exact (scalar), the FMA instruction
// (AVX2), or SIMD128's double arithmetic with its midpoint correction.
void fma(const float* a, const float* b, const float* c, float* out, std::size_t n, Isa isa);

// The two halves of normal_blocks: log(u) for u in (0, 1] (what the kernels see is 1 - d for d in [0, 1)),
// and the sine and cosine of theta = float(2 pi) d.
void log_cephes(const float* u, float* out, std::size_t n, Isa isa);
void sincos_cephes(const float* theta, float* sin_out, float* cos_out, std::size_t n, Isa isa);

}  // namespace attnviz::rng_kernels
