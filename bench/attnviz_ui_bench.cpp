// attnviz-ui-bench: the UI's two speed targets, measured in the real desktop app (a hidden GLFW window; run
// it under xvfb-run for Mesa llvmpipe, as CI would).
//
//   xvfb-run -a -s '-screen 0 1280x800x24' attnviz-ui-bench [--quick]
//
// 1. Keystroke to updated heatmap: a character goes into ImGui's input queue for the focused sentence box,
//    then one frame runs: the edit, the engine recompute, colouring, texture upload, drawing, glFinish. Book
//    and gpt2-small presets (gpt2-small in its default train mode with dropout 0.1) at T = 8, 16, 32 tokens.
// 2. Frame time of the UI alone (no recompute): gpt2-small, 12 heads x 256 tokens (the target) and x 1024
// (the
//    context length), the mouse over a cell so the row/column highlight is drawn too; glFinish included.
// 3. The model view of the book's seeded gpt2-small (eval): keystroke to every head of every layer redrawn
//    (the incremental model pass, head scores, 144 thumbnails coloured and uploaded, glFinish) at T = 16, 32
//    and 64, and the frame with the 144 thumbnails alone (textures reused) at T = 256 and 1024.
#include <GL/gl.h>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "window.hpp"

using namespace attnviz;

