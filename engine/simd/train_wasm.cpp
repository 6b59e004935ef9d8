// The training kernels for WebAssembly SIMD128 (xsimd's sse4_1 through Emscripten's SSE mapping, as
// layer_wasm.cpp): this file only instantiates them.
#include "train_impl.hpp"

namespace attnviz::simd {
template const TrainKernels& train_table::operator()<xsimd::sse4_1>(xsimd::sse4_1) const;
}  // namespace attnviz::simd
