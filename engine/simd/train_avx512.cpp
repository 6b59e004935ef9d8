// The training kernels for one ISA: this file only instantiates them, with its -m flags from CMake.
#include "train_impl.hpp"

namespace attnviz::simd {
template const TrainKernels& train_table::operator()<xsimd::avx512bw>(xsimd::avx512bw) const;
}  // namespace attnviz::simd
