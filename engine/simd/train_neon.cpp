// The training kernels for ARM64 NEON: this file only instantiates them (NEON needs no -m flags).
#include "train_impl.hpp"

namespace attnviz::simd {
template const TrainKernels& train_table::operator()<xsimd::neon64>(xsimd::neon64) const;
}  // namespace attnviz::simd
