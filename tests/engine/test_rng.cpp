// PyTorch's generator and distributions, checked against values PyTorch 1.13 prints.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>

#include "attnviz/torch_rng.hpp"
#include "check.hpp"

using namespace attnviz;
using attnviz::test::bits_of;

namespace {

// One case of tests/fixtures/rng/torch_rng.txt (format in tests/torch/make_rng_fixture.py): calls made in
// order on one generator after torch.manual_seed(seed), their outputs concatenated.
struct RngCall {
  char kind = 'n';  // 'n': normal_(a, b); 'u': uniform_(a, b)
  std::size_t n = 0;
  double a = 0, b = 0;
};
struct RngCase {
  std::string name;
  std::uint64_t seed = 0, hash = 0;
  std::vector<RngCall> calls;
  std::vector<std::pair<std::size_t, std::uint32_t>> samples;  // (index, float bits)
};

std::vector<RngCase> load_rng_fixture() {
  std::ifstream in(std::string(ATTNVIZ_FIXTURES_DIR) + "/rng/torch_rng.txt");
  REQUIRE(in.good());
  std::vector<RngCase> cases;
  RngCase c;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "case") {
      c = RngCase{};
      c.name = line.substr(5);
    } else if (word == "seed") {
      ls >> c.seed;
    } else if (word == "hash") {
      ls >> std::hex >> c.hash;
    } else if (word == "call") {
      RngCall call;
      std::string a, b;
      ls >> call.kind >> call.n >> a >> b;
      call.a = std::strtod(a.c_str(), nullptr);
      call.b = std::strtod(b.c_str(), nullptr);
      c.calls.push_back(call);
    } else if (word == "end") {
      cases.push_back(c);
    } else {
      std::uint32_t value = 0;
      ls >> std::hex >> value;
      c.samples.emplace_back(static_cast<std::size_t>(std::stoull(word)), value);
    }
    REQUIRE_FALSE(ls.fail());
  }
  return cases;
}

// sum of bits(x[i]) * (2 i + 1) mod 2^64: order-sensitive and covers every value.
std::uint64_t weighted_bit_sum(const std::vector<float>& x) {
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < x.size(); ++i) h += bits_of(x[i]) * (2 * static_cast<std::uint64_t>(i) + 1);
  return h;
}

std::vector<float> run_case(const RngCase& c, Isa isa) {
  std::size_t total = 0;
  for (const RngCall& call : c.calls) total += call.n;
  std::vector<float> out(total);
  TorchGenerator g(c.seed);
  float* p = out.data();
  for (const RngCall& call : c.calls) {
    if (call.kind == 'n')
      torch_normal_(g, p, call.n, call.a, call.b, isa);
    else
      torch_uniform_(g, p, call.n, static_cast<float>(call.a), static_cast<float>(call.b), isa);
    p += call.n;
  }
  return out;
}

}  // namespace

TEST_CASE("torch.manual_seed is mt19937 on the low 32 bits") {
  TorchGenerator g(0);
  CHECK(g.random() == 2357136044u);  // std::mt19937(0)'s first output
  TorchGenerator wide((1ull << 32) + 5), narrow(5);
  CHECK(wide.random() == narrow.random());
}

TEST_CASE("torch.rand after torch.manual_seed(123)") {
  TorchGenerator g(123);
  const std::vector<float> r = torch_rand(g, 6);
  test::check_printed(r.data(), {0.2961, 0.5166, 0.2517, 0.6886, 0.0740, 0.8665}, 4, "torch.rand(3, 2)");
  for (float x : torch_rand(g, 1000)) CHECK((x >= 0.0f && x < 1.0f));
}

