#include "view_args.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "attnviz/io/model_ref.hpp"
#include "attnviz/text.hpp"

namespace attnviz {
namespace {

struct CompareName {
  viz::CompareMode mode;
  const char* name;
};
constexpr CompareName kCompareNames[] = {{viz::CompareMode::off, "off"},
                                         {viz::CompareMode::text, "text"},
                                         {viz::CompareMode::seed, "seed"},
                                         {viz::CompareMode::mask, "mask"},
                                         {viz::CompareMode::layer, "layer"}};

// Flags that take no value.
bool is_switch(const std::string& name) {
  return name == "qkv-bias" || name == "eval" || name == "no-mask" || name == "model-train" ||
         name == "lens" || name == "attribute";
}

// The name a link gives a weights file: its file (or folder) name, never the path on this machine.
std::string file_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// "#17" -> 17 ("" -> -1: none); the model's vocabulary is checked when the view computes.
Status parse_token_id(const std::string& spec, const char* flag, int& id) {
  id = -1;
  if (spec.empty()) return Status::ok();
  const std::optional<int> v = spec[0] == '#' ? parse_decimal_int(spec.substr(1)) : std::nullopt;
  if (!v || *v < 0)
    return Status::fail(std::string(flag) + " " + quote(spec) + " is not a token id: give #ID, such as #17");
  id = *v;
  return Status::ok();
}

std::string heads_spec(const std::vector<HeadRef>& heads) {
  std::string s;
  for (const HeadRef& h : heads)
    s += (s.empty() ? "" : ",") + std::to_string(h.layer) + "." + std::to_string(h.head);
  return s;
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
  cli.add_option("--compare", v.compare, "off | text | seed | mask | layer (a whole model's second layer)")
      ->capture_default_str();
  cli.add_option("--compare-layer", v.compare_layer, "layer B for --compare layer")
      ->capture_default_str()
      ->transform(decimal_int());
  cli.add_option("--compare-text", v.compare_text, "sentence B for --compare text");
  cli.add_option("--compare-seed", v.compare_seed, "seed B for --compare seed")->transform(torch_seed());
  add_model_option(cli, v.model, "--model-seed");
  cli.add_option("--model-seed", v.model_seed, "torch.manual_seed for a seeded --model")
      ->capture_default_str()
      ->transform(torch_seed());
  cli.add_flag("--model-train", v.model_train, "the model in train mode (dropout in three places)");
  cli.add_option("--layer", v.layer, "open this layer of --model in the full view (-1: every layer's heads)")
      ->capture_default_str()
      ->transform(decimal_int());
  cli.add_option(
         "--head-kind", v.head_kind,
         "show only heads of this kind: previous-token | first-token | self | broad | induction | none")
      ->capture_default_str();
  cli.add_flag("--lens", v.lens, "with --model: the logit lens strip (the top token after each layer)");
  cli.add_flag("--attribute", v.attribute,
               "with --model: colour the heads by their attribution to the target (and show the MLPs')");
  cli.add_option("--target", v.target, "with --model: the metric's token, #ID (default: the top next token)");
  cli.add_option("--versus", v.versus,
                 "with --model: a second token, #ID: the metric is the logit difference");
  cli.add_option("--position", v.position, "with --model: the metric's position, 0-based (-1: the last)")
      ->capture_default_str()
      ->transform(decimal_int());
  cli.add_option("--ablate", v.ablate, "with --model: heads switched off, LAYER.HEAD[,LAYER.HEAD...]");
  cli.add_option("--ablation", v.ablation, "with --model: how --ablate's heads are switched off: zero | mean")
      ->capture_default_str();
  cli.add_option("--patch", v.patch,
                 "with --model: the corrupted text of activation patching (the typed text's token count)");
}

viz::ModelChoice model_choice(const ViewArgs& a) {
  viz::ModelChoice c;
  c.seed = a.model_seed;
  c.train = a.model_train;
  if (a.model.empty() || a.model == "layer") return c;
  if (classify_model(a.model).kind == ModelRefKind::preset) {
    c.kind = viz::ModelKind::seeded;
    c.size = a.model;
  } else {
    c.kind = viz::ModelKind::file;
    c.path = a.model.rfind("file:", 0) == 0 ? a.model.substr(5) : a.model;
  }
  return c;
}

Status apply_view(const ViewArgs& a, viz::App& app) {
  viz::ViewState& v = app.view;
  if (!viz::parse_stage(a.stage, v.stage))
    return Status::fail(
        "unknown stage " + quote(a.stage) +
        " (inputs, queries, keys, values, scores, scaled, masked, weights, dropped, context, output)");
  const auto palette = viz::parse_palette(a.palette);
  if (!palette)
    return Status::fail("unknown palette " + quote(a.palette) + " (blues, viridis, cividis, diverging)");
  v.color.palette = *palette;
  v.color.centered = *palette == viz::Palette::diverging;
  if (!viz::parse_norm(a.norm.c_str(), v.color.norm))
    return Status::fail("unknown normalization " + quote(a.norm) + " (head, row, all-heads, fixed)");
  if (a.aggregate == "mean")
    v.aggregate = viz::Aggregate::mean;
  else if (a.aggregate == "max")
    v.aggregate = viz::Aggregate::max;
  else if (a.aggregate != "none")
    return Status::fail("unknown aggregate " + quote(a.aggregate) + " (none, mean, max)");
  const CompareName* mode = nullptr;
  for (const CompareName& c : kCompareNames)
    if (a.compare == c.name) mode = &c;
  if (!mode)
    return Status::fail("unknown compare mode " + quote(a.compare) + " (off, text, seed, mask, layer)");
  if (a.compare_layer < 0) return Status::fail("--compare-layer must be a layer index");
  app.compare.mode = mode->mode;
  app.compare.layer = a.compare_layer;
  app.compare.text = a.compare_text;
  app.compare.seed = a.compare_seed;
  app.compare.synced = -1;
  if (a.head < -1) return Status::fail("--head must be a head index, or -1 for every head");
  if (a.layer < -1) return Status::fail("--layer must be a layer index, or -1 for every layer");
  if (!viz::parse_head_kind(a.head_kind, app.model_view.filter))
    return Status::fail("unknown head kind " + quote(a.head_kind) +
                        " (previous-token, first-token, self, broad, induction, none)");
  const viz::ModelChoice choice = model_choice(a);
  if (choice.kind == viz::ModelKind::file && choice.path.empty())
    return Status::fail("--model file: needs a name");
  app.model_view.choice = choice;
  app.model_view.layer = a.layer;
  viz::CausalTools& t = app.model_view.causal;
  t.lens = a.lens;
  t.attribute = a.attribute;
  if (Status st = parse_token_id(a.target, "--target", t.target.target); !st.is_ok()) return st;
  if (Status st = parse_token_id(a.versus, "--versus", t.target.versus); !st.is_ok()) return st;
  if (a.position < -1) return Status::fail("--position must be a position, or -1 for the last");
  t.target.position = a.position;
  if (Status st = parse_heads(a.ablate, t.ablation.heads); !a.ablate.empty() && !st.is_ok())
    return Status::fail("--ablate: " + st.error);
  if (a.ablate.empty()) t.ablation.heads.clear();
  if (a.ablation == "zero" || a.ablation == "mean")
    t.ablation.kind = a.ablation == "mean" ? AblationKind::mean : AblationKind::zero;
  else
    return Status::fail("unknown ablation " + quote(a.ablation) + " (zero, mean)");
  t.corrupted = a.patch;
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
  const bool wanted = !app.model.is_open() && !app.model_view.wanted_file.empty();
  // A whole model's sizes are its own: the chapter-3 layer's (which a link beside a model refuses) stay out.
  const bool layer = !app.model.is_open() && !wanted;
  if (layer && c.variant != d.variant) out.emplace_back("variant", to_string(c.variant));
  // The preset whose sizes match, else the book's sizes with the differences spelled out.
  if (layer) {
    const Preset* matched = preset_of(c);
    const Preset* preset = matched ? matched : find_preset("book");
    if (std::string(preset->name) != "book") out.emplace_back("preset", preset->name);
    if (c.d_in != preset->d_in) out.emplace_back("d-in", std::to_string(c.d_in));
    if (c.d_out != preset->d_out) out.emplace_back("d-out", std::to_string(c.d_out));
    if (c.num_heads != preset->num_heads) out.emplace_back("heads", std::to_string(c.num_heads));
    if (c.context_length != preset->context_length)
      out.emplace_back("context-length", std::to_string(c.context_length));
    if (c.dropout != preset->dropout) out.emplace_back("dropout", shortest_decimal(c.dropout));
    if (c.qkv_bias) out.emplace_back("qkv-bias", "");
  }
  if (c.seed != d.seed) out.emplace_back("seed", std::to_string(c.seed));
  if (c.dropout_rng != d.dropout_rng) out.emplace_back("dropout-rng", to_string(c.dropout_rng));
  if (!c.train) out.emplace_back("eval", "");
  if (layer && !c.mask) out.emplace_back("no-mask", "");

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
  if (cs.mode == viz::CompareMode::layer && cs.layer != dc.layer)
    out.emplace_back("compare-layer", std::to_string(cs.layer));
  if (app.model.is_open() || wanted) {  // a link to a file not chosen yet keeps naming it
    const viz::ModelChoice& m = wanted ? app.model_view.choice : app.model.choice();
    out.emplace_back("model", m.kind == viz::ModelKind::seeded ? m.size : "file:" + file_name(m.path));
    if (m.seed != viz::ModelChoice{}.seed) out.emplace_back("model-seed", std::to_string(m.seed));
    if (m.train) out.emplace_back("model-train", "");
    if (app.model_view.layer >= 0) out.emplace_back("layer", std::to_string(app.model_view.layer));
    const viz::CausalTools& t = app.model_view.causal;
    if (t.lens) out.emplace_back("lens", "");
    if (t.attribute) out.emplace_back("attribute", "");
    if (t.target.target >= 0) out.emplace_back("target", "#" + std::to_string(t.target.target));
    if (t.target.versus >= 0) out.emplace_back("versus", "#" + std::to_string(t.target.versus));
    if (t.target.position >= 0) out.emplace_back("position", std::to_string(t.target.position));
    if (!t.ablation.empty()) out.emplace_back("ablate", heads_spec(t.ablation.heads));
    if (!t.ablation.empty() && t.ablation.kind == AblationKind::mean) out.emplace_back("ablation", "mean");
    if (!t.corrupted.empty()) out.emplace_back("patch", t.corrupted);
  }
  if (app.model_view.filter != viz::HeadKind::none)
    out.emplace_back("head-kind", viz::to_string(app.model_view.filter));
  return out;
}

Status apply_state_args(const std::vector<StateArg>& args, viz::App& app) {
  std::vector<std::string> argv;
  for (const auto& [name, value] : args) {
    // A flag's long name: lowercase letters, digits and dashes, as CLI11 takes them ('=' would split it).
    const bool well_formed =
        !name.empty() && name[0] != '-' && std::all_of(name.begin(), name.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
        });
    if (!well_formed) return Status::fail("unknown setting " + quote(name));
    if (is_switch(name)) {
      if (value.empty() || value == "1" || value == "true")
        argv.push_back("--" + name);
      else if (value != "0" && value != "false")
        return Status::fail(quote(name) + " is on or off (1 or 0), not " + quote(value));
      continue;
    }
    if (name == "lock") {  // "row,col"
      const auto comma = value.find(',');
      argv.push_back("--lock");
      argv.push_back(value.substr(0, comma));
      argv.push_back(comma == std::string::npos ? "" : value.substr(comma + 1));
    } else if (value.empty()) {
      argv.insert(argv.end(), {"--" + name, ""});  // CLI11 drops the empty value of "--name="
    } else {
      argv.push_back("--" + name + "=" + value);  // one argument: a value may start with '-'
    }
  }
  CLI::App cli{"attnviz state", "attnviz"};
  ConfigArgs a;
  ViewArgs v;
  add_config_options(cli, a);
  add_view_options(cli, v);
  cli.allow_extras();                                             // named below, quoted
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 parses a reversed vector
  try {
    cli.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return Status::fail(quote(e.what(), kParserMessageCap, '\0'));
  }
  if (const std::vector<std::string> extras = cli.remaining(); !extras.empty()) {
    const std::string& x = extras.front();
    return Status::fail("unknown setting " + quote(x.rfind("--", 0) == 0 ? x.substr(2, x.find('=') - 2) : x));
  }
  if (model_choice(v).kind != viz::ModelKind::layer)
    if (Status st = refuse_layer_flags(cli, false); !st.is_ok()) return st;
  Config config;
  Exec unused;
  if (Status st = config_from_args(a, config, unused); !st.is_ok()) return st;
  viz::App fresh;  // the view's defaults; its sessions stay empty (nothing is computed here)
  if (Status st = apply_view(v, fresh); !st.is_ok()) return st;
  app.view = fresh.view;
  app.compare.mode = fresh.compare.mode;
  app.compare.text = fresh.compare.text;
  app.compare.seed = fresh.compare.seed;
  app.compare.layer = fresh.compare.layer;
  app.compare.synced = -1;
  app.compare.model_synced.clear();
  app.session.text = a.text;
  app.session.config = config;
  // The model: reopened only when the link names another one (opening gpt2-small draws 163 M numbers).
  const viz::ModelChoice want = fresh.model_view.choice;
  app.model_view.filter = fresh.model_view.filter;
  app.model_view.causal = fresh.model_view.causal;
  app.model_view.wanted_file.clear();
  const viz::ModelChoice& open = app.model.choice();
  const bool same =
      app.model.is_open()
          ? want.kind == open.kind && want.seed == open.seed && want.train == open.train &&
                (want.kind == viz::ModelKind::seeded ? want.size == open.size
                                                     : file_name(want.path) == file_name(open.path))
          : want.kind == viz::ModelKind::layer;
  if (!same) {
    viz::ModelChoice resolved = want;
    if (want.kind == viz::ModelKind::file) {
      // A link holds the file's name, not its data: the host's files folder may have it (the page keeps what
      // the visitor chose there); otherwise the host asks for it and the view stays as it is.
      resolved.path = (std::filesystem::path(app.model_view.files_dir) / want.path).string();
      std::error_code ec;
      if (!std::filesystem::exists(resolved.path, ec)) {
        app.model_view.wanted_file = want.path;
        app.model_view.choice = want;
        app.model_view.layer = fresh.model_view.layer;  // kept for when the file comes
        return viz::start(app);
      }
    }
    if (Status st = viz::open_model(app, resolved); !st.is_ok()) {
      (void)viz::start(app);  // back to the layer view; the open failure is the message worth reporting
      return st;
    }
    // Opening drops a head and a layer B the model lacks, and the other model's ablations and tokens:
    // check_head_and_cell and the pass name what this one lacks instead.
    app.view.enlarged = fresh.view.enlarged;
    app.model_view.causal = fresh.model_view.causal;
    app.compare.layer = fresh.compare.layer;
  }
  app.model_view.layer = fresh.model_view.layer;
  if (app.model.is_open()) {
    if (app.model_view.layer >= app.model.config().n_layers) {
      const int L = app.model.config().n_layers;
      app.model_view.layer = -1;
      (void)viz::start(app);  // the whole model's view; the missing layer is the message worth reporting
      return Status::fail("layer " + std::to_string(fresh.model_view.layer) +
                          " does not exist: the model has layers 0.." + std::to_string(L - 1));
    }
    app.model.set_detail_layer(app.model_view.layer);
  }
  return viz::start(app);
}

Status check_head_and_cell(const viz::App& app) {
  if (viz::model_mode(app)) {
    const int heads = app.model.config().n_heads, layers = app.model.config().n_layers;
    if (app.view.enlarged >= heads)
      return Status::fail("--head " + std::to_string(app.view.enlarged) +
                          " is past the last head: the model has " + std::to_string(heads) + " heads (0 to " +
                          std::to_string(heads - 1) + "), and -1 shows them all");
    if (app.compare.layer >= layers)
      return Status::fail("--compare-layer " + std::to_string(app.compare.layer) +
                          " does not exist: the model has layers 0.." + std::to_string(layers - 1));
  }
  const Result* shown = viz::shown_result(app);
  if (!shown || (!viz::model_mode(app) && !app.session.has_result())) return Status::ok();
  const Result& r = *shown;
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
  return Status::ok();
}

Status check_view(const viz::App& app) {
  if (Status st = check_head_and_cell(app); !st.is_ok()) return st;
  if (viz::model_mode(app) && app.compare.mode != viz::CompareMode::off &&
      !app.compare.model_b.error().empty())
    return Status::fail("--compare: B cannot be computed: " + app.compare.model_b.error());
  const Result* shown = viz::shown_result(app);
  if (!shown || (!viz::model_mode(app) && !app.session.has_result())) return Status::ok();
  const Result& r = *shown;
  const viz::CompareState& c = app.compare;
  if (c.mode == viz::CompareMode::mask && !is_causal(r.config.variant))
    return Status::fail(std::string("--compare mask: this variant has no mask (") +
                        to_string(r.config.variant) + "; causal, wrapper and mha have one)");
  if (viz::model_mode(app)) return Status::ok();
  if (c.mode == viz::CompareMode::text && !c.b.error().empty())
    return Status::fail("--compare-text: " + c.b.error());
  for (const CompareName& n : kCompareNames)
    if (n.mode == c.mode && c.mode != viz::CompareMode::off && !c.b.error().empty())
      return Status::fail(std::string("--compare ") + n.name + ": B cannot be computed: " + c.b.error());
  return Status::ok();
}

}  // namespace attnviz
