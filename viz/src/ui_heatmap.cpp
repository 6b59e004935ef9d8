// The heatmaps of the current stage (grid, single head, aggregate or compare), their legend, and the hovered
// or locked cell's arithmetic.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attnviz/viz/explain.hpp"
#include "ui_internal.hpp"

namespace attnviz::viz {
namespace ui {
namespace {

constexpr float kLegendWidth = 84.0f;
constexpr int kMaxOverlayCells = 20000;  // per heatmap: beyond this, cells are too small to annotate anyway

const ImU32 kHighlight = IM_COL32(255, 210, 60, 255);
const ImU32 kLocked = IM_COL32(255, 90, 60, 255);

std::string join_heads(const std::vector<int>& heads) {
  if (heads.empty()) return "all heads";
  std::string s = "heads";
  for (int h : heads) s += " " + std::to_string(h);
  return s;
}

// Whether the view shows q or k at a step other than the rotated one the scores use (a rotary layer).
bool qk_step_shown(const LayerSteps& steps, const ViewState& v) {
  return steps.any() && v.qk_step != QkStep::rotated &&
         (v.stage == StageId::queries || v.stage == StageId::keys);
}

MatrixDesc one_head(const Result& r, const LayerSteps& steps, const ViewState& v, int head) {
  return qk_step_shown(steps, v) ? qk_step_matrix(r, steps, v.stage, v.qk_step, head)
                                 : stage_matrix(r, v.stage, head);
}

MatrixDesc pick(const Result& r, const LayerSteps& steps, const ViewState& v, int head) {
  if (v.aggregate == Aggregate::none) return one_head(r, steps, v, head);
  if (!qk_step_shown(steps, v)) return aggregate(r, v.stage, v.aggregate, v.subset);
  std::vector<MatrixDesc> picked;
  for (int h = 0; h < r.shape.heads; ++h)
    if (v.subset.empty() || std::find(v.subset.begin(), v.subset.end(), h) != v.subset.end())
      picked.push_back(qk_step_matrix(r, steps, v.stage, v.qk_step, h));
  return aggregate(picked, v.aggregate);
}

std::vector<Heatmap> heatmaps_for(const App& app) {
  const Result& r = view_result(app);
  const ViewState& v = app.view;
  const StageInfo info = stage_info(r, v.stage);
  const int H = stage_heads(r, v.stage);
  const LayerSteps steps = shown_steps(app);
  std::vector<Heatmap> out;
  const std::string what =
      v.aggregate == Aggregate::none
          ? (info.per_head ? "head " + std::to_string(std::clamp(v.enlarged, 0, H - 1)) : "")
          : std::string(to_string(v.aggregate)) + " over " + join_heads(v.subset);
  if (compare_on(app)) {
    const int head = std::clamp(v.enlarged, 0, H - 1);
    const Result* b_result = compare_result(app);
    const CompareState& cs = app.compare;
    const std::string b_is = cs.mode == CompareMode::text    ? "\"" + cs.text + "\""
                             : cs.mode == CompareMode::seed  ? "seed " + std::to_string(cs.seed)
                             : cs.mode == CompareMode::layer ? "layer " + std::to_string(cs.layer)
                                                             : (r.config.mask ? "mask off" : "mask on");
    Heatmap a{pick(r, steps, v, head), kCompareSlot, "A: " + what};
    if (!b_result || !compare_error(app).empty()) {  // B's last result is for another A: no B, no A - B
      Heatmap b{MatrixDesc{}, kCompareSlot + 1, "B (" + b_is + ")"};
      b.note = "B cannot be computed: " + compare_error(app);
      return {a, b};
    }
    const Result& rb = *b_result;
    Heatmap b{info.per_head && head >= stage_heads(rb, v.stage) ? MatrixDesc{}
                                                                : pick(rb, compare_steps(app), v, head),
              kCompareSlot + 1, "B (" + b_is + "): " + what};
    if (stage_info(rb, v.stage).available == false) b.m = {};
    Heatmap d{difference(a.m, b.m), kCompareSlot + 2, "A - B"};
    d.diverging = true;
    out = {a, b, d};
  } else if (!info.per_head) {
    out.push_back({stage_matrix(r, v.stage, 0), kAggregateSlot,
                   v.stage == StageId::inputs ? "shared by every head" : "every head merged"});
  } else if (v.aggregate != Aggregate::none) {
    out.push_back({pick(r, steps, v, 0), kAggregateSlot, what});
  } else if (v.enlarged >= 0 && v.enlarged < H) {
    out.push_back({one_head(r, steps, v, v.enlarged), v.enlarged, what});
  } else {
    for (int h = 0; h < H; ++h)
      out.push_back({one_head(r, steps, v, h), h, "head " + std::to_string(h), true});
  }
  return out;
}

// What the heatmaps of the view depend on (besides colours).
std::string view_key(const App& app) {
  const ViewState& v = app.view;
  std::string key = view_generation(app) + "/" +
                    std::to_string(!compare_on(app)  ? -1
                                   : model_mode(app) ? app.compare.model_b.generation()
                                                     : app.compare.b.generation()) +
                    "/" + std::to_string(app.compare.layer) + "/" +
                    (compare_on(app) ? compare_error(app) : std::string()) + "/" +
                    std::to_string(static_cast<int>(app.compare.mode)) + "/" + to_string(v.stage) + "/" +
                    to_string(v.aggregate) + "/" + std::to_string(v.enlarged) + "/" + to_string(v.qk_step);
  for (int h : v.subset) key += "," + std::to_string(h);
  return key;
}

const std::vector<Heatmap>& heatmaps(App& app) {
  if (!app.view_cache) app.view_cache = std::make_shared<ViewCache>();
  std::string key = view_key(app);
  if (key != app.view_cache->key) {
    app.view_cache->maps = heatmaps_for(app);
    app.view_cache->key = std::move(key);
  }
  return app.view_cache->maps;
}

// What a slot's texels depend on: the view and the colour settings.
std::string texture_key(const App& app, const Heatmap& hm) {
  const ColorOptions& c = app.view.color;
  char buf[96];
  std::snprintf(buf, sizeof buf, "/%d/%d/%g/%g/%d", static_cast<int>(c.palette), static_cast<int>(c.norm),
                static_cast<double>(c.fixed.lo), static_cast<double>(c.fixed.hi), hm.m.rows);
  return view_key(app) + buf;
}

// The colours a heatmap is drawn with: a difference always uses the diverging palette around 0, on its own
// range.
ColorOptions colors_for(const App& app, const Heatmap& hm) {
  ColorOptions o = app.view.color;
  if (hm.diverging) {
    o.palette = Palette::diverging;
    o.centered = true;
    if (o.norm == Norm::all_heads || o.norm == Norm::fixed) o.norm = Norm::head;
  }
  return o;
}

void* texture_for(App& app, TextureHost& textures, const Heatmap& hm) {
  return cached_texture(app, textures, hm.slot, texture_key(app, hm), hm.m, colors_for(app, hm),
                        app.shared_range);
}

void update_shared_range(App& app, const std::vector<Heatmap>& maps) {
  const std::string key = maps.empty() ? std::string() : texture_key(app, maps.front());
  if (key == app.range_key) return;
  Range r{HUGE_VALF, -HUGE_VALF};
  for (const Heatmap& hm : maps)
    if (!hm.diverging) r = merge(r, finite_range(hm.m));
  app.shared_range = r;
  app.range_key = key;
}

void format_value(char* buf, std::size_t n, float x) {
  if (std::isinf(x))
    std::snprintf(buf, n, x < 0 ? "-inf" : "inf");
  else if (std::fabs(x) >= 100.0f)
    std::snprintf(buf, n, "%.0f", static_cast<double>(x));
  else
    std::snprintf(buf, n, "%.2f", static_cast<double>(x));
}

// Black or white text, whichever reads better on a texel.
ImU32 text_on(std::uint32_t texel) {
  const float r = static_cast<float>(texel & 0xFF), g = static_cast<float>((texel >> 8) & 0xFF),
              b = static_cast<float>((texel >> 16) & 0xFF);
  return 0.299f * r + 0.587f * g + 0.114f * b > 140.0f ? IM_COL32(0, 0, 0, 255)
                                                       : IM_COL32(255, 255, 255, 255);
}

float label_width(const Result& r, const MatrixDesc& m) {
  float w = 0.0f;
  const int n = std::min(m.rows, 256);  // enough to size the margin
  for (int i = 0; i < n; ++i)
    w = std::max(w, ImGui::CalcTextSize(visible_text(r.tokens[static_cast<std::size_t>(i)]).c_str()).x);
  return std::min(w, 90.0f) + 6.0f;
}

void draw_one(App& app, TextureHost& textures, const Heatmap& hm, ImVec2 pos, ImVec2 size, const Result& r) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ViewState& v = app.view;
  const float fh = ImGui::GetTextLineHeight();
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushID(hm.slot);
  if (hm.enlargeable) {
    if (ImGui::SmallButton(hm.title.c_str())) v.enlarged = hm.slot;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("show this head alone");
  } else {
    ImGui::TextUnformatted(hm.title.c_str());
  }
  if (hm.m.empty()) {
    ImGui::PushTextWrapPos(pos.x + size.x);
    if (hm.note.empty())
      ImGui::TextDisabled("nothing to compare at this stage");
    else
      ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", hm.note.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopID();
    return;
  }
  const MatrixDesc& m = hm.m;
  const float left = label_width(r, m), top = fh * 2.0f + 6.0f;
  const float iw = size.x - left - 4.0f, ih = size.y - top - 2.0f;
  if (iw < 8.0f || ih < 8.0f) {
    ImGui::PopID();
    return;
  }
  const float base = std::min(iw / static_cast<float>(m.cols), ih / static_cast<float>(m.rows));
  const float cell = base * v.zoom;
  // Zoom keeps the heatmap's place and size on screen and shows a smaller window of cells in it.
  const float vis_c = static_cast<float>(m.cols) / v.zoom, vis_r = static_cast<float>(m.rows) / v.zoom;
  const float x0 = std::clamp(v.x0, 0.0f, static_cast<float>(m.cols) - vis_c);
  const float y0 = std::clamp(v.y0, 0.0f, static_cast<float>(m.rows) - vis_r);
  const ImVec2 p0(pos.x + left, pos.y + top);
  const ImVec2 p1(p0.x + vis_c * cell, p0.y + vis_r * cell);
  const ImVec2 origin(p0.x - x0 * cell, p0.y - y0 * cell);

