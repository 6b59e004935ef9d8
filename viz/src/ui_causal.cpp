// The causal tools in the model view (docs/app.md, "The causal tools"): the controls (lens, attribution,
// target / versus / position, ablation, the corrupted text of patching), the metric line over the grid, the
// lens strip (layers x positions) and the two patching maps under it.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attnviz/viz/palette.hpp"
#include "ui_internal.hpp"

namespace attnviz::viz::ui {
namespace {

const ImVec4 kErrorColor{1.0f, 0.45f, 0.4f, 1.0f};
const ImVec4 kDimColor{0.6f, 0.6f, 0.65f, 1.0f};
constexpr float kLensCellMin = 44.0f, kLensCellMax = 96.0f;

ImU32 col32(std::uint32_t packed) {
  return static_cast<ImU32>(packed);  // palette.hpp packs as IM_COL32 does
}

// Black or white text, whichever reads on `packed`.
ImU32 text_on(std::uint32_t packed) {
  const double luma =
      0.299 * (packed & 0xFF) + 0.587 * ((packed >> 8) & 0xFF) + 0.114 * ((packed >> 16) & 0xFF);
  return luma > 150.0 ? IM_COL32(20, 20, 25, 255) : IM_COL32(245, 245, 245, 255);
}

void note_cell(App& app, const char* kind, int a, int b, ImVec2 p0, ImVec2 p1) {
  app.model_view.causal_cells.push_back({kind, a, b, p0.x, p0.y, p1.x, p1.y});
}

std::string format_value(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The text of a cell, cut to fit `width` pixels.
std::string fitted(std::string s, float width) {
  while (!s.empty() && ImGui::CalcTextSize(s.c_str()).x > width) s.pop_back();
  return s;
}

}  // namespace

std::string token_text(const App& app, int id) {
  if (id < 0 || !app.model.is_open() || id >= app.model.config().vocab_size) return "none";
  return "'" + visible_text(app.model.label(id)) + "' (#" + std::to_string(id) + ")";
}

bool attribution_shown(const App& app) {
  return app.model_view.causal.attribute && app.model.has_lens() && app.model.lens().attributed;
}

double attribution_scale(const App& app) {
  const Attribution& a = app.model.lens().attribution;
  double m = std::max(std::fabs(a.embeddings), std::fabs(a.final_bias));
  for (const auto& row : a.heads)
    for (double v : row) m = std::max(m, std::fabs(v));
  for (double v : a.mlp) m = std::max(m, std::fabs(v));
  for (double v : a.attention_bias) m = std::max(m, std::fabs(v));
  return m > 0.0 ? m : 1.0;
}

bool is_ablated(const App& app, int layer, int head) {
  const std::vector<HeadRef>& heads = app.model_view.causal.ablation.heads;
  return std::find(heads.begin(), heads.end(), HeadRef{layer, head}) != heads.end();
}

void toggle_ablation(App& app, int layer, int head) {
  std::vector<HeadRef>& heads = app.model_view.causal.ablation.heads;
  const auto it = std::find(heads.begin(), heads.end(), HeadRef{layer, head});
  if (it != heads.end())
    heads.erase(it);
  else
    heads.push_back({layer, head});
}

void choose_token(App& app, int id, bool versus) {
  LensTarget& t = app.model_view.causal.target;
  (versus ? t.versus : t.target) = id;
}

void sync_causal(App& app) {
  if (!model_mode(app) || app.model.causal() == app.model_view.causal) return;
  app.model.set_causal(app.model_view.causal);
  (void)app.model.recompute(app.session.text);  // a refusal keeps the last good view; error() says why
}

void step_patching(App& app) {
  if (!model_mode(app)) return;
  sync_causal(app);
  app.model.step_patching(ImGui::GetTime() * 1000.0, app.model_view.patch_budget_ms);
}

void draw_causal_panel(App& app) {
  // The grid's tools: an opened layer's view has its own controls.
  if (!model_mode(app) || app.model_view.layer >= 0) return;
  if (!ImGui::CollapsingHeader("Causal tools", ImGuiTreeNodeFlags_DefaultOpen)) return;
  ModelView& mv = app.model_view;
  ModelSession& ms = app.model;
  CausalTools& t = mv.causal;
  ImGui::PushTextWrapPos(0.0f);
  if (!ms.causal_note().empty()) ImGui::TextColored(kErrorColor, "%s", ms.causal_note().c_str());
  ImGui::Checkbox("logit lens", &t.lens);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("What the model would predict after each layer: a strip of layers x positions");
  ImGui::Checkbox("colour heads by attribution", &t.attribute);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Off: the grid shows what heads do (their kinds). On: how much each head, MLP and the\n"
        "embeddings add to the target's logit (direct logit attribution)");
  const LensTarget& resolved = ms.lens().target;
  ImGui::Text("target: %s", t.target.target >= 0 ? token_text(app, t.target.target).c_str()
                            : ms.has_lens() ? ("top next token " + token_text(app, resolved.target)).c_str()
                                            : "the top next token");
  if (t.target.target >= 0) {
    ImGui::SameLine();
    if (ImGui::SmallButton("clear##target")) t.target.target = -1;
  }
  ImGui::Text("versus: %s", token_text(app, t.target.versus).c_str());
  if (t.target.versus >= 0) {
    ImGui::SameLine();
    if (ImGui::SmallButton("clear##versus")) t.target.versus = -1;
  }
  if (t.target.position >= 0)
    ImGui::Text("position: %d", t.target.position);
  else
    ImGui::Text("position: the last%s",
                ms.has_lens() ? (" (" + std::to_string(resolved.position) + ")").c_str() : "");
  if (t.target.position >= 0) {
    ImGui::SameLine();
    if (ImGui::SmallButton("last")) t.target.position = -1;
  }
  ImGui::TextColored(kDimColor,
                     "Click a next token or a lens cell: target; Shift-click: versus. Click a lens "
                     "column's token: position.");
  ImGui::Separator();
  ImGui::TextUnformatted("ablation");
  ImGui::SameLine();
  int kind = t.ablation.kind == AblationKind::mean ? 1 : 0;
  ImGui::RadioButton("zero", &kind, 0);
  ImGui::SameLine();
  ImGui::RadioButton("mean", &kind, 1);
  t.ablation.kind = kind ? AblationKind::mean : AblationKind::zero;
  ImGui::TextColored(kDimColor, "Alt-click a head in the grid to ablate it (again: restore it)");
  if (!t.ablation.empty()) {
    std::string list;
    for (const HeadRef& h : t.ablation.heads)
      list += (list.empty() ? "" : ", ") + std::to_string(h.layer) + "." + std::to_string(h.head);
    ImGui::Text("ablated: %s", list.c_str());
    if (ImGui::SmallButton("restore every head")) t.ablation.heads.clear();
  }
  ImGui::Separator();
  ImGui::TextUnformatted("patching: corrupted text (same token count)");
  ImGui::PushItemWidth(-1.0f);
  ImGui::InputText("##corrupted", &t.corrupted);
  ImGui::PopItemWidth();
  if (const PatchJob* job = ms.patch_job(); job && !t.corrupted.empty()) {
    char overlay[48];
    std::snprintf(overlay, sizeof overlay, "%d / %d runs", job->done(), job->total());
    ImGui::ProgressBar(
        job->total() ? static_cast<float>(job->done()) / static_cast<float>(job->total()) : 0.0f,
        ImVec2(ms.patching_running() ? -70.0f : -1.0f, 0.0f), overlay);
    if (ms.patching_running()) {
      ImGui::SameLine();
      if (ImGui::Button("Cancel")) ms.cancel_patching();
    }
  }
  if (ms.patching_scheduled() && !t.corrupted.empty())
    ImGui::TextColored(kDimColor, "the maps follow once typing stops");
  if (!ms.patch_error().empty()) ImGui::TextColored(kErrorColor, "%s", ms.patch_error().c_str());
  ImGui::PopTextWrapPos();
}

void draw_metric_line(App& app) {
  const ModelSession& ms = app.model;
  if (!ms.has_lens()) return;
  const LensResult& lr = ms.lens();
  const Attribution& a = lr.attribution;
  if (lr.attributed) {
    char buf[256];
    std::snprintf(
        buf, sizeof buf, "%s at position %d: %.2f (components sum to %.2f)",
        (lr.target.versus >= 0 ? "logit of " + token_text(app, a.target) + " - " + token_text(app, a.versus)
                               : "logit of " + token_text(app, a.target))
            .c_str(),
        a.position, a.value, a.sum());
    ImGui::TextUnformatted(buf);
  } else {
    ImGui::Text("target %s at position %d", token_text(app, lr.target.target).c_str(), lr.target.position);
  }
  if (!attribution_shown(app)) return;
  const double scale = attribution_scale(app);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fh = ImGui::GetTextLineHeight();
  const auto cell = [&](const char* kind, const char* label, double v, bool first) {
    if (!first) ImGui::SameLine();
    const ImVec2 size(ImGui::CalcTextSize(label).x + 12.0f, fh + 2.0f);
    const ImVec2 p = ImGui::GetCursorScreenPos(), q(p.x + size.x, p.y + size.y);
    const std::uint32_t c = signed_color(v, scale);
    dl->AddRectFilled(p, q, col32(c));
    dl->AddText(ImVec2(p.x + 6.0f, p.y + 1.0f), text_on(c), label);
    ImGui::InvisibleButton(kind, size);
    note_cell(app, kind, 0, 0, p, q);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %.4f", label, v);
  };
  cell("embeddings", "embeddings", a.embeddings, true);
  cell("final_bias", "final bias", a.final_bias, false);
  ImGui::SameLine();
  ImGui::TextColored(kDimColor, "scale -%.2f blue, 0 white, +%.2f red (the largest |value|)", scale, scale);
}

void draw_attribution_cell(App& app, int layer, int head, ImVec2 a, ImVec2 b) {
  const Attribution& at = app.model.lens().attribution;
  if (layer < 0 || layer >= static_cast<int>(at.heads.size())) return;
  const auto& row = at.heads[static_cast<std::size_t>(layer)];
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const double scale = attribution_scale(app);
  const bool mlp = head < 0;
  const double v = mlp                                   ? at.mlp[static_cast<std::size_t>(layer)]
                   : head < static_cast<int>(row.size()) ? row[static_cast<std::size_t>(head)]
                                                         : 0.0;
  const std::uint32_t c = signed_color(v, scale);
  dl->AddRectFilled(a, b, col32(c));
  const std::string s = fitted(format_value(v), b.x - a.x - 2.0f);
  const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
  dl->AddText(ImVec2(a.x + (b.x - a.x - ts.x) * 0.5f, a.y + (b.y - a.y - ts.y) * 0.5f), text_on(c),
              s.c_str());
  if (mlp) {
    note_cell(app, "mlp", layer, 0, a, b);
    if (ImGui::IsMouseHoveringRect(a, b))
      ImGui::SetTooltip("layer %d's MLP: %.4f\nits attention output bias: %.4f", layer, v,
                        at.attention_bias[static_cast<std::size_t>(layer)]);
  }
}

void cross_out(ImVec2 a, ImVec2 b) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 c = IM_COL32(230, 60, 40, 255);
  dl->AddLine(a, b, c, 2.5f);
  dl->AddLine(ImVec2(b.x, a.y), ImVec2(a.x, b.y), c, 2.5f);
}

