#include "link.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <set>

#include "budget.hpp"
#include "config_args.hpp"

namespace attnviz::web {
namespace {

enum class Kind { flag, text, word, integer, seed, number, cell };

// The settings a link may name: every flag the desktop app takes for its state (the same CLI11 options
// apply_state_args parses), and the form of its value.
const std::vector<std::pair<std::string, Kind>>& settings() {
  static const std::vector<std::pair<std::string, Kind>> all = [] {
    CLI::App cli;
    ConfigArgs a;
    ViewArgs v;
    add_config_options(cli, a);
    add_view_options(cli, v);
    const std::set<std::string> integers{"d-in", "d-out", "heads",  "context-length",
                                         "head", "layer", "threads"};
    const std::set<std::string> seeds{"seed", "compare-seed", "model-seed"};
    std::vector<std::pair<std::string, Kind>> out;
    for (const CLI::Option* o : cli.get_options()) {
      for (const std::string& name : o->get_lnames()) {
        if (name == "help") continue;  // CLI11's own: a link has no help to print
        const Kind k = o->get_expected_min() == 0                 ? Kind::flag
                       : name == "text" || name == "compare-text" ? Kind::text
                       : name == "lock"                           ? Kind::cell
                       : name == "dropout"                        ? Kind::number
                       : integers.count(name)                     ? Kind::integer
                       : seeds.count(name)                        ? Kind::seed
                                                                  : Kind::word;
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

// "[+-]digits" split into its sign and its digits without leading zeros; false for anything else.
bool split_decimal(const std::string& s, bool& negative, std::string& digits) {
  std::size_t i = 0;
  negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return false;
  for (std::size_t j = i; j < s.size(); ++j)
    if (s[j] < '0' || s[j] > '9') return false;
  while (i + 1 < s.size() && s[i] == '0') ++i;
  digits = s.substr(i);
  if (digits == "0") negative = false;
  return true;
}

bool to_u64(const std::string& digits, std::uint64_t& v) {
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return ec == std::errc() && end == digits.data() + digits.size();
}

// An int in decimal, rewritten without leading zeros.
Status check_integer(const std::string& name, std::string& value) {
  bool negative = false;
  std::string digits;
  std::uint64_t v = 0;
  if (!split_decimal(value, negative, digits))
    return Status::fail(name + " " + quote_value(value) + " is not a decimal integer");
  if (!to_u64(digits, v) || v > (negative ? std::uint64_t{1} << 31 : std::uint64_t{INT_MAX}))
    return Status::fail(name + " " + quote_value(value) + " is out of range (" + std::to_string(INT_MIN) +
                        " to " + std::to_string(INT_MAX) + ")");
  value = (negative ? "-" : "") + digits;
  return Status::ok();
}

// torch.manual_seed's range, -2^63 .. 2^64 - 1; a negative seed is taken as PyTorch takes it (its 64-bit
// two's complement).
Status check_seed(const std::string& name, std::string& value) {
  bool negative = false;
  std::string digits;
  std::uint64_t v = 0;
  if (!split_decimal(value, negative, digits))
    return Status::fail(name + " " + quote_value(value) + " is not a decimal integer");
  if (!to_u64(digits, v) || (negative && v > (std::uint64_t{1} << 63)))
    return Status::fail(
        name + " " + quote_value(value) +
        " is outside torch.manual_seed's range (-9223372036854775808 to 18446744073709551615)");
  value = std::to_string(negative ? ~v + 1 : v);
  return Status::ok();
}

// A decimal number: digits, an optional fraction and exponent (no hexadecimal, nothing after it).
Status check_number(const std::string& name, const std::string& value) {
  std::size_t i = value.empty() || (value[0] != '+' && value[0] != '-') ? 0 : 1, mantissa = 0;
  const auto digit = [&](std::size_t at) {
    return at < value.size() && value[at] >= '0' && value[at] <= '9';
  };
  while (digit(i)) ++i, ++mantissa;
  if (i < value.size() && value[i] == '.')
    for (++i; digit(i); ++i) ++mantissa;
  bool ok = mantissa > 0;
  if (ok && i < value.size() && (value[i] == 'e' || value[i] == 'E')) {
    ++i;
    if (i < value.size() && (value[i] == '+' || value[i] == '-')) ++i;
    const std::size_t exponent = i;
    while (digit(i)) ++i;
    ok = i > exponent;
  }
  if (!ok || i != value.size())
    return Status::fail(name + " " + quote_value(value) + " is not a decimal number");
  return Status::ok();
}

// "ROW,COL": two decimal integers.
Status check_cell(std::string& value) {
  const auto comma = value.find(',');
  if (comma == std::string::npos)
    return Status::fail("lock " + quote_value(value) + " is not ROW,COL (two numbers, such as lock=2,1)");
  std::string row = value.substr(0, comma), col = value.substr(comma + 1);
  if (Status st = check_integer("lock's row", row); !st.is_ok()) return st;
  if (Status st = check_integer("lock's column", col); !st.is_ok()) return st;
  value = row + "," + col;
  return Status::ok();
}

}  // namespace

std::string quote_value(const std::string& value) {
  std::string out = "'";
  for (std::size_t i = 0; i < value.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += value[i];
    }
  }
  return out + (value.size() > 40 ? "...'" : "'");
}

Status check_link(std::vector<StateArg>& args) {
  // Unknown names first, all of them counted: a link of a million made-up keys gets one short line.
  std::vector<std::string> unknown;
  for (const auto& [name, value] : args)
    if (!kind_of(name)) unknown.push_back(name);
  if (unknown.size() == 1) return Status::fail("unknown setting " + quote_value(unknown[0]));
  if (!unknown.empty()) {
    std::string names;
    for (std::size_t i = 0; i < unknown.size() && i < 5; ++i)
      names += (i ? ", " : "") + quote_value(unknown[i]);
    return Status::fail(std::to_string(unknown.size()) + " unknown settings: " + names +
                        (unknown.size() > 5 ? ", ..." : ""));
  }
  for (auto& [name, value] : args) {
    const Kind kind = *kind_of(name);
    if (kind == Kind::flag) continue;  // on or off: apply_state_args names a bad one
    if (kind == Kind::text) {
      if (Status st = check_text_size(value.size(), name == "text" ? "the text" : "sentence B"); !st.is_ok())
        return st;
      continue;  // an empty text is a state: the view explains it
    }
    if (value.empty())
      return Status::fail("'" + name + "' needs a value" + (kind == Kind::cell ? " (ROW,COL)" : ""));
    if (value.size() > 1000)
      return Status::fail("the value of '" + name + "' is " + std::to_string(value.size()) +
                          " bytes long: " + quote_value(value));
    Status st = Status::ok();
    if (kind == Kind::integer) st = check_integer(name, value);
    if (kind == Kind::seed) st = check_seed(name, value);
    if (kind == Kind::number) st = check_number(name, value);
    if (kind == Kind::cell) st = check_cell(value);
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

Status check_view_ranges(const viz::App& app) {
  const viz::ViewState& v = app.view;
  const auto range = [](int n) { return n == 1 ? std::string("0") : "0 to " + std::to_string(n - 1); };
  // A whole model's head is one of its layer's, known once the model is open (a link may name a file the
  // visitor has not chosen yet).
  const bool whole = app.model_view.choice.kind != viz::ModelKind::layer || viz::model_mode(app);
  if (whole && !app.model.is_open()) return Status::ok();
  const int heads = whole ? app.model.config().n_heads : shape_of(app.session.config).heads;
  if (v.enlarged >= heads && (whole || validate(app.session.config).is_ok()))
    return Status::fail("head " + std::to_string(v.enlarged) + " does not exist: this view has " +
                        std::to_string(heads) + (heads == 1 ? " head (" : " heads (") + range(heads) +
                        "; -1 shows every head)");
  // The locked cell against the stage's matrix, once the state is computed (else its size is unknown).
  if (!whole && v.locked.active && app.session.has_result() && app.session.error().empty()) {
    const Result& r = app.session.result();
    const viz::MatrixDesc m = viz::stage_matrix(r, v.stage, std::max(0, v.locked.head));
    const int rows = m.empty() ? r.tokens_count() : m.rows, cols = m.empty() ? r.tokens_count() : m.cols;
    if (v.locked.row < 0 || v.locked.row >= rows || v.locked.col < 0 || v.locked.col >= cols)
      return Status::fail("lock " + std::to_string(v.locked.row) + "," + std::to_string(v.locked.col) +
                          " is outside the " + viz::to_string(v.stage) + " matrix: rows " + range(rows) +
                          ", columns " + range(cols));
  }
  return Status::ok();
}

}  // namespace attnviz::web
