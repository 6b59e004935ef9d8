#include "kernels.hpp"

#include <cmath>
#include <cstddef>

namespace attnviz::ref {
namespace {
inline std::size_t at(std::size_t row, std::size_t cols, std::size_t col) {
  return row * cols + col;
}
}  // namespace

void linear(const float* x, const float* w, const float* b, float* y, int T, int in, int out) {
  for (int t = 0; t < T; ++t) {
    for (int o = 0; o < out; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int i = 0; i < in; ++i) acc += static_cast<double>(x[at(t, in, i)]) * w[at(o, in, i)];
      y[at(t, out, o)] = static_cast<float>(acc);
    }
  }
}

void scores(const float* q, const float* k, float* s, int T, int H, int hd) {
  const std::size_t width = static_cast<std::size_t>(H) * hd;
  for (int h = 0; h < H; ++h) {
    float* sh = s + static_cast<std::size_t>(h) * T * T;
    for (int i = 0; i < T; ++i) {
      const float* qi = q + at(i, width, static_cast<std::size_t>(h) * hd);
      for (int j = 0; j < T; ++j) {
        const float* kj = k + at(j, width, static_cast<std::size_t>(h) * hd);
        double acc = 0.0;
        for (int d = 0; d < hd; ++d) acc += static_cast<double>(qi[d]) * kj[d];
        sh[at(i, T, j)] = static_cast<float>(acc);
      }
    }
  }
}

void scale_mask(const float* s, float* out, int T, int H, float scale, bool causal) {
  // PyTorch divides by sqrt(head_dim); dividing by 1/scale reproduces that division exactly.
  const float divisor = 1.0f / scale;
  for (int h = 0; h < H; ++h) {
    const std::size_t base = static_cast<std::size_t>(h) * T * T;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j)
        out[base + at(i, T, j)] = causal && j > i ? -INFINITY : s[base + at(i, T, j)] / divisor;
  }
}

void softmax_rows(const float* scaled, float* w, int T, int H, bool causal) {
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < T; ++i) {
      const std::size_t row = (static_cast<std::size_t>(h) * T + i) * T;
      const int n = causal ? i + 1 : T;  // cells past n are masked
      // pass 1: row max (keeps exp in range)
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) mx = std::fmax(mx, scaled[row + j]);
      // pass 2: exponentials and their sum
      double sum = 0.0;
      for (int j = 0; j < n; ++j) sum += std::exp(static_cast<double>(scaled[row + j]) - mx);
      // pass 3: normalize; masked cells are exactly 0
      for (int j = 0; j < n; ++j)
        w[row + j] = static_cast<float>(std::exp(static_cast<double>(scaled[row + j]) - mx) / sum);
      for (int j = n; j < T; ++j) w[row + j] = 0.0f;
    }
  }
}

void dropout(const float* w, const std::uint8_t* keep, float* out, std::int64_t n, float factor) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = keep[i] ? w[i] * factor : 0.0f;
}

void context(const float* w, const float* v, float* ctx, int T, int H, int hd, bool causal) {
  const std::size_t width = static_cast<std::size_t>(H) * hd;
  for (int h = 0; h < H; ++h) {
    const float* wh = w + static_cast<std::size_t>(h) * T * T;
    for (int i = 0; i < T; ++i) {
      const int n = causal ? i + 1 : T;  // masked weights are 0: skip them
      for (int d = 0; d < hd; ++d) {
        double acc = 0.0;
        for (int j = 0; j < n; ++j)
          acc += static_cast<double>(wh[at(i, T, j)]) * v[at(j, width, static_cast<std::size_t>(h) * hd + d)];
        ctx[at(i, width, static_cast<std::size_t>(h) * hd + d)] = static_cast<float>(acc);
      }
    }
  }
}

void layer_norm_stats(const float* xr, int cols, double& mean, double& inv) {
  double sum = 0.0, var = 0.0;
  for (int j = 0; j < cols; ++j) sum += xr[j];
  mean = sum / cols;
  for (int j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
  var /= cols;
  inv = 1.0 / std::sqrt(var + 1e-5);
}

void layer_norm(const float* x, float* y, int rows, int cols, const float* scale, const float* shift) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + at(r, cols, 0);
    double mean = 0.0, inv = 0.0;
    layer_norm_stats(xr, cols, mean, inv);
    for (int j = 0; j < cols; ++j)
      y[at(r, cols, j)] = static_cast<float>((xr[j] - mean) * inv * scale[j] + shift[j]);
  }
}

void gelu(const float* x, float* y, std::int64_t n) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v))));
  }
}

}  // namespace attnviz::ref
