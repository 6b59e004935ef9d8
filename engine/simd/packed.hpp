// Params' projection weights laid out in panels for one ISA (see pack.hpp). Engine-internal.
#pragma once

#include <vector>
#include <xsimd/xsimd.hpp>

#include "attnviz/engine.hpp"
#include "layer.hpp"

namespace attnviz {

using AlignedFloats = std::vector<float, xsimd::aligned_allocator<float, 64>>;

struct PackedWeights {
  Isa isa = Isa::scalar;
  int nr = 0;                    // panel width in floats
  AlignedFloats q, k, v, o;      // panels of W^T: (in x out) cut into nr-column panels
  AlignedFloats bq, bk, bv, bo;  // biases padded to whole panels; empty without bias
};

namespace simd {
// Panel width of an ISA's micro-kernel (two vectors).
int panel_width(Isa isa);
// Runs the fast layer with the ISA's kernels (isa must be available and not scalar).
void run_layer(Isa isa, const LayerJob& job);
// Runs a whole-model row step with the ISA's kernels.
void run_rows(Isa isa, const RowJob& job);
// Scans one row of logits (LogitRow) with the ISA's kernels, on the calling thread.
void scan_logits(Isa isa, LogitRow& row);
// Benchmark hooks with the ISA's kernels: a panel GEMM (b from pack_nk) and the FMA peak probe.
void run_gemm(Isa isa, int M, int N, int K, const float* a, const float* b, float* c, ThreadPool& pool);
double run_fma_probe(Isa isa, long iterations, float* sink);
// One of causal attention's products without its masked half (CausalGemm), on the calling thread.
void run_causal_gemm(Isa isa, const CausalGemm& job);
}  // namespace simd

}  // namespace attnviz
