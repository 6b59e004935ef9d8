// The browser host's main loop: the desktop app's UI on the page's canvas (Emscripten GLFW + WebGL2), driven
// by the browser's animation frames, and the page's start. The page script (web/page/) owns the URL, the
// downloads and the `attnviz` JS API; it reaches this module through the exports in api.cpp, and this
// module reaches it through its hooks (hooks.hpp).
#include <emscripten/emscripten.h>
#include <imgui.h>
#include <imgui_internal.h>  // ClearActiveID: a text box being edited ignores outside changes otherwise

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "budget.hpp"
#include "guard.hpp"
#include "hooks.hpp"
#include "page.hpp"
#include "threads.hpp"
#include "window.hpp"

namespace attnviz::web {

Page* page = nullptr;

namespace {

// The canvas's box on the page, in CSS pixels (never below the UI's smallest usable size).
int canvas_width() {
  return std::max(hooks::canvas_width(), 320);
}
int canvas_height() {
  return std::max(hooks::canvas_height(), 240);
}

constexpr int kFramesAfterEvent = 3;  // ImGui settles a change (a popup, a layout) within a frame or two

}  // namespace

// A change from outside (the URL, the JS API) must win over a text box the user is editing.
void release_keyboard() {
  if (ImGui::GetCurrentContext()) ImGui::ClearActiveID();
  page->app.focus_text = true;
}

// What the view shows, as one number that changes with it: the session's generation, or the model's.
int view_generation(const attnviz::viz::App& app) {
  return app.model.is_open() ? (1 << 30) + app.model.generation() : app.session.generation();
}

void wake() {
  page->frames_due = std::max(page->frames_due, kFramesAfterEvent);
}

namespace {

// Tells the page script when the state changed, so the URL follows at once.
void publish_state() {
  std::string state = state_json(page->app);
  if (state != page->state) {
    page->state = std::move(state);
    hooks::state_changed(page->state);
  }
}

// Whether a view is on screen: a result's heatmaps (or the note that they do not fit), or a model's.
bool view_shown(const attnviz::viz::App& app) {
  return app.model.is_open() ? app.model.has_result() : app.session.has_result();
}

// Pasted text reaches the box that has the keyboard as typed characters, which ImGui takes only while
// Ctrl is up (Ctrl+V's paste event arrives with it down): it waits for that, and for the box to be active.
void feed_paste() {
  Page& p = *page;
  if (p.paste.empty()) return;
  ImGuiIO& io = ImGui::GetIO();
  if (!io.WantTextInput) {
    p.app.focus_text = true;
  } else if (!io.KeyCtrl && !io.KeySuper) {
    io.AddInputCharactersUTF8(p.paste.c_str());
    p.paste.clear();
  }
  wake();
}

void render() {
  Page& p = *page;
  p.inputs_drawn = p.inputs;  // the frame polls GLFW's mouse and keys below
  feed_paste();
  p.window.frame(p.app, p.finish);
  ++p.frames;
  // The view's generation: the chapter-3 session's, or the whole model's (its thumbnails, or its opened
  // layer).
  const int generation = view_generation(p.app);
  const bool drew = view_shown(p.app);
  if (generation != p.drawn_generation && drew) {
    p.drawn_generation = generation;
    p.drawn_at = emscripten_get_now();
  }
  // Ready once a view is on screen and the sentence box has the keyboard (a key typed the moment ready
  // resolves then lands in it), or after a few frames if something else took the keyboard.
  if (p.first_heatmap_at == 0.0 && drew && (ImGui::GetIO().WantTextInput || p.frames >= 10)) {
    p.first_heatmap_at = emscripten_get_now();
    hooks::first_heatmap();
  }
  if (!p.app.written.empty()) {
    const nlohmann::json paths = p.app.written;
    p.app.message = "downloaded " + hooks::download(paths.dump());
    p.app.written.clear();
  }
  publish_state();
  // A text edit left pending (keys arriving during a slow recompute): computed in a task of its own, after
  // the keys queued meanwhile have reached the box.
  if (p.app.text_pending && !p.compute_due) {
    p.compute_due = true;
    hooks::compute_later();
  }
}

// A frame cut short by an exception leaves ImGui's window stack open: close it so the next frame starts
// clean.
void recover_frame() {
  ImGuiContext* g = ImGui::GetCurrentContext();
  if (g && g->WithinFrameScope) {
    ImGui::ErrorCheckEndFrameRecover(nullptr);
    ImGui::EndFrame();
  }
}

}  // namespace

// A frame, and on an exception the frame closed before the exception goes on (to the catch in guarded).
void render_safe() {
  try {
    render();
  } catch (...) {
    recover_frame();
    throw;
  }
}

// An API call that changed the state draws it at once, and gives the sentence box the keyboard back in the
// same go: a focus takes two frames (the request, then the activation, which takes no key), so a key typed
// right after the call lands in the box.
void draw_now() {
  render_safe();
  render_safe();
}

namespace {

// The animation-frame loop: resizes the canvas to its box, and draws when a frame is due (and until the
// first view is ready).
void tick() {
  Page& p = *page;
  guarded_void([&] {
    const int w = canvas_width(), h = canvas_height();
    int ww = 0, wh = 0;
    glfwGetWindowSize(p.window.handle(), &ww, &wh);
    if (w != ww || h != wh) {
      glfwSetWindowSize(p.window.handle(), w, h);
      wake();
    }
    if (p.first_heatmap_at == 0.0) wake();
    if (p.app.train.running) wake();  // training runs a slice of steps a frame
    // patching waits for the typing to stop, then runs a slice of its runs a frame
    if (p.app.model.patching_scheduled() || p.app.model.patching_running()) wake();
    if (p.frames_due <= 0) return;
    --p.frames_due;
    render_safe();
    // The first view is on screen: the two frames that give the sentence box the keyboard (a focus request,
    // then the activation) follow at once, not an animation frame apart each, since ready waits for them.
    for (int i = 0; i < 2 && p.first_heatmap_at == 0.0 && view_shown(p.app); ++i) render_safe();
  });
}

// Typed characters arrive from Emscripten's GLFW one UTF-16 unit at a time (a character past U+FFFF comes
// as two keypress events): ImGui puts the surrogates back together.
void on_char(GLFWwindow*, unsigned int c) {
  ImGuiIO& io = ImGui::GetIO();
  if (c <= 0xFFFF)
    io.AddInputCharacterUTF16(static_cast<ImWchar16>(c));
  else
    io.AddInputCharacter(c);
}

// The clipboard is the browser's: ImGui's copy goes to it (the page script answers the copy event), and a
// paste arrives as the browser's paste event (attnviz_insert_text), so ImGui's own paste finds nothing.
void set_clipboard(void*, const char* text) {
  hooks::copy(text);
}
const char* get_clipboard(void*) {
  return "";
}

// The first view: the defaults, computed before the link is applied, so that a link whose state cannot be
// computed still opens on a view (the state is kept, its reason shown), and a link that is refused opens
// on the defaults with the reason.
void start_page() {
  attnviz::viz::App& app = page->app;
  // GPT-2's vocabulary: the page puts it here before it opens a model (site/gpt2/, same origin).
  setenv("ATTNVIZ_VOCAB_DIR", "/gpt2", 1);
  app.model.free_memory = heap_free;
  app.session.admit = admit_view;
  app.compare.b.admit = admit_view;
  app.admit_export = [](attnviz::viz::ExportKind kind) {
    const attnviz::viz::App& a = page->app;
    if (kind != attnviz::viz::ExportKind::json || attnviz::viz::model_mode(a)) return Status::ok();
    const std::uint64_t bytes = result_json_bytes(a.session.result());
    const std::uint64_t free = heap_free();
    if (bytes + kHeapReserve <= free) return Status::ok();
    return Status::fail("the JSON would be up to " + attnviz::format_bytes(bytes) + ", more than the " +
                        attnviz::format_bytes(free) + " the page has left");
  };
  app.model_view.files_dir = "/models";
  app.model_view.choose_file = [](bool folder) { hooks::choose_model_files(folder); };
  // The page fetches the vocabulary (and shows progress) before a model opens.
  app.model_view.open_request = [](const attnviz::viz::ModelChoice& c) {
    hooks::open_model(choice_json(c).dump());
  };
  // The Model panel's hub list (filled by the page script, attnviz_set_hub): a click fetches the model.
  app.model_view.fetch_hub = [](const std::string& repo) { hooks::fetch_hub(repo); };
  // The Train panel's continue button: a folder from the visitor's disk (model-files.js copies it in).
  app.train.choose_checkpoint = [] { hooks::choose_checkpoint(); };
  // Its text recipes' "Choose a text file..." (model-files.js reads the file as a dropped one), and GPT-2's
  // vocabulary, fetched when a text recipe with no model open first needs it.
  app.train.choose_text = [] { hooks::choose_train_text(); };
  app.train.vocabulary_ready = [](std::string& why) {
    const std::string v = hooks::vocabulary();
    why = v == "fetching" ? std::string() : v;
    return v.empty();
  };
  app.downloads = true;
  app.export_dir = "/attnviz-export";
  app.session.offload = &page->gpu;
  app.model.offload = &page->gpu;
  app.host_controls = [] { page->gpu.draw_controls(); };
  app.coalesce_ms = 50.0;          // keys typed while a recompute longer than this runs make one recompute
  (void)attnviz::viz::start(app);  // the default view: a failure is the view's error, shown in place
  const Applied linked = apply_state_json(hooks::initial_state().c_str(), app);
  if (linked.refused) app.message = "this link's settings were not used: " + linked.status.error;
  attnviz::WindowOptions wo;
  wo.width = canvas_width();
  wo.height = canvas_height();
  if (Status st = page->window.open(wo); !st.is_ok()) throw std::runtime_error(st.error);
  ImGuiIO& io = ImGui::GetIO();
  io.ConfigInputTextCursorBlink = false;  // idle pages draw nothing, so no blinking
  io.SetClipboardTextFn = set_clipboard;
  io.GetClipboardTextFn = get_clipboard;
  glfwSetCharCallback(page->window.handle(), on_char);
  page->gpu.init();  // asynchronous: until WebGPU is up (and measured), everything runs on WASM
  emscripten_set_main_loop(tick, 0, false);
}

}  // namespace
}  // namespace attnviz::web

int main() {
  using namespace attnviz::web;
  init_threads();  // before the engine first sizes its pool
  set_out_of_memory_text();
  page = new Page;  // lives as long as the page
  try {
    start_page();
  } catch (const std::exception& e) {
    hooks::failed(e.what());  // attnviz.ready rejects with it, and the page says it
    return 1;
  } catch (...) {
    hooks::failed("an unknown C++ exception while starting");
    return 1;
  }
  return 0;
}
