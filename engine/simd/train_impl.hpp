// The fast training kernels (train_kernels.hpp), written once for every ISA. Included only by the
// train_<isa>.cpp files, which build with -ffp-contract=off: every fused multiply-add below is written as
// xsimd::fma, and AdamW, which has none, rounds exactly as the reference loop does.
//
// Sums run in float lanes over a bounded stretch (a row of d_model, or 1,024 logits) and are carried on in
// double, so a long row keeps the reference's accuracy; each sum is taken in one fixed order.
#pragma once

#include <algorithm>
#include <cmath>

#include "layer_impl.hpp"
#include "train_kernels.hpp"

namespace attnviz::simd {
namespace train_detail {

using detail::exp_fast;
using detail::vf;

// IEEE division and square root. xsimd 8.1 computes float division and sqrt on neon64 by reciprocal
// estimates and Newton steps (off by an ulp or so), though AArch64 has both instructions exactly.
template <class A>
inline vf<A> div(vf<A> a, vf<A> b) {
#if defined(__aarch64__)
  return vf<A>(vdivq_f32(a, b));
#else
  return a / b;
#endif
}
template <class A>
inline vf<A> sqrt(vf<A> a) {
#if defined(__aarch64__)
  return vf<A>(vsqrtq_f32(a));
#else
  return xsimd::sqrt(a);
#endif
}

// The tail of a row, n - i < W elements, as one vector padded with `pad`.
template <class A>
inline vf<A> load_tail(const float* p, std::size_t i, std::size_t n, float pad) {
  alignas(64) float lanes[vf<A>::size];
  for (std::size_t j = 0; j < vf<A>::size; ++j) lanes[j] = i + j < n ? p[i + j] : pad;
  return vf<A>::load_aligned(lanes);
}
template <class A>
inline void store_tail(vf<A> v, float* p, std::size_t i, std::size_t n) {
  alignas(64) float lanes[vf<A>::size];
  v.store_aligned(lanes);
  for (std::size_t j = 0; i + j < n; ++j) p[i + j] = lanes[j];
}

// --- LayerNorm

// x, y, x_hat (rows, cols): y = (x - mean) * rstd * scale + shift, rstd = 1 / sqrt(var + 1e-5), the variance
// biased; the backward pass keeps x_hat and rstd.
template <class A>
void layer_norm(const float* x, const float* scale, const float* shift, float* y, float* x_hat, float* rstd,
                int rows, int cols) {
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size);
  const int nv = cols - cols % W;
  for (int r = 0; r < rows; ++r) {
    const std::size_t at = static_cast<std::size_t>(r) * cols;
    const float* xr = x + at;
    // pass 1: a first mean
    B vs(0.0f);
    for (int j = 0; j < nv; j += W) vs += B::load_unaligned(xr + j);
    double sum = static_cast<double>(xsimd::hadd(vs));
    for (int j = nv; j < cols; ++j) sum += xr[j];
    const float m0 = static_cast<float>(sum / cols);
    // pass 2: the sums of the centred values and of their squares; the first corrects the mean (the
    // corrected two-pass algorithm), so the mean is not off by the first pass's float rounding
    const B vm(m0);
    B vc(0.0f), vq(0.0f);
    for (int j = 0; j < nv; j += W) {
      const B c = B::load_unaligned(xr + j) - vm;
      vc += c;
      vq = xsimd::fma(c, c, vq);
    }
    double sc = static_cast<double>(xsimd::hadd(vc)), sq = static_cast<double>(xsimd::hadd(vq));
    for (int j = nv; j < cols; ++j) {
      const double c = static_cast<double>(xr[j] - m0);
      sc += c, sq += c * c;
    }
    const double mean = m0 + sc / cols, var = (sq - sc * sc / cols) / cols;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + 1e-5));
    rstd[r] = inv;
    // pass 3: normalize (the mean in two floats: x - hi is exact near the mean), keep x_hat, scale, shift
    const float hi = static_cast<float>(mean), lo = static_cast<float>(mean - hi);
    const B vhi(hi), vlo(lo), vi(inv);
    for (int j = 0; j < nv; j += W) {
      const B h = ((B::load_unaligned(xr + j) - vhi) - vlo) * vi;
      h.store_unaligned(x_hat + at + j);
      xsimd::fma(h, B::load_unaligned(scale + j), B::load_unaligned(shift + j)).store_unaligned(y + at + j);
    }
    for (int j = nv; j < cols; ++j) {
      const float h = ((xr[j] - hi) - lo) * inv;
      x_hat[at + j] = h;
      y[at + j] = std::fma(h, scale[j], shift[j]);
    }
  }
}