float causal_views_height(const App& app) {
  const ModelSession& ms = app.model;
  const float row = ImGui::GetTextLineHeight() + 4.0f;
  float h = 0.0f;
  if (ms.has_lens() && !ms.lens().lens.empty())
    h += row * static_cast<float>(ms.lens().lens.size() + 2) + 8.0f;
  if (ms.patching()) h += row * static_cast<float>(ms.config().n_layers + 2) + 8.0f;
  return h;
}

void draw_lens_strip(App& app) {
  ModelSession& ms = app.model;
  if (!ms.has_lens() || ms.lens().lens.empty()) return;
  const std::vector<LensPoint>& lens = ms.lens().lens;
  const std::vector<std::string>& pieces = ms.pieces();
  const int T = static_cast<int>(pieces.size());
  const int position = ms.lens().target.position;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fh = ImGui::GetTextLineHeight(), row_h = fh + 4.0f;
  const float left = ImGui::CalcTextSize("embeddings").x + 8.0f;
  float col_w = kLensCellMin;
  for (const std::string& p : pieces)
    col_w = std::max(col_w, std::min(kLensCellMax, ImGui::CalcTextSize(visible_text(p).c_str()).x + 8.0f));
  ImGui::TextUnformatted("Logit lens: the top token after each layer, coloured by its probability");
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImU32 dim = ImGui::GetColorU32(kDimColor), text = ImGui::GetColorU32(ImGuiCol_Text);
  for (int t = 0; t < T; ++t) {  // the header: the typed pieces; a click sets the position
    const ImVec2 a(p0.x + left + static_cast<float>(t) * col_w, p0.y),
        b(a.x + col_w - 2.0f, a.y + row_h - 2.0f);
    dl->AddRectFilled(a, b, t == position ? IM_COL32(90, 80, 40, 255) : IM_COL32(55, 60, 75, 255), 3.0f);
    const std::string s = fitted(visible_text(pieces[static_cast<std::size_t>(t)]), col_w - 6.0f);
    dl->AddText(ImVec2(a.x + 3.0f, a.y + 1.0f), text, s.c_str());
    ImGui::SetCursorScreenPos(a);
    ImGui::PushID(t);
    if (ImGui::InvisibleButton("column", ImVec2(col_w - 2.0f, row_h - 2.0f)))
      app.model_view.causal.target.position = t;
    ImGui::PopID();
    note_cell(app, "column", 0, t, a, b);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("position %d: click to make it the metric's position", t);
  }
  for (std::size_t k = 0; k < lens.size(); ++k) {
    const LensPoint& point = lens[k];
    const float y = p0.y + static_cast<float>(k + 1) * row_h;
    dl->AddText(ImVec2(p0.x, y + 1.0f), dim, k == 0 ? "embeddings" : ("L" + std::to_string(k - 1)).c_str());
    for (int t = 0; t < T && t < static_cast<int>(point.positions.size()); ++t) {
      const LensPosition& lp = point.positions[static_cast<std::size_t>(t)];
      if (lp.top.empty()) continue;
      const ImVec2 a(p0.x + left + static_cast<float>(t) * col_w, y), b(a.x + col_w - 2.0f, y + row_h - 2.0f);
      const TopToken& top = lp.top.front();
      const std::uint32_t c = color_at(Palette::blues, static_cast<float>(top.probability));
      dl->AddRectFilled(a, b, col32(c));
      if (t == position) dl->AddRect(a, b, IM_COL32(255, 210, 60, 255));
      const std::string s = fitted(visible_text(ms.label(top.id)), col_w - 6.0f);
      dl->AddText(ImVec2(a.x + 3.0f, a.y + 1.0f), text_on(c), s.c_str());
      note_cell(app, "lens", static_cast<int>(k), t, a, b);
      if (!ImGui::IsMouseHoveringRect(a, b) || !ImGui::IsWindowHovered()) continue;
      ImGui::BeginTooltip();
      ImGui::Text("%s, position %d", point.after.c_str(), t);
      for (const TopToken& tt : lp.top)
        ImGui::Text("%-16s %6.2f%%  logit %.3f", token_text(app, tt.id).c_str(), tt.probability * 100.0,
                    static_cast<double>(tt.logit));
      if (!std::isnan(lp.target_probability) && app.model_view.causal.target.target >= 0)
        ImGui::Text("target %s: %.3f%%", token_text(app, app.model_view.causal.target.target).c_str(),
                    lp.target_probability * 100.0);
      ImGui::TextColored(kDimColor, "click: the top token becomes the target; Shift-click: versus");
      ImGui::EndTooltip();
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) choose_token(app, top.id, ImGui::GetIO().KeyShift);
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + static_cast<float>(lens.size() + 1) * row_h + 4.0f));
  ImGui::Dummy(ImVec2(left + static_cast<float>(T) * col_w, 1.0f));
}

