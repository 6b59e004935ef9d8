// The window both hosts draw the UI in: a GLFW window with Dear ImGui's GLFW + OpenGL3 backends, on an
// OpenGL 3.3 core context in the desktop app and on WebGL2 (Emscripten's GLFW) in the page. Hidden windows
// render the same pixels (under Xvfb in CI) for screenshots and tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnviz/status.hpp"
#include "attnviz/viz/app.hpp"
#include "attnviz/viz/gl_textures.hpp"

struct GLFWwindow;

namespace attnviz {

struct WindowOptions {
  int width = 1280, height = 800;
  bool visible = true;
  std::string title = "attnviz";
};

class Window {
 public:
  Window() = default;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window();

  Status open(const WindowOptions& o);
  bool should_close() const;

  // One frame of the app: polls events, draws the UI, serves a pending view capture, presents. Returns the
  // frame's CPU time in milliseconds (glFinish included when `finish` is set, for benchmarks). With `grab`,
  // the rendered framebuffer is read back into it (RGBA texels, top row first) before presenting.
  struct Image {
    int width = 0, height = 0;
    std::vector<std::uint32_t> rgba;
  };
  double frame(viz::App& app, bool finish = false, Image* grab = nullptr);

  viz::TextureHost& textures() { return *textures_; }
  GLFWwindow* handle() const { return window_; }

  // Paths dropped onto the window (native GLFW; the page handles drops in its script), handed to
  // viz::drop_files at the next frame.
  void dropped(std::vector<std::string> paths) { drops_ = std::move(paths); }

  // Scripted pointer for benchmarks: frames see the mouse at (x, y) instead of the system cursor.
  void set_pointer(float x, float y) {
    pointer_ = true;
    pointer_x_ = x;
    pointer_y_ = y;
  }

 private:
  GLFWwindow* window_ = nullptr;
  bool imgui_ = false;
  std::unique_ptr<viz::GlTextures> textures_;
  bool pointer_ = false;
  float pointer_x_ = 0, pointer_y_ = 0;
  std::vector<std::string> drops_;
};

// Loads DejaVu Sans (fonts-dejavu-core) for non-ASCII tokens when it is installed; ImGui's built-in font
// otherwise.
void load_fonts();

}  // namespace attnviz
