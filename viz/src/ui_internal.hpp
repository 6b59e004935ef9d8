// Pieces of the UI shared by its translation units (not part of the public API).
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "attnviz/viz/app.hpp"
#include "attnviz/viz/widgets.hpp"

namespace attnviz::viz::ui {

// One heatmap to draw: its matrix, texture slot and title.
struct Heatmap {
  MatrixDesc m;
  int slot = 0;
  std::string title;
  bool enlargeable = false;  // clicking the title shows this head alone
  bool diverging = false;    // a difference: centred diverging colours
  std::string note{};        // drawn instead of an empty matrix (why B cannot be compared)
};

}  // namespace attnviz::viz::ui

namespace attnviz::viz {
struct ViewCache {
  std::string key;
  std::vector<ui::Heatmap> maps;
};
}  // namespace attnviz::viz

namespace attnviz::viz::ui {

void draw_controls(App& app);
void draw_stepper(App& app);
void draw_status(const App& app);

// The heatmaps of the current stage in the given area, with the legend.
void draw_heatmaps(App& app, TextureHost& textures, ImVec2 size);
// The hovered or locked cell's arithmetic.
void draw_cell_info(const App& app, ImVec2 size);

// The result the heatmaps show (an empty one in the model grid), whether compare mode is on (never for a
// whole model), and what the view's matrices depend on.
const Result& view_result(const App& app);
bool compare_on(const App& app);
// Why compare B cannot be computed (the chapter-3 session's or the model's); empty when it can.
const std::string& compare_error(const App& app);
std::string view_generation(const App& app);

// A slot's texture when it was made from `key`, else null (nothing is computed).
void* cached_texture(const App& app, int slot, const std::string& key);
// A slot's texture, remade only when `key` (what its texels depend on) changed.
void* cached_texture(App& app, TextureHost& textures, int slot, const std::string& key, const MatrixDesc& m,
                     const ColorOptions& o, const Range& shared);
// Uploads `texels` (cols x rows, coloured already) as the slot's texture made from `key`.
void* store_texture(App& app, TextureHost& textures, int slot, const std::string& key, int cols, int rows,
                    const std::vector<std::uint32_t>& texels);

// The model view: the grid of layers by heads with the next-token panel, or the opened layer's header.
void draw_model_panel(App& app);
void draw_model_main(App& app, TextureHost& textures, ImVec2 size);
void draw_layer_bar(App& app);
void draw_tokens(App& app);
// The exports of a whole model: JSON per layer (the CLI's format), and the opened layer's PNGs and CSV.
void export_model(App& app, ExportKind kind);
// One frame of Generate: appends the next token while any are due.
void step_generation(App& app);

// The Train panel, its view in the main area, and one frame's slice of training.
void draw_train_panel(App& app);
void draw_train_main(App& app, TextureHost& textures, ImVec2 size);
void step_training(App& app);
// Records where the last item is on screen as the Train panel's control `name` (TrainView::controls); a
// width > 0 keeps only the item's first `width` pixels (a slider's frame without its label).
void note_train_control(App& app, const char* name, float width = 0.0f);

// The causal tools (ui_causal.cpp): the panel's section, the model session following the panel's choice
// (sync_causal, also on every frame with patching's slice: step_patching), the metric line over the grid,
// attribution cells and ablation marks in it, and the lens strip and patching maps under it. A click in the
// view changes the panel's choice only (toggle_ablation, choose_token): the session takes it at the start of
// the next frame, never while the view is drawn from its pass.
void draw_causal_panel(App& app);
void sync_causal(App& app);
void step_patching(App& app);
void draw_metric_line(App& app);
bool attribution_shown(const App& app);
double attribution_scale(const App& app);
// head < 0: the layer's MLP cell.
void draw_attribution_cell(App& app, int layer, int head, ImVec2 a, ImVec2 b);
bool is_ablated(const App& app, int layer, int head);
void toggle_ablation(App& app, int layer, int head);
void cross_out(ImVec2 a, ImVec2 b);
void choose_token(App& app, int id, bool versus);
std::string token_text(const App& app, int id);  // "' Mary' (#5335)"
float causal_views_height(const App& app);
void draw_lens_strip(App& app);
void draw_patching_maps(App& app);

// The opened layer's q/k steps (a rotary model's, for the queries and keys stages), and compare B's layer's;
// empty for GPT-2, chapter 3 and the grid.
LayerSteps shown_steps(const App& app);
LayerSteps compare_steps(const App& app);

// Brings a whole model's B up to date (a fork of A's model, or the other seed's).
void sync_model_compare(App& app);

// Recomputes A (and B in compare mode), reporting errors in place.
void recompute(App& app);
void sync_compare(App& app);

}  // namespace attnviz::viz::ui
