// The install half of simd/wasm_fma.hpp: the generated modules' bytes (wasm_fma_kernels.inc) to
// simd/wasm_fma.js, which returns their function-table indices.
#include "wasm_fma.hpp"

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

constexpr int kMaxRows = 5;

#ifdef __EMSCRIPTEN_PTHREADS__
constexpr bool kShared = true;  // the threaded module's memory is shared: its kernels import it so
#else
constexpr bool kShared = false;
#endif

struct Installed {
  bool tried = false, ok = false;
  Kernel k[2][kMaxRows + 1] = {};
  Probe probe = nullptr;
};

// Per thread: every Worker has its own function table.
thread_local Installed installed;

bool disabled_by_env() {
  const char* v = std::getenv("ATTNVIZ_WASM_FMA");
  return v && std::strcmp(v, "0") == 0;
}

const Installed& install() {
  Installed& s = installed;
  if (s.tried) return s;
  s.tried = true;
  if (disabled_by_env()) return s;
  constexpr int kCount = 2 * kMaxRows + 1;  // the kernels, TransA or not, and the probe
  const unsigned char* bytes[kCount];
  int sizes[kCount], ids[kCount];
  const FmaModule* which[kCount];
  int n = 0;
  for (const FmaModule& m : kFmaModules)
    if (m.shared == kShared && m.rows <= kMaxRows && n < kCount) {
      which[n] = &m;
      bytes[n] = m.bytes;
      sizes[n] = m.size;
      ++n;
    }
  if (n != kCount || attnviz_wasm_fma_install(bytes, sizes, n, ids) != 1) return s;
  for (int i = 0; i < n; ++i) {
    const auto id = static_cast<std::uintptr_t>(ids[i]);
    if (which[i]->rows == 0)
      s.probe = reinterpret_cast<Probe>(id);
    else
      s.k[which[i]->trans][which[i]->rows] = reinterpret_cast<Kernel>(id);
  }
  s.ok = true;
  return s;
}

}  // namespace

Kernel kernel(int rows, bool trans) {
  const Installed& s = install();
  return s.ok && rows >= 1 && rows <= kMaxRows ? s.k[trans][rows] : nullptr;
}

Probe probe() {
  const Installed& s = install();
  return s.ok ? s.probe : nullptr;
}

bool in_use() {
  return install().ok;
}

}  // namespace attnviz::simd::wasm_fma
