// The fast kernels for ARM64 NEON (xsimd's neon64): this file only instantiates them. NEON is part of
// AArch64, so it needs no -m flags, and every aarch64 build runs it (Apple Silicon, Graviton, Raspberry Pi 3
// and later).
#include "layer_impl.hpp"
#include "rows_impl.hpp"

namespace attnviz::simd {
template void fast_layer::operator()<xsimd::neon64>(xsimd::neon64, const LayerJob&) const;
template void fast_gemm::operator()<xsimd::neon64>(xsimd::neon64, int, int, int, const float*, const float*,
                                                   float*, ThreadPool*) const;
template double fma_probe::operator()<xsimd::neon64>(xsimd::neon64, long, float*) const;
template void fast_rows::operator()<xsimd::neon64>(xsimd::neon64, const RowJob&) const;
template void logit_row::operator()<xsimd::neon64>(xsimd::neon64, LogitRow&) const;
template void causal_gemm::operator()<xsimd::neon64>(xsimd::neon64, const CausalGemm&) const;
}  // namespace attnviz::simd
