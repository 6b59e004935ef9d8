#include "attnviz/viz/gl_textures.hpp"

#include <algorithm>
#include <cstdint>

#ifdef __EMSCRIPTEN__
#include <GLES3/gl3.h>
#else
#include <GL/gl.h>  // the GL 1.1 texture entry points, exported by libGL itself
#endif

namespace attnviz::viz {

GlTextures::~GlTextures() {
  for (const Entry& e : entries_) glDeleteTextures(1, &e.id);
}

void* GlTextures::upload(int slot, int width, int height, const std::uint32_t* rgba) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [slot](const Entry& e) { return e.slot == slot; });
  if (it == entries_.end()) {
    Entry e{slot, 0, 0, 0};
    glGenTextures(1, &e.id);
    glBindTexture(GL_TEXTURE_2D, e.id);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    entries_.push_back(e);
    it = entries_.end() - 1;
  }
  glBindTexture(GL_TEXTURE_2D, it->id);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  if (it->width == width && it->height == height) {
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
  } else {
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
    it->width = width;
    it->height = height;
  }
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(it->id));
}

void read_pixels(int x, int y, int width, int height, int framebuffer_height,
                 std::vector<std::uint32_t>& out) {
  out.assign(static_cast<std::size_t>(width) * static_cast<std::size_t>(height), 0);
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  glReadPixels(x, framebuffer_height - y - height, width, height, GL_RGBA, GL_UNSIGNED_BYTE, out.data());
  // GL's rows run bottom-up.
  for (int r = 0; r < height / 2; ++r)
    std::swap_ranges(out.begin() + static_cast<std::ptrdiff_t>(r) * width,
                     out.begin() + static_cast<std::ptrdiff_t>(r + 1) * width,
                     out.begin() + static_cast<std::ptrdiff_t>(height - 1 - r) * width);
}

}  // namespace attnviz::viz
