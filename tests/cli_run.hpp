// attnviz-cli run in-process for the CLI tests: its exit status and what it printed.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace attnviz::test {

struct Run {
  int status;
  std::string out, err;
};

inline Run cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = run_cli(args, out, err);
  return {status, out.str(), err.str()};
}

// One line on stderr that holds `needle`, a failing status, nothing on stdout.
inline void check_refused(const std::vector<std::string>& args, const std::string& needle) {
  const Run r = cli(args);
  CAPTURE(r.err);
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("attnviz-cli: ", 0) == 0);
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace attnviz::test
