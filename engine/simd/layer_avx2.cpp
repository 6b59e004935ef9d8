// The fast kernels for one ISA: this file only instantiates them, with its -m flags from CMake.
#include "layer_impl.hpp"
#include "rows_impl.hpp"

namespace attnviz::simd {
template void fast_layer::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>,
                                                               const LayerJob&) const;
template void fast_gemm::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>, int, int, int,
                                                              const float*, const float*, float*,
                                                              ThreadPool*) const;
template double fma_probe::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>, long, float*) const;
template void fast_rows::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>, const RowJob&) const;
template void logit_row::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>, LogitRow&) const;
template void causal_gemm::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>,
                                                                const CausalGemm&) const;
}  // namespace attnviz::simd
