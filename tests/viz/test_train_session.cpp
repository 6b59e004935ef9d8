// The Train panel's session headless: its book recipe is the book's loop (the validation losses of PyTorch's
// reduced run, tests/fixtures/train/book_run.json), steps run between frames while it runs, snapshots keep
// every head's kind and attention, and the exports.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/io/bpe.hpp"
#include "attnviz/io/checkpoint.hpp"
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
  // the printed training and validation losses of the first two epochs (the fixture's lines, samples left
  // out): the panel plots both, as the book's figure does
  std::vector<std::string> want;
  int samples = 0;
  for (const nlohmann::json& line : f["lines"]) {
    const std::string l = line;
    if (l.rfind("Ep ", 0) != 0) {
      if (++samples == 2) break;
      continue;
    }
    want.push_back(l.substr(l.find("Train loss ")));
  }
  REQUIRE(want.size() >= 10);
  std::vector<std::string> got;
  while (got.size() < want.size()) {
    REQUIRE(session.step().is_ok());
    const TrainPoint& p = session.points().back();
    if (std::isnan(p.val_loss)) {
      CHECK(std::isnan(p.eval_train_loss));
      continue;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "Train loss %.3f, Val loss %.3f", p.eval_train_loss, p.val_loss);
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
  // a slice runs at least one piece of a step: with no time to spare, the forward pass alone
  const int before = a.steps_done();
  REQUIRE_FALSE(a.mid_step());
  REQUIRE(a.advance(0.0).is_ok());
  CHECK(a.mid_step());
  CHECK(a.steps_done() == before);
  CHECK(a.slice_ms().size() == 1);
  REQUIRE(a.step().is_ok());  // finishes the step the slice began
  CHECK_FALSE(a.mid_step());
  CHECK(a.steps_done() == before + 1);
  // exports: the loss CSV has a row per step; the model view gets the attention-only model's weights
  const std::string csv = a.loss_csv();
  CHECK(csv.rfind("step,tokens,loss,eval_train_loss,val_loss,in_context\n1,2048,", 0) == 0);
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

// A step cut into slices computes what a whole step computes: the same losses, evaluations, snapshots and
// parameters, bit for bit, whatever the slices' budgets; a half step survives a pause and a Reset drops it.
TEST_CASE("train session: slices give the whole steps' results bit for bit") {
  for (TrainRecipe r : {TrainRecipe::induction, TrainRecipe::custom}) {
    CAPTURE(to_string(r));
    TrainSettings s = recipe_settings(r);
    if (r == TrainRecipe::custom) {  // the book's loop, with dropout, on a small vocabulary of bytes
      s.config.gpt = GptConfig{256, 16, 32, 4, 2, 0.1, false};
      s.eval_iter = 2;
      for (int i = 0; i < 40; ++i) s.text += "the cat sat on the mat, and the dog sat on the log. ";
    }
    s.eval_freq = 3, s.snapshot_freq = 2;
    const auto bytes = [](const std::string& t, std::vector<int>& ids) {
      ids.assign(t.begin(), t.end());
      return Status::ok();
    };
    TrainSession whole, sliced;
    REQUIRE(whole.reset(s, bytes).is_ok());
    REQUIRE(sliced.reset(s, bytes).is_ok());
    // one piece a slice, except a budget now and then that lets several through (possibly into a next step)
    constexpr int kSteps = 5;
    int slices = 0;
    while (sliced.steps_done() < kSteps) {
      REQUIRE(sliced.advance(slices % 7 == 6 ? 50.0 : 0.0).is_ok());
      REQUIRE(++slices < 1000);
    }
    CHECK(slices > 2 * kSteps);
    if (sliced.mid_step()) REQUIRE(sliced.step().is_ok());
    while (whole.steps_done() < sliced.steps_done()) REQUIRE(whole.step().is_ok());
    REQUIRE(sliced.points().size() == whole.points().size());
    for (std::size_t i = 0; i < whole.points().size(); ++i) {
      const TrainPoint &a = whole.points()[i], &b = sliced.points()[i];
      CHECK(a.loss == b.loss);
      CHECK(a.tokens == b.tokens);
      CHECK((a.val_loss == b.val_loss || (std::isnan(a.val_loss) && std::isnan(b.val_loss))));
      CHECK((a.in_context == b.in_context || (std::isnan(a.in_context) && std::isnan(b.in_context))));
    }
    REQUIRE(sliced.snapshots().size() == whole.snapshots().size());
    CHECK(sliced.snapshots().back().attention == whole.snapshots().back().attention);
    const std::string dir_a = (fs::temp_directory_path() / "attnviz_slice_whole").string();
    const std::string dir_b = (fs::temp_directory_path() / "attnviz_slice_sliced").string();
    REQUIRE(whole.write_checkpoint(dir_a).is_ok());
    REQUIRE(sliced.write_checkpoint(dir_b).is_ok());
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      CHECK(read_file(fs::path(dir_a) / f) == read_file(fs::path(dir_b) / f));

    // A half step kept over a pause (no slices) and finished by step() is the whole step's.
    REQUIRE(sliced.advance(0.0).is_ok());
    REQUIRE(sliced.advance(0.0).is_ok());
    CHECK(sliced.mid_step());
    REQUIRE(sliced.write_checkpoint(dir_b).is_ok());  // the parameters of the last whole step
    CHECK(read_file(fs::path(dir_a) / "model.safetensors") ==
          read_file(fs::path(dir_b) / "model.safetensors"));
    REQUIRE(sliced.step().is_ok());
    REQUIRE(whole.step().is_ok());
    CHECK(sliced.points().back().loss == whole.points().back().loss);
    REQUIRE(whole.write_checkpoint(dir_a).is_ok());
    REQUIRE(sliced.write_checkpoint(dir_b).is_ok());
    CHECK(read_file(fs::path(dir_a) / "model.safetensors") ==
          read_file(fs::path(dir_b) / "model.safetensors"));
    // Reset drops a half step: the run starts again from the seed
    REQUIRE(sliced.advance(0.0).is_ok());
    REQUIRE(sliced.reset(s, bytes).is_ok());
    CHECK_FALSE(sliced.mid_step());
    CHECK(sliced.slice_ms().empty());
    REQUIRE(sliced.step().is_ok());
    CHECK(sliced.points().back().loss == whole.points().front().loss);
    fs::remove_all(dir_a), fs::remove_all(dir_b);
  }
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
  // a frame with no time to spare runs one piece of a step: the forward stages (the embeddings, two blocks,
  // the final norm with the head packed, the head), the backward stages (the head packed, its dx, its
  // weight's gradient, two blocks, the embeddings), the update, then the first step's evaluation (its batch's
  // forward stages) and (every step here) snapshot
  for (int i = 0; i < 12; ++i) ui.frame(app);
  CHECK(app.train.session->steps_done() == 1);
  CHECK(app.train.session->mid_step());
  for (int i = 0; i < 6; ++i) ui.frame(app);
  CHECK_FALSE(app.train.session->mid_step());
  for (int i = 0; i < 13; ++i) ui.frame(app);  // the second step: no evaluation
  CHECK(app.train.session->steps_done() == 2);
  CHECK_FALSE(app.train.session->mid_step());
  CHECK(app.train.session->slice_ms().size() == 31);
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

TEST_CASE("train panel: the loss plot's second axis is the tokens seen at each step tick") {
  CHECK(short_count(0) == "0");
  CHECK(short_count(999) == "999");
  CHECK(short_count(1000) == "1.00k");
  CHECK(short_count(20480) == "20.5k");
  CHECK(short_count(999499) == "999k");
  CHECK(short_count(999500) == "1.00M");
  CHECK(short_count(5120000) == "5.12M");
  CHECK(short_count(std::int64_t{3} << 40) == "3.30T");
  CHECK(loss_axis_ticks({}, 5).size() == 1);  // step 0 only
  // the induction recipe: every step sees batch x context tokens (32 x 64)
  TrainSettings s = recipe_settings(TrainRecipe::induction);
  s.eval_freq = 100, s.snapshot_freq = 100;
  TrainSession session;
  REQUIRE(session.reset(s, nullptr).is_ok());
  for (int i = 0; i < 25; ++i) REQUIRE(session.step().is_ok());
  const std::int64_t per_step = std::int64_t{s.batch_size} * s.config.gpt.context_length;
  std::vector<LossAxisTick> t = loss_axis_ticks(session.points(), 5);
  REQUIRE(t.size() == 6);  // 0, 5, ..., 25
  for (std::size_t i = 0; i < t.size(); ++i) {
    CHECK(t[i].step == 5 * static_cast<int>(i));
    CHECK(t[i].tokens == t[i].step * per_step);
    CHECK(t[i].step_label == std::to_string(t[i].step));
  }
  CHECK(t[1].tokens_label == "10.2k");
  CHECK(t[5].tokens_label == "51.2k");
  // fewer ticks allowed: the next round spacing (1, 2, 5 x 10^k)
  t = loss_axis_ticks(session.points(), 2);
  REQUIRE(t.size() == 3);
  CHECK(t[2].step == 20);
  CHECK(t[2].tokens == 20 * per_step);
  // a long run: 2,500 steps of the book recipe's 2 x 64 tokens
  std::vector<TrainPoint> p(2500);
  for (int i = 0; i < 2500; ++i)
    p[static_cast<std::size_t>(i)] = {i + 1, 128 * std::int64_t{i + 1}, 1.0, 0, 0};
  t = loss_axis_ticks(p, 10);
  REQUIRE(t.size() == 6);
  CHECK(t[5].step == 2500);
  CHECK(t[5].tokens_label == "320k");
  CHECK(loss_axis_ticks(p, 4).back().step == 2000);
}

namespace {

const std::string kStory = read_file(fs::path(ATTNVIZ_FIXTURES_DIR) / "train" / "story.txt");

// Checks one refusal of a dropped text: one line naming the file, and the last good text and session kept.
void check_refused(App& app, const std::string& name, std::uint64_t size, const std::string& bytes,
                   const std::string& why) {
  const std::shared_ptr<TrainSession> session = app.train.session;
  const Status st = choose_train_text(app, name, size, bytes);
  CAPTURE(st.error);
  CHECK_FALSE(st.is_ok());
  CHECK(st.error.rfind(name, 0) == 0);
  CHECK(st.error.find(why) != std::string::npos);
  CHECK(st.error.find('\n') == std::string::npos);
  CHECK(app.train.error == st.error);
  CHECK(app.train.text_name == "story.txt");
  CHECK(app.train.text == kStory);
  CHECK(app.train.session == session);
  CHECK(app.train.settings.recipe == TrainRecipe::book);
}

}  // namespace

TEST_CASE("train panel: a dropped text becomes the book recipe's, and each refusal keeps the last good one") {
  App app;
  REQUIRE(start(app).is_ok());
  REQUIRE(app.train.settings.recipe == TrainRecipe::induction);
  REQUIRE(kStory.size() > 1000);
  const Status ok = choose_train_text(app, "story.txt", kStory.size(), kStory);
  CAPTURE(ok.error);
  REQUIRE(ok.is_ok());
  CHECK(app.train.settings.recipe == TrainRecipe::book);
  CHECK(app.train.text_size == kStory.size());
  REQUIRE(app.train.session);
  CHECK(app.train.session->steps_done() == 0);
  CHECK_FALSE(app.train.running);
  CHECK(app.message.find("story.txt") != std::string::npos);
  // the session trains on the dropped text: its probe is the first window of the text's last 10%
  std::string first, second;
  split_text(kStory, 0.9, first, second);
  Bpe gpt2;
  REQUIRE(Bpe::load_dir(default_vocab_dir(), gpt2).is_ok());
  std::vector<int> val;
  REQUIRE(gpt2.encode(second, val).is_ok());
  REQUIRE(val.size() > app.train.session->probe().size());
  CHECK(std::equal(app.train.session->probe().begin(), app.train.session->probe().end(), val.begin()));

  check_refused(app, "empty.txt", 0, "", "is empty");
  // a byte over: both sizes to the byte (both read "4.2 MB")
  check_refused(app, "huge.txt", kMaxTrainTextBytes + 1, "",
                "huge.txt is 4.194305 MB: a text to train on may be at most 4.194304 MB");
  check_refused(app, "huge.txt", kMaxTrainTextBytes + 100'000, "",
                "huge.txt is 4.3 MB: a text to train on may be at most 4.2 MB");
  check_refused(app, "latin1.txt", 12, "caf\xe9 au lait", "is not UTF-8 text (bad byte 0xE9 at offset 3)");
  check_refused(app, "short.txt", 12, "Hello world.", "too short");
  // the session left in place still trains
  REQUIRE(app.train.session->step().is_ok());

  // drops from the window: a text file by its path; a file that is not there; a folder that is no model
  const fs::path dir = fs::temp_directory_path() / "attnviz_drop_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "folder");
  { std::ofstream(dir / "notes.md", std::ios::binary) << kStory; }
  drop_files(app, {(dir / "notes.md").string()});
  CHECK(app.train.text_name == "notes.md");
  CHECK(app.train.error.empty());
  drop_files(app, {(dir / "gone.txt").string()});
  CHECK(app.train.error.find("gone.txt") != std::string::npos);
  CHECK(app.train.text_name == "notes.md");
  drop_files(app, {(dir / "a.txt").string(), (dir / "b.txt").string()});
  CHECK(app.message.find("drop one text file") != std::string::npos);
  drop_files(app, {(dir / "folder").string()});  // opens as a model, which an empty folder is not
  CHECK_FALSE(app.model.is_open());
  CHECK(app.train.text_name == "notes.md");
  CHECK(is_model_file_name("Model.SafeTensors"));
  CHECK(is_model_file_name("merges.txt"));
  CHECK_FALSE(is_model_file_name("story.txt"));
  fs::remove_all(dir);
}

TEST_CASE("train panel: the controls' rectangles are where clicks land") {
  test::Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  app.train.budget_ms = 0.0;  // one piece of a step a frame
  app.train.settings.snapshot_freq = 1;
  const auto find = [&app](const std::string& name) { return test::Ui::train_control(app, name); };
  const auto click = [&](const std::string& name) { ui.click_train(app, name); };
  ui.frame(app);
  CHECK(find("start") == nullptr);  // the panel is closed
  click("header");
  click("start");
  REQUIRE(app.train.session);
  CHECK(app.train.running);
  CHECK(app.train.show);
  for (int i = 0; i < 40 && app.train.session->steps_done() < 2; ++i) ui.frame(app);
  CHECK(app.train.session->steps_done() >= 2);
  ui.frame(app);   // into the third step
  click("start");  // now Pause
  CHECK_FALSE(app.train.running);
  const int paused = app.train.session->steps_done();
  CHECK(app.train.session->mid_step());
  click("step");  // finishes the step the slices had begun
  CHECK(app.train.session->steps_done() == paused + 1);
  CHECK_FALSE(app.train.session->mid_step());
  // the step slider (in the training view): its left end shows snapshot 0
  REQUIRE(find("slider") != nullptr);
  CHECK(find("slider")->visible);
  CHECK(find("slider")->x1 - find("slider")->x0 > 100.0f);
  REQUIRE(app.train.session->snapshots().size() >= 3);
  CHECK(app.train.snapshot == -1);  // following the latest
  // dragged from its right end to its left
  const TrainView::Control slider = *find("slider");
  const float y = 0.5f * (slider.y0 + slider.y1);
  ImGui::GetIO().MousePos = ImVec2(slider.x1 - 2.0f, y);
  ui.frame(app);
  ImGui::GetIO().MouseDown[0] = true;
  ui.frame(app);
  CHECK(app.train.snapshot == -1);  // pressed at the latest: nothing changes yet
  ImGui::GetIO().MousePos = ImVec2(slider.x0 + 2.0f, y);
  ui.frame(app);
  ImGui::GetIO().MouseDown[0] = false;
  ui.frame(app);
  CHECK(app.train.snapshot == 0);
  click("latest");
  CHECK(app.train.snapshot == -1);
}

TEST_CASE("train panel: a host's text chooser and its vocabulary fetched on demand (the page's hooks)") {
  test::Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  const auto find = [&app](const std::string& name) { return test::Ui::train_control(app, name); };
  const auto click = [&](const std::string& name) { ui.click_train(app, name); };
  int chosen = 0, asked = 0;
  std::string vocabulary = "fetching";  // what the host answers: "" (there), "fetching", or why not
  app.train.choose_text = [&chosen] { ++chosen; };
  app.train.vocabulary_ready = [&](std::string& why) {
    ++asked;
    why = vocabulary == "fetching" ? std::string() : vocabulary;
    return vocabulary.empty();
  };
  ui.frame(app);
  click("header");
  CHECK(find("text") == nullptr);  // the induction recipe takes no text
  // the recipe picked by mouse: the combo, then its item
  click("recipe");
  click("recipe:book");
  CHECK(app.train.settings.recipe == TrainRecipe::book);
  ui.frame(app);
  CHECK(find("recipe:book") == nullptr);  // the combo closed
  click("text");
  CHECK(chosen == 1);
  CHECK(asked == 0);  // neither picking a recipe nor choosing asks for the vocabulary
  // the host's chosen text, without the session it makes: Start resets first
  REQUIRE(choose_train_text(app, "story.txt", kStory.size(), kStory).is_ok());
  app.train.session.reset();
  click("start");
  CHECK(asked == 1);
  CHECK(app.train.waiting == "start");
  CHECK_FALSE(app.train.session);
  CHECK_FALSE(app.train.running);
  ui.frame(app);  // still on its way: still waiting
  CHECK(app.train.waiting == "start");
  CHECK_FALSE(app.train.session);
  vocabulary.clear();
  ui.frame(app);  // there: Start goes on
  CHECK(app.train.waiting.empty());
  REQUIRE(app.train.session);
  CHECK(app.train.running);
  CHECK(app.train.error.empty());
  click("start");  // Pause
  CHECK_FALSE(app.train.running);
  // a vocabulary that cannot be had: one line, and nothing waits
  app.train.session.reset();
  vocabulary = "GPT-2's vocabulary did not load: gpt2/encoder.json: HTTP 404";
  click("step");
  CHECK(app.train.error == vocabulary);
  CHECK(app.train.waiting.empty());
  CHECK_FALSE(app.train.session);
  // the induction recipe needs no vocabulary
  const int before = asked;
  click("recipe");
  click("recipe:induction");
  click("reset");
  CHECK(asked == before);
  CHECK(app.train.session);
  // without the hooks (the desktop app) the panel draws its path field and no chooser
  app.train.choose_text = nullptr;
  click("recipe");
  click("recipe:book");
  ui.frame(app);
  CHECK(find("text") == nullptr);
  CHECK(find("recipe") != nullptr);
}

TEST_CASE("train session: Save model that fails part way keeps the previous checkpoint whole") {
  test::Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  const fs::path dir = fs::temp_directory_path() / "attnviz_train_save_set";
  fs::remove_all(dir);
  app.export_dir = dir.string();
  app.train.settings = recipe_settings(TrainRecipe::induction);
  REQUIRE(reset_training(app).is_ok());
  for (int i = 0; i < 2; ++i) REQUIRE(app.train.session->step().is_ok());
  train_action(app, TrainAction::save);
  REQUIRE(app.train.error.empty());
  const fs::path saved = dir / "trained-model";
  const std::vector<std::string> set = {"model.safetensors", "config.json", "optimizer.safetensors",
                                        "checkpoint.json"};
  CHECK(fs::exists(saved / "checkpoint.json"));
  std::map<std::string, std::string> before;
  for (const std::string& f : set) before[f] = read_file(saved / f);

  // two steps on, the disk fills after each file in turn: the message says so, the saved set stays
  for (int i = 0; i < 2; ++i) REQUIRE(app.train.session->step().is_ok());
  for (const char* at : {"model.safetensors", "config.json", "optimizer.safetensors"}) {
    CAPTURE(at);
    app.written.clear();
    app.train.error.clear();
    set_checkpoint_write_hook([&](const std::string& file) {
      return file == at ? Status::fail("cannot write " + file + ": No space left on device") : Status::ok();
    });
    train_action(app, TrainAction::save);
    set_checkpoint_write_hook({});
    CHECK(app.train.error.find("No space left on device") != std::string::npos);
    CHECK(app.written.empty());
    std::size_t files = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(saved)) {
      ++files;
      CHECK(before.count(e.path().filename().string()) == 1);  // no NAME.tmp left
    }
    CHECK(files == before.size());
    for (const std::string& f : set) CHECK(read_file(saved / f) == before[f]);
    // and it continues: the step it was saved at
    TrainSession c;
    const Status st = c.continue_from(saved.string(), app.train.settings, nullptr);
    CAPTURE(st.error);
    REQUIRE(st.is_ok());
    CHECK(c.steps_done() == 2);
  }
  // unhindered, the new set replaces it whole
  app.train.error.clear();
  train_action(app, TrainAction::save);
  CHECK(app.train.error.empty());
  CHECK(read_file(saved / "model.safetensors") != before["model.safetensors"]);
  CHECK(check_checkpoint_folder(saved.string()).is_ok());
  // Continue refuses a torn set by name (the optimizer of the save before), and keeps its session
  {
    std::ofstream f(saved / "optimizer.safetensors", std::ios::binary | std::ios::trunc);
    f << before["optimizer.safetensors"];
  }
  TrainSession c;
  const Status torn = c.continue_from(saved.string(), app.train.settings, nullptr);
  CHECK(torn.error.find("is a torn checkpoint: its optimizer.safetensors holds other bytes") !=
        std::string::npos);
  fs::remove_all(dir);
}
