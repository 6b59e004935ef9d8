// The model view's causal tools without a window: the session's lens and attribution against the engine's
// CausalLens, kept equal while typing; ablation by Alt-click through ImGui's own mouse; patching in frame
// slices against patch() in one call, its debounce on the frame clock, a corrupted text of another length
// refused; train mode keeping the plain view; the tools' place in the state flags (the page's URL); and a
// model trained in the Train panel, opened in the view, against the checkpoint it saved.
#include <doctest/doctest.h>
#include <imgui.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/io/model_source.hpp"
#include "attnviz/lens.hpp"
#include "attnviz/viz/app.hpp"
#include "attnviz/viz/model.hpp"
#include "attnviz/viz/train.hpp"
#include "ui_harness.hpp"
#include "view_args.hpp"

using namespace attnviz;
using namespace attnviz::viz;
using namespace attnviz::viz::test;

namespace {

const std::string kFolder = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";
const std::string kClean = "When Mary and John went to the store, John gave a drink to";
const std::string kCorrupted = "When John and Mary went to the store, John gave a drink to";

ModelChoice folder_choice() {
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = kFolder;
  return c;
}

// The engine alone: the same folder opened afresh, and CausalLens over one full pass of `text`.
struct EngineLens {
  OpenedModel m;
  GptResult pass;
  LensResult out;
  std::vector<int> ids;
  EngineLens(const std::string& text, const LensRequest& lr, const GptRequest& request) {
    ModelSpec spec;
    spec.model = kFolder;
    spec.options.train = false;  // the session's eval mode (ModelChoice::train off)
    REQUIRE(open_model(spec, m).is_ok());
    REQUIRE(encode_for(m, text, ids).is_ok());
    CausalLens lens;
    REQUIRE(lens.run(m.model, ids, request, lr, pass, out).is_ok());
  }
};

double rel_diff(double a, double b) {
  return std::fabs(a - b) / std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

// The session's lens and attribution against the engine's, within `tol` (0: the same numbers).
void check_same(const ModelSession& ms, const EngineLens& e, double tol) {
  REQUIRE(ms.has_lens());
  const LensResult& got = ms.lens();
  CHECK(ms.ids() == e.ids);
  CHECK(got.target.target == e.out.target.target);
  CHECK(got.target.position == e.out.target.position);
  REQUIRE(got.lens.size() == e.out.lens.size());
  double worst = 0.0;
  for (std::size_t k = 0; k < got.lens.size(); ++k) {
    REQUIRE(got.lens[k].positions.size() == e.out.lens[k].positions.size());
    CHECK(got.lens[k].after == e.out.lens[k].after);
    for (std::size_t t = 0; t < got.lens[k].positions.size(); ++t) {
      const auto& a = got.lens[k].positions[t].top;
      const auto& b = e.out.lens[k].positions[t].top;
      REQUIRE(a.size() == b.size());
      CHECK(a.front().id == b.front().id);
      for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, rel_diff(a[i].probability, b[i].probability));
    }
  }
  REQUIRE(got.attributed);
  const Attribution& x = got.attribution;
  const Attribution& y = e.out.attribution;
  worst = std::max({worst, rel_diff(x.value, y.value), rel_diff(x.embeddings, y.embeddings),
                    rel_diff(x.final_bias, y.final_bias)});
  REQUIRE(x.heads.size() == y.heads.size());
  for (std::size_t l = 0; l < x.heads.size(); ++l) {
    for (std::size_t h = 0; h < x.heads[l].size(); ++h)
      worst = std::max(worst, rel_diff(x.heads[l][h], y.heads[l][h]));
    worst =
        std::max({worst, rel_diff(x.mlp[l], y.mlp[l]), rel_diff(x.attention_bias[l], y.attention_bias[l])});
  }
  CHECK(worst <= tol);
  CHECK(x.sum() == doctest::Approx(x.value).epsilon(1e-4));
}

LensRequest lens_and_attribution() {
  LensRequest lr;
  lr.lens = true;
  lr.attribute = true;
  return lr;
}

// Runs the session's patching over frames 16 ms apart from `t0`, `budget_ms` a frame, until it stops; the
// frames it took.
int run_patching(ModelSession& ms, double t0, double budget_ms) {
  int frames = 0;
  for (double now = t0; frames < 100000; now += 16.0) {
    ms.step_patching(now, budget_ms);
    ++frames;
    if (!ms.patching_running() && !ms.patching_scheduled()) break;
  }
  return frames;
}

}  // namespace

