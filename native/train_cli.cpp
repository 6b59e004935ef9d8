// attnviz-cli train: the book's chapter-5 pretraining run on the command line (train_cli.hpp).
#include "train_cli.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attnviz/head_kinds.hpp"
#include "attnviz/io/bpe.hpp"
#include "attnviz/io/checkpoint.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/model_source.hpp"
#include "attnviz/io/train_text.hpp"
#include "attnviz/text.hpp"
#include "attnviz/train.hpp"
#include "config_args.hpp"

namespace attnviz {
namespace {

// --resume from a GPT-2 model folder that holds no optimizer.safetensors: its weights are trained on.
constexpr const char* kModelOnly =
    " is a GPT-2 model, not a training checkpoint (no optimizer.safetensors): training starts from its "
    "weights with a new optimizer";

// Holds GenerateControl::generating set from training through the checkpoint's write: Ctrl-C then only
// records the stop (cli_main's handler), so that the write finishes whole before the run exits 130.
class Busy {
 public:
  explicit Busy(std::atomic<bool>* flag) : flag_(flag) {
    if (flag_) flag_->store(true);
  }
  ~Busy() { release(); }
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
  void release() {
    if (flag_) flag_->store(false);
    flag_ = nullptr;
  }

 private:
  std::atomic<bool>* flag_;
};

constexpr const char* kBookText = "Every effort moves you";
// A text file larger than this is refused before it is read: the book's story is 20 kB, and 1 GB of text is
// about 250M tokens, far past what a step-at-a-time CPU run gets through.
constexpr std::size_t kMaxTextBytes = std::size_t{1} << 30;

struct TrainArgs {
  std::string file, text, preset = "gpt2-small", out_dir, resume, vocab_dir, start_context = kBookText;
  std::optional<int> vocab_size, context_length, emb_dim, heads, layers, stride;
  std::optional<double> drop_rate;
  bool qkv_bias = false, attention_only = false, json = false;
  int epochs = 10, batch_size = 2, eval_freq = 5, eval_iter = 5, new_tokens = 50;
  double lr = 4e-4, weight_decay = 0.1, train_ratio = 0.9;
  std::optional<int> warmup_steps;
  double initial_lr = 3e-5, min_lr = 1e-6, max_norm = 0.0;
  std::string task = "book", dropout_rng = "cpu";
  int steps = 5000, fixed_distance = 0;
  std::optional<int> stop_after;
};

// The progress line on a terminal: step, tokens per second, time left. It goes before any other line. A
// resumed run gives the step and tokens it starts from, so that the rate and the time left count only the
// steps this process takes.
class TrainProgress {
 public:
  TrainProgress(std::ostream& err, bool shown, int total_steps, int first_step = 0,
                std::int64_t first_tokens = 0)
      : err_(err), shown_(shown), total_(total_steps), first_(first_step), first_tokens_(first_tokens) {}
  ~TrainProgress() { clear(); }
  void clear() {
    if (drawn_) err_ << "\r\033[K" << std::flush;
    drawn_ = false;
  }
  void step(int done, std::int64_t tokens) {
    if (!shown_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    drawn_ = true;
    const double spent = std::chrono::duration<double>(now - start_).count();
    const double left = done > first_ ? spent / (done - first_) * (total_ - done) : 0.0;
    char buf[200];
    std::snprintf(
        buf, sizeof buf,
        "\rattnviz-cli: step %d of %d, %.0f tokens/s, about %.0f s left (Ctrl-C stops and saves)\033[K", done,
        total_, spent > 0 ? static_cast<double>(tokens - first_tokens_) / spent : 0.0, left);
    err_ << buf << std::flush;
  }

 private:
  std::ostream& err_;
  bool shown_;
  int total_, first_;
  std::int64_t first_tokens_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_;
};

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';  // the book prints decoded_text.replace("\n", " ")
  return s;
}

Status positive(const char* flag, int v) {
  if (v >= 1) return Status::ok();
  return Status::fail(std::string(flag) + " is " + std::to_string(v) + ": it must be at least 1");
}

Status positive(const char* flag, double v) {
  if (std::isfinite(v) && v > 0) return Status::ok();
  return Status::fail(std::string(flag) + " must be a positive number");
}

Status config_of(const CLI::App& app, const TrainArgs& a, TrainConfig& c) {
  const std::optional<GptConfig> preset = find_gpt_preset(a.preset);
  if (!preset)
    return Status::fail("--preset " + quote(a.preset) +
                        " is not gpt2-small, gpt2-medium, gpt2-large or gpt2-xl");
  c.gpt = *preset;
  c.gpt.context_length = 256;  // the book's chapter 5 shortens GPT_CONFIG_124M's context
  if (a.vocab_size) c.gpt.vocab_size = *a.vocab_size;
  if (a.context_length) c.gpt.context_length = *a.context_length;
  if (a.emb_dim) c.gpt.d_model = *a.emb_dim;
  if (a.heads) c.gpt.n_heads = *a.heads;
  if (a.layers) c.gpt.n_layers = *a.layers;
  if (a.drop_rate) c.gpt.drop_rate = *a.drop_rate;
  if (app.count("--qkv-bias")) c.gpt.qkv_bias = a.qkv_bias;
  c.gpt.attention_only = a.attention_only;
  return validate(c);
}

// Parameters, gradients, both AdamW moments and one step's activations, checked before anything is drawn.
Status check_train_memory(const TrainConfig& cfg, int batch_size, std::uint64_t given_budget) {
  const TrainMemory need = train_memory(cfg, batch_size, cfg.gpt.context_length);
  const std::uint64_t budget = given_budget ? given_budget : available_memory_bytes();
  const std::string breakdown = "parameters " + format_bytes(need.params) + ", gradients " +
                                format_bytes(need.grads) + ", AdamW moments " + format_bytes(need.moments) +
                                ", activations " + format_bytes(need.activations);
  return check_memory(need.total(), budget, given_budget != 0, breakdown);
}

// The flags that only one task reads, refused by name with the other.
constexpr const char* kBookOnlyFlags[] = {"file",           "--text",       "--epochs",        "--stride",
                                          "--train-ratio",  "--eval-iter",  "--start-context", "--new-tokens",
                                          "--warmup-steps", "--initial-lr", "--min-lr",        "--max-norm",
                                          "--vocab",        "--preset"};
constexpr const char* kInductionOnlyFlags[] = {"--steps", "--fixed-distance"};

// The model's sizes: a resumed run takes its checkpoint's, and refuses these.
constexpr const char* kSizeFlags[] = {"--preset",    "--vocab-size", "--context-length",
                                      "--emb-dim",   "--heads",      "--layers",
                                      "--drop-rate", "--qkv-bias",   "--attention-only"};

Status no_size_flags(const CLI::App& app) {
  for (const char* flag : kSizeFlags)
    if (app.count(flag) > 0)
      return Status::fail(std::string(flag) + " does not apply to --resume: the checkpoint has its sizes");
  return Status::ok();
}

std::string head_list(const std::vector<std::vector<HeadScores>>& heads) {
  std::string s;
  char buf[80];
  for (std::size_t l = 0; l < heads.size(); ++l)
    for (std::size_t h = 0; h < heads[l].size(); ++h) {
      const HeadScores& x = heads[l][h];
      if (x.kind == HeadKind::none) continue;
      std::snprintf(buf, sizeof buf, "%sL%zu h%zu %s %.2f", s.empty() ? "" : ", ", l, h, to_string(x.kind),
                    static_cast<double>(x.score(x.kind)));
      s += buf;
    }
  return s.empty() ? "no labelled heads" : s;
}

nlohmann::json heads_json(const std::vector<std::vector<HeadScores>>& heads) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : heads) {
    nlohmann::json row = nlohmann::json::array();
    for (const HeadScores& x : layer)
      row.push_back({{"kind", to_string(x.kind)},
                     {"previous", x.previous},
                     {"first", x.first},
                     {"self", x.self},
                     {"broad", x.broad},
                     {"induction", x.induction}});
    layers.push_back(row);
  }
  return layers;
}