// dx = rstd (dh - mean(dh) - x_hat mean(dh x_hat)), dh = dy * scale, per row; dscale += sum over rows of
// dy x_hat, dshift += sum of dy.
template <class A>
void layer_norm_backward(const float* dy, const float* x_hat, const float* rstd, const float* scale,
                         float* dx, double* dscale, double* dshift, int rows, int cols, bool accumulate) {
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size);
  const int nv = cols - cols % W;
  // pass 1, per row: the two means, then dx
  for (int r = 0; r < rows; ++r) {
    const std::size_t at = static_cast<std::size_t>(r) * cols;
    const float *g = dy + at, *h = x_hat + at;
    B s1(0.0f), s2(0.0f);
    for (int j = 0; j < nv; j += W) {
      const B dh = B::load_unaligned(g + j) * B::load_unaligned(scale + j);
      s1 += dh;
      s2 = xsimd::fma(dh, B::load_unaligned(h + j), s2);
    }
    double mean_dh = static_cast<double>(xsimd::hadd(s1)), mean_dh_h = static_cast<double>(xsimd::hadd(s2));
    for (int j = nv; j < cols; ++j) {
      const float dh = g[j] * scale[j];
      mean_dh += dh;
      mean_dh_h += static_cast<double>(dh) * h[j];
    }
    const B m1(static_cast<float>(mean_dh / cols)), m2(static_cast<float>(mean_dh_h / cols)), vr(rstd[r]);
    float* out = dx + at;
    for (int j = 0; j < nv; j += W) {
      const B dh = B::load_unaligned(g + j) * B::load_unaligned(scale + j);
      B v = vr * (dh - m1 - B::load_unaligned(h + j) * m2);
      if (accumulate) v += B::load_unaligned(out + j);
      v.store_unaligned(out + j);
    }
    for (int j = nv; j < cols; ++j) {
      const float v = rstd[r] * (g[j] * scale[j] - static_cast<float>(mean_dh / cols) -
                                 h[j] * static_cast<float>(mean_dh_h / cols));
      out[j] = accumulate ? out[j] + v : v;
    }
  }
  // pass 2: the column sums over these rows, in double as the reference sums them (an element-wise loop the
  // compiler vectorizes for this file's ISA)
  for (int r = 0; r < rows; ++r) {
    const std::size_t at = static_cast<std::size_t>(r) * cols;
    for (int j = 0; j < cols; ++j) {
      dscale[j] += static_cast<double>(dy[at + j]) * x_hat[at + j];
      dshift[j] += dy[at + j];
    }
  }
}

// --- GELU, tanh form

// tanh(u) = 1 - 2 / (exp(2u) + 1) for u >= 0, odd for u < 0; past |u| = 10 it is 1 in float.
template <class A>
inline vf<A> tanh_of(vf<A> u) {
  using B = vf<A>;
  const B au = xsimd::min(xsimd::abs(u), B(10.0f));
  const B t = B(1.0f) - div<A>(B(2.0f), exp_fast<A>(au + au) + B(1.0f));
  return xsimd::select(u < B(0.0f), -t, t);
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluK = 0.044715f;

// y = 0.5 x (1 + tanh(c (x + k x^3)))
template <class A>
inline vf<A> gelu_of(vf<A> x) {
  using B = vf<A>;
  const B t = tanh_of<A>(B(kGeluC) * xsimd::fma(B(kGeluK) * x, x * x, x));
  const B half_x = B(0.5f) * x;
  return xsimd::fma(half_x, t, half_x);  // 0.5 x (1 + t), rounded once
}

// gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2)
template <class A>
inline vf<A> gelu_slope(vf<A> x) {
  using B = vf<A>;
  const B x2 = x * x;
  const B t = tanh_of<A>(B(kGeluC) * xsimd::fma(B(kGeluK) * x, x2, x));
  const B inner = B(kGeluC) * xsimd::fma(B(3.0f * kGeluK), x2, B(1.0f));
  const B half_x = B(0.5f) * x;
  return xsimd::fma(half_x * xsimd::fnma(t, t, B(1.0f)), inner, B(0.5f) * (B(1.0f) + t));
}

template <class A>
void gelu(const float* x, float* y, std::size_t n) {
  constexpr std::size_t W = vf<A>::size;
  std::size_t i = 0;
  for (; i + W <= n; i += W) gelu_of<A>(vf<A>::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) store_tail<A>(gelu_of<A>(load_tail<A>(x, i, n, 0.0f)), y, i, n);
}

template <class A>
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) {
  using B = vf<A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + W <= n; i += W)
    (B::load_unaligned(dy + i) * gelu_slope<A>(B::load_unaligned(x + i))).store_unaligned(dx + i);
  if (i < n)
    store_tail<A>(load_tail<A>(dy, i, n, 0.0f) * gelu_slope<A>(load_tail<A>(x, i, n, 0.0f)), dx, i, n);
}