TEST_CASE("causal tools: the session's lens and attribution are CausalLens's, and stay so while typing") {
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  CausalTools t;
  t.lens = t.attribute = true;
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  check_same(ms, EngineLens(kClean, lens_and_attribution(), ms.request()), 0.0);
  // One more token: the session's pass extends the last one (CausalLens keeps its probe), the engine's is a
  // fresh full pass.
  REQUIRE(ms.recompute(kClean + " her").is_ok());
  CHECK(ms.result().reused > 0);
  check_same(ms, EngineLens(kClean + " her", lens_and_attribution(), ms.request()), 1e-5);
  // A target, a versus token and a position are the engine's too.
  t.target = {3, 11, 42};
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  LensRequest lr = lens_and_attribution();
  lr.target = t.target;
  const EngineLens e(kClean, lr, ms.request());
  check_same(ms, e, 1e-5);
  CHECK(ms.lens().attribution.versus == 42);
  // A position past the text is refused in one line, and the last good view stays.
  const int generation = ms.generation();
  t.target.position = 500;
  ms.set_causal(t);
  CHECK_FALSE(ms.recompute(kClean).is_ok());
  CHECK(ms.error().find('\n') == std::string::npos);
  CHECK(ms.error().find("500") != std::string::npos);
  CHECK(ms.generation() == generation);
  check_same(ms, e, 1e-5);
}

TEST_CASE("causal tools: a model in train mode keeps the plain view and says why in one line") {
  ModelSession ms;
  ModelChoice c = folder_choice();
  c.train = true;
  REQUIRE(ms.open(c).is_ok());
  CausalTools t;
  t.lens = true;
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  CHECK_FALSE(ms.has_lens());
  CHECK(ms.causal_note() ==
        "the causal tools need eval mode: turn train mode (dropout) off in the Model panel");
  CHECK(ms.has_result());
}

TEST_CASE("causal tools: Alt-click on a head ablates it and the view recomputes; again restores it") {
  Ui ui;
  App app;
  app.session.text = kClean;
  REQUIRE(open_model(app, folder_choice()).is_ok());
  app.model_view.causal.attribute = true;
  ui.frame(app);
  ui.frame(app);
  REQUIRE(app.model.has_lens());
  const double before = app.model.lens().attribution.heads[1][2];
  REQUIRE(before != 0.0);
  const std::vector<float> logits_before(app.model.result().logits.ptr(),
                                         app.model.result().logits.ptr() + app.model.config().vocab_size);
  const auto click_head = [&](int layer, int head, bool alt) {
    const ModelView::Thumb* thumb = nullptr;
    for (const ModelView::Thumb& th : app.model_view.thumbs)
      if (th.layer == layer && th.head == head) thumb = &th;
    REQUIRE(thumb != nullptr);
    ImGui::GetIO().MousePos = ImVec2(0.5f * (thumb->x0 + thumb->x1), 0.5f * (thumb->y0 + thumb->y1));
    ImGui::GetIO().KeyAlt = alt;
    ui.frame(app);
    ui.click(app);
    ImGui::GetIO().KeyAlt = false;
    ui.frame(app);  // the session takes the panel's choice at the start of a frame
  };
  click_head(1, 2, true);
  REQUIRE(app.model_view.causal.ablation.heads == std::vector<HeadRef>{{1, 2}});
  CHECK(app.model.causal().ablation.heads == app.model_view.causal.ablation.heads);
  CHECK(app.model_view.layer == -1);  // the grid stays: Alt-click does not open the layer
  // Zero ablation: the head writes nothing, so its attribution is exactly 0, and the logits moved.
  CHECK(app.model.lens().attribution.heads[1][2] == 0.0);
  CHECK(app.model.lens().attribution.sum() ==
        doctest::Approx(app.model.lens().attribution.value).epsilon(1e-4));
  const float* logits = app.model.result().logits.ptr();
  bool moved = false;
  for (int i = 0; i < app.model.config().vocab_size; ++i)
    moved = moved || logits[i] != logits_before[static_cast<std::size_t>(i)];
  CHECK(moved);
  // The engine's CausalLens with the same ablation gives the same numbers.
  LensRequest lr = lens_and_attribution();
  lr.lens = false;
  lr.ablation.heads = {{1, 2}};
  const EngineLens e(kClean, lr, app.model.request());
  CHECK(app.model.lens().attribution.value == doctest::Approx(e.out.attribution.value).epsilon(1e-6));
  // The state carries it.
  const std::vector<StateArg> args = state_args(app);
  CHECK(std::find(args.begin(), args.end(), StateArg{"ablate", "1.2"}) != args.end());
  click_head(1, 2, true);
  CHECK(app.model_view.causal.ablation.empty());
  CHECK(app.model.lens().attribution.heads[1][2] == doctest::Approx(before).epsilon(1e-6));
  // A plain click still opens the layer.
  click_head(0, 1, false);
  CHECK(app.model_view.layer == 0);
}