TEST_CASE("torch.randn: both code paths stay standard normal and keep PyTorch's block structure") {
  // n >= 16 and n % 16 != 0 redraws the tail; n < 16 uses double Box-Muller with a cached sine half.
  TorchGenerator g(0);
  const std::vector<float> a = torch_randn(g, 36);
  CHECK(a[0] == doctest::Approx(-1.1258).epsilon(1e-4));  // torch.manual_seed(0); torch.randn(6, 6)[0, 0]
  CHECK(a[1] == doctest::Approx(-1.1524).epsilon(1e-4));
  CHECK(a[35] == doctest::Approx(-0.0047857).epsilon(1e-3));  // the redrawn tail block
  TorchGenerator s(0);
  const std::vector<float> b = torch_randn(s, 4);
  CHECK(b[0] == doctest::Approx(1.5410).epsilon(1e-4));  // torch.manual_seed(0); torch.randn(4)
  CHECK(b[1] == doctest::Approx(-0.2934).epsilon(1e-4));
  CHECK(b[2] == doctest::Approx(-2.1788).epsilon(1e-4));
  CHECK(b[3] == doctest::Approx(0.5684).epsilon(1e-4));
}

TEST_CASE("nn.Dropout(0.5)(torch.ones(6, 6)) after torch.manual_seed(123), cpu flavour (the book)") {
  TorchGenerator g(123);
  const std::vector<std::uint8_t> keep = torch_dropout_mask(g, 36, 0.5, DropoutRng::cpu);
  const std::vector<std::uint8_t> row0{1, 1, 0, 1, 1, 0}, row1{0, 0, 0, 1, 0, 1};
  CHECK(std::vector<std::uint8_t>(keep.begin(), keep.begin() + 6) == row0);
  CHECK(std::vector<std::uint8_t>(keep.begin() + 6, keep.begin() + 12) == row1);
  CHECK(dropout_scale(0.5) == 2.0f);
}

TEST_CASE("dropout keeps about 1 - p of the cells in both flavours") {
  for (DropoutRng flavour : {DropoutRng::cpu, DropoutRng::mkl}) {
    for (double p : {0.1, 0.5, 0.9}) {
      TorchGenerator g(7);
      const std::vector<std::uint8_t> keep = torch_dropout_mask(g, 100000, p, flavour);
      double kept = 0;
      for (auto k : keep) kept += k;
      CHECK(kept / 100000.0 == doctest::Approx(1.0 - p).epsilon(0.02));
    }
  }
}

TEST_CASE("mkl dropout draws one 32-bit seed, then an MCG31m1 stream") {
  TorchGenerator g(42), probe(42);
  const std::uint32_t seed = probe.random();
  const std::vector<std::uint8_t> keep = torch_dropout_mask(g, 3, 0.5, DropoutRng::mkl);
  CHECK(g.random() == probe.random());  // exactly one draw consumed
  std::uint64_t x = seed % 2147483647u;
  if (x == 0) x = 1;
  for (int i = 0; i < 3; ++i) {
    CHECK(keep[static_cast<std::size_t>(i)] == (static_cast<double>(x) / 2147483647.0 < 0.5 ? 1 : 0));
    x = x * 1132489760u % 2147483647u;
  }
}

TEST_CASE("nn.Linear init bounds: weights in +-1/sqrt(fan_in), bias drawn after weights") {
  TorchGenerator g(789);
  const Linear l = torch_linear(g, 3, 2, true);
  test::check_printed(l.weight.ptr(), {0.3161, 0.4568, 0.5118, -0.1683, -0.3379, -0.0918}, 4, "Linear(3, 2)");
  const float bound = 1.0f / std::sqrt(3.0f);
  for (float w : l.weight.data) CHECK(std::fabs(w) <= bound);
  for (float b : l.bias.data) CHECK(std::fabs(b) <= bound);
  REQUIRE(l.bias.size() == 2);
}

