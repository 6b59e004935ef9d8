#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "attnviz/engine.hpp"
#include "attnviz/io/bpe.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/json_io.hpp"
#include "attnviz/io/model_ref.hpp"
#include "attnviz/io/model_source.hpp"
#include "attnviz/saturating.hpp"
#include "config_args.hpp"
#include "hub_download.hpp"
#include "model_cli.hpp"
#include "terminal.hpp"
#include "train_cli.hpp"

namespace attnviz {
namespace {

constexpr int kShownTokens = 16;  // a terminal shows at most this many rows and columns of a T x T matrix
constexpr int kShownCols = 8;     // and this many output columns
// --inputs is at most 8192 rows of 16384 numbers; 64 MB of JSON holds far more than any accepted matrix.
constexpr std::size_t kMaxInputsBytes = std::size_t{64} << 20;

// One matrix cell: a space, then the value right-aligned in 8 columns; a wider value takes more, so cells
// never run together. A value that rounds to -0 prints as 0.
std::string cell(float x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", static_cast<double>(x));
  std::string v = std::strcmp(buf, "-0.0000") == 0 ? "0.0000" : buf;
  return " " + std::string(v.size() < 8 ? 8 - v.size() : 0, ' ') + v;
}

// The shortest decimal that reads back as the same double (0.9999999 stays 0.9999999, not 1), and -0 as 0.
std::string number(double x) {
  char buf[40];
  x += 0.0;
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

// A float in 9 significant digits, enough for any float (the dropout scale 1/(1-p) as the kernels apply
// it: 10000000 for p = 0.9999999, not 1e+07).
std::string number(float x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(x));
  return buf;
}

void print_matrix(std::ostream& out, const Result& r, const HeadSquares& m, int head, bool mark_masked) {
  const int T = r.tokens_count(), shown = std::min(T, kShownTokens);
  out << std::string(10, ' ');
  for (int j = 0; j < shown; ++j)
    out << ' ' << pad(token_label(r.tokens[static_cast<std::size_t>(j)]), 8, false);
  out << '\n';
  for (int i = 0; i < shown; ++i) {
    out << pad(token_label(r.tokens[static_cast<std::size_t>(i)]), 10, true);
    for (int j = 0; j < shown; ++j) {
      const float x = m.at(head, i, j);
      out << (mark_masked && r.masked(i, j) ? std::string("        -") : cell(x));
    }
    out << '\n';
  }
  if (shown < T) out << "  (showing " << shown << " of " << T << " tokens; --json prints every value)\n";
}

// Tokens are shown by their labels, as GPT-2's tokenizer writes them: a control character (an escape
// sequence would reach the terminal) as \xNN, broken UTF-8 as <0xNN>.
void print_text(std::ostream& out, const Result& r) {
  const Config& c = r.config;
  const Shape& s = r.shape;
  out << "attnviz " << to_string(c.variant) << ": d_in " << c.d_in << ", d_out " << c.d_out << ", " << s.heads
      << (s.heads == 1 ? " head" : " heads") << " of dim " << s.head_dim << ", context length "
      << c.context_length << ", dropout " << number(c.dropout) << (s.dropout ? " (" : "")
      << (s.dropout ? to_string(c.dropout_rng) : "") << (s.dropout ? ")" : "") << ", seed " << c.seed
      << (c.train ? ", train" : ", eval") << "\n";
  char timing[160];
  std::snprintf(timing, sizeof timing, "computed with %s kernels on %d thread%s in %.3f ms\n",
                to_string(r.isa), r.threads, r.threads == 1 ? "" : "s", r.seconds * 1e3);
  out << timing;
  out << "tokens (" << r.tokens_count() << "):";
  for (const std::string& t : r.tokens) out << ' ' << token_label(t);
  out << "\n";
  const std::string how =
      s.has_weights ? (s.causal ? "softmax(q k^T / sqrt(" + std::to_string(s.head_dim) + ") + causal mask)"
                                : "softmax(q k^T / sqrt(" + std::to_string(s.head_dim) + "))")
                    : "softmax(x x^T)";
  for (int h = 0; h < s.heads; ++h) {
    out << "\nhead " << h << " attention weights, " << how << ":\n";
    print_matrix(out, r, r.weights, h, s.causal);
    if (s.dropout && !r.dropped.empty()) {
      out << "head " << h << " after dropout (p = " << number(c.dropout) << ", kept weights x "
          << number(dropout_scale(c.dropout)) << "):\n";
      print_matrix(out, r, r.dropped, h, s.causal);
    }
  }
  const int T = r.tokens_count(), width = r.output.shape[1];
  const int rows = std::min(T, kShownTokens), cols = std::min(width, kShownCols);
  out << "\noutput (" << T << " x " << width << (s.out_proj ? ", after out_proj" : "") << "):\n";
  for (int i = 0; i < rows; ++i) {
    out << pad(token_label(r.tokens[static_cast<std::size_t>(i)]), 10, true);
    for (int j = 0; j < cols; ++j) out << cell(r.output.at(i, j));
    if (cols < width) out << "  ...";
    out << '\n';
  }
  if (rows < T || cols < width)
    out << "  (showing " << rows << " x " << cols << "; --json prints every value)\n";
}

// attnviz-cli download ORG/NAME[@REV]: the model into the Hugging Face cache, its snapshot folder on stdout
// (for --model, or any program that reads the cache).
int run_download_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                     const GenerateControl& control) {
  CLI::App app{
      "attnviz-cli download: fetch a model from the Hugging Face hub into its cache ($HF_HUB_CACHE, else "
      "$HF_HOME/hub, else ~/.cache/huggingface/hub): config.json, the tokenizer's files and the safetensors "
      "weights. $HF_ENDPOINT replaces https://huggingface.co; $HF_TOKEN opens gated and private models. An "
      "interrupted download resumes when run again. Prints the snapshot folder.",
      "attnviz-cli download"};
  std::string model;
  app.add_option("model", model, "ORG/NAME or ORG/NAME@REV (a branch, tag or commit)")->required();
  if (const std::optional<int> done = parse_command_line(app, args, out, err)) return *done;
  std::string snapshot;
  bool stopped = false;
  if (control.generating) control.generating->store(true);
  const Status st =
      download_model(model, "attnviz-cli", err, control.progress, control.stop, snapshot, stopped);
  if (control.generating) control.generating->store(false);
  if (!st.is_ok()) {
    err << "attnviz-cli: " << st.error << "\n";
    return stopped ? kStoppedStatus : 1;
  }
  out << snapshot << '\n';
  out.flush();
  return out ? 0 : 1;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const GenerateControl& control) {
  if (!args.empty() && args[0] == "train")
    return run_train_cli(std::vector<std::string>(args.begin() + 1, args.end()), out, err, control);
  if (!args.empty() && args[0] == "download")
    return run_download_cli(std::vector<std::string>(args.begin() + 1, args.end()), out, err, control);
  CLI::App app{
      "attnviz-cli: multi-head causal self-attention, every intermediate tensor of every head.\n"
      "Numbers match PyTorch for the same seed (torch.manual_seed).",
      "attnviz-cli"};
  ConfigArgs a;
  std::string inputs_path;
  bool json = false;
  add_config_options(app, a);
  add_memory_budget_option(app, a);
  app.add_option("--inputs", inputs_path, "JSON file with T rows of d_in numbers, instead of --text")
      ->excludes(a.text_option);
  app.add_flag("--json", json, "print one JSON object with every tensor");
  bool tokenize = false;
  std::string vocab_dir;
  app.add_flag("--tokenize", tokenize,
               "print the GPT-2 token ids of --text as a JSON array, and stop (with --model: its tokenizer)");
  app.add_option("--vocab", vocab_dir,
                 "folder with the vocabulary for --tokenize and --model (default: a model folder's own, else "
                 "$ATTNVIZ_VOCAB_DIR, else GPT-2's, installed beside attnviz-cli)");

  ModelArgs model;
  model.control = control;
  add_model_options(app, model);

  if (const std::optional<int> done = parse_command_line(app, args, out, err)) return *done;
  const auto fail = [&err](const Status& st) {
    err << "attnviz-cli: " << st.error << "\n";
    return 1;
  };
  constexpr const char* kModelFlags[] = {"--layers",   "--keep",  "--top-k",
                                         "--generate", "--train", "--download"};
  if (tokenize) {
    for (const char* flag : kModelFlags)
      if (app.count(flag) > 0) return fail(Status::fail(std::string(flag) + " does not apply to --tokenize"));
  } else if (!model.model.empty()) {
    return run_model_cli(app, a, model, vocab_dir, json, out, err);
  }
  for (const char* flag : kModelFlags)
    if (app.count(flag) > 0) return fail(Status::fail(std::string(flag) + " needs --model"));

  if (tokenize) {
    // With --model, the model's own tokenizer, as --model takes it (--vocab, else a folder's own vocabulary,
    // else GPT-2's), without loading its weights.
    std::string dir = vocab_dir;
    const ModelRef ref = classify_model(model.model);
    if (!model.model.empty() && ref.kind != ModelRefKind::preset) {
      std::string path;  // a Hugging Face name: its snapshot in the cache
      if (Status st = resolve_model_path(ref, path); !st.is_ok()) return fail(st);
      std::error_code ec;
      if (!std::filesystem::exists(path, ec))
        return fail(Status::fail("cannot read " + quote(path) + ": no such file or folder"));
      if (dir.empty() && std::filesystem::is_directory(path, ec) && holds_vocabulary(path)) dir = path;
    }
    Bpe bpe;
    std::vector<int> ids;
    if (Status st = Bpe::load_dir(dir.empty() ? default_vocab_dir() : dir, bpe); !st.is_ok()) return fail(st);
    if (Status st = bpe.encode(a.text, ids); !st.is_ok()) return fail(st);
    out << '[';
    for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
    out << "]\n";
    out.flush();
    return 0;
  }

  Config c;
  Exec exec;
  if (Status st = config_from_args(a, c, exec); !st.is_ok()) return fail(st);
  // Only what is printed is kept: JSON has the raw scores, the weights and the dropped weights, the terminal
  // the weights and the dropped ones.
  c.stages = json ? kStageScores | kStageDropped : kStageDropped;

  // The tokens first (the inputs' rows, or the text's words), so that the memory is known before the
  // inputs, the parameters or any tensor are made.
  Input in;
  int tokens = 0;
  std::uint64_t token_bytes = 0;
  if (!inputs_path.empty()) {
    std::string body;
    std::vector<std::vector<double>> rows;
    if (Status st = read_untrusted_file(inputs_path, kMaxInputsBytes, body); !st.is_ok()) return fail(st);
    // (a context length out of range is validate()'s to name, below)
    const std::size_t max_rows = c.context_length > 0 ? static_cast<std::size_t>(c.context_length) : SIZE_MAX;
    if (Status st = parse_input_rows(body, rows, max_rows); !st.is_ok()) return fail(st);
    if (Status st = input_from_rows(rows, in); !st.is_ok()) return fail(st);
    if (a.d_in && *a.d_in != in.x.shape[1]) {
      return fail(Status::fail("--d-in " + std::to_string(*a.d_in) + " does not match the inputs' " +
                               std::to_string(in.x.shape[1]) + " columns"));
    }
    c.d_in = in.x.shape[1];  // the file decides the input width
    tokens = in.x.shape[0];
    for (const std::string& t : in.tokens) token_bytes += t.size();
  } else {
    std::vector<std::string> words;
    if (Status st = split_words(a.text, words); !st.is_ok()) return fail(st);
    tokens = static_cast<int>(std::min<std::size_t>(words.size(), INT_MAX));
    for (const std::string& w : words) token_bytes += w.size();
  }
  if (Status st = validate(c, tokens); !st.is_ok()) return fail(st);

  // What the run takes (the engine's count), the input matrix, and with --json the parameters' copy in
  // PyTorch's layouts and the text.
  const RunMemory m = run_memory(c, tokens, exec);
  const std::uint64_t tensors = sat_add(
      m.tensors, std::uint64_t{4} * static_cast<std::uint64_t>(tokens) * static_cast<std::uint64_t>(c.d_in));
  const std::uint64_t output =
      json ? sat_add(4 * parameter_count(c), result_json_bound(c, tokens, token_bytes)) : 0;
  const std::uint64_t needed = sat_add(sat_add(m.params, tensors), output);
  std::string breakdown = "parameters " + format_bytes(m.params) + ", tensors " + format_bytes(tensors);
  if (json) breakdown += ", JSON " + format_bytes(output);
  const std::uint64_t budget = a.memory_budget ? a.memory_budget : available_memory_bytes();
  if (Status st = check_memory(needed, budget, a.memory_budget != 0, breakdown); !st.is_ok()) return fail(st);

  if (inputs_path.empty()) {
    if (Status st = input_from_text(a.text, c, in); !st.is_ok()) return fail(st);
  }

  Result r;
  Params params;
  if (Status st = run(c, in, r, &params, exec); !st.is_ok()) return fail(st);
  if (json) {
    out << result_to_json(r, state_dict(r.config, params)) << '\n';
  } else {
    print_text(out, r);
  }
  out.flush();
  if (!out) return fail(Status::fail("cannot write the output"));
  return 0;
}

}  // namespace attnviz
