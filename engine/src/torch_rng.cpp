// PyTorch 1.13's CPU generator and distributions, transcribed from shared/TORCH_RNG.md.
#include "attnviz/torch_rng.hpp"

#include <cmath>

namespace attnviz {
namespace {
constexpr double kPi = 3.14159265358979323846;  // c10::pi<double>
}  // namespace

void TorchGenerator::manual_seed(std::uint64_t seed) {
  engine_.seed(static_cast<std::mt19937::result_type>(seed & 0xFFFFFFFFu));
  next_normal_.reset();
}

std::uint64_t TorchGenerator::random64() {
  const std::uint64_t hi = random();
  const std::uint64_t lo = random();
  return (hi << 32) | lo;
}

float TorchGenerator::uniform_float() {
  return static_cast<float>(random() & 0xFFFFFFu) * 0x1p-24f;
}

double TorchGenerator::uniform_double() {
  return static_cast<double>(random64() & ((1ull << 53) - 1)) * 0x1p-53;
}

double TorchGenerator::normal_double() {
  if (next_normal_) {
    const double cached = *next_normal_;
    next_normal_.reset();
    return cached;
  }
  const double u1 = uniform_double();
  const double u2 = uniform_double();
  const double r = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * kPi * u1;
  next_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

std::vector<float> torch_rand(TorchGenerator& g, std::size_t n) {
  std::vector<float> out(n);
  for (float& x : out) x = g.uniform_float();
  return out;
}

void torch_uniform_(TorchGenerator& g, float* out, std::size_t n, float from, float to) {
  const float range = to - from;
  for (std::size_t i = 0; i < n; ++i) out[i] = std::fma(g.uniform_float(), range, from);
}

std::vector<float> torch_randn(TorchGenerator& g, std::size_t n) {
  std::vector<float> out(n);
  if (n < 16) {
    for (float& x : out) x = static_cast<float>(g.normal_double());
    return out;
  }
  // All uniforms first, then Box-Muller over blocks of 16: element j pairs with j + 8.
  for (float& x : out) x = g.uniform_float();
  auto block = [](float* d) {
    for (int j = 0; j < 8; ++j) {
      const float u1 = 1.0f - d[j];  // (0, 1] for the log
      const float u2 = d[j + 8];
      const float radius = std::sqrt(-2.0f * std::log(u1));
      const float theta = static_cast<float>(2.0 * kPi * static_cast<double>(u2));
      d[j] = radius * std::cos(theta);
      d[j + 8] = radius * std::sin(theta);
    }
  };
  for (std::size_t i = 0; i + 16 <= n; i += 16) block(out.data() + i);
  if (n % 16 != 0) {
    // The tail: 16 fresh uniforms overwrite the last 16 slots and are transformed as one more block.
    float* tail = out.data() + (n - 16);
    for (int j = 0; j < 16; ++j) tail[j] = g.uniform_float();
    block(tail);
  }
  return out;
}

Linear torch_linear(TorchGenerator& g, int in_features, int out_features, bool bias) {
  Linear l;
  l.weight = Tensor(out_features, in_features);
  // kaiming_uniform_(a = sqrt(5)): bound = sqrt(3) * gain / sqrt(fan_in), gain = sqrt(2 / (1 + a^2)), in
  // double.
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double fan_in = static_cast<double>(in_features);
  const float bound = static_cast<float>(std::sqrt(3.0) * (gain / std::sqrt(fan_in)));
  torch_uniform_(g, l.weight.ptr(), l.weight.size(), -bound, bound);
  if (bias) {
    l.bias = Tensor::vector(out_features);
    const float b = static_cast<float>(1.0 / std::sqrt(fan_in));
    torch_uniform_(g, l.bias.ptr(), l.bias.size(), -b, b);
  }
  return l;
}

std::vector<std::uint8_t> torch_dropout_mask(TorchGenerator& g, std::size_t n, double p, DropoutRng flavour) {
  std::vector<std::uint8_t> keep(n);
  const double keep_p = 1.0 - p;
  if (flavour == DropoutRng::cpu) {
    // bernoulli_(1 - p) without MKL: one float64 uniform per element.
    for (auto& k : keep) k = g.uniform_double() < keep_p ? 1 : 0;
    return keep;
  }
  // With MKL: one 32-bit seed, then an MCG31m1 stream (x_{n+1} = 1132489760 x_n mod 2^31 - 1).
  constexpr std::uint64_t m = 2147483647u;
  std::uint64_t x = g.random() % m;
  if (x == 0) x = 1;
  for (auto& k : keep) {
    k = static_cast<double>(x) / static_cast<double>(m) < keep_p ? 1 : 0;
    x = (1132489760u * x) % m;
  }
  return keep;
}

float dropout_scale(double p) {
  return 1.0f / static_cast<float>(1.0 - p);
}

}  // namespace attnviz
