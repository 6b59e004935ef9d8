// The whole-model view: the Model panel (chapter-3 layer, seeded GPT-2, or a weights file), the sentence's
// BPE pieces, the grid of every layer's heads as thumbnails with what each head does, the next-token
// candidates with Generate, and the bar of an opened layer (which the full chapter-3 view then shows).
#include <imgui.h>
#include <imgui_internal.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/gpt_json.hpp"
#include "attnviz/io/json_writer.hpp"
#include "attnviz/text.hpp"
#include "attnviz/viz/arch.hpp"
#include "attnviz/viz/export.hpp"
#include "ui_internal.hpp"

namespace attnviz::viz {

bool model_mode(const App& app) {
  return app.model.is_open();
}

const Result* shown_result(const App& app) {
  if (!model_mode(app)) return &app.session.result();
  return app.model_view.layer >= 0 ? app.model.layer(app.model_view.layer) : nullptr;
}

const Result* compare_result(const App& app) {
  const CompareState& cs = app.compare;
  if (cs.mode == CompareMode::off || !compare_available(app, cs.mode)) return nullptr;
  if (!model_mode(app)) return cs.b.has_result() ? &cs.b.result() : nullptr;
  const int layer = cs.mode == CompareMode::layer ? std::clamp(cs.layer, 0, app.model.config().n_layers - 1)
                                                  : app.model_view.layer;
  if (app.model_view.layer < 0 || !cs.model_b.is_open() || !cs.model_b.has_result()) return nullptr;
  return cs.model_b.layer(layer);
}

bool compare_available(const App& app, CompareMode m) {
  if (m == CompareMode::off) return true;
  if (!model_mode(app)) return m != CompareMode::layer;
  if (m == CompareMode::seed) return app.model.choice().kind == ModelKind::seeded;
  return m != CompareMode::mask;
}

const char* why_not_compare(const App& app, CompareMode m) {
  if (!model_mode(app)) return "a second layer needs a whole model (Model panel)";
  if (m == CompareMode::seed) return "a second seed needs a seeded model: a file's weights are what they are";
  return "GPT-2 always masks: compare a second sentence, layer or seed";
}

Status open_model(App& app, const ModelChoice& choice) {
  ModelView& mv = app.model_view;
  if (choice.kind == ModelKind::layer) {
    app.model.close();
    mv.open_error.clear();
    mv.choice = choice;
    mv.layer = -1;
    mv.generating = 0;
    return start(app);
  }
  const bool switching = app.model.is_open();  // from another model, whose heads and tokens these are
  if (Status st = app.model.open(choice); !st.is_ok()) {
    mv.open_error = st.error;
    return st;
  }
  mv.open_error.clear();
  mv.choice = choice;
  mv.generating = 0;
  mv.wanted_file.clear();
  // Switching models, the heads and tokens the new one lacks go and the rest of the causal tools stay; a
  // first model (the flags', a link's) keeps them all, so that its pass names what it lacks.
  if (switching) {
    const GptConfig& config = app.model.config();
    std::vector<HeadRef>& heads = mv.causal.ablation.heads;
    heads.erase(std::remove_if(heads.begin(), heads.end(),
                               [&](const HeadRef& h) {
                                 return h.layer < 0 || h.layer >= config.n_layers || h.head < 0 ||
                                        h.head >= config.n_heads;
                               }),
                heads.end());
    for (int* id : {&mv.causal.target.target, &mv.causal.target.versus})
      if (*id >= config.vocab_size) *id = -1;
  }
  app.model.set_causal(mv.causal);
  if (mv.layer >= app.model.config().n_layers) mv.layer = -1;
  if (app.view.enlarged >= app.model.config().n_heads) app.view.enlarged = -1;
  if (app.compare.layer >= app.model.config().n_layers) app.compare.layer = 0;
  app.model.set_detail_layer(mv.layer);
  return app.model.recompute(app.session.text);
}

namespace ui {
namespace {

const ImVec4 kErrorColor{1.0f, 0.45f, 0.4f, 1.0f};
const ImVec4 kDimColor{0.6f, 0.6f, 0.65f, 1.0f};
constexpr int kThumbTexels = 128;    // thumbnails are pooled to at most this many cells a side
constexpr int kPreviewTexels = 512;  // the hover preview
constexpr float kNextWidth = 250.0f;
constexpr float kSinkWidth = 56.0f;  // the attention-sink column's bars, right of the grid

const char* kind_title(ModelKind k) {
  switch (k) {
    case ModelKind::seeded:
      return "GPT-2, seeded (chapter 4)";
    case ModelKind::file:
      return "GPT-2 from a weights file";
    case ModelKind::layer:
      break;
  }
  return "chapter-3 layer (random weights)";
}

std::string scores_text(const HeadScores& s) {
  char buf[200];
  char induction[16] = "n/a";
  if (s.induction_defined)
    std::snprintf(induction, sizeof induction, "%.2f", static_cast<double>(s.induction));
  std::snprintf(buf, sizeof buf, "previous %.2f  first %.2f  self %.2f  broad %.2f  induction %s",
                static_cast<double>(s.previous), static_cast<double>(s.first), static_cast<double>(s.self),
                static_cast<double>(s.broad), induction);
  return buf;
}

const HeadScores* kind_of(const App& app, int layer, int head) {
  const auto& k = app.model.kinds();
  if (layer < 0 || layer >= static_cast<int>(k.size())) return nullptr;
  const auto& row = k[static_cast<std::size_t>(layer)];
  return head >= 0 && head < static_cast<int>(row.size()) ? &row[static_cast<std::size_t>(head)] : nullptr;
}

void open_layer(App& app, int layer, int head) {
  ModelView& mv = app.model_view;
  mv.layer = layer;
  app.view.enlarged = head;
  app.view.locked = {};
  app.view.zoom = 1.0f;
  app.view.x0 = app.view.y0 = 0.0f;
  if (app.model.detail_layer() != layer) {
    app.model.set_detail_layer(layer);
    (void)app.model.recompute(app.session.text);  // on failure the last good pass stays and error() explains
  }
}

// The colours of thumbnails: the view's palette; weights lie in [0, 1], so one range serves every head.
ColorOptions thumb_colors(const App& app) {
  ColorOptions o = app.view.color;
  if (o.palette == Palette::diverging) o.palette = Palette::blues;
  o.centered = false;
  if (o.norm == Norm::fixed && !o.fixed.valid()) o.norm = Norm::head;
  return o;
}

std::string thumb_key(const App& app, int texels) {
  const ColorOptions o = thumb_colors(app);
  char buf[96];
  std::snprintf(buf, sizeof buf, "thumb/%d/%d/%d/%g/%g/%d", app.model.generation(),
                static_cast<int>(o.palette), static_cast<int>(o.norm), static_cast<double>(o.fixed.lo),
                static_cast<double>(o.fixed.hi), texels);
  return buf;
}

// A grid thumbnail pooled and coloured ahead of its upload (colour_thumbs).
struct ColouredThumb {
  int slot = -1, cols = 0, rows = 0;
  std::vector<std::uint32_t> texels;
};

void* thumb_texture(App& app, TextureHost& textures, int slot, int layer, int head, int texels,
                    const std::vector<ColouredThumb>* ready = nullptr) {
  std::string key = thumb_key(app, texels);
  if (slot == kPreviewSlot) key += "/" + std::to_string(layer) + "/" + std::to_string(head);
  if (void* id = cached_texture(app, slot, key)) return id;  // pooled and coloured once per pass
  if (ready)
    for (const ColouredThumb& t : *ready)
      if (t.slot == slot && !t.texels.empty())
        return store_texture(app, textures, slot, key, t.cols, t.rows, t.texels);
  const Result* r = app.model.layer(layer);
  if (!r) return nullptr;
  const MatrixDesc m = thumbnail(stage_matrix(*r, StageId::weights, head), texels);
  if (m.empty()) return nullptr;
  return cached_texture(app, textures, slot, key, m, thumb_colors(app), Range{0.0f, 1.0f});
}

// Pools and colours, over the passes' threads, the grid's thumbnails that this pass has not coloured yet
// (heads the filter hides left out); the grid's loop then only uploads them, as GL is this thread's. At
// T = 512 the pooling reads gpt2-small's 144 heads' 19M weights.
std::vector<ColouredThumb> colour_thumbs(App& app, const GptResult& g, int H) {
  const std::string key = thumb_key(app, kThumbTexels);
  const ColorOptions o = thumb_colors(app);
  std::vector<ColouredThumb> out;
  std::vector<MatrixDesc> from;
  for (const GptLayer& gl : g.layers) {
    const int layer = gl.index;
    const Result* r = app.model.layer(layer);
    if (!r) continue;
    for (int h = 0; h < H; ++h) {
      const HeadScores* s = kind_of(app, layer, h);
      if (app.model_view.filter != HeadKind::none && (!s || s->kind != app.model_view.filter)) continue;
      const int slot = kThumbSlot + layer * kThumbStride + h;
      if (cached_texture(app, slot, key)) continue;
      out.push_back({slot, 0, 0, {}});
      from.push_back(stage_matrix(*r, StageId::weights, h));
    }
  }
  run_tasks(
      static_cast<int>(out.size()),
      [&](int i) {
        const MatrixDesc m = thumbnail(from[static_cast<std::size_t>(i)], kThumbTexels);
        if (m.empty()) return;
        ColouredThumb& t = out[static_cast<std::size_t>(i)];
        t.cols = m.cols, t.rows = m.rows;
        colorize(m, o, Range{0.0f, 1.0f}, t.texels);
      },
      app.model.exec);
  return out;
}

void centred_sink_header(ImDrawList* dl, ImVec2 at, float width, ImU32 colour) {
  const char* title = "sink";
  dl->AddText(ImVec2(at.x + (width - ImGui::CalcTextSize(title).x) * 0.5f, at.y), colour, title);
}

// One layer's attention-sink bar: filled to `value` of its width, the value printed over it; hover explains.
void draw_sink(App& app, int layer, float value, ImVec2 at, float width) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float h = ImGui::GetTextLineHeight() + 4.0f;
  const float v = std::clamp(std::isfinite(value) ? value : 0.0f, 0.0f, 1.0f);
  const ImVec2 b(at.x + width, at.y + h);
  dl->AddRectFilled(at, b, IM_COL32(45, 48, 60, 255));
  dl->AddRectFilled(at, ImVec2(at.x + v * width, b.y), IM_COL32(190, 120, 60, 255));
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(v));
  dl->AddText(ImVec2(at.x + (width - ImGui::CalcTextSize(buf).x) * 0.5f, at.y + 2.0f),
              ImGui::GetColorU32(ImGuiCol_Text), buf);
  app.model_view.sinks.push_back({layer, value, at.x, at.y, b.x, b.y});
  ImGui::SetCursorScreenPos(at);
  ImGui::PushID(layer);
  ImGui::InvisibleButton("sink", ImVec2(width, h));
  ImGui::PopID();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "layer %d: %.3f of the attention goes to the first token\n(the mean over its heads of each head's "
        "first-token score: rows after the first)",
        layer, static_cast<double>(value));
}

