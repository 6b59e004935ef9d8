#include "attnviz/viz/colorize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attnviz/enum_names.hpp"

namespace attnviz::viz {

namespace {

constexpr EnumName<Norm> kNormNames[] = {
    {Norm::head, "head"}, {Norm::row, "row"}, {Norm::all_heads, "all-heads"}, {Norm::fixed, "fixed"}};

}  // namespace

const std::vector<Norm>& all_norms() {
  static const std::vector<Norm> all = {Norm::head, Norm::row, Norm::all_heads, Norm::fixed};
  return all;
}

const char* to_string(Norm n) {
  return name_in(kNormNames, n);
}

bool parse_norm(const char* s, Norm& out) {
  const std::optional<Norm> n = value_in(kNormNames, s);
  if (n) out = *n;
  return n.has_value();
}

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMax = std::numeric_limits<float>::max();  // |x| <= kMax: x is finite (NaN fails it too)

void widen(Range& r, float x) {
  if (!std::isfinite(x)) return;
  r.lo = std::min(r.lo, x);
  r.hi = std::max(r.hi, x);
}
}  // namespace

Range row_range(const MatrixDesc& m, int row) {
  Range r{kInf, -kInf};
  if (m.keep) {
    for (int j = 0; j < m.cols; ++j)
      if (!m.masked(row, j) && !m.dropped(row, j)) widen(r, m.at(row, j));
    return r;
  }
  // no dropout: the unmasked run only, each cell as widen takes it (the same comparisons in the same order)
  const MatrixDesc::Run run = m.unmasked(row);
  const float* x = m.data + static_cast<std::ptrdiff_t>(row) * m.row_stride;
  for (int j = run.from; j < run.to; ++j) {
    const float v = x[j] * m.multiplier;
    if (std::fabs(v) <= kMax) {
      r.lo = v < r.lo ? v : r.lo;
      r.hi = r.hi < v ? v : r.hi;
    }
  }
  return r;
}

Range finite_range(const MatrixDesc& m) {
  Range r{kInf, -kInf};
  for (int i = 0; i < m.rows; ++i) r = merge(r, row_range(m, i));
  return r;
}

Range merge(Range a, Range b) {
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

float normalize(float x, Range r, bool centered) {
  if (!std::isfinite(x) || !r.valid()) return std::numeric_limits<float>::quiet_NaN();
  if (centered) {
    const float m = std::max(std::fabs(r.lo), std::fabs(r.hi));
    return m > 0.0f ? 0.5f + 0.5f * x / m : 0.5f;
  }
  const float span = r.hi - r.lo;
  return span > 0.0f ? (x - r.lo) / span : 0.5f;
}

Range effective_range(const MatrixDesc& m, const ColorOptions& o, Range shared, int row) {
  switch (o.norm) {
    case Norm::row:
      return row_range(m, row);
    case Norm::all_heads:
      return shared;
    case Norm::fixed:
      return o.fixed;
    case Norm::head:
      break;
  }
  return finite_range(m);
}

void colorize(const MatrixDesc& m, const ColorOptions& o, Range shared, std::vector<std::uint32_t>& out) {
  out.resize(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols));
  const Range head = o.norm == Norm::head ? finite_range(m) : Range{};
  // A row's positions in the palette first (NaN: the masked colour, which color_at gives NaN), then its
  // colours in one call. The model view colours 144 thumbnails of up to 128 x 128 a pass: a call a texel
  // cost more than the colour, and so did asking each cell whether it was masked and how to normalize (56 ms
  // at T = 128 in the page), so each row's unmasked run is normalized in one loop with no branch.
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> t(static_cast<std::size_t>(m.cols));
  for (int i = 0; i < m.rows; ++i) {
    const Range r = o.norm == Norm::head ? head : effective_range(m, o, shared, i);
    std::uint32_t* row = out.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(m.cols);
    const auto [from, to] = m.unmasked(i);
    std::fill(t.begin(), t.begin() + from, kNaN);
    std::fill(t.begin() + to, t.end(), kNaN);
    const float* x = m.data + static_cast<std::ptrdiff_t>(i) * m.row_stride;
    float* ti = t.data();
    const float mult = m.multiplier;
    // normalize's cases, decided once a row; -inf that is not the causal mask (e.g. a difference of masks)
    // still reads as "no value" (NaN), as normalize makes it
    const float centre = r.valid() ? std::max(std::fabs(r.lo), std::fabs(r.hi)) : 0.0f, span = r.hi - r.lo;
    if (!r.valid()) {
      std::fill(ti + from, ti + to, kNaN);
    } else if (o.centered ? !(centre > 0.0f) : !(span > 0.0f)) {
      for (int j = from; j < to; ++j) ti[j] = std::fabs(x[j] * mult) <= kMax ? 0.5f : kNaN;
    } else if (o.centered) {
      for (int j = from; j < to; ++j) {
        const float v = x[j] * mult;
        ti[j] = std::fabs(v) <= kMax ? 0.5f + 0.5f * v / centre : kNaN;
      }
    } else {
      const float lo = r.lo;
      for (int j = from; j < to; ++j) {
        const float v = x[j] * mult;
        ti[j] = std::fabs(v) <= kMax ? (v - lo) / span : kNaN;
      }
    }
    color_row(o.palette, t.data(), m.cols, row);
    if (m.keep)
      for (int j = 0; j < m.cols; ++j)
        if (m.dropped(i, j)) row[j] = kDroppedColor;
  }
}

int label_step(float cell_px, float label_px) {
  if (!(cell_px > 0.0f)) return std::numeric_limits<int>::max();
  const float need = label_px / cell_px;
  for (int scale = 1; scale < (1 << 28); scale *= 10)
    for (int k : {1, 2, 5})
      if (static_cast<float>(k * scale) >= need) return k * scale;
  return std::numeric_limits<int>::max();
}

}  // namespace attnviz::viz
