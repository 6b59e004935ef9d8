// A checkpoint's run state refused (parse_run_state): shared by the book's and the induction run's tests.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "attnviz/io/checkpoint.hpp"

namespace attnviz::test {

// `good` with `key` set to `value` ("(none)": left out) must be refused with exactly `error`, in one line,
// and give no run state.
inline void check_run_state_refused(const std::map<std::string, std::string>& good, const std::string& key,
                                    const std::string& value, const std::string& error) {
  std::map<std::string, std::string> m = good;
  if (value == "(none)")
    m.erase(key);
  else
    m[key] = value;
  std::optional<RunState> out = RunState{};
  const Status st = parse_run_state(m, out);
  INFO(key << " = " << value);
  CHECK(st.error == error);
  CHECK_FALSE(out.has_value());
  CHECK(st.error.find('\n') == std::string::npos);
}

}  // namespace attnviz::test
