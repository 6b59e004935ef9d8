#include "attnviz/viz/palette.hpp"

#include <array>
#include <cmath>

#include "attnviz/enum_names.hpp"

namespace attnviz::viz {
namespace {

// 17 evenly spaced samples of each map, interpolated linearly in sRGB (indistinguishable from the 256-entry
// tables at heatmap sizes). viridis and cividis are sampled from matplotlib's definitions.
using Anchors = std::array<std::uint32_t, 17>;  // 0xRRGGBB

constexpr Anchors kViridis = {0x440154, 0x48186A, 0x472D7B, 0x424086, 0x3B528B, 0x33638D,
                              0x2C728E, 0x26828E, 0x21918C, 0x1FA088, 0x28AE80, 0x3FBC73,
                              0x5EC962, 0x84D44B, 0xADDC30, 0xD8E219, 0xFDE725};
constexpr Anchors kCividis = {0x00224E, 0x002E6A, 0x1A386F, 0x32436D, 0x434E6C, 0x535A6D,
                              0x61656F, 0x6F7073, 0x7D7C78, 0x8C8878, 0x9B9476, 0xABA072,
                              0xBCAE6C, 0xCDBB63, 0xDEC958, 0xF0D846, 0xFEE838};
// White through light blue to navy.
constexpr Anchors kBlues = {0xF7FBFF, 0xEBF3FB, 0xDEEBF7, 0xD2E3F3, 0xC6DBEF, 0xB2D2E8,
                            0x9ECAE1, 0x84BCDB, 0x6BAED6, 0x57A0CE, 0x4292C6, 0x3282BE,
                            0x2171B5, 0x1461A8, 0x08519C, 0x084084, 0x08306B};
// Blue, white at the centre, red.
constexpr Anchors kDiverging = {0x053061, 0x134C87, 0x2166AC, 0x3A87BD, 0x4393C3, 0x78B4D5,
                                0x92C5DE, 0xC5DFEC, 0xF7F7F7, 0xFADBC9, 0xFDDBC7, 0xF4A582,
                                0xD6604D, 0xC7403B, 0xB2182B, 0x8A0B25, 0x67001F};

unsigned channel(std::uint32_t rgb, int shift) {
  return (rgb >> shift) & 0xFFu;
}

// Each of a map's 16 segments as floats: every channel's low end and its rise to the next anchor (small whole
// numbers, exact in float), so that a texel's blend starts from them rather than from the anchors' bytes.
struct Segments {
  float lo[16][3], rise[16][3];
};
Segments segments_of(const Anchors& a) {
  Segments s{};
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < 3; ++c) {
      const int shift = 16 - 8 * c;
      s.lo[i][c] = static_cast<float>(channel(a[static_cast<std::size_t>(i)], shift));
      s.rise[i][c] = static_cast<float>(channel(a[static_cast<std::size_t>(i) + 1], shift)) - s.lo[i][c];
    }
  return s;
}

const Segments& segments(Palette p) {
  static const Segments kBluesSegments = segments_of(kBlues), kViridisSegments = segments_of(kViridis),
                        kCividisSegments = segments_of(kCividis),
                        kDivergingSegments = segments_of(kDiverging);
  switch (p) {
    case Palette::viridis:
      return kViridisSegments;
    case Palette::cividis:
      return kCividisSegments;
    case Palette::diverging:
      return kDivergingSegments;
    case Palette::blues:
      break;
  }
  return kBluesSegments;
}

std::uint32_t color_in(const Segments& s, float t) {
  if (std::isnan(t)) return kMaskedColor;
  const float x = std::fmin(std::fmax(t, 0.0f), 1.0f) * 16.0f;
  const int i = std::min(static_cast<int>(x), 15);
  const float f = x - static_cast<float>(i);
  const auto mix = [&](int c) {
    // lround without its call (a libm function in WebAssembly; three a texel were a fifth of colouring the
    // model view's 144 thumbnails): v lies between two channels, in [0, 255], where floor(v + 0.5) in double
    // is exact and equals lround(v) for every float (checked over all of them)
    return static_cast<unsigned>(static_cast<double>(s.lo[i][c] + s.rise[i][c] * f) + 0.5);
  };
  return rgba(mix(0), mix(1), mix(2));
}

}  // namespace

namespace {

constexpr EnumName<Palette> kPaletteNames[] = {{Palette::blues, "blues"},
                                               {Palette::viridis, "viridis"},
                                               {Palette::cividis, "cividis"},
                                               {Palette::diverging, "diverging"}};

}  // namespace

const std::vector<Palette>& all_palettes() {
  static const std::vector<Palette> all = {Palette::blues, Palette::viridis, Palette::cividis,
                                           Palette::diverging};
  return all;
}

const char* to_string(Palette p) {
  return name_in(kPaletteNames, p);
}

std::optional<Palette> parse_palette(std::string_view s) {
  return value_in(kPaletteNames, s);
}

std::uint32_t color_at(Palette p, float t) {
  return color_in(segments(p), t);
}

std::uint32_t signed_color(double value, double scale) {
  if (std::isnan(value)) return kMaskedColor;
  const double t = scale > 0.0 ? 0.5 + 0.5 * value / scale : 0.5;
  return color_at(Palette::diverging, static_cast<float>(t));
}

void color_row(Palette p, const float* t, int n, std::uint32_t* out) {
  const Segments& s = segments(p);
  for (int j = 0; j < n; ++j) out[j] = color_in(s, t[j]);
}

}  // namespace attnviz::viz
