// Writing the JSON formats of attnviz (the CLI's --json for layers and for whole models) by hand, into one
// string: numbers in their shortest float32 form, fast enough for hundreds of megabytes. Engine-io-internal.
#pragma once

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "attnviz/tensor.hpp"

namespace attnviz {

class JsonWriter {
 public:
  std::string out;

  // The shortest decimal that reads back as the same float32.
  void number(float x) {
    char buf[32];
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    const auto res = std::to_chars(buf, buf + sizeof buf, x);
    out.append(buf, res.ptr);
#else  // Emscripten 3.1.6's libc++ has no floating-point to_chars
    for (int digits = 6; digits <= 9; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
      if (std::strtof(buf, nullptr) == x) break;
    }
    out += buf;
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
