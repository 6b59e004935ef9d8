// The benchmark layer and its timing, shared by attnviz-bench (native, every ISA) and the layer benchmark
// built for both native and WebAssembly (bench/layer_bench.cpp), so both time exactly the same work.
//
// The layer is GPT-2's attention as nn.MultiheadAttention computes it for the PyTorch peer
// (bench/torch_peer.py): mha with biases, causal mask, eval mode (no dropout), the attention weights of every
// head materialized, raw scores not kept.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "attnviz/engine.hpp"

namespace attnviz::bench {

// The benchmarks build their own inputs from presets they checked: the engine refusing one is a bug in the
// benchmark, and timing a refused call would print figures for work never done, so it stops here.
inline void must(const Status& s, const char* what) {
  if (s.is_ok()) return;
  std::fprintf(stderr, "%s failed: %s\n", what, s.error.c_str());
  std::exit(1);
}

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds of each fn() over repetitions lasting about `budget` seconds (at least `min_reps`), after one to
// warm up; `before` (optional) runs ahead of each timed repetition, untimed.
inline std::vector<double> seconds_of_runs(const std::function<void()>& fn, double budget, int min_reps,
                                           const std::function<void()>& before = nullptr) {
  fn();  // warm-up
  std::vector<double> times;
  const double start = now();
  while (static_cast<int>(times.size()) < min_reps || (now() - start < budget && times.size() < 1000)) {
    if (before) before();
    const double t0 = now();
    fn();
    times.push_back(now() - t0);
  }
  return times;
}

// T token ids spread over the vocabulary (a multiplicative hash of the position), the same in every run and
// benchmark, so that no two neighbours repeat and every pass sees the same text.
inline std::vector<int> token_ids(int T, int vocab) {
  std::vector<int> ids;
  for (int i = 0; i < T; ++i)
    ids.push_back(
        static_cast<int>((2654435761u * static_cast<unsigned>(i + 1)) % static_cast<unsigned>(vocab)));
  return ids;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of fn() over repetitions lasting about `budget` seconds (at least `min_reps`).
inline double median_seconds(const std::function<void()>& fn, double budget, int min_reps) {
  return median(seconds_of_runs(fn, budget, min_reps));
}

// T rows of d_in numbers in [-1, 1), the same for every run.
inline Input random_input(int T, int d_in) {
  TorchGenerator g(2024);
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(T));
  for (auto& row : rows)
    for (int i = 0; i < d_in; ++i) row.push_back(2.0 * g.uniform_double() - 1.0);
  Input in;
  must(input_from_rows(rows, in), "the benchmark input");
  return in;
}

// The largest difference of `got` from `want`, relative to each value (and to a tenth of the largest, for
// values near zero).
inline double max_rel_error(const Tensor& got, const Tensor& want) {
  double scale = 0, worst = 0;
  for (float w : want.data) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  const double floor = std::max(0.1 * scale, 1e-30);
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got.data[i]) - want.data[i]) /
                                std::max(std::fabs(static_cast<double>(want.data[i])), floor));
  return worst;
}

// The benchmark layer's configuration for a preset's sizes.
inline Config layer_config(const Preset& preset) {
  Config c;
  apply(preset, c);
  c.variant = Variant::mha, c.qkv_bias = true, c.train = false, c.stages = 0;
  return c;
}

// FLOPs of one causal mha layer: projections, scores and context over the unmasked triangle, out_proj.
inline double layer_flops(const Config& c, int T) {
  const double t = T, tri = t * (t + 1) / 2, w = c.d_out;
  return 2 * t * c.d_in * 3 * w + 2 * 2 * tri * w + 2 * t * w * c.d_out;
}

}  // namespace attnviz::bench