TEST_CASE(
    "torch.randn, normal_ and uniform_ match PyTorch bit for bit (tests/fixtures/rng, every kernel set)") {
  const std::vector<RngCase> cases = load_rng_fixture();
  std::size_t values = 0;
  for (const RngCase& c : cases)
    for (const RngCall& call : c.calls) values += call.n;
  REQUIRE(cases.size() >= 10);  // a truncated fixture must not pass quietly
  REQUIRE(values > 50000000);
  std::vector<Isa> isas{Isa::scalar};
  if (resolve(Isa::automatic) != Isa::scalar) isas.push_back(Isa::automatic);
#ifndef ATTNVIZ_SAMPLED_SWEEPS
  constexpr std::size_t kLargest = SIZE_MAX;
#else
  // Sanitized and qemu builds run every code path on the cases up to 2M values: the 38.6M-
  // and 12.3M-value cases take minutes there and add no path the smaller ones lack.
  constexpr std::size_t kLargest = 2000000;
#endif
  for (Isa isa : isas) {
    for (const RngCase& c : cases) {
      std::size_t n = 0;
      for (const RngCall& call : c.calls) n += call.n;
      if (n > kLargest) {
        MESSAGE("unoptimized build: skipped " << c.name << " (" << n << " values)");
        continue;
      }
      INFO(to_string(isa) << ": " << c.name << " (seed " << c.seed << ")");
      const std::vector<float> x = run_case(c, isa);
      CHECK(weighted_bit_sum(x) == c.hash);
      REQUIRE_FALSE(c.samples.empty());
      for (const auto& sample : c.samples) {
        const std::size_t index = sample.first;
        INFO("element " << index);
        REQUIRE(index < x.size());
        CHECK(bits_of(x[index]) == sample.second);
      }
    }
  }
}

TEST_CASE("torch_normal_: the vector and scalar Box-Muller kernels agree on every size and scale") {
  // Sizes around the block of 16 and the draw runs of 4096, with the n < 16 path in between (it caches).
  const std::vector<std::size_t> sizes{1, 15, 16, 17, 31, 32, 33, 4095, 4096, 4097, 4111, 8192 + 15, 20000};
  for (const auto& scale : std::vector<std::pair<double, double>>{{0, 1}, {0.25, 0.02}, {-3, 7.5}}) {
    const double mean = scale.first, stdev = scale.second;
    TorchGenerator a(77), b(77);
    for (std::size_t n : sizes) {
      INFO("n = " << n << ", mean " << mean << ", std " << stdev);
      std::vector<float> x(n), y(n);
      torch_normal_(a, x.data(), n, mean, stdev, Isa::automatic);
      torch_normal_(b, y.data(), n, mean, stdev, Isa::scalar);
      CHECK(std::memcmp(x.data(), y.data(), n * sizeof(float)) == 0);
    }
    CHECK(a.random() == b.random());  // the same number of draws
  }
}

TEST_CASE("torch_normal_ and torch_randn: n >= 16 draws n uniforms, plus 16 when n % 16 != 0") {
  for (std::size_t n : {16u, 17u, 31u, 32u, 100u}) {
    TorchGenerator g(5), probe(5);
    (void)torch_randn(g, n);
    const std::size_t draws = n + (n % 16 != 0 ? 16 : 0);
    for (std::size_t i = 0; i < draws; ++i) (void)probe.random();
    CHECK(g.random() == probe.random());
  }
  // torch_randn is normal_(0, 1).
  TorchGenerator a(9), b(9);
  const std::vector<float> r = torch_randn(a, 100);
  std::vector<float> z(100);
  torch_normal_(b, z.data(), z.size(), 0.0, 1.0);
  CHECK(std::memcmp(r.data(), z.data(), z.size() * sizeof(float)) == 0);
}

TEST_CASE("torch_rng: Mt19937 bulk fill is the std::mt19937 stream across state regenerations") {
  Mt19937 mt(2024);
  std::mt19937 ref(2024);
  std::vector<std::uint32_t> buf;
  for (std::size_t n : {0u, 1u, 5u, 623u, 624u, 625u, 1u, 1248u, 10000u, 3u}) {
    buf.assign(n, 0);
    mt.fill(buf.data(), n);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(buf[i] == ref());
    CHECK(mt() == ref());  // single draws interleave with bulk ones
  }
}

