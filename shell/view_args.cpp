#include "view_args.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace attnviz {
namespace {

struct CompareName {
  viz::CompareMode mode;
  const char* name;
};
constexpr CompareName kCompareNames[] = {{viz::CompareMode::off, "off"},
                                         {viz::CompareMode::text, "text"},
                                         {viz::CompareMode::seed, "seed"},
                                         {viz::CompareMode::mask, "mask"}};

// Flags that take no value.
bool is_switch(const std::string& name) {
  return name == "qkv-bias" || name == "eval" || name == "no-mask";
}

// The shortest decimal that reads back to the same double (dropout probabilities such as 0.1).
std::string shortest(double x) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

}  // namespace

void add_view_options(CLI::App& cli, ViewArgs& v) {
  cli.add_option("--stage", v.stage,
                 "stage shown first: inputs | queries | keys | values | scores | scaled | "
                 "masked | weights | dropped | context | output")
      ->capture_default_str();
  cli.add_option("--palette", v.palette, "blues | viridis | cividis | diverging")->capture_default_str();
  cli.add_option("--normalize", v.norm, "head | row | all-heads | fixed")->capture_default_str();
  cli.add_option("--aggregate", v.aggregate, "none | mean | max over heads")->capture_default_str();
  cli.add_option("--head", v.head, "show this head alone (-1: every head)")
      ->capture_default_str()
      ->transform(decimal_int());
  cli.add_option("--lock", v.lock, "lock the cell at ROW COL (shows its breakdown)")
      ->expected(2)
      ->transform(decimal_int());
  cli.add_option("--compare", v.compare, "off | text | seed | mask")->capture_default_str();
  cli.add_option("--compare-text", v.compare_text, "sentence B for --compare text");
  cli.add_option("--compare-seed", v.compare_seed, "seed B for --compare seed")->transform(torch_seed());
}

Status apply_view(const ViewArgs& a, viz::App& app) {
  viz::ViewState& v = app.view;
  if (!viz::parse_stage(a.stage, v.stage))
    return Status::fail(
        "unknown stage " + quote_arg(a.stage) +
        " (inputs, queries, keys, values, scores, scaled, masked, weights, dropped, context, output)");
  const auto palette = viz::parse_palette(a.palette);
  if (!palette)
    return Status::fail("unknown palette " + quote_arg(a.palette) + " (blues, viridis, cividis, diverging)");
  v.color.palette = *palette;
  v.color.centered = *palette == viz::Palette::diverging;
  if (!viz::parse_norm(a.norm.c_str(), v.color.norm))
    return Status::fail("unknown normalization " + quote_arg(a.norm) + " (head, row, all-heads, fixed)");
  if (a.aggregate == "mean")
    v.aggregate = viz::Aggregate::mean;
  else if (a.aggregate == "max")
    v.aggregate = viz::Aggregate::max;
  else if (a.aggregate != "none")
    return Status::fail("unknown aggregate " + quote_arg(a.aggregate) + " (none, mean, max)");
  const CompareName* mode = nullptr;
  for (const CompareName& c : kCompareNames)
    if (a.compare == c.name) mode = &c;
  if (!mode) return Status::fail("unknown compare mode " + quote_arg(a.compare) + " (off, text, seed, mask)");
  app.compare.mode = mode->mode;
  app.compare.text = a.compare_text;
  app.compare.seed = a.compare_seed;
  app.compare.synced = -1;
  if (a.head < -1) return Status::fail("--head must be a head index, or -1 for every head");
  v.enlarged = a.head;
  if (!a.lock.empty()) {
    if (a.lock.size() != 2) return Status::fail("--lock takes a row and a column");
    v.locked = {true, a.head >= 0 ? a.head : 0, a.lock[0], a.lock[1]};
  }
  return Status::ok();
}