// attnviz-cli train --task induction: the synthetic task on a small GPT, with every head's kind on probes it
// never trained on, as the model view labels them. --resume continues a run from its checkpoint's run state
// (the step, both generators, the task and the optimizer's settings) exactly; a checkpoint without one
// restarts the task's stream from --seed at step 0.
int run_induction(const CLI::App& app, const TrainArgs& a, const ConfigArgs& exec_args, const Exec& exec,
                  std::ostream& out, std::ostream& err, const GenerateControl& control) {
  const auto fail = [&err](const Status& st) {
    err << "attnviz-cli train: " << st.error << "\n";
    return 1;
  };
  for (const char* flag : kBookOnlyFlags)
    if (app.count(flag) > 0)
      return fail(Status::fail(std::string(flag) + " does not apply to --task induction"));
  for (auto [flag, v] : {std::pair{"--batch-size", a.batch_size}, {"--eval-freq", a.eval_freq}})
    if (app.count(flag) > 0)
      if (Status st = positive(flag, v); !st.is_ok()) return fail(st);
  if (app.count("--lr") > 0)
    if (Status st = positive("--lr", a.lr); !st.is_ok()) return fail(st);
  if (app.count("--weight-decay") > 0 && !(a.weight_decay >= 0 && std::isfinite(a.weight_decay)))
    return fail(Status::fail("--weight-decay must be 0 or more"));
  if (a.stop_after && *a.stop_after < 1) return fail(Status::fail("--stop-after must be at least 1"));
  TrainConfig cfg;
  // the recipe (induction_model): attention-only, 2 layers of 4 heads, no dropout (the Train panel's too)
  cfg.gpt = induction_model();
  cfg.gpt.vocab_size = a.vocab_size.value_or(cfg.gpt.vocab_size);
  cfg.gpt.context_length = a.context_length.value_or(cfg.gpt.context_length);
  if (a.emb_dim) cfg.gpt.d_model = *a.emb_dim;
  if (a.heads) cfg.gpt.n_heads = *a.heads;
  if (a.layers) cfg.gpt.n_layers = *a.layers;
  if (a.drop_rate) cfg.gpt.drop_rate = *a.drop_rate;
  if (app.count("--qkv-bias")) cfg.gpt.qkv_bias = a.qkv_bias;
  cfg.gpt.attention_only =
      app.count("--attention-only") + app.count("--no-attention-only") > 0 ? a.attention_only : true;
  if (Status st = validate(cfg); !st.is_ok()) return fail(st);
  if (Status st = positive("--steps", a.steps); !st.is_ok()) return fail(st);
  // A resumed run's model (and its sizes) is its checkpoint's; a new one is drawn from --seed below.
  TrainModel model;
  AdamW opt;
  bool resumed_optimizer = false;
  std::optional<RunState> resumed;
  if (!a.resume.empty()) {
    if (Status st = no_size_flags(app); !st.is_ok()) return fail(st);
    if (Status st = read_checkpoint(a.resume, model, opt, resumed_optimizer, resumed); !st.is_ok())
      return fail(st);
    cfg = model.config();
  }
  InductionRun run;
  run.task.vocab = cfg.gpt.vocab_size;
  run.task.tokens = cfg.gpt.context_length;
  run.task.max_repeat = std::min(run.task.max_repeat, run.task.tokens / 2);
  run.task.min_repeat = std::min(run.task.min_repeat, run.task.max_repeat);
  run.task.fixed_distance = a.fixed_distance;
  run.batch_size = app.count("--batch-size") ? a.batch_size : 32;
  run.steps = a.steps;
  run.eval_freq = app.count("--eval-freq") ? a.eval_freq : 50;
  run.lr = app.count("--lr") ? a.lr : 2e-3;
  run.weight_decay = app.count("--weight-decay") ? a.weight_decay : 0.0;
  int first_induction = -1;

  // A resumed run goes on as it was: the flags not given take its values, and one given with another value
  // is refused (--steps, the run's total, may grow; --eval-freq only changes which steps print).
  const bool continued = resumed && resumed->task == RunTask::induction;
  if (continued) {
    const InductionRunState& n = resumed->induction;
    const auto same = [&](const char* flag, const std::string& given, const std::string& was) {
      if (app.count(flag) == 0 || given == was) return Status::ok();
      return Status::fail(std::string(flag) + " " + given + " is not the run's " + was + " in " +
                          quote(a.resume) + ": --resume continues the same run (leave " + flag +
                          " out to keep its value)");
    };
    for (const Status& st :
         {same("--batch-size", std::to_string(a.batch_size), std::to_string(resumed->batch_size)),
          same("--lr", shortest_decimal(a.lr), shortest_decimal(n.lr)),
          same("--weight-decay", shortest_decimal(a.weight_decay), shortest_decimal(n.weight_decay)),
          same("--fixed-distance", std::to_string(a.fixed_distance), std::to_string(n.task.fixed_distance))})
      if (!st.is_ok()) return fail(st);
    run.task = n.task;
    run.batch_size = resumed->batch_size, run.lr = n.lr, run.weight_decay = n.weight_decay;
    run.steps = app.count("--steps") ? a.steps : n.total_steps;
    if (!app.count("--eval-freq")) run.eval_freq = n.eval_freq;
    if (run.steps <= n.steps)
      return fail(Status::fail(quote(a.resume) + "'s run has taken " + std::to_string(n.steps) +
                               " steps: --steps (the run's total) must be more"));
    run.start_step = n.steps;
    first_induction = n.first_induction;
  }
  if (Status st = validate(run.task); !st.is_ok()) return fail(st);
  if (Status st = check_train_memory(cfg, run.batch_size, exec_args.memory_budget); !st.is_ok())
    return fail(st);
  if (!a.resume.empty() && !resumed_optimizer)
    err << "attnviz-cli train: " << quote(a.resume) << kModelOnly
        << ", the task's data and dropout stream from --seed at step 0\n";
  else if (!a.resume.empty() && !continued)
    err << "attnviz-cli train: " << quote(a.resume)
        << (resumed ? " holds the run state of a book run, not of --task induction"
                    : " has no run state (an older checkpoint)")
        << ": its model and optimizer go on, the task's data and dropout stream restarts from --seed at step "
           "0\n";

  // The generators: the model's (dropout's) and the task's batches', drawn from --seed or continued.
  TorchGenerator g(exec_args.seed), data(exec_args.seed + 1);
  if (a.resume.empty())
    if (Status st = TrainModel::build(cfg, g, model); !st.is_ok()) return fail(st);
  model.dropout_rng = *parse_dropout_rng(a.dropout_rng);
  if (continued) {
    if (Status st = g.set_state(resumed->rng.data(), resumed->rng.size()); !st.is_ok()) return fail(st);
    const std::vector<std::uint8_t>& d = resumed->induction.data_rng;
    if (Status st = data.set_state(d.data(), d.size()); !st.is_ok()) return fail(st);
    if (!app.count("--dropout-rng")) model.dropout_rng = resumed->dropout_rng;
  }
  model.exec = exec;

  // --out is checked before the run's hours are spent: a folder that can be written, and no file there the
  // checkpoint would not write but a loader would read as its own.
  if (!a.out_dir.empty())
    if (Status st = check_checkpoint_out(a.out_dir, ""); !st.is_ok()) return fail(st);
  const std::int64_t step_tokens = static_cast<std::int64_t>(run.batch_size) * run.task.tokens;
  TrainProgress progress(err, control.progress && !a.json, run.steps, run.start_step,
                         run.start_step * step_tokens);
  bool stopped = false;
  int steps_done = run.start_step;
  using nlohmann::json;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double induction_seconds = -1.0;  // stays negative when the head came before a resume
  std::vector<std::vector<HeadScores>> last;
  const auto point = [&](const InductionPoint& p) {
    progress.clear();
    steps_done = p.step;
    last = p.heads;
    bool induction = false;
    for (const auto& layer : p.heads)
      for (const HeadScores& x : layer) induction = induction || x.kind == HeadKind::induction;
    if (induction && first_induction < 0) first_induction = p.step, induction_seconds = seconds();
    if (a.json) {
      out << json{{"event", "eval"},      {"step", p.step},
                  {"loss", p.loss},       {"in_context", p.in_context},
                  {"seconds", seconds()}, {"heads", heads_json(p.heads)}}
                 .dump()
          << '\n';
    } else {
      char buf[120];
      std::snprintf(buf, sizeof buf, "Step %06d: loss %.3f, in-context score %+.3f: ", p.step, p.loss,
                    p.in_context);
      out << buf << head_list(p.heads) << '\n';
    }
    out.flush();
    stopped = control.stop && control.stop->load();
    return !stopped;
  };
  const auto after_step = [&](int step) {
    steps_done = step;
    progress.step(step, step * step_tokens);
    stopped = control.stop && control.stop->load();
    return !stopped && !(a.stop_after && step >= *a.stop_after);
  };
  Busy busy(control.generating);
  const Status st = train_induction(model, opt, run, g, data, point, after_step);
  progress.clear();
  if (!st.is_ok()) return fail(st);
  RunState state;
  state.task = RunTask::induction;
  state.rng = g.state();
  state.dropout_rng = model.dropout_rng;
  state.batch_size = run.batch_size;
  state.induction = {run.task, steps_done,       run.steps,       run.eval_freq,
                     run.lr,   run.weight_decay, first_induction, data.state()};
  if (!a.out_dir.empty())
    if (Status w = write_checkpoint(a.out_dir, model, opt, "", &state); !w.is_ok()) return fail(w);
  busy.release();
  stopped = stopped || (control.stop && control.stop->load());  // Ctrl-C during the write
  if (a.json) {
    json done = {{"event", "done"},
                 {"steps", steps_done},
                 {"seconds", seconds()},
                 {"stopped", stopped},
                 {"resumed_optimizer", resumed_optimizer},
                 {"resumed_run", continued},
                 {"heads", heads_json(last)}};
    done["first_induction_step"] = first_induction >= 0 ? json(first_induction) : json(nullptr);
    done["first_induction_seconds"] = induction_seconds >= 0 ? json(induction_seconds) : json(nullptr);
    if (!a.out_dir.empty()) done["checkpoint"] = to_valid_utf8(a.out_dir);
    out << done.dump() << '\n';
  } else {
    char buf[160];
    if (first_induction >= 0 && induction_seconds >= 0)
      std::snprintf(buf, sizeof buf, "the first induction head appeared by step %d, after %.1f s\n",
                    first_induction, induction_seconds);
    else if (first_induction >= 0)
      std::snprintf(buf, sizeof buf, "the first induction head appeared by step %d, before the resume\n",
                    first_induction);
    else
      std::snprintf(buf, sizeof buf, "no induction head after %d steps\n", steps_done);
    out << buf;
    if (!a.out_dir.empty()) out << "checkpoint: " << quote(a.out_dir) << "\n";
  }
  out.flush();
  if (stopped) {
    err << "attnviz-cli train: stopped after step " << steps_done << " of " << run.steps
        << (a.out_dir.empty() ? "" : "; the model so far is saved") << "\n";
    return kStoppedStatus;
  }
  return 0;
}

}  // namespace

