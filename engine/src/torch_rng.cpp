// PyTorch 1.13's CPU generator and distributions, as docs/torch-rng.md describes them.
#include "attnviz/torch_rng.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "rng_kernels.hpp"
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
#include "simd/rng.hpp"
#define ATTNVIZ_RNG_AVX2 1
#elif defined(__wasm_simd128__)
#include "simd/rng.hpp"
#define ATTNVIZ_RNG_SIMD128 1
#endif

namespace attnviz {
namespace {

constexpr double kPi = 3.14159265358979323846;  // c10::pi<double>

// Draws are made in runs of this many (a multiple of 16, so that whole Box-Muller blocks are transformed
// while they are still in cache).
constexpr std::size_t kChunk = 4096;

template <class To, class From>
To bit_cast(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To y;
  std::memcpy(&y, &x, sizeof y);
  return y;
}

// fma_f32 where the double sum s = a * b + c might round to the wrong float: s on a float rounding midpoint
// (bit 29 of the double's mantissa alone, for normal floats), or below the smallest normal float, where
// floats round at 2^-149 and the midpoints are odd multiples of 2^-150. Out of line, so that the compiler
// cannot evaluate it for every element of a loop (clang's vectorizer did that with floor, fmod and fma in
// WebAssembly: uniform_ ran 100 times slower). The correction holds up to the float overflow threshold
// (FLT_MAX + ulp / 2 is a midpoint like any other) and beyond, where every sum rounds to infinity.
[[gnu::noinline]] float fma_f32_suspect(float c, double p, double s) {
  const std::uint64_t bits = bit_cast<std::uint64_t>(s);
  const double magnitude = std::fabs(s);
  if (magnitude < 0x1p-126) {
    const double m = s * 0x1p150;  // exact: a power-of-two scaling of a normal double
    if (m != std::floor(m) || std::fmod(m, 2.0) == 0.0) return static_cast<float>(s);
  } else if ((bits & 0x1FFFFFFFu) != 0x10000000u) {
    return static_cast<float>(s);
  }
  const double bb = s - p;
  const double error = (p - (s - bb)) + (static_cast<double>(c) - bb);
  if (error == 0.0) return static_cast<float>(s);  // a true tie: round half to even, as the cast does
  // Off the midpoint by one double ulp, on the side where the exact value lies: the cast then rounds right.
  const bool away = (error > 0.0) == (s > 0.0);
  return static_cast<float>(bit_cast<double>(away ? bits + 1 : bits - 1));
}

// fmaf(a, b, c), correctly rounded, with double arithmetic only (the same bits in every build, fast where
// there is no FMA instruction: baseline x86-64, WebAssembly). a * b is exact in double; the double sum is
// then rounded once more to float, which is only wrong when it lands exactly on a float rounding midpoint
// without being exact: then the exact error of the sum (TwoSum) says which way the true value lies.
inline float fma_f32(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);
  const double s = p + static_cast<double>(c);
  if (!(std::fabs(s) < 0x1p-126) && (bit_cast<std::uint64_t>(s) & 0x1FFFFFFFu) != 0x10000000u)
    return static_cast<float>(s);
  return fma_f32_suspect(c, p, s);
}

inline float float_from_bits(std::uint32_t u) {
  return bit_cast<float>(u);
}
inline std::uint32_t bits_of(float f) {
  return bit_cast<std::uint32_t>(f);
}

// log(u) for u in (0, 1]: avx_mathfun.h's log256_ps (Cephes logf), one lane, with PyTorch's fused
// multiply-adds (see simd/rng_avx2.cpp and simd/rng_wasm.cpp, the vector twins: same operations, same order).
inline float log_cephes(float u) {
  float x = u < 0x1p-126f ? 0x1p-126f : u;
  const std::int32_t exponent = static_cast<std::int32_t>(bits_of(x) >> 23) - 127;
  x = float_from_bits((bits_of(x) & 0x807fffffu) | 0x3f000000u);  // mantissa in [0.5, 1)
  float e = static_cast<float>(exponent) + 1.0f;
  const bool small = x < 0.707106781186547524f;  // then e -= 1, x = x + x - 1; else x = x - 1
  const float tmp = small ? x : 0.0f;
  x = x + -1.0f;
  e = e - (small ? 1.0f : 0.0f);
  x = tmp + x;
  const float z = x * x;
  float y = 7.0376836292e-2f;
  y = fma_f32(x, y, -1.1514610310e-1f);
  y = fma_f32(x, y, 1.1676998740e-1f);
  y = fma_f32(x, y, -1.2420140846e-1f);
  y = fma_f32(x, y, 1.4249322787e-1f);
  y = fma_f32(x, y, -1.6668057665e-1f);
  y = fma_f32(x, y, 2.0000714765e-1f);
  y = fma_f32(x, y, -2.4999993993e-1f);
  y = fma_f32(x, y, 3.3333331174e-1f);
  y = x * y;
  y = fma_f32(y, z, e * -2.12194440e-4f);
  y = fma_f32(-z, 0.5f, y);
  x = x + y;
  return fma_f32(e, 0.693359375f, x);
}

// sin and cos of theta in [0, 2 pi): avx_mathfun.h's sincos256_ps (Cephes sinf/cosf), one lane.
inline void sincos_cephes(float theta, float& sin_out, float& cos_out) {
  const float ax = float_from_bits(bits_of(theta) & 0x7fffffffu);
  std::uint32_t sign_sin = bits_of(theta) & 0x80000000u;
  std::int32_t j = static_cast<std::int32_t>(ax * 1.27323954473516f) + 1;  // 4 / pi, truncated
  j &= ~1;
  const bool poly = (j & 2) == 0;  // the sine polynomial gives the sine
  const float y = static_cast<float>(j);
  const std::uint32_t sign_cos = static_cast<std::uint32_t>(~(j - 2) & 4) << 29;
  sign_sin ^= static_cast<std::uint32_t>(j & 4) << 29;
  float x = fma_f32(y, -0.78515625f, ax);  // extended-precision reduction by pi / 4
  x = fma_f32(y, -2.4187564849853515625e-4f, x);
  x = fma_f32(y, -3.77489497744594108e-8f, x);
  const float z = x * x;
  float c = fma_f32(z, 2.443315711809948e-5f, -1.388731625493765e-3f);
  c = fma_f32(z, c, 4.166664568298827e-2f);
  c = z * c;
  c = fma_f32(c, z, -(z * 0.5f));
  c = c + 1.0f;
  float s = fma_f32(z, -1.9515295891e-4f, 8.3321608736e-3f);
  s = fma_f32(z, s, -1.6666654611e-1f);
  s = z * s;
  s = fma_f32(s, x, x);
  const float sin2 = poly ? s : 0.0f, sin1 = poly ? 0.0f : c;
  s = s - sin2;
  c = c - sin1;
  sin_out = float_from_bits(bits_of(sin2 + sin1) ^ sign_sin);
  cos_out = float_from_bits(bits_of(s + c) ^ sign_cos);
}

// normal_fill_16_AVX2 on one block of 16 uniforms, in place: element j (< 8) pairs with j + 8.
void normal_block(float* d, float mean, float std) {
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - d[j];                        // (0, 1] for the log
    const float theta = 6.2831854820251465f * d[j + 8];  // float(2 pi)
    const float radius = std::sqrt(-2.0f * log_cephes(u1));
    float s, c;
    sincos_cephes(theta, s, c);
    d[j] = fma_f32(radius * c, std, mean);
    d[j + 8] = fma_f32(radius * s, std, mean);
  }
}

