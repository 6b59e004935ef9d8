// PyTorch's CPU random number generator, reproduced draw for draw (facts in docs/torch-rng.md), so that a
// seed gives the same parameters and dropout masks as a notebook calling torch.manual_seed(seed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "attnviz/config.hpp"
#include "attnviz/exec.hpp"
#include "attnviz/status.hpp"
#include "attnviz/tensor.hpp"

namespace attnviz {

// The 32-bit Mersenne Twister, the same stream as std::mt19937 (and at::mt19937), with a bulk interface:
// fill() regenerates the 624-word state in one pass and tempers whole runs of it, which is what lets a
// seeded GPT-2 initialization (about 163M draws) take a fraction of a second.
class Mt19937 {
 public:
  static constexpr int kStateSize = 624;

  explicit Mt19937(std::uint32_t seed = 5489u) { this->seed(seed); }
  void seed(std::uint32_t seed);

  std::uint32_t operator()() {
    if (index_ == kStateSize) twist();
    return temper(state_[index_++]);
  }
  // The next n outputs, exactly what n calls of operator() would return.
  void fill(std::uint32_t* out, std::size_t n);

  // The state: the 624 words, the index of the next one to temper (kStateSize: twist first), and whether
  // nothing was drawn since seed() (PyTorch's state tells the two apart: `next` 0 or 624).
  const std::uint32_t* words() const { return state_; }
  int index() const { return index_; }
  bool fresh() const { return fresh_; }
  // Sets the state; the caller checks index is in 0..kStateSize (and fresh only with kStateSize).
  void restore(const std::uint32_t* words, int index, bool fresh);

 private:
  void twist();
  static std::uint32_t temper(std::uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }

  std::uint32_t state_[kStateSize];
  int index_ = kStateSize;
  bool fresh_ = true;
};

// The size of torch.get_rng_state() for PyTorch's CPU generator (1.13's CPUGeneratorImplState).
inline constexpr std::size_t kTorchRngStateBytes = 5056;

class TorchGenerator {
 public:
  explicit TorchGenerator(std::uint64_t seed = 67280421310721ull) { manual_seed(seed); }

  // torch.manual_seed: a 32-bit Mersenne Twister seeded with the low 32 bits; clears the cached normal
  // sample.
  void manual_seed(std::uint64_t seed);

  std::uint32_t random() { return engine_(); }
  // n consecutive 32-bit draws at once (the same values as n calls of random()).
  void random_fill(std::uint32_t* out, std::size_t n) { engine_.fill(out, n); }
  std::uint64_t random64();  // two draws: (first << 32) | second
  float uniform_float();     // one draw: (r & 0xFFFFFF) * 2^-24, in [0, 1)
  double uniform_double();   // two draws: 53 bits * 2^-53, in [0, 1)
  // at::normal_distribution<double>: Box-Muller on two double uniforms, r = sqrt(-2 log(1 - u2)), returns
  // r cos(2 pi u1) and caches r sin(2 pi u1) (unscaled) for the next call.
  double normal_double();

  // torch.initial_seed(): the last manual_seed's 64-bit value.
  std::uint64_t initial_seed() const { return seed_; }
  // torch.get_rng_state(): PyTorch 1.13's CPUGeneratorImplState, kTorchRngStateBytes little-endian bytes
  // (docs/torch-rng.md, "The generator's state"): the seed, the Mersenne Twister's words and position, the
  // cached normal sample.
  std::vector<std::uint8_t> state() const;
  // torch.set_rng_state(): the bytes state() writes (or PyTorch's). Untrusted: the size, the position and
  // the flags are checked and a bad state is refused in one line, leaving the generator as it was. A
  // cached float normal sample (which this generator never keeps) is refused. The bytes PyTorch's own
  // set_rng_state ignores (padding, the legacy normal_x and normal_rho, normal_y while normal_is_valid is 0,
  // the float sample while its flag is 0) are ignored here too, so state() gives them back as zeros.
  Status set_state(const std::uint8_t* bytes, std::size_t n);

 private:
  Mt19937 engine_;
  std::uint64_t seed_ = 0;
  std::optional<double> next_normal_;
};

// torch.rand(n): n float uniforms in [0, 1), serially.
std::vector<float> torch_rand(TorchGenerator& g, std::size_t n);

// tensor.uniform_(from, to) on float32: x * (to - from) + from, contracted to one fma as in PyTorch's AVX2
// build. `isa` picks the kernels (the result is the same for every ISA; tests and benchmarks compare them).
void torch_uniform_(TorchGenerator& g, float* out, std::size_t n, float from, float to,
                    Isa isa = Isa::automatic);

// tensor.normal_(mean, std) on a contiguous float32 tensor of n elements, bit for bit as PyTorch 1.13's x86
// build (AVX2 kernels) computes it:
// - n >= 16: n float uniforms first, then Box-Muller in place over blocks of 16 (element j of a block pairs
//   with j + 8) with the Cephes single-precision log and sincos of avx_mathfun.h, each element finished as
//   fma(r * cos, std, mean) in float; if n % 16 != 0, 16 fresh uniforms overwrite the last 16 elements and
//   are transformed as one more block.
// - n < 16: at::normal_distribution<double> per element (TorchGenerator::normal_double), then
//   fma(z, std, mean) in double, rounded to float.
// mean and std are doubles, as PyTorch takes them: the n >= 16 path rounds them to float, the n < 16 path
// does not (normal_(0, 0.02) scales small tensors by the double 0.02).
void torch_normal_(TorchGenerator& g, float* out, std::size_t n, double mean, double std,
                   Isa isa = Isa::automatic);

// torch.randn(n) for float32: torch_normal_(g, out, n, 0, 1).
std::vector<float> torch_randn(TorchGenerator& g, std::size_t n, Isa isa = Isa::automatic);

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

// fmaf(a, b, c), correctly rounded (the same bits as std::fma), computed with double multiplies and adds:
// the fused multiply-add of the scalar kernels, for builds without an FMA instruction (WebAssembly).
float fma_exact(float a, float b, float c);

}  // namespace attnviz
