#include "model_cli.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>

#include "attnviz/gpt.hpp"
#include "attnviz/io/gpt_json.hpp"
#include "attnviz/io/model_ref.hpp"
#include "attnviz/io/model_source.hpp"
#include "attnviz/lens.hpp"
#include "attnviz/saturating.hpp"
#include "hub_download.hpp"
#include "terminal.hpp"

namespace attnviz {
namespace {

constexpr int kShown = 12;

std::string token_count(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " token" : " tokens");
}  // a terminal shows at most this many rows and columns of a head

void print_text(std::ostream& out, const OpenedModel& m, const GptResult& r,
                const std::vector<int>* generated, bool id_labels) {
  // --ids: tokens by their ids ("#17"), whatever the tokenizer would call them
  const auto label = [&](int id) { return id_labels ? "#" + std::to_string(id) : m.bpe.label(id); };
  const GptConfig& c = r.config;
  const GptWeights& w = m.model.weights();
  char mode[64] = "eval";
  if (r.options.train && c.drop_rate > 0)
    std::snprintf(mode, sizeof mode, "train (dropout %g, %s)", c.drop_rate, to_string(r.options.dropout_rng));
  char buf[400];
  // The source is a file's name: escaped and capped, as every path the CLI prints.
  out << "attnviz " << quote(w.source, kQuoteCap, '\0');
  std::snprintf(buf, sizeof buf,
                ": %d layers, %d heads of dim %d, d_model %d, context %d, vocabulary %d, %s\n", c.n_layers,
                c.n_heads, c.d_model / c.n_heads, c.d_model, c.context_length, c.vocab_size, mode);
  out << buf;
  if (!w.config_from.empty()) out << "config: " << quote(w.config_from, kQuoteCap, '\0') << '\n';
  std::snprintf(buf, sizeof buf, "computed with %s kernels on %d thread%s in %.1f ms\n", to_string(r.isa),
                r.threads, r.threads == 1 ? "" : "s", r.seconds * 1e3);
  out << buf;
  out << "tokens (" << r.ids.size() << "):";
  for (int id : r.ids) out << ' ' << label(id) << '(' << id << ')';
  out << '\n';
  const int T = static_cast<int>(r.ids.size()), shown = std::min(T, kShown);
  for (const GptLayer& l : r.layers) {
    for (int h = 0; h < c.n_heads; ++h) {
      out << "\nlayer " << l.index << " head " << h << " attention weights:\n" << std::string(10, ' ');
      for (int j = 0; j < shown; ++j) out << ' ' << pad(label(r.ids[static_cast<std::size_t>(j)]), 7, true);
      out << '\n';
      for (int i = 0; i < shown; ++i) {
        out << pad(label(r.ids[static_cast<std::size_t>(i)]), 10, true);
        for (int j = 0; j < shown; ++j) {
          if (j > i) {
            out << "       -";
            continue;
          }
          std::snprintf(buf, sizeof buf, " %7.4f", static_cast<double>(l.attention.weights.at(h, i, j)));
          out << buf;
        }
        out << '\n';
      }
      if (shown < T) out << "  (showing " << shown << " of " << T << " tokens; --json prints every value)\n";
    }
  }
  out << "\nnext token:\n";
  for (std::size_t i = 0; i < r.next.size(); ++i) {
    std::snprintf(buf, sizeof buf, "  %2zu. %s %6d %8.4f%%  logit %.4f\n", i + 1,
                  pad(label(r.next[i].id), 16, true).c_str(), r.next[i].id, 100.0 * r.next[i].probability,
                  static_cast<double>(r.next[i].logit));
    out << buf;
  }
  if (generated) {
    out << "\ngenerated (" << generated->size() << " tokens, greedy):";
    for (int id : *generated) out << ' ' << label(id);
    out << '\n';
  }
}

// The causal tools as text: the lens as a table of layer x position top tokens, the ten largest attributions,
// and the patching maps' largest entries.
void print_lens(std::ostream& out, const OpenedModel& m, const GptResult& r, const GptJsonLens& keys,
                bool id_labels) {
  const auto label = [&](int id) { return id_labels ? "#" + std::to_string(id) : m.bpe.label(id); };
  const LensResult& lens = *keys.result;
  const int T = static_cast<int>(r.ids.size()), shown = std::min(T, kShown), first = T - shown;
  char buf[200];
  if (keys.ablation && !keys.ablation->empty()) {
    out << "\nablated (" << to_string(keys.ablation->kind) << "):";
    for (const HeadRef& h : keys.ablation->heads) out << ' ' << h.layer << '.' << h.head;
    out << '\n';
  }
  if (!lens.lens.empty()) {
    out << "\nlogit lens: the top token after each point, with its probability";
    if (first > 0) out << " (the last " << shown << " of " << T << " positions; --json prints every one)";
    out << ":\n" << std::string(12, ' ');
    for (int t = first; t < T; ++t) out << ' ' << pad(label(r.ids[static_cast<std::size_t>(t)]), 12, true);
    out << '\n';
    for (const LensPoint& p : lens.lens) {
      out << pad(p.after, 12, true);
      for (int t = first; t < T; ++t) {
        const LensPosition& lp = p.positions[static_cast<std::size_t>(t)];
        if (lp.top.empty()) {
          out << std::string(13, ' ');
          continue;
        }
        std::snprintf(
            buf, sizeof buf, " %s",
            pad(label(lp.top[0].id) + " " +
                    std::to_string(static_cast<int>(std::lround(100.0 * lp.top[0].probability))) + "%",
                12, true)
                .c_str());
        out << buf;
      }
      out << '\n';
    }
  }
  const auto metric = [&](const LensTarget& t) {
    std::string s = "logit of " + label(t.target);
    if (t.versus >= 0) s += " minus logit of " + label(t.versus);
    return s + " at position " + std::to_string(t.position);
  };
  if (lens.attributed) {
    const Attribution& a = lens.attribution;
    std::snprintf(buf, sizeof buf, ": %.4f (the components sum to %.4f)\n", a.value, a.sum());
    out << "\nattribution of the " << metric(lens.target) << buf;
    std::vector<std::pair<double, std::string>> parts = {{a.embeddings, "embeddings"},
                                                         {a.final_bias, "final bias"}};
    for (std::size_t l = 0; l < a.heads.size(); ++l) {
      for (std::size_t h = 0; h < a.heads[l].size(); ++h)
        parts.push_back({a.heads[l][h], "head " + std::to_string(l) + "." + std::to_string(h)});
      parts.push_back({a.attention_bias[l], "attention bias " + std::to_string(l)});
      if (!r.config.attention_only) parts.push_back({a.mlp[l], "mlp " + std::to_string(l)});
    }
    std::stable_sort(parts.begin(), parts.end(),
                     [](const auto& x, const auto& y) { return std::fabs(x.first) > std::fabs(y.first); });
    for (std::size_t i = 0; i < parts.size() && i < 10; ++i) {
      std::snprintf(buf, sizeof buf, "  %-20s %+10.4f\n", parts[i].second.c_str(), parts[i].first);
      out << buf;
    }
  }
  if (keys.patching) {
    const Patching& p = *keys.patching;
    std::snprintf(buf, sizeof buf, ": clean %.4f, corrupted %.4f\n", p.clean, p.corrupted);
    out << "\npatching the " << metric(keys.patched) << buf;
    const auto largest = [&](const std::vector<std::vector<double>>& map, const char* what, const char* col) {
      std::vector<std::pair<double, std::string>> entries;
      for (std::size_t l = 0; l < map.size(); ++l)
        for (std::size_t j = 0; j < map[l].size(); ++j)
          if (map[l][j] != 0.0)  // an entry that changes nothing is not among the largest
            entries.push_back(
                {map[l][j], "layer " + std::to_string(l) + " " + col + " " + std::to_string(j)});
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& x, const auto& y) { return std::fabs(x.first) > std::fabs(y.first); });
      out << "  " << what << ", the largest entries:\n";
      for (std::size_t i = 0; i < entries.size() && i < 5; ++i) {
        std::snprintf(buf, sizeof buf, "    %-24s %+8.4f\n", entries[i].second.c_str(), entries[i].first);
        out << buf;
      }
    };
    largest(p.residual, "the residual stream entering each block", "position");
    largest(p.heads, "each head's context vectors", "head");
  }
}

