// The fuzzers' inputs as lists of strings: the bytes split at NUL bytes (n NULs give n + 1 parts).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz::fuzz {

inline std::vector<std::string> split_at_nul(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (std::size_t start = 0; start <= input.size();) {
    const std::size_t nul = std::min(input.find('\0', start), input.size());
    parts.emplace_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  return parts;
}

}  // namespace attnviz::fuzz
