// The fast forward pass: one Arch-templated functor, instantiated once per ISA in its own translation unit
// (layer_<isa>.cpp, each with its own -m flags) and picked at run time in dispatch.cpp. Engine-internal: no
// xsimd type appears in the public headers.
#pragma once

#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "common/thread_pool.hpp"

namespace attnviz::simd {

// Rows per attention task: a task computes one head's scores, weights and context for this many query rows.
inline constexpr int kRowBlock = 32;

// Everything one fast forward pass reads and writes: row-major buffers, pointers owned by the caller.
struct LayerJob {
  int T = 0, d_in = 0, heads = 1, head_dim = 1, width = 1, out_width = 1;
  // Rows [0, first) are already computed (a model's cached prefix): q, k, v hold them, and only rows
  // [first, T) of the projections, weights, context and output are written (plus, when the raw scores are
  // kept, the earlier rows' scores against the new keys). 0 computes everything.
  int first = 0;
  bool has_weights = true, causal = false;
  // q, k and v are given (a whole model's rotated queries and keys): the projections are skipped.
  bool qkv_given = false;
  // Grouped keys and values: kv_heads heads of head_dim in rows of kv_width; query head h reads key/value
  // head h / (heads / kv_heads). 0: heads, width.
  int kv_heads = 0, kv_width = 0;
  int window = 0;  // causal rows see keys i - window + 1 .. i only (0: every earlier key)
  float scale = 1.0f;
  const float* x = nullptr;  // (T, d_in)
  // Projection weights in panels of the ISA's width (pack.hpp), biases padded to whole panels (or null).
  const float *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
  // out_proj's panels in 16 bits (BF16 when wo16_bf16, else F16) in place of wo (null: wo's floats)
  const std::uint16_t* wo16 = nullptr;
  bool wo16_bf16 = true;
  float *q = nullptr, *k = nullptr,
        *v = nullptr;  // q (T, width), k, v (T, kv_width); no weights: q = k = v = x
  // The per-head squares scores, scaled, weights and dropped: (H, T, T) with rows `square_stride` floats
  // apart and heads square_stride^2 floats apart (HeadSquares' layout; 0: T, dense).
  int square_stride = 0;
  float* scores = nullptr;             // (H, T, T) when kept, else null
  float* scaled = nullptr;             // (H, T, T) when kept, else null
  float* weights = nullptr;            // (H, T, T)
  const std::uint8_t* keep = nullptr;  // dense (H, T, T) dropout keep mask, null without dropout
  float keep_scale = 1.0f;
  float* dropped = nullptr;  // (H, T, T) when kept (and dropout drawn), else null
  float* context = nullptr;  // (T, width)
  float* output = nullptr;   // (T, out_width) for out_proj, else null
  // Keys and values packed for the GEMMs, kept by the caller across passes over a growing text (a model's
  // cache; kv_pack_floats() floats for kv_capacity >= T rows): each key/value head's K^T panels, then each
  // head's V panels. Rows [0, kv_packed) are packed already (kv_packed <= first: an earlier pass over the
  // same prefix); the job packs rows [kv_packed, T) only. Null: every row is packed into the scratch.
  float* kv_pack = nullptr;
  int kv_capacity = 0, kv_packed = 0;
  // Scratch the caller sizes with scratch_floats(): packed K^T and V of every head (without kv_pack),
  // per-worker row buffers.
  float* scratch = nullptr;
  ThreadPool* pool = nullptr;
};

struct fast_layer {
  template <class Arch>
  void operator()(Arch, const LayerJob& job) const;
};

// The whole-model steps around a block's attention, on rows of activations.
struct RowJob {
  enum Kind {
    layer_norm,  // y (rows, cols) = (x - mean) / sqrt(var + 1e-5) * scale + shift, per row (biased variance)
    gelu,        // y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), rows * cols elements (y may be x)
    linear,      // y (rows, out) = x (rows, cols) W^T + bias, W in panels of the ISA's width (pack.hpp)
    // y (heads, out): row h = x's slice h (one row of cols = heads x cols / heads) times W's columns for it,
    // no bias: each attention head's own output (attribution's point). A task a run of panels, each column's
    // sum over the slice in order, so the numbers do not depend on the threads.
    head_outputs,
  } kind = linear;
  int rows = 0, cols = 0, out = 0, heads = 1;
  const float* x = nullptr;
  float* y = nullptr;
  const float *scale = nullptr, *shift = nullptr;  // layer_norm: (cols)
  const float *w = nullptr, *bias = nullptr;       // linear: panels; bias (out) or null
  const std::uint16_t* w16 = nullptr;              // linear: 16-bit panels in place of w (BF16 or F16)
  bool w16_bf16 = true;
  ThreadPool* pool = nullptr;
};

struct fast_rows {
  template <class Arch>
  void operator()(Arch, const RowJob& job) const;
};

// One row of logits (top_tokens), on the calling thread, in two calls. The scan (sum false) finds the row's
// largest value, whether every value is finite, and each value above a moving bar, handed to `offer` in
// increasing index order (it returns the new bar). The sum (sum true, given `max` from the scan of a finite
// row) adds exp(x - max) over the row, each exp in float (exp_fast, about 2 ulp) and the sum in double lanes,
// in an order fixed for the ISA, and gives the picked indices' exps as the sum took them: so the picked
// tokens' probabilities add up to at most 1 (to double's rounding).
struct LogitRow {
  const float* x = nullptr;
  int n = 0;
  bool sum = false;
  // the scan
  float bar = 0.0f;  // only values above it are offered (-inf: every finite one)
  float (*offer)(void* context, int i) = nullptr;  // returns the new bar
  void* context = nullptr;
  float max = 0.0f;     // out of the scan (in to the sum): the largest value
  bool finite = false;  // out of the scan: every value finite
  // the sum
  const int* picks = nullptr;  // n_picks indices into x
  int n_picks = 0;
  double* picked = nullptr;  // out: (n_picks) their exp(x - max)
  double exp_sum = 0.0;      // out: the sum of exp(x - max)
};

struct logit_row {
  template <class Arch>
  void operator()(Arch, LogitRow& row) const;
};

// fast_gemm and fma_probe serve only attnviz-bench, yet stay in the engine: fast_gemm is the layer's own
// detail::parallel_gemm (what the benchmark measures is the projection the layer runs), and both must be
// compiled with each ISA's -m flags, which only the engine's per-ISA files (layer_<isa>.cpp) get. Moving them
// to bench/ would copy those files and their flags there; here they cost an instantiation per ISA and sit on
// no path the engine runs.

// For benchmarks: C (M x N) = A (M x K) B, with B in panels (pack_nk), over the pool.
struct fast_gemm {
  template <class Arch>
  void operator()(Arch, int M, int N, int K, const float* a, const float* b, float* c,
                  ThreadPool* pool) const;
};

// One of causal attention's products, C (M x N) = A (M x K) B, computed without the half the causal mask
// makes zero, row strips of the micro-kernel's height at a time (on one thread: training runs one (sequence,
// head) per task). B is in panels of width nr (pack.hpp), `bstride` floats apart (K * nr when packed
// dense); row i of C is query position i. Every sum still runs over k in order, and what a strip skips is a
// run of exact zero products at the end or the start of it, so each computed cell has the bits a dense GEMM
// gives (a float sum that starts at +0 stays +0 over zero products, and x + 0 = x): the same numbers as
// before, with operands that are finite.
struct CausalGemm {
  enum Kind {
    // Only C's cells at or left of the diagonal (j <= i) are needed (scores = Q K^T, dP = dctx V^T): a strip
    // of rows [r0, r1) computes columns [0, r1) in whole panels clipped to N, and leaves its rows' later
    // columns as they were.
    lower_c,
    // A is zero right of its diagonal (ctx = P V, dQ = dS K): strip [r0, r1) sums k in [0, r1). The zeros
    // from column i + 1 to the strip's end are still read, so they must be there.
    lower_a,
    // C = A^T B, A stored (K, M) and zero right of its diagonal (dV = P^T dctx, dK = dS^T Q, read without
    // a transpose): strip [r0, r1) sums k in [r0, K); A's zeros in rows r0 to r1 - 2 are read.
    lower_at,
  } kind = lower_c;
  int M = 0, N = 0, K = 0;
  const float* a = nullptr;  // (M, K), rows lda floats apart; lower_at: (K, M)
  int lda = 0;
  const float* b = nullptr;  // panels of K rows
  std::size_t bstride = 0;
  float* c = nullptr;  // (M, N), rows ldc floats apart
  int ldc = 0;
};

struct causal_gemm {
  template <class Arch>
  void operator()(Arch, const CausalGemm& job) const;
};

// For benchmarks: `iterations` rounds of 12 independent FMA chains on full vectors; returns the FLOPs done
// (and writes a checksum so the work cannot be optimized away).
struct fma_probe {
  template <class Arch>
  double operator()(Arch, long iterations, float* sink) const;
};

// Each ISA's instantiation lives in its own translation unit (layer_<isa>.cpp).
#if defined(__EMSCRIPTEN__)
extern template void fast_layer::operator()<xsimd::sse4_1>(xsimd::sse4_1, const LayerJob&) const;
extern template void fast_gemm::operator()<xsimd::sse4_1>(xsimd::sse4_1, int, int, int, const float*,
                                                          const float*, float*, ThreadPool*) const;
extern template double fma_probe::operator()<xsimd::sse4_1>(xsimd::sse4_1, long, float*) const;
extern template void fast_rows::operator()<xsimd::sse4_1>(xsimd::sse4_1, const RowJob&) const;
extern template void causal_gemm::operator()<xsimd::sse4_1>(xsimd::sse4_1, const CausalGemm&) const;
#elif defined(__aarch64__)
extern template void fast_layer::operator()<xsimd::neon64>(xsimd::neon64, const LayerJob&) const;
extern template void fast_gemm::operator()<xsimd::neon64>(xsimd::neon64, int, int, int, const float*,
                                                          const float*, float*, ThreadPool*) const;
extern template double fma_probe::operator()<xsimd::neon64>(xsimd::neon64, long, float*) const;
extern template void fast_rows::operator()<xsimd::neon64>(xsimd::neon64, const RowJob&) const;
extern template void causal_gemm::operator()<xsimd::neon64>(xsimd::neon64, const CausalGemm&) const;
#else
extern template void fast_rows::operator()<xsimd::avx512bw>(xsimd::avx512bw, const RowJob&) const;
extern template void fast_rows::operator()<xsimd::fma3<xsimd::avx2> >(xsimd::fma3<xsimd::avx2>,
                                                                      const RowJob&) const;
extern template void fast_rows::operator()<xsimd::sse4_2>(xsimd::sse4_2, const RowJob&) const;
extern template void fast_layer::operator()<xsimd::avx512bw>(xsimd::avx512bw, const LayerJob&) const;
extern template void fast_layer::operator()<xsimd::fma3<xsimd::avx2> >(xsimd::fma3<xsimd::avx2>,
                                                                       const LayerJob&) const;
extern template void fast_layer::operator()<xsimd::sse4_2>(xsimd::sse4_2, const LayerJob&) const;
extern template void fast_gemm::operator()<xsimd::avx512bw>(xsimd::avx512bw, int, int, int, const float*,
                                                            const float*, float*, ThreadPool*) const;
extern template void fast_gemm::operator()<xsimd::fma3<xsimd::avx2> >(xsimd::fma3<xsimd::avx2>, int, int, int,
                                                                      const float*, const float*, float*,
                                                                      ThreadPool*) const;
extern template void fast_gemm::operator()<xsimd::sse4_2>(xsimd::sse4_2, int, int, int, const float*,
                                                          const float*, float*, ThreadPool*) const;
extern template double fma_probe::operator()<xsimd::avx512bw>(xsimd::avx512bw, long, float*) const;
extern template double fma_probe::operator()<xsimd::fma3<xsimd::avx2> >(xsimd::fma3<xsimd::avx2>, long,
                                                                        float*) const;
extern template double fma_probe::operator()<xsimd::sse4_2>(xsimd::sse4_2, long, float*) const;
extern template void causal_gemm::operator()<xsimd::avx512bw>(xsimd::avx512bw, const CausalGemm&) const;
extern template void causal_gemm::operator()<xsimd::fma3<xsimd::avx2> >(xsimd::fma3<xsimd::avx2>,
                                                                        const CausalGemm&) const;
extern template void causal_gemm::operator()<xsimd::sse4_2>(xsimd::sse4_2, const CausalGemm&) const;
#endif

// Scratch a job needs, in floats, for panel width `nr` and `workers` workers.
std::size_t scratch_floats(const LayerJob& job, int nr, int workers);
// Floats of a LayerJob::kv_pack of `capacity` rows: K^T and V in panels of width `nr`, `kv_heads` heads of
// `head_dim`.
std::size_t kv_pack_floats(int kv_heads, int head_dim, int capacity, int nr);

}  // namespace attnviz::simd
