// PyTorch's CPU random number generator, reproduced draw for draw (facts in shared/TORCH_RNG.md), so that a
// seed gives the same parameters and dropout masks as a notebook calling torch.manual_seed(seed).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "attnviz/config.hpp"
#include "attnviz/tensor.hpp"

namespace attnviz {

class TorchGenerator {
 public:
  explicit TorchGenerator(std::uint64_t seed = 67280421310721ull) { manual_seed(seed); }

  // torch.manual_seed: a 32-bit Mersenne Twister seeded with the low 32 bits; clears the cached normal
  // sample.
  void manual_seed(std::uint64_t seed);

  std::uint32_t random() { return static_cast<std::uint32_t>(engine_()); }
  std::uint64_t random64();  // two draws: (first << 32) | second
  float uniform_float();     // one draw: (r & 0xFFFFFF) * 2^-24, in [0, 1)
  double uniform_double();   // two draws: 53 bits * 2^-53, in [0, 1)
  double normal_double();    // at::normal_distribution<double> (Box-Muller, caches the sine half)

 private:
  std::mt19937 engine_;
  std::optional<double> next_normal_;
};

// torch.rand(n): n float uniforms in [0, 1), serially.
std::vector<float> torch_rand(TorchGenerator& g, std::size_t n);

// tensor.uniform_(from, to) on float32: x * (to - from) + from, contracted to one fma as in PyTorch's AVX2
// build.
void torch_uniform_(TorchGenerator& g, float* out, std::size_t n, float from, float to);

// torch.randn(n) for float32 (Box-Muller in blocks of 16 for n >= 16, double precision pairs below).
std::vector<float> torch_randn(TorchGenerator& g, std::size_t n);

// nn.Linear(in, out, bias): weight (out, in) from kaiming_uniform_(a = sqrt(5)), then the bias (out).
struct Linear {
  Tensor weight;  // (out, in)
  Tensor bias;    // (out), empty without bias
};
Linear torch_linear(TorchGenerator& g, int in_features, int out_features, bool bias);

// nn.Dropout(p)'s keep mask over n elements in row-major order: 1 = kept (scaled by 1/(1-p)), 0 = dropped.
std::vector<std::uint8_t> torch_dropout_mask(TorchGenerator& g, std::size_t n, double p, DropoutRng flavour);

// The factor nn.Dropout multiplies kept values by: float32 1 / (1 - p).
float dropout_scale(double p);

}  // namespace attnviz