void draw_next_tokens(App& app, ImVec2 size) {
  ImGui::BeginChild("next", size, true);
  ModelSession& ms = app.model;
  ModelView& mv = app.model_view;
  ImGui::TextUnformatted("Next token");
  ImGui::TextColored(kDimColor, "after the last position, greedy first");
  const GptResult& g = ms.result();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float w = ImGui::GetContentRegionAvail().x, fh = ImGui::GetTextLineHeight();
  for (const TopToken& t : g.next) {
    const std::string label = visible_text(ms.label(t.id));
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float bar = static_cast<float>(t.probability) * w;
    dl->AddRectFilled(p, ImVec2(p.x + bar, p.y + fh + 2.0f), IM_COL32(70, 110, 190, 255));
    char pct[32];
    // Small probabilities keep their digits: an untrained model spreads 1 over 50257 tokens.
    std::snprintf(pct, sizeof pct, t.probability >= 0.001 ? "%.1f%%" : "%.2g%%", t.probability * 100.0);
    ImGui::Text("%s", label.c_str());
    // The whole row chooses the token: the metric's target, or with Shift its versus.
    const bool clicked = ImGui::IsMouseHoveringRect(p, ImVec2(p.x + w, p.y + fh + 2.0f)) &&
                         ImGui::IsWindowHovered() && ImGui::IsMouseClicked(ImGuiMouseButton_Left);
    mv.causal_cells.push_back({"next", t.id, 0, p.x, p.y, p.x + w, p.y + fh + 2.0f});
    dl->AddText(ImVec2(p.x + w - ImGui::CalcTextSize(pct).x - 2.0f, p.y), ImGui::GetColorU32(ImGuiCol_Text),
                pct);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("id %d   logit %.4f   probability %.6f\nclick: the target; Shift-click: versus", t.id,
                        static_cast<double>(t.logit), t.probability);
    ImGui::Dummy(ImVec2(0.0f, 1.0f));
    if (clicked) choose_token(app, t.id, ImGui::GetIO().KeyShift);
  }
  ImGui::Separator();
  ImGui::PushItemWidth(90.0f);
  input_int("tokens", mv.generate_steps, 1);
  ImGui::PopItemWidth();
  mv.generate_steps = std::clamp(mv.generate_steps, 1, 200);
  if (mv.generating > 0) {
    if (ImGui::Button("Stop")) mv.generating = 0;
    ImGui::SameLine();
    ImGui::Text("%d to go", mv.generating);
  } else if (ImGui::Button("Generate")) {
    mv.generating = mv.generate_steps;
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Append the most probable token, one per frame, as generate_text_simple does");
  ImGui::EndChild();
}

}  // namespace

