// Writing the JSON formats of attnviz (the CLI's --json for layers and for whole models) by hand, into one
// string: numbers in their shortest float32 form, fast enough for hundreds of megabytes. Engine-io-internal.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "attnviz/tensor.hpp"

namespace attnviz {

// Writes `x` into buf (at least 32 bytes) as printf's "%.*g" writes it with the fewest of 6, 7, 8 or 9
// significant digits that reads back as the same float32, and returns the length. Where the library has
// no floating-point to_chars (Emscripten 3.1.6), this is JsonWriter's number: the same text as the
// snprintf-and-strtof loop it replaces, much faster: in the page, a gpt2-small result at T = 1024 (38 M
// numbers, 382 MB of JSON) is written in 2.7 s, where that loop took 139 s. The digits come from one double
// product per precision, which holds the float exactly enough: its error (2^-53 relative) is far below the
// half unit of a 9-digit decimal.
inline int format_float_g(float x, char* buf) {
  if (std::isnan(x)) return std::snprintf(buf, 32, std::signbit(x) ? "-nan" : "nan");
  int n = 0;
  if (std::signbit(x)) buf[n++] = '-';
  const double v = std::fabs(static_cast<double>(x));
  if (std::isinf(v)) return n + std::snprintf(buf + n, 32, "inf");
  if (v == 0.0) {
    buf[n++] = '0';
    buf[n] = '\0';
    return n;
  }
  static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  // a * 10^k for any k a float needs (|k| <= 54): exact powers up to 10^22, in steps beyond.
  const auto scale_up = [&](double a, int k) {
    for (; k > 22; k -= 22) a *= kPow10[22];
    for (; k < -22; k += 22) a /= kPow10[22];
    return k >= 0 ? a * kPow10[k] : a / kPow10[-k];
  };
  const int e0 = static_cast<int>(std::floor(std::log10(v)));
  double d = 0.0;
  int p = 6, e = e0;
  for (; p <= 9; ++p) {
    e = e0;
    d = std::nearbyint(scale_up(v, p - 1 - e));
    // log10 may be off by one at powers of ten, and rounding may carry into a new digit.
    if (d >= kPow10[p]) {
      ++e;
      d = std::nearbyint(scale_up(v, p - 1 - e));
    } else if (d < kPow10[p - 1]) {
      --e;
      d = std::nearbyint(scale_up(v, p - 1 - e));
    }
    if (static_cast<float>(scale_up(d, e - p + 1)) == static_cast<float>(v)) break;
  }
  if (p > 9) p = 9;  // nine digits always read back; the loop ends there
  // The p digits of d, most significant first, without trailing zeros.
  char digits[10];
  auto u = static_cast<unsigned long>(d);
  for (int i = p - 1; i >= 0; --i, u /= 10) digits[i] = static_cast<char>('0' + u % 10);
  int len = p;
  while (len > 1 && digits[len - 1] == '0') --len;
  if (e < -4 || e >= p) {  // d.ddde+XX
    buf[n++] = digits[0];
    if (len > 1) {
      buf[n++] = '.';
      for (int i = 1; i < len; ++i) buf[n++] = digits[i];
    }
    return n + std::snprintf(buf + n, 8, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  }
  if (e < 0) {  // 0.000ddd
    buf[n++] = '0';
    buf[n++] = '.';
    for (int i = -1; i > e; --i) buf[n++] = '0';
    for (int i = 0; i < len; ++i) buf[n++] = digits[i];
  } else {  // ddd.ddd
    for (int i = 0; i <= e; ++i) buf[n++] = i < len ? digits[i] : '0';
    if (len > e + 1) {
      buf[n++] = '.';
      for (int i = e + 1; i < len; ++i) buf[n++] = digits[i];
    }
  }
  buf[n] = '\0';
  return n;
}

class JsonWriter {
 public:
  std::string out;

  // The shortest decimal that reads back as the same float32. JSON has no infinity or NaN: the engine refuses
  // a result holding one (check_finite), and were one to reach here it is written as JavaScript's
  // JSON.stringify writes it, null, never as a bare inf or nan that no JSON reader takes.
  void number(float x) {
    if (!std::isfinite(x)) {
      out += "null";
      return;
    }
    char buf[32];
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    const auto res = std::to_chars(buf, buf + sizeof buf, x);
    out.append(buf, res.ptr);
#else  // Emscripten 3.1.6's libc++ has no floating-point to_chars
    out.append(buf, static_cast<std::size_t>(format_float_g(x, buf)));
#endif
  }
  void string(std::string_view s) {
    out += '"';
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += ch;
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += ch;  // UTF-8 passes through (validated on input)
      }
    }
    out += '"';
  }
  void key(std::string_view k) {
    string(k);
    out += ':';
  }
  // A (rows, cols) block of row-major floats starting at p, as nested arrays.
  void matrix(const float* p, int rows, int cols, int stride) {
    out += '[';
    for (int r = 0; r < rows; ++r) {
      if (r) out += ',';
      out += '[';
      for (int c = 0; c < cols; ++c) {
        if (c) out += ',';
        number(p[static_cast<std::size_t>(r) * stride + c]);
      }
      out += ']';
    }
    out += ']';
  }
  void tensor(const Tensor& t) {
    if (t.rank == 1) {
      out += '[';
      for (std::size_t i = 0; i < t.size(); ++i) {
        if (i) out += ',';
        number(t.data[i]);
      }
      out += ']';
    } else {
      matrix(t.ptr(), t.shape[0], t.shape[1], t.shape[1]);
    }
  }
};

}  // namespace attnviz
