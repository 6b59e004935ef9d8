#include "link.hpp"

#include "budget.hpp"
#include "config_args.hpp"

namespace attnviz::web {
namespace {

enum class Kind { flag, text, cell, value };

// The settings a link may name: every flag the desktop app takes for its state (the same CLI11 options
// apply_state_args parses, whose validators check the numbers), and the form of its value.
const std::vector<std::pair<std::string, Kind>>& settings() {
  static const std::vector<std::pair<std::string, Kind>> all = [] {
    CLI::App cli;
    ConfigArgs a;
    ViewArgs v;
    add_config_options(cli, a);
    add_view_options(cli, v);
    std::vector<std::pair<std::string, Kind>> out;
    for (const CLI::Option* o : cli.get_options()) {
      for (const std::string& name : o->get_lnames()) {
        if (name == "help") continue;  // CLI11's own: a link has no help to print
        const Kind k = o->get_expected_min() == 0                                    ? Kind::flag
                       : name == "text" || name == "compare-text" || name == "patch" ? Kind::text
                       : name == "lock"                                              ? Kind::cell
                                                                                     : Kind::value;
        out.emplace_back(name, k);
      }
    }
    return out;
  }();
  return all;
}

const Kind* kind_of(const std::string& name) {
  for (const auto& [n, k] : settings())
    if (n == name) return &k;
  return nullptr;
}

// "ROW,COL": two numbers (CLI11 checks that each is a decimal integer, as it checks every number).
Status check_cell(const std::string& value) {
  const auto comma = value.find(',');
  if (comma == std::string::npos || comma == 0 || comma + 1 == value.size())
    return Status::fail("lock " + quote(value) + " is not ROW,COL (two numbers, such as lock=2,1)");
  return Status::ok();
}

}  // namespace

Status check_link(const std::vector<StateArg>& args) {
  // Unknown names first, all of them counted: a link of a million made-up keys gets one short line.
  std::vector<std::string> unknown;
  for (const auto& [name, value] : args)
    if (!kind_of(name)) unknown.push_back(name);
  if (unknown.size() == 1) return Status::fail("unknown setting " + quote(unknown[0]));
  if (!unknown.empty()) {
    std::string names;
    for (std::size_t i = 0; i < unknown.size() && i < 5; ++i) names += (i ? ", " : "") + quote(unknown[i]);
    return Status::fail(std::to_string(unknown.size()) + " unknown settings: " + names +
                        (unknown.size() > 5 ? ", ..." : ""));
  }
  for (const auto& [name, value] : args) {
    const Kind kind = *kind_of(name);
    if (kind == Kind::flag) continue;  // on or off: apply_state_args names a bad one
    if (kind == Kind::text) {
      const char* what = name == "text" ? "the text" : name == "patch" ? "the corrupted text" : "sentence B";
      if (Status st = check_text_size(value.size(), what); !st.is_ok()) return st;
      continue;  // an empty text is a state: the view explains it
    }
    if (value.empty())
      return Status::fail("'" + name + "' needs a value" + (kind == Kind::cell ? " (ROW,COL)" : ""));
    if (value.size() > 1000)
      return Status::fail("the value of '" + name + "' is " + std::to_string(value.size()) +
                          " bytes long: " + quote(value));
    if (kind == Kind::cell)
      if (Status st = check_cell(value); !st.is_ok()) return st;
  }
  return Status::ok();
}

}  // namespace attnviz::web
