// The Train panel (controls column) and the training view (main area): recipes, Start / Pause / Step / Reset,
// the loss and in-context curves, every head's kind over the steps, and every head's attention on the probe
// at the step the slider picks.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attnviz/io/bpe.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/model_source.hpp"
#include "attnviz/io/train_text.hpp"
#include "ui_internal.hpp"

namespace attnviz::viz::ui {
namespace {

const ImVec4 kTrainDim{0.6f, 0.6f, 0.65f, 1.0f};
const ImVec4 kTrainError{0.95f, 0.45f, 0.4f, 1.0f};

// The colour of a head kind in the strip and on the grid's labels.
ImU32 kind_color(HeadKind k) {
  switch (k) {
    case HeadKind::induction:
      return IM_COL32(230, 90, 60, 255);
    case HeadKind::previous:
      return IM_COL32(70, 150, 230, 255);
    case HeadKind::first:
      return IM_COL32(150, 110, 200, 255);
    case HeadKind::self:
      return IM_COL32(90, 180, 120, 255);
    case HeadKind::broad:
      return IM_COL32(120, 120, 120, 255);
    case HeadKind::none:
      break;
  }
  return IM_COL32(45, 45, 50, 255);
}

// The tokenizer of the text recipes: the open model's, else GPT-2's, encoding as the book's GPTDatasetV1 does
// ("<|endoftext|>" is its id: train_text.hpp).
Status tokenize(const App& app, const std::string& text, std::vector<int>& ids) {
  if (app.model.is_open()) return encode_training_text(app.model.tokenizer(), text, ids);
  static Bpe gpt2;
  static Status loaded = Bpe::load_dir(default_vocab_dir(), gpt2);
  if (!loaded.is_ok()) return loaded;
  return encode_training_text(gpt2, text, ids);
}

}  // namespace
}  // namespace attnviz::viz::ui

namespace attnviz::viz {

Status reset_training(App& app) {
  TrainView& t = app.train;
  TrainSettings s = t.settings;
  // what the host says is free (the page: its heap), else what the machine has
  s.memory_budget = app.model.free_memory ? app.model.free_memory() : available_memory_bytes();
  if (s.recipe != TrainRecipe::induction) {
    s.text = app.session.text;
    if (!t.text_path.empty())
      if (Status st = read_untrusted_file(t.text_path, std::size_t{64} << 20, s.text); !st.is_ok()) return st;
  }
  auto session = std::make_shared<TrainSession>();
  if (Status st = session->reset(
          s, [&app](const std::string& text, std::vector<int>& ids) { return ui::tokenize(app, text, ids); });
      !st.is_ok())
    return st;
  t.session = std::move(session);
  t.snapshot = -1;
  ++t.resets;
  return Status::ok();
}

}  // namespace attnviz::viz

namespace attnviz::viz::ui {
namespace {

Status reset(App& app) {
  return reset_training(app);
}

void fail(App& app, const Status& st) {
  app.train.error = st.error;
  app.train.running = false;
}

void export_training(App& app, bool checkpoint) {
  TrainSession& s = *app.train.session;
  std::error_code ec;
  std::filesystem::create_directories(app.export_dir, ec);
  if (checkpoint) {
    const std::string dir = app.export_dir + "/trained-model";
    if (Status st = s.write_checkpoint(dir); !st.is_ok()) return fail(app, st);
    for (const char* f : {"model.safetensors", "config.json", "optimizer.safetensors"})
      app.written.push_back(dir + "/" + f);
    app.message = "wrote " + dir;
    return;
  }
  const std::string path = app.export_dir + "/train-loss.csv";
  if (Status st = write_file(path, s.loss_csv()); !st.is_ok()) return fail(app, st);
  app.written.push_back(path);
  app.message = "wrote " + path;
}

void open_trained(App& app) {
  TrainSession& s = *app.train.session;
  const std::string dir = app.export_dir + "/trained-model";
  if (Status st = s.write_checkpoint(dir); !st.is_ok()) return fail(app, st);
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = dir;
  // The induction recipe's model has no tokenizer: the view's sentence becomes the probe's ids.
  c.ids_only = s.settings().recipe == TrainRecipe::induction;
  const std::string text = app.session.text;
  if (c.ids_only) {
    std::string ids;
    for (int id : s.probe()) ids += (ids.empty() ? "" : " ") + std::to_string(id);
    app.session.text = ids;
  }
  if (Status st = open_model(app, c); !st.is_ok()) {
    app.session.text = text;
    return fail(app, st);
  }
  app.train.show = false;
  app.train.running = false;
}

}  // namespace
}  // namespace attnviz::viz::ui