// One line on a terminal, rewritten in place: the tokens so far and an estimate of the time left, counted
// in rows computed (one per token within the context, context_length per token past it).
class Progress {
 public:
  Progress(std::ostream& err, bool shown, int prompt, int steps, int context_length, bool full_passes)
      : err_(err), shown_(shown), prompt_(prompt), steps_(steps), ctx_(context_length), full_(full_passes) {}
  ~Progress() { finish(); }
  // The line goes, before any message: stderr keeps only real messages.
  void finish() {
    if (drawn_) err_ << "\r\033[K" << std::flush;
    drawn_ = false;
  }
  void step(int done) {
    if (!shown_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(200) && done < steps_) return;
    last_ = now;
    drawn_ = true;
    const double spent = std::chrono::duration<double>(now - start_).count();
    const double left = spent * (cost(done, steps_) / std::max(1.0, cost(0, done)));
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "\rattnviz-cli: generated %d of %d tokens in %.0f s, about %.0f s left (Ctrl-C "
                  "stops)\033[K",
                  done, steps_, spent, left);
    err_ << buf << std::flush;
  }

 private:
  // Rows computed by steps [from, to).
  double cost(int from, int to) const {
    double rows = 0;
    for (int s = from; s < to; ++s) rows += full_ || prompt_ + s >= ctx_ ? std::min(prompt_ + s, ctx_) : 1;
    return rows;
  }
  std::ostream& err_;
  bool shown_;
  int prompt_, steps_, ctx_;
  bool full_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_;
};

}  // namespace

