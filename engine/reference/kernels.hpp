// Scalar reference kernels: one loop nest per step of attention, written to be read. Every later fast path
// (xsimd, WebGPU) is tested against these. Accumulations run in double so the reference is the most exact
// answer, not a copy of one float summation order.
#pragma once

#include <cstdint>

namespace attnviz::ref {

// y = x W^T + b.   x: (T, in); w: (out, in); b: (out) or nullptr; y: (T, out)
void linear(const float* x, const float* w, const float* b, float* y, int T, int in, int out);

// Raw scores of every head.   q, k: (T, width), head h at columns [h*hd, (h+1)*hd); s: (H, T, T)
void scores(const float* q, const float* k, float* s, int T, int H, int hd);

// Scaled, masked scores.   s, out: (H, T, T); masked cells (col > row when causal) become -inf
void scale_mask(const float* s, float* out, int T, int H, float scale, bool causal);

// Row softmax over the unmasked cells; masked cells are exactly 0.   scaled, w: (H, T, T)
void softmax_rows(const float* scaled, float* w, int T, int H, bool causal);

// Dropout with a drawn mask: kept cells times `factor`, dropped cells 0.   w, keep, out: (n)
void dropout(const float* w, const std::uint8_t* keep, float* out, std::int64_t n, float factor);

// Context vectors: each head's weights times its values.   w: (H, T, T); v, ctx: (T, width)
void context(const float* w, const float* v, float* ctx, int T, int H, int hd, bool causal);

// The statistics LayerNorm normalizes a row with: its mean and 1 / sqrt(var + 1e-5) (biased variance), in
// double. Shared with training's LayerNorm (engine/train/ops.cpp).
void layer_norm_stats(const float* row, int cols, double& mean, double& inv);

// LayerNorm of each row: (x - mean) / sqrt(var + 1e-5) * scale + shift, biased variance.   x, y: (rows, cols)
void layer_norm(const float* x, float* y, int rows, int cols, const float* scale, const float* shift);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).   x, y: (n); y may be x
void gelu(const float* x, float* y, std::int64_t n);

}  // namespace attnviz::ref
