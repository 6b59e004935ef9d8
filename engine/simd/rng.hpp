// Vector kernels for torch_rng.cpp's bulk paths (x86-64 with AVX2 and FMA only; every other build uses the
// scalar kernels in torch_rng.cpp, which give the same bits). Engine-internal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnviz::simd {

// out[i] = fma(float(bits[i] & 0xFFFFFF) * 2^-24, range, from): tensor.uniform_(from, from + range).
void uniform_from_bits_avx2(const std::uint32_t* bits, float* out, std::size_t n, float from, float range);

// PyTorch's normal_fill_16_AVX2 over `blocks` consecutive blocks of 16 uniforms, in place.
void normal_blocks_avx2(float* data, std::size_t blocks, float mean, float std);

}  // namespace attnviz::simd