namespace {

struct Stats {
  double median = 0, p95 = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stats s;
  s.median = v[v.size() / 2];
  s.p95 = v[std::min(v.size() - 1, v.size() * 95 / 100)];
  s.max = v.back();
  return s;
}

std::string words(int n) {
  const char* pool[] = {"your", "journey", "starts", "with",  "one",
                        "step", "and",     "every",  "token", "attends"};
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(i ? " " : "") + pool[(i * 3 + i / 10) % 10];
  return s;
}

// Keystroke k of a run: a letter, or (every other one) a backspace, so the sentence keeps its length. Returns
// the time of the frame that took it.
double keystroke(Window& w, viz::App& app, int k) {
  if (k % 2 == 0) {
    ImGui::GetIO().AddInputCharacter(static_cast<unsigned>("abcdefghij"[k % 10]));
    return w.frame(app, true);
  }
  ImGuiIO& io = ImGui::GetIO();
  io.KeysDown[io.KeyMap[ImGuiKey_Backspace]] = true;
  const double ms = w.frame(app, true);
  io.KeysDown[io.KeyMap[ImGuiKey_Backspace]] = false;
  w.frame(app, true);
  return ms;
}

// Each measurement gets its own window and ImGui context, as a fresh app would.
bool open_window(Window& w) {
  WindowOptions o;
  o.visible = false;
  if (Status st = w.open(o); !st.is_ok()) {
    std::fprintf(stderr, "attnviz-ui-bench: %s\n", st.error.c_str());
    return false;
  }
  return true;
}

void keystrokes(const char* preset, int tokens, int count) {
  Window w;
  if (!open_window(w)) return;
  viz::App app;
  apply(*find_preset(preset), app.session.config);
  app.session.text = words(tokens);
  if (!viz::start(app).is_ok()) {
    std::printf("%-12s T=%-4d  failed: %s\n", preset, tokens, app.session.error().c_str());
    return;
  }
  for (int i = 0; i < 3; ++i) w.frame(app, true);  // focus the sentence box, upload the first textures
  std::vector<double> ms, engine;
  for (int k = 0; k < count; ++k) {
    // Alternate a letter and a backspace so the sentence stays T tokens long.
    const int gen = app.session.generation();
    ms.push_back(keystroke(w, app, k));
    if (app.session.generation() == gen) {
      std::printf("%-12s T=%-4d  the keystroke did not reach the sentence box\n", preset, tokens);
      return;
    }
    engine.push_back(app.session.last_ms());
  }
  const Stats s = stats(ms), e = stats(engine);
  std::printf(
      "%-12s T=%-4d  keystroke->heatmap median %6.2f ms  p95 %6.2f ms  max %6.2f ms   (recompute median %.2f "
      "ms)  %s\n",
      preset, app.session.result().tokens_count(), s.median, s.p95, s.max, e.median,
      s.p95 < 16.0 ? "< 16 ms: met" : ">= 16 ms: MISSED");
}

void idle_frames(int tokens, int count) {
  Window w;
  if (!open_window(w)) return;
  std::printf("renderer: %s\n", reinterpret_cast<const char*>(glGetString(GL_RENDERER)));
  viz::App app;
  apply(*find_preset("gpt2-small"), app.session.config);
  app.session.config.train = false;  // the view, not dropout, is what is timed
  app.session.text = words(tokens);
  if (!viz::start(app).is_ok()) return;
  for (int i = 0; i < 3; ++i) w.frame(app, true);
  const viz::HeatmapRect r = app.layout.at(5);
  w.set_pointer(r.cx(tokens / 3), r.cy(tokens * 3 / 4));
  std::vector<double> ms;
  const int uploads = app.uploads;
  for (int i = 0; i < count; ++i) ms.push_back(w.frame(app, true));
  if (!app.view.hover.active) std::printf("(the pointer did not land on a heatmap)\n");
  const Stats s = stats(ms);
  std::printf(
      "gpt2-small   12 heads x %d tokens, UI only: frame median %6.2f ms  p95 %6.2f ms  max %6.2f ms  "
      "(texture uploads during the run: %d)  %s\n",
      app.session.result().tokens_count(), s.median, s.p95, s.max, app.uploads - uploads,
      s.median < 8.0 ? "< 8 ms: met" : ">= 8 ms: MISSED");
}

// The seeded gpt2-small in the model view, the sentence `tokens` words long.
bool open_model_view(viz::App& app, int tokens) {
  viz::ModelChoice c;
  c.kind = viz::ModelKind::seeded;
  c.size = "gpt2-small";
  app.session.text = words(tokens);
  if (Status st = viz::open_model(app, c); !st.is_ok()) {
    std::printf("model view: %s\n", st.error.c_str());
    return false;
  }
  return true;
}

void model_keystrokes(int tokens, int count) {
  Window w;
  viz::App app;
  if (!open_window(w) || !open_model_view(app, tokens)) return;
  w.set_pointer(-100.0f, -100.0f);  // off the grid: no preview while typing
  for (int i = 0; i < 3; ++i) w.frame(app, true);
  std::vector<double> ms, engine;
  for (int k = 0; k < count; ++k) {
    const int gen = app.model.generation();
    const int uploads = app.uploads;
    ms.push_back(keystroke(w, app, k));
    if (app.model.generation() == gen || app.uploads - uploads < 144) {
      std::printf("model view   T=%-4d  the keystroke did not redraw every head\n", tokens);
      return;
    }
    engine.push_back(app.model.last_ms());
  }
  const Stats s = stats(ms), e = stats(engine);
  std::printf(
      "model view   T=%-4zu  keystroke->144 heads redrawn median %6.2f ms  p95 %6.2f ms  max %6.2f ms   "
      "(model "
      "pass + head scores median %.2f ms)  %s\n",
      app.model.ids().size(), s.median, s.p95, s.max, e.median,
      s.median <= 50.0 ? "<= 50 ms: met" : "> 50 ms: MISSED");
}

void model_frames(int tokens, int count) {
  Window w;
  viz::App app;
  if (!open_window(w) || !open_model_view(app, tokens)) return;
  for (int i = 0; i < 3; ++i) w.frame(app, true);
  const viz::ModelView::Thumb t = app.model_view.thumbs.at(40);
  w.set_pointer(t.x0 + 2.0f, t.y0 + 2.0f);  // over a thumbnail: its preview is drawn too
  for (int i = 0; i < 3; ++i) w.frame(app, true);
  std::vector<double> ms;
  const int uploads = app.uploads;
  for (int i = 0; i < count; ++i) ms.push_back(w.frame(app, true));
  const Stats s = stats(ms);
  std::printf(
      "model view   %zu thumbnails x %zu tokens, UI only: frame median %6.2f ms  p95 %6.2f ms  max %6.2f ms  "
      "(texture uploads during the run: %d)  %s\n",
      app.model_view.thumbs.size(), app.model.ids().size(), s.median, s.p95, s.max, app.uploads - uploads,
      s.median <= 16.0 ? "<= 16 ms: met" : "> 16 ms: MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int n = quick ? 10 : 60;
  for (int t : {256, 1024}) idle_frames(t, quick ? 20 : 200);
  for (const char* preset : {"book", "gpt2-small"})
    for (int t : {8, 16, 32}) keystrokes(preset, t, n);
  for (int t : {16, 32, 64}) model_keystrokes(t, n);
  for (int t : {256, 1024}) model_frames(t, quick ? 20 : 100);
  return 0;
}
