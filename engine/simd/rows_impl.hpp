// The whole-model row steps (LayerNorm, GELU, linear layers), written once for every ISA. Included only by
// the layer_<isa>.cpp files, after layer_impl.hpp (whose gemm and exp they use).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "layer_impl.hpp"

namespace attnviz::simd {
namespace detail {

// One row: y = (x - mean) / sqrt(var + eps) * scale + shift, the variance biased (divided by n). The sums run
// in float lanes, then double across lanes.
template <class A>
void layer_norm_row(const float* x, int n, const float* scale, const float* shift, float* y) {
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size);
  const int nv = n - n % W;
  // pass 1: mean
  B vs(0.0f);
  for (int j = 0; j < nv; j += W) vs += B::load_unaligned(x + j);
  double sum = static_cast<double>(xsimd::hadd(vs));
  for (int j = nv; j < n; ++j) sum += static_cast<double>(x[j]);
  const float mean = static_cast<float>(sum / n);
  // pass 2: biased variance of the centred values
  const B vm(mean);
  B vq(0.0f);
  for (int j = 0; j < nv; j += W) {
    const B c = B::load_unaligned(x + j) - vm;
    vq = xsimd::fma(c, c, vq);
  }
  double sq = static_cast<double>(xsimd::hadd(vq));
  for (int j = nv; j < n; ++j) {
    const double c = static_cast<double>(x[j] - mean);
    sq += c * c;
  }
  const float inv = static_cast<float>(1.0 / std::sqrt(sq / n + 1e-5));
  // pass 3: normalize, scale and shift
  const B vi(inv);
  for (int j = 0; j < nv; j += W) {
    const B c = (B::load_unaligned(x + j) - vm) * vi;
    xsimd::fma(c, B::load_unaligned(scale + j), B::load_unaligned(shift + j)).store_unaligned(y + j);
  }
  for (int j = nv; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j] + shift[j];
}

// GELU's tanh approximation on one vector. tanh(u) = 1 - 2 / (exp(2u) + 1) for u >= 0 (odd for u < 0); past
// |u| = 10 tanh is 1 in float, which also keeps exp in range.
template <class A>
inline vf<A> gelu(vf<A> x) {
  using B = vf<A>;
  const B c(0.7978845608028654f);  // sqrt(2 / pi)
  const B u = c * xsimd::fma(B(0.044715f) * x, x * x, x);
  const B au = xsimd::min(xsimd::abs(u), B(10.0f));
  const B t = B(1.0f) - B(2.0f) / (exp_fast<A>(au + au) + B(1.0f));
  const B th = xsimd::select(u < B(0.0f), -t, t);
  return B(0.5f) * x * (B(1.0f) + th);
}

}  // namespace detail

