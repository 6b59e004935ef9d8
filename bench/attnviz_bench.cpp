// attnviz-bench: for each shape, first checks the fast path against the scalar reference, then prints the
// median time and GFLOP/s of the reference, of each ISA on one thread and of the best ISA on every thread,
// next to the machine's measured FP32 FMA peak. Also times the fused Q/K/V projection GEMM on its own.
//
//   attnviz-bench [--quick] [--threads N] [--no-reference]
//
// The layer is the one bench/layer_timing.hpp describes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "common/thread_pool.hpp"
#include "fma_peak.hpp"
#include "layer_timing.hpp"
#include "simd/pack.hpp"
#include "simd/packed.hpp"

using namespace attnviz;
using namespace attnviz::bench;

namespace {

struct Options {
  bool quick = false, reference = true;
  int threads = 0;
};

struct BenchShape {
  const char* preset;
  int T;
};

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      opt.quick = true;
    } else if (!std::strcmp(argv[i], "--no-reference")) {
      opt.reference = false;
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      opt.threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: attnviz-bench [--quick] [--threads N] [--no-reference]\n");
      return 2;
    }
  }
  const int threads = resolve_threads(opt.threads);
  const double budget = opt.quick ? 0.2 : 1.0;
  std::vector<Isa> simd_isas;
  for (Isa i : available_isas())
    if (i != Isa::scalar) simd_isas.push_back(i);
  if (simd_isas.empty()) {
    std::printf("no SIMD ISA available: nothing to time\n");
    return 0;
  }
  const Isa best = simd_isas.front();

  std::printf("attnviz-bench: %d threads, ISAs:", threads);
  for (Isa i : available_isas()) std::printf(" %s", to_string(i));
  std::printf("\n\nmeasured FP32 FMA peak:\n");
  std::vector<std::pair<Isa, double>> peak1;
  for (Isa i : simd_isas) {
    peak1.emplace_back(i, fma_peak(i, 1));
    std::printf("  %-8s 1 thread   %8.1f GFLOP/s\n", to_string(i), peak1.back().second / 1e9);
  }
  const double peak_all = fma_peak(best, threads);
  std::printf("  %-8s %d threads  %8.1f GFLOP/s\n", to_string(best), threads, peak_all / 1e9);
  const auto peak_of = [&](Isa isa, int n) {
    if (n > 1) return peak_all;
    for (auto& p : peak1)
      if (p.first == isa) return p.second;
    return peak_all;
  };

  const BenchShape shapes[] = {{"book", 6},         {"gpt2-small", 16},   {"gpt2-small", 128},
                               {"gpt2-small", 512}, {"gpt2-small", 1024}, {"gpt2-xl", 256}};
  for (const BenchShape& sh : shapes) {
    const Config c = layer_config(*find_preset(sh.preset));
    const Input in = random_input(sh.T, c.d_in);
    TorchGenerator g(c.seed);
    Params p;
    must(build_params(c, g, p), "drawing the parameters");
    const double flops = layer_flops(c, sh.T);
    std::printf("\n%s layer, T = %d (d_in %d, %d heads x %d), %.3f GFLOP per layer\n", sh.preset, sh.T,
                c.d_in, c.num_heads, c.d_out / c.num_heads, flops / 1e9);

    // Check first: the fast path (best ISA, every thread) against the reference.
    Result ref, fast;
    TorchGenerator g1(0), g2(0);
    must(forward(c, p, in, g1, ref, Exec{Isa::scalar, 1}), "the reference forward pass");
    pack(p, Exec{best, threads});
    must(forward(c, p, in, g2, fast, Exec{best, threads}), "the fast forward pass");
    const double err = std::max(max_rel_error(fast.weights.to_tensor(), ref.weights.to_tensor()),
                                max_rel_error(fast.output, ref.output));
    std::printf("  check against the reference: max relative error %.2g %s\n", err,
                err <= 2e-5 ? "ok" : "FAILED");
    if (err > 2e-5) return 1;

    std::printf("  %-22s %7s %12s %10s %10s\n", "path", "threads", "median ms", "GFLOP/s", "of peak");
    const auto row = [&](const char* name, Isa isa, int n, double seconds) {
      const double rate = flops / seconds;
      std::printf("  %-22s %7d %12.3f %10.1f", name, n, seconds * 1e3, rate / 1e9);
      if (isa != Isa::scalar) std::printf(" %9.0f%%", 100 * rate / peak_of(isa, n));
      std::printf("\n");
    };
    const auto time_forward = [&](Isa isa, int n, double b, int reps) {
      pack(p, Exec{isa, n});
      Result r;
      return median_seconds(
          [&] {
            TorchGenerator gg(0);
            must(forward(c, p, in, gg, r, Exec{isa, n}), "the timed forward pass");
          },
          b, reps);
    };
    if (opt.reference)
      row("reference (scalar)", Isa::scalar, 1, time_forward(Isa::scalar, 1, budget, opt.quick ? 1 : 3));
    for (Isa isa : simd_isas) row(to_string(isa), isa, 1, time_forward(isa, 1, budget, 5));
    if (threads > 1) row(to_string(best), best, threads, time_forward(best, threads, budget, 5));

    // The fused Q/K/V projection on its own: (T x d_in) x (d_in x 3 d_out).
    if (sh.T >= 128) {
      const int N = 3 * c.d_out, K = c.d_in;
      const double gemm_flops = 2.0 * sh.T * N * K;
      for (Isa isa : {best}) {
        const int nr = simd::panel_width(isa);
        AlignedFloats b(simd::panel_floats(N, K, nr)), out(static_cast<std::size_t>(sh.T) * N);
        std::vector<float> w(static_cast<std::size_t>(N) * K, 0.01f);
        simd::pack_nk(w.data(), N, K, K, nr, b.data());
        for (int n : {1, threads}) {
          ThreadPool& pool = ThreadPool::shared(n);
          const double s = median_seconds(
              [&] { simd::run_gemm(isa, sh.T, N, K, in.x.ptr(), b.data(), out.data(), pool); }, budget, 5);
          std::printf("  %-22s %7d %12.3f %10.1f %9.0f%%\n",
                      (std::string("qkv GEMM ") + to_string(isa)).c_str(), n, s * 1e3, gemm_flops / s / 1e9,
                      100 * gemm_flops / s / peak_of(isa, n));
          if (threads == 1) break;
        }
      }
    }
  }
  return 0;
}
