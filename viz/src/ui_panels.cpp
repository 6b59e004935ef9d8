// The control column (sentence, configuration, colours, heads, compare, export), the pipeline stepper and the
// status line, and draw_frame, which lays them out.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "attnviz/text.hpp"
#include "attnviz/viz/export.hpp"
#include "ui_internal.hpp"

namespace attnviz::viz {

const char* to_string(CompareMode m) {
  switch (m) {
    case CompareMode::text:
      return "second sentence";
    case CompareMode::seed:
      return "second seed";
    case CompareMode::mask:
      return "mask on vs off";
    case CompareMode::layer:
      return "second layer";
    case CompareMode::off:
      break;
  }
  return "off";
}

bool input_int(const char* label, int& v, int step) {
  ImS64 wide = v;
  const ImS64 small = step, large = static_cast<ImS64>(step) * 8;
  if (!ImGui::InputScalar(label, ImGuiDataType_S64, &wide, &small, &large)) return false;
  const int clamped = static_cast<int>(std::clamp<ImS64>(wide, INT_MIN, INT_MAX));
  if (clamped == v) return false;
  v = clamped;
  return true;
}

std::string visible_text(std::string_view s) {
  const ImFont* font = ImGui::GetFont();
  const auto drawable = [font](char32_t cp) {
    return cp <= IM_UNICODE_CODEPOINT_MAX && font &&
           font->FindGlyphNoFallback(static_cast<ImWchar>(cp)) != nullptr;
  };
  std::string out;
  out.reserve(s.size());
  char buf[24];
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(s, i, cp);
    if (n == 0) {
      std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(s[i]));
      out += buf;
      ++i;
      continue;
    }
    if (cp == '\n' || cp == '\t' || (cp >= 0x20 && cp != 0x7F && drawable(cp))) {
      out.append(s, i, n);
    } else {
      std::snprintf(buf, sizeof buf, "<U+%04X>", static_cast<unsigned>(cp));
      out += buf;
    }
    i += n;
  }
  return out;
}

