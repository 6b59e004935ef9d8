// The machine's FP32 FMA peak, measured: shared by the native benchmarks that print "of FMA peak".
#pragma once

#include <vector>

#include "common/thread_pool.hpp"
#include "layer_timing.hpp"
#include "simd/packed.hpp"

namespace attnviz::bench {

// FLOP/s of independent FMA chains on every thread at once, with `isa`'s kernels.
inline double fma_peak(Isa isa, int threads) {
  ThreadPool& pool = ThreadPool::shared(threads);
  const long iterations = 20'000'000;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  double flops = 0;
  const double seconds = median_seconds(
      [&] {
        std::vector<double> done(static_cast<std::size_t>(threads));
        pool.run(threads, [&](int t, int) {
          done[static_cast<std::size_t>(t)] =
              simd::run_fma_probe(isa, iterations, &sink[static_cast<std::size_t>(t)]);
        });
        flops = 0;
        for (double d : done) flops += d;
      },
      0.5, 3);
  return flops / seconds;
}

}  // namespace attnviz::bench
