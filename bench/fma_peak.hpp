// The machine's FP32 FMA peak, measured: shared by the native benchmarks that print "of FMA peak".
#pragma once

#include <vector>

#include "common/thread_pool.hpp"
#include "layer_timing.hpp"
#include "simd/packed.hpp"

namespace attnviz::bench {

// Independent FMA chains on every thread at once, with `isa`'s kernels (20M iterations of 12 chains, about
// 50 ms): the FLOPs done.
inline double fma_probe_all(Isa isa, int threads) {
  ThreadPool& pool = ThreadPool::shared(threads);
  const long iterations = 20'000'000;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  std::vector<double> done(static_cast<std::size_t>(threads));
  pool.run(threads, [&](int t, int) {
    done[static_cast<std::size_t>(t)] =
        simd::run_fma_probe(isa, iterations, &sink[static_cast<std::size_t>(t)]);
  });
  double flops = 0;
  for (double d : done) flops += d;
  return flops;
}

// FLOP/s of one probe: what the machine gives at this moment.
inline double fma_rate_now(Isa isa, int threads) {
  const double t0 = now();
  const double flops = fma_probe_all(isa, threads);
  return flops / (now() - t0);
}

// FLOP/s of the median probe over half a second.
inline double fma_peak(Isa isa, int threads) {
  double flops = 0;
  const double seconds = median_seconds([&] { flops = fma_probe_all(isa, threads); }, 0.5, 3);
  return flops / seconds;
}

}  // namespace attnviz::bench
