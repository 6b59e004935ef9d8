// The Train panel's session run in slices (advance(budget), a few pieces a frame) against the engine's own
// loops run whole (train_book and train_induction: loss() and backward() with the head in one piece): the
// same losses, evaluations and parameters bit for bit, whatever the budget, for both recipes (the book's on
// GPT-2's 50,257-token vocabulary, its head cut into pieces) and the custom one; a pause in the middle of a
// forward pass or of an evaluation, then Step or Reset.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "attnviz/io/checkpoint.hpp"
#include "attnviz/viz/train.hpp"

using namespace attnviz;
using namespace attnviz::viz;
namespace fs = std::filesystem;

namespace {

using Tokenize = std::function<Status(const std::string&, std::vector<int>&)>;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Status bytes(const std::string& t, std::vector<int>& ids) {
  ids.assign(t.begin(), t.end());
  return Status::ok();
}

// What a run gave: each step's loss, the evaluations in order, and its parameters and AdamW's moments at the
// end, as a checkpoint holds them.
struct Run {
  std::vector<double> losses, val_losses, in_context, train_evals;
  std::vector<std::vector<std::vector<HeadScores>>> heads;
  std::string files;
};

// model.safetensors's bytes and AdamW's moments and step count, read back from a checkpoint (the session's
// optimizer file also carries the run state, which the engine's loops do not write).
std::string files_of(const fs::path& dir) {
  TrainModel m;
  AdamW opt;
  bool has_optimizer = false;
  REQUIRE(read_checkpoint(dir.string(), m, opt, has_optimizer).is_ok());
  REQUIRE(has_optimizer);
  std::string out = read_file(dir / "model.safetensors") + std::to_string(opt.steps);
  for (const GptTensors* t : {&opt.exp_avg, &opt.exp_avg_sq})
    t->each([&](const std::string& name, const Tensor& x) {
      out += name;
      out.append(reinterpret_cast<const char*>(x.ptr()), x.size() * sizeof(float));
    });
  return out;
}

std::string files_of(const TrainModel& m, const AdamW& opt, const fs::path& dir) {
  REQUIRE(write_checkpoint(dir.string(), m, opt, "").is_ok());
  return files_of(dir);
}

// train_book on the session's settings, the head in one piece.
Run book_oracle(const TrainSettings& s, int steps, const fs::path& dir) {
  Run r;
  TrainModel m;
  TorchGenerator g(s.seed);
  REQUIRE(TrainModel::build(s.config, g, m).is_ok());
  m.head_piece_macs = 1e18;
  std::string text, first, second;
  REQUIRE(read_text_universal(s.text, text).is_ok());
  split_text(text, 0.9, first, second);
  std::vector<int> train_ids, val_ids;
  REQUIRE(bytes(first, train_ids).is_ok());
  REQUIRE(bytes(second, val_ids).is_ok());
  const int ctx = s.config.gpt.context_length;
  const Windows train = make_windows(train_ids, ctx, ctx), val = make_windows(val_ids, ctx, ctx);
  TrainRun run;
  run.batch_size = s.batch_size, run.epochs = 1000, run.eval_freq = s.eval_freq, run.eval_iter = s.eval_iter;
  run.new_tokens = 0, run.lr = s.lr, run.weight_decay = s.weight_decay;
  AdamW opt;
  TrainEvents ev;
  ev.eval = [&](int, int, double train_loss, double val_loss, std::int64_t) {
    r.train_evals.push_back(train_loss);
    r.val_losses.push_back(val_loss);
  };
  ev.step = [&](int, int, double loss, std::int64_t) {
    r.losses.push_back(loss);
    return static_cast<int>(r.losses.size()) < steps;
  };
  REQUIRE(train_book(m, opt, train, val, run, g, ev).is_ok());
  REQUIRE(r.losses.size() == static_cast<std::size_t>(steps));
  r.files = files_of(m, opt, dir);
  return r;
}

// train_induction on the session's settings (its task as reset() set it), evaluating after every step.
Run induction_oracle(const TrainSettings& s, int steps, const fs::path& dir) {
  Run r;
  TrainModel m;
  TorchGenerator g(s.seed), data(s.seed + 1);
  REQUIRE(TrainModel::build(s.config, g, m).is_ok());
  m.head_piece_macs = 1e18;
  InductionRun run;
  run.task = s.task, run.batch_size = s.batch_size, run.steps = steps, run.eval_freq = 1;
  run.lr = s.lr, run.weight_decay = s.weight_decay;
  AdamW opt;
  const auto point = [&](const InductionPoint& p) {
    if (p.step == 0) return true;
    r.losses.push_back(p.loss);
    r.in_context.push_back(p.in_context);
    r.heads.push_back(p.heads);
    return true;
  };
  REQUIRE(train_induction(m, opt, run, g, data, point).is_ok());
  r.files = files_of(m, opt, dir);
  return r;
}

// The session's evaluations, in order.
std::vector<double> evaluations(const TrainSession& t, bool in_context) {
  std::vector<double> out;
  for (const TrainPoint& p : t.points()) {
    const double v = in_context ? p.in_context : p.val_loss;
    if (!std::isnan(v)) out.push_back(v);
  }
  return out;
}

// The session's results against the oracle's (run as many steps): every step's loss and evaluation, and the
// files after the last step.
void check_against(const TrainSession& t, const Run& want, const fs::path& dir) {
  const int done = t.steps_done();
  REQUIRE(want.losses.size() == static_cast<std::size_t>(done));
  for (int i = 0; i < done; ++i) {
    CAPTURE(i);
    CHECK(t.points()[static_cast<std::size_t>(i)].loss == want.losses[static_cast<std::size_t>(i)]);
  }
  const bool induction = t.settings().recipe == TrainRecipe::induction;
  const std::vector<double> got = evaluations(t, induction);
  const std::vector<double>& theirs = induction ? want.in_context : want.val_losses;
  REQUIRE(!got.empty());
  CHECK(got == theirs);
  if (!induction) {  // the book's printed Train loss too
    std::vector<double> train_evals;
    for (const TrainPoint& p : t.points())
      if (!std::isnan(p.eval_train_loss)) train_evals.push_back(p.eval_train_loss);
    CHECK(train_evals == want.train_evals);
  }
  if (induction)  // a snapshot after every step: probe_heads's scores, as train_induction reports them
    for (const TrainSnapshot& snap : t.snapshots()) {
      if (snap.step == 0) continue;
      const auto& heads = want.heads[static_cast<std::size_t>(snap.step - 1)];
      for (std::size_t l = 0; l < heads.size(); ++l)
        for (std::size_t h = 0; h < heads[l].size(); ++h) {
          CHECK(snap.heads[l][h].induction == heads[l][h].induction);
          CHECK(snap.heads[l][h].previous == heads[l][h].previous);
          CHECK(snap.heads[l][h].kind == heads[l][h].kind);
        }
    }
  REQUIRE(t.write_checkpoint(dir.string()).is_ok());
  CHECK(files_of(dir) == want.files);
}

TrainSettings settings_for(TrainRecipe r) {
  TrainSettings s = recipe_settings(r);
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat, and the dog sat on the log. ";
  if (r == TrainRecipe::induction) {
    s.eval_freq = 1, s.snapshot_freq = 1;
  } else if (r == TrainRecipe::custom) {  // the book's loop, with dropout, on a small vocabulary of bytes
    s.config.gpt = GptConfig{256, 16, 32, 4, 2, 0.1, false};
    s.eval_iter = 2, s.eval_freq = 3, s.snapshot_freq = 2;
    s.text = text;
  } else {  // the book's recipe as the panel has it (GPT-2's vocabulary), on bytes
    s.text = text;
  }
  return s;
}

}  // namespace