namespace attnviz::viz {

void train_action(App& app, TrainAction a) {
  if (!app.train.session) {
    app.train.error = "nothing trained yet";
    return;
  }
  app.train.error.clear();
  if (a == TrainAction::open) {
    ui::open_trained(app);
  } else if (a == TrainAction::png) {
    app.train.show = true;  // the view the PNG is of
    app.capture.pending = true;
    app.capture.path = app.export_dir + "/train-plots.png";
  } else {
    ui::export_training(app, a == TrainAction::save);
  }
}

}  // namespace attnviz::viz

namespace attnviz::viz::ui {

void step_training(App& app) {
  TrainView& t = app.train;
  if (!t.running || !t.session) return;
  if (Status st = t.session->advance(t.budget_ms); !st.is_ok()) fail(app, st);
}

void draw_train_panel(App& app) {
  TrainView& t = app.train;
  int recipe = static_cast<int>(t.settings.recipe);
  const char* names[] = {to_string(TrainRecipe::induction), to_string(TrainRecipe::book),
                         to_string(TrainRecipe::custom)};
  if (ImGui::Combo("recipe", &recipe, names, 3)) {
    const std::uint64_t seed = t.settings.seed;
    t.settings = recipe_settings(static_cast<TrainRecipe>(recipe));
    t.settings.seed = seed;
  }
  TrainSettings& s = t.settings;
  if (s.recipe == TrainRecipe::induction)
    ImGui::TextColored(kTrainDim, "random tokens with repeated segments; attention-only, 2 x 4 heads");
  else
    ImGui::TextColored(kTrainDim, "the sentence box's text, or a file; its last 10%% validates");
  if (s.recipe != TrainRecipe::induction) ImGui::InputText("text file", &t.text_path);
  // 0: copies at random distances (an induction head forms); N: always N positions later (a head that looks
  // back N positions does as well, and the probes at other distances tell the two apart)
  if (s.recipe == TrainRecipe::induction) input_int("fixed distance", s.task.fixed_distance, 1);
  if (s.recipe == TrainRecipe::custom) {
    input_int("d_model", s.config.gpt.d_model, 16);
    input_int("heads", s.config.gpt.n_heads, 1);
    input_int("layers", s.config.gpt.n_layers, 1);
    input_int("context", s.config.gpt.context_length, 16);
    input_int("batch", s.batch_size, 1);
    ImGui::InputDouble("lr", &s.lr, 0.0, 0.0, "%.1e");
  }
  int seed = static_cast<int>(s.seed);
  if (input_int("seed", seed, 1)) s.seed = static_cast<std::uint64_t>(std::max(seed, 0));

  if (ImGui::Button(t.running ? "Pause" : "Start")) {
    t.error.clear();
    if (!t.running && !t.session)
      if (Status st = reset(app); !st.is_ok()) fail(app, st);
    t.running = !t.running && t.session != nullptr;
    t.show = t.show || t.running;
  }
  ImGui::SameLine();
  if (ImGui::Button("Step")) {
    t.error.clear();
    if (!t.session)
      if (Status st = reset(app); !st.is_ok()) fail(app, st);
    if (t.session)
      if (Status st = t.session->step(); !st.is_ok()) fail(app, st);
    t.show = t.session != nullptr;
  }
  ImGui::SameLine();
  if (ImGui::Button("Reset")) {
    t.error.clear();
    t.running = false;
    if (Status st = reset(app); !st.is_ok()) fail(app, st);
  }
  if (t.session) {
    ImGui::SameLine();
    ImGui::Checkbox("show", &t.show);
    const TrainSession& ts = *t.session;
    const std::vector<TrainPoint>& p = ts.points();
    ImGui::Text("step %d, %.1f ms a step", ts.steps_done(), ts.ms_per_step());
    if (!p.empty()) ImGui::Text("loss %.3f", p.back().loss);
    const int first = ts.first_induction();
    if (first >= 0)
      ImGui::Text("induction head from step %d", ts.snapshots()[static_cast<std::size_t>(first)].step);
    if (ImGui::Button("Open in model view")) open_trained(app);
    if (ImGui::Button("Save model")) export_training(app, true);
    ImGui::SameLine();
    if (ImGui::Button("Loss CSV")) export_training(app, false);
    ImGui::SameLine();
    if (ImGui::Button("Plots PNG")) train_action(app, TrainAction::png);
  }
  if (!t.error.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(kTrainError, "%s", t.error.c_str());
    ImGui::PopTextWrapPos();
  }
}

void draw_train_main(App& app, TextureHost& textures, ImVec2 size) {
  TrainView& t = app.train;
  const TrainSession& s = *t.session;
  // the area a Plots PNG captures
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  app.capture.x = pos.x, app.capture.y = pos.y, app.capture.w = size.x, app.capture.h = size.y;
  ImGui::BeginChild("training", size, false);
  const std::vector<TrainPoint>& points = s.points();
  const float plot_w = ImGui::GetContentRegionAvail().x, plot_h = 90.0f;

  // the loss of every step, and the evaluations' validation loss or in-context score
  std::vector<float> loss, eval;
  for (const TrainPoint& p : points) {
    loss.push_back(static_cast<float>(p.loss));
    const double e = s.settings().recipe == TrainRecipe::induction ? p.in_context : p.val_loss;
    if (!std::isnan(e)) eval.push_back(static_cast<float>(e));
  }
  char title[96];
  std::snprintf(title, sizeof title, "training loss, %d steps", s.steps_done());
  ImGui::PlotLines("##loss", loss.data(), static_cast<int>(loss.size()), 0, title, FLT_MAX, FLT_MAX,
                   ImVec2(plot_w, plot_h));
  std::snprintf(title, sizeof title, "%s, every %d steps",
                s.settings().recipe == TrainRecipe::induction ? "in-context score (late - early loss)"
                                                              : "validation loss",
                s.settings().eval_freq);
  ImGui::PlotLines("##eval", eval.data(), static_cast<int>(eval.size()), 0, title, FLT_MAX, FLT_MAX,
                   ImVec2(plot_w, plot_h));

  const std::vector<TrainSnapshot>& snaps = s.snapshots();
  if (snaps.empty()) {
    ImGui::EndChild();
    return;
  }
  int pick = t.snapshot < 0 ? static_cast<int>(snaps.size()) - 1
                            : std::min(t.snapshot, static_cast<int>(snaps.size()) - 1);
  ImGui::SetNextItemWidth(plot_w * 0.6f);
  if (ImGui::SliderInt("snapshot", &pick, 0, static_cast<int>(snaps.size()) - 1, "")) t.snapshot = pick;
  ImGui::SameLine();
  ImGui::Text("step %d", snaps[static_cast<std::size_t>(pick)].step);
  ImGui::SameLine();
  if (ImGui::SmallButton("latest")) t.snapshot = -1;

  // the strip: one row per head, one cell per snapshot, coloured by kind
  const TrainSnapshot& snap = snaps[static_cast<std::size_t>(pick)];
  const int L = static_cast<int>(snap.heads.size()), H = L > 0 ? static_cast<int>(snap.heads[0].size()) : 0;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float row_h = 6.0f, cell_w = std::max(1.0f, (plot_w - 60.0f) / static_cast<float>(snaps.size()));
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const float y = o.y + static_cast<float>(l * H + h) * (row_h + 1.0f);
      for (std::size_t i = 0; i < snaps.size(); ++i) {
        const float x = o.x + 60.0f + static_cast<float>(i) * cell_w;
        dl->AddRectFilled(ImVec2(x, y), ImVec2(x + cell_w, y + row_h), kind_color(snaps[i].heads[l][h].kind));
      }
    }
  const float marker = o.x + 60.0f + (static_cast<float>(pick) + 0.5f) * cell_w;
  const float strip_h = static_cast<float>(L * H) * (row_h + 1.0f);
  dl->AddLine(ImVec2(marker, o.y), ImVec2(marker, o.y + strip_h), IM_COL32(255, 255, 255, 200));
  dl->AddText(ImVec2(o.x, o.y), ImGui::GetColorU32(ImGuiCol_Text), "kinds");
  ImGui::Dummy(ImVec2(plot_w, strip_h + 4.0f));
  // the legend: each kind in its colour
  for (HeadKind k : all_head_kinds()) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kind_color(k)), "%s", to_string(k));
    ImGui::SameLine();
  }
  ImGui::TextColored(kTrainDim, "(one row per head, layer by layer; one column per snapshot)");

  // every head's attention on the probe at that step, labelled with its kind
  const int T = static_cast<int>(s.probe().size());
  const float side =
      std::clamp((plot_w - static_cast<float>(H) * 8.0f) / static_cast<float>(std::max(H, 1)), 48.0f, 160.0f);
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      if (h > 0) ImGui::SameLine();
      ImGui::BeginGroup();
      const HeadScores& k = snap.heads[l][h];
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kind_color(k.kind)), "L%d h%d %s", l, h,
                         k.kind == HeadKind::none ? "" : short_label(k.kind));
      MatrixDesc m;
      m.data = snap.attention[l][h].data();
      m.rows = m.cols = T;
      m.row_stride = T;
      m.causal = true;
      ColorOptions c = app.view.color;
      const std::string key = "train/" + std::to_string(t.resets) + "/" + std::to_string(snap.step);
      void* tex =
          cached_texture(app, textures, kTrainSlot + l * kThumbStride + h, key, m, c, Range{0.0f, 1.0f});
      if (tex) ImGui::Image(tex, ImVec2(side, side));
      ImGui::EndGroup();
    }
  }
  ImGui::EndChild();
}

}  // namespace attnviz::viz::ui