TEST_CASE("torch_rng: fma_exact is fmaf, including sums that double rounding would get wrong") {
  // a * b = 2^-24 - 2^-70 and c = 1 + 2^-23: the double sum rounds to the float midpoint 1 + 3 * 2^-24, where
  // a second rounding would go to even (1 + 2^-22); the exact value lies below it, so fmaf gives 1 + 2^-23.
  const float a = 1.0f + 0x1p-23f, b = (1.0f - 0x1p-23f) * 0x1p-24f, c = 1.0f + 0x1p-23f;
  CHECK(static_cast<float>(static_cast<double>(a) * b + c) == 1.0f + 0x1p-22f);  // naive: wrong
  CHECK(std::fma(a, b, c) == 1.0f + 0x1p-23f);
  CHECK(fma_exact(a, b, c) == 1.0f + 0x1p-23f);
  CHECK(fma_exact(-a, b, -c) == -(1.0f + 0x1p-23f));
  // The other side: a * b = 2^-24 + 2^-70 over c = 1 (exact value above the midpoint 1 + 2^-24).
  const float b2 = (1.0f + 0x1p-23f) * 0x1p-24f, a2 = 1.0f + 0x1p-23f;  // a2 * b2 = 2^-24 + 2^-46 + 2^-70
  CHECK(fma_exact(a2, b2, 1.0f) == std::fma(a2, b2, 1.0f));
  // The same trap below the normal range, where floats round at another bit: a * b = 2^-150 - 2^-196 over the
  // subnormal c = 2^-127 + 2^-149 (odd): the double sum is the midpoint c + 2^-150, the exact value is below
  // it.
  const float ta = std::ldexp(1.0f + 0x1p-23f, -75), tb = std::ldexp(1.0f - 0x1p-23f, -75);
  const float tc = 0x1p-127f + 0x1p-149f;
  CHECK(static_cast<float>(static_cast<double>(ta) * tb + tc) != tc);  // naive: wrong
#if !defined(__EMSCRIPTEN__)  // Emscripten's fmaf double-rounds here: fma_exact must not rely on it
  CHECK(std::fma(ta, tb, tc) == tc);
#endif
  CHECK(fma_exact(ta, tb, tc) == tc);
  // At the overflow threshold: FLT_MAX + 2^103 - 2^57 lies below FLT_MAX + ulp / 2, and the double sum on
  // it (Emscripten's fmaf rounds this one to infinity).
  const float big = (1.0f - 0x1p-23f) * 0x1p103f;
  CHECK(fma_exact(a, big, FLT_MAX) == FLT_MAX);
  CHECK(fma_exact(-a, big, -FLT_MAX) == -FLT_MAX);
  CHECK(fma_exact(a, -big, FLT_MAX) == FLT_MAX);  // just above FLT_MAX - ulp / 2 (a tie would go down)
  CHECK(fma_exact(1.0f, 0x1p103f, FLT_MAX) == INFINITY);  // exactly on it: a tie, to even
  CHECK(fma_exact(1.0f, 0x1p-24f, 1.0f) == 1.0f);         // an exact tie rounds to even
  CHECK(fma_exact(1.0f, 0x1p-24f, 1.0f + 0x1p-23f) == 1.0f + 0x1p-22f);
  // Random operands, and operands built to put the double sum on a float midpoint.
  std::mt19937 r(1);
  auto rnd = [&r](float lo_exp, float hi_exp) {
    const float m = 1.0f + static_cast<float>(r() & 0x7FFFFFu) * 0x1p-23f;
    const float e = lo_exp + static_cast<float>(r() % static_cast<std::uint32_t>(hi_exp - lo_exp + 1));
    return ((r() & 1u) ? -m : m) * std::ldexp(1.0f, static_cast<int>(e));
  };
  int midpoints = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = rnd(-30, 30), y = rnd(-30, 30), z = rnd(-60, 60);
    REQUIRE(bits_of(fma_exact(x, y, z)) == bits_of(std::fma(x, y, z)));
    const float tx = rnd(-75, -55), ty = rnd(-75, -55), tz = rnd(-150, -120);  // float-subnormal results
    REQUIRE(bits_of(fma_exact(tx, ty, tz)) == bits_of(std::fma(tx, ty, tz)));
    // z' = the float midpoint next to x * y, nudged: x * y + z' then sits at (or next to) a float midpoint.
    const float p = x * y;
    const float w = std::nextafter(p, 2 * p) - p;
    const float zz = -p + w * 0.5f * static_cast<float>(static_cast<int>(r() % 3) - 1);
    REQUIRE(bits_of(fma_exact(x, y, zz)) == bits_of(std::fma(x, y, zz)));
    const double s = static_cast<double>(x) * y + zz;
    std::uint64_t sb;
    std::memcpy(&sb, &s, sizeof sb);
    midpoints += (sb & 0x1FFFFFFFu) == 0x10000000u;
  }
  MESSAGE("double sums on a float midpoint: " << midpoints);
}