Status check_generation(std::int64_t prompt, std::int64_t generate, int context_length) {
  const std::int64_t most = std::int64_t{kGenerateContexts} * context_length;
  if (prompt + generate <= most) return Status::ok();
  return Status::fail(
      "--generate " + std::to_string(generate) + " would make the text " + std::to_string(prompt + generate) +
      " tokens long, more than " + std::to_string(kGenerateContexts) + " x the context length " +
      std::to_string(context_length) + ": past " + std::to_string(context_length) +
      " tokens each new one reruns the model over the last " + std::to_string(context_length) + ", " +
      std::to_string(prompt + generate - context_length) + " full passes here; generate at most " +
      std::to_string(std::max<std::int64_t>(0, most - prompt)));
}

void add_model_options(CLI::App& app, ModelArgs& m) {
  add_model_option(app, m.model, "--seed");
  app.add_option(
      "--layers", m.layers,
      "with --model: the layers whose heads are shown, e.g. 0,5,9-11 | all | none (default: all with "
      "--json, none otherwise)");
  app.add_option("--keep", m.keep,
                 "with --model: what each shown layer keeps, a list of weights, scores, dropped, context, "
                 "residuals, logits (every position's)")
      ->capture_default_str();
  app.add_option("--ids", m.ids,
                 "with --model: the token ids themselves, e.g. 3,17,5, instead of --text (a model whose "
                 "vocabulary is not GPT-2's, such as the induction recipe's); tokens are labelled #ID");
  app.add_option("--top-k", m.top_k, "with --model: the next-token candidates shown")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_option("--generate", m.generate, "with --model: greedy tokens to generate (generate_text_simple)")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_flag(
      "--train", m.train,
      "with --model FILE or FOLDER: train mode (dropout in three places); loaded weights run in eval "
      "mode, as from_pretrained gives them, and the seeded models in train mode, as the book "
      "builds them (--eval for eval)");
  add_download_option(app, m.download);
  app.add_flag(
      "--lens", m.lens,
      "with --model: the logit lens, what the model would predict after the embeddings and after each "
      "block, at every position (--top-k tokens each)");
  app.add_option("--target", m.target,
                 "with --model: the token whose logit the attribution and patching measure, a piece of text "
                 "that is one token or #ID (default: the top next token)");
  app.add_option("--versus", m.versus,
                 "with --model: a second token: the metric is the target's logit minus this one's");
  app.add_option("--position", m.position, "with --model: the position measured, 0-based (default: the last)")
      ->transform(decimal_int());
  app.add_flag("--attribute", m.attribute,
               "with --model: direct logit attribution of the target at the position to the embeddings, each "
               "head, each attention bias and MLP, and the final bias");
  app.add_option("--ablate", m.ablate,
                 "with --model: heads switched off, LAYER.HEAD[,LAYER.HEAD...]; everything else is computed "
                 "with them ablated");
  app.add_option("--ablation", m.ablation, "with --ablate: zero | mean (each head's mean over the positions)")
      ->capture_default_str();
  app.add_option(
      "--patch", m.patch,
      "with --model: a corrupted text of the same token count: the activation patching maps of the "
      "target's metric (residual stream by layer and position, heads by layer)");
  app.add_option("--patch-ids", m.patch_ids,
                 "with --model: the corrupted text as token ids, as --ids gives them");
}

