// The Train panel's checkpoints carry the CLI's run state: attnviz-cli train --resume continues a panel run
// to the CLI's straight run's lines and bits (a half step included), and the panel continues a run's
// checkpoint (its own, or the CLI's) draw for draw. The CLI runs in-process (cli_run.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../cli_run.hpp"
#include "attnviz/io/bpe.hpp"
#include "attnviz/io/checkpoint.hpp"
#include "attnviz/io/train_text.hpp"
#include "attnviz/viz/app.hpp"
#include "attnviz/viz/train.hpp"
#include "ui_harness.hpp"

using namespace attnviz;
using namespace attnviz::viz;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kTrain = fs::path(ATTNVIZ_FIXTURES_DIR) / "train";
const std::string kVocab = (fs::path(ATTNVIZ_FIXTURES_DIR) / "gpt" / "vocab").string();
const std::string kStory = (kTrain / "story.txt").string();

std::string bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("attnviz_panelrun_" + name);
  fs::remove_all(p);
  return p;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("checkpoint: ", 0) != 0) v.push_back(line);
  return v;
}

void check_same_files(const fs::path& a, const fs::path& b, std::initializer_list<const char*> files) {
  for (const char* f : files) {
    INFO(f << ": " << a.string() << " against " << b.string());
    CHECK(bytes_of(a / f) == bytes_of(b / f));
  }
}

