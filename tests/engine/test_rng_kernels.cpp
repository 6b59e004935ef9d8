// The random-number kernels on inputs a generator never draws, and on every input it can draw: the vector
// kernels of this build (AVX2 + FMA natively, SIMD128 in WebAssembly) must give the scalar kernels' bits,
// including where the scalar fmaf needs its rare corrections (double sums on a float rounding midpoint,
// sums below the smallest normal float). The inputs that need a correction are built on purpose, and
// counted, so that these tests fail if they stop reaching them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnviz/torch_rng.hpp"
#include "check.hpp"
#include "src/rng_kernels.hpp"

using namespace attnviz;
using attnviz::test::bits_of;

namespace {

// The ISA whose vector kernels are compared with the scalar ones (on a processor without AVX2 these are the
// scalar kernels themselves: then only the comparison with std::fma tests anything).
Isa vector_isa() {
  const Isa isa = resolve(Isa::automatic);
  MESSAGE("vector kernels: " << std::string(to_string(isa)));
  return isa;
}

std::size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (bits_of(a[i]) != bits_of(b[i])) return i;
  return a.size();
}

// fmaf(a, b, c) with one double rounding on the way: what the kernels would give without the corrections.
float fma_rounded_twice(float a, float b, float c) {
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b) + static_cast<double>(c));
}

// A float with a random 24-bit significand, the given sign and exponent (normal range).
float random_float(std::mt19937& r, int exponent, bool negative) {
  const float m = 1.0f + static_cast<float>(r() & 0x7FFFFFu) * 0x1p-23f;
  return std::ldexp(negative ? -m : m, exponent);
}

// Operands (a, b, c) for fmaf, of kinds that need every branch of the scalar fma_f32.
struct FmaCases {
  std::vector<float> a, b, c;
  void add(float x, float y, float z) {
    a.push_back(x);
    b.push_back(y);
    c.push_back(z);
  }
};

FmaCases fma_cases() {
  FmaCases k;
  std::mt19937 r(7);
  auto coin = [&r] { return (r() & 1u) != 0; };
  auto exponent = [&r](int lo, int hi) {
    return lo + static_cast<int>(r() % static_cast<std::uint32_t>(hi - lo + 1));
  };
  for (int i = 0; i < 20000; ++i) {
    // Random operands, normal and float-subnormal results.
    k.add(random_float(r, exponent(-30, 30), coin()), random_float(r, exponent(-30, 30), coin()),
          random_float(r, exponent(-60, 60), coin()));
    k.add(random_float(r, exponent(-75, -55), coin()), random_float(r, exponent(-75, -55), coin()),
          random_float(r, exponent(-126, -120), coin()) * 0x1p-20f);
    // a * b = (1 + 2^-23)(1 - 2^-23) 2^e = ulp(c) / 2 - ulp(c) 2^-47: the double sum is the float midpoint
    // next to c, the exact sum is just inside it (towards c or away, by the sign of b).
    const int e = exponent(-100, 100);
    const float c = random_float(r, e, coin());
    const int ea = exponent(-20, 20);
    k.add((1.0f + 0x1p-23f) * std::ldexp(1.0f, ea),
          std::ldexp(coin() ? -(1.0f - 0x1p-23f) : 1.0f - 0x1p-23f, e - 24 - ea), c);
    // The same below the normal range: a * b = 2^-150 (1 - 2^-46) over a subnormal c (odd or even).
    const float ta = (1.0f + 0x1p-23f) * 0x1p-75f,
                tb = (coin() ? -1.0f : 1.0f) * (1.0f - 0x1p-23f) * 0x1p-75f;
    const float tc = static_cast<float>(static_cast<int>(r() % 0x7FFFFFu) + 1) * 0x1p-149f;
    k.add(ta, tb, coin() ? -tc : tc);
    // Exact ties (a * b is exactly half an ulp of c), which round to even and need no correction.
    k.add(1.0f, (coin() ? -1.0f : 1.0f) * std::ldexp(1.0f, e - 24), c);
    k.add(0x1p-75f, (coin() ? -1.0f : 1.0f) * 0x1p-75f, coin() ? -tc : tc);
  }
  // Near the float overflow threshold, on both sides; signed zeros; cancellation to zero.
  for (float s : {1.0f, -1.0f}) {
    k.add(s * (1.0f + 0x1p-23f), (1.0f - 0x1p-23f) * 0x1p103f, s * FLT_MAX);
    k.add(s * (1.0f + 0x1p-23f), -(1.0f - 0x1p-23f) * 0x1p103f, s * FLT_MAX);
    k.add(s * 0x1p100f, 0x1p100f, -FLT_MAX);
    k.add(s * 0x1p127f, 2.0f, 0.0f);
    k.add(s * 0.0f, 1.0f, -0.0f);
    k.add(s * 0.0f, -1.0f, 0.0f);
    k.add(s * 3.0f, 5.0f, s * -15.0f);
  }
  return k;
}

}  // namespace