TEST_CASE(
    "causal tools: the lens strip's columns set the position, a next token the target, Shift the versus") {
  Ui ui;
  App app;
  app.session.text = kClean;
  REQUIRE(open_model(app, folder_choice()).is_ok());
  app.model_view.causal.lens = true;
  app.model_view.causal.attribute = true;
  ui.frame(app);
  ui.frame(app);
  const auto cell = [&](const char* kind, int a, int b) -> const ModelView::CausalCell* {
    for (const ModelView::CausalCell& c : app.model_view.causal_cells)
      if (c.kind == kind && c.a == a && c.b == b) return &c;
    return nullptr;
  };
  const auto click = [&](const ModelView::CausalCell* c, bool shift) {
    REQUIRE(c != nullptr);
    ImGui::GetIO().MousePos = ImVec2(0.5f * (c->x0 + c->x1), 0.5f * (c->y0 + c->y1));
    ImGui::GetIO().KeyShift = shift;
    ui.frame(app);
    ui.click(app);
    ImGui::GetIO().KeyShift = false;
    ui.frame(app);  // the session takes the panel's choice at the start of a frame
  };
  // The strip has L + 1 rows (the embeddings, then each block) of T positions.
  const int T = static_cast<int>(app.model.ids().size());
  CHECK(cell("lens", 2, T - 1) != nullptr);
  CHECK(cell("lens", 3, 0) == nullptr);
  click(cell("column", 0, 4), false);
  CHECK(app.model_view.causal.target.position == 4);
  CHECK(app.model.lens().attribution.position == 4);
  const int second = app.model.result().next[1].id;
  click(cell("next", second, 0), false);
  CHECK(app.model_view.causal.target.target == second);
  CHECK(app.model.lens().attribution.target == second);
  const int third = app.model.result().next[2].id;
  click(cell("next", third, 0), true);
  CHECK(app.model_view.causal.target.versus == third);
  CHECK(app.model.lens().attribution.versus == third);
}