// Which kernels the bulk paths run: AVX2 + FMA (on AVX2 and AVX-512 processors), SIMD128 (WebAssembly), or
// the scalar ones.
enum class Kernels { scalar, avx2, simd128 };

Kernels kernels_for(Isa isa) {
  const Isa resolved = resolve(isa);
#if defined(ATTNVIZ_RNG_AVX2)
  if (resolved == Isa::avx2 || resolved == Isa::avx512) return Kernels::avx2;
#elif defined(ATTNVIZ_RNG_SIMD128)
  if (resolved == Isa::simd128) return Kernels::simd128;
#endif
  (void)resolved;
  return Kernels::scalar;
}

void uniform_from_bits(const std::uint32_t* bits, float* out, std::size_t n, float from, float range,
                       Kernels k) {
#if defined(ATTNVIZ_RNG_AVX2)
  if (k == Kernels::avx2) return simd::uniform_from_bits_avx2(bits, out, n, from, range);
#elif defined(ATTNVIZ_RNG_SIMD128)
  if (k == Kernels::simd128) return simd::uniform_from_bits_simd128(bits, out, n, from, range);
#endif
  (void)k;
  for (std::size_t i = 0; i < n; ++i)
    out[i] = fma_f32(static_cast<float>(bits[i] & 0xFFFFFFu) * 0x1p-24f, range, from);
}

