// The fast element-wise and row-wise kernels of a training step: one table of plain functions per ISA,
// written once as Arch templates (train_impl.hpp) and instantiated in train_<isa>.cpp with that ISA's -m
// flags and -ffp-contract=off (every fused multiply-add in them is asked for by name).
//
// train/ops.cpp cuts the work into chunks (of rows or elements) and calls one of these per chunk, or its own
// readable loop on the scalar reference: the fast and the reference paths share the chunking, so neither
// depends on the thread count. Engine-internal: no xsimd type leaves this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "attnviz/exec.hpp"

namespace attnviz::simd {

// AdamW's per-step scalars, rounded to float as PyTorch rounds its Python floats (optim.cpp).
struct AdamWScalars {
  float decay = 1.0f, b1 = 0.0f, one_minus_b1 = 1.0f, b2 = 0.0f, one_minus_b2 = 1.0f;
  float step_size = 0.0f, bc2_sqrt = 1.0f, eps = 0.0f;
};

struct TrainKernels {
  // Rows of LayerNorm: x, y, x_hat (rows, cols); rstd (rows); y = x_hat * scale + shift.
  void (*layer_norm)(const float* x, const float* scale, const float* shift, float* y, float* x_hat,
                     float* rstd, int rows, int cols);
  // Rows of LayerNorm's backward: dx (rows, cols) written or added (`accumulate`); dscale and dshift (cols,
  // double) += the column sums of dy * x_hat and dy over these rows.
  void (*layer_norm_backward)(const float* dy, const float* x_hat, const float* rstd, const float* scale,
                              float* dx, double* dscale, double* dshift, int rows, int cols, bool accumulate);
  // n elements of the tanh GELU and of its backward (dx = dy * gelu'(x); dx may be dy).
  void (*gelu)(const float* x, float* y, std::size_t n);
  void (*gelu_backward)(const float* x, const float* dy, float* dx, std::size_t n);
  // One row of logits (vocab): turned into softmax probabilities in place; returns -log p[target].
  double (*softmax_loss)(float* logits_to_probs, int target, int vocab);
  // One row: p = (p - onehot(target)) * inv (1 / rows), in place.
  void (*softmax_loss_backward)(float* probs_to_grad, int target, int vocab, double inv);
  // n elements of AdamW: the same float operations, in the same order, as optim.cpp's reference loop.
  void (*adamw)(float* p, float* m, float* v, const float* g, std::size_t n, const AdamWScalars& s);
  // x = keep ? x * scale : 0 and x += y, over n elements.
  void (*dropout)(float* x, const std::uint8_t* keep, std::size_t n, float scale);
  void (*add)(float* x, const float* y, std::size_t n);
  // dst (cols, rows; row stride ld_dst) = the transpose of src (rows, cols; row stride ld_src): exact copies.
  void (*transpose)(const float* src, std::size_t ld_src, int rows, int cols, float* dst, std::size_t ld_dst);
  // One row of causal attention's softmax: w[j] = exp(x[j] - max) / sum over j < n of x[j] = s[j] / divisor
  // (a float division, as PyTorch divides the scores), w[j] = 0 for n <= j < T. The exponentials in float
  // vectors, their sum carried on in double.
  void (*attention_softmax)(const float* s, float divisor, int n, int T, float* w);
};

struct train_table {
  template <class Arch>
  const TrainKernels& operator()(Arch) const;
};

// Each ISA's table lives in its own translation unit (train_<isa>.cpp).
#if defined(__EMSCRIPTEN__)
extern template const TrainKernels& train_table::operator()<xsimd::sse4_1>(xsimd::sse4_1) const;
#elif defined(__aarch64__)
extern template const TrainKernels& train_table::operator()<xsimd::neon64>(xsimd::neon64) const;
#else
extern template const TrainKernels& train_table::operator()<xsimd::avx512bw>(xsimd::avx512bw) const;
extern template const TrainKernels& train_table::operator()<xsimd::fma3<xsimd::avx2> >(
    xsimd::fma3<xsimd::avx2>) const;
extern template const TrainKernels& train_table::operator()<xsimd::sse4_2>(xsimd::sse4_2) const;
#endif

// The table of an ISA this build and processor can run; null for Isa::scalar (the reference) and for a build
// without SIMD kernels.
const TrainKernels* train_kernels(Isa isa);

}  // namespace attnviz::simd