LayerSteps shown_steps(const App& app) {
  if (!model_mode(app) || app.model_view.layer < 0) return {};
  const GptLayer* l = app.model.gpt_layer(app.model_view.layer);
  return l ? layer_steps(app.model.config(), *l) : LayerSteps{};
}

LayerSteps compare_steps(const App& app) {
  const Result* b = compare_result(app);
  if (!b || !model_mode(app)) return {};
  const ModelSession& mb = app.compare.model_b;
  for (const GptLayer& l : mb.result().layers)
    if (&l.attention == b) return layer_steps(mb.config(), l);
  return {};
}

void sync_model_compare(App& app) {
  CompareState& cs = app.compare;
  const ModelSession& a = app.model;
  ModelSession& b = cs.model_b;
  const int layer = app.model_view.layer;
  if (cs.mode == CompareMode::off || !compare_available(app, cs.mode) || layer < 0) return;
  // A layer B past the last one is a flag's or a link's, which check_head_and_cell names; B shows the last.
  const int layer_b =
      cs.mode == CompareMode::layer ? std::clamp(cs.layer, 0, a.config().n_layers - 1) : layer;
  const std::string& text_b = cs.mode == CompareMode::text ? cs.text : app.session.text;
  std::string key = std::to_string(static_cast<int>(cs.mode)) + "/" + std::to_string(a.generation()) + "/" +
                    std::to_string(cs.seed) + "/" + std::to_string(layer_b) + "/" + text_b;
  if (key == cs.model_synced) return;
  cs.model_synced = std::move(key);
  if (cs.mode == CompareMode::seed) {
    ModelChoice c = a.choice();
    c.seed = cs.seed;
    if (!b.is_open() || b.shares(a) || b.choice() != c) {
      b.exec = a.exec;
      b.free_memory = a.free_memory;
      if (!b.open(c).is_ok()) return;  // error() says why; B shows nothing
    }
  } else if (!b.shares(a)) {
    b.share(a);
  }
  b.set_detail_layer(layer_b);
  (void)b.recompute(text_b);  // on failure side B keeps its last good pass and its error() explains
}