TEST_CASE("causal tools: patching in frame slices equals patch() in one call, after the typing stops") {
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  ms.patch_delay_ms = 400.0;
  CausalTools t;
  t.attribute = true;
  t.corrupted = kCorrupted;
  t.ablation.heads = {{0, 3}};
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  // The wait runs on the frame clock: nothing starts before 400 ms after the first frame that saw the edit.
  ms.step_patching(1000.0, 5.0);
  ms.step_patching(1399.0, 5.0);
  CHECK(ms.patch_job() == nullptr);
  CHECK(ms.patching_scheduled());
  // An edit meanwhile starts the wait again.
  REQUIRE(ms.recompute(kClean).is_ok());
  ms.step_patching(1500.0, 0.0);
  ms.step_patching(1899.0, 0.0);
  CHECK(ms.patch_job() == nullptr);
  ms.step_patching(1900.0, 0.0);  // begins, and runs one run (a budget of 0 still runs one): the clean text's
  INFO(ms.patch_error());
  REQUIRE(ms.patch_job() != nullptr);
  // One run of the job a frame at a budget of 0: the clean text's, then the corrupted text's, then the
  // patched ones (a step covers at least one entry).
  CHECK(ms.patch_job()->done() == 0);
  CHECK(std::isfinite(ms.patching()->clean));
  CHECK(std::isnan(ms.patching()->corrupted));
  ms.step_patching(1908.0, 0.0);
  CHECK(ms.patch_job()->done() == 0);
  CHECK(std::isfinite(ms.patching()->corrupted));
  ms.step_patching(1912.0, 0.0);
  const int first = ms.patch_job()->done();
  CHECK(first >= 1);
  CHECK(ms.patching_running());
  CHECK(std::isnan(ms.patching()->heads.back().back()));  // not computed yet
  const int frames = run_patching(ms, 1916.0, 0.0);
  REQUIRE(ms.patch_job()->finished());
  const int total = ms.patch_job()->total();
  const int L = ms.config().n_layers, H = ms.config().n_heads, T = static_cast<int>(ms.ids().size());
  CHECK(total == L * T + L * H);  // the residual map's entries, then the heads'

  CHECK(frames >= 1);
  CHECK(frames <= total - first);
  // The same in one call.
  ModelSession fresh;
  REQUIRE(fresh.open(folder_choice()).is_ok());
  std::vector<int> clean, corrupted;
  OpenedModel m;
  ModelSpec spec;
  spec.model = kFolder;
  spec.options.train = false;
  REQUIRE(open_model(spec, m).is_ok());
  REQUIRE(encode_for(m, kClean, clean).is_ok());
  REQUIRE(encode_for(m, kCorrupted, corrupted).is_ok());
  REQUIRE(clean.size() == corrupted.size());
  Patching whole;
  REQUIRE(patch(m.model, clean, corrupted, ms.lens().target, t.ablation, whole).is_ok());
  CHECK(ms.patching()->clean == whole.clean);
  CHECK(ms.patching()->corrupted == whole.corrupted);
  CHECK(ms.patching()->residual == whole.residual);
  CHECK(ms.patching()->heads == whole.heads);
  for (const auto& row : whole.heads)
    for (double v : row) CHECK(std::isfinite(v));
  REQUIRE(ms.json_lens().has_value());
  CHECK(ms.json_lens()->patching == ms.patching());  // complete, and patched for the pass on screen

  // A corrupted text of another length is refused in one line; the last good maps stay.
  const Patching good = *ms.patching();
  t.corrupted = kCorrupted + " and more";
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  run_patching(ms, 3000.0, 5.0);
  CHECK(ms.patch_error().find("tokens and the typed one") != std::string::npos);
  CHECK(ms.patch_error().find('\n') == std::string::npos);
  REQUIRE(ms.patching() != nullptr);
  CHECK(ms.patching()->residual == good.residual);
  CHECK(ms.patching()->heads == good.heads);
  // ... on screen; an export never pairs them with a pass or tools they were not patched for.
  REQUIRE(ms.json_lens().has_value());
  CHECK(ms.json_lens()->patching == nullptr);

  // Two texts with the same metric: nothing to patch, found by the job's second run, a frame after it began;
  // the last good maps come back.
  t.corrupted = kClean;
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  run_patching(ms, 4000.0, 0.0);
  CHECK(ms.patch_error().find("there is nothing to patch") != std::string::npos);
  REQUIRE(ms.patching() != nullptr);
  CHECK(ms.patching()->residual == good.residual);
  CHECK(ms.patching()->heads == good.heads);

  // Cancel before the job has run both texts: the last good maps come back too.
  t.corrupted = kCorrupted;
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  ms.step_patching(4600.0, 0.0);
  ms.step_patching(5000.0, 0.0);  // begins, and runs the clean text
  REQUIRE(ms.patching_running());
  CHECK(std::isnan(ms.patching()->corrupted));
  ms.cancel_patching();
  REQUIRE(ms.patching() != nullptr);
  CHECK(ms.patching()->heads == good.heads);

  // Cancel stops a job half way and says so; the maps keep what it computed.
  REQUIRE(ms.recompute(kClean).is_ok());
  ms.step_patching(5100.0, 0.0);
  ms.step_patching(5500.0, 0.0);  // the clean text
  ms.step_patching(5516.0, 0.0);  // the corrupted text
  ms.step_patching(5532.0, 0.0);  // the first patched run
  REQUIRE(ms.patching_running());
  const int done = ms.patch_job()->done();
  CHECK(done >= 1);
  CHECK(done < total);
  ms.cancel_patching();
  CHECK_FALSE(ms.patching_running());
  CHECK(ms.patch_error() ==
        "patching cancelled after " + std::to_string(done) + " of " + std::to_string(total) + " runs");
  ms.step_patching(6000.0, 0.0);
  CHECK(ms.patch_job()->done() == done);
}

