// PyTorch's generator and distributions, checked against values PyTorch 1.13 prints.
#include <doctest/doctest.h>

#include <random>

#include "attnviz/torch_rng.hpp"
#include "check.hpp"

using namespace attnviz;

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