void step_generation(App& app) {
  ModelView& mv = app.model_view;
  if (mv.generating <= 0) return;
  if (!model_mode(app)) {
    mv.generating = 0;
    return;
  }
  if (app.model.computing()) return;  // the next step starts from the pass in flight
  // The sentence box holds its own copy of the text while it has the keyboard, and would write it back over
  // the longer one: it lets go first, and takes the keyboard again on the next frame (focus_text).
  if (ImGui::GetCurrentContext() && ImGui::GetInputTextState(ImGui::GetActiveID())) ImGui::ClearActiveID();
  --mv.generating;
  if (!app.model.generate(app.session.text, 1).is_ok()) mv.generating = 0;
  app.focus_text = true;  // the box shows the longer sentence, cursor at its end
}

// The host's list of models on the Hugging Face hub: one row each, a click fetches it (nothing is downloaded
// before that).
namespace {
void draw_hub_models(ModelView& mv) {
  if (!mv.fetch_hub || mv.hub_models.empty()) return;
  if (!ImGui::TreeNodeEx("From the Hugging Face hub", ImGuiTreeNodeFlags_DefaultOpen)) return;
  if (!mv.hub_endpoint.empty()) ImGui::TextColored(kDimColor, "from %s", mv.hub_endpoint.c_str());
  for (ModelView::HubModel& h : mv.hub_models) {
    ImGui::PushID(h.repo.c_str());
    const bool clicked =
        ImGui::Selectable(h.repo.c_str(), false, 0, ImVec2(ImGui::CalcTextSize(h.repo.c_str()).x, 0.0f));
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    h.x0 = a.x, h.y0 = a.y, h.x1 = b.x, h.y1 = b.y;
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("download %s (%s, %s) and open it", h.repo.c_str(), h.detail.c_str(), h.note.c_str());
    ImGui::SameLine();
    ImGui::TextColored(kDimColor, "%s", h.note.c_str());
    ImGui::PopID();
    if (clicked) mv.fetch_hub(h.repo);
  }
  ImGui::TreePop();
}
}  // namespace

