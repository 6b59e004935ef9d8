// The machine's FP32 FMA peak, measured: shared by the native benchmarks that print "of FMA peak".
#pragma once

#include <algorithm>
#include <vector>

#include "common/thread_pool.hpp"
#include "layer_timing.hpp"
#include "simd/packed.hpp"

namespace attnviz::bench {

// FLOP/s of independent FMA chains on every thread at once, with `isa`'s kernels: one reading of about 50 ms
// (20M iterations of 12 chains), what the machine gives at this moment.
inline double fma_rate_now(Isa isa, int threads) {
  ThreadPool& pool = ThreadPool::shared(threads);
  const long iterations = 20'000'000;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  std::vector<double> done(static_cast<std::size_t>(threads));
  const double t0 = now();
  pool.run(threads, [&](int t, int) {
    done[static_cast<std::size_t>(t)] =
        simd::run_fma_probe(isa, iterations, &sink[static_cast<std::size_t>(t)]);
  });
  const double seconds = now() - t0;
  double flops = 0;
  for (double d : done) flops += d;
  return flops / seconds;
}

// The median of such readings over half a second (after one to warm up).
inline double fma_peak(Isa isa, int threads) {
  fma_rate_now(isa, threads);
  std::vector<double> rates;
  const double start = now();
  while (rates.size() < 3 || now() - start < 0.5) rates.push_back(fma_rate_now(isa, threads));
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace attnviz::bench
