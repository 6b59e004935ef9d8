// The operations of a training step (ops.hpp).
#include "train/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "reference/kernels.hpp"
#include "simd/pack.hpp"

namespace attnviz::train {

namespace {

std::size_t at(std::size_t row, std::size_t cols, std::size_t col) {
  return row * cols + col;
}

void ensure(AlignedFloats& buf, std::size_t n) {
  if (buf.size() < n) buf.resize(n);
}

// pack_nk (simd/pack.hpp) over the pool, 16 panels a task: panels are independent, and the head's weight
// (50,257 x 768) is 150 MB to pack.
constexpr int kPanelsPerTask = 16;

void pack_nk_parallel(ThreadPool& pool, const float* src, int n, int k, int ld, int nr, float* dst) {
  pool.run((simd::panels(n, nr) + kPanelsPerTask - 1) / kPanelsPerTask, [&](int t, int) {
    const int c0 = t * kPanelsPerTask * nr, c1 = std::min(n, c0 + kPanelsPerTask * nr);
    simd::pack_nk(src + static_cast<std::size_t>(c0) * ld, c1 - c0, k, ld, nr,
                  dst + static_cast<std::size_t>(c0) * k);
  });
}

// pack_kn's panels (B[k][n] = src[k * ld + n]) filled row by row of src, 256 rows a task: reading src in
// order and writing each panel's run of nr floats. Going panel by panel, as pack_kn does, reads each panel's
// columns down the whole matrix (the head's 50,257 rows, a page apart), which took 10% of a step.
void pack_kn_parallel(ThreadPool& pool, const float* src, int k, int n, int ld, int nr, float* dst) {
  constexpr int kRowsPerTask = 256;
  const int np = simd::panels(n, nr);
  pool.run((k + kRowsPerTask - 1) / kRowsPerTask, [&](int t, int) {
    const int k0 = t * kRowsPerTask, k1 = std::min(k, k0 + kRowsPerTask);
    for (int kk = k0; kk < k1; ++kk) {
      const float* row = src + static_cast<std::size_t>(kk) * ld;
      for (int p = 0; p < np; ++p) {
        float* out = dst + (static_cast<std::size_t>(p) * k + kk) * nr;
        const int c0 = p * nr, cnt = std::min(nr, n - c0);
        std::memcpy(out, row + c0, sizeof(float) * static_cast<std::size_t>(cnt));
        std::fill(out + cnt, out + nr, 0.0f);
      }
    }
  });
}

// dst (cols, rows; row stride ld_dst) = the transpose of get(i, j), i < rows, j < cols, in 16 x 16 blocks
// read whole into a local block: a plain strided loop over a row stride of 2, 3 or 12 KB (T = 256, d = 768,
// 4d = 3072) keeps reading the same few cache sets and misses on nearly every read.
template <class Get>
void transpose_blocks(int rows, int cols, const Get& get, float* dst, std::size_t ld_dst) {
  constexpr int kB = 16;
  float block[kB][kB];
  for (int i0 = 0; i0 < rows; i0 += kB)
    for (int j0 = 0; j0 < cols; j0 += kB) {
      const int bi = std::min(kB, rows - i0), bj = std::min(kB, cols - j0);
      for (int i = 0; i < bi; ++i)
        for (int j = 0; j < bj; ++j) block[i][j] = get(i0 + i, j0 + j);
      for (int j = 0; j < bj; ++j)
        for (int i = 0; i < bi; ++i) dst[static_cast<std::size_t>(j0 + j) * ld_dst + i0 + i] = block[i][j];
    }
}

// The same through the ISA's kernel (4 x 4 vector tiles), where there is one.
void transpose(const simd::TrainKernels* fast, const float* src, std::size_t ld_src, int rows, int cols,
               float* dst, std::size_t ld_dst) {
  if (fast) return fast->transpose(src, ld_src, rows, cols, dst, ld_dst);
  transpose_blocks(
      rows, cols, [&](int i, int j) { return src[at(i, ld_src, j)]; }, dst, ld_dst);
}

}  // namespace

Kernels::Kernels(const Exec& exec) : isa(resolve(exec.isa)) {
  threads = isa == Isa::scalar ? 1 : resolve_threads(exec.threads);
  pool = &ThreadPool::shared(threads);
  fast = simd::train_kernels(isa);
  workers.resize(static_cast<std::size_t>(threads));
}

namespace {

// The reference products over output rows [m0, m1) (linear, linear_dx) or [n0, n1) (linear_dw), summing in
// double.
void linear_reference(const float* x, const float* w, const float* b, float* y, int m0, int m1, int K,
                      int N) {
  for (int m = m0; m < m1; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = b ? b[n] : 0.0;
      for (int k = 0; k < K; ++k) acc += static_cast<double>(x[at(m, K, k)]) * w[at(n, K, k)];
      y[at(m, N, n)] = static_cast<float>(acc);
    }
}

void linear_dx_reference(const float* dy, const float* w, float* dx, int m0, int m1, int K, int N,
                         bool accumulate) {
  for (int m = m0; m < m1; ++m)
    for (int k = 0; k < K; ++k) {
      double acc = 0.0;
      for (int n = 0; n < N; ++n) acc += static_cast<double>(dy[at(m, N, n)]) * w[at(n, K, k)];
      float& out = dx[at(m, K, k)];
      out = accumulate ? out + static_cast<float>(acc) : static_cast<float>(acc);
    }
}

}  // namespace

void Kernels::linear(const float* x, const float* w, const float* b, float* y, int M, int K, int N) {
  if (isa == Isa::scalar) return linear_reference(x, w, b, y, 0, M, K, N);
  const int nr = simd::panel_width(isa);
  ensure(packed, simd::panel_floats(N, K, nr));
  pack_nk_parallel(*pool, w, N, K, K, nr, packed.data());  // B (K x N) = w^T
  simd::run_gemm(isa, M, N, K, x, packed.data(), y, *pool);
  if (b)
    chunked(*pool, M, 16, [&](std::size_t m0, std::size_t m1) {
      for (std::size_t m = m0; m < m1; ++m) fast->add(y + at(m, N, 0), b, N);
    });
}

void Kernels::linear_dx(const float* dy, const float* w, float* dx, int M, int K, int N, bool accumulate) {
  if (isa == Isa::scalar) return linear_dx_reference(dy, w, dx, 0, M, K, N, accumulate);
  const int nr = simd::panel_width(isa);
  ensure(packed, simd::panel_floats(K, N, nr));
  pack_kn_parallel(*pool, w, N, K, K, nr, packed.data());  // B (N x K) = w as stored
  float* out = dx;
  if (accumulate) {
    ensure(product, static_cast<std::size_t>(M) * K);
    out = product.data();
  }
  simd::run_gemm(isa, M, K, N, dy, packed.data(), out, *pool);
  if (accumulate)
    chunked(*pool, static_cast<std::size_t>(M) * K, 1 << 16,
            [&](std::size_t i0, std::size_t i1) { fast->add(dx + i0, out + i0, i1 - i0); });
}

void Kernels::linear_dw(const float* dy, const float* x, float* dw, float* db, int M, int K, int N) {
  linear_dw_rows(dy, x, dw, db, M, K, N, 0, N);
}

// The panel GEMM sums each output element over k in order, in a chain of its own (blocking over K reloads
// the partial sum, a float either way): an element's value depends neither on the rows nor on the panels
// computed with it, which is what lets a product run in pieces of rows.
void Kernels::pack_linear(const float* w, int K, int N, AlignedFloats& into) {
  if (isa == Isa::scalar) return;
  const int nr = simd::panel_width(isa);
  ensure(into, simd::panel_floats(N, K, nr));
  pack_nk_parallel(*pool, w, N, K, K, nr, into.data());
}

void Kernels::pack_linear_dx(const float* w, int K, int N, AlignedFloats& into) {
  if (isa == Isa::scalar) return;
  const int nr = simd::panel_width(isa);
  ensure(into, simd::panel_floats(K, N, nr));
  pack_kn_parallel(*pool, w, N, K, K, nr, into.data());
}

void Kernels::linear_rows(const float* x, const float* w, const AlignedFloats& packed_w, float* y, int m0,
                          int m1, int K, int N) {
  if (isa == Isa::scalar) return linear_reference(x, w, nullptr, y, m0, m1, K, N);
  simd::run_gemm(isa, m1 - m0, N, K, x + at(m0, K, 0), packed_w.data(), y + at(m0, N, 0), *pool);
}

void Kernels::linear_dx_rows(const float* dy, const float* w, const AlignedFloats& packed_w, float* dx,
                             int m0, int m1, int K, int N) {
  if (isa == Isa::scalar) return linear_dx_reference(dy, w, dx, m0, m1, K, N, false);
  simd::run_gemm(isa, m1 - m0, K, N, dy + at(m0, N, 0), packed_w.data(), dx + at(m0, K, 0), *pool);
}

void Kernels::linear_dw_rows(const float* dy, const float* x, float* dw, float* db, int M, int K, int N,
                             int n0, int n1) {
  const int rows = n1 - n0;
  if (db) {  // summed in double, then added once: the biases' gradients are sums that cancel
    std::vector<double> sums(static_cast<std::size_t>(rows), 0.0);
    for (int m = 0; m < M; ++m)
      for (int n = n0; n < n1; ++n) sums[static_cast<std::size_t>(n - n0)] += dy[at(m, N, n)];
    for (int n = n0; n < n1; ++n) db[n] += static_cast<float>(sums[static_cast<std::size_t>(n - n0)]);
  }
  if (isa == Isa::scalar) {
    for (int n = n0; n < n1; ++n)
      for (int k = 0; k < K; ++k) {
        double acc = 0.0;
        for (int m = 0; m < M; ++m) acc += static_cast<double>(dy[at(m, N, n)]) * x[at(m, K, k)];
        dw[at(n, K, k)] += static_cast<float>(acc);
      }
    return;
  }
  // dw rows = A B with A = the rows' columns of dy, transposed (rows x M), and B = x (M x K) in panels.
  const int nr = simd::panel_width(isa);
  ensure(transposed, static_cast<std::size_t>(rows) * M);
  ensure(packed, simd::panel_floats(K, M, nr));
  ensure(product, static_cast<std::size_t>(rows) * K);
  // the transpose, a band of 64 columns of dy per task
  constexpr int kBand = 64;
  chunked(*pool, (rows + kBand - 1) / kBand, 1, [&](std::size_t t0, std::size_t) {
    const int b0 = static_cast<int>(t0) * kBand, b1 = std::min(rows, b0 + kBand);
    transpose(fast, dy + n0 + b0, static_cast<std::size_t>(N), M, b1 - b0, transposed.data() + at(b0, M, 0),
              static_cast<std::size_t>(M));
  });
  pack_kn_parallel(*pool, x, M, K, K, nr, packed.data());
  simd::run_gemm(isa, rows, K, M, transposed.data(), packed.data(), product.data(), *pool);
  const std::size_t total = static_cast<std::size_t>(rows) * K;
  float* out = dw + at(n0, K, 0);
  chunked(*pool, total, 1 << 16,
          [&](std::size_t i0, std::size_t i1) { fast->add(out + i0, product.data() + i0, i1 - i0); });
}

void chunked(ThreadPool& pool, std::size_t n, std::size_t chunk,
             const std::function<void(std::size_t, std::size_t)>& fn) {
  const int tasks = static_cast<int>((n + chunk - 1) / chunk);
  pool.run(tasks, [&](int t, int) {
    const std::size_t begin = static_cast<std::size_t>(t) * chunk;
    fn(begin, std::min(n, begin + chunk));
  });
}

// Rows in chunks of 16 (forward) and 32 (backward, whose column sums are kept per chunk).
void layer_norm(Kernels& k, const float* x, const float* scale, const float* shift, float* y, float* x_hat,
                float* rstd, int rows, int cols) {
  chunked(*k.pool, rows, 16, [&](std::size_t r0, std::size_t r1) {
    if (k.fast) {
      const std::size_t at0 = at(r0, cols, 0);
      k.fast->layer_norm(x + at0, scale, shift, y + at0, x_hat + at0, rstd + r0, static_cast<int>(r1 - r0),
                         cols);
      return;
    }
    for (std::size_t r = r0; r < r1; ++r) {
      const float* xr = x + at(r, cols, 0);
      double mean = 0.0, inv = 0.0;
      ref::layer_norm_stats(xr, cols, mean, inv);
      rstd[r] = static_cast<float>(inv);
      for (int j = 0; j < cols; ++j) {
        const double h = (xr[j] - mean) * inv;
        x_hat[at(r, cols, j)] = static_cast<float>(h);
        y[at(r, cols, j)] = static_cast<float>(h * scale[j] + shift[j]);
      }
    }
  });
}

void layer_norm_backward(Kernels& k, const float* dy, const float* x_hat, const float* rstd,
                         const float* scale, float* dx, float* dscale, float* dshift, int rows, int cols,
                         bool accumulate) {
  constexpr int kRows = 32;
  const int chunks = (rows + kRows - 1) / kRows;
  // each chunk's sums of dscale and dshift, added in chunk order after
  std::vector<double> partial(static_cast<std::size_t>(chunks) * 2 * cols, 0.0);
  chunked(*k.pool, rows, kRows, [&](std::size_t r0, std::size_t r1) {
    double* ps = partial.data() + static_cast<std::size_t>(r0 / kRows) * 2 * cols;
    double* pb = ps + cols;
    if (k.fast) {
      const std::size_t at0 = at(r0, cols, 0);
      k.fast->layer_norm_backward(dy + at0, x_hat + at0, rstd + r0, scale, dx + at0, ps, pb,
                                  static_cast<int>(r1 - r0), cols, accumulate);
      return;
    }
    for (std::size_t r = r0; r < r1; ++r) {
      const float* g = dy + at(r, cols, 0);
      const float* h = x_hat + at(r, cols, 0);
      // dx = rstd (dh - mean(dh) - h mean(dh h)), dh = dy * scale
      double mean_dh = 0.0, mean_dh_h = 0.0;
      for (int j = 0; j < cols; ++j) {
        const double dh = static_cast<double>(g[j]) * scale[j];
        mean_dh += dh;
        mean_dh_h += dh * h[j];
        ps[j] += static_cast<double>(g[j]) * h[j];
        pb[j] += g[j];
      }
      mean_dh /= cols;
      mean_dh_h /= cols;
      for (int j = 0; j < cols; ++j) {
        const double dh = static_cast<double>(g[j]) * scale[j];
        const float v = static_cast<float>(rstd[r] * (dh - mean_dh - h[j] * mean_dh_h));
        float& out = dx[at(r, cols, j)];
        out = accumulate ? out + v : v;
      }
    }
  });
  for (int c = 0; c < chunks; ++c) {
    const double* ps = partial.data() + static_cast<std::size_t>(c) * 2 * cols;
    for (int j = 0; j < cols; ++j) {
      dscale[j] += static_cast<float>(ps[j]);
      dshift[j] += static_cast<float>(ps[cols + j]);
    }
  }
}

namespace {
const double kGeluC = std::sqrt(2.0 / 3.14159265358979323846);
constexpr std::size_t kElements = 1 << 14;  // elements per task of the element-wise steps
}  // namespace

void gelu(Kernels& k, const float* x, float* y, std::size_t n) {
  chunked(*k.pool, n, kElements, [&](std::size_t i0, std::size_t i1) {
    if (k.fast) return k.fast->gelu(x + i0, y + i0, i1 - i0);
    for (std::size_t i = i0; i < i1; ++i) {
      const double v = x[i];
      // tanh in float, as PyTorch's float32 GELU takes it (its error, below 1e-7, is far inside the tests')
      const double t = std::tanh(static_cast<float>(kGeluC * (v + 0.044715 * v * v * v)));
      y[i] = static_cast<float>(0.5 * v * (1.0 + t));
    }
  });
}

void gelu_backward(Kernels& k, const float* x, const float* dy, float* dx, std::size_t n) {
  chunked(*k.pool, n, kElements, [&](std::size_t i0, std::size_t i1) {
    if (k.fast) return k.fast->gelu_backward(x + i0, dy + i0, dx + i0, i1 - i0);
    for (std::size_t i = i0; i < i1; ++i) {
      const double v = x[i];
      const double t = std::tanh(static_cast<float>(kGeluC * (v + 0.044715 * v * v * v)));
      const double d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * 0.044715 * v * v);
      dx[i] = static_cast<float>(dy[i] * d);
    }
  });
}