TEST_CASE(
    "causal tools: the state flags carry lens, attribution, target, versus, position, ablation and patch") {
  App app;
  app.session.text = kClean;
  REQUIRE(open_model(app, folder_choice()).is_ok());
  CausalTools& t = app.model_view.causal;
  t.lens = t.attribute = true;
  t.target = {5, 17, 23};
  t.ablation.heads = {{1, 0}, {0, 3}};
  t.ablation.kind = AblationKind::mean;
  t.corrupted = kCorrupted;
  REQUIRE(start(app).is_ok());
  const std::vector<StateArg> args = state_args(app);
  const auto has = [&](const char* k, const std::string& value) {
    return std::find(args.begin(), args.end(), StateArg{k, value}) != args.end();
  };
  CHECK(has("lens", ""));
  CHECK(has("attribute", ""));
  CHECK(has("target", "#17"));
  CHECK(has("versus", "#23"));
  CHECK(has("position", "5"));
  CHECK(has("ablate", "1.0,0.3"));
  CHECK(has("ablation", "mean"));
  CHECK(has("patch", kCorrupted));
  App other;
  other.model_view.files_dir = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt";
  REQUIRE(apply_state_args(args, other).is_ok());
  CHECK(other.model_view.causal == t);
  CHECK(other.model.causal() == t);
  REQUIRE(other.model.has_lens());
  CHECK(other.model.lens().attribution.target == 17);
  CHECK(state_args(other) == args);
  // Bad values are refused in one line naming the flag.
  Status st = apply_state_args({{"model", "file:hf-folder"}, {"ablate", "1.x"}}, other);
  CHECK(st.error.rfind("--ablate: ", 0) == 0);
  st = apply_state_args({{"model", "file:hf-folder"}, {"target", "Mary"}}, other);
  CHECK(st.error == "--target 'Mary' is not a token id: give #ID, such as #17");
  st = apply_state_args({{"model", "file:hf-folder"}, {"ablation", "half"}}, other);
  CHECK(st.error == "unknown ablation 'half' (zero, mean)");
  // A head the model lacks: the view's pass refuses it in one line.
  st = apply_state_args({{"model", "file:hf-folder"}, {"ablate", "7.0"}}, other);
  CHECK_FALSE(st.is_ok());
  CHECK(st.error.find('\n') == std::string::npos);
}

TEST_CASE("causal tools: their captures count in the memory check, and patching's before it begins") {
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  REQUIRE(ms.recompute(kClean).is_ok());
  const GptConfig& c = ms.config();
  const int T = static_cast<int>(ms.ids().size());
  CausalTools t;
  t.lens = t.attribute = true;
  LensRequest lr = lens_and_attribution();
  const std::uint64_t pass = pass_memory(c, T, ms.request(), false),
                      captures = lens_bytes(c, T, lr, ms.request());
  // Room for the pass but not beside the captures: refused in one line, the plain view stays.
  std::uint64_t budget = pass + captures / 2;
  ms.free_memory = [&] { return budget; };
  REQUIRE(ms.recompute(kClean).is_ok());  // without the tools the pass fits
  ms.set_causal(t);
  CHECK_FALSE(ms.recompute(kClean).is_ok());
  CHECK(ms.error().find('\n') == std::string::npos);
  CHECK_FALSE(ms.has_lens());
  CHECK(ms.has_result());
  // Room for both, but not for patching's runs: the lens and attribution run, patching says why not.
  budget = pass + captures + patching_bytes(c, T) / 2;
  t.corrupted = kCorrupted;
  ms.set_causal(t);
  REQUIRE(ms.recompute(kClean).is_ok());
  CHECK(ms.has_lens());
  run_patching(ms, 0.0, 5.0);
  CHECK(ms.patching() == nullptr);
  CHECK(ms.patch_error().rfind("patching needs ", 0) == 0);
  CHECK(ms.patch_error().find("the lens and attribution run without it") != std::string::npos);
}