// One patching map: rows x cols of entries, diverging around 0 and scaled to at least 1 (a full recovery).
void draw_patch_map(App& app, const char* kind, const std::vector<std::vector<double>>& m, ImVec2 p0,
                    float cell, const char* what) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  double scale = 1.0;
  for (const auto& row : m)
    for (double v : row)
      if (!std::isnan(v)) scale = std::max(scale, std::fabs(v));
  for (std::size_t l = 0; l < m.size(); ++l)
    for (std::size_t j = 0; j < m[l].size(); ++j) {
      const ImVec2 a(p0.x + static_cast<float>(j) * cell, p0.y + static_cast<float>(l) * cell);
      const ImVec2 b(a.x + cell - 1.0f, a.y + cell - 1.0f);
      dl->AddRectFilled(a, b, col32(signed_color(m[l][j], scale)));
      note_cell(app, kind, static_cast<int>(l), static_cast<int>(j), a, b);
      if (ImGui::IsMouseHoveringRect(a, b) && ImGui::IsWindowHovered()) {
        if (std::isnan(m[l][j]))
          ImGui::SetTooltip("layer %zu, %s %zu: not computed yet", l, what, j);
        else
          ImGui::SetTooltip("layer %zu, %s %zu: %.4f of the way from corrupted to clean", l, what, j,
                            m[l][j]);
      }
    }
}