void draw_model_panel(App& app) {
  ModelView& mv = app.model_view;
  ModelChoice& c = mv.choice;
  ImGui::PushItemWidth(-110);
  if (ImGui::BeginCombo("source", kind_title(c.kind))) {
    for (ModelKind k : {ModelKind::layer, ModelKind::seeded, ModelKind::file})
      if (ImGui::Selectable(kind_title(k), k == c.kind)) c.kind = k;
    ImGui::EndCombo();
  }
  if (c.kind == ModelKind::seeded) {
    if (ImGui::BeginCombo("size", c.size.c_str())) {
      for (const GptPreset& p : gpt_presets())
        if (ImGui::Selectable(p.name, c.size == p.name)) c.size = p.name;
      ImGui::EndCombo();
    }
    ImGui::InputScalar("seed##model", ImGuiDataType_U64, &c.seed);
    if (const std::optional<GptConfig> cfg = find_gpt_preset(c.size))
      ImGui::TextColored(kDimColor, "%d layers x %d heads, weights %s", cfg->n_layers, cfg->n_heads,
                         format_bytes(packed_bytes(*cfg, false, app.model.exec.isa)).c_str());
  } else if (c.kind == ModelKind::file) {
    if (mv.choose_file) {
      if (ImGui::Button("Choose files...")) mv.choose_file(false);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "model.safetensors with its tokenizer files (vocab.json + merges.txt, or\n"
            "encoder.json + vocab.bpe) and config.json; or drop them onto the page");
      ImGui::SameLine();
      if (ImGui::Button("Choose a folder...")) mv.choose_file(true);
      if (!c.path.empty()) ImGui::TextColored(kDimColor, "%s", c.path.c_str());
    } else {
      ImGui::InputText("path", &c.path);
    }
  }
  ImGui::PopItemWidth();
  if (c.kind != ModelKind::layer) ImGui::Checkbox("train mode (dropout)", &c.train);
  const bool current = model_mode(app) ? c == app.model.choice() : c.kind == ModelKind::layer;
  ImGui::BeginDisabled(current || (c.kind == ModelKind::file && c.path.empty()));
  if (ImGui::Button(c.kind == ModelKind::layer ? "Use the chapter-3 layer" : "Open")) {
    app.view.locked = {};  // another model's cells
    if (mv.open_request)
      mv.open_request(c);
    else
      (void)open_model(app, c);  // a failure is in open_error, which the panel shows
  }
  ImGui::EndDisabled();
  ImGui::PushTextWrapPos(0.0f);
  if (!mv.wanted_file.empty())
    ImGui::TextColored(kErrorColor, "This link shows the weights file \"%s\": choose it to open the view.",
                       mv.wanted_file.c_str());
  if (model_mode(app)) {
    // GPT-2's description says it all; the other architectures say what their blocks are made of.
    if (!app.model.config().gpt2_blocks()) ImGui::TextUnformatted(arch_line(app.model.config()).c_str());
    ImGui::TextColored(kDimColor, "%s", app.model.describe().c_str());
    ImGui::TextColored(kDimColor, "opened in %.0f ms", app.model.open_ms());
  }
  if (!mv.open_error.empty()) ImGui::TextColored(kErrorColor, "%s", mv.open_error.c_str());
  ImGui::PopTextWrapPos();
  draw_hub_models(mv);
}

void draw_tokens(App& app) {
  const ModelSession& ms = app.model;
  const auto& pieces = ms.pieces();
  const float fh = ImGui::GetTextLineHeight();
  ImGui::BeginChild("tokens", ImVec2(0.0f, fh * 2.0f + 12.0f), false);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::string piece = visible_text(pieces[i]);
    const ImVec2 ts = ImGui::CalcTextSize(piece.c_str());
    if (i) {
      ImGui::SameLine(0.0f, 3.0f);
      if (ImGui::GetCursorScreenPos().x + ts.x + 6.0f > right) ImGui::NewLine();
    }
    const ImVec2 p = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(p, ImVec2(p.x + ts.x + 6.0f, p.y + fh + 2.0f), IM_COL32(55, 60, 75, 255), 3.0f);
    dl->AddText(ImVec2(p.x + 3.0f, p.y + 1.0f), ImGui::GetColorU32(ImGuiCol_Text), piece.c_str());
    ImGui::PushID(static_cast<int>(i));
    ImGui::InvisibleButton("piece", ImVec2(ts.x + 6.0f, fh + 2.0f));
    ImGui::PopID();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("position %zu   id %d", i, ms.ids()[i]);
  }
  ImGui::EndChild();
}

void draw_layer_bar(App& app) {
  ModelView& mv = app.model_view;
  const int L = app.model.config().n_layers;
  if (ImGui::Button("< every layer")) mv.layer = -1;
  ImGui::SameLine();
  int layer = mv.layer;
  ImGui::PushItemWidth(220.0f);
  ImGui::SliderInt("layer", &layer, 0, L - 1);
  ImGui::PopItemWidth();
  // PageUp / PageDown step through the layers.
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageUp))) layer = std::max(0, layer - 1);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageDown))) layer = std::min(L - 1, layer + 1);
  if (layer != mv.layer && mv.layer >= 0) open_layer(app, layer, app.view.enlarged);
  ImGui::SameLine();
  if (mv.layer < 0) return;
  if (!app.model.config().gpt2_blocks()) {  // GPT-2's layers are all causal, as its header always implied
    ImGui::TextUnformatted(mask_label(app.model.config(), mv.layer).c_str());
    ImGui::SameLine();
  }
  const int head = app.view.enlarged;
  if (const HeadScores* s = kind_of(app, mv.layer, std::max(0, head))) {
    const GptConfig& c = app.model.config();
    if (grouped_heads(c))
      ImGui::TextColored(kDimColor, "%s: %s", head_label(c, std::max(0, head)).c_str(), to_string(s->kind));
    else
      ImGui::TextColored(kDimColor, "head %d: %s", std::max(0, head), to_string(s->kind));
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", scores_text(*s).c_str());
  }
}

