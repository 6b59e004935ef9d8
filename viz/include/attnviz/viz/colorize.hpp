// Value ranges, normalization and colouring of one matrix into RGBA texels.
#pragma once

#include <cstdint>
#include <vector>

#include "attnviz/viz/palette.hpp"
#include "attnviz/viz/stages.hpp"

namespace attnviz::viz {

enum class Norm {
  head,       // each head's own min..max
  row,        // each row's own min..max (what each query token attends to most)
  all_heads,  // one range shared by every head shown
  fixed,      // the user's [lo, hi]
};
const std::vector<Norm>& all_norms();
const char* to_string(Norm n);
bool parse_norm(const char* s, Norm& out);

struct Range {
  float lo = 0.0f, hi = 1.0f;
  bool valid() const { return lo <= hi; }
};

// min..max over the cells that carry a value (finite, not masked). {+inf, -inf} (invalid) when none does.
Range finite_range(const MatrixDesc& m);
Range row_range(const MatrixDesc& m, int row);
Range merge(Range a, Range b);

struct ColorOptions {
  Palette palette = Palette::blues;
  Norm norm = Norm::head;
  Range fixed{0.0f, 1.0f};
  bool centered = false;  // map 0 to the middle (set for the diverging palette)
};

// Where value x lands in [0, 1] for range r (0.5 for an empty range; NaN for non-finite x).
float normalize(float x, Range r, bool centered);

// The range colorize() uses for row `row` (ignored unless norm is row) given the shared range of every head.
Range effective_range(const MatrixDesc& m, const ColorOptions& o, Range shared, int row);

// rows x cols texels, row-major. Masked cells get kMaskedColor, dropped ones kDroppedColor.
void colorize(const MatrixDesc& m, const ColorOptions& o, Range shared, std::vector<std::uint32_t>& out);

// How many rows (or columns) to step between labels so that labels `label_px` tall fit cells `cell_px` tall:
// 1, 2, 5, 10, 20, 50, ...
int label_step(float cell_px, float label_px);

}  // namespace attnviz::viz
