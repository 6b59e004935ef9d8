// The machine's FP32 FMA peak, measured: shared by the native benchmarks that print "of FMA peak".
#pragma once

#include <algorithm>
#include <vector>

#include "common/thread_pool.hpp"
#include "layer_timing.hpp"
#include "simd/packed.hpp"

namespace attnviz::bench {

// Independent FMA chains on every thread at once, with `isa`'s kernels (`iterations` of 12 chains; 20M took
// 30-70 ms on the machines bench/README names, by ISA): the FLOPs done.
inline double fma_probe_all(Isa isa, int threads, long iterations = 20'000'000) {
  ThreadPool& pool = ThreadPool::shared(threads);
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

// FLOP/s the machine gives at this moment: the best of four short probes, the 20M iterations of one long
// probe in all. Interference only slows a probe down. One long probe read low when a thread started late or
// lost its core for a while, which the next pass need not suffer: on the Zen 4 VM one such reading put a
// pass at 149% of the peak.
inline double fma_rate_now(Isa isa, int threads) {
  double best = 0;
  for (int probe = 0; probe < 4; ++probe) {
    const double t0 = now();
    const double flops = fma_probe_all(isa, threads, 5'000'000);
    best = std::max(best, flops / (now() - t0));
  }
  return best;
}

// FLOP/s of the median probe over half a second.
inline double fma_peak(Isa isa, int threads) {
  double flops = 0;
  const double seconds = median_seconds([&] { flops = fma_probe_all(isa, threads); }, 0.5, 3);
  return flops / seconds;
}

}  // namespace attnviz::bench