// n float uniforms in [0, 1) (uniform_float), drawn in bulk.
void draw_unit_floats(TorchGenerator& g, float* out, std::size_t n) {
  std::uint32_t bits[kChunk];
  while (n > 0) {
    const std::size_t m = std::min(n, kChunk);
    g.random_fill(bits, m);
    for (std::size_t i = 0; i < m; ++i) out[i] = static_cast<float>(bits[i] & 0xFFFFFFu) * 0x1p-24f;
    out += m;
    n -= m;
  }
}

void normal_blocks(float* data, std::size_t blocks, float mean, float std, Kernels k) {
#if defined(ATTNVIZ_RNG_AVX2)
  if (k == Kernels::avx2) return simd::normal_blocks_avx2(data, blocks, mean, std);
#elif defined(ATTNVIZ_RNG_SIMD128)
  if (k == Kernels::simd128) return simd::normal_blocks_simd128(data, blocks, mean, std);
#endif
  (void)k;
  for (std::size_t b = 0; b < blocks; ++b) normal_block(data + 16 * b, mean, std);
}

}  // namespace

void Mt19937::seed(std::uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kStateSize; ++i) {
    const std::uint32_t prev = state_[i - 1];
    state_[i] = 1812433253u * (prev ^ (prev >> 30)) + static_cast<std::uint32_t>(i);
  }
  index_ = kStateSize;
  fresh_ = true;
}

void Mt19937::restore(const std::uint32_t* words, int index, bool fresh) {
  std::memcpy(state_, words, sizeof state_);
  index_ = index;
  fresh_ = fresh;
}

void Mt19937::twist() {
  constexpr int n = kStateSize, m = 397;
  auto next = [](std::uint32_t upper, std::uint32_t lower, std::uint32_t far) {
    const std::uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return far ^ (y >> 1) ^ ((0u - (y & 1u)) & 0x9908b0dfu);
  };
  // Three loops without wrap-around inside, so that the compiler vectorizes the first two.
  for (int i = 0; i < n - m; ++i) state_[i] = next(state_[i], state_[i + 1], state_[i + m]);
  for (int i = n - m; i < n - 1; ++i) state_[i] = next(state_[i], state_[i + 1], state_[i + m - n]);
  state_[n - 1] = next(state_[n - 1], state_[0], state_[m - 1]);
  index_ = 0;
  fresh_ = false;
}

void Mt19937::fill(std::uint32_t* out, std::size_t n) {
  while (n > 0) {
    if (index_ == kStateSize) twist();
    const std::size_t m = std::min(n, static_cast<std::size_t>(kStateSize - index_));
    const std::uint32_t* src = state_ + index_;
    for (std::size_t i = 0; i < m; ++i) out[i] = temper(src[i]);
    index_ += static_cast<int>(m);
    out += m;
    n -= m;
  }
}

void TorchGenerator::manual_seed(std::uint64_t seed) {
  engine_.seed(static_cast<std::uint32_t>(seed & 0xFFFFFFFFu));
  seed_ = seed;
  next_normal_.reset();
}