// --- Softmax and cross-entropy over one row of logits

template <class A>
double softmax_loss(float* l, int target, int vocab) {
  using B = vf<A>;
  constexpr std::size_t W = B::size;
  const std::size_t n = static_cast<std::size_t>(vocab), nv = n - n % W;
  const float picked = l[target];
  // pass 1: the row's max
  B vm(-INFINITY);
  for (std::size_t j = 0; j < nv; j += W) vm = xsimd::max(vm, B::load_unaligned(l + j));
  alignas(64) float lanes[W];
  vm.store_aligned(lanes);
  float mx = lanes[0];
  for (std::size_t j = 1; j < W; ++j) mx = std::max(mx, lanes[j]);
  for (std::size_t j = nv; j < n; ++j) mx = std::max(mx, l[j]);
  // pass 2: e = exp(l - max) in place, and its sum (float lanes over 1,024 logits at a time, then double)
  const B bm(mx);
  constexpr std::size_t kBlock = 1024;
  double sum = 0.0;
  for (std::size_t j0 = 0; j0 < nv; j0 += kBlock) {
    B s(0.0f);
    for (std::size_t j = j0, j1 = std::min(nv, j0 + kBlock); j < j1; j += W) {
      const B e = exp_fast<A>(B::load_unaligned(l + j) - bm);
      e.store_unaligned(l + j);
      s += e;
    }
    sum += static_cast<double>(xsimd::hadd(s));
  }
  if (nv < n) {
    const B e = exp_fast<A>(load_tail<A>(l, nv, n, -INFINITY) - bm);
    store_tail<A>(e, l, nv, n);
    sum += static_cast<double>(xsimd::hadd(e));
  }
  // pass 3: divide by the sum
  const B inv(static_cast<float>(1.0 / sum));
  for (std::size_t j = 0; j < nv; j += W) (B::load_unaligned(l + j) * inv).store_unaligned(l + j);
  for (std::size_t j = nv; j < n; ++j) l[j] *= static_cast<float>(1.0 / sum);
  return static_cast<double>(mx) + std::log(sum) - static_cast<double>(picked);
}

// p * inv with inv = 1 / rows in two floats (hi + lo): the product rounds as the reference's double one does.
template <class A>
void softmax_loss_backward(float* p, int target, int vocab, double inv) {
  using B = vf<A>;
  constexpr std::size_t W = B::size;
  const std::size_t n = static_cast<std::size_t>(vocab), nv = n - n % W;
  const float hi = static_cast<float>(inv), lo = static_cast<float>(inv - hi);
  const double at_target = p[target];
  const B vhi(hi), vlo(lo);
  for (std::size_t j = 0; j < nv; j += W) {
    const B v = B::load_unaligned(p + j);
    xsimd::fma(v, vhi, v * vlo).store_unaligned(p + j);
  }
  for (std::size_t j = nv; j < n; ++j) p[j] = std::fma(p[j], hi, p[j] * lo);
  p[target] = static_cast<float>((at_target - 1.0) * inv);
}

// --- AdamW: PyTorch's single-tensor steps, each a float operation (see optim.cpp)

