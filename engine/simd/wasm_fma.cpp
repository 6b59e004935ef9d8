// The install half of simd/wasm_fma.hpp: the generated modules' bytes (wasm_fma_kernels.inc) to
// simd/wasm_fma.js, which returns their function-table indices.
#include "wasm_fma.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// wasm_fma.js: 1 when the n modules were instantiated and `out` holds their table indices, else 0.
extern "C" int attnviz_wasm_fma_install(const unsigned char* const* bytes, const int* sizes, int n, int* out);

namespace attnviz::simd::wasm_fma {
namespace {

struct FmaModule {
  const unsigned char* bytes;
  int size, rows;
  bool trans, shared;
};
#include "wasm_fma_kernels.inc"

#ifdef __EMSCRIPTEN_PTHREADS__
constexpr bool kShared = true;  // the threaded module's memory is shared: its kernels import it so
#else
constexpr bool kShared = false;
#endif

struct Installed {
  bool tried = false, ok = false;
  Kernel k[2][kRows + 1] = {};
  Probe probe = nullptr;
};

// Per thread: every Worker has its own function table.
thread_local Installed installed;

// One decision for the process, so that every thread computes with the same kernels (the same bits on any
// thread count): the first thread's install decides; after a refusal no other thread tries. (A Worker whose
// own install failed after the first succeeded would run the engine's kernels; no browser was seen to.)
std::atomic<int> decided{-1};  // -1 not yet, 0 the engine's own kernels, 1 the fused ones

bool disabled_by_env() {
  const char* v = std::getenv("ATTNVIZ_WASM_FMA");
  return v && std::strcmp(v, "0") == 0;
}

const Installed& install() {
  Installed& s = installed;
  if (s.tried) return s;
  s.tried = true;
  if (decided.load() == 0 || disabled_by_env()) {
    decided.store(0);
    return s;
  }
  constexpr int kCount = 2 * kRows + 1;  // the kernels, TransA or not, and the probe
  const unsigned char* bytes[kCount];
  int sizes[kCount], ids[kCount];
  const FmaModule* which[kCount];
  int n = 0;
  for (const FmaModule& m : kFmaModules)
    if (m.shared == kShared && m.rows <= kRows && n < kCount) {
      which[n] = &m;
      bytes[n] = m.bytes;
      sizes[n] = m.size;
      ++n;
    }
  if (n != kCount || attnviz_wasm_fma_install(bytes, sizes, n, ids) != 1) {
    int unset = -1;
    decided.compare_exchange_strong(unset, 0);
    return s;
  }
  for (int i = 0; i < n; ++i) {
    const auto id = static_cast<std::uintptr_t>(ids[i]);
    if (which[i]->rows == 0)
      s.probe = reinterpret_cast<Probe>(id);
    else
      s.k[which[i]->trans][which[i]->rows] = reinterpret_cast<Kernel>(id);
  }
  int unset = -1;
  s.ok = decided.compare_exchange_strong(unset, 1) || unset == 1;
  return s;
}

}  // namespace

Kernel kernel(int rows, bool trans) {
  const Installed& s = install();
  return s.ok && rows >= 1 && rows <= kRows ? s.k[trans][rows] : nullptr;
}

Probe probe() {
  const Installed& s = install();
  return s.ok ? s.probe : nullptr;
}

bool in_use() {
  return install().ok;
}

}  // namespace attnviz::simd::wasm_fma