std::vector<StateArg> state_args(const viz::App& app) {
  std::vector<StateArg> out;
  const Config& c = app.session.config;
  const Config d{};
  if (app.session.text != kDefaultText) out.emplace_back("text", app.session.text);
  if (c.variant != d.variant) out.emplace_back("variant", to_string(c.variant));
  // The preset whose sizes match, else the book's sizes with the differences spelled out.
  const Preset* matched = preset_of(c);
  const Preset* preset = matched ? matched : find_preset("book");
  if (std::string(preset->name) != "book") out.emplace_back("preset", preset->name);
  if (c.d_in != preset->d_in) out.emplace_back("d-in", std::to_string(c.d_in));
  if (c.d_out != preset->d_out) out.emplace_back("d-out", std::to_string(c.d_out));
  if (c.num_heads != preset->num_heads) out.emplace_back("heads", std::to_string(c.num_heads));
  if (c.context_length != preset->context_length)
    out.emplace_back("context-length", std::to_string(c.context_length));
  if (c.dropout != preset->dropout) out.emplace_back("dropout", shortest(c.dropout));
  if (c.qkv_bias) out.emplace_back("qkv-bias", "");
  if (c.seed != d.seed) out.emplace_back("seed", std::to_string(c.seed));
  if (c.dropout_rng != d.dropout_rng) out.emplace_back("dropout-rng", to_string(c.dropout_rng));
  if (!c.train) out.emplace_back("eval", "");
  if (!c.mask) out.emplace_back("no-mask", "");

  const viz::ViewState& v = app.view;
  const viz::ViewState dv{};
  if (v.stage != dv.stage) out.emplace_back("stage", viz::to_string(v.stage));
  if (v.color.palette != dv.color.palette) out.emplace_back("palette", viz::to_string(v.color.palette));
  if (v.color.norm != dv.color.norm) out.emplace_back("normalize", viz::to_string(v.color.norm));
  if (v.aggregate != dv.aggregate) out.emplace_back("aggregate", viz::to_string(v.aggregate));
  if (v.enlarged >= 0) out.emplace_back("head", std::to_string(v.enlarged));
  if (v.locked.active && v.locked.head == (v.enlarged >= 0 ? v.enlarged : 0))
    out.emplace_back("lock", std::to_string(v.locked.row) + "," + std::to_string(v.locked.col));
  const viz::CompareState& cs = app.compare;
  const viz::CompareState dc{};
  for (const CompareName& n : kCompareNames)
    if (n.mode == cs.mode && cs.mode != dc.mode) out.emplace_back("compare", n.name);
  if (cs.mode == viz::CompareMode::text && cs.text != dc.text) out.emplace_back("compare-text", cs.text);
  if (cs.mode == viz::CompareMode::seed && cs.seed != dc.seed)
    out.emplace_back("compare-seed", std::to_string(cs.seed));
  return out;
}

Status apply_state_args(const std::vector<StateArg>& args, viz::App& app) {
  std::vector<std::string> argv;
  for (const auto& [name, value] : args) {
    if (name.empty() || name[0] == '-') return Status::fail("bad setting name '" + name + "'");
    if (is_switch(name)) {
      if (value.empty() || value == "1" || value == "true")
        argv.push_back("--" + name);
      else if (value != "0" && value != "false")
        return Status::fail("'" + name + "' is on or off (1 or 0), not '" + value + "'");
      continue;
    }
    argv.push_back("--" + name);
    if (name == "lock") {  // "row,col"
      const auto comma = value.find(',');
      argv.push_back(value.substr(0, comma));
      argv.push_back(comma == std::string::npos ? "" : value.substr(comma + 1));
    } else {
      argv.push_back(value);
    }
  }
  CLI::App cli{"attnviz state", "attnviz"};
  ConfigArgs a;
  ViewArgs v;
  add_config_options(cli, a);
  add_view_options(cli, v);
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 parses a reversed vector
  try {
    cli.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return Status::fail(e.what());
  }
  Config config;
  Exec unused;
  if (Status st = config_from_args(a, config, unused); !st.is_ok()) return st;
  viz::App fresh;  // the view's defaults; its sessions stay empty (nothing is computed here)
  if (Status st = apply_view(v, fresh); !st.is_ok()) return st;
  app.view = fresh.view;
  app.compare.mode = fresh.compare.mode;
  app.compare.text = fresh.compare.text;
  app.compare.seed = fresh.compare.seed;
  app.compare.synced = -1;
  app.session.text = a.text;
  app.session.config = config;
  return viz::start(app);
}

Status check_view(const viz::App& app) {
  if (!app.session.has_result()) return Status::ok();
  const Result& r = app.session.result();
  const viz::ViewState& v = app.view;
  const std::string heads = std::to_string(r.shape.heads);
  if (v.enlarged >= r.shape.heads)
    return Status::fail("--head " + std::to_string(v.enlarged) + " is past the last head: there " +
                        (r.shape.heads == 1
                             ? "is 1 head (0"
                             : "are " + heads + " heads (0 to " + std::to_string(r.shape.heads - 1)) +
                        "), and -1 shows them all");
  if (v.locked.active) {
    const viz::MatrixDesc m = viz::stage_matrix(r, v.stage, std::max(0, v.locked.head));
    const int rows = m.empty() ? r.tokens_count() : m.rows, cols = m.empty() ? r.tokens_count() : m.cols;
    if (v.locked.row < 0 || v.locked.row >= rows || v.locked.col < 0 || v.locked.col >= cols)
      return Status::fail("--lock " + std::to_string(v.locked.row) + " " + std::to_string(v.locked.col) +
                          " is outside the " + viz::to_string(v.stage) + " matrix: rows 0 to " +
                          std::to_string(rows - 1) + ", columns 0 to " + std::to_string(cols - 1));
  }
  const viz::CompareState& c = app.compare;
  if (c.mode == viz::CompareMode::mask && !is_causal(r.config.variant))
    return Status::fail(std::string("--compare mask: this variant has no mask (") +
                        to_string(r.config.variant) + "; causal, wrapper and mha have one)");
  if (c.mode == viz::CompareMode::text && !c.b.error().empty())
    return Status::fail("--compare-text: " + c.b.error());
  for (const CompareName& n : kCompareNames)
    if (n.mode == c.mode && c.mode != viz::CompareMode::off && !c.b.error().empty())
      return Status::fail(std::string("--compare ") + n.name + ": B cannot be computed: " + c.b.error());
  return Status::ok();
}

}  // namespace attnviz
