// The operations of a training step, forward and backward, on row-major float buffers. Engine-internal.
//
// Every operation has two implementations. The reference (Isa::scalar) is written to be read: plain loops,
// summing in double, GELU's polynomial in double. The fast one runs the matrix products as the inference
// engine's panel GEMM for the ISA (summing over k in order in float) and the element-wise and row-wise steps
// as simd/train_kernels.hpp's kernels for the ISA (float vectors; sums in float lanes carried on in double),
// both over the thread pool. Tests hold the fast path to the reference (1e-5 relative) and both to PyTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "attnviz/exec.hpp"
#include "common/thread_pool.hpp"
#include "simd/packed.hpp"
#include "simd/train_kernels.hpp"

namespace attnviz::train {

// The kernels and the buffers the fast products pack into (kept between steps, so a step allocates nothing).
struct Kernels {
  explicit Kernels(const Exec& exec);
  Isa isa = Isa::scalar;
  int threads = 1;
  ThreadPool* pool = nullptr;                // the shared pool of `threads` workers
  const simd::TrainKernels* fast = nullptr;  // the ISA's element-wise kernels; null on the reference
  AlignedFloats packed, transposed, product;
  // Attention runs one (sequence, head) per task, its products on the calling thread, with its worker's
  // matrices: K^T, V, dctx, K or Q in panels (b), the scores or dS (c), the dropped weights (e).
  struct Worker {
    AlignedFloats b, c, e;
  };
  std::vector<Worker> workers;

  // y (M, N) = x (M, K) w^T + b; w (N, K) as nn.Linear stores it; b (N) or null.
  void linear(const float* x, const float* w, const float* b, float* y, int M, int K, int N);
  // dx (M, K) = dy (M, N) w (N, K), written (or added with `accumulate`).
  void linear_dx(const float* dy, const float* w, float* dx, int M, int K, int N, bool accumulate);
  // dw (N, K) += dy^T (N, M) x (M, K); db (N) += the column sums of dy (when db is not null).
  void linear_dw(const float* dy, const float* x, float* dw, float* db, int M, int K, int N);

  // The same products in pieces, for a matrix too large for one frame (the head over GPT-2's vocabulary).
  // Each output element is the same sum over k in the same order as the whole product's, so the pieces
  // together give the whole product's numbers bit for bit. `packed` holds w for the pieces of one product
  // (filled by pack_linear or pack_linear_dx; left empty on the reference, which reads w).
  // pack_linear: w (N, K) for linear_rows; pack_linear_dx: w (N, K) for linear_dx_rows.
  void pack_linear(const float* w, int K, int N, AlignedFloats& packed);
  void pack_linear_dx(const float* w, int K, int N, AlignedFloats& packed);
  // y rows [m0, m1) of linear(x, w, null, y, M, K, N) (no bias).
  void linear_rows(const float* x, const float* w, const AlignedFloats& packed, float* y, int m0, int m1,
                   int K, int N);
  // dx rows [m0, m1) of linear_dx(dy, w, dx, M, K, N, false).
  void linear_dx_rows(const float* dy, const float* w, const AlignedFloats& packed, float* dx, int m0, int m1,
                      int K, int N);
  // dw rows [n0, n1) (and db[n0, n1)) of linear_dw(dy, x, dw, db, M, K, N).
  void linear_dw_rows(const float* dy, const float* x, float* dw, float* db, int M, int K, int N, int n0,
                      int n1);
};

// LayerNorm forward over rows: y = (x - mean) / sqrt(var + 1e-5) * scale + shift (biased variance); keeps
// x_hat = (x - mean) * rstd and rstd per row for the backward pass.
//
// The element-wise steps below run over the kernels' pool in fixed chunks (of rows or elements), the same on
// every ISA, and every sum across chunks is taken in chunk order: results never depend on the thread count.
void layer_norm(Kernels& k, const float* x, const float* scale, const float* shift, float* y, float* x_hat,
                float* rstd, int rows, int cols);
// dx (+)= the gradient through the LayerNorm; dscale, dshift += theirs.
void layer_norm_backward(Kernels& k, const float* dy, const float* x_hat, const float* rstd,
                         const float* scale, float* dx, float* dscale, float* dshift, int rows, int cols,
                         bool accumulate);

// GELU (tanh form) and its backward: dx = dy * gelu'(x).
void gelu(Kernels& k, const float* x, float* y, std::size_t n);
void gelu_backward(Kernels& k, const float* x, const float* dy, float* dx, std::size_t n);

// x = keep ? x * scale : 0 (dropout's mask applied, or its gradient); x += y (the residual stream).
void dropout(Kernels& k, float* x, const std::uint8_t* keep, std::size_t n, float scale);
void add(Kernels& k, float* x, const float* y, std::size_t n);

// Causal multi-head attention of one batch of `batch` sequences: q, k, v, ctx (batch * T, H * hd); weights
// (batch, H, T, T) after softmax (masked cells 0); keep (batch, H, T, T) or null; scores divided by
// `divisor` (sqrt(hd) as a float, as PyTorch divides).
// With `kernels` on an ISA other than scalar, the products run as panel GEMMs per (sequence, head), each over
// the pool; on the scalar reference, as plain loops summing in double, one task per (sequence, head).
struct Attention {
  int batch = 1, T = 1, H = 1, hd = 1;
  float divisor = 1.0f, keep_scale = 1.0f;
  Kernels* kernels = nullptr;
};
void attention_forward(const Attention& a, const float* q, const float* k, const float* v, float* weights,
                       const std::uint8_t* keep, float* ctx);
// dq, dk, dv (written) from dctx.
void attention_backward(const Attention& a, const float* q, const float* k, const float* v,
                        const float* weights, const std::uint8_t* keep, const float* dctx, float* dq,
                        float* dk, float* dv);

// Runs fn(begin, end) over [0, n) in chunks of `chunk`, one task each.
void chunked(ThreadPool& pool, std::size_t n, std::size_t chunk,
             const std::function<void(std::size_t, std::size_t)>& fn);

// Mean cross-entropy of logits (rows, vocab) against targets; turns the logits into softmax probabilities
// in place (what the backward pass needs). Returns the mean in double.
double cross_entropy(Kernels& k, float* logits_to_probs, const int* targets, int rows, int vocab,
                     std::vector<double>* row_losses = nullptr);
// dlogits = (probs - onehot(target)) / mean_over (rows when 0: the mean's count of rows, for a caller that
// passes the rows in pieces), in place over probs.
void cross_entropy_backward(Kernels& k, float* probs_to_grad, const int* targets, int rows, int vocab,
                            int mean_over = 0);

}  // namespace attnviz::train