  void* tex = texture_for(app, textures, hm);
  dl->AddImage(tex, p0, p1, ImVec2(x0 / static_cast<float>(m.cols), y0 / static_cast<float>(m.rows)),
               ImVec2((x0 + vis_c) / static_cast<float>(m.cols), (y0 + vis_r) / static_cast<float>(m.rows)));
  app.layout.push_back({hm.slot, p0.x, p0.y, p1.x, p1.y, origin.x, origin.y, cell, m.rows, m.cols});

  // Mouse: hover shows, click locks, wheel zooms around the pointer, right or middle drag pans.
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("cells", ImVec2(p1.x - p0.x, p1.y - p0.y),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsItemHovered()) {
    const int j = std::clamp(static_cast<int>((io.MousePos.x - origin.x) / cell), 0, m.cols - 1);
    const int i = std::clamp(static_cast<int>((io.MousePos.y - origin.y) / cell), 0, m.rows - 1);
    v.hover = {true, hm.slot, i, j};
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) v.locked = v.locked == v.hover ? Cell{} : v.hover;
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) && hm.enlargeable) v.enlarged = hm.slot;
    if (io.MouseWheel != 0.0f) {
      const float cx = x0 + (io.MousePos.x - p0.x) / cell, cy = y0 + (io.MousePos.y - p0.y) / cell;
      const float max_zoom = std::max(1.0f, static_cast<float>(std::max(m.rows, m.cols)) / 2.0f);
      v.zoom = std::clamp(v.zoom * std::pow(1.25f, io.MouseWheel), 1.0f, max_zoom);
      const float c2 = base * v.zoom;
      v.x0 = cx - (io.MousePos.x - p0.x) / c2;
      v.y0 = cy - (io.MousePos.y - p0.y) / c2;
    }
  }
  for (ImGuiMouseButton b : {ImGuiMouseButton_Right, ImGuiMouseButton_Middle}) {
    if (ImGui::IsItemActive() && ImGui::IsMouseDragging(b, 0.0f)) {
      const ImVec2 d = ImGui::GetMouseDragDelta(b, 0.0f);
      v.x0 = x0 - d.x / cell;
      v.y0 = y0 - d.y / cell;
      ImGui::ResetMouseDragDelta(b);
    }
  }

  // Overlays on the visible cells: hatched masked cells, crossed dropped ones, values.
  dl->PushClipRect(p0, p1, true);
  const int i0 = static_cast<int>(y0), i1 = std::min(m.rows, static_cast<int>(std::ceil(y0 + vis_r)));
  const int j0 = static_cast<int>(x0), j1 = std::min(m.cols, static_cast<int>(std::ceil(x0 + vis_c)));
  const bool few = static_cast<long>(i1 - i0) * (j1 - j0) <= kMaxOverlayCells;
  if (few && cell >= 6.0f) {
    char buf[32];
    const bool values = v.show_values && cell >= ImGui::CalcTextSize("-0.00").x + 4.0f && cell >= fh + 2.0f;
    const ColorOptions o = colors_for(app, hm);
    const Range head_range = values && o.norm == Norm::head ? finite_range(m) : Range{};
    for (int i = i0; i < i1; ++i) {
      // The range a value's text colour is judged against: once per row, not per cell.
      const Range row_range =
          !values || o.norm == Norm::head ? head_range : effective_range(m, o, app.shared_range, i);
      for (int j = j0; j < j1; ++j) {
        const ImVec2 a(origin.x + static_cast<float>(j) * cell, origin.y + static_cast<float>(i) * cell);
        const ImVec2 b(a.x + cell, a.y + cell);
        if (m.masked(i, j)) {
          const ImU32 hatch = IM_COL32(150, 150, 160, 255);
          dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, a.y), hatch);
          if (cell >= 16.0f) {
            dl->AddLine(ImVec2(a.x, a.y + cell * 0.5f), ImVec2(a.x + cell * 0.5f, a.y), hatch);
            dl->AddLine(ImVec2(a.x + cell * 0.5f, b.y), ImVec2(b.x, a.y + cell * 0.5f), hatch);
          }
          if (values && v.stage == StageId::masked) {
            const ImVec2 ts = ImGui::CalcTextSize("-inf");
            dl->AddText(ImVec2(a.x + (cell - ts.x) * 0.5f, a.y + (cell - ts.y) * 0.5f),
                        IM_COL32(230, 230, 235, 255), "-inf");
          }
          continue;
        }
        if (m.dropped(i, j)) {
          const ImU32 cross = IM_COL32(255, 255, 255, 200);
          dl->AddLine(ImVec2(a.x + 2, a.y + 2), ImVec2(b.x - 2, b.y - 2), cross);
          dl->AddLine(ImVec2(a.x + 2, b.y - 2), ImVec2(b.x - 2, a.y + 2), cross);
          continue;
        }
        if (values) {
          const float x = m.at(i, j);
          format_value(buf, sizeof buf, x);
          const ImVec2 ts = ImGui::CalcTextSize(buf);
          const float t = normalize(x, row_range, o.centered);
          dl->AddText(ImVec2(a.x + (cell - ts.x) * 0.5f, a.y + (cell - ts.y) * 0.5f),
                      text_on(color_at(o.palette, t)), buf);
        }
      }
    }
  }
  // The selected row and column, in every heatmap.
  const Cell& sel = v.locked.active ? v.locked : v.hover;
  if (sel.active && sel.row < m.rows && sel.col < m.cols) {
    const float ry = origin.y + static_cast<float>(sel.row) * cell,
                cx = origin.x + static_cast<float>(sel.col) * cell;
    dl->AddRect(ImVec2(p0.x, ry), ImVec2(p1.x, ry + cell), kHighlight);
    dl->AddRect(ImVec2(cx, p0.y), ImVec2(cx + cell, p1.y), kHighlight);
    dl->AddRect(ImVec2(cx - 1, ry - 1), ImVec2(cx + cell + 1, ry + cell + 1),
                v.locked.active ? kLocked : kHighlight, 0.0f, 0, 2.0f);
  }
  dl->PopClipRect();

  // Labels: tokens down the left, tokens (or feature dimensions) across the top, thinned to fit.
  const ImU32 label = ImGui::GetColorU32(ImGuiCol_Text);
  const int rstep = label_step(cell, fh);
  dl->PushClipRect(ImVec2(pos.x, p0.y), ImVec2(p0.x - 2.0f, p1.y), true);
  for (int i = (i0 + rstep - 1) / rstep * rstep; i < i1; i += rstep) {
    const std::string shown = visible_text(r.tokens[static_cast<std::size_t>(i)]);
    const char* t = shown.c_str();
    const float w = ImGui::CalcTextSize(t).x;
    // Centred on its row, but kept inside the heatmap's height when rows are thinner than the text.
    const float ly =
        std::clamp(origin.y + (static_cast<float>(i) + 0.5f) * cell - fh * 0.5f, p0.y, p1.y - fh);
    dl->AddText(ImVec2(p0.x - 4.0f - w, ly), sel.active && sel.row == i ? kHighlight : label, t);
  }
  dl->PopClipRect();
  float col_w = 0.0f;
  for (int j = j0; j < j1 && j < j0 + 64; ++j)
    col_w = std::max(
        col_w, m.square ? ImGui::CalcTextSize(visible_text(r.tokens[static_cast<std::size_t>(j)]).c_str()).x
                        : ImGui::CalcTextSize("000").x);
  const int cstep = label_step(cell, std::min(col_w, 70.0f) + 6.0f);
  dl->PushClipRect(ImVec2(p0.x, p0.y - fh - 4.0f), ImVec2(p1.x, p0.y), true);
  for (int j = (j0 + cstep - 1) / cstep * cstep; j < j1; j += cstep) {
    const std::string t = m.square ? visible_text(r.tokens[static_cast<std::size_t>(j)]) : std::to_string(j);
    const float w = ImGui::CalcTextSize(t.c_str()).x;
    const float room = cell * static_cast<float>(cstep) - 4.0f;
    const float x = origin.x + (static_cast<float>(j) + 0.5f) * cell - std::min(w, room) * 0.5f;
    dl->PushClipRect(ImVec2(x, p0.y - fh - 4.0f), ImVec2(x + room, p0.y), true);
    dl->AddText(ImVec2(x, p0.y - fh - 2.0f), sel.active && sel.col == j ? kHighlight : label, t.c_str());
    dl->PopClipRect();
  }
  dl->PopClipRect();
  ImGui::PopID();
}