namespace ui {
namespace {

const ImVec4 kErrorColor{1.0f, 0.45f, 0.4f, 1.0f};
const ImVec4 kDimColor{0.6f, 0.6f, 0.65f, 1.0f};
const ImVec4 kNoteColor{1.0f, 0.8f, 0.35f, 1.0f};  // the view was computed differently than asked

bool draw_config(Config& c) {
  bool changed = false;
  ImGui::PushItemWidth(-110);
  if (ImGui::BeginCombo("variant", to_string(c.variant))) {
    for (Variant v : all_variants()) {
      if (ImGui::Selectable(to_string(v), v == c.variant)) {
        c.variant = v;
        changed = true;
      }
    }
    ImGui::EndCombo();
  }
  const Preset* now = preset_of(c);
  if (ImGui::BeginCombo("preset", now ? now->name : "custom")) {
    for (const Preset& p : presets()) {
      if (ImGui::Selectable(p.name, &p == now)) {
        apply(p, c);
        changed = true;
      }
    }
    ImGui::EndCombo();
  }
  changed |= input_int("d_in", c.d_in, 1);
  changed |= input_int("d_out", c.d_out, 1);
  changed |= input_int("heads", c.num_heads, 1);
  changed |= input_int("context length", c.context_length, 16);
  float p = static_cast<float>(c.dropout);
  if (ImGui::SliderFloat("dropout p", &p, 0.0f, 0.95f, "%.2f")) {
    c.dropout = static_cast<double>(p);
    changed = true;
  }
  if (ImGui::BeginCombo("dropout rng", to_string(c.dropout_rng))) {
    for (DropoutRng r : {DropoutRng::cpu, DropoutRng::mkl})
      if (ImGui::Selectable(to_string(r), r == c.dropout_rng)) {
        c.dropout_rng = r;
        changed = true;
      }
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "cpu: PyTorch without MKL (the book's printouts)\nmkl: official x86-64 wheels on Intel CPUs");
  changed |= ImGui::InputScalar("seed", ImGuiDataType_U64, &c.seed);
  ImGui::PopItemWidth();
  changed |= ImGui::Checkbox("qkv_bias", &c.qkv_bias);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("train", &c.train);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("causal mask", &c.mask);
  return changed;
}

void draw_colour(ViewState& v) {
  ImGui::PushItemWidth(-110);
  if (ImGui::BeginCombo("palette", to_string(v.color.palette))) {
    for (Palette p : all_palettes())
      if (ImGui::Selectable(to_string(p), p == v.color.palette)) v.color.palette = p;
    ImGui::EndCombo();
  }
  v.color.centered = v.color.palette == Palette::diverging;
  if (ImGui::BeginCombo("normalize", to_string(v.color.norm))) {
    for (Norm n : all_norms())
      if (ImGui::Selectable(to_string(n), n == v.color.norm)) v.color.norm = n;
    ImGui::EndCombo();
  }
  if (v.color.norm == Norm::fixed) ImGui::InputFloat2("range", &v.color.fixed.lo);
  ImGui::PopItemWidth();
  if (v.color.norm == Norm::fixed && !v.color.fixed.valid())
    ImGui::TextColored(kErrorColor, "the range's low end must not exceed its high end");
  ImGui::Checkbox("values in cells", &v.show_values);
  ImGui::SameLine();
  if (ImGui::Button("reset zoom")) {
    v.zoom = 1.0f;
    v.x0 = v.y0 = 0.0f;
  }
}

void draw_heads(App& app) {
  ViewState& v = app.view;
  const int H = view_result(app).shape.heads;
  int how = static_cast<int>(v.aggregate);
  ImGui::RadioButton("each head", &how, 0);
  ImGui::SameLine();
  ImGui::RadioButton("mean", &how, 1);
  ImGui::SameLine();
  ImGui::RadioButton("max", &how, 2);
  v.aggregate = static_cast<Aggregate>(how);
  if (v.aggregate != Aggregate::none && H > 1) {
    ImGui::TextColored(kDimColor, "over heads (none ticked: all):");
    for (int h = 0; h < H; ++h) {
      bool on = std::find(v.subset.begin(), v.subset.end(), h) != v.subset.end();
      if (h % 8) ImGui::SameLine();
      ImGui::PushID(h);
      if (ImGui::Checkbox(std::to_string(h).c_str(), &on)) {
        if (on)
          v.subset.push_back(h);
        else
          v.subset.erase(std::remove(v.subset.begin(), v.subset.end(), h), v.subset.end());
        std::sort(v.subset.begin(), v.subset.end());
      }
      ImGui::PopID();
    }
  }
  if (v.aggregate == Aggregate::none && v.enlarged >= 0) {
    if (ImGui::Button("show every head")) v.enlarged = -1;
    ImGui::SameLine();
    if (ImGui::ArrowButton("previous head", ImGuiDir_Left) && v.enlarged > 0) --v.enlarged;
    ImGui::SameLine();
    if (ImGui::ArrowButton("next head", ImGuiDir_Right) && v.enlarged + 1 < H) ++v.enlarged;
    ImGui::SameLine();
    ImGui::Text("head %d alone", v.enlarged);
  }
}

void draw_compare(App& app) {
  CompareState& cs = app.compare;
  bool changed = false;
  ImGui::PushItemWidth(-110);
  const bool whole = model_mode(app);
  if (ImGui::BeginCombo("compare", to_string(cs.mode))) {
    for (CompareMode m :
         {CompareMode::off, CompareMode::text, CompareMode::seed, CompareMode::mask, CompareMode::layer})
      if (compare_available(app, m) && ImGui::Selectable(to_string(m), m == cs.mode)) {
        cs.mode = m;
        changed = true;
      }
    ImGui::EndCombo();
  }
  if (cs.mode == CompareMode::text) changed |= ImGui::InputText("sentence B", &cs.text);
  if (cs.mode == CompareMode::seed) changed |= ImGui::InputScalar("seed B", ImGuiDataType_U64, &cs.seed);
  if (cs.mode == CompareMode::layer && whole)
    changed |= ImGui::SliderInt("layer B", &cs.layer, 0, app.model.config().n_layers - 1);
  ImGui::PopItemWidth();
  if (changed) {
    cs.synced = -1;
    cs.model_synced.clear();
  }
  const std::string& b_error = whole ? cs.model_b.error() : cs.b.error();
  if (cs.mode != CompareMode::off && !b_error.empty())
    ImGui::TextColored(kErrorColor, "B: %s", b_error.c_str());
  if (cs.mode != CompareMode::off && !compare_available(app, cs.mode))
    ImGui::TextColored(kErrorColor, "%s", why_not_compare(app, cs.mode));
}

void draw_export(App& app) {
  if (!app.downloads) {
    ImGui::PushItemWidth(-110);
    ImGui::InputText("folder", &app.export_dir);
    ImGui::PopItemWidth();
  }
  if (ImGui::Button("PNG view")) run_export(app, ExportKind::view_png);
  ImGui::SameLine();
  if (ImGui::Button("PNG heads")) run_export(app, ExportKind::heads_png);
  ImGui::SameLine();
  if (ImGui::Button("JSON")) run_export(app, ExportKind::json);
  ImGui::SameLine();
  if (ImGui::Button("CSV")) run_export(app, ExportKind::csv);
}

}  // namespace

void recompute(App& app) {
  if (model_mode(app)) {
    (void)app.model.recompute(app.session.text);  // on failure the last good pass stays and error() explains
    sync_compare(app);
    return;
  }
  (void)app.session.recompute();  // on failure the last good result stays and error() explains
  sync_compare(app);
}

void sync_compare(App& app) {
  CompareState& cs = app.compare;
  if (model_mode(app)) {
    sync_model_compare(app);
    return;
  }
  if (cs.mode == CompareMode::off || cs.mode == CompareMode::layer || cs.synced == app.session.generation())
    return;
  cs.b.config = app.session.config;
  cs.b.exec = app.session.exec;
  cs.b.text = app.session.text;
  switch (cs.mode) {
    case CompareMode::text:
      cs.b.text = cs.text;
      break;
    case CompareMode::seed:
      cs.b.config.seed = cs.seed;
      break;
    case CompareMode::mask:
      cs.b.config.mask = !app.session.config.mask;
      break;
    case CompareMode::layer:
    case CompareMode::off:
      break;
  }
  (void)cs.b.recompute();  // on failure side B keeps its last good result and its error() explains
  cs.synced = app.session.generation();
}

void draw_controls(App& app) {
  Session& s = app.session;
  ImGui::TextUnformatted("Sentence");
  // On start the box takes the keyboard with the cursor after the sentence, so typing extends it.
  static bool cursor_to_end = false;
  if (app.focus_text) {
    ImGui::SetKeyboardFocusHere();
    app.focus_text = false;
    cursor_to_end = true;
  }
  const auto to_end = [](ImGuiInputTextCallbackData* d) {
    if (cursor_to_end) {
      d->CursorPos = d->SelectionStart = d->SelectionEnd = d->BufTextLen;
      cursor_to_end = false;
    }
    return 0;
  };
  if (ImGui::InputTextMultiline("##text", &s.text, ImVec2(-1, ImGui::GetTextLineHeight() * 4.5f),
                                ImGuiInputTextFlags_CallbackAlways, to_end)) {
    const double last = model_mode(app) ? app.model.last_ms() : s.last_ms();
    if (app.coalesce_ms > 0.0 && (app.text_pending || last > app.coalesce_ms))
      app.text_pending = true;  // the host computes it once the keys queued meanwhile are in
    else
      recompute(app);
  }
  const bool whole = model_mode(app);
  const std::string& error = whole ? app.model.error() : s.error();
  if (!error.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(kErrorColor, "%s", error.c_str());
    ImGui::TextColored(kDimColor, "(showing the last valid result)");
    ImGui::PopTextWrapPos();
  }
  const std::string& note = whole ? app.model.note() : s.note();
  if (!note.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(kNoteColor, "%s", note.c_str());
    ImGui::PopTextWrapPos();
  }
  if (ImGui::CollapsingHeader("Model", ImGuiTreeNodeFlags_DefaultOpen)) draw_model_panel(app);
  draw_causal_panel(app);
  sync_causal(app);  // what the section changed, computed before the view draws
  if (!whole && ImGui::CollapsingHeader("Configuration", ImGuiTreeNodeFlags_DefaultOpen)) {
    if (draw_config(s.config)) recompute(app);
  }
  if (app.host_controls) app.host_controls();
  if (ImGui::CollapsingHeader("Colour", ImGuiTreeNodeFlags_DefaultOpen)) draw_colour(app.view);
  if ((!whole || app.model_view.layer >= 0) &&
      ImGui::CollapsingHeader("Heads", ImGuiTreeNodeFlags_DefaultOpen))
    draw_heads(app);
  if ((!whole || app.model_view.layer >= 0) && ImGui::CollapsingHeader("Compare")) {
    draw_compare(app);
    sync_compare(app);
  }
  if (app.train.show) ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  const bool train_open = ImGui::CollapsingHeader("Train");
  note_train_control(app, "header");
  if (train_open) draw_train_panel(app);
  if (ImGui::CollapsingHeader("Export")) draw_export(app);
  if (!app.message.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(kDimColor, "%s", app.message.c_str());
    ImGui::PopTextWrapPos();
  }
}

namespace {

// The title of a q/k step's button.
const char* qk_step_title(QkStep s) {
  switch (s) {
    case QkStep::projected:
      return "as projected";
    case QkStep::normed:
      return "after q/k norm";
    case QkStep::rotated:
      break;
  }
  return "after RoPE";
}

}  // namespace

void draw_stepper(App& app) {
  const Result& r = view_result(app);
  // A rotary layer's q and k have steps of their own before the product (none for GPT-2 and chapter 3).
  const LayerSteps steps = shown_steps(app);
  const std::vector<QkStep> qk = qk_steps(steps);
  if (std::find(qk.begin(), qk.end(), app.view.qk_step) == qk.end()) app.view.qk_step = QkStep::rotated;
  for (StageId id : all_stages()) {
    const StageInfo info = qk.empty() ? stage_info(r, id) : qk_step_info(r, steps, id, QkStep::rotated);
    if (id != all_stages().front()) ImGui::SameLine(0.0f, 2.0f);
    const bool current = id == app.view.stage;
    if (current) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
    ImGui::BeginDisabled(!info.available);
    if (ImGui::Button(info.title)) app.view.stage = id;
    ImGui::EndDisabled();
    if (current) ImGui::PopStyleColor();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("%s\n%s", info.available ? info.formula.c_str() : info.why_not.c_str(),
                        info.shape.c_str());
  }
  // A stage that became unavailable (e.g. dropout after switching to eval) falls back to the weights.
  if (!stage_info(r, app.view.stage).available) app.view.stage = StageId::weights;

  const bool qk_stage = app.view.stage == StageId::queries || app.view.stage == StageId::keys;
  if (!qk.empty() && qk_stage) {
    ImGui::TextUnformatted(app.view.stage == StageId::queries ? "q:" : "k:");
    for (QkStep step : qk) {
      ImGui::SameLine(0.0f, 6.0f);
      if (ImGui::RadioButton(qk_step_title(step), app.view.qk_step == step)) app.view.qk_step = step;
    }
  }
  const StageInfo info = !qk.empty() && qk_stage ? qk_step_info(r, steps, app.view.stage, app.view.qk_step)
                                                 : stage_info(r, app.view.stage);
  ImGui::Text("%s    %s", info.formula.c_str(), info.shape.c_str());
  // The shape strip, the current stage's tensor highlighted.
  const std::vector<ShapeStep> strip = shape_strip(r, steps);
  const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
  for (std::size_t i = 0; i < strip.size(); ++i) {
    const std::string text = (i ? "-> " : "") + strip[i].label + " " + strip[i].shape;
    if (i) {
      // Wrap before a step that would run past the right edge.
      ImGui::SameLine(0.0f, 6.0f);
      if (ImGui::GetCursorScreenPos().x + ImGui::CalcTextSize(text.c_str()).x > right) ImGui::NewLine();
    }
    // A rotary layer's q and k: the tensors at the step shown.
    const bool here = (qk_stage && strip[i].qk_step >= 0)
                          ? strip[i].qk_step == static_cast<int>(app.view.qk_step)
                          : strip[i].stage == app.view.stage ||
                                (strip[i].stage == StageId::queries &&
                                 (app.view.stage == StageId::keys || app.view.stage == StageId::values)) ||
                                (strip[i].stage == StageId::masked && app.view.stage == StageId::scaled);
    if (here)
      ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.3f, 1.0f), "%s", text.c_str());
    else
      ImGui::TextUnformatted(text.c_str());
  }
}

