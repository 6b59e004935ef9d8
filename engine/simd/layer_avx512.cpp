// The fast kernels for one ISA: this file only instantiates them, with its -m flags from CMake.
#include "layer_impl.hpp"
#include "rows_impl.hpp"

namespace attnviz::simd {
template void fast_layer::operator()<xsimd::avx512bw>(xsimd::avx512bw, const LayerJob&) const;
template void fast_gemm::operator()<xsimd::avx512bw>(xsimd::avx512bw, int, int, int, const float*,
                                                     const float*, float*, ThreadPool*) const;
template double fma_probe::operator()<xsimd::avx512bw>(xsimd::avx512bw, long, float*) const;
template void fast_rows::operator()<xsimd::avx512bw>(xsimd::avx512bw, const RowJob&) const;
template void logit_row::operator()<xsimd::avx512bw>(xsimd::avx512bw, LogitRow&) const;
template void causal_gemm::operator()<xsimd::avx512bw>(xsimd::avx512bw, const CausalGemm&) const;
}  // namespace attnviz::simd