Status parse_token(const OpenedModel& m, const std::string& spec, const char* flag, int& id) {
  const int V = m.model.weights().config.vocab_size;
  if (!spec.empty() && spec[0] == '#') {
    const std::string_view digits(spec.data() + 1, spec.size() - 1);
    int v = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || v < 0)
      return Status::fail(std::string(flag) + ": " + quote(spec) +
                          " is not a token id: give #ID, such as #17");
    if (v >= V)
      return Status::fail(std::string(flag) + ": " + quote(spec) + " is outside the vocabulary (#0..#" +
                          std::to_string(V - 1) + ")");
    id = v;
    return Status::ok();
  }
  if (m.ids_only)
    return Status::fail(std::string(flag) +
                        ": the model has no tokenizer here (--ids): give the token as #ID");
  std::vector<int> ids;
  if (Status st = encode_for(m, spec, ids); !st.is_ok())
    return Status::fail(std::string(flag) + ": " + st.error);
  if (ids.size() == 1) {
    id = ids[0];
    return Status::ok();
  }
  std::string how;
  for (std::size_t i = 0; i < ids.size() && i < 8; ++i)
    how += " " + quote(m.bpe.bytes(ids[i])) + " (#" + std::to_string(ids[i]) + ")";
  if (ids.size() > 8) how += " ...";
  return Status::fail(std::string(flag) + ": " + quote(spec) + " is " + std::to_string(ids.size()) +
                      " tokens here, not one" + (ids.empty() ? "" : ":" + how) + "; give one token or #ID");
}

Status parse_ids(const std::string& spec, int vocab_size, int context_length, std::vector<int>& ids) {
  ids.clear();
  std::string list = spec + ",";
  for (std::size_t i = 0, end; (end = list.find(',', i)) != std::string::npos; i = end + 1) {
    const std::string item = list.substr(i, end - i);
    const std::optional<int> id = parse_decimal_int(item);
    if (!id) return Status::fail("--ids: " + quote(item) + " is not a token id");
    if (*id < 0 || *id >= vocab_size)
      return Status::fail("--ids: " + std::to_string(*id) + " is outside the vocabulary (0.." +
                          std::to_string(vocab_size - 1) + ")");
    if (static_cast<int>(ids.size()) == context_length)
      return Status::fail("--ids: more than the context length " + std::to_string(context_length) + " ids");
    ids.push_back(*id);
  }
  return Status::ok();
}

