// Picks the ISA once per process and calls that ISA's instantiation of the fast layer.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "attnviz/enum_names.hpp"
#include "isas.hpp"
#include "layer.hpp"
#include "pack.hpp"
#include "packed.hpp"
#include "train_kernels.hpp"
#include "wasm_fma.hpp"

namespace attnviz {

namespace {

#define ATTNVIZ_ISA_NAME(id, arch, width, name) {Isa::id, name},
constexpr EnumName<Isa> kIsaNames[] = {
    {Isa::automatic, "auto"},
    {Isa::scalar, "scalar"},
    ATTNVIZ_X86_ISAS(ATTNVIZ_ISA_NAME) ATTNVIZ_ARM_ISAS(ATTNVIZ_ISA_NAME){Isa::simd128, "simd128"},
};
#undef ATTNVIZ_ISA_NAME

}  // namespace

const char* to_string(Isa isa) {
  return name_in(kIsaNames, isa);
}

std::optional<Isa> parse_isa(std::string_view s) {
  return value_in(kIsaNames, s);
}

namespace {

// A positive whole number from the environment, else 0 (unset or not such a number: a warning, once).
[[maybe_unused]] unsigned env_count(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end || n == 0 || n > 4096 || v[0] == '-') {
    std::fprintf(stderr, "attnviz: %s ignored: not a count from 1 to 4096\n", name);
    return 0;
  }
  return static_cast<unsigned>(n);
}

}  // namespace

bool wasm_relaxed_fma() {
#if defined(__wasm_simd128__)
  return simd::wasm_fma::in_use();
#else
  return false;
#endif
}

// ATTNVIZ_MAX_ISA=avx2 (or sse4.2, scalar; on ARM64, scalar) makes this process run as on a processor without
// the ISAs above it, and ATTNVIZ_HARDWARE_THREADS=N as on one with N hardware threads: scripts/test runs the
// native suites so, to prove no expected value depends on the machine it runs on.
const std::vector<Isa>& available_isas() {
  static const std::vector<Isa> isas = [] {
    std::vector<Isa> v;
#if defined(__wasm_simd128__)
    v.push_back(Isa::simd128);
#elif defined(__x86_64__)
    const unsigned best = xsimd::available_architectures().best;
#define ATTNVIZ_ISA_DETECT(id, arch, width, name) \
  if (arch::version() <= best) v.push_back(Isa::id);
    ATTNVIZ_X86_ISAS(ATTNVIZ_ISA_DETECT)
#undef ATTNVIZ_ISA_DETECT
#elif defined(__aarch64__)
#define ATTNVIZ_ISA_ALWAYS(id, arch, width, name) v.push_back(Isa::id);
    ATTNVIZ_ARM_ISAS(ATTNVIZ_ISA_ALWAYS)
#undef ATTNVIZ_ISA_ALWAYS
#endif
    v.push_back(Isa::scalar);
    if (const char* cap = std::getenv("ATTNVIZ_MAX_ISA"); cap && *cap) {
      const std::optional<Isa> max = parse_isa(cap);
      if (!max || *max == Isa::automatic) {
        std::fputs("attnviz: ATTNVIZ_MAX_ISA ignored: not one of avx512, avx2, sse4.2, neon, scalar\n",
                   stderr);
      } else {
        // The enum lists the ISAs from weakest to strongest after scalar.
        v.erase(std::remove_if(v.begin(), v.end(),
                               [&](Isa i) {
                                 return i != Isa::scalar &&
                                        (*max == Isa::scalar || static_cast<int>(i) > static_cast<int>(*max));
                               }),
                v.end());
      }
    }
    return v;
  }();
  return isas;
}

Isa resolve(Isa requested) {
  const std::vector<Isa>& isas = available_isas();
  if (requested == Isa::automatic) return isas.front();
  for (Isa i : isas)
    if (i == requested) return i;
  // Not available: the best one below it (the enum lists ISAs from weakest to strongest after scalar).
  for (Isa i : isas)
    if (static_cast<int>(i) < static_cast<int>(requested)) return i;
  return Isa::scalar;
}