template <class A>
void adamw(float* p, float* m, float* v, const float* g, std::size_t n, const AdamWScalars& s) {
  using B = vf<A>;
  constexpr std::size_t W = B::size;
  const B decay(s.decay), b1(s.b1), omb1(s.one_minus_b1), b2(s.b2), omb2(s.one_minus_b2);
  const B neg_step(-s.step_size), bc2(s.bc2_sqrt), eps(s.eps);
  auto one = [&](B pv, B mv, B vv, B gv, B& po, B& mo, B& vo) {
    pv = pv * decay;
    mo = mv * b1 + omb1 * gv;
    vo = vv * b2 + omb2 * gv * gv;
    const B denom = div<A>(sqrt<A>(vo), bc2) + eps;
    po = pv + div<A>(neg_step * mo, denom);
  };
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    B po, mo, vo;
    one(B::load_unaligned(p + i), B::load_unaligned(m + i), B::load_unaligned(v + i),
        B::load_unaligned(g + i), po, mo, vo);
    po.store_unaligned(p + i), mo.store_unaligned(m + i), vo.store_unaligned(v + i);
  }
  if (i < n) {
    B po, mo, vo;
    one(load_tail<A>(p, i, n, 0.0f), load_tail<A>(m, i, n, 0.0f), load_tail<A>(v, i, n, 0.0f),
        load_tail<A>(g, i, n, 0.0f), po, mo, vo);
    store_tail<A>(po, p, i, n), store_tail<A>(mo, m, i, n), store_tail<A>(vo, v, i, n);
  }
}

// --- Dropout and the residual stream: plain loops, which this file's -m flags let the compiler vectorize
// for the ISA (a byte mask does not map onto every ISA's float vectors in xsimd 8.1)

template <class A>
void dropout(float* x, const std::uint8_t* keep, std::size_t n, float scale) {
  for (std::size_t i = 0; i < n; ++i) x[i] = keep[i] ? x[i] * scale : 0.0f;
}

template <class A>
void add(float* x, const float* y, std::size_t n) {
  using B = vf<A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + W <= n; i += W) (B::load_unaligned(x + i) + B::load_unaligned(y + i)).store_unaligned(x + i);
  for (; i < n; ++i) x[i] += y[i];
}

// --- Transposes and the attention's softmax rows

// Four lanes on every ISA: a 4 x 4 tile is transposed with two rounds of interleaving (of floats, then of
// pairs of floats as doubles), which every ISA has on 128-bit vectors.
#if defined(__aarch64__)
using Arch4 = xsimd::neon64;
#else
using Arch4 = xsimd::sse2;
#endif
using V4 = xsimd::batch<float, Arch4>;
using D2 = xsimd::batch<double, Arch4>;

// A template on the file's Arch although it uses 128-bit vectors on every ISA: each ISA's copy is then its
// own symbol, compiled with that file's flags (one inline function shared by the files could be the AVX-512
// one).
template <class A>
inline void transpose4(const float* src, std::size_t ld_src, float* dst, std::size_t ld_dst) {
  const V4 r0 = V4::load_unaligned(src), r1 = V4::load_unaligned(src + ld_src);
  const V4 r2 = V4::load_unaligned(src + 2 * ld_src), r3 = V4::load_unaligned(src + 3 * ld_src);
  // a0 b0 a1 b1, a2 b2 a3 b3, c0 d0 c1 d1, c2 d2 c3 d3
  const D2 t0 = xsimd::bitwise_cast<D2>(xsimd::zip_lo(r0, r1)),
           t1 = xsimd::bitwise_cast<D2>(xsimd::zip_hi(r0, r1));
  const D2 t2 = xsimd::bitwise_cast<D2>(xsimd::zip_lo(r2, r3)),
           t3 = xsimd::bitwise_cast<D2>(xsimd::zip_hi(r2, r3));
  xsimd::bitwise_cast<V4>(xsimd::zip_lo(t0, t2)).store_unaligned(dst);  // a0 b0 c0 d0
  xsimd::bitwise_cast<V4>(xsimd::zip_hi(t0, t2)).store_unaligned(dst + ld_dst);
  xsimd::bitwise_cast<V4>(xsimd::zip_lo(t1, t3)).store_unaligned(dst + 2 * ld_dst);
  xsimd::bitwise_cast<V4>(xsimd::zip_hi(t1, t3)).store_unaligned(dst + 3 * ld_dst);
}