TEST_CASE("train slices: every budget gives the engine's whole steps bit for bit, for every recipe") {
  const fs::path dir = fs::temp_directory_path() / "attnviz_slices_test";
  for (TrainRecipe r : {TrainRecipe::induction, TrainRecipe::custom, TrainRecipe::book}) {
    const std::string recipe = to_string(r);
    CAPTURE(recipe);
    const TrainSettings s = settings_for(r);
    const int steps = r == TrainRecipe::book ? 6 : 5;  // the book's: evaluations after steps 1 and 6
    const std::vector<double> budgets =
        r == TrainRecipe::book ? std::vector<double>{0.0, 20.0} : std::vector<double>{0.0, 2.0, 15.0};
    for (double budget : budgets) {
      CAPTURE(budget);
      TrainSession t;
      REQUIRE(t.reset(s, bytes).is_ok());
      int slices = 0;
      while (t.steps_done() < steps) {
        REQUIRE(t.advance(budget).is_ok());
        REQUIRE(++slices < 100000);
      }
      if (t.mid_step()) REQUIRE(t.step().is_ok());
      if (budget == 0.0) {  // one piece a slice: every piece ran alone
        const std::vector<std::string> names = t.piece_names();
        CHECK(slices > steps * static_cast<int>(names.size() / 2));
        if (r == TrainRecipe::book) {  // the head cut into pieces each way, the blocks in halves
          CHECK(std::count(names.begin(), names.end(), "forward head rows 0-20") == 1);
          CHECK(std::count(names.begin(), names.end(), "backward head dW rows 0-8192") == 1);
          CHECK(std::count(names.begin(), names.end(), "backward block 2 ff") == 1);
          CHECK(std::count(names.begin(), names.end(), "evaluation head rows 120-128") == 1);
        }
        CHECK(t.piece_ms().size() == names.size());
      }
      // a slice may have run on into later steps: the oracle runs as many
      const Run want = r == TrainRecipe::induction
                           ? induction_oracle(t.settings(), t.steps_done(), dir / "oracle")
                           : book_oracle(s, t.steps_done(), dir / "oracle");
      check_against(t, want, dir / "sliced");
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("train slices: a pause in a forward pass or an evaluation, then Step or Reset") {
  const fs::path dir = fs::temp_directory_path() / "attnviz_slices_pause";
  const TrainSettings s = settings_for(TrainRecipe::book);
  TrainSession t;
  REQUIRE(t.reset(s, bytes).is_ok());
  const Run want = book_oracle(s, 2, dir / "oracle");
  // the pieces of the first step: its forward and backward stages and the update, then its evaluation
  REQUIRE(t.step().is_ok());
  std::vector<std::string> names = t.piece_names();
  const auto count = [&](const std::string& prefix) {
    return static_cast<int>(std::count_if(names.begin(), names.end(),
                                          [&](const std::string& n) { return n.rfind(prefix, 0) == 0; }));
  };
  const int forward = count("forward "), backward = count("backward "), evaluation = count("evaluation ");
  CHECK(forward == 1 + 2 + 1 + 7);  // embeddings, 2 blocks, the pack, 128 rows of logits in pieces of 20
  CHECK(backward == 1 + 7 + 7 + 2 * 2 + 1);
  CHECK(evaluation == forward);

  SUBCASE("paused in the forward pass, then Step") {
    REQUIRE(t.reset(s, bytes).is_ok());
    for (int i = 0; i < 6; ++i) REQUIRE(t.advance(0.0).is_ok());  // up to 2 of the 7 head pieces
    CHECK(t.mid_step());
    CHECK(t.steps_done() == 0);
    CHECK(t.points().empty());
    REQUIRE(t.step().is_ok());  // the rest of the step, its evaluation included
    CHECK_FALSE(t.mid_step());
    REQUIRE(t.steps_done() == 1);
    CHECK(t.points()[0].loss == want.losses[0]);
    CHECK(t.points()[0].val_loss == want.val_losses[0]);
  }
  SUBCASE("paused in the evaluation, then Step") {
    REQUIRE(t.reset(s, bytes).is_ok());
    // the step, then three batches and a half of its evaluation
    for (int i = 0; i < forward + backward + 1 + 3 * evaluation + 5; ++i) REQUIRE(t.advance(0.0).is_ok());
    CHECK(t.mid_step());
    REQUIRE(t.steps_done() == 1);
    CHECK(t.points()[0].loss == want.losses[0]);
    CHECK(std::isnan(t.points()[0].val_loss));  // not yet
    REQUIRE(t.step().is_ok());
    CHECK_FALSE(t.mid_step());
    CHECK(t.steps_done() == 1);
    CHECK(t.points()[0].val_loss == want.val_losses[0]);
    // and the run goes on as the oracle's
    REQUIRE(t.step().is_ok());
    CHECK(t.points()[1].loss == want.losses[1]);
    REQUIRE(t.write_checkpoint((dir / "sliced").string()).is_ok());
    CHECK(files_of(dir / "sliced") == want.files);
  }
  SUBCASE("paused in the evaluation, then Reset") {
    REQUIRE(t.reset(s, bytes).is_ok());
    for (int i = 0; i < forward + backward + 1 + 2; ++i) REQUIRE(t.advance(0.0).is_ok());
    CHECK(t.mid_step());
    REQUIRE(t.reset(s, bytes).is_ok());
    CHECK_FALSE(t.mid_step());
    CHECK(t.steps_done() == 0);
    CHECK(t.points().empty());
    REQUIRE(t.step().is_ok());
    CHECK(t.points()[0].loss == want.losses[0]);
    CHECK(t.points()[0].val_loss == want.val_losses[0]);
  }
  fs::remove_all(dir);
}

TEST_CASE(
    "train slices: a checkpoint saved in the middle of an evaluation batch leaves the evaluation right") {
  // The induction recipe's run state labels a snapshot still due by running the probes (probe_heads), which
  // replaces the model's forward pass in progress: the evaluation batch starts again.
  const fs::path dir = fs::temp_directory_path() / "attnviz_slices_save";
  const TrainSettings s = settings_for(TrainRecipe::induction);  // evaluation and snapshot every step
  TrainSession t;
  REQUIRE(t.reset(s, nullptr).is_ok());
  const Run want = induction_oracle(t.settings(), 2, dir / "oracle");
  int pieces = 0;
  while (t.steps_done() < 1) REQUIRE((++pieces < 100 && t.advance(0.0).is_ok()));
  REQUIRE(t.advance(0.0).is_ok());  // the evaluation's embeddings
  REQUIRE(t.advance(0.0).is_ok());  // and its first block
  REQUIRE(t.mid_step());
  REQUIRE(t.write_checkpoint((dir / "half").string()).is_ok());
  REQUIRE(t.step().is_ok());
  REQUIRE(t.step().is_ok());
  REQUIRE(t.points().size() == 2);
  CHECK(t.points()[0].in_context == want.in_context[0]);
  CHECK(t.points()[1].loss == want.losses[1]);
  CHECK(t.points()[1].in_context == want.in_context[1]);
  fs::remove_all(dir);
}
