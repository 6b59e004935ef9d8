// TextureHost over OpenGL 3.3 core / WebGL2 (GLES3): one RGBA8 texture per heatmap slot, nearest filtering so
// cells stay crisp when zoomed. Needs a current GL context.
#pragma once

#include <vector>

#include "attnviz/viz/app.hpp"

namespace attnviz::viz {

class GlTextures final : public TextureHost {
 public:
  GlTextures() = default;
  GlTextures(const GlTextures&) = delete;
  GlTextures& operator=(const GlTextures&) = delete;
  ~GlTextures() override;

  void* upload(int slot, int width, int height, const std::uint32_t* rgba) override;

 private:
  struct Entry {
    int slot;
    unsigned id;
    int width, height;
  };
  std::vector<Entry> entries_;
};

// Reads the framebuffer's rectangle (x, y from the top-left, in pixels) as RGBA texels, top row first.
void read_pixels(int x, int y, int width, int height, int framebuffer_height,
                 std::vector<std::uint32_t>& out);

}  // namespace attnviz::viz