// A small induction run (d_model 32, batch 8, 40 steps, heads labelled every 10), as the CLI and as the
// panel's settings.
std::vector<std::string> small_induction(std::vector<std::string> more) {
  std::vector<std::string> a = {"train", "--task", "induction", "--json"};
  if (std::find(more.begin(), more.end(), "--resume") == more.end())
    a.insert(a.end(), {"--steps", "40", "--eval-freq", "10", "--emb-dim", "32", "--batch-size", "8"});
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TrainSettings small_induction_settings() {
  TrainSettings s = recipe_settings(TrainRecipe::induction);
  s.config.gpt.d_model = 32;
  s.batch_size = 8, s.snapshot_freq = 10, s.eval_freq = 10, s.total_steps = 40;
  return s;
}

// The book fixture's reduced sizes (tests/cli/test_train_cli.cpp's reduced()), one epoch of 42 steps.
std::vector<std::string> reduced_book(std::vector<std::string> more) {
  std::vector<std::string> a = {"train", kStory, "--vocab", kVocab, "--lr", "2e-3", "--epochs", "1"};
  if (std::find(more.begin(), more.end(), "--resume") == more.end())
    a.insert(a.end(), {"--vocab-size", "512", "--context-length", "32", "--emb-dim", "32", "--heads", "4",
                       "--layers", "2"});
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TrainSettings reduced_book_settings() {
  TrainSettings s = recipe_settings(TrainRecipe::custom);
  s.config.gpt = GptConfig{512, 32, 32, 4, 2, 0.1, false};
  s.batch_size = 2, s.eval_freq = 5, s.eval_iter = 5, s.snapshot_freq = 2;
  s.lr = 2e-3, s.weight_decay = 0.1, s.seed = 123;
  s.text = bytes_of(kStory);
  return s;
}

const Bpe& fixture_bpe() {
  static const Bpe bpe = [] {
    Bpe b;
    REQUIRE(Bpe::load_dir(kVocab, b).is_ok());
    return b;
  }();
  return bpe;
}

// The CLI's tokenization of a training text (tiktoken's allowed_special), as the app's panel calls it.
Status book_tokens(const std::string& text, std::vector<int>& ids) {
  return encode_training_text(fixture_bpe(), text, ids);
}

attnviz::test::Run cli_ok(const std::vector<std::string>& args) {
  const attnviz::test::Run r = attnviz::test::cli(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return r;
}

}  // namespace

TEST_CASE(
    "panel run: an induction checkpoint is the CLI's, and --resume goes on to the straight run's bits") {
  const fs::path whole = temp_dir("ind_whole"), cli_half = temp_dir("ind_cli_half"),
                 panel = temp_dir("ind_panel"), piece = temp_dir("ind_piece"), at30 = temp_dir("ind_30");
  const attnviz::test::Run straight = cli_ok(small_induction({"--out", whole.string()}));
  (void)cli_ok(small_induction({"--out", cli_half.string(), "--stop-after", "25"}));

  TrainSession s;
  REQUIRE(s.reset(small_induction_settings(), nullptr).is_ok());
  for (int i = 0; i < 25; ++i) REQUIRE(s.step().is_ok());
  REQUIRE(s.write_checkpoint(panel.string()).is_ok());
  // the panel's checkpoint after 25 steps is the CLI's after --stop-after 25, byte for byte: the same
  // parameters, moments and run state (both generators, the task, the settings, the total of 40)
  check_same_files(panel, cli_half, {"model.safetensors", "optimizer.safetensors", "config.json"});

  // attnviz-cli train --task induction --resume continues it: the straight run's reports after step 25,
  // every digit, and its files
  const attnviz::test::Run more =
      cli_ok(small_induction({"--resume", panel.string(), "--out", panel.string()}));
  CHECK(more.err.empty());
  const std::vector<json> want = attnviz::test::eval_events(straight.out),
                          after = attnviz::test::eval_events(more.out);
  REQUIRE(want.size() == 5);  // steps 0, 10, 20, 30, 40
  REQUIRE(after.size() == 2);
  CHECK(after[0].dump() == want[3].dump());
  CHECK(after[1].dump() == want[4].dump());
  check_same_files(panel, whole, {"model.safetensors", "optimizer.safetensors", "config.json"});

  // A half step: its checkpoint is the last whole step's, run state included, at every piece (step 30's
  // update leaves its snapshot due, step 31's its evaluation).
  TrainSession t, u;
  REQUIRE(t.reset(small_induction_settings(), nullptr).is_ok());
  REQUIRE(u.reset(small_induction_settings(), nullptr).is_ok());
  for (int i = 0; i < 29; ++i) REQUIRE(t.step().is_ok());
  for (int i = 0; i < 30; ++i) REQUIRE(u.step().is_ok());
  REQUIRE(u.write_checkpoint(at30.string()).is_ok());
  REQUIRE(t.write_checkpoint(panel.string()).is_ok());  // step 29
  int pieces = 0;
  while (t.steps_done() < 31 || t.mid_step()) {
    REQUIRE(t.advance(0.0).is_ok());
    REQUIRE(++pieces < 100);
    REQUIRE(t.write_checkpoint(piece.string()).is_ok());
    CAPTURE(pieces);
    if (t.steps_done() == 29) check_same_files(piece, panel, {"model.safetensors", "optimizer.safetensors"});
    if (t.steps_done() == 30) check_same_files(piece, at30, {"model.safetensors", "optimizer.safetensors"});
  }
  CHECK(pieces > 10);
  // and step 30's is the CLI's --stop-after 30
  (void)cli_ok(small_induction({"--out", cli_half.string(), "--stop-after", "30"}));
  check_same_files(at30, cli_half, {"model.safetensors", "optimizer.safetensors"});
  for (const fs::path& p : {whole, cli_half, panel, piece, at30}) fs::remove_all(p);
}

TEST_CASE("panel run: the book recipe's checkpoint resumes in the CLI to the straight run's lines and bits") {
  const fs::path whole = temp_dir("book_whole"), panel = temp_dir("book_panel"),
                 piece = temp_dir("book_piece");
  const attnviz::test::Run straight = cli_ok(reduced_book({"--out", whole.string()}));
  const std::vector<std::string> want = lines_of(straight.out);
  REQUIRE(want.size() == 10);  // steps 0, 5, ..., 40 and the epoch's sample (42 steps)

  TrainSession s;
  REQUIRE(s.reset(reduced_book_settings(), book_tokens).is_ok());
  for (int i = 0; i < 23; ++i) REQUIRE(s.step().is_ok());
  // the panel's evaluations so far are the straight run's (steps 0, 5, ..., 20: the printed validation loss)
  int evaluated = 0;
  for (const TrainPoint& p : s.points()) {
    if (std::isnan(p.val_loss)) continue;
    char buf[32];
    std::snprintf(buf, sizeof buf, "Val loss %.3f", p.val_loss);
    const std::string& line = want[static_cast<std::size_t>(evaluated++)];
    CHECK(line.substr(line.size() - std::string(buf).size()) == buf);
  }
  CHECK(evaluated == 5);

  // mid-epoch, between evaluations; and paused in step 26 with its evaluation still due (its draws are part
  // of the run state the CLI continues)
  for (const bool half : {false, true}) {
    CAPTURE(half);
    if (half) {
      while (s.steps_done() < 25) REQUIRE(s.step().is_ok());
      int pieces = 0;
      // the forward and backward stages, the update: then step 26's evaluation is due
      while (s.steps_done() < 26) REQUIRE((++pieces < 20 && s.advance(0.0).is_ok()));
      REQUIRE(s.mid_step());
    }
    REQUIRE(s.write_checkpoint(panel.string()).is_ok());
    const attnviz::test::Run more =
        cli_ok(reduced_book({"--resume", panel.string(), "--out", panel.string()}));
    CAPTURE(more.err);
    CHECK(more.err.empty());
    const std::vector<std::string> got = lines_of(more.out);
    const std::size_t skip = half ? 6 : 5;  // the evaluations up to step 25 (global step 0-based 25 = 26th)
    REQUIRE(got.size() + skip == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i + skip]);
    check_same_files(panel, whole, {"model.safetensors", "optimizer.safetensors", "config.json"});
  }

  // every piece of a step writes the last whole step's checkpoint: step 26 before its update, after it
  // with its evaluation and its snapshot due (snapshots every 2 steps), and after both
  TrainSession a, b;
  REQUIRE(a.reset(reduced_book_settings(), book_tokens).is_ok());
  REQUIRE(b.reset(reduced_book_settings(), book_tokens).is_ok());
  for (int i = 0; i < 25; ++i) REQUIRE(a.step().is_ok());
  for (int i = 0; i < 25; ++i) REQUIRE(b.step().is_ok());
  const fs::path at25 = temp_dir("book_25"), at26 = temp_dir("book_26");
  REQUIRE(a.write_checkpoint(at25.string()).is_ok());
  REQUIRE(a.step().is_ok());
  REQUIRE(a.write_checkpoint(at26.string()).is_ok());
  int pieces = 0;
  while (b.steps_done() < 26 || b.mid_step()) {
    REQUIRE(b.advance(0.0).is_ok());
    REQUIRE(++pieces < 100);
    REQUIRE(b.write_checkpoint(piece.string()).is_ok());
    CAPTURE(pieces);
    check_same_files(piece, b.steps_done() == 25 ? at25 : at26,
                     {"model.safetensors", "optimizer.safetensors"});
  }
  // 5 forward stages, 8 backward stages, the update, 10 evaluation batches of 5 forward stages, the snapshot
  CHECK(pieces == 5 + 8 + 1 + 10 * 5 + 1);
  for (const fs::path& p : {whole, panel, piece, at25, at26}) fs::remove_all(p);
}

TEST_CASE("panel run: the panel continues a run's checkpoint draw for draw, and refuses what it cannot") {
  const fs::path whole = temp_dir("cont_whole"), half = temp_dir("cont_half"), out = temp_dir("cont_out");
  (void)cli_ok(small_induction({"--out", whole.string()}));
  (void)cli_ok(small_induction({"--out", half.string(), "--stop-after", "25"}));

  // the CLI's induction checkpoint: the panel goes on from step 25 and ends on the CLI's straight run
  TrainSession c;
  REQUIRE(c.continue_from(half.string(), recipe_settings(TrainRecipe::induction), nullptr).is_ok());
  CHECK(c.continued_from() == 25);
  CHECK(c.steps_done() == 25);
  CHECK(c.points().empty());  // a checkpoint keeps no curve
  REQUIRE(c.snapshots().size() == 1);
  CHECK(c.snapshots()[0].step == 25);
  const TrainSettings& cs = c.settings();
  CHECK(cs.recipe == TrainRecipe::induction);
  CHECK(cs.batch_size == 8);
  CHECK(cs.lr == 2e-3);
  CHECK(cs.snapshot_freq == 10);
  CHECK(cs.total_steps == 40);
  CHECK(cs.config.gpt.d_model == 32);
  // written before any step, the checkpoint is the one it continued
  REQUIRE(c.write_checkpoint(out.string()).is_ok());
  check_same_files(out, half, {"model.safetensors", "optimizer.safetensors"});
  while (c.steps_done() < 40) REQUIRE(c.step().is_ok());
  REQUIRE(c.write_checkpoint(out.string()).is_ok());
  check_same_files(out, whole, {"model.safetensors", "optimizer.safetensors", "config.json"});
  CHECK(c.snapshots().back().step == 40);
  CHECK(c.points().front().step == 26);
  CHECK(c.points().front().tokens == 26 * 8 * 64);

  // its own checkpoint: the same losses as the session that never stopped
  TrainSession straight, first;
  REQUIRE(straight.reset(small_induction_settings(), nullptr).is_ok());
  REQUIRE(first.reset(small_induction_settings(), nullptr).is_ok());
  for (int i = 0; i < 30; ++i) REQUIRE(straight.step().is_ok());
  for (int i = 0; i < 12; ++i) REQUIRE(first.step().is_ok());
  REQUIRE(first.advance(0.0).is_ok());  // a half step, dropped by the checkpoint
  REQUIRE(first.write_checkpoint(out.string()).is_ok());
  TrainSession second;
  REQUIRE(second.continue_from(out.string(), TrainSettings{}, nullptr).is_ok());
  CHECK(second.continued_from() == 12);
  while (second.steps_done() < 30) REQUIRE(second.step().is_ok());
  REQUIRE(second.points().size() == 18);
  for (std::size_t i = 0; i < 18; ++i) CHECK(second.points()[i].loss == straight.points()[12 + i].loss);

  // the book recipe's checkpoint, with the text it trained on; another text is refused by name
  TrainSession book, book_straight;
  REQUIRE(book.reset(reduced_book_settings(), book_tokens).is_ok());
  REQUIRE(book_straight.reset(reduced_book_settings(), book_tokens).is_ok());
  for (int i = 0; i < 90; ++i) REQUIRE(book_straight.step().is_ok());  // into the second epoch
  for (int i = 0; i < 40; ++i) REQUIRE(book.step().is_ok());
  REQUIRE(book.write_checkpoint(out.string()).is_ok());
  TrainSession book2;
  TrainSettings given = recipe_settings(TrainRecipe::book);  // the text (and evaluation settings) only
  given.text = reduced_book_settings().text;
  given.eval_freq = 5, given.snapshot_freq = 2, given.eval_iter = 5;
  REQUIRE(book2.continue_from(out.string(), given, book_tokens).is_ok());
  CHECK(book2.settings().recipe == TrainRecipe::custom);  // not the book recipe's sizes
  CHECK(book2.settings().lr == 2e-3);
  CHECK(book2.settings().weight_decay == doctest::Approx(0.1).epsilon(1e-12));
  while (book2.steps_done() < 90) REQUIRE(book2.step().is_ok());
  for (std::size_t i = 0; i < 50; ++i) {
    const TrainPoint &x = book2.points()[i], &y = book_straight.points()[40 + i];
    CHECK(x.loss == y.loss);
    CHECK(x.tokens == y.tokens);
    CHECK((x.val_loss == y.val_loss || (std::isnan(x.val_loss) && std::isnan(y.val_loss))));
  }

  // refusals: one line, and the session as it was
  const auto refused = [&](const std::string& dir, const TrainSettings& with, const std::string& needle) {
    const int steps = book2.steps_done();
    const Status st = book2.continue_from(dir, with, book_tokens);
    CAPTURE(st.error);
    CHECK_FALSE(st.is_ok());
    CHECK(st.error.find(needle) != std::string::npos);
    CHECK(st.error.find('\n') == std::string::npos);
    CHECK(book2.steps_done() == steps);
    CHECK(book2.continued_from() == 40);
  };
  TrainSettings other = given;
  other.text = given.text.substr(0, given.text.size() / 2) + given.text;
  refused(out.string(), other, "'s run was over other data (");
  refused((out / "missing").string(), given, "missing");
  // a checkpoint without run state (as before this version)
  TrainModel m;
  AdamW opt;
  bool has_optimizer = false;
  REQUIRE(read_checkpoint(out.string(), m, opt, has_optimizer).is_ok());
  REQUIRE(write_checkpoint(out.string(), m, opt, "").is_ok());
  refused(out.string(), given, "holds no run to continue: its optimizer.safetensors has no run state");
  // the optimizer file taken out of its set: a torn checkpoint
  fs::remove(out / "optimizer.safetensors");
  refused(out.string(), given, "is a torn checkpoint: its optimizer.safetensors is missing");
  // a model-only save (no step taken): its set has no optimizer file
  REQUIRE(write_checkpoint(out.string(), m, AdamW(), "").is_ok());
  REQUIRE_FALSE(fs::exists(out / "optimizer.safetensors"));
  refused(out.string(), given, "holds no run to continue: it has no optimizer.safetensors");
  for (const fs::path& p : {whole, half, out}) fs::remove_all(p);
}

TEST_CASE("panel run: Continue from checkpoint in the app, and a bad folder keeps the last good session") {
  viz::test::Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  const fs::path dir = temp_dir("app");
  app.export_dir = dir.string();
  app.train.settings = small_induction_settings();
  REQUIRE(reset_training(app).is_ok());
  for (int i = 0; i < 3; ++i) REQUIRE(app.train.session->step().is_ok());
  train_action(app, TrainAction::save);  // export_dir/trained-model
  REQUIRE(app.train.error.empty());
  app.train.settings = recipe_settings(TrainRecipe::induction);
  REQUIRE(reset_training(app).is_ok());  // a new run, from step 0
  REQUIRE(app.train.session->steps_done() == 0);

  const auto click = [&](const std::string& name) { ui.click_train(app, name); };
  ui.frame(app);
  click("header");
  click("continue");  // the folder left empty: Save model's
  CAPTURE(app.train.error);
  REQUIRE(app.train.error.empty());
  REQUIRE(app.train.session);
  CHECK(app.train.session->continued_from() == 3);
  CHECK(app.train.session->steps_done() == 3);
  CHECK(app.train.settings.config.gpt.d_model == 32);  // Reset now starts the run's recipe
  CHECK(app.train.settings.batch_size == 8);
  CHECK_FALSE(app.train.running);
  CHECK(app.train.show);
  CHECK(app.message.find("from step 3") != std::string::npos);
  click("step");
  CHECK(app.train.session->steps_done() == 4);

  // a folder that holds no checkpoint: one line, and the session stays
  const std::shared_ptr<TrainSession> kept = app.train.session;
  fs::create_directories(dir / "empty");
  app.train.continue_path = (dir / "empty").string();
  click("continue");
  CHECK_FALSE(app.train.error.empty());
  CHECK(app.train.error.find('\n') == std::string::npos);
  CHECK(app.train.session == kept);
  CHECK(app.train.settings.batch_size == 8);
  ui.frame(app);
  fs::remove_all(dir);
}

TEST_CASE("panel run: a scheduled CLI checkpoint continues in the panel to the CLI's straight run's bits") {
  // the appendix-D schedule over the epoch's 42 steps: warmup over 10, cosine after, clipping after warmup
  const std::vector<std::string> schedule = {"--warmup-steps", "10",   "--max-norm", "0.2",
                                             "--initial-lr",   "1e-4", "--min-lr",   "1e-5"};
  const auto scheduled = [&](std::vector<std::string> more) {
    more.insert(more.end(), schedule.begin(), schedule.end());
    return reduced_book(more);
  };
  const fs::path whole = temp_dir("sched_whole"), at30 = temp_dir("sched_30"), half = temp_dir("sched_7"),
                 out = temp_dir("sched_out");
  const attnviz::test::Run straight = cli_ok(scheduled({"--out", whole.string()}));
  (void)cli_ok(scheduled({"--out", at30.string(), "--stop-after", "30"}));
  (void)cli_ok(scheduled({"--out", half.string(), "--stop-after", "7"}));

  // CLI 7 steps (inside the warmup), then the panel: its evaluation settings and schedule are the run's
  TrainSession c;
  TrainSettings given = recipe_settings(TrainRecipe::book);
  given.text = reduced_book_settings().text;
  given.eval_freq = 7, given.eval_iter = 3;  // the run's own (5 and 5) replace these
  REQUIRE(c.continue_from(half.string(), given, book_tokens).is_ok());
  CHECK(c.settings().eval_freq == 5);
  CHECK(c.settings().eval_iter == 5);
  CHECK(c.settings().lr == 2e-3);
  // before any step, its checkpoint is the one it continued (the optimizer's last lr included)
  REQUIRE(c.write_checkpoint(out.string()).is_ok());
  check_same_files(out, half, {"model.safetensors", "optimizer.safetensors"});
  while (c.steps_done() < 30) REQUIRE(c.step().is_ok());
  REQUIRE(c.write_checkpoint(out.string()).is_ok());
  check_same_files(out, at30, {"model.safetensors", "optimizer.safetensors", "config.json"});

  // the panel's checkpoint records the schedule: the CLI resumes it with no schedule flags at all, to the
  // straight run's lines and bits
  const attnviz::test::Run more =
      cli_ok({"train", kStory, "--vocab", kVocab, "--resume", out.string(), "--out", out.string()});
  CAPTURE(more.err);
  CHECK(more.err.empty());
  const std::vector<std::string> want = lines_of(straight.out), got = lines_of(more.out);
  REQUIRE(got.size() == 4);  // the evaluations at 0-based steps 30, 35 and 40, the epoch's sample
  CHECK(std::equal(got.begin(), got.end(), want.end() - 4));
  check_same_files(out, whole, {"model.safetensors", "optimizer.safetensors"});

  // the panel stops where the schedule ends
  while (c.steps_done() < 42) REQUIRE(c.step().is_ok());
  const Status done = c.step();
  CHECK(done.error == "the run is done: its learning-rate schedule ends after its 1 epochs (42 steps)");
  for (const fs::path& p : {whole, at30, half, out}) fs::remove_all(p);
}
