// How to compute (not what): which kernels and how many threads. Results are identical for any thread count.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace attnviz {

enum class Isa {
  automatic,  // the best available, detected once per process
  scalar,  // the reference kernels (double accumulation, single thread): the truth the others are tested on
  sse4_2,
  avx2,     // fma3<avx2>
  avx512,   // avx512bw
  simd128,  // WebAssembly SIMD128 (the only SIMD ISA of a WASM build)
  neon,     // ARM64 NEON (neon64; every aarch64 processor has it)
};

struct Exec {
  Isa isa = Isa::automatic;
  int threads = 0;  // 0: every hardware thread; the scalar reference always runs on one
};

const char* to_string(Isa isa);
// The ISA named as to_string names it ("auto", "scalar", "sse4.2", "avx2", "avx512", "simd128",
// "neon").
std::optional<Isa> parse_isa(std::string_view s);
// The ISAs this build and this processor can run, best first (always ends with scalar).
const std::vector<Isa>& available_isas();
// What `requested` runs as: automatic becomes the best available; an unavailable ISA falls back to the best
// available one below it.
Isa resolve(Isa requested);
// The thread count `threads` resolves to (0: hardware concurrency; 1 without thread support).
int resolve_threads(int threads);
// WebAssembly: whether the GEMMs run relaxed SIMD's fused multiply-add (the browser has it, and
// ATTNVIZ_WASM_FMA=0 is not set). False natively, where the ISA decides: AVX2, AVX-512 and NEON fuse,
// SSE4.2 does not.
bool wasm_relaxed_fma();

// Calls fn(task) for every task in [0, tasks) over `how`'s threads, in the passes' own pool (the scalar ISA,
// or one thread, runs them in order here), and returns when all are done. Each task must write only its own
// outputs, so that nothing depends on the thread count. For the hosts' work between passes (scoring heads,
// pooling thumbnails); not reentrant, and not while a pass runs on another thread.
void run_tasks(int tasks, const std::function<void(int task)>& fn, const Exec& how);

}  // namespace attnviz