TEST_CASE(
    "rng kernels: the vector fmaf gives the scalar fma_f32's bits, midpoints and subnormal sums included") {
  const Isa isa = vector_isa();
  const FmaCases k = fma_cases();
  const std::size_t n = k.a.size();
  std::vector<float> scalar(n), vec(n);
  rng_kernels::fma(k.a.data(), k.b.data(), k.c.data(), scalar.data(), n, Isa::scalar);
  rng_kernels::fma(k.a.data(), k.b.data(), k.c.data(), vec.data(), n, isa);
  const std::size_t at = first_difference(scalar, vec);
  if (at < n) FAIL_CHECK("fmaf(" << k.a[at] << ", " << k.b[at] << ", " << k.c[at] << ") differs");
  // The cases reach the corrections: rounding the double sum once more would be wrong on these.
  int corrected = 0, corrected_subnormal = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (bits_of(fma_rounded_twice(k.a[i], k.b[i], k.c[i])) == bits_of(scalar[i])) continue;
    ++corrected;
    corrected_subnormal += std::fabs(scalar[i]) < FLT_MIN;
  }
  MESSAGE("operands needing the midpoint correction: " << corrected << ", " << corrected_subnormal
                                                       << " of them subnormal");
  CHECK(corrected > 15000);
  CHECK(corrected_subnormal > 8000);
  // std::fma is the FMA instruction or glibc's exact fmaf natively (Emscripten's is not exact).
#if !defined(__EMSCRIPTEN__)
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(bits_of(scalar[i]) == bits_of(std::fma(k.a[i], k.b[i], k.c[i])));
#endif
}

TEST_CASE("rng kernels: uniform_ of every possible draw, and of draws built to land on float midpoints") {
  const Isa isa = vector_isa();
  // Every 24-bit value (with the 8 bits uniform_ ignores set at random), in an order that is not sorted,
  // and a length that leaves a tail after every vector width.
  std::vector<std::uint32_t> bits((1u << 24) + 37);
  std::mt19937 r(11);
  for (std::size_t i = 0; i < bits.size(); ++i)
    bits[i] = (static_cast<std::uint32_t>(i * 2654435761u) & 0xFFFFFFu) | (r() & 0xFF000000u);
  std::vector<float> scalar(bits.size()), vec(bits.size());
  const float kaiming = 1.0f / std::sqrt(768.0f), tiny = 0x1p-140f;
  const std::vector<std::pair<float, float>> ranges{
      {-kaiming, 2 * kaiming}, {-0.5f / 32, 1.0f / 32}, {0.0f, 1.0f},         {-3.0f, 10.0f},
      {-tiny, 3 * tiny},       {0x1p-130f, 0x1p-135f},  {-0x1p100f, 0x1p101f}};
  for (const auto& fr : ranges) {
    INFO("from " << fr.first << ", range " << fr.second);
    rng_kernels::uniform_from_bits(bits.data(), scalar.data(), bits.size(), fr.first, fr.second, Isa::scalar);
    rng_kernels::uniform_from_bits(bits.data(), vec.data(), bits.size(), fr.first, fr.second, isa);
    CHECK(first_difference(scalar, vec) == bits.size());
  }
  // x = 0.5 + 2^-24 (draw 2^23 + 1) times range = (1 - 2^-23) 2^e lands half an ulp of `from` minus a
  // little away from it: the double sum is a float midpoint, the exact sum is not.
  const std::vector<std::uint32_t> midpoint_draw(67, (1u << 23) + 1u);
  std::vector<float> s(midpoint_draw.size()), v(midpoint_draw.size());
  int corrected = 0;
  for (int i = 0; i < 3000; ++i) {
    const int e = -60 + static_cast<int>(r() % 120u);
    const float range = std::ldexp((r() & 1u) ? -(1.0f - 0x1p-23f) : 1.0f - 0x1p-23f, e - 23);
    const float from = random_float(r, e, (r() & 1u) != 0);
    rng_kernels::uniform_from_bits(midpoint_draw.data(), s.data(), s.size(), from, range, Isa::scalar);
    rng_kernels::uniform_from_bits(midpoint_draw.data(), v.data(), v.size(), from, range, isa);
    REQUIRE(first_difference(s, v) == s.size());
    corrected += bits_of(s[0]) != bits_of(fma_rounded_twice(0.5f + 0x1p-24f, range, from));
  }
  MESSAGE("draws needing the midpoint correction: " << corrected << " of 3000");
  CHECK(corrected > 1000);
}

