// The instruction sets the engine has kernels for, strongest first, written once per processor family:
// ISA(enum value, xsimd architecture, panel width in floats, name). dispatch.cpp's names, detection,
// architecture tags and panel widths read them, and so does tests/engine/test_simd.cpp's list of ISAs to
// test. engine/CMakeLists.txt mirrors them in its own lists of per-ISA files (simd/layer_<isa>.cpp), which
// CMake must know before any C++ is read. Engine-internal; names no xsimd header, so any file may expand
// them.
#pragma once

// x86-64: detected at run time.
#define ATTNVIZ_X86_ISAS(ISA)                     \
  ISA(avx512, xsimd::avx512bw, 32, "avx512")      \
  ISA(avx2, xsimd::fma3<xsimd::avx2>, 16, "avx2") \
  ISA(sse4_2, xsimd::sse4_2, 8, "sse4.2")

// ARM64 (AArch64): NEON is part of the architecture, so every aarch64 processor has it.
#define ATTNVIZ_ARM_ISAS(ISA) ISA(neon, xsimd::neon64, 8, "neon")
