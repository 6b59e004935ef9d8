// Driving the UI headless: an ImGui context with a built font atlas and no window, textures to a stub that
// remembers the last upload. Frames are built and rendered to draw lists only.
#pragma once

#include <doctest/doctest.h>
#include <imgui.h>

#include <cstdint>
#include <string>

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
  // The Train panel's control `name` as the last frame laid it out (TrainView::controls), or null.
  static const TrainView::Control* train_control(const App& app, const std::string& name) {
    for (const TrainView::Control& c : app.train.controls)
      if (c.name == name) return &c;
    return nullptr;
  }
  // Scrolls the Train panel's controls column until the control is wholly in view, then clicks its centre.
  void click_train(App& app, const std::string& name) {
    for (int i = 0; i < 40; ++i) {
      frame(app);
      const TrainView::Control* c = train_control(app, name);
      REQUIRE_MESSAGE(c != nullptr, name);
      if (c->visible) {
        ImGui::GetIO().MousePos = ImVec2(0.5f * (c->x0 + c->x1), 0.5f * (c->y0 + c->y1));
        frame(app);
        click(app);
        return;
      }
      ImGui::GetIO().MousePos = ImVec2(c->x0 + 4.0f, 400.0f);
      ImGui::GetIO().MouseWheel = c->y0 > 400.0f ? -1.0f : 1.0f;
    }
    FAIL("cannot scroll " << name << " into view");
  }
  static const HeatmapRect* rect(const App& app, int slot) {
    for (const HeatmapRect& r : app.layout)
      if (r.slot == slot) return &r;
    return nullptr;
  }
  StubTextures textures;
};

}  // namespace attnviz::viz::test
