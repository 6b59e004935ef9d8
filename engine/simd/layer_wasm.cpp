// The fast kernels for WebAssembly SIMD128: Emscripten maps SSE4.1 intrinsics onto SIMD128 (-msimd128
// -msse4.1), so xsimd's sse4_1 architecture is the WASM one. A WASM module has no runtime dispatch: this is
// its only ISA.
#include "layer_impl.hpp"
#include "rows_impl.hpp"

namespace attnviz::simd {
template void fast_layer::operator()<xsimd::sse4_1>(xsimd::sse4_1, const LayerJob&) const;
template void fast_gemm::operator()<xsimd::sse4_1>(xsimd::sse4_1, int, int, int, const float*, const float*,
                                                   float*, ThreadPool*) const;
template double fma_probe::operator()<xsimd::sse4_1>(xsimd::sse4_1, long, float*) const;
template void fast_rows::operator()<xsimd::sse4_1>(xsimd::sse4_1, const RowJob&) const;
template void logit_row::operator()<xsimd::sse4_1>(xsimd::sse4_1, LogitRow&) const;
template void causal_gemm::operator()<xsimd::sse4_1>(xsimd::sse4_1, const CausalGemm&) const;
}  // namespace attnviz::simd
