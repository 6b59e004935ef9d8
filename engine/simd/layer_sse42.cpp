// The fast layer for one ISA: this file only instantiates it, with its -m flags from CMake.
#include "layer_impl.hpp"

template void attnviz::simd::fast_layer::operator()<xsimd::sse4_2>(xsimd::sse4_2, const LayerJob&) const;