// CPUGeneratorImplState on x86-64 (and every little-endian 64-bit build of PyTorch): the legacy part
// {u64 the_initial_seed; i32 left; i32 seeded; u64 next; u64 state[624]; f64 normal_x, normal_y,
// normal_rho; i32 normal_is_valid} padded to 5048 bytes, then {f32 next_float_normal_sample; bool valid}
// padded to 5056. at::mt19937 counts `left` down to the next twist and reads word `next`: after k draws
// since a twist, left = 625 - k and next = k; after manual_seed, left = 1 and next = 0.
namespace {

constexpr std::size_t kOffLeft = 8, kOffSeeded = 12, kOffNext = 16, kOffWords = 24, kOffNormalY = 5024,
                      kOffNormalValid = 5040, kOffFloatValid = 5052;

template <class T>
void put(std::vector<std::uint8_t>& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);  // little-endian hosts only (x86-64, ARM64, WebAssembly)
}
template <class T>
T get(const std::uint8_t* b, std::size_t at) {
  T v;
  std::memcpy(&v, b + at, sizeof v);
  return v;
}

}  // namespace

std::vector<std::uint8_t> TorchGenerator::state() const {
  std::vector<std::uint8_t> b(kTorchRngStateBytes, 0);
  const int k = engine_.index();
  put<std::uint64_t>(b, 0, seed_);
  put<std::int32_t>(b, kOffLeft, Mt19937::kStateSize + 1 - k);
  put<std::int32_t>(b, kOffSeeded, 1);
  put<std::uint64_t>(b, kOffNext, engine_.fresh() ? 0 : static_cast<std::uint64_t>(k));
  for (int i = 0; i < Mt19937::kStateSize; ++i)
    put<std::uint64_t>(b, kOffWords + 8 * static_cast<std::size_t>(i), engine_.words()[i]);
  if (next_normal_) {
    put<double>(b, kOffNormalY, *next_normal_);
    put<std::int32_t>(b, kOffNormalValid, 1);
  }
  return b;
}

Status TorchGenerator::set_state(const std::uint8_t* b, std::size_t n) {
  constexpr int N = Mt19937::kStateSize;
  if (n != kTorchRngStateBytes)
    return Status::fail("the generator state is " + std::to_string(n) + " bytes, not " +
                        std::to_string(kTorchRngStateBytes) + " (torch.get_rng_state() of PyTorch 1.13)");
  const auto left = get<std::int32_t>(b, kOffLeft);
  const auto seeded = get<std::int32_t>(b, kOffSeeded);
  const auto next = get<std::uint64_t>(b, kOffNext);
  if (seeded != 1) return Status::fail("the generator state is not seeded");
  // left 1: the words are twisted at the next draw (next 0 right after manual_seed, else 624)
  const bool consistent = left == 1
                              ? (next == 0 || next == static_cast<std::uint64_t>(N))
                              : (left > 1 && left <= N && next == static_cast<std::uint64_t>(N + 1 - left));
  if (!consistent)
    return Status::fail("the generator state's position is inconsistent (left " + std::to_string(left) +
                        ", next " + std::to_string(next) + ")");
  std::uint32_t words[N];
  for (int i = 0; i < N; ++i) {
    const auto w = get<std::uint64_t>(b, kOffWords + 8 * static_cast<std::size_t>(i));
    if (w > 0xFFFFFFFFu)
      return Status::fail("the generator state's word " + std::to_string(i) + " is not 32-bit");
    words[i] = static_cast<std::uint32_t>(w);
  }
  const auto normal_valid = get<std::int32_t>(b, kOffNormalValid);
  const auto normal = get<double>(b, kOffNormalY);
  if (normal_valid != 0 && normal_valid != 1)
    return Status::fail("the generator state's normal_is_valid is neither 0 nor 1");
  if (normal_valid == 1 && !std::isfinite(normal))
    return Status::fail("the generator state's cached normal sample is not a finite number");
  if (b[kOffFloatValid] != 0)
    return Status::fail("the generator state caches a float normal sample, which attnviz never draws");
  engine_.restore(words, N + 1 - left, left == 1 && next == 0);
  seed_ = get<std::uint64_t>(b, 0);
  next_normal_.reset();
  if (normal_valid == 1) next_normal_ = normal;
  return Status::ok();
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
  // log(1 - u2), not log1p(-u2): what Debian's libtorch_cpu calls.
  const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
  const double theta = 2.0 * kPi * u1;
  next_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

std::vector<float> torch_rand(TorchGenerator& g, std::size_t n) {
  std::vector<float> out(n);
  draw_unit_floats(g, out.data(), n);
  return out;
}

void torch_uniform_(TorchGenerator& g, float* out, std::size_t n, float from, float to, Isa isa) {
  const float range = to - from;
  const Kernels k = kernels_for(isa);
  std::uint32_t bits[kChunk];
  while (n > 0) {
    const std::size_t m = std::min(n, kChunk);
    g.random_fill(bits, m);
    uniform_from_bits(bits, out, m, from, range, k);
    out += m;
    n -= m;
  }
}

void torch_normal_(TorchGenerator& g, float* out, std::size_t n, double mean, double std, Isa isa) {
  if (n < 16) {
    // Per element, in double: fma(z, std, mean) as PyTorch's build contracts z * std + mean.
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::fma(g.normal_double(), std, mean));
    return;
  }
  const float mean_f = static_cast<float>(mean), std_f = static_cast<float>(std);
  const Kernels k = kernels_for(isa);
  // PyTorch draws all n uniforms, then transforms whole blocks: block k only reads its own 16 uniforms, so
  // transforming each run of draws as soon as it is drawn gives the same values.
  const std::size_t whole = n / 16 * 16;
  for (std::size_t i = 0; i < whole; i += kChunk) {
    const std::size_t m = std::min(kChunk, whole - i);
    draw_unit_floats(g, out + i, m);
    normal_blocks(out + i, m / 16, mean_f, std_f, k);
  }
  if (whole != n) {
    // The last n % 16 uniforms are drawn (and later overwritten); then 16 fresh ones replace the last 16
    // elements and are transformed as one more block.
    draw_unit_floats(g, out + whole, n - whole);
    draw_unit_floats(g, out + n - 16, 16);
    normal_blocks(out + n - 16, 1, mean_f, std_f, k);
  }
}

