// The training kernels for one ISA: this file only instantiates them, with its -m flags from CMake.
#include "train_impl.hpp"

namespace attnviz::simd {
template const TrainKernels& train_table::operator()<xsimd::fma3<xsimd::avx2>>(
    xsimd::fma3<xsimd::avx2>) const;
}  // namespace attnviz::simd