void draw_status(const App& app) {
  const Session& s = app.session;
  if (model_mode(app)) {
    const GptResult& g = app.model.result();
    char engine[96];
    if (g.backend.empty())
      std::snprintf(engine, sizeof engine, "model pass %.2f ms (%s, %d thread%s, %d of %d rows reused)",
                    g.seconds * 1e3, to_string(g.isa), g.threads, g.threads == 1 ? "" : "s", g.reused,
                    static_cast<int>(g.ids.size()));
    else
      std::snprintf(engine, sizeof engine, "model pass %s %.2f ms", g.backend.c_str(), g.seconds * 1e3);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s   keystroke to result %.2f ms   T = %zu   %d layers x %d heads   frame %.2f ms%s",
                  engine, app.model.last_ms(), g.ids.size(),
                  app.model.is_open() ? app.model.config().n_layers : 0,
                  app.model.is_open() ? app.model.config().n_heads : 0, app.frame_ms,
                  app.model.computing() ? "   computing..." : "");
    ImGui::TextColored(kDimColor, "%s", buf);
    return;
  }
  const Result& r = s.result();
  char engine[96];
  if (r.backend.empty())
    std::snprintf(engine, sizeof engine, "engine %.3f ms (%s, %d thread%s)", r.seconds * 1e3,
                  to_string(r.isa), r.threads, r.threads == 1 ? "" : "s");
  else
    std::snprintf(engine, sizeof engine, "%s %.3f ms", r.backend.c_str(), r.seconds * 1e3);
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s   recompute %.2f ms   T = %d   %d head%s   frame %.2f ms%s", engine,
                s.last_ms(), r.tokens_count(), r.shape.heads, r.shape.heads == 1 ? "" : "s", app.frame_ms,
                s.computing() || app.text_pending ? "   computing..." : "");
  ImGui::TextColored(kDimColor, "%s", buf);
}

}  // namespace ui

