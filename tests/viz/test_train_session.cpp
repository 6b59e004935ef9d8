// The Train panel's session headless: its book recipe is the book's loop (the validation losses of PyTorch's
// reduced run, tests/fixtures/train/book_run.json), steps run between frames while it runs, snapshots keep
// every head's kind and attention, and the exports.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/io/bpe.hpp"
#include "attnviz/viz/train.hpp"
#include "ui_harness.hpp"

using namespace attnviz;
using namespace attnviz::viz;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("train session: the book recipe is the book's loop (PyTorch's validation losses)") {
  const fs::path dir = fs::path(ATTNVIZ_FIXTURES_DIR) / "train";
  const nlohmann::json f = nlohmann::json::parse(read_file(dir / "book_run.json"));
  Bpe bpe;
  REQUIRE(Bpe::load_dir((fs::path(ATTNVIZ_FIXTURES_DIR) / "gpt" / "vocab").string(), bpe).is_ok());
  TrainSettings s = recipe_settings(TrainRecipe::custom);
  s.config.gpt = GptConfig{512, 32, 32, 4, 2, 0.1, false};
  s.batch_size = 2, s.eval_freq = 5, s.snapshot_freq = 5, s.eval_iter = 5;
  s.lr = 2e-3, s.weight_decay = 0.1, s.seed = 123;
  s.text = read_file(dir / "story.txt");
  TrainSession session;
  REQUIRE(session.reset(s, [&](const std::string& t, std::vector<int>& ids) { return bpe.encode(t, ids); })
              .is_ok());
  // the printed validation losses of the first two epochs (the fixture's lines, samples left out)
  std::vector<std::string> want;
  int samples = 0;
  for (const nlohmann::json& line : f["lines"]) {
    const std::string l = line;
    if (l.rfind("Ep ", 0) != 0) {
      if (++samples == 2) break;
      continue;
    }
    want.push_back(l.substr(l.find("Val loss ") + 9));
  }
  REQUIRE(want.size() >= 10);
  std::vector<std::string> got;
  while (got.size() < want.size()) {
    REQUIRE(session.step().is_ok());
    const TrainPoint& p = session.points().back();
    if (std::isnan(p.val_loss)) continue;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", p.val_loss);
    got.push_back(buf);
  }
  CHECK(got == want);
  const std::vector<TrainPoint>& p = session.points();
  CHECK(p.front().step == 1);
  CHECK(p.front().tokens == 64);
  int evaluated = 0;
  for (const TrainPoint& x : p) evaluated += std::isnan(x.val_loss) ? 0 : 1;
  CHECK(evaluated == (session.steps_done() - 1) / s.eval_freq + 1);
  CHECK(static_cast<int>(session.snapshots().size()) == 1 + session.steps_done() / s.snapshot_freq);
}

