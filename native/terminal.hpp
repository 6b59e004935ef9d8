// Columns of text in a terminal: UTF-8 labels cut and padded by code points (an approximation of display
// width that never splits a character). Shared by attnviz-cli's layer and model views.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

namespace attnviz {

// The first `n` code points of a UTF-8 string (an approximation of display width that never splits a
// character).
inline std::string first_chars(const std::string& s, std::size_t n) {
  std::size_t i = 0, count = 0;
  while (i < s.size() && count < n) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    ++count;
  }
  return i < s.size() ? s.substr(0, i) : s;
}

inline std::size_t chars(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

inline std::string pad(const std::string& s, std::size_t width, bool left) {
  const std::string cut = first_chars(s, width);
  const std::string fill(width - chars(cut), ' ');
  return left ? cut + fill : fill + cut;
}

}  // namespace attnviz