int resolve_threads(int threads) {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  (void)threads;
  return 1;
#else
  if (threads > 0) return threads;
  static const unsigned hw = [] {
    const unsigned forced = env_count("ATTNVIZ_HARDWARE_THREADS");
    return forced ? forced : std::thread::hardware_concurrency();
  }();
  return hw > 0 ? static_cast<int>(hw) : 1;
#endif
}

namespace simd {

int panel_width(Isa isa) {
  switch (isa) {
#define ATTNVIZ_ISA_WIDTH(id, arch, width, name) \
  case Isa::id:                                  \
    return width;
    ATTNVIZ_X86_ISAS(ATTNVIZ_ISA_WIDTH)
    ATTNVIZ_ARM_ISAS(ATTNVIZ_ISA_WIDTH)
#undef ATTNVIZ_ISA_WIDTH
    default:
      return 8;
  }
}

// Calls `f` with the ISA's xsimd architecture tag (R() for an ISA this build has no kernels for).
template <class R, class F>
R with_arch(Isa isa, F&& f) {
  switch (isa) {
#if defined(__wasm_simd128__)
    case Isa::simd128:
      return f(xsimd::sse4_1{});
#elif defined(__x86_64__)
#define ATTNVIZ_ISA_CALL(id, arch, width, name) \
  case Isa::id:                                 \
    return f(arch{});
    ATTNVIZ_X86_ISAS(ATTNVIZ_ISA_CALL)
#undef ATTNVIZ_ISA_CALL
#elif defined(__aarch64__)
#define ATTNVIZ_ISA_CALL(id, arch, width, name) \
  case Isa::id:                                 \
    return f(arch{});
    ATTNVIZ_ARM_ISAS(ATTNVIZ_ISA_CALL)
#undef ATTNVIZ_ISA_CALL
#endif
    default:
      break;
  }
  (void)f;  // a build without SIMD (the WebAssembly baseline) has no kernels to call
  return R();
}

void run_gemm(Isa isa, int M, int N, int K, const float* a, const float* b, float* c, ThreadPool& pool) {
  with_arch<void>(isa, [&](auto arch) { fast_gemm{}(arch, M, N, K, a, b, c, &pool); });
}

void run_causal_gemm(Isa isa, const CausalGemm& job) {
  with_arch<void>(isa, [&](auto arch) { causal_gemm{}(arch, job); });
}

double run_fma_probe(Isa isa, long iterations, float* sink) {
  return with_arch<double>(isa, [&](auto arch) { return fma_probe{}(arch, iterations, sink); });
}

void run_layer(Isa isa, const LayerJob& job) {
  with_arch<void>(isa, [&](auto arch) { fast_layer{}(arch, job); });
}

void run_rows(Isa isa, const RowJob& job) {
  with_arch<void>(isa, [&](auto arch) { fast_rows{}(arch, job); });
}

void scan_logits(Isa isa, LogitRow& row) {
  with_arch<void>(isa, [&](auto arch) { logit_row{}(arch, row); });
}

const TrainKernels* train_kernels(Isa isa) {
  return with_arch<const TrainKernels*>(isa, [](auto arch) { return &train_table{}(arch); });
}

std::size_t kv_pack_floats(int kv_heads, int head_dim, int capacity, int nr) {
  return static_cast<std::size_t>(kv_heads) *
         (panel_floats(capacity, head_dim, nr) + panel_floats(head_dim, capacity, nr));
}

std::size_t scratch_floats(const LayerJob& job, int nr, int workers) {
  const std::size_t row_stride = static_cast<std::size_t>((job.T + 15) / 16 * 16);
  const std::size_t packs =
      job.kv_pack ? 0 : kv_pack_floats(job.kv_heads > 0 ? job.kv_heads : job.heads, job.head_dim, job.T, nr);
  return packs + static_cast<std::size_t>(workers) * 2 * kRowBlock * row_stride;
}

}  // namespace simd
}  // namespace attnviz