TEST_CASE("train session: induction recipe, slices between frames, snapshots and exports") {
  TrainSettings s = recipe_settings(TrainRecipe::induction);
  s.snapshot_freq = 4, s.eval_freq = 2;
  TrainSession a, b;
  REQUIRE(a.reset(s, nullptr).is_ok());
  REQUIRE(b.reset(s, nullptr).is_ok());
  REQUIRE(a.snapshots().size() == 1);  // step 0: the untrained heads
  CHECK(a.snapshots()[0].step == 0);
  CHECK(a.snapshots()[0].heads.size() == 2);
  CHECK(a.snapshots()[0].heads[0].size() == 4);
  CHECK(a.snapshots()[0].attention[1][3].size() == a.probe().size() * a.probe().size());
  for (int i = 0; i < 8; ++i) REQUIRE(a.step().is_ok());
  for (int i = 0; i < 8; ++i) REQUIRE(b.step().is_ok());
  // the same seed, the same run
  for (std::size_t i = 0; i < a.points().size(); ++i) CHECK(a.points()[i].loss == b.points()[i].loss);
  CHECK(a.snapshots().size() == 3);  // steps 0, 4, 8
  CHECK(!std::isnan(a.points()[0].in_context));
  CHECK(std::isnan(a.points()[1].in_context));
  // a slice runs at least one step
  const int before = a.steps_done();
  REQUIRE(a.advance(0.0).is_ok());
  CHECK(a.steps_done() == before + 1);
  // exports: the loss CSV has a row per step; the model view gets the attention-only model's weights
  const std::string csv = a.loss_csv();
  CHECK(csv.rfind("step,tokens,loss,val_loss,in_context\n1,2048,", 0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == a.steps_done() + 1);
  std::shared_ptr<GptWeights> w;
  REQUIRE(a.weights(w).is_ok());
  CHECK(w->config.attention_only);
  CHECK(w->blocks[1].fc.weight.data.empty());
  // the reset of bad settings changes nothing: sizes validate() refuses, a budget too small
  TrainSettings bad = s;
  bad.config.gpt.n_heads = 5;
  CHECK_FALSE(a.reset(bad, nullptr).is_ok());
  TrainSettings big = s;
  big.memory_budget = 1000000;
  const Status st = a.reset(big, nullptr);
  CHECK(st.error.find("more than the 1.0 MB available") != std::string::npos);
  CHECK(a.steps_done() == before + 1);
}

TEST_CASE("train session: frames run the training while it runs, and draw its view") {
  test::Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  TrainSettings s = recipe_settings(TrainRecipe::induction);
  s.snapshot_freq = 1;
  app.train.settings = s;
  app.train.session = std::make_shared<TrainSession>();
  REQUIRE(app.train.session->reset(s, nullptr).is_ok());
  app.train.show = true;
  ui.frame(app);
  CHECK(app.train.session->steps_done() == 0);  // not running: a frame trains nothing
  const int uploads = app.uploads;
  CHECK(uploads >= 8);  // every head's attention on the probe
  app.train.running = true;
  app.train.budget_ms = 0.0;
  ui.frame(app);
  ui.frame(app);
  CHECK(app.train.session->steps_done() == 2);
  CHECK(app.uploads >= uploads + 16);  // the new snapshots' textures
  // the slider's snapshot: the view shows step 1's heads, and stays there as training goes on
  app.train.snapshot = 1;
  app.train.running = false;
  const int shown = app.uploads;
  ui.frame(app);
  CHECK(app.uploads == shown + 8);
  ui.frame(app);
  CHECK(app.uploads == shown + 8);  // cached
}

TEST_CASE("train session: Open in model view shows the trained induction model on its probe") {
  test::Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  const fs::path dir = fs::temp_directory_path() / "attnviz_train_open";
  fs::remove_all(dir);
  app.export_dir = dir.string();
  app.train.settings = recipe_settings(TrainRecipe::induction);
  REQUIRE(reset_training(app).is_ok());
  for (int i = 0; i < 3; ++i) REQUIRE(app.train.session->step().is_ok());
  train_action(app, TrainAction::open);
  CAPTURE(app.train.error);
  REQUIRE(app.train.error.empty());
  REQUIRE(app.model.is_open());
  CHECK(app.model.ids_only());
  CHECK(app.model.config().attention_only);
  REQUIRE(app.model.has_result());
  CHECK(app.model.ids() == app.train.session->probe());
  CHECK(app.model.pieces()[0] == "#" + std::to_string(app.train.session->probe()[0]));
  CHECK_FALSE(app.train.show);
  ui.frame(app);  // the grid draws
  CHECK(app.model_view.thumbs.size() == 8);
  // Save model and Loss CSV write their files
  train_action(app, TrainAction::save);
  CHECK(fs::exists(dir / "trained-model" / "optimizer.safetensors"));
  train_action(app, TrainAction::csv);
  CHECK(fs::exists(dir / "train-loss.csv"));
  // Plots PNG: the training view is shown, and the host is asked for its area after rendering
  train_action(app, TrainAction::png);
  CHECK(app.train.show);
  CHECK(app.capture.pending);
  CHECK(app.capture.path == (dir / "train-plots.png").string());
  ui.frame(app);
  CHECK(app.capture.w > 100.0f);
  CHECK(app.capture.h > 100.0f);
  fs::remove_all(dir);
}
