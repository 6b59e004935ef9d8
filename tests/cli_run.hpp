// attnviz-cli run in-process for the CLI tests: its exit status and what it printed.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
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

// The "eval" events of `attnviz-cli train --json`'s output, each without its wall-clock "seconds" (a
// "checkpoint: " line, which is not JSON, is passed over).
inline std::vector<nlohmann::json> eval_events(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("checkpoint: ", 0) == 0) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["event"] != "eval") continue;
    j.erase("seconds");
    v.push_back(j);
  }
  return v;
}

}  // namespace attnviz::test
