// The Train panel (controls column) and the training view (main area): recipes, Start / Pause / Step / Reset,
// the loss and in-context curves, every head's kind over the steps, and every head's attention on the probe
// at the step the slider picks.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <utility>

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

}  // namespace

void note_train_control(App& app, const char* name, float width) {
  TrainView& t = app.train;
  if (t.controls_frame != ImGui::GetFrameCount()) t.controls.clear();
  t.controls_frame = ImGui::GetFrameCount();
  const ImVec2 a = ImGui::GetItemRectMin();
  ImVec2 b = ImGui::GetItemRectMax();
  if (width > 0.0f) b.x = std::min(b.x, a.x + width);
  const ImVec2 w = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  const bool visible = a.x >= w.x && a.y >= w.y && b.x <= w.x + size.x && b.y <= w.y + size.y;
  t.controls.push_back({name, a.x, a.y, b.x, b.y, visible, ImGui::IsItemHovered()});
}

namespace {

bool noted(App& app, const char* name, bool clicked, float width = 0.0f) {
  note_train_control(app, name, width);
  return clicked;
}

// The tokenizer of the text recipes: the open model's, else GPT-2's, encoding as the book's GPTDatasetV1 does
// ("<|endoftext|>" is its id: train_text.hpp).
Status tokenize(const App& app, const std::string& text, std::vector<int>& ids) {
  if (app.model.is_open()) return encode_training_text(app.model.tokenizer(), text, ids);
  // loaded on first use, and tried again after a failure (the page writes the files only when it needs them)
  static Bpe gpt2;
  static bool loaded = false;
  if (!loaded) {
    if (Status st = Bpe::load_dir(default_vocab_dir(), gpt2); !st.is_ok()) return st;
    loaded = true;
  }
  return encode_training_text(gpt2, text, ids);
}

const ImU32 kTrainLine = IM_COL32(90, 160, 240, 255), kValLine = IM_COL32(240, 150, 60, 255),
            kStepLine = IM_COL32(90, 160, 240, 110);

// The loss plot as the book's figure draws it: training loss (and, for the text recipes, validation loss at
// each evaluation) against steps, with a second axis of tokens seen along the top. Large labels carry to a
// projector; hovering reads off one step.
void draw_loss_plot(const TrainSession& s, float w, float h) {
  const std::vector<TrainPoint>& points = s.points();
  const bool val = s.settings().recipe != TrainRecipe::induction;
  ImGui::TextUnformatted("loss");
  ImGui::SameLine();
  if (val) {
    // the book's figure: the evaluation's training and validation losses; each step's own loss behind them
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kTrainLine), "training");
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kValLine), "validation (every %d steps)",
                       s.settings().eval_freq);
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kStepLine), "each step's batch");
  } else {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kTrainLine), "training");
  }
  ImGui::SameLine();
  ImGui::TextColored(kTrainDim, "against steps (below) and tokens seen (above)");
  const float line = ImGui::GetTextLineHeight(), margin = 56.0f;
  const ImVec2 o = ImGui::GetCursorScreenPos();
  // rows: tokens seen, the plot, steps
  const ImVec2 p0(o.x + margin, o.y + line + 2.0f), p1(o.x + w - 8.0f, p0.y + h);
  ImGui::Dummy(ImVec2(w, h + 2.0f * line + 6.0f));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, p1, ImGui::GetColorU32(ImGuiCol_FrameBg));
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(kTrainDim);
  dl->AddText(ImVec2(o.x, o.y), dim, "tokens");
  dl->AddText(ImVec2(o.x, p1.y + 2.0f), dim, "steps");
  if (points.empty()) return;

  float lo = FLT_MAX, hi = -FLT_MAX;
  for (const TrainPoint& p : points)
    for (double v : {p.loss, val ? p.val_loss : std::nan(""), val ? p.eval_train_loss : std::nan("")})
      if (std::isfinite(v))
        lo = std::min(lo, static_cast<float>(v)), hi = std::max(hi, static_cast<float>(v));
  if (!(lo <= hi)) return;
  if (hi - lo < 1e-3f) lo -= 0.5f, hi += 0.5f;
  const float pad = 0.05f * (hi - lo);
  lo -= pad, hi += pad;
  const int last = std::max(points.back().step, 1);
  const auto X = [&](double step) { return p0.x + static_cast<float>(step / last) * (p1.x - p0.x); };
  const auto Y = [&](double loss) {
    return p1.y - static_cast<float>((loss - lo) / (hi - lo)) * (p1.y - p0.y);
  };

  // the axes: a grid line at each tick, steps below and tokens seen above
  const int max_ticks = std::clamp(static_cast<int>((p1.x - p0.x) / 90.0f), 1, 10);
  for (const LossAxisTick& t : loss_axis_ticks(points, max_ticks)) {
    const float x = X(t.step);
    dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p1.y), IM_COL32(255, 255, 255, 30));
    const float sw = ImGui::CalcTextSize(t.step_label.c_str()).x,
                tw = ImGui::CalcTextSize(t.tokens_label.c_str()).x;
    dl->AddText(ImVec2(std::min(x - sw * 0.5f, p1.x - sw), p1.y + 2.0f), text, t.step_label.c_str());
    dl->AddText(ImVec2(std::min(x - tw * 0.5f, p1.x - tw), o.y), text, t.tokens_label.c_str());
  }
  char buf[64];
  for (float v : {hi - pad, lo + pad}) {
    std::snprintf(buf, sizeof buf, "%.2f", v);
    dl->AddText(ImVec2(p0.x - ImGui::CalcTextSize(buf).x - 4.0f, Y(v) - line * 0.5f), text, buf);
  }

  // the training loss: one point per pixel column at most (the mean of the steps it covers)
  std::vector<ImVec2> curve;
  const float columns = std::max(1.0f, p1.x - p0.x);
  const std::size_t per =
      std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<float>(points.size()) / columns));
  for (std::size_t i = 0; i < points.size(); i += per) {
    const std::size_t end = std::min(points.size(), i + per);
    double sum = 0.0, step = 0.0;
    for (std::size_t j = i; j < end; ++j) sum += points[j].loss, step += points[j].step;
    const double n = static_cast<double>(end - i);
    curve.emplace_back(X(step / n), Y(sum / n));
  }
  dl->PushClipRect(p0, p1, true);
  dl->AddPolyline(curve.data(), static_cast<int>(curve.size()), val ? kStepLine : kTrainLine, 0,
                  val ? 1.0f : 2.0f);
  if (val) {
    // the evaluations, as the book plots them
    for (const auto& [loss, colour] :
         {std::pair{&TrainPoint::eval_train_loss, kTrainLine}, std::pair{&TrainPoint::val_loss, kValLine}}) {
      curve.clear();
      for (const TrainPoint& p : points)
        if (!std::isnan(p.*loss)) curve.emplace_back(X(p.step), Y(p.*loss));
      dl->AddPolyline(curve.data(), static_cast<int>(curve.size()), colour, 0, 2.0f);
      for (const ImVec2& c : curve) dl->AddCircleFilled(c, 3.0f, colour);
    }
  }
  dl->PopClipRect();

  if (hovered) {
    const float mx = ImGui::GetIO().MousePos.x;
    const int step =
        std::clamp(static_cast<int>(std::lround((mx - p0.x) / (p1.x - p0.x) * static_cast<float>(last))), 1,
                   static_cast<int>(points.size()));
    const TrainPoint& p = points[static_cast<std::size_t>(step - 1)];
    dl->AddLine(ImVec2(X(p.step), p0.y), ImVec2(X(p.step), p1.y), IM_COL32(255, 255, 255, 120));
    ImGui::BeginTooltip();
    ImGui::Text("step %d, %s tokens seen", p.step, short_count(p.tokens).c_str());
    ImGui::Text("this step's batch: loss %.3f", p.loss);
    if (val) {
      // the last evaluation at or before the step, as the book prints it
      const auto at = std::find_if(std::make_reverse_iterator(points.begin() + step), points.rend(),
                                   [](const TrainPoint& q) { return !std::isnan(q.val_loss); });
      if (at != points.rend())
        ImGui::Text("evaluated at step %d: Train loss %.3f, Val loss %.3f", at->step, at->eval_train_loss,
                    at->val_loss);
    }
    ImGui::EndTooltip();
  }
}
}  // namespace
}  // namespace attnviz::viz::ui