// What the heatmap area shows when its heatmaps cannot be drawn at this size: why, and the way to fewer.
void draw_too_small(App& app, int n, ImVec2 size) {
  ViewState& v = app.view;
  app.view_note = n > 1 ? "too many heads to draw at this size (" + std::to_string(n) +
                              "): pick a head or an aggregate, or make the window larger"
                        : "the window is too small to draw the heatmap: make it larger";
  ImGui::BeginChild("too small", size, false);
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.35f, 1.0f), "%s", app.view_note.c_str());
  ImGui::PopTextWrapPos();
  if (n > 1) {
    if (ImGui::Button("head 0 alone")) {
      v.aggregate = Aggregate::none;
      v.enlarged = 0;
    }
    ImGui::SameLine();
    if (ImGui::Button("mean")) v.aggregate = Aggregate::mean;
    ImGui::SameLine();
    if (ImGui::Button("max")) v.aggregate = Aggregate::max;
  }
  ImGui::EndChild();
}

void draw_legend(const App& app, ImVec2 pos, float height) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ViewState& v = app.view;
  const float fh = ImGui::GetTextLineHeight();
  const float bar_h = std::max(40.0f, height * 0.5f), x = pos.x + 6.0f, y = pos.y + fh * 2.0f + 6.0f;
  constexpr int kSteps = 32;
  for (int k = 0; k < kSteps; ++k) {
    const float t0 = static_cast<float>(k) / kSteps, t1 = static_cast<float>(k + 1) / kSteps;
    const ImU32 c0 = color_at(v.color.palette, 1.0f - t0), c1 = color_at(v.color.palette, 1.0f - t1);
    dl->AddRectFilledMultiColor(ImVec2(x, y + t0 * bar_h), ImVec2(x + 16.0f, y + t1 * bar_h), c0, c0, c1, c1);
  }
  char hi[48], lo[48];
  Range r = v.color.norm == Norm::fixed ? v.color.fixed : app.shared_range;
  if (v.color.centered && r.valid()) {
    const float mx = std::max(std::fabs(r.lo), std::fabs(r.hi));
    r = {-mx, mx};
  }
  if (v.color.norm == Norm::row) {
    std::snprintf(hi, sizeof hi, "row max");
    std::snprintf(lo, sizeof lo, "row min");
  } else if (r.valid()) {
    std::snprintf(hi, sizeof hi, "%.4g", static_cast<double>(r.hi));
    std::snprintf(lo, sizeof lo, "%.4g", static_cast<double>(r.lo));
  } else {
    std::snprintf(hi, sizeof hi, "-");
    std::snprintf(lo, sizeof lo, "-");
  }
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  dl->AddText(ImVec2(x + 20.0f, y - 2.0f), text, hi);
  dl->AddText(ImVec2(x + 20.0f, y + bar_h - fh), text, lo);
  // Under per-head colours the numbers span every head shown; each heatmap stretches its own range.
  const char* scope = v.color.norm == Norm::head        ? "range per\nhead"
                      : v.color.norm == Norm::row       ? "range per\nrow"
                      : v.color.norm == Norm::all_heads ? "one range,\nall heads"
                                                        : "fixed\nrange";
  dl->AddText(ImVec2(x, y + bar_h + 4.0f), text, scope);
  float yy = y + bar_h + 8.0f + fh * 2.0f;
  const Result& res = view_result(app);
  if (res.shape.causal) {
    dl->AddRectFilled(ImVec2(x, yy), ImVec2(x + 12, yy + 12), kMaskedColor);
    dl->AddLine(ImVec2(x, yy + 12), ImVec2(x + 12, yy), IM_COL32(150, 150, 160, 255));
    dl->AddText(ImVec2(x + 16, yy - 1), text, "masked");
    yy += fh + 4.0f;
    if (res.shape.window > 0) {  // a sliding-window layer: the band of keys each row sees
      const std::string band = "window " + std::to_string(res.shape.window);
      dl->AddText(ImVec2(x, yy), text, band.c_str());
      yy += fh + 4.0f;
    }
  }
  if (v.stage == StageId::dropped) {
    dl->AddRectFilled(ImVec2(x, yy), ImVec2(x + 12, yy + 12), kDroppedColor);
    dl->AddText(ImVec2(x + 16, yy - 1), text, "dropped");
    yy += fh + 4.0f;
    char kept[48];
    std::snprintf(kept, sizeof kept, "kept x%.4g", dropout_scale(res.config.dropout));
    dl->AddText(ImVec2(x, yy), text, kept);
  }
}

}  // namespace