void dropout(Kernels& k, float* x, const std::uint8_t* keep, std::size_t n, float scale) {
  chunked(*k.pool, n, kElements, [&](std::size_t i0, std::size_t i1) {
    if (k.fast) return k.fast->dropout(x + i0, keep + i0, i1 - i0, scale);
    for (std::size_t i = i0; i < i1; ++i) x[i] = keep[i] ? x[i] * scale : 0.0f;
  });
}

void add(Kernels& k, float* x, const float* y, std::size_t n) {
  chunked(*k.pool, n, kElements, [&](std::size_t i0, std::size_t i1) {
    if (k.fast) return k.fast->add(x + i0, y + i0, i1 - i0);
    for (std::size_t i = i0; i < i1; ++i) x[i] += y[i];
  });
}

// One task per (sequence, head): rows of q, k, v for sequence b are [b T, (b + 1) T), head h's columns
// [h hd, (h + 1) hd). Each task writes only its own cells.
namespace {

void attention_forward_reference(const Attention& a, const float* q, const float* k, const float* v,
                                 float* weights, const std::uint8_t* keep, float* ctx) {
  const int T = a.T, H = a.H, hd = a.hd;
  const std::size_t W = static_cast<std::size_t>(H) * hd, tt = static_cast<std::size_t>(T) * T;
  a.kernels->pool->run(a.batch * H, [&](int task, int) {
    const int b = task / H, h = task % H;
    const std::size_t row0 = static_cast<std::size_t>(b) * T, col = static_cast<std::size_t>(h) * hd;
    float* w = weights + static_cast<std::size_t>(task) * tt;
    const std::uint8_t* kp = keep ? keep + static_cast<std::size_t>(task) * tt : nullptr;
    std::vector<double> s(static_cast<std::size_t>(T));
    for (int i = 0; i < T; ++i) {
      const float* qi = q + at(row0 + i, W, col);
      double mx = -HUGE_VAL;
      for (int j = 0; j <= i; ++j) {
        const float* kj = k + at(row0 + j, W, col);
        double dot = 0.0;
        for (int e = 0; e < hd; ++e) dot += static_cast<double>(qi[e]) * kj[e];
        s[j] = static_cast<double>(static_cast<float>(dot) / a.divisor);
        mx = std::max(mx, s[j]);
      }
      double sum = 0.0;
      for (int j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
      float* wi = w + at(i, T, 0);
      for (int j = 0; j <= i; ++j) wi[j] = static_cast<float>(std::exp(s[j] - mx) / sum);
      for (int j = i + 1; j < T; ++j) wi[j] = 0.0f;
      float* ci = ctx + at(row0 + i, W, col);
      for (int e = 0; e < hd; ++e) {
        double acc = 0.0;
        for (int j = 0; j <= i; ++j) {
          const float wd = kp ? (kp[at(i, T, j)] ? wi[j] * a.keep_scale : 0.0f) : wi[j];
          acc += static_cast<double>(wd) * v[at(row0 + j, W, col + e)];
        }
        ci[e] = static_cast<float>(acc);
      }
    }
  });
}

void attention_backward_reference(const Attention& a, const float* q, const float* k, const float* v,
                                  const float* weights, const std::uint8_t* keep, const float* dctx,
                                  float* dq, float* dk, float* dv) {
  const int T = a.T, H = a.H, hd = a.hd;
  const std::size_t W = static_cast<std::size_t>(H) * hd, tt = static_cast<std::size_t>(T) * T;
  a.kernels->pool->run(a.batch * H, [&](int task, int) {
    const int b = task / H, h = task % H;
    const std::size_t row0 = static_cast<std::size_t>(b) * T, col = static_cast<std::size_t>(h) * hd;
    const float* w = weights + static_cast<std::size_t>(task) * tt;
    const std::uint8_t* kp = keep ? keep + static_cast<std::size_t>(task) * tt : nullptr;
    auto dropped = [&](int i, int j) {
      return kp ? (kp[at(i, T, j)] ? w[at(i, T, j)] * a.keep_scale : 0.0f) : w[at(i, T, j)];
    };
    // ds (T x T): the gradient of the scores, masked cells 0
    std::vector<double> ds(tt, 0.0);
    for (int i = 0; i < T; ++i) {
      const float* gi = dctx + at(row0 + i, W, col);
      double row_dot = 0.0;
      for (int j = 0; j <= i; ++j) {
        const float* vj = v + at(row0 + j, W, col);
        double dwd = 0.0;  // d(dropped weight)
        for (int e = 0; e < hd; ++e) dwd += static_cast<double>(gi[e]) * vj[e];
        const double dw = kp ? (kp[at(i, T, j)] ? dwd * a.keep_scale : 0.0) : dwd;
        ds[at(i, T, j)] = dw;
        row_dot += dw * w[at(i, T, j)];
      }
      for (int j = 0; j <= i; ++j) ds[at(i, T, j)] = w[at(i, T, j)] * (ds[at(i, T, j)] - row_dot) / a.divisor;
    }
    for (int i = 0; i < T; ++i) {
      float* dqi = dq + at(row0 + i, W, col);
      for (int e = 0; e < hd; ++e) {
        double acc = 0.0;
        for (int j = 0; j <= i; ++j) acc += ds[at(i, T, j)] * k[at(row0 + j, W, col + e)];
        dqi[e] = static_cast<float>(acc);
      }
    }
    for (int j = 0; j < T; ++j) {
      float* dkj = dk + at(row0 + j, W, col);
      float* dvj = dv + at(row0 + j, W, col);
      for (int e = 0; e < hd; ++e) {
        double acc_k = 0.0, acc_v = 0.0;
        for (int i = j; i < T; ++i) {
          acc_k += ds[at(i, T, j)] * q[at(row0 + i, W, col + e)];
          acc_v += static_cast<double>(dropped(i, j)) * dctx[at(row0 + i, W, col + e)];
        }
        dkj[e] = static_cast<float>(acc_k);
        dvj[e] = static_cast<float>(acc_v);
      }
    }
  });
}

// The fast path: per (sequence, head), S = Q K^T, the softmax rows, ctx = dropout(W) V; and backward
// dW' = dctx V^T, dV = W'^T dctx, dS = W (dW - rowsum(dW W)) / divisor, dQ = dS K, dK = dS^T Q; the
// element-wise steps in between as in the reference. Every product is a panel GEMM without the causal mask's
// half (simd::CausalGemm): S and dW' only at and left of the diagonal, the others without the zero terms of
// W' and dS, which are kept zero right of their diagonals (W'^T and dS^T are read in place, not transposed).
// The products read the head's columns of q, k, v and dctx, and write those of ctx, dq, dk and dv, in place.

// One row of the weights (the ISA's kernel, or in double with libm's exp where there is none).
void softmax_row(const simd::TrainKernels* fast, const float* s, float divisor, int n, int T, float* w) {
  if (fast) return fast->attention_softmax(s, divisor, n, T, w);
  double mx = -HUGE_VAL;
  for (int j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(s[j] / divisor));
  double sum = 0.0;
  for (int j = 0; j < n; ++j) sum += std::exp(static_cast<double>(s[j] / divisor) - mx);
  for (int j = 0; j < n; ++j)
    w[j] = static_cast<float>(std::exp(static_cast<double>(s[j] / divisor) - mx) / sum);
  for (int j = n; j < T; ++j) w[j] = 0.0f;
}

// c (M, N; row stride ldc) = a (M, K; row stride lda; lower_at: a^T) b, b in panels of K rows, without the
// causal half.
void causal_product(const Kernels& K, simd::CausalGemm::Kind kind, int M, int N, int k, const float* a,
                    std::size_t lda, const float* b, float* c, std::size_t ldc) {
  const std::size_t bstride =
      static_cast<std::size_t>(k) * static_cast<std::size_t>(simd::panel_width(K.isa));
  simd::run_causal_gemm(
      K.isa, simd::CausalGemm{kind, M, N, k, a, static_cast<int>(lda), b, bstride, c, static_cast<int>(ldc)});
}

// out (T x T) = dropout's mask on the weights: keep ? w * scale : 0 at and left of the diagonal, 0 right of
// it (where w is 0 too).
void drop_weights(const float* w, const std::uint8_t* keep, float scale, int T, float* out) {
  for (int i = 0; i < T; ++i) {
    const std::size_t r = at(i, T, 0);
    for (int j = 0; j <= i; ++j) out[r + j] = keep[r + j] ? w[r + j] * scale : 0.0f;
    std::fill(out + r + i + 1, out + r + T, 0.0f);
  }
}

void attention_forward_fast(const Attention& a, const float* q, const float* k, const float* v,
                            float* weights, const std::uint8_t* keep, float* ctx) {
  Kernels& K = *a.kernels;
  const int T = a.T, H = a.H, hd = a.hd, nr = simd::panel_width(K.isa);
  const std::size_t W = static_cast<std::size_t>(H) * hd, tt = static_cast<std::size_t>(T) * T;
  K.pool->run(a.batch * H, [&](int task, int worker) {
    Kernels::Worker& wk = K.workers[static_cast<std::size_t>(worker)];
    ensure(wk.b, std::max(simd::panel_floats(T, hd, nr), simd::panel_floats(hd, T, nr)));
    ensure(wk.c, tt);
    const int b = task / H, h = task % H;
    const std::size_t head = at(static_cast<std::size_t>(b) * T, W, static_cast<std::size_t>(h) * hd);
    float* w = weights + static_cast<std::size_t>(task) * tt;
    const std::uint8_t* kp = keep ? keep + static_cast<std::size_t>(task) * tt : nullptr;
    float* s = wk.c.data();
    // S = Q K^T at and left of the diagonal: the softmax reads no other cell
    simd::pack_nk(k + head, T, hd, static_cast<int>(W), nr, wk.b.data());
    causal_product(K, simd::CausalGemm::lower_c, T, T, hd, q + head, W, wk.b.data(), s, T);
    for (int i = 0; i < T; ++i) softmax_row(K.fast, s + at(i, T, 0), a.divisor, i + 1, T, w + at(i, T, 0));
    const float* wd = w;
    if (kp) {  // the dropped weights, into the scores' buffer
      drop_weights(w, kp, a.keep_scale, T, s);
      wd = s;
    }
    // ctx = W' V
    simd::pack_kn(v + head, T, hd, static_cast<int>(W), nr, wk.b.data());
    causal_product(K, simd::CausalGemm::lower_a, T, hd, T, wd, T, wk.b.data(), ctx + head, W);
  });
}

void attention_backward_fast(const Attention& a, const float* q, const float* k, const float* v,
                             const float* weights, const std::uint8_t* keep, const float* dctx, float* dq,
                             float* dk, float* dv) {
  Kernels& K = *a.kernels;
  const int T = a.T, H = a.H, hd = a.hd, nr = simd::panel_width(K.isa);
  const std::size_t W = static_cast<std::size_t>(H) * hd, tt = static_cast<std::size_t>(T) * T;
  K.pool->run(a.batch * H, [&](int task, int worker) {
    Kernels::Worker& wk = K.workers[static_cast<std::size_t>(worker)];
    ensure(wk.b, std::max(simd::panel_floats(T, hd, nr), simd::panel_floats(hd, T, nr)));
    ensure(wk.c, tt);

    const int b = task / H, h = task % H;
    const std::size_t head = at(static_cast<std::size_t>(b) * T, W, static_cast<std::size_t>(h) * hd);
    const float* w = weights + static_cast<std::size_t>(task) * tt;
    const std::uint8_t* kp = keep ? keep + static_cast<std::size_t>(task) * tt : nullptr;
    float* ds = wk.c.data();
    // dW' = dctx V^T at and left of the diagonal (the cells dS reads)
    simd::pack_nk(v + head, T, hd, static_cast<int>(W), nr, wk.b.data());
    causal_product(K, simd::CausalGemm::lower_c, T, T, hd, dctx + head, W, wk.b.data(), ds, T);
    // dV = W'^T dctx (W' the dropped weights)
    const float* wd = w;
    if (kp) {  // the dropped weights
      ensure(wk.e, tt);
      drop_weights(w, kp, a.keep_scale, T, wk.e.data());
      wd = wk.e.data();
    }
    simd::pack_kn(dctx + head, T, hd, static_cast<int>(W), nr, wk.b.data());
    causal_product(K, simd::CausalGemm::lower_at, T, hd, T, wd, T, wk.b.data(), dv + head, W);
    // dS, masked cells 0
    for (int i = 0; i < T; ++i) {
      float* di = ds + at(i, T, 0);
      const float* wi = w + at(i, T, 0);
      double row_dot = 0.0;
      for (int j = 0; j <= i; ++j) {
        if (kp) di[j] = kp[at(i, T, j)] ? di[j] * a.keep_scale : 0.0f;
        row_dot += static_cast<double>(di[j]) * wi[j];
      }
      for (int j = 0; j <= i; ++j) di[j] = static_cast<float>(wi[j] * (di[j] - row_dot) / a.divisor);
      for (int j = i + 1; j < T; ++j) di[j] = 0.0f;
    }
    // dQ = dS K, dK = dS^T Q
    simd::pack_kn(k + head, T, hd, static_cast<int>(W), nr, wk.b.data());
    causal_product(K, simd::CausalGemm::lower_a, T, hd, T, ds, T, wk.b.data(), dq + head, W);
    simd::pack_kn(q + head, T, hd, static_cast<int>(W), nr, wk.b.data());
    causal_product(K, simd::CausalGemm::lower_at, T, hd, T, ds, T, wk.b.data(), dk + head, W);
  });
}

}  // namespace

void attention_forward(const Attention& a, const float* q, const float* k, const float* v, float* weights,
                       const std::uint8_t* keep, float* ctx) {
  if (a.kernels->isa == Isa::scalar)
    attention_forward_reference(a, q, k, v, weights, keep, ctx);
  else
    attention_forward_fast(a, q, k, v, weights, keep, ctx);
}

void attention_backward(const Attention& a, const float* q, const float* k, const float* v,
                        const float* weights, const std::uint8_t* keep, const float* dctx, float* dq,
                        float* dk, float* dv) {
  if (a.kernels->isa == Isa::scalar)
    attention_backward_reference(a, q, k, v, weights, keep, dctx, dq, dk, dv);
  else
    attention_backward_fast(a, q, k, v, weights, keep, dctx, dq, dk, dv);
}

double cross_entropy(Kernels& k, float* logits, const int* targets, int rows, int vocab,
                     std::vector<double>* row_losses) {
  std::vector<double> losses(static_cast<std::size_t>(rows));
  chunked(*k.pool, rows, 2, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      float* l = logits + at(r, vocab, 0);
      if (k.fast) {
        losses[r] = k.fast->softmax_loss(l, targets[r], vocab);
        continue;
      }
      double mx = -HUGE_VAL;
      for (int j = 0; j < vocab; ++j) mx = std::max(mx, static_cast<double>(l[j]));
      double sum = 0.0;
      for (int j = 0; j < vocab; ++j) sum += std::exp(l[j] - mx);
      const double lse = mx + std::log(sum);
      losses[r] = lse - l[targets[r]];
      for (int j = 0; j < vocab; ++j) l[j] = static_cast<float>(std::exp(l[j] - lse));
    }
  });
  double total = 0.0;
  for (double x : losses) total += x;
  if (row_losses) *row_losses = std::move(losses);
  return total / rows;
}

void cross_entropy_backward(Kernels& k, float* probs, const int* targets, int rows, int vocab,
                            int mean_over) {
  const double inv = 1.0 / (mean_over > 0 ? mean_over : rows);
  chunked(*k.pool, rows, 2, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      float* p = probs + at(r, vocab, 0);
      if (k.fast) {
        k.fast->softmax_loss_backward(p, targets[r], vocab, inv);
        continue;
      }
      for (int j = 0; j < vocab; ++j) p[j] = static_cast<float>((p[j] - (j == targets[r] ? 1.0 : 0.0)) * inv);
    }
  });
}

}  // namespace attnviz::train