void draw_model_main(App& app, TextureHost& textures, ImVec2 size) {
  ModelView& mv = app.model_view;
  ModelSession& ms = app.model;
  mv.thumbs.clear();
  mv.causal_cells.clear();
  app.layout.clear();
  const float next_w = std::min(kNextWidth, size.x * 0.3f);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  app.capture.x = origin.x;
  app.capture.y = origin.y;
  app.capture.w = size.x - next_w;
  app.capture.h = size.y;
  ImGui::BeginChild("grid", ImVec2(size.x - next_w - 8.0f, size.y), false,
                    ImGuiWindowFlags_HorizontalScrollbar);
  const GptResult& g = ms.result();
  if (!ms.has_result() || g.layers.empty()) {
    ImGui::TextDisabled("no pass yet: type a sentence");
    ImGui::EndChild();
    return;
  }
  const int L = static_cast<int>(g.layers.size()), H = ms.config().n_heads;
  ImGui::PushItemWidth(200.0f);
  if (ImGui::BeginCombo("show heads", mv.filter == HeadKind::none ? "every kind" : to_string(mv.filter))) {
    if (ImGui::Selectable("every kind", mv.filter == HeadKind::none)) mv.filter = HeadKind::none;
    for (HeadKind k : all_head_kinds())
      if (ImGui::Selectable(to_string(k), mv.filter == k)) mv.filter = k;
    ImGui::EndCombo();
  }
  ImGui::PopItemWidth();
  ImGui::SameLine();
  int shown = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      if (const HeadScores* s = kind_of(app, l, h);
          s && (mv.filter == HeadKind::none || s->kind == mv.filter))
        ++shown;
  ImGui::TextColored(kDimColor, "%d of %d heads", shown, L * H);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Hover a head for its scores and a large preview; click it to open its layer; Alt-click it to "
        "ablate it");
  draw_metric_line(app);
  // Attribution colouring: each head's share of the metric, and a column of the layers' MLPs.
  const bool attribution = attribution_shown(app);
  const int columns = H + (attribution ? 1 : 0);

  const GptConfig& config = ms.config();
  const bool grouped = grouped_heads(config);
  const float fh = ImGui::GetTextLineHeight();
  const float left = ImGui::CalcTextSize("L00").x + 10.0f, gap = 4.0f;
  // Grouped heads are labelled "q7 · kv1" on one line when it fits the widest label, else on two.
  const float label_w = ImGui::CalcTextSize(head_label(config, H - 1).c_str()).x;
  ImVec2 avail = ImGui::GetContentRegionAvail();
  avail.y = std::max(avail.y * 0.3f, avail.y - causal_views_height(app));  // the lens strip and patching maps
  const float by_w = (avail.x - left - kSinkWidth - gap) / static_cast<float>(columns) - gap;
  float top = fh + 4.0f;
  float side = 0.0f;
  for (int lines = 1; lines <= (grouped ? 2 : 1); ++lines) {
    top = fh * static_cast<float>(lines) + 4.0f;
    const float by_h = (avail.y - top) / static_cast<float>(L) - gap - fh;
    side = std::floor(std::clamp(std::min(by_w, by_h), 28.0f, 160.0f));
    mv.header_two_lines = lines == 2;
    if (label_w <= side + gap) break;
  }
  mv.thumb_px = static_cast<int>(side);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(kDimColor);
  const auto centred = [&](const std::string& s, float x, float y) {
    dl->AddText(ImVec2(x + (side - ImGui::CalcTextSize(s.c_str()).x) * 0.5f, y), dim, s.c_str());
  };
  for (int h = 0; h < H; ++h) {
    const float x = p0.x + left + static_cast<float>(h) * (side + gap);
    if (mv.header_two_lines) {
      centred("q" + std::to_string(h), x, p0.y);
      centred("kv" + std::to_string(kv_head_of(config, h)), x, p0.y + fh);
    } else {
      centred(head_label(config, h), x, p0.y);
    }
    // The query heads that read one key/value head share a bracket under their labels.
    if (grouped && (h + 1 == H || kv_head_of(config, h + 1) != kv_head_of(config, h))) {
      int first = h;
      while (first > 0 && kv_head_of(config, first - 1) == kv_head_of(config, h)) --first;
      const float x0 = p0.x + left + static_cast<float>(first) * (side + gap), y = p0.y + top - 2.0f;
      dl->AddLine(ImVec2(x0, y), ImVec2(x + side, y), dim);
    }
  }
  if (attribution) centred("MLP", p0.x + left + static_cast<float>(H) * (side + gap), p0.y);
  const float row_h = side + gap + fh;
  // The attention sink per layer: a bar of the mean of its heads' first-token scores, right of its row.
  const std::vector<float> sinks = sink_per_layer(ms.kinds());
  const float sink_x = p0.x + left + static_cast<float>(columns) * (side + gap) + gap;
  centred_sink_header(dl, ImVec2(sink_x, p0.y + top - fh - 4.0f), kSinkWidth, dim);
  mv.sinks.clear();
  const std::vector<ColouredThumb> ready = colour_thumbs(app, g, H);
  for (int l = 0; l < L; ++l) {
    const int layer = g.layers[static_cast<std::size_t>(l)].index;
    const float y = p0.y + top + static_cast<float>(l) * row_h;
    char buf[16];
    std::snprintf(buf, sizeof buf, "L%d", layer);
    dl->AddText(ImVec2(p0.x, y + (side - fh) * 0.5f), dim, buf);
    if (layer >= 0 && layer < static_cast<int>(sinks.size()))
      draw_sink(app, layer, sinks[static_cast<std::size_t>(layer)],
                ImVec2(sink_x, y + (side - fh) * 0.5f - 2.0f), kSinkWidth);
    for (int h = 0; h < H; ++h) {
      const ImVec2 a(p0.x + left + static_cast<float>(h) * (side + gap), y);
      const ImVec2 b(a.x + side, a.y + side);
      const HeadScores* s = kind_of(app, layer, h);
      const bool hidden = mv.filter != HeadKind::none && (!s || s->kind != mv.filter);
      ImGui::SetCursorScreenPos(a);
      ImGui::PushID(layer * kThumbStride + h);
      ImGui::InvisibleButton("thumb", ImVec2(side, side + fh));
      ImGui::PopID();
      const bool alt_click =
          ImGui::IsItemHovered() && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && ImGui::GetIO().KeyAlt;
      if (hidden) {
        dl->AddRect(a, b, IM_COL32(70, 70, 80, 255));
        if (is_ablated(app, layer, h)) cross_out(a, b);
        if (alt_click) toggle_ablation(app, layer, h);
        continue;
      }
      if (attribution)
        draw_attribution_cell(app, layer, h, a, b);
      else if (void* tex = thumb_texture(app, textures, kThumbSlot + layer * kThumbStride + h, layer, h,
                                         kThumbTexels, &ready))
        dl->AddImage(tex, a, b);
      if (is_ablated(app, layer, h)) cross_out(a, b);
      mv.thumbs.push_back({layer, h, a.x, a.y, b.x, b.y});
      if (s && s->kind != HeadKind::none) {
        // The label fits under its thumbnail: at a smaller size when needed, else its first letter.
        const char* label = short_label(s->kind);
        const float tw = ImGui::CalcTextSize(label).x, room = side - 2.0f;
        const float scale = std::min(1.0f, room / tw);
        const char* end = scale >= 0.7f ? nullptr : label + 1;
        const float px = ImGui::GetFontSize() * (end ? 1.0f : scale);
        const float w = ImGui::GetFont()->CalcTextSizeA(px, FLT_MAX, 0.0f, label, end).x;
        dl->AddText(ImGui::GetFont(), px, ImVec2(a.x + (side - w) * 0.5f, b.y + 1.0f), text, label, end);
      }
      if (ImGui::IsItemHovered()) {
        mv.hovered_layer = layer;
        mv.hovered_head = h;
        dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), IM_COL32(255, 210, 60, 255), 0.0f, 0,
                    2.0f);
        ImGui::BeginTooltip();
        if (config.gpt2_blocks()) {
          ImGui::Text("layer %d, head %d: %s", layer, h, s ? to_string(s->kind) : "");
        } else {
          ImGui::Text("layer %d (%s), %s: %s", layer, mask_label(config, layer).c_str(),
                      grouped ? head_label(config, h).c_str() : ("head " + std::to_string(h)).c_str(),
                      s ? to_string(s->kind) : "");
          if (grouped) ImGui::TextColored(kDimColor, "%s", head_sharing(config, h).c_str());
        }
        if (s) ImGui::TextColored(kDimColor, "%s", scores_text(*s).c_str());
        if (attribution)
          ImGui::Text(
              "attribution to the metric: %.4f",
              ms.lens().attribution.heads[static_cast<std::size_t>(layer)][static_cast<std::size_t>(h)]);
        if (is_ablated(app, layer, h))
          ImGui::TextColored(kErrorColor, "ablated (%s)", to_string(mv.causal.ablation.kind));
        if (void* big = thumb_texture(app, textures, kPreviewSlot, layer, h, kPreviewTexels)) {
          const float px = std::min(360.0f, std::max(side * 3.0f, 200.0f));
          ImGui::Image(big, ImVec2(px, px));
        }
        ImGui::TextColored(kDimColor, "click: open layer %d with this head enlarged", layer);
        ImGui::TextColored(kDimColor, "Alt-click: %s this head (%s ablation)",
                           is_ablated(app, layer, h) ? "restore" : "ablate",
                           to_string(mv.causal.ablation.kind));
        ImGui::EndTooltip();
        if (alt_click)
          toggle_ablation(app, layer, h);
        else if (ImGui::IsMouseClicked(ImGuiMouseButton_Left))
          open_layer(app, layer, h);
      }
    }
    if (attribution) {
      const ImVec2 a(p0.x + left + static_cast<float>(H) * (side + gap), y);
      draw_attribution_cell(app, layer, -1, a, ImVec2(a.x + side, a.y + side));
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + top + static_cast<float>(L) * row_h));
  ImGui::Dummy(ImVec2(left + static_cast<float>(columns) * (side + gap) + gap + kSinkWidth, 1.0f));
  draw_lens_strip(app);
  draw_patching_maps(app);
  ImGui::EndChild();
  ImGui::SameLine();
  draw_next_tokens(app, ImVec2(0.0f, size.y));
}

