// The JSON writer's numbers where there is no floating-point to_chars (the page): format_float_g must give
// exactly the text of the snprintf-and-strtof loop it replaced, and that text must read back as the float.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "attnviz/io/json_writer.hpp"

using namespace attnviz;

namespace {

// The old writer: the fewest of 6 to 9 "%g" digits that strtof reads back as x.
std::string reference(float x) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
    if (std::strtof(buf, nullptr) == x) break;
  }
  return buf;
}

std::string fast(float x) {
  char buf[32];
  const int n = format_float_g(x, buf);
  REQUIRE(n == static_cast<int>(std::strlen(buf)));
  return buf;
}

float from_bits(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace

TEST_CASE("format_float_g writes what snprintf wrote, for every kind of float") {
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            0.5f,
                            0.1f,
                            1.171875f,  // a tie at 6 digits: half to even, as printf
                            1e-5f,
                            1e-4f,
                            9.9999994e-5f,
                            123456.0f,
                            999999.5f,
                            1e6f,
                            16777216.0f,
                            1e10f,
                            3.4028235e38f,
                            1.17549435e-38f,  // the smallest normal
                            1.4e-45f,         // the smallest subnormal
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (float x : specials) {
    INFO("x = " << x);
    CHECK(fast(x) == reference(x));
  }
  // Every power of ten and its neighbours (log10 is least sure there).
  for (int k = -45; k <= 38; ++k) {
    const float p = std::strtof(("1e" + std::to_string(k)).c_str(), nullptr);
    for (float x : {p, std::nextafter(p, 0.0f), std::nextafter(p, HUGE_VALF)}) {
      INFO("x = " << x);
      CHECK(fast(x) == reference(x));
    }
  }
}

TEST_CASE("format_float_g agrees with snprintf on a million random floats, and they read back") {
  std::mt19937 rng(12345);
  long mismatches = 0;
  for (int i = 0; i < 1000000; ++i) {
    // Half uniform bit patterns (every exponent), half attention-like values in [0, 1).
    const float x =
        i % 2 ? from_bits(static_cast<std::uint32_t>(rng())) : static_cast<float>(rng()) * 0x1p-32f;
    if (std::isnan(x)) continue;
    const std::string got = fast(x);
    if (got != reference(x) || std::strtof(got.c_str(), nullptr) != x) {
      if (++mismatches <= 5) MESSAGE("x = " << x << ": " << got << " vs " << reference(x));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("JsonWriter never writes a bare inf or nan: a number JSON cannot hold is null") {
  JsonWriter w;
  w.out += '[';
  for (float x : {1.5f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), -0.0f}) {
    if (w.out.size() > 1) w.out += ',';
    w.number(x);
  }
  w.out += ']';
  CHECK(w.out == "[1.5,null,null,null,-0]");
}