TEST_CASE("rng kernels: log of every u the normal transform can see, and below the normal range") {
  const Isa isa = vector_isa();
  // u1 = 1 - d for a float d in [0, 1) is always k 2^-24, k = 1 .. 2^24: all of them, then subnormals and
  // small normals (which the log clamps to 2^-126).
  std::vector<float> u;
  for (std::uint32_t k = 1; k <= (1u << 24); ++k) u.push_back(static_cast<float>(k) * 0x1p-24f);
  for (float x : {0x1p-149f, 0x1p-140f, 0x1.fffffcp-127f, FLT_MIN, 0x1.000002p-126f, 0x1p-100f, 0x1p-30f})
    u.push_back(x);
  std::vector<float> scalar(u.size()), vec(u.size());
  rng_kernels::log_cephes(u.data(), scalar.data(), u.size(), Isa::scalar);
  rng_kernels::log_cephes(u.data(), vec.data(), u.size(), isa);
  const std::size_t at = first_difference(scalar, vec);
  INFO("u = " << (at < u.size() ? u[at] : 0.0f));
  CHECK(at == u.size());
}

TEST_CASE(
    "rng kernels: sine and cosine of float(2 pi) d, 0 <= d < 1 (every float with "
    "ATTNVIZ_RNG_EXHAUSTIVE=1)") {
  const Isa isa = vector_isa();
  // The SIMD128 kernel leaves most of these sums unchecked because trying every float d in [0, 1) showed
  // that none needs the correction there; the exhaustive run (10^9 values) repeats that trial.
  const char* every = std::getenv("ATTNVIZ_RNG_EXHAUSTIVE");
#ifndef ATTNVIZ_SAMPLED_SWEEPS
  const std::uint32_t stride = every && *every == '1' ? 1 : 97;
#else
  const std::uint32_t stride = every && *every == '1' ? 1 : 9973;
#endif
  // The three theta where a sum needs the correction (c z - z / 2 at the first, s x + x at the others,
  // which change the outputs), then float(2 pi) d for every stride-th float d in [0, 1).
  std::vector<float> theta{0x1.5e8ae6p-8f, 0x1.800006p-10f, 0x1.20001cp-7f};
  constexpr std::uint32_t kOne = 0x3f800000u, kRun = 1u << 20;
  std::vector<float> s_scalar, c_scalar, s_vec, c_vec;
  std::size_t values = 0;
  for (std::uint32_t first = 0; first < kOne; first += kRun) {
    for (std::uint32_t b = first; b < std::min(kOne, first + kRun); b += stride) {
      float d;
      std::memcpy(&d, &b, sizeof d);
      theta.push_back(6.2831854820251465f * d);
    }
    const std::size_t n = theta.size();
    for (auto* v : {&s_scalar, &c_scalar, &s_vec, &c_vec}) v->resize(n);
    rng_kernels::sincos_cephes(theta.data(), s_scalar.data(), c_scalar.data(), n, Isa::scalar);
    rng_kernels::sincos_cephes(theta.data(), s_vec.data(), c_vec.data(), n, isa);
    const std::size_t at = std::min(first_difference(s_scalar, s_vec), first_difference(c_scalar, c_vec));
    INFO("theta = " << (at < n ? theta[at] : 0.0f));
    REQUIRE(at == n);
    values += n;
    theta.clear();
  }
  MESSAGE(values << " values of theta");
}