void run_export(App& app, ExportKind kind) {
  if (app.admit_export) {
    if (Status st = app.admit_export(kind); !st.is_ok()) {
      app.message = "export refused: " + st.error;
      return;
    }
  }
  if (kind == ExportKind::view_png) {  // the host reads the pixels back after rendering this frame
    app.capture.pending = true;
    app.capture.path = app.export_dir + "/attnviz_view.png";
    return;
  }
  if (model_mode(app)) {
    ui::export_model(app, kind);
    return;
  }
  const Session& s = app.session;
  const Result& r = s.result();
  const StageId stage = app.view.stage;
  Written w;
  Status st = Status::ok();
  if (kind == ExportKind::heads_png)
    st = export_png(app.export_dir, "attnviz", r, stage, app.view.color,
                    default_cell_px(r.tokens_count(), r.tokens_count()), w);
  else if (kind == ExportKind::json)
    st = export_json(app.export_dir, "attnviz", r, s.params(), w);
  else
    st = export_csv(app.export_dir, "attnviz", r, stage, w);
  app.written.insert(app.written.end(), w.paths.begin(), w.paths.end());
  app.message = st.is_ok() ? "wrote " + std::to_string(w.paths.size()) + " file" +
                                 (w.paths.size() == 1 ? "" : "s") + (w.paths.empty() ? "" : ": " + w.paths[0])
                           : "export failed: " + st.error;
}

