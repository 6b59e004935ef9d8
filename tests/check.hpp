// Helpers shared by the engine tests: comparing tensors with a stated tolerance.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnviz/tensor.hpp"
#include "attnviz/text.hpp"
#include "attnviz/torch_rng.hpp"

namespace attnviz::test {

// A float's bits, for comparisons that must be exact (and tell -0 from 0, and one NaN from another).
inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Every value of `got` equals `want` to the printed precision: |got - want| <= half a unit of the last
// printed digit (plus float rounding slack).
inline void check_printed(const float* got, const std::vector<double>& want, int decimals,
                          const std::string& what) {
  const double tol = 0.5 * std::pow(10.0, -decimals) + 1e-6;
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(what << " element " << i << ": got " << got[i] << ", printed " << want[i]);
    CHECK(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol);
  }
}

// The largest relative error of `got` against `want`: |got - want| / max(|want|, floor), with floor a tenth
// of the tensor's largest magnitude. Cells that cancel to near zero are judged on the tensor's scale: their
// float32 rounding error is proportional to the terms summed, not to the result (PyTorch's own float32 scores
// differ from the exact float64 values by 1.3e-5 relative with a floor of 1%, fixture 38).
inline double max_rel_error(const float* got, const float* want, std::size_t n) {
  double scale = 0.0;
  for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  const double floor = std::max(0.1 * scale, 1e-30);
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = want[i], g = got[i];
    if (std::isinf(w) || std::isinf(g)) {
      worst = std::max(worst, w == g ? 0.0 : INFINITY);
      continue;
    }
    worst = std::max(worst, std::fabs(g - w) / std::max(std::fabs(w), floor));
  }
  return worst;
}

// A (T, d_in) input with components uniform in [-1, 1), reproducible from `seed`.
inline Input random_input(int T, int d_in, std::uint64_t seed) {
  TorchGenerator g(seed);
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(T));
  for (auto& row : rows)
    for (int i = 0; i < d_in; ++i) row.push_back(2.0 * g.uniform_double() - 1.0);
  Input in;
  REQUIRE(input_from_rows(rows, in).is_ok());
  return in;
}

}  // namespace attnviz::test
