// The x86-64 instruction sets the engine has kernels for, strongest first, written once:
// ISA(enum value, xsimd architecture, panel width in floats, name). dispatch.cpp's names, detection,
// architecture tags and panel widths read it, and so does tests/test_simd.cpp's list of ISAs to test.
// engine/CMakeLists.txt mirrors it in its own list of per-ISA files (simd/layer_<isa>.cpp), which CMake must
// know before any C++ is read. Engine-internal; names no xsimd header, so any file may expand it.
#pragma once

#define ATTNVIZ_X86_ISAS(ISA)                     \
  ISA(avx512, xsimd::avx512bw, 32, "avx512")      \
  ISA(avx2, xsimd::fma3<xsimd::avx2>, 16, "avx2") \
  ISA(sse4_2, xsimd::sse4_2, 8, "sse4.2")