TEST_CASE(
    "causal tools: the JSON export holds the lens, the attribution, the ablated heads and the patching "
    "maps") {
  App app;
  app.session.text = kClean;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnviz_causal_export";
  std::filesystem::remove_all(dir);
  app.export_dir = dir.string();
  REQUIRE(open_model(app, folder_choice()).is_ok());
  CausalTools& t = app.model_view.causal;
  t.lens = t.attribute = true;
  t.ablation.heads = {{1, 2}};
  t.corrupted = kCorrupted;
  app.model.patch_delay_ms = 0.0;
  REQUIRE(start(app).is_ok());
  run_patching(app.model, 0.0, 1000.0);
  REQUIRE(app.model.patch_job() != nullptr);
  REQUIRE(app.model.patch_job()->finished());
  run_export(app, ExportKind::json);
  REQUIRE(app.written.size() == 2);  // one file per layer
  std::ifstream f(app.written[0]);
  const nlohmann::json j = nlohmann::json::parse(f);
  CHECK(j["lens"].size() == 3);
  CHECK(j["attribution"]["target"]["id"] == app.model.lens().target.target);
  CHECK(j["attribution"]["components"]["heads"][1][2] == 0.0);
  CHECK(j["ablated"] == nlohmann::json::parse(R"([{"layer": 1, "head": 2}])"));
  CHECK(j["patching"]["heads"][0][1].get<double>() == doctest::Approx(app.model.patching()->heads[0][1]));
  CHECK(j["corrupted_text"] == kCorrupted);
  std::filesystem::remove_all(dir);
}

TEST_CASE("causal tools: on a model trained in the Train panel, and on the checkpoint it saves") {
  App app;
  REQUIRE(start(app).is_ok());
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnviz_causal_trained";
  std::filesystem::remove_all(dir);
  app.export_dir = dir.string();
  app.train.settings = recipe_settings(TrainRecipe::induction);
  REQUIRE(reset_training(app).is_ok());
  for (int i = 0; i < 5; ++i) REQUIRE(app.train.session->step().is_ok());
  train_action(app, TrainAction::open);  // writes trained-model/ and opens it in the model view, on the probe
  CAPTURE(app.train.error);
  REQUIRE(app.model.is_open());
  CausalTools t;
  t.lens = t.attribute = true;
  t.ablation.heads = {{1, 2}};
  app.model.set_causal(t);
  std::string probe;
  for (const int id : app.train.session->probe()) probe += (probe.empty() ? "" : " ") + std::to_string(id);
  REQUIRE(app.model.recompute(probe).is_ok());
  REQUIRE(app.model.has_lens());
  CHECK(app.model.lens().attribution.heads[1][2] == 0.0);  // zero-ablated: it writes nothing
  // The checkpoint the panel saved, opened by the engine alone, gives the same numbers.
  ModelSpec spec;
  spec.model = (dir / "trained-model").string();
  spec.ids_only = true;
  spec.options.train = false;
  OpenedModel m;
  REQUIRE(open_model(spec, m).is_ok());
  LensRequest lr = lens_and_attribution();
  lr.ablation = t.ablation;
  CausalLens lens;
  GptResult pass;
  LensResult out;
  REQUIRE(lens.run(m.model, app.train.session->probe(), app.model.request(), lr, pass, out).is_ok());
  const Attribution& a = app.model.lens().attribution;
  CHECK(a.target == out.attribution.target);
  CHECK(a.value == doctest::Approx(out.attribution.value).epsilon(1e-5));
  for (std::size_t l = 0; l < a.heads.size(); ++l)
    for (std::size_t h = 0; h < a.heads[l].size(); ++h)
      CHECK(a.heads[l][h] == doctest::Approx(out.attribution.heads[l][h]).epsilon(1e-5).scale(1.0));
  CHECK(app.model.lens().lens.back().positions.back().top.front().id ==
        out.lens.back().positions.back().top.front().id);
  std::filesystem::remove_all(dir);
}