bool compute_pending(App& app) {
  if (!app.text_pending) return false;
  app.text_pending = false;
  ui::recompute(app);
  return true;
}

Status start(App& app) {
  app.text_pending = false;  // the text is computed now
  if (model_mode(app)) {
    app.model.set_causal(app.model_view.causal);
    Status st = app.model.recompute(app.session.text);
    ui::sync_compare(app);
    return st;
  }
  Status st = app.session.recompute();
  ui::sync_compare(app);
  return st;
}

void draw_frame(App& app, TextureHost& textures) {
  // The host clears to the background colour: a full-window background would only cost a blended pass over
  // every pixel (a third of the frame on a software rasterizer).
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::Begin("attnviz", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoBackground);
  const float status_h = ImGui::GetFrameHeightWithSpacing();
  const float controls_w = std::min(360.0f, vp->WorkSize.x * 0.32f);
  ImGui::BeginChild("controls", ImVec2(controls_w, -status_h), true);
  ui::draw_controls(app);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("main", ImVec2(0, -status_h), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ui::step_generation(app);
  ui::step_patching(app);
  ui::step_training(app);
  ui::sync_compare(app);  // B follows every change of A's text, layer or mode, whichever panel made it
  if (model_mode(app)) {
    ui::draw_tokens(app);
    if (app.model_view.layer >= 0) ui::draw_layer_bar(app);
  }
  if (app.train.show && app.train.session) {
    ui::draw_train_main(app, textures, ImGui::GetContentRegionAvail());
  } else if (model_mode(app) && (app.model_view.layer < 0 || !shown_result(app))) {
    ui::draw_model_main(app, textures, ImGui::GetContentRegionAvail());
  } else {
    ui::draw_stepper(app);
    const float info_h = ImGui::GetTextLineHeightWithSpacing() * 7.5f;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    ui::draw_heatmaps(app, textures, ImVec2(avail.x, std::max(64.0f, avail.y - info_h)));
    ui::draw_cell_info(app, ImVec2(avail.x, info_h - ImGui::GetStyle().ItemSpacing.y));
  }
  ImGui::EndChild();
  ui::draw_status(app);
  ImGui::End();
}

}  // namespace attnviz::viz
