// One table of names per enum, read by both its to_string and its parse, so that the name an enum prints is
// always the name it reads back (a value added to the enum and its table gets both at once).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace attnviz {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `v` in `table`; `fallback` for a value the table lacks.
template <class E, std::size_t N>
constexpr const char* name_in(const EnumName<E> (&table)[N], E v, const char* fallback = "?") {
  for (const EnumName<E>& e : table)
    if (e.value == v) return e.name;
  return fallback;
}

// The value `s` names in `table`, if any.
template <class E, std::size_t N>
constexpr std::optional<E> value_in(const EnumName<E> (&table)[N], std::string_view s) {
  for (const EnumName<E>& e : table)
    if (s == e.name) return e.value;
  return std::nullopt;
}

}  // namespace attnviz