void export_model(App& app, ExportKind kind) {
  ModelView& mv = app.model_view;
  const ModelSession& ms = app.model;
  const Result* layer = shown_result(app);
  Written w;
  Status st = Status::ok();
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "attnviz_layer%02d", std::max(0, mv.layer));
  if (kind == ExportKind::json) {
    // The CLI's --model --json format, one file per layer (the opened one, or every layer from the grid).
    const GptResult& g = ms.result();
    GptJsonModel jm;
    jm.source = ms.choice().kind == ModelKind::seeded ? ms.choice().size : ms.choice().path;
    jm.seeded = ms.choice().kind == ModelKind::seeded;
    jm.seed = ms.choice().seed;
    jm.id_labels = ms.ids_only();
    // The causal tools' keys (the CLI's lens, attribution, ablated, patching) in every file: the pass they
    // belong to is the whole model's.
    const std::optional<GptJsonLens> lens = ms.json_lens();
    for (const GptLayer& l : g.layers) {
      if (mv.layer >= 0 && l.index != mv.layer) continue;
      GptResult one;
      one.config = g.config, one.options = g.options, one.ids = g.ids, one.logits = g.logits,
      one.next = g.next;
      one.seconds = g.seconds, one.isa = g.isa, one.threads = g.threads, one.reused = g.reused;
      one.layers.push_back(l);
      char name[48];
      std::snprintf(name, sizeof name, "attnviz_layer%02d.json", l.index);
      std::string json =
          gpt_result_to_json(one, ms.weights(), jm, ms.tokenizer(), nullptr, lens ? &*lens : nullptr);
      if (lens &&
          lens->patching) {  // the app's own key beside the CLI's: the text the maps were patched from
        JsonWriter text;
        text.string(to_valid_utf8(ms.causal().corrupted));
        json.pop_back();  // the object's closing brace
        json += ",\"corrupted_text\":" + text.out + "}";
      }
      st = export_text(app.export_dir, name, json + "\n", w);
      if (!st.is_ok()) break;
    }
  } else if (!layer) {
    st = Status::fail(kind == ExportKind::csv ? "open a layer (click a head) to export its CSV"
                                              : "open a layer (click a head) to export its heads");
  } else if (kind == ExportKind::heads_png) {
    st = export_png(app.export_dir, prefix, *layer, app.view.stage, app.view.color,
                    default_cell_px(layer->tokens_count(), layer->tokens_count()), w);
  } else {
    st = export_csv(app.export_dir, prefix, *layer, app.view.stage, w);
  }
  app.written.insert(app.written.end(), w.paths.begin(), w.paths.end());
  app.message = st.is_ok() ? "wrote " + std::to_string(w.paths.size()) + " file" +
                                 (w.paths.size() == 1 ? "" : "s") + (w.paths.empty() ? "" : ": " + w.paths[0])
                           : "export failed: " + st.error;
}

}  // namespace ui
}  // namespace attnviz::viz