const Result& view_result(const App& app) {
  static const Result none;
  const Result* r = shown_result(app);
  return r ? *r : none;
}

bool compare_on(const App& app) {
  // B that cannot be computed is shown too: as its error, in B's place.
  const CompareState& cs = app.compare;
  return compare_result(app) != nullptr ||
         (cs.mode != CompareMode::off && compare_available(app, cs.mode) && !compare_error(app).empty());
}

const std::string& compare_error(const App& app) {
  return model_mode(app) ? app.compare.model_b.error() : app.compare.b.error();
}

std::string view_generation(const App& app) {
  if (!model_mode(app)) return std::to_string(app.session.generation());
  return "m" + std::to_string(app.model.generation()) + "/" + std::to_string(app.model_view.layer);
}

void* cached_texture(const App& app, int slot, const std::string& key) {
  for (const App::TextureEntry& e : app.textures)
    if (e.slot == slot) return e.key == key ? e.id : nullptr;
  return nullptr;
}

void* cached_texture(App& app, TextureHost& textures, int slot, const std::string& key, const MatrixDesc& m,
                     const ColorOptions& o, const Range& shared) {
  auto it = std::find_if(app.textures.begin(), app.textures.end(),
                         [&](const App::TextureEntry& e) { return e.slot == slot; });
  if (it != app.textures.end() && it->key == key) return it->id;
  std::vector<std::uint32_t> texels;
  colorize(m, o, shared, texels);
  return store_texture(app, textures, slot, key, m.cols, m.rows, texels);
}

