// Colour palettes for the heatmaps, as packed RGBA (ImGui's IM_COL32 byte order: R in the low byte).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace attnviz::viz {

enum class Palette {
  blues,      // white to deep blue: the default, reads well for weights in [0, 1]
  viridis,    // perceptually uniform, colour-blind safe (matplotlib's)
  cividis,    // perceptually uniform, designed for red-green colour vision deficiency
  diverging,  // blue - white - red around zero: differences and signed scores
};

const std::vector<Palette>& all_palettes();
const char* to_string(Palette p);
std::optional<Palette> parse_palette(std::string_view s);

constexpr std::uint32_t rgba(unsigned r, unsigned g, unsigned b, unsigned a = 255) {
  return (a << 24) | (b << 16) | (g << 8) | r;
}

// The colour for t in [0, 1] (clamped; NaN gives the masked colour).
std::uint32_t color_at(Palette p, float t);
// out[j] = color_at(p, t[j]) for j < n: one call a row of texels rather than a texel.
void color_row(Palette p, const float* t, int n, std::uint32_t* out);

// A signed value on the diverging palette, symmetric around 0 and scaled to `scale` (> 0): -scale is deep
// blue, 0 white, +scale deep red (clamped beyond); NaN, a value not computed yet, gives the masked colour.
std::uint32_t signed_color(double value, double scale);

// Cells that carry no value: masked by the causal mask (-inf before softmax) and zeroed by dropout.
constexpr std::uint32_t kMaskedColor = rgba(70, 70, 78);
constexpr std::uint32_t kDroppedColor = rgba(150, 30, 110);

}  // namespace attnviz::viz
