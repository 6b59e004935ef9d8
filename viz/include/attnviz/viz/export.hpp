// Exports: the result as JSON (the CLI's format), a stage as CSV per head, heatmaps as PNG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/viz/colorize.hpp"
#include "attnviz/viz/stages.hpp"

namespace attnviz::viz {

// Writes an RGBA image (rows of `width` packed texels, top row first) as PNG.
Status write_png(const std::string& path, int width, int height, const std::vector<std::uint32_t>& rgba);

// A matrix as CSV: a header of column labels, then one line per row starting with its token.
std::string to_csv(const MatrixDesc& m, const std::vector<std::string>& tokens);

// Files written by an export, for the status line.
struct Written {
  std::vector<std::string> paths;
};

// `<dir>/<name>` holding `text` (the folder made when missing).
Status export_text(const std::string& dir, const std::string& name, const std::string& text, Written& out);

// `<dir>/<prefix>.json`.
Status export_json(const std::string& dir, const std::string& prefix, const Result& r, const Params& p,
                   Written& out);
// `<dir>/<prefix>_<stage>_head<h>.csv` for every head of the stage (one file for shared stages).
Status export_csv(const std::string& dir, const std::string& prefix, const Result& r, StageId s,
                  Written& out);
// `<dir>/<prefix>_<stage>_head<h>.png`: each head's heatmap, each cell `cell_px` square pixels.
Status export_png(const std::string& dir, const std::string& prefix, const Result& r, StageId s,
                  const ColorOptions& o, int cell_px, Written& out);

// The largest cell export_png draws, in pixels.
constexpr int kMaxCellPx = 64;

// A cell size that makes a (rows x cols) image about 512 pixels on its longer side (1 to kMaxCellPx).
int default_cell_px(int rows, int cols);

}  // namespace attnviz::viz