Status parse_layers(const std::string& spec, int n_layers, bool& all, std::vector<int>& layers) {
  all = false;
  layers.clear();
  if (spec == "all") {
    all = true;
    return Status::ok();
  }
  if (spec == "none" || spec.empty()) return Status::ok();
  const std::string outside = " is outside the model's layers 0.." + std::to_string(n_layers - 1);
  std::size_t i = 0;
  while (i <= spec.size()) {
    const std::size_t end = std::min(spec.find(',', i), spec.size());
    const std::string_view part = std::string_view(spec).substr(i, end - i);
    // "N" or "N-M" in plain decimal digits; a number past INT_MAX is out of range, never wrapped.
    const std::size_t dash = part.find('-');
    const std::string_view first = part.substr(0, dash),
                           last = dash == std::string_view::npos ? first : part.substr(dash + 1);
    const auto digits = [](std::string_view s) {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (!digits(first) || !digits(last))
      return Status::fail("--layers: " + quote(part) + " is not a layer number or a range such as 2-5");
    const std::optional<int> a = parse_decimal_int(first), b = parse_decimal_int(last);
    if (!a || !b || *b >= n_layers) return Status::fail("--layers: " + quote(part) + outside);
    if (*b < *a)
      return Status::fail("--layers: " + quote(part) + " is an empty range: give the lower layer first");
    for (int l = *a; l <= *b; ++l)
      if (std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
    i = end + 1;
  }
  std::sort(layers.begin(), layers.end());
  return Status::ok();
}

int run_model_cli(const CLI::App& app, const ConfigArgs& a, const ModelArgs& m, const std::string& vocab_dir,
                  bool json, std::ostream& out, std::ostream& err) {
  const auto fail = [&err](const Status& st) {
    err << "attnviz-cli: " << st.error << "\n";
    return 1;
  };
  // --heads gives a weights file without config.json its head count; a seeded size has its preset's.
  const ModelRef ref = classify_model(m.model);
  const bool seeded = ref.kind == ModelRefKind::preset;
  if (Status st = refuse_layer_flags(app, !seeded); !st.is_ok()) return fail(st);
  if (a.heads && *a.heads < 1)
    return fail(Status::fail("--heads must be 1 or more (got " + std::to_string(*a.heads) + ")"));
  if (app.count("--inputs") > 0) return fail(Status::fail("--inputs does not apply to --model: give --text"));
  ModelSpec spec;
  spec.model = m.model;
  spec.seed = a.seed;
  if (m.train && a.eval) return fail(Status::fail("--train and --eval contradict each other: give one"));
  // Loaded weights run as from_pretrained gives them (eval); the book's freshly built GPTModel is an
  // nn.Module in training mode.
  spec.options.train = seeded ? !a.eval : m.train;
  const std::optional<DropoutRng> flavour = parse_dropout_rng(a.rng);
  if (!flavour) return fail(Status::fail("unknown dropout rng " + quote(a.rng) + " (cpu, mkl)"));
  spec.options.dropout_rng = *flavour;
  if (Status st = exec_from_args(a, spec.options.exec); !st.is_ok()) return fail(st);
  spec.heads = a.heads.value_or(0);
  spec.vocab_dir = vocab_dir;
  spec.memory_budget = a.memory_budget ? a.memory_budget : available_memory_bytes();
  if (m.top_k < 0) return fail(Status::fail("--top-k must be 0 or more"));
  if (m.generate < 0) return fail(Status::fail("--generate must be 0 or more"));
  if (seeded)  // before its parameters are drawn
    if (Status st = check_generation(1, m.generate, ref.preset.context_length); !st.is_ok()) return fail(st);

  GptRequest req;
  req.top_k = m.top_k;
  std::string keep = m.keep + ",";
  for (std::size_t i = 0, end; (end = keep.find(',', i)) != std::string::npos; i = end + 1) {
    const std::string item = keep.substr(i, end - i);
    if (item == "weights" || item.empty()) continue;
    if (item == "scores") {
      req.stages |= kStageScores;
    } else if (item == "dropped") {
      req.stages |= kStageDropped;
    } else if (item == "context") {
      req.qkv = true;
    } else if (item == "residuals") {
      req.residuals = true;
    } else if (item == "logits") {
      req.all_logits = true;
    } else {
      return fail(Status::fail("--keep: unknown item " + quote(item) +
                               " (weights, scores, dropped, context, residuals, logits)"));
    }
  }

  if (m.download) {  // the hub, asked for: Ctrl-C stops it as it stops a generation
    const GenerateControl& ctl = m.control;
    bool stopped = false;
    if (ctl.generating) ctl.generating->store(true);
    const Status st =
        download_model(m.model, "attnviz-cli", err, ctl.progress, ctl.stop, spec.model, stopped);
    if (ctl.generating) ctl.generating->store(false);
    if (!st.is_ok()) {
      fail(st);
      return stopped ? kStoppedStatus : 1;
    }
  }
  OpenedModel model;
  spec.ids_only = !m.ids.empty();
  if (spec.ids_only && !vocab_dir.empty())
    return fail(Status::fail("--ids takes no tokenizer: leave --vocab out"));
  if (Status st = open_model(spec, model); !st.is_ok()) return fail(st);
  const GptConfig& c = model.model.weights().config;
  if (Status st = parse_layers(m.layers.empty() ? (json ? "all" : "none") : m.layers, c.n_layers,
                               req.all_layers, req.layers);
      !st.is_ok())
    return fail(st);
  std::vector<int> ids;
  const bool id_labels = !m.ids.empty();
  if (id_labels) {
    if (app.count("--text") > 0) return fail(Status::fail("--ids and --text both give the tokens: give one"));
    if (Status st = parse_ids(m.ids, c.vocab_size, c.context_length, ids); !st.is_ok()) return fail(st);
  } else if (Status st = encode_for(model, a.text, ids); !st.is_ok()) {
    return fail(st);
  }
  if (Status st = check_generation(static_cast<std::int64_t>(ids.size()), m.generate, c.context_length);
      !st.is_ok())
    return fail(st);
  // The causal tools: their target, ablated heads and corrupted text, checked before anything runs.
  LensRequest lr;
  std::vector<int> corrupted;
  const bool patching = app.count("--patch") > 0 || app.count("--patch-ids") > 0;
  const bool causal = m.lens || m.attribute || app.count("--ablate") > 0 || patching;
  if (!causal) {
    for (const char* flag : {"--target", "--versus", "--position", "--ablation"})
      if (app.count(flag) > 0)
        return fail(Status::fail(std::string(flag) + " needs --lens, --attribute, --ablate or --patch"));
  } else {
    if (m.generate > 0)
      return fail(
          Status::fail("--lens, --attribute, --ablate and --patch measure one text: leave --generate out"));
    if (model.model.options().train && c.drop_rate > 0)
      return fail(
          Status::fail(std::string("--lens, --attribute, --ablate and --patch need eval mode, without ") +
                       "dropout: " + (seeded ? "give --eval" : "leave --train out")));
    lr.lens = m.lens, lr.attribute = m.attribute, lr.top_k = m.top_k;
    lr.target.position = m.position;
    if (app.count("--target") > 0)
      if (Status st = parse_token(model, m.target, "--target", lr.target.target); !st.is_ok())
        return fail(st);
    if (app.count("--versus") > 0)
      if (Status st = parse_token(model, m.versus, "--versus", lr.target.versus); !st.is_ok())
        return fail(st);
    if (m.position < -1 || m.position >= static_cast<int>(ids.size()))
      return fail(Status::fail("--position " + std::to_string(m.position) + " is past the text's " +
                               std::to_string(ids.size()) + " tokens (0.." + std::to_string(ids.size() - 1) +
                               ")"));
    if (Status st = check_target(c, static_cast<int>(ids.size()), lr.target); !st.is_ok()) return fail(st);
    if (app.count("--ablate") > 0)
      if (Status st = parse_heads(m.ablate, lr.ablation.heads); !st.is_ok())
        return fail(Status::fail("--ablate: " + st.error));
    if (m.ablation == "mean")
      lr.ablation.kind = AblationKind::mean;
    else if (m.ablation != "zero")
      return fail(Status::fail("--ablation: " + quote(m.ablation) + " is not zero or mean"));
    if (Status st = check_ablation(c, lr.ablation); !st.is_ok())
      return fail(Status::fail("--ablate: " + st.error));
    if (app.count("--patch") > 0 && app.count("--patch-ids") > 0)
      return fail(Status::fail("--patch and --patch-ids both give the corrupted text: give one"));
    if (app.count("--patch-ids") > 0) {
      if (Status st = parse_ids(m.patch_ids, c.vocab_size, c.context_length, corrupted); !st.is_ok())
        return fail(Status::fail(st.error.rfind("--ids", 0) == 0 ? "--patch-ids" + st.error.substr(5)
                                                                 : "--patch-ids: " + st.error));
    } else if (app.count("--patch") > 0) {
      if (id_labels)
        return fail(Status::fail(
            "--patch takes text, and the tokens came as --ids: give the corrupted ids with --patch-ids"));
      if (Status st = encode_for(model, m.patch, corrupted); !st.is_ok())
        return fail(Status::fail("--patch: " + st.error));
    }
    if (patching && corrupted.size() != ids.size())
      return fail(Status::fail("the corrupted text is " + token_count(corrupted.size()) +
                               " and the clean one " + std::to_string(ids.size()) +
                               ": patching needs the same count"));
  }
  // What the pass keeps (the longest one, when generating), and the JSON text of it, before anything runs.
  {
    const int T = static_cast<int>(
        std::min<std::int64_t>(static_cast<std::int64_t>(ids.size()) + m.generate, c.context_length));
    const std::uint64_t budget = a.memory_budget ? a.memory_budget : available_memory_bytes();
    if (Status st = check_pass_memory(c, T, req, json, budget, a.memory_budget != 0); !st.is_ok())
      return fail(st);
    // The captures the causal tools keep beside the pass; patching's own, when they fit too.
    const std::uint64_t pass = pass_memory(c, T, req, json), captures = lens_bytes(c, T, lr, req);
    if (causal && budget && sat_add(pass, captures) > budget)
      return fail(Status::fail("the causal tools need " + format_bytes(captures) + " beside the pass's " +
                               format_bytes(pass) + ", more than the " + format_bytes(budget) +
                               (a.memory_budget ? " of --memory-budget" : " available")));
    if (patching && budget && sat_add(sat_add(pass, captures), patching_bytes(c, T)) > budget) {
      err << "attnviz-cli: note: patching needs " << format_bytes(patching_bytes(c, T))
          << " more for its two runs' captures, more than the " << format_bytes(budget)
          << (a.memory_budget ? " of --memory-budget" : " available") << " holds: no patching maps\n";
      corrupted.clear();
    }
  }
  GptResult r;
  std::vector<int> generated;
  bool stopped = false;
  if (m.generate > 0) {
    const GenerateControl& ctl = m.control;
    // Dropout makes every step a full pass (no rows are reused).
    Progress progress(err, ctl.progress, static_cast<int>(ids.size()), m.generate, c.context_length,
                      model.model.options().train && c.drop_rate > 0);
    const auto step = [&](int done) {
      progress.step(done);
      stopped = ctl.stop && ctl.stop->load() && done < m.generate;
      return !stopped;
    };
    if (ctl.generating) ctl.generating->store(true);
    const Status st = model.model.generate(ids, m.generate, req, generated, r, step);
    if (ctl.generating) ctl.generating->store(false);
    progress.finish();
    if (!st.is_ok()) return fail(st);
  } else if (!causal) {
    if (Status st = model.model.forward(ids, req, r); !st.is_ok()) return fail(st);
  }
  CausalLens causal_lens;
  LensResult lens;
  Patching patched;
  if (causal) {
    if (Status st = causal_lens.run(model.model, ids, req, lr, r, lens); !st.is_ok()) return fail(st);
    if (!corrupted.empty()) {
      const GenerateControl& ctl = m.control;
      const auto step = [&](int, int) {
        stopped = ctl.stop && ctl.stop->load();
        return !stopped;
      };
      if (ctl.generating) ctl.generating->store(true);
      const Status st = patch(model.model, ids, corrupted, lens.target, lr.ablation, patched, step);
      if (ctl.generating) ctl.generating->store(false);
      if (stopped) {
        err << "attnviz-cli: stopped by Ctrl-C while patching: no output\n";
        return kStoppedStatus;
      }
      if (!st.is_ok()) return fail(st);
    }
  }
  GptJsonLens lens_keys;
  if (causal) {
    lens_keys.result = &lens;
    lens_keys.ablation = &lr.ablation;
    if (!corrupted.empty()) lens_keys.patching = &patched, lens_keys.patched = lens.target;
  }
  const std::vector<int>* gen = m.generate > 0 ? &generated : nullptr;
  if (json) {
    GptJsonModel info{model.model.weights().source, model.seeded, model.seed, id_labels};
    out << gpt_result_to_json(r, model.model.weights(), info, model.bpe, gen, causal ? &lens_keys : nullptr)
        << '\n';
  } else {
    print_text(out, model, r, gen, id_labels);
    if (causal) print_lens(out, model, r, lens_keys, id_labels);
  }
  out.flush();
  if (!out) return fail(Status::fail("cannot write the output"));
  if (stopped) {
    err << "attnviz-cli: stopped by Ctrl-C after " << generated.size() << " of " << m.generate
        << " tokens: the output holds those\n";
    return kStoppedStatus;
  }
  // What nothing could check (the layer count without a config.json), once the run is done: a refusal stays
  // its one line.
  if (!model.model.weights().note.empty()) err << "attnviz-cli: note: " << model.model.weights().note << "\n";
  return 0;
}

}  // namespace attnviz