void* store_texture(App& app, TextureHost& textures, int slot, const std::string& key, int cols, int rows,
                    const std::vector<std::uint32_t>& texels) {
  auto it = std::find_if(app.textures.begin(), app.textures.end(),
                         [&](const App::TextureEntry& e) { return e.slot == slot; });
  void* id = textures.upload(slot, cols, rows, texels.data());
  ++app.uploads;
  if (it == app.textures.end())
    app.textures.push_back({slot, key, id});
  else
    *it = {slot, key, id};
  return id;
}

void draw_heatmaps(App& app, TextureHost& textures, ImVec2 size) {
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  app.layout.clear();
  const Result& r = view_result(app);
  const std::vector<Heatmap>& maps = heatmaps(app);
  update_shared_range(app, maps);
  app.view.hover = {};
  app.capture.x = pos.x;
  app.capture.y = pos.y;
  app.capture.w = size.x;
  app.capture.h = size.y;
  const float w = std::max(1.0f, size.x - kLegendWidth), h = size.y;
  const int n = static_cast<int>(maps.size());
  // The column count that gives the largest cells.
  int best_cols = 1;
  float best_cell = 0.0f;
  const int rows = maps.empty() ? 1 : std::max(1, maps[0].m.rows),
            cols = maps.empty() ? 1 : std::max(1, maps[0].m.cols);
  for (int c = 1; c <= n; ++c) {
    const int lines = (n + c - 1) / c;
    const float cell = std::min((w / static_cast<float>(c) - 60.0f) / static_cast<float>(cols),
                                (h / static_cast<float>(lines) - 40.0f) / static_cast<float>(rows));
    if (cell > best_cell) {
      best_cell = cell;
      best_cols = c;
    }
  }
  const int lines = (n + best_cols - 1) / best_cols;
  const ImVec2 tile(w / static_cast<float>(best_cols), h / static_cast<float>(lines));
  // A tile must hold a title, the labels' margin and a heatmap of 8 pixels (draw_one's own limits); below
  // that the titles would overlap and no heatmap would show, so the view says so instead.
  const float fh = ImGui::GetTextLineHeight();
  const float left = n > 0 ? label_width(r, maps[0].m) : 0.0f;
  app.view_note.clear();
  if (n > 0 && (tile.x - 8.0f < left + 4.0f + 8.0f || tile.y - 4.0f < fh * 2.0f + 6.0f + 2.0f + 8.0f)) {
    draw_too_small(app, n, size);
    return;
  }
  for (int k = 0; k < n; ++k) {
    const ImVec2 at(pos.x + static_cast<float>(k % best_cols) * tile.x,
                    pos.y + static_cast<float>(k / best_cols) * tile.y);
    const Result& owner =
        maps[static_cast<std::size_t>(k)].slot == kCompareSlot + 1 ? *compare_result(app) : r;
    draw_one(app, textures, maps[static_cast<std::size_t>(k)], at, ImVec2(tile.x - 8.0f, tile.y - 4.0f),
             owner);
  }
  draw_legend(app, ImVec2(pos.x + w, pos.y), h);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) app.view.locked = {};
  ImGui::SetCursorScreenPos(ImVec2(pos.x, pos.y + h));
}

