// The fast layer for one ISA: this file only instantiates it, with its -m flags from CMake.
#include "layer_impl.hpp"

template void attnviz::simd::fast_layer::operator()<xsimd::avx512bw>(xsimd::avx512bw, const LayerJob&) const;