namespace attnviz::viz {

namespace {

// What training may take: what the host says is free (the page: its heap), else what the machine has.
std::uint64_t training_budget(const App& app) {
  return app.model.free_memory ? app.model.free_memory() : available_memory_bytes();
}

// The text recipes' text: a dropped text, else the text file's, else the sentence box's.
Status training_text(const App& app, std::string& text) {
  const TrainView& t = app.train;
  text = app.session.text;
  if (!t.text_name.empty())
    text = t.text;
  else if (!t.text_path.empty())
    return read_untrusted_file(t.text_path, std::size_t{64} << 20, text);
  return Status::ok();
}

}  // namespace

Status reset_training(App& app) {
  TrainView& t = app.train;
  TrainSettings s = t.settings;
  s.memory_budget = training_budget(app);
  if (s.recipe != TrainRecipe::induction)
    if (Status st = training_text(app, s.text); !st.is_ok()) return st;
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

Status continue_training(App& app, const std::string& dir) {
  TrainView& t = app.train;
  const auto refuse = [&t](const std::string& why) {
    t.error = why;
    return Status::fail(why);
  };
  TrainSettings s = t.settings;
  s.memory_budget = training_budget(app);
  // a book run's text, as Reset would take it (an induction run reads none: a failure matters only to a book)
  const Status text = training_text(app, s.text);
  if (!text.is_ok()) s.text.clear();
  auto session = std::make_shared<TrainSession>();
  if (Status st = session->continue_from(
          dir, s, [&app](const std::string& x, std::vector<int>& ids) { return ui::tokenize(app, x, ids); });
      !st.is_ok())
    return refuse(text.is_ok() ? st.error : st.error + " (the text file: " + text.error + ")");
  t.session = std::move(session);
  t.settings = t.session->settings();  // what Reset starts from now: the run's recipe and settings
  t.settings.text.clear(), t.settings.memory_budget = 0;
  t.running = false;
  t.show = true;
  t.snapshot = -1;
  ++t.resets;
  t.error.clear();
  app.message = "continued " + quote(dir) + " (" + to_string(t.settings.recipe) + ") from step " +
                std::to_string(t.session->continued_from()) +
                ": its loss curve starts there (a checkpoint keeps none); press Start";
  return Status::ok();
}

Status choose_train_text(App& app, const std::string& name, std::uint64_t size, std::string bytes) {
  TrainView& t = app.train;
  const auto refuse = [&t](const std::string& why) {
    t.error = why;
    return Status::fail(why);
  };
  if (Status st = check_train_text(name, size, bytes); !st.is_ok()) return refuse(st.error);
  // the last good state, restored on a refusal
  TrainSettings settings = t.settings;
  std::string text_name = std::move(t.text_name), text = std::move(t.text);
  const std::uint64_t text_size = t.text_size;
  if (t.settings.recipe == TrainRecipe::induction) {
    t.settings = recipe_settings(TrainRecipe::book);
    t.settings.seed = settings.seed;
  }
  t.text_name = name, t.text = std::move(bytes), t.text_size = size;
  if (Status st = reset_training(app); !st.is_ok()) {
    t.settings = std::move(settings);
    t.text_name = std::move(text_name), t.text = std::move(text), t.text_size = text_size;
    return refuse(name + ": " + st.error);
  }
  t.running = false;
  t.show = true;
  t.error.clear();
  app.message = "training on " + quote(name) + " (" + format_bytes(size) + "): press Start";
  return Status::ok();
}

namespace {

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_weights_name(const std::string& name) {
  const std::string lower = lowercase(name);
  const std::string_view tail = ".safetensors";
  return lower.size() >= tail.size() && lower.compare(lower.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool is_model_file_name(const std::string& name) {
  const std::string lower = lowercase(name);
  return is_weights_name(name) || lower == "config.json" || lower == "tokenizer.json" ||
         lower == "tokenizer_config.json" || lower == "vocab.json" || lower == "merges.txt" ||
         lower == "encoder.json" || lower == "vocab.bpe";
}

void drop_files(App& app, const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  if (paths.empty()) return;
  std::error_code ec;
  std::string model;  // a folder, or the .safetensors file among the paths
  bool model_files = false;
  for (const std::string& p : paths) {
    const std::string name = fs::path(p).filename().string();
    if (model.empty() && (is_weights_name(name) || fs::is_directory(p, ec))) model = p;
    model_files = model_files || is_model_file_name(name);
  }
  model_files = model_files || !model.empty();
  if (model_files || paths.size() > 1) {
    if (model.empty()) {
      app.message = "drop one text file to train on, or a model: its folder or its .safetensors file";
      return;
    }
    ModelChoice c;
    c.kind = ModelKind::file;
    c.path = model;
    if (Status st = open_model(app, c); st.is_ok()) app.message = "opened " + quote(model);
    return;
  }
  // one file: the book recipe's text
  const std::string& path = paths.front();
  const std::string name = fs::path(path).filename().string();
  const std::uintmax_t size = fs::file_size(path, ec);
  std::string bytes;
  if (ec) {
    app.train.error = "cannot read " + quote(path) + ": " + ec.message();
    return;
  }
  if (size <= kMaxTrainTextBytes)
    if (Status st = read_untrusted_file(path, static_cast<std::size_t>(kMaxTrainTextBytes), bytes);
        !st.is_ok()) {
      app.train.error = st.error;
      return;
    }
  (void)choose_train_text(app, name, size, std::move(bytes));
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

// Whether a Reset now (by `control`) must wait for GPT-2's vocabulary, which the host fetches on demand: then
// the control waits (app.train.waiting) and goes on once it is there, or the panel says why it cannot be had.
bool waits_for_vocabulary(App& app, const char* control) {
  TrainView& t = app.train;
  std::string why;
  if (t.settings.recipe == TrainRecipe::induction || app.model.is_open() || !t.vocabulary_ready ||
      t.vocabulary_ready(why))
    return false;
  if (why.empty())
    t.waiting = control;
  else
    fail(app, Status::fail(why)), t.waiting.clear();
  return true;
}

void export_training(App& app, bool checkpoint) {
  TrainSession& s = *app.train.session;
  std::error_code ec;
  std::filesystem::create_directories(app.export_dir, ec);
  if (checkpoint) {
    const std::string dir = app.export_dir + "/trained-model";
    if (Status st = s.write_checkpoint(dir); !st.is_ok()) return fail(app, st);
    // the set, with the manifest that binds it (a folder continued from these files is checked whole)
    for (const char* f : {"model.safetensors", "config.json", "optimizer.safetensors", "checkpoint.json"})
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
  const char* items[] = {"recipe:induction", "recipe:book", "recipe:custom"};  // the items' control names
  if (noted(app, "recipe", ImGui::BeginCombo("recipe", names[recipe]))) {
    for (int i = 0; i < 3; ++i)
      if (noted(app, items[i], ImGui::Selectable(names[i], i == recipe))) {
        const std::uint64_t seed = t.settings.seed;
        t.settings = recipe_settings(static_cast<TrainRecipe>(i));
        t.settings.seed = seed;
      }
    ImGui::EndCombo();
  }
  TrainSettings& s = t.settings;
  if (s.recipe == TrainRecipe::induction)
    ImGui::TextColored(kTrainDim, "random tokens with repeated segments; attention-only, 2 x 4 heads");
  else
    ImGui::TextColored(kTrainDim, "the sentence box's text, or a file; its last 10%% validates");
  if (s.recipe != TrainRecipe::induction) {
    if (!t.text_name.empty()) {
      ImGui::Text("text: %s, %s", t.text_name.c_str(), format_bytes(t.text_size).c_str());
      ImGui::SameLine();
      if (ImGui::SmallButton("forget")) t.text_name.clear(), t.text.clear(), t.text_size = 0;
    }
    // the page's chooser (a drop's checks and refusals), also to replace a text; the app's path field
    if (t.choose_text) {
      if (noted(app, "text", ImGui::Button("Choose a text file..."))) t.choose_text();
    } else if (t.text_name.empty()) {
      ImGui::InputText("text file", &t.text_path);
    }
    if (t.text_name.empty())
      ImGui::TextColored(kTrainDim,
                         t.choose_text ? "or drop one onto the page (UTF-8, up to %s)"
                                       : "or drop a UTF-8 text file (up to %s) onto the window",
                         format_bytes(kMaxTrainTextBytes).c_str());
  }
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

  // a control pressed while GPT-2's vocabulary was on its way goes on once it is there
  std::string again;
  if (!t.waiting.empty()) {
    const std::string waiting = std::exchange(t.waiting, std::string());
    if (!waits_for_vocabulary(app, waiting.c_str())) again = waiting;
  }
  if (noted(app, "start", ImGui::Button(t.running ? "Pause" : "Start")) || again == "start") {
    t.error.clear();
    if (!t.running && !t.session && !waits_for_vocabulary(app, "start"))
      if (Status st = reset(app); !st.is_ok()) fail(app, st);
    t.running = !t.running && t.session != nullptr;
    t.show = t.show || t.running;
  }
  ImGui::SameLine();
  if (noted(app, "step", ImGui::Button("Step")) || again == "step") {
    t.error.clear();
    if (!t.session && !waits_for_vocabulary(app, "step"))
      if (Status st = reset(app); !st.is_ok()) fail(app, st);
    if (t.session)
      if (Status st = t.session->step(); !st.is_ok()) fail(app, st);
    t.show = t.session != nullptr;
  }
  ImGui::SameLine();
  if (noted(app, "reset", ImGui::Button("Reset")) || again == "reset") {
    t.error.clear();
    t.running = false;
    if (!waits_for_vocabulary(app, "reset"))
      if (Status st = reset(app); !st.is_ok()) fail(app, st);
  }
  if (!t.waiting.empty()) ImGui::TextColored(kTrainDim, "fetching GPT-2's vocabulary for the text...");
  // a run's checkpoint folder (Save model's, or attnviz-cli train --out's) goes on where it stopped
  if (t.choose_checkpoint) {
    if (noted(app, "continue", ImGui::Button("Continue from a folder..."))) t.choose_checkpoint();
  } else {
    ImGui::InputTextWithHint("##checkpoint", "checkpoint folder (empty: Save model's)", &t.continue_path);
    if (noted(app, "continue", ImGui::Button("Continue from checkpoint"))) {
      t.running = false;
      (void)continue_training(app,
                              t.continue_path.empty() ? app.export_dir + "/trained-model" : t.continue_path);
    }
  }
  if (t.session) {
    ImGui::SameLine();
    ImGui::Checkbox("show", &t.show);
    const TrainSession& ts = *t.session;
    const std::vector<TrainPoint>& p = ts.points();
    // "step 12+": a step is half done (its pieces run a slice a frame)
    ImGui::Text("step %d%s, %.1f ms a step, slice %.1f ms", ts.steps_done(), ts.mid_step() ? "+" : "",
                ts.ms_per_step(), ts.slice_ms().empty() ? 0.0 : ts.slice_ms().back());
    if (!p.empty()) ImGui::Text("loss %.3f", p.back().loss);
    const int first = ts.first_induction();
    if (first >= 0)
      ImGui::Text("induction head from step %d", ts.snapshots()[static_cast<std::size_t>(first)].step);
    if (noted(app, "open", ImGui::Button("Open in model view"))) open_trained(app);
    if (noted(app, "save", ImGui::Button("Save model"))) export_training(app, true);
    ImGui::SameLine();
    if (noted(app, "csv", ImGui::Button("Loss CSV"))) export_training(app, false);
    ImGui::SameLine();
    if (noted(app, "png", ImGui::Button("Plots PNG"))) train_action(app, TrainAction::png);
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

  const bool induction = s.settings().recipe == TrainRecipe::induction;
  draw_loss_plot(s, plot_w, 150.0f);
  if (induction) {
    // the in-context score of every evaluation: late-position loss minus early (Olsson et al.)
    std::vector<float> eval;
    for (const TrainPoint& p : points)
      if (!std::isnan(p.in_context)) eval.push_back(static_cast<float>(p.in_context));
    char title[96];
    std::snprintf(title, sizeof title, "in-context score (late - early loss), every %d steps",
                  s.settings().eval_freq);
    ImGui::PlotLines("##eval", eval.data(), static_cast<int>(eval.size()), 0, title, FLT_MAX, FLT_MAX,
                     ImVec2(plot_w, plot_h));
  }

  const std::vector<TrainSnapshot>& snaps = s.snapshots();
  if (snaps.empty()) {
    ImGui::EndChild();
    return;
  }
  int pick = t.snapshot < 0 ? static_cast<int>(snaps.size()) - 1
                            : std::min(t.snapshot, static_cast<int>(snaps.size()) - 1);
  ImGui::SetNextItemWidth(plot_w * 0.6f);
  // (the control's rectangle: the slider's frame, not its label)
  if (noted(app, "slider", ImGui::SliderInt("snapshot", &pick, 0, static_cast<int>(snaps.size()) - 1, ""),
            plot_w * 0.6f))
    t.snapshot = pick;
  ImGui::SameLine();
  ImGui::Text("step %d", snaps[static_cast<std::size_t>(pick)].step);
  ImGui::SameLine();
  if (noted(app, "latest", ImGui::SmallButton("latest"))) t.snapshot = -1;

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
