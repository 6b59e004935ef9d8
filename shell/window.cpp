#include "window.hpp"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "attnviz/viz/export.hpp"

namespace attnviz {
namespace {

// GLFW reports errors through this callback. Until a window is open they say why it could not be, and
// Window::open puts the last one into its own one-line message; after that they are printed as they come.
std::string last_error;
bool window_opened = false;

void glfw_error(int code, const char* what) {
  if (window_opened)
    std::fprintf(stderr, "attnviz: GLFW error %d: %s\n", code, what);
  else
    last_error = what ? what : "";
  while (!last_error.empty() && last_error.back() == ' ') last_error.pop_back();  // X11's has one
}

std::string because() {
  return last_error.empty() ? "" : " (" + last_error + ")";
}

#ifdef __EMSCRIPTEN__
// Emscripten 3.1.6's GLFW hands a wheel event's deltaX/deltaY on as they are: pixels, and positive downwards,
// where GLFW's offsets are steps, positive upwards. Scaled as its own wheel position is (100 pixels a step),
// so that the wheel scrolls the page's panels the way it scrolls the desktop app's.
void web_scroll(GLFWwindow* w, double dx, double dy) {
  ImGui_ImplGlfw_ScrollCallback(w, -dx / 100.0, -dy / 100.0);
}
#else
// A drop onto the window: its paths wait in the Window until the next frame hands them to the app.
void glfw_drop(GLFWwindow* w, int count, const char** paths) {
  auto* self = static_cast<Window*>(glfwGetWindowUserPointer(w));
  if (self && count > 0 && paths) self->dropped(std::vector<std::string>(paths, paths + count));
}
#endif

}  // namespace

void load_fonts() {
  ImGuiIO& io = ImGui::GetIO();
#ifdef __EMSCRIPTEN__
  const char* path = "/fonts/DejaVuSans.ttf";  // embedded in the page's module at link time
#else
  const char* path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
#endif
  if (std::filesystem::exists(path)) {
    // Latin, Greek, Cyrillic and general punctuation: the scripts DejaVu Sans covers well.
    static const ImWchar ranges[] = {0x0020, 0x024F, 0x0370, 0x03FF, 0x0400, 0x052F,
                                     0x2000, 0x206F, 0x2190, 0x21FF, 0};
    if (io.Fonts->AddFontFromFileTTF(path, 15.0f, nullptr, ranges)) return;
  }
  io.Fonts->AddFontDefault();
}

Window::~Window() {
  textures_.reset();  // textures go while the context is still current
  if (imgui_) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
  if (window_) glfwDestroyWindow(window_);
}

Status Window::open(const WindowOptions& o) {
  // GLFW stays initialized for the whole process: reconnecting to the X server for every window races with
  // Xvfb's reset after its last client leaves.
  static const bool ready = [] {
    glfwSetErrorCallback(glfw_error);
    if (!glfwInit()) return false;
    std::atexit(glfwTerminate);
    return true;
  }();
  if (!ready)
    return Status::fail("cannot open a window: no display" + because() +
                        "; for headless use run under xvfb-run -a");
#ifdef __EMSCRIPTEN__
  // The page's canvas, with a WebGL2 context (Emscripten's GLFW; the link flags ask for WebGL2 only).
  const char* glsl = "#version 300 es";
#else
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
#ifdef __APPLE__
  // macOS gives a core profile (3.2 and above) only to a forward-compatible context. Untested here.
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
#endif
  glfwWindowHint(GLFW_VISIBLE, o.visible ? GLFW_TRUE : GLFW_FALSE);
  const char* glsl = "#version 330";
#endif
  window_ = glfwCreateWindow(o.width, o.height, o.title.c_str(), nullptr, nullptr);
  if (!window_) {
#ifdef __EMSCRIPTEN__
    return Status::fail("cannot create a WebGL2 context on the page's canvas" + because());
#else
    return Status::fail("cannot create an OpenGL 3.3 core window" + because());
#endif
  }
  window_opened = true;
  glfwMakeContextCurrent(window_);
#ifndef __EMSCRIPTEN__  // the browser paces frames itself (requestAnimationFrame), and the page's script
                        // takes drops (Emscripten's GLFW would copy every dropped file into memory first)
  glfwSwapInterval(o.visible ? 1 : 0);
  glfwSetWindowUserPointer(window_, this);
  glfwSetDropCallback(window_, glfw_drop);
#endif
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed; nothing to remember between runs
  ImGui::StyleColorsDark();
  load_fonts();
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
#ifdef __EMSCRIPTEN__
  glfwSetScrollCallback(window_, web_scroll);
#endif
  ImGui_ImplOpenGL3_Init(glsl);
  imgui_ = true;
  textures_ = std::make_unique<viz::GlTextures>();
  return Status::ok();
}

bool Window::should_close() const {
  return glfwWindowShouldClose(window_);
}

double Window::frame(viz::App& app, bool finish, Image* grab) {
  const auto t0 = std::chrono::steady_clock::now();
  glfwPollEvents();
  if (!drops_.empty()) viz::drop_files(app, std::exchange(drops_, {}));
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (pointer_) ImGui::GetIO().MousePos = ImVec2(pointer_x_, pointer_y_);
  ImGui::NewFrame();
  viz::draw_frame(app, *textures_);
  ImGui::Render();
  int w = 0, h = 0;
  glfwGetFramebufferSize(window_, &w, &h);
  glViewport(0, 0, w, h);
  glClearColor(0.08f, 0.08f, 0.1f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (app.capture.pending) {
    app.capture.pending = false;
    std::vector<std::uint32_t> px;
    const ImVec2 scale = ImGui::GetIO().DisplayFramebufferScale;
    const int x = static_cast<int>(app.capture.x * scale.x), y = static_cast<int>(app.capture.y * scale.y);
    const int cw = std::min(w - x, static_cast<int>(app.capture.w * scale.x));
    const int ch = std::min(h - y, static_cast<int>(app.capture.h * scale.y));
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(app.capture.path).parent_path(), ec);
    Status st = cw > 0 && ch > 0 ? Status::ok() : Status::fail("nothing on screen to capture");
    if (st.is_ok()) {
      viz::read_pixels(x, y, cw, ch, h, px);
      st = viz::write_png(app.capture.path, cw, ch, px);
    }
    app.message = st.is_ok() ? "wrote " + quote(app.capture.path) : "export failed: " + st.error;
    if (st.is_ok()) app.written.push_back(app.capture.path);
  }
  if (grab) {
    grab->width = w;
    grab->height = h;
    viz::read_pixels(0, 0, w, h, h, grab->rgba);
  }
  if (finish) glFinish();
  glfwSwapBuffers(window_);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  app.frame_ms = ms;
  return ms;
}

}  // namespace attnviz
