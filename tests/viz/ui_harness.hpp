// Driving the UI headless: an ImGui context with a built font atlas and no window, textures to a stub that
// remembers the last upload. Frames are built and rendered to draw lists only.
#pragma once

#include <doctest/doctest.h>
#include <imgui.h>

#include <cstdint>

#include "attnviz/viz/app.hpp"

namespace attnviz::viz::test {

class StubTextures final : public TextureHost {
 public:
  void* upload(int slot, int width, int height, const std::uint32_t* rgba) override {
    last_width = width;
    last_height = height;
    last_first = rgba[0];
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot + 1));
  }
  int last_width = 0, last_height = 0;
  std::uint32_t last_first = 0;
};

// An ImGui context with a built font atlas, the size of the desktop window.
struct Ui {
  Ui() {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1280, 800);
    io.DeltaTime = 1.0f / 60.0f;
    unsigned char* px = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
  }
  ~Ui() { ImGui::DestroyContext(); }
  void frame(App& app) {
    ImGui::NewFrame();
    draw_frame(app, textures);
    ImGui::Render();
  }
  // Moves the mouse to a cell's centre and renders twice (hover is seen on the frame after the move).
  void hover(App& app, int slot, int row, int col) {
    const HeatmapRect* r = rect(app, slot);
    REQUIRE(r != nullptr);
    ImGui::GetIO().MousePos = ImVec2(r->cx(col), r->cy(row));
    frame(app);
    frame(app);
  }
  void click(App& app) {
    ImGui::GetIO().MouseDown[0] = true;
    frame(app);
    ImGui::GetIO().MouseDown[0] = false;
    frame(app);
  }
  static const HeatmapRect* rect(const App& app, int slot) {
    for (const HeatmapRect& r : app.layout)
      if (r.slot == slot) return &r;
    return nullptr;
  }
  StubTextures textures;
};

}  // namespace attnviz::viz::test