void draw_patching_maps(App& app) {
  const ModelSession& ms = app.model;
  const Patching* p = ms.patching();
  if (!p || p->residual.empty()) return;
  const float fh = ImGui::GetTextLineHeight();
  const int L = static_cast<int>(p->residual.size());
  const int T = static_cast<int>(p->residual.front().size()), H = static_cast<int>(p->heads.front().size());
  const float cell = std::clamp(
      std::floor((ImGui::GetContentRegionAvail().x - 40.0f) / static_cast<float>(std::max(1, T + H))), 8.0f,
      fh + 4.0f);
  if (std::isnan(p->corrupted) && ms.patching_running())  // the job's first two runs
    ImGui::Text("Activation patching: running the clean and the corrupted texts");
  else
    ImGui::Text("Activation patching: %s clean %.3f, corrupted %.3f; each entry recovers that share",
                p->difference ? "logit difference" : "logit", p->clean, p->corrupted);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float gap = 24.0f;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 dim = ImGui::GetColorU32(kDimColor);
  dl->AddText(p0, dim, "residual: layer x position");
  dl->AddText(ImVec2(p0.x + static_cast<float>(T) * cell + gap, p0.y), dim, "heads: layer x head");
  const ImVec2 maps(p0.x, p0.y + fh + 2.0f);
  draw_patch_map(app, "residual", p->residual, maps, cell, "position");
  draw_patch_map(app, "heads", p->heads, ImVec2(maps.x + static_cast<float>(T) * cell + gap, maps.y), cell,
                 "head");
  ImGui::SetCursorScreenPos(ImVec2(p0.x, maps.y + static_cast<float>(L) * cell + 4.0f));
  ImGui::Dummy(ImVec2(static_cast<float>(T + H) * cell + gap, 1.0f));
}

}  // namespace attnviz::viz::ui