int run_train_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                  const GenerateControl& control) {
  CLI::App app{
      "attnviz-cli train: pretrain the book's GPTModel as its chapter 5 does (train_model_simple), step for "
      "step\n"
      "as PyTorch computes it, and print the book's lines. With no flags: gpt2-small's sizes, context 256,\n"
      "batch 2, 10 epochs, AdamW (lr 4e-4, weight decay 0.1), evaluation every 5 steps over 5 batches, seed "
      "123.",
      "attnviz-cli train"};
  TrainArgs a;
  ConfigArgs exec_args;
  app.add_option("file", a.file,
                 "UTF-8 text to train on (the first 90% of its characters; the rest validates)");
  app.add_option("--text", a.text, "the text itself, instead of a file")->excludes("file");
  app.add_option("--preset", a.preset, "sizes: gpt2-small, gpt2-medium, gpt2-large, gpt2-xl")
      ->capture_default_str();
  app.add_option("--vocab-size", a.vocab_size, "vocabulary size (default: the preset's, 50257)")
      ->transform(decimal_int());
  app.add_option("--context-length", a.context_length, "context length (default: 256, as the book trains)")
      ->transform(decimal_int());
  app.add_option("--emb-dim", a.emb_dim, "embedding size d_model")->transform(decimal_int());
  app.add_option("--heads", a.heads, "attention heads")->transform(decimal_int());
  app.add_option("--layers", a.layers, "transformer blocks")->transform(decimal_int());
  app.add_option("--drop-rate", a.drop_rate, "dropout rate (default 0.1)")->transform(decimal_number());
  app.add_flag("--qkv-bias,!--no-qkv-bias", a.qkv_bias, "biases on the query, key and value projections");
  app.add_flag("--attention-only,!--no-attention-only", a.attention_only,
               "blocks without norm2 and the feed-forward network (the default of --task induction)");
  app.add_option("--epochs", a.epochs, "passes over the training windows")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_option("--batch-size", a.batch_size, "windows per step")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_option("--stride", a.stride, "tokens between window starts (default: the context length)")
      ->transform(decimal_int());
  app.add_option("--lr", a.lr, "AdamW's learning rate (the peak with --warmup-steps)")
      ->capture_default_str()
      ->transform(decimal_number());
  app.add_option("--weight-decay", a.weight_decay, "AdamW's weight decay")
      ->capture_default_str()
      ->transform(decimal_number());
  app.add_option("--eval-freq", a.eval_freq, "evaluate every this many steps")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_option("--eval-iter", a.eval_iter, "batches each evaluation averages")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_option("--train-ratio", a.train_ratio, "share of the text's characters to train on")
      ->capture_default_str()
      ->transform(decimal_number());
  app.add_option("--seed", exec_args.seed, "torch.manual_seed before the model is built")
      ->capture_default_str()
      ->transform(torch_seed());
  app.add_option("--start-context", a.start_context, "the text each epoch's greedy sample continues")
      ->capture_default_str();
  app.add_option("--new-tokens", a.new_tokens, "tokens each sample generates")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_option("--warmup-steps", a.warmup_steps,
                 "the book's appendix D: linear warmup over this many steps, then cosine decay")
      ->transform(decimal_int());
  app.add_option("--initial-lr", a.initial_lr, "with --warmup-steps: the first step's learning rate")
      ->capture_default_str()
      ->transform(decimal_number());
  app.add_option("--min-lr", a.min_lr, "with --warmup-steps: the learning rate the cosine ends at")
      ->capture_default_str()
      ->transform(decimal_number());
  app.add_option("--max-norm", a.max_norm,
                 "clip the gradients' norm to this after the warmup (0: no clipping)")
      ->transform(decimal_number());
  app.add_option("--out", a.out_dir,
                 "write the trained model here (a folder --model opens, and --resume reads)");
  app.add_option("--resume", a.resume,
                 "continue from this checkpoint folder: its model, AdamW state and, when it has one, its run "
                 "(the generators, where the run stands and its settings, which flags left out keep: --lr, "
                 "--weight-decay, the schedule's flags, --eval-freq and --fixed-distance may not change, nor "
                 "--epochs under a schedule; a book run given another --batch-size restarts its stream)");
  app.add_option("--stop-after", a.stop_after,
                 "stop after this step of the run (counted from its start), as Ctrl-C does, writing --out")
      ->transform(decimal_int());
  app.add_option("--dropout-rng", a.dropout_rng,
                 "how dropout draws its masks: cpu (PyTorch without MKL, the book's outputs) or mkl (the "
                 "official x86-64 wheels); a resumed run keeps its checkpoint's unless given")
      ->capture_default_str();
  app.add_option("--vocab", a.vocab_dir, "the tokenizer's folder (default: GPT-2's)");
  app.add_flag("--json", a.json, "JSON lines: one per evaluation, per sample, and one at the end");
  app.add_option("--isa", exec_args.isa, "kernels: auto, scalar (the reference), sse4.2, avx2, avx512, neon")
      ->capture_default_str();
  app.add_option("--threads", exec_args.threads, "worker threads (0: every hardware thread)")
      ->transform(decimal_int());
  app.add_option("--task", a.task,
                 "book: the book's chapter 5 on a text; induction: the synthetic task that grows "
                 "induction heads")
      ->capture_default_str();
  app.add_option("--steps", a.steps,
                 "--task induction: the run's optimizer steps in all (with --resume: its checkpoint's "
                 "unless given)")
      ->capture_default_str()
      ->transform(decimal_int());
  app.add_option("--fixed-distance", a.fixed_distance,
                 "--task induction: always repeat this many positions later (teaches a fixed look-back, not "
                 "induction)")
      ->transform(decimal_int());
  add_memory_budget_option(app, exec_args);
  if (const std::optional<int> done = parse_command_line(app, args, out, err)) return *done;
  const auto fail = [&err](const Status& st) {
    err << "attnviz-cli train: " << st.error << "\n";
    return 1;
  };

  if (a.task != "book" && a.task != "induction")
    return fail(Status::fail("--task " + quote(a.task) + " is not book or induction"));
  if (!parse_dropout_rng(a.dropout_rng))
    return fail(Status::fail("--dropout-rng " + quote(a.dropout_rng) + " is not cpu or mkl"));
  if (a.task == "induction") {
    Exec exec;
    if (Status st = exec_from_args(exec_args, exec); !st.is_ok()) return fail(st);
    return run_induction(app, a, exec_args, exec, out, err, control);
  }
  for (const char* flag : kInductionOnlyFlags)
    if (app.count(flag) > 0) return fail(Status::fail(std::string(flag) + " needs --task induction"));

  // Flags first, before anything is read.
  for (auto [flag, v] : {std::pair{"--epochs", a.epochs},
                         {"--batch-size", a.batch_size},
                         {"--eval-freq", a.eval_freq},
                         {"--eval-iter", a.eval_iter}})
    if (Status st = positive(flag, v); !st.is_ok()) return fail(st);
  if (a.new_tokens < 0) return fail(Status::fail("--new-tokens must be 0 or more"));
  if (Status st = positive("--lr", a.lr); !st.is_ok()) return fail(st);
  if (!(a.weight_decay >= 0 && std::isfinite(a.weight_decay)))
    return fail(Status::fail("--weight-decay must be 0 or more"));
  if (!(a.train_ratio > 0 && a.train_ratio < 1))
    return fail(Status::fail("--train-ratio must be between 0 and 1"));
  if (!(a.max_norm >= 0 && std::isfinite(a.max_norm)))
    return fail(Status::fail("--max-norm must be 0 or more"));
  if (a.warmup_steps && *a.warmup_steps < 0) return fail(Status::fail("--warmup-steps must be 0 or more"));
  for (auto [flag, v] : {std::pair{"--initial-lr", a.initial_lr}, {"--min-lr", a.min_lr}})
    if (!(v >= 0 && std::isfinite(v))) return fail(Status::fail(std::string(flag) + " must be 0 or more"));
  if (a.stop_after && *a.stop_after < 1) return fail(Status::fail("--stop-after must be at least 1"));
  if (a.file.empty() && !app.count("--text"))
    return fail(Status::fail("give a text file to train on (or --text)"));
  Exec exec;
  if (Status st = exec_from_args(exec_args, exec); !st.is_ok()) return fail(st);

  // The model: a checkpoint's, or the book's GPTModel drawn from the seed.
  TrainConfig cfg;
  if (!a.resume.empty()) {
    if (Status st = no_size_flags(app); !st.is_ok()) return fail(st);
  } else if (Status st = config_of(app, a, cfg); !st.is_ok()) {
    return fail(st);
  } else if (Status mem = check_train_memory(cfg, a.batch_size, exec_args.memory_budget); !mem.is_ok()) {
    return fail(mem);
  }

  // The text, as the book reads it, and its tokens.
  std::string raw = a.text;
  if (!a.file.empty())
    if (Status st = read_untrusted_file(a.file, kMaxTextBytes, raw); !st.is_ok()) return fail(st);
  const std::string where = a.file.empty() ? std::string("--text") : quote(a.file);
  if (raw.empty()) return fail(Status::fail(where + " is empty"));
  std::string text, train_text, val_text;
  if (Status st = read_text_universal(raw, text); !st.is_ok())
    return fail(Status::fail(where + ": " + st.error));
  split_text(text, a.train_ratio, train_text, val_text);
  Bpe bpe;
  const std::string vocab_dir = a.vocab_dir.empty() ? default_vocab_dir() : a.vocab_dir;
  if (Status st = Bpe::load_dir(vocab_dir, bpe); !st.is_ok()) return fail(st);
  std::vector<int> train_ids, val_ids, start_ids;
  // tiktoken's encode(text, allowed_special={"<|endoftext|>"}), as the book's GPTDatasetV1 and
  // text_to_token_ids call it; each part on its own, as the book splits the text before tokenizing
  if (Status st = encode_training_text(bpe, train_text, train_ids); !st.is_ok()) return fail(st);
  if (Status st = encode_training_text(bpe, val_text, val_ids); !st.is_ok()) return fail(st);
  if (Status st = encode_training_text(bpe, a.start_context, start_ids); !st.is_ok()) return fail(st);

  TrainModel model;
  AdamW opt;
  bool resumed_optimizer = false;
  std::optional<RunState> resumed;
  int batch_size = a.batch_size;
  if (!a.resume.empty()) {
    if (Status st = read_checkpoint(a.resume, model, opt, resumed_optimizer, resumed); !st.is_ok())
      return fail(st);
    cfg = model.config();
    // a book run's batch size, unless given (another one is other data: the stream restarts, below)
    if (resumed && resumed->task == RunTask::book && !app.count("--batch-size"))
      batch_size = resumed->batch_size;
    if (Status st = check_train_memory(cfg, batch_size, exec_args.memory_budget); !st.is_ok())
      return fail(st);
  }
  const int ctx = cfg.gpt.context_length, stride = a.stride.value_or(ctx);
  if (Status st = positive("--stride", stride); !st.is_ok()) return fail(st);
  for (const std::vector<int>* ids : {&train_ids, &val_ids, &start_ids})
    for (int id : *ids)
      if (id >= cfg.gpt.vocab_size)
        return fail(Status::fail("the tokenizer gives id " + std::to_string(id) +
                                 ", outside the model's vocabulary of " +
                                 std::to_string(cfg.gpt.vocab_size)));
  if (start_ids.empty() && a.new_tokens > 0) return fail(Status::fail("--start-context is empty"));
  const Windows train = make_windows(train_ids, ctx, stride), val = make_windows(val_ids, ctx, stride);
  if (train.size() < batch_size)
    return fail(Status::fail("the training text (" + std::to_string(train_ids.size()) +
                             " tokens) is too short for one batch of " + std::to_string(batch_size) +
                             " windows of " + std::to_string(ctx + 1) +
                             " tokens: give more text, or a smaller --context-length or --batch-size"));
  if (val.size() == 0)
    return fail(Status::fail("the validation text (the last " +
                             std::to_string(static_cast<int>(std::lround((1 - a.train_ratio) * 100))) +
                             "%: " + std::to_string(val_ids.size()) +
                             " tokens) is too short for one window of " + std::to_string(ctx + 1) +
                             " tokens: give more text, or a smaller --context-length"));

  // The generator and the run's position: drawn from --seed, or a checkpoint's run continued exactly.
  TorchGenerator g(exec_args.seed);
  TrainPosition position;
  const std::uint64_t data_hash = run_data_hash(train, val);
  if (a.resume.empty())
    if (Status st = TrainModel::build(cfg, g, model); !st.is_ok()) return fail(st);
  model.dropout_rng = *parse_dropout_rng(a.dropout_rng);
  if (a.resume.empty()) {
    // a new run: the generator stands where building the model left it
  } else if (!resumed_optimizer) {
    err << "attnviz-cli train: " << quote(a.resume) << kModelOnly
        << ", the data and dropout stream from --seed at epoch 1\n";
  } else if (!resumed || resumed->task != RunTask::book) {
    err << "attnviz-cli train: " << quote(a.resume)
        << (resumed ? " holds the run state of --task induction, not of a book run"
                    : " has no run state (an older checkpoint)")
        << ": its model and optimizer go on, the data and dropout stream restarts from --seed at epoch 1\n";
    resumed.reset();
  } else if (resumed->batch_size != batch_size || resumed->train_windows != train.size() ||
             resumed->val_windows != val.size() || resumed->data_hash != data_hash) {
    err << "attnviz-cli train: " << quote(a.resume) << "'s run was over other data ("
        << resumed->train_windows << " training windows of batch " << resumed->batch_size << ", against "
        << train.size() << " of " << batch_size
        << " now, or other tokens): the data and dropout stream restarts from --seed at epoch 1\n";
    resumed.reset();
  } else {
    if (Status st = g.set_state(resumed->rng.data(), resumed->rng.size()); !st.is_ok()) return fail(st);
    position = resumed->position;
    if (!app.count("--dropout-rng")) model.dropout_rng = resumed->dropout_rng;
  }
  model.exec = exec;

  // The run: from the flags, or the checkpoint's run as it was (below).
  TrainRun run;
  run.batch_size = batch_size, run.epochs = a.epochs, run.eval_freq = a.eval_freq,
  run.eval_iter = a.eval_iter;
  run.new_tokens = a.new_tokens, run.lr = a.lr, run.weight_decay = a.weight_decay, run.start_ids = start_ids;
  if (a.warmup_steps || a.max_norm > 0) {
    run.use_schedule = true;
    run.schedule.warmup_steps = a.warmup_steps.value_or(0);
    run.schedule.initial_lr = a.initial_lr, run.schedule.min_lr = a.min_lr,
    run.schedule.max_norm = a.max_norm;
  }
  const int batches = train.size() / batch_size;
  if (resumed && resumed->settings) {
    // A resumed run goes on as it was, as the induction task's does: the flags not given take its values,
    // and one given with another value is refused. --epochs, the run's total, may change only while no
    // schedule is over it; --eval-iter only changes the printed losses (--eval-freq also changes the
    // generator's draws: an evaluation begins a new iteration of each loader).
    const BookRunSettings& b = *resumed->settings;
    const auto same = [&](const char* flag, const std::string& given, const std::string& was,
                          const std::string& why = "") {
      if (app.count(flag) == 0 || given == was) return Status::ok();
      return Status::fail(std::string(flag) + " " + given + " is not the run's " + was + " in " +
                          quote(a.resume) + ": " + (why.empty() ? "--resume continues the same run" : why) +
                          " (leave " + flag + " out to keep its value)");
    };
    const std::string schedule_why = "its learning rate decays over the run's " + std::to_string(b.epochs) +
                                     " epochs (" + std::to_string(b.epochs * batches) +
                                     " steps), so --resume keeps the total";
    std::vector<Status> checks = {
        same("--lr", shortest_decimal(a.lr), shortest_decimal(b.lr)),
        same("--weight-decay", shortest_decimal(a.weight_decay), shortest_decimal(b.weight_decay)),
        same("--eval-freq", std::to_string(a.eval_freq), std::to_string(b.eval_freq),
             "an evaluation draws from the generator, so --resume continues the same run")};
    if (b.use_schedule) {
      checks.push_back(same("--epochs", std::to_string(a.epochs), std::to_string(b.epochs), schedule_why));
      checks.push_back(same("--warmup-steps", std::to_string(a.warmup_steps.value_or(0)),
                            std::to_string(b.schedule.warmup_steps)));
      checks.push_back(
          same("--initial-lr", shortest_decimal(a.initial_lr), shortest_decimal(b.schedule.initial_lr)));
      checks.push_back(same("--min-lr", shortest_decimal(a.min_lr), shortest_decimal(b.schedule.min_lr)));
      checks.push_back(
          same("--max-norm", shortest_decimal(a.max_norm), shortest_decimal(b.schedule.max_norm)));
    } else {
      for (const char* flag : {"--warmup-steps", "--initial-lr", "--min-lr", "--max-norm"})
        if (app.count(flag) > 0)
          checks.push_back(Status::fail(std::string(flag) + " does not apply to " + quote(a.resume) +
                                        ": its run's learning rate is constant, and --resume continues the "
                                        "same run"));
    }
    for (const Status& st : checks)
      if (!st.is_ok()) return fail(st);
    run.lr = b.lr, run.weight_decay = b.weight_decay, run.eval_freq = b.eval_freq;
    run.use_schedule = b.use_schedule, run.schedule = b.schedule;
    if (!app.count("--epochs")) run.epochs = b.epochs;
    if (!app.count("--eval-iter")) run.eval_iter = b.eval_iter;
  } else if (resumed) {
    err << "attnviz-cli train: " << quote(a.resume)
        << "'s run state does not record its learning rate, weight decay or schedule (written before they "
           "were): it goes on with the flags given\n";
  }
  if (resumed && resumed->position.epoch >= run.epochs)
    return fail(Status::fail(quote(a.resume) + "'s run has done " + std::to_string(resumed->position.epoch) +
                             " epochs: --epochs (the run's total) must be more"));
  if (static_cast<std::int64_t>(run.epochs) * batches > 0x7FFFFFFF)
    return fail(Status::fail("--epochs " + std::to_string(run.epochs) + " of " + std::to_string(batches) +
                             " batches is more than 2147483647 steps"));
  const int total_steps = run.epochs * batches;
  if (run.use_schedule && run.schedule.warmup_steps > total_steps)
    return fail(Status::fail("--warmup-steps " + std::to_string(run.schedule.warmup_steps) +
                             " is more than the run's " + std::to_string(total_steps) + " steps"));
  // --out is checked before the run's hours are spent: a folder that can be written, the tokenizer saved
  // there, and no file there the checkpoint would not write but a loader would read as its own.
  if (!a.out_dir.empty())
    if (Status st = check_checkpoint_out(a.out_dir, vocab_dir); !st.is_ok()) return fail(st);
  const int first_step = position.global_step + 1;
  TrainProgress progress(err, control.progress && !a.json, total_steps, first_step, position.tokens_seen);
  bool stopped = false;
  int steps_done = first_step;
  std::int64_t tokens = position.tokens_seen;
  using nlohmann::json;
  TrainEvents events;
  events.eval = [&](int epoch, int step, double tl, double vl, std::int64_t seen) {
    progress.clear();
    if (a.json) {
      out << json{{"event", "eval"},  {"epoch", epoch}, {"step", step},
                  {"train_loss", tl}, {"val_loss", vl}, {"tokens_seen", seen}}
                 .dump()
          << '\n';
    } else {
      char buf[160];
      std::snprintf(buf, sizeof buf, "Ep %d (Step %06d): Train loss %.3f, Val loss %.3f\n", epoch, step, tl,
                    vl);
      out << buf;
    }
    out.flush();
  };
  events.sample = [&](int epoch, const std::vector<int>& ids) {
    progress.clear();
    const std::string s = one_line(bpe.decode(ids));
    if (a.json)
      out << json{{"event", "sample"}, {"epoch", epoch}, {"text", to_valid_utf8(s)}}.dump() << '\n';
    else
      out << s << '\n';
    out.flush();
  };
  events.step = [&](int, int step, double, std::int64_t seen) {
    steps_done = step + 1;
    tokens = seen;
    progress.step(steps_done, seen);
    stopped = control.stop && control.stop->load();
    return !stopped && !(a.stop_after && steps_done >= *a.stop_after);
  };
  const auto start = std::chrono::steady_clock::now();
  Busy busy(control.generating);
  const Status st = train_book(model, opt, train, val, run, g, events, position);
  progress.clear();
  if (!st.is_ok()) return fail(st);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RunState state;
  state.position = position;
  state.rng = g.state();
  state.dropout_rng = model.dropout_rng;
  state.batch_size = batch_size, state.train_windows = train.size(), state.val_windows = val.size();
  state.data_hash = data_hash;
  state.settings = BookRunSettings{run.epochs,       run.eval_freq,    run.eval_iter, run.lr,
                                   run.weight_decay, run.use_schedule, run.schedule};
  if (!a.out_dir.empty())
    if (Status w = write_checkpoint(a.out_dir, model, opt, vocab_dir, &state); !w.is_ok()) return fail(w);
  busy.release();
  stopped = stopped || (control.stop && control.stop->load());  // Ctrl-C during the write
  if (a.json) {
    json done = {{"event", "done"},
                 {"steps", steps_done},
                 {"tokens_seen", tokens},
                 {"seconds", seconds},
                 {"stopped", stopped},
                 {"resumed_optimizer", resumed_optimizer},
                 {"resumed_run", resumed.has_value()}};
    if (!a.out_dir.empty()) done["checkpoint"] = to_valid_utf8(a.out_dir);
    out << done.dump() << '\n';
  } else if (!a.out_dir.empty()) {
    out << "checkpoint: " << quote(a.out_dir) << "\n";
  }
  out.flush();
  if (stopped) {
    err << "attnviz-cli train: stopped after step " << steps_done << " of " << total_steps
        << (a.out_dir.empty() ? "" : "; the model so far is saved") << "\n";
    return kStoppedStatus;
  }
  return 0;
}

}  // namespace attnviz