template <class A>
void fast_rows::operator()(A, const RowJob& job) const {
  using namespace detail;
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size);
  ThreadPool& pool = *job.pool;
  switch (job.kind) {
    case RowJob::layer_norm: {
      // one task per block of 16 rows
      constexpr int kRows = 16;
      pool.run((job.rows + kRows - 1) / kRows, [&](int task, int) {
        const int r1 = lesser<A>(job.rows, (task + 1) * kRows);
        for (int r = task * kRows; r < r1; ++r) {
          const std::size_t at = static_cast<std::size_t>(r) * job.cols;
          layer_norm_row<A>(job.x + at, job.cols, job.scale, job.shift, job.y + at);
        }
      });
      break;
    }
    case RowJob::gelu: {
      // tasks of 16K elements; the tail of the last one goes through a padded vector
      constexpr std::size_t kChunk = 1u << 14;
      const std::size_t n = static_cast<std::size_t>(job.rows) * job.cols;
      pool.run(static_cast<int>((n + kChunk - 1) / kChunk), [&](int task, int) {
        const std::size_t i0 = static_cast<std::size_t>(task) * kChunk, i1 = std::min(n, i0 + kChunk);
        std::size_t i = i0;
        for (; i + W <= i1; i += W) gelu<A>(B::load_unaligned(job.x + i)).store_unaligned(job.y + i);
        if (i < i1) {
          alignas(64) float lanes[W] = {};
          for (std::size_t j = i; j < i1; ++j) lanes[j - i] = job.x[j];
          gelu<A>(B::load_aligned(lanes)).store_aligned(lanes);
          for (std::size_t j = i; j < i1; ++j) job.y[j] = lanes[j - i];
        }
      });
      break;
    }
    case RowJob::linear:
      parallel_gemm<A>(pool, job.rows, job.out, job.cols, job.x, job.w, job.bias, job.y,
                       HalfPanels{job.w16, job.w16_bf16});
      break;
    case RowJob::head_outputs: {
      // Head h reads rows [h hd, (h + 1) hd) of every panel: a task takes a run of panels and each panel's
      // heads in turn, so the panels are read in memory order (a head at a time across the panels waited on
      // each 8 kB slice's first lines: 55 against 47 us a gpt2-small layer in the pass).
      constexpr int NR = nr_of<A>();
      const int hd = job.cols / job.heads, pn = panels(job.out, NR);
      const std::size_t bstride = static_cast<std::size_t>(job.cols) * NR;
      constexpr int kRun = 4;
      pool.run((pn + kRun - 1) / kRun, [&](int task, int) {
        for (int p = task * kRun; p < lesser<A>(pn, (task + 1) * kRun); ++p)
          for (int h = 0; h < job.heads; ++h) {
            const std::size_t from = static_cast<std::size_t>(h) * hd * NR;
            const float* x = job.x + static_cast<std::size_t>(h) * hd;
            float* y = job.y + static_cast<std::size_t>(h) * job.out;
            if (job.w16)
              gemm16<A>(0, 1, p, p + 1, job.out, hd, x, job.cols, HalfPanels{job.w16 + from, job.w16_bf16},
                        bstride, nullptr, y, job.out);
            else
              gemm<A>(0, 1, p, p + 1, job.out, hd, x, job.cols, job.w + from, bstride, nullptr, y, job.out);
          }
      });
      break;
    }
  }
}

template <class A>
void logit_row::operator()(A, LogitRow& job) const {
  using namespace detail;
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size);
  const float* x = job.x;
  const int n = job.n, nv = n - n % W;
  if (job.sum) {
    // exp(x - max) in float lanes, summed in double lanes; the tail padded with -inf (exp_fast gives 0)
    alignas(64) float e[W];
    double lanes[W] = {};
    const B m(job.max);
    const auto add = [&](B v) {
      exp_fast<A>(v - m).store_aligned(e);
      for (int i = 0; i < W; ++i) lanes[i] += static_cast<double>(e[i]);
    };
    for (int j = 0; j < nv; j += W) add(B::load_unaligned(x + j));
    if (nv < n) {
      alignas(64) float tail[W];
      for (int i = 0; i < W; ++i) tail[i] = nv + i < n ? x[nv + i] : -std::numeric_limits<float>::infinity();
      add(B::load_aligned(tail));
    }
    double sum = 0.0;
    for (int i = 0; i < W; ++i) sum += lanes[i];
    job.exp_sum = sum;
    // each picked value through the same lanes: the bits the sum added
    for (int k = 0; k < job.n_picks; ++k) {
      exp_fast<A>(B(x[job.picks[k]]) - m).store_aligned(e);
      job.picked[k] = static_cast<double>(e[0]);
    }
    return;
  }
  // the largest value, finiteness, and the values above the bar (a lane compare skips the rest)
  const B big(std::numeric_limits<float>::max());
  B mx(-std::numeric_limits<float>::infinity());
  auto finite = big == big;
  const auto offer = [&](int j) {
    if (x[j] > job.bar) job.bar = job.offer(job.context, j);
  };
  for (int j = 0; j < nv; j += W) {
    const B v = B::load_unaligned(x + j);
    mx = xsimd::max(mx, v);
    finite = finite & (xsimd::abs(v) <= big);
    if (xsimd::any(v > B(job.bar)))
      for (int i = j; i < j + W; ++i) offer(i);
  }
  alignas(64) float lanes_max[W];
  mx.store_aligned(lanes_max);
  float largest = *std::max_element(lanes_max, lanes_max + W);
  bool all_finite = xsimd::all(finite);
  for (int j = nv; j < n; ++j) {
    largest = std::max(largest, x[j]);
    all_finite = all_finite && std::abs(x[j]) <= std::numeric_limits<float>::max();
    offer(j);
  }
  job.max = largest, job.finite = all_finite;
}

}  // namespace attnviz::simd