// In blocks of 64 source rows by 32 columns, a column tile (4 destination rows) at a time: each destination
// row gets one contiguous run of 64 floats. Going row tile by row tile instead wrote 16 bytes to each of 32
// destination rows in turn, and with a destination stride of a multiple of 4 KB (linear_dw's 2,048 rows)
// those rows share one cache set and evict each other before their lines fill. The edges are copied one by
// one.
template <class A>
void transpose(const float* src, std::size_t ld_src, int rows, int cols, float* dst, std::size_t ld_dst) {
  constexpr int kRows = 64, kCols = 32;
  for (int i0 = 0; i0 < rows; i0 += kRows)
    for (int j0 = 0; j0 < cols; j0 += kCols) {
      const int i1 = std::min(rows, i0 + kRows), j1 = std::min(cols, j0 + kCols);
      const int i4 = i0 + (i1 - i0) / 4 * 4, j4 = j0 + (j1 - j0) / 4 * 4;
      for (int j = j0; j < j4; j += 4)
        for (int i = i0; i < i4; i += 4)
          transpose4<A>(src + static_cast<std::size_t>(i) * ld_src + j, ld_src,
                        dst + static_cast<std::size_t>(j) * ld_dst + i, ld_dst);
      for (int i = i0; i < i1; ++i)
        for (int j = i < i4 ? j4 : j0; j < j1; ++j)
          dst[static_cast<std::size_t>(j) * ld_dst + i] = src[static_cast<std::size_t>(i) * ld_src + j];
    }
}

template <class A>
void attention_softmax(const float* s, float divisor, int n, int T, float* w) {
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size);
  const int nv = n - n % W;
  // pass 1: the scaled scores and their max
  const B vd(divisor);
  B vm(-INFINITY);
  for (int j = 0; j < nv; j += W) {
    const B x = div<A>(B::load_unaligned(s + j), vd);
    x.store_unaligned(w + j);
    vm = xsimd::max(vm, x);
  }
  alignas(64) float lanes[W];
  vm.store_aligned(lanes);
  float mx = -INFINITY;
  for (int j = 0; j < W; ++j) mx = std::max(mx, lanes[j]);
  for (int j = nv; j < n; ++j) {
    w[j] = s[j] / divisor;
    mx = std::max(mx, w[j]);
  }
  // pass 2: the exponentials in place, summed in float lanes over 1,024 at a time, then in double
  const B bm(mx);
  constexpr int kBlock = 1024;
  double sum = 0.0;
  for (int j0 = 0; j0 < nv; j0 += kBlock) {
    B acc(0.0f);
    for (int j = j0, j1 = std::min(nv, j0 + kBlock); j < j1; j += W) {
      const B e = exp_fast<A>(B::load_unaligned(w + j) - bm);
      e.store_unaligned(w + j);
      acc += e;
    }
    sum += static_cast<double>(xsimd::hadd(acc));
  }
  const std::size_t un = static_cast<std::size_t>(n), unv = static_cast<std::size_t>(nv);
  if (nv < n) {
    const B e = exp_fast<A>(load_tail<A>(w, unv, un, -INFINITY) - bm);
    store_tail<A>(e, w, unv, un);
    sum += static_cast<double>(xsimd::hadd(e));
  }
  // pass 3: divide by the sum; the masked cells are exactly 0
  const float inv = static_cast<float>(1.0 / sum);
  const B vi(inv);
  for (int j = 0; j < nv; j += W) (B::load_unaligned(w + j) * vi).store_unaligned(w + j);
  for (int j = nv; j < n; ++j) w[j] *= inv;
  for (int j = n; j < T; ++j) w[j] = 0.0f;
}

}  // namespace train_detail

template <class A>
const TrainKernels& train_table::operator()(A) const {
  using namespace train_detail;
  static const TrainKernels table = {layer_norm<A>,
                                     layer_norm_backward<A>,
                                     gelu<A>,
                                     gelu_backward<A>,
                                     softmax_loss<A>,
                                     softmax_loss_backward<A>,
                                     adamw<A>,
                                     dropout<A>,
                                     add<A>,
                                     transpose<A>,
                                     attention_softmax<A>};
  return table;
}

}  // namespace attnviz::simd