std::vector<float> torch_randn(TorchGenerator& g, std::size_t n, Isa isa) {
  std::vector<float> out(n);
  torch_normal_(g, out.data(), n, 0.0, 1.0, isa);
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

float fma_exact(float a, float b, float c) {
  return fma_f32(a, b, c);
}

namespace rng_kernels {

void uniform_from_bits(const std::uint32_t* bits, float* out, std::size_t n, float from, float range,
                       Isa isa) {
  attnviz::uniform_from_bits(bits, out, n, from, range, kernels_for(isa));
}

void normal_blocks(float* data, std::size_t blocks, float mean, float std, Isa isa) {
  attnviz::normal_blocks(data, blocks, mean, std, kernels_for(isa));
}

void fma(const float* a, const float* b, const float* c, float* out, std::size_t n, Isa isa) {
  switch (kernels_for(isa)) {
#if defined(ATTNVIZ_RNG_AVX2)
    case Kernels::avx2:
      return simd::fma_avx2(a, b, c, out, n);
#elif defined(ATTNVIZ_RNG_SIMD128)
    case Kernels::simd128:
      return simd::fma_simd128(a, b, c, out, n);
#endif
    default:
      for (std::size_t i = 0; i < n; ++i) out[i] = fma_f32(a[i], b[i], c[i]);
  }
}

void log_cephes(const float* u, float* out, std::size_t n, Isa isa) {
  switch (kernels_for(isa)) {
#if defined(ATTNVIZ_RNG_AVX2)
    case Kernels::avx2:
      return simd::log_avx2(u, out, n);
#elif defined(ATTNVIZ_RNG_SIMD128)
    case Kernels::simd128:
      return simd::log_simd128(u, out, n);
#endif
    default:
      for (std::size_t i = 0; i < n; ++i) out[i] = attnviz::log_cephes(u[i]);
  }
}

void sincos_cephes(const float* theta, float* sin_out, float* cos_out, std::size_t n, Isa isa) {
  switch (kernels_for(isa)) {
#if defined(ATTNVIZ_RNG_AVX2)
    case Kernels::avx2:
      return simd::sincos_avx2(theta, sin_out, cos_out, n);
#elif defined(ATTNVIZ_RNG_SIMD128)
    case Kernels::simd128:
      return simd::sincos_simd128(theta, sin_out, cos_out, n);
#endif
    default:
      for (std::size_t i = 0; i < n; ++i) attnviz::sincos_cephes(theta[i], sin_out[i], cos_out[i]);
  }
}

}  // namespace rng_kernels
}  // namespace attnviz
