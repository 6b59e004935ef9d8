// Unsigned size arithmetic that stops at UINT64_MAX instead of wrapping: a size too large to count is too
// large to allocate, so memory checks stay right however large the configuration.
#pragma once

#include <cstdint>

namespace attnviz {

inline std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

inline std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

}  // namespace attnviz