void draw_cell_info(const App& app, ImVec2 size) {
  ImGui::BeginChild("cell", size, true);
  const ViewState& v = app.view;
  const Cell& c = v.locked.active ? v.locked : v.hover;
  if (!c.active) {
    ImGui::TextDisabled(
        "Hover a cell for its value and the arithmetic behind it; click locks it (Esc releases).\n"
        "Mouse wheel zooms, right-drag pans; click a head's title (or double-click it) to enlarge it.");
    ImGui::EndChild();
    return;
  }
  const bool b_side = c.head == kCompareSlot + 1 && compare_on(app);
  const Result& r = b_side ? *compare_result(app) : view_result(app);
  const LayerSteps steps = b_side ? compare_steps(app) : shown_steps(app);
  const bool single_head = c.head < kAggregateSlot;
  const int head = single_head ? c.head : std::max(0, v.enlarged);
  ImGui::BeginChild("text", ImVec2(size.x * 0.55f, 0), false);
  if (qk_step_shown(steps, v) &&
      (single_head || (c.head >= kCompareSlot && v.aggregate == Aggregate::none)) &&
      c.head != kCompareSlot + 2) {
    // q or k before the rotation: the value, and the step that made it.
    const MatrixDesc m = qk_step_matrix(r, steps, v.stage, v.qk_step, head);
    const StageInfo info = qk_step_info(r, steps, v.stage, v.qk_step);
    if (!m.empty() && c.row < m.rows && c.col < m.cols) {
      ImGui::Text("%s, head %d%s: %.6g", to_string(v.stage), head, v.locked.active ? " (locked)" : "",
                  static_cast<double>(m.at(c.row, c.col)));
      const std::string where = "row " + std::to_string(c.row) + " '" +
                                r.tokens[static_cast<std::size_t>(c.row)] + "', dim " + std::to_string(c.col);
      ImGui::TextUnformatted(visible_text(where).c_str());
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextUnformatted(info.formula.c_str());
      ImGui::PopTextWrapPos();
    }
  } else if (single_head || (c.head >= kCompareSlot && v.aggregate == Aggregate::none)) {
    const CellExplain e = explain(r, v.stage, std::min(head, stage_heads(r, v.stage) - 1), c.row, c.col);
    if (c.head == kCompareSlot + 2) {
      const MatrixDesc a = one_head(view_result(app), shown_steps(app), v, head);
      const MatrixDesc b =
          compare_on(app) ? one_head(*compare_result(app), compare_steps(app), v, head) : MatrixDesc{};
      if (!a.empty() && !b.empty() && c.row < std::min(a.rows, b.rows) && c.col < std::min(a.cols, b.cols))
        ImGui::Text("A %.6g  -  B %.6g  =  %.6g", static_cast<double>(a.at(c.row, c.col)),
                    static_cast<double>(b.at(c.row, c.col)),
                    static_cast<double>(a.at(c.row, c.col) - b.at(c.row, c.col)));
    } else if (e.valid) {
      ImGui::Text("%s, head %d%s: %.6g", to_string(v.stage), head, v.locked.active ? " (locked)" : "",
                  static_cast<double>(e.value));
      ImGui::TextUnformatted(visible_text(e.text).c_str());
    }
  } else {
    MatrixDesc m;  // the hovered heatmap's own matrix (an aggregate, or one side of a comparison)
    if (app.view_cache)
      for (const Heatmap& hm : app.view_cache->maps)
        if (hm.slot == c.head) m = hm.m;
    if (!m.empty() && c.row < m.rows && c.col < m.cols) {
      ImGui::Text("%s over %s: %.6g", to_string(v.aggregate), join_heads(v.subset).c_str(),
                  static_cast<double>(m.at(c.row, c.col)));
      std::string per = "per head:";
      char buf[48];
      for (int h = 0; h < stage_heads(r, v.stage); ++h) {
        std::snprintf(buf, sizeof buf, " %d: %.4g", h,
                      static_cast<double>(one_head(r, steps, v, h).at(c.row, c.col)));
        per += buf;
      }
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextUnformatted(per.c_str());
      ImGui::PopTextWrapPos();
    }
  }
  ImGui::EndChild();
  // A locked attention cell: q_i . k_j term by term.
  if (v.locked.active && single_head && stage_info(r, v.stage).square) {
    const CellExplain e = explain(r, v.stage, head, c.row, c.col);
    ImGui::SameLine();
    if (e.valid &&
        ImGui::BeginTable("terms", 4,
                          ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV)) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("d");
      ImGui::TableSetupColumn(r.shape.has_weights ? "q_i[d]" : "x_i[d]");
      ImGui::TableSetupColumn(r.shape.has_weights ? "k_j[d]" : "x_j[d]");
      ImGui::TableSetupColumn("product");
      ImGui::TableHeadersRow();
      for (std::size_t d = 0; d < e.terms.size(); ++d) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%zu", d);
        ImGui::TableNextColumn();
        ImGui::Text("%.5f", static_cast<double>(e.q[d]));
        ImGui::TableNextColumn();
        ImGui::Text("%.5f", static_cast<double>(e.k[d]));
        ImGui::TableNextColumn();
        ImGui::Text("%.5f", static_cast<double>(e.terms[d]));
      }
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted("sum");
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::Text("%.5f", e.dot);
      ImGui::EndTable();
    }
  }
  ImGui::EndChild();
}

}  // namespace ui

Cell cell_at(const App& app, float x, float y) {
  for (const HeatmapRect& h : app.layout) {
    if (x >= h.x0 && x < h.x1 && y >= h.y0 && y < h.y1)
      return {true, h.slot, static_cast<int>((y - h.origin_y) / h.cell),
              static_cast<int>((x - h.origin_x) / h.cell)};
  }
  return {};
}

}  // namespace attnviz::viz
