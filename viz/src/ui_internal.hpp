// Pieces of the UI shared by its translation units (not part of the public API).
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "attnviz/viz/app.hpp"

namespace attnviz::viz::ui {

// One heatmap to draw: its matrix, texture slot and title.
struct Heatmap {
  MatrixDesc m;
  int slot = 0;
  std::string title;
  bool enlargeable = false;  // clicking the title shows this head alone
  bool diverging = false;    // a difference: centred diverging colours
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

// Recomputes A (and B in compare mode), reporting errors in place.
void recompute(App& app);
void sync_compare(App& app);

}  // namespace attnviz::viz::ui