TEST_CASE(
    "rng kernels: normal_fill_16 of every possible uniform, of subnormals and of values next to 0 and 1") {
  const Isa isa = vector_isa();
  // Every draw k 2^-24 once in the log's place (element j < 8 of a block) and once in the sine's (j + 8).
#ifndef ATTNVIZ_SAMPLED_SWEEPS
  constexpr std::uint32_t kStride = 1;
#else
  constexpr std::uint32_t kStride = 61;  // sanitized and qemu builds: every 61st
#endif
  const std::size_t draws = (1u << 24) / kStride / 8 * 8;
  std::vector<float> uniforms(2 * draws);
  for (std::size_t k = 0; k < draws; ++k) {
    const float u = static_cast<float>(k * kStride) * 0x1p-24f;
    const float v = static_cast<float>((k * kStride * 2654435761u) & 0xFFFFFFu) * 0x1p-24f;
    uniforms[16 * (k / 8) + k % 8] = u;
    uniforms[16 * (k / 8) + 8 + k % 8] = v;
  }
  // Inputs no generator draws: subnormals, powers of two down to 2^-149, floats finer than 2^-24, the
  // largest float below 1 (u1 = 1 - d at its smallest, 2^-24), and the floats d whose outputs change
  // without the midpoint correction (found by trying every float in [0, 1)). Each block holds eight of them
  // in both halves.
  std::vector<float> edges{0.0f,      0x1p-149f, 0x1p-148f, 3 * 0x1p-149f,
                           0x1p-127f, 0x1p-126f, 0x1p-125f, 0x1p-100f};
  for (float d :
       {0x1p-60f, 0x1p-30f, 0x1p-25f, 0x1p-24f, 0.5f - 0x1p-25f, 0.5f, 0.5f + 0x1p-24f, 0.70710677f})
    edges.push_back(d);
  for (float d : {0.75f, 1.0f - 0x1p-24f, 1.0f - 0x1p-23f, 0x1.e8ec9p-13f, 0x1.e8ec92p-13f, 0x1.6eb18ap-10f})
    edges.push_back(d);
  std::mt19937 r(3);
  for (int i = 0; i < 200000; ++i) {
    const float m = 1.0f + static_cast<float>(r() & 0x7FFFFFu) * 0x1p-23f;
    edges.push_back(i % 8 == 0 ? static_cast<float>(r() & 0x7FFFFFu) * 0x1p-149f  // subnormal
                               : std::ldexp(m, -1 - static_cast<int>(r() % 130u)));
  }
  edges.resize(edges.size() / 8 * 8);
  for (std::size_t i = 0; i < edges.size(); i += 8)
    for (int half = 0; half < 2; ++half)
      uniforms.insert(uniforms.end(), edges.begin() + i, edges.begin() + i + 8);
  const std::size_t blocks = uniforms.size() / 16;
  // mean and std as normal_ rounds them to float: with std tiny and mean subnormal every output sum lies
  // below the smallest normal float.
  const std::vector<std::pair<float, float>> scales{
      {0.0f, 1.0f}, {0.25f, 0.02f}, {-3.0f, 7.5f}, {0x1p-128f, 0x1.fedcbap-136f}, {1e30f, 1e35f}};
  for (const auto& ms : scales) {
    INFO("mean " << ms.first << ", std " << ms.second);
    std::vector<float> scalar = uniforms, vec = uniforms;
    rng_kernels::normal_blocks(scalar.data(), blocks, ms.first, ms.second, Isa::scalar);
    rng_kernels::normal_blocks(vec.data(), blocks, ms.first, ms.second, isa);
    const std::size_t at = first_difference(scalar, vec);
    INFO("element " << at << ", block of uniforms from "
                    << (at < uniforms.size() ? uniforms[at / 16 * 16] : 0.0f));
    CHECK(at == uniforms.size());
  }
}

TEST_CASE("rng kernels: normal_fill_16's last fmaf, fma(r cos t, std, mean), on built float midpoints") {
  const Isa isa = vector_isa();
  // For an output v = V 2^(k - 24) (V a 24-bit integer) of mean 0 and std 1, std = S 2^x with V S = 2^47 + e,
  // 0 < |e| < 2^17, makes v * std half an ulp of `mean` plus a tail too small for a double next to `mean`:
  // the double sum is a float midpoint, the exact one is not.
  TorchGenerator g(99);
  std::mt19937 r(5);
  int built = 0, corrected = 0;
  for (int block = 0; block < 20000; ++block) {
    const std::vector<float> u = torch_rand(g, 16);
    std::vector<float> v = u;
    rng_kernels::normal_blocks(v.data(), 1, 0.0f, 1.0f, Isa::scalar);
    for (int j = 0; j < 16; ++j) {
      int k = 0;
      const double significand = std::frexp(std::fabs(static_cast<double>(v[j])), &k);  // in [0.5, 1)
      const std::int64_t V = static_cast<std::int64_t>(std::ldexp(significand, 24));
      const std::int64_t S = std::llround(std::ldexp(1.0, 47) / static_cast<double>(V));
      const std::int64_t e = V * S - (std::int64_t{1} << 47);
      if (v[j] == 0.0f || S >= (1 << 24) || e == 0 || std::llabs(e) >= (1 << 17)) continue;
      const int E = -20 + static_cast<int>(r() % 40u);  // mean's exponent: half its ulp is 2^(E - 24)
      const float mean = random_float(r, E, (r() & 1u) != 0);
      // v * std = V 2^(k - 24) * S 2^x = 2^(E - 24) (1 + e 2^-47)  =>  x = E - 47 - k
      const float stdev = std::ldexp(static_cast<float>((r() & 1u) ? -S : S), E - 47 - k);
      std::vector<float> scalar = u, vec = u;
      rng_kernels::normal_blocks(scalar.data(), 1, mean, stdev, Isa::scalar);
      rng_kernels::normal_blocks(vec.data(), 1, mean, stdev, isa);
      INFO("block " << block << ", element " << j << ", mean " << mean << ", std " << stdev);
      REQUIRE(first_difference(scalar, vec) == scalar.size());
      ++built;
      corrected += bits_of(scalar[j]) != bits_of(fma_rounded_twice(v[j], stdev, mean));
      break;
    }
  }
  MESSAGE("blocks with a built midpoint: " << built << ", needing the correction: " << corrected);
  CHECK(corrected > 2000);
}
