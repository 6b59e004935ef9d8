// The browser host: the desktop app's UI on the page's canvas (Emscripten GLFW + WebGL2), driven by the
// browser's animation frames. The page script (web/page/attnviz-page.js) owns the URL, the downloads and the
// `attnviz` JS API; it reaches this module through the attnviz_* functions below.
#include <emscripten/emscripten.h>
#include <imgui.h>
#include <imgui_internal.h>  // ClearActiveID: a text box being edited ignores outside changes otherwise

#include <GLFW/glfw3.h>
#include <emscripten/heap.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "budget.hpp"
#include "gpt_json.hpp"
#include "gpu.hpp"
#include "json_io.hpp"
#include "link.hpp"
#include "view_args.hpp"
#include "window.hpp"

namespace {

using attnviz::Status;

struct Page {
  attnviz::viz::App app;
  attnviz::web::GpuOffload gpu{app.session, app.model};
  attnviz::Window window;
  std::string state;          // the last state handed to the page (JSON pairs), to notice changes
  int drawn_generation = -1;  // the session generation the last frame showed
  double drawn_at = 0.0;      // when that frame ended (performance.now() time base)
  double first_heatmap_at = 0.0;
  long frames = 0;
  // Frames still to draw. The page draws only when something happened (input, a resize, a change through
  // the API) and for a few frames after: an idle page costs nothing, and a browser that is not busy
  // drawing delivers the next key at once (in headless Chromium a page drawing 60 frames a second gets its
  // key events about 15 ms late).
  int frames_due = 5;
  bool finish = false;       // glFinish at the end of each frame (benchmarks: the frame's GPU work counted)
  std::string paste;         // pasted text on its way into the box that has the keyboard
  bool compute_due = false;  // a pending text edit's recompute is scheduled (App::text_pending)
};
Page* page = nullptr;

std::string state_json(const attnviz::viz::App& app) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [name, value] : attnviz::state_args(app)) pairs.push_back({name, value});
  return pairs.dump();
}

// Text is text on every path: the page script hands the module well-formed UTF-8 (a lone surrogate is
// U+FFFD), and a NUL, which a C string cannot carry, becomes U+FFFD here as it does there.
std::string without_nul(std::string s) {
  for (std::size_t at = s.find('\0'); at != std::string::npos; at = s.find('\0', at + 3))
    s.replace(at, 1, "\xEF\xBF\xBD");
  return s;
}

// How a state from a link or setState went: refused (nothing changed), or applied (the view is the state,
// or the last good view with the reason when the state cannot be computed).
struct Applied {
  Status status = Status::ok();
  bool refused = false;
};

// Applies [name, value] pairs as a link gives them: the page's own checks first (link.hpp), then the state,
// then its head and locked cell against what was computed (a bad one puts the previous state back).
Applied apply_state_json(const char* json, attnviz::viz::App& app) {
  const auto refuse = [](std::string why) { return Applied{Status::fail(std::move(why)), true}; };
  const nlohmann::json pairs = nlohmann::json::parse(json, nullptr, false);
  if (pairs.is_discarded() || !pairs.is_array()) return refuse("the state is not a JSON array");
  std::vector<attnviz::StateArg> args;
  for (const nlohmann::json& p : pairs) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      return refuse("each setting is a [name, value] pair of strings");
    args.emplace_back(without_nul(p[0].get<std::string>()), without_nul(p[1].get<std::string>()));
  }
  if (Status st = attnviz::web::check_link(args); !st.is_ok()) return refuse(st.error);
  const std::vector<attnviz::StateArg> before = attnviz::state_args(app);
  const Status st = attnviz::apply_state_args(args, app);
  // apply_state_args changes nothing when a flag does not parse; a state it applied but cannot compute
  // fails with the view's own error.
  const bool computed_error = st.error == app.session.error() || st.error == app.model.error() ||
                              st.error == app.model_view.open_error;
  if (!st.is_ok() && attnviz::state_args(app) == before && !computed_error) return refuse(st.error);
  // The head and the locked cell must be in the view (a link to a model file not chosen yet waits for it).
  const bool waiting = !app.model.is_open() && !app.model_view.wanted_file.empty();
  if (Status range = attnviz::check_head_and_cell(app); !waiting && !range.is_ok()) {
    attnviz::apply_state_args(before, app);
    return refuse(range.error);
  }
  return {st, false};
}

// A change from outside (the URL, the JS API) must win over a text box the user is editing.
void release_keyboard() {
  if (ImGui::GetCurrentContext()) ImGui::ClearActiveID();
  page->app.focus_text = true;
}

}  // namespace

// Calls into the page script (web/page/attnviz-page.js), which installs these hooks before the module runs.
EM_JS(char*, page_initial_state, (), {
  const s = Module.attnvizHooks.initialState();
  const n = lengthBytesUTF8(s) + 1;
  const p = _malloc(n);
  stringToUTF8(s, p, n);
  return p;
});
EM_JS(void, page_state_changed, (const char* json),
      { Module.attnvizHooks.stateChanged(UTF8ToString(json)); });
EM_JS(void, page_first_heatmap, (), { Module.attnvizHooks.firstHeatmap(); });
EM_JS(void, page_failed, (const char* why), { Module.attnvizHooks.failed(UTF8ToString(why)); });
// Hands the written files to the browser (one download each, or one archive of many); returns what was
// downloaded, for the message.
EM_JS(char*, page_download, (const char* paths_json), {
  return Module.attnvizHooks.toHeap(Module.attnvizHooks.download(JSON.parse(UTF8ToString(paths_json))));
});
EM_JS(void, page_copy, (const char* text), { Module.attnvizHooks.copy(UTF8ToString(text)); });
EM_JS(void, page_compute_later, (), { Module.attnvizHooks.computeLater(); });
EM_JS(void, page_choose_model_files, (int folder), { Module.attnvizHooks.chooseModelFiles(folder); });
EM_JS(void, page_open_model, (const char* json), { Module.attnvizHooks.openModel(UTF8ToString(json)); });
EM_JS(int, page_canvas_width, (), { return Module.canvas.clientWidth | 0; });
EM_JS(int, page_canvas_height, (), { return Module.canvas.clientHeight | 0; });

namespace {

// What the view shows, as one number that changes with it: the session's generation, or the model's.
int view_generation(const attnviz::viz::App& app) {
  return app.model.is_open() ? (1 << 30) + app.model.generation() : app.session.generation();
}

// The canvas's box on the page, in CSS pixels (never below the UI's smallest usable size).
int canvas_width() {
  return std::max(page_canvas_width(), 320);
}
int canvas_height() {
  return std::max(page_canvas_height(), 240);
}

constexpr int kFramesAfterEvent = 3;  // ImGui settles a change (a popup, a layout) within a frame or two

void wake() {
  page->frames_due = std::max(page->frames_due, kFramesAfterEvent);
}

// Tells the page script when the state changed, so the URL follows at once.
void publish_state() {
  std::string state = state_json(page->app);
  if (state != page->state) {
    page->state = std::move(state);
    page_state_changed(page->state.c_str());
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
    page_first_heatmap();
  }
  if (!p.app.written.empty()) {
    const nlohmann::json paths = p.app.written;
    char* what = page_download(paths.dump().c_str());
    p.app.message = std::string("downloaded ") + what;
    std::free(what);
    p.app.written.clear();
  }
  publish_state();
  // A text edit left pending (keys arriving during a slow recompute): computed in a task of its own, after
  // the keys queued meanwhile have reached the box.
  if (p.app.text_pending && !p.compute_due) {
    p.compute_due = true;
    page_compute_later();
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

// The last resort around everything the page script calls: a C++ exception becomes a message, and the
// view stays (the checks before computing are the mechanism; this is the net).
std::string failure_text(const char* what) {
  return std::string("something went wrong (") + what + "): the last good view stays";
}
void note_failure(const std::string& why) {
  if (!page) return;
  try {
    page->app.message = why;
  } catch (...) {  // no memory left for the message: the return value still says it
  }
  wake();
}
// Written once, while there is memory: out of memory, the answer must not need any.
char out_of_memory[128];
template <class F>
const char* guarded(std::string& out, F&& f) {
  try {
    out = f();
  } catch (const std::bad_alloc&) {
    note_failure(out_of_memory);
    return out_of_memory;
  } catch (const std::exception& e) {
    out = failure_text(e.what());
    note_failure(out);
  } catch (...) {
    out = failure_text("an unknown C++ exception");
    note_failure(out);
  }
  return out.c_str();
}
template <class F>
void guarded_void(F&& f) {
  std::string unused;
  guarded(unused, [&] {
    f();
    return std::string();
  });
}

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
  page_copy(text);
}
const char* get_clipboard(void*) {
  return "";
}

}  // namespace

nlohmann::json choice_json(const attnviz::viz::ModelChoice& c) {
  return {{"kind", attnviz::viz::to_string(c.kind)},
          {"size", c.size},
          {"seed", c.seed},
          {"path", c.path},
          {"train", c.train}};
}

namespace {

// Figures for tests and benchmarks (attnviz_status).
std::string status_json() {
  const Page& p = *page;
  const attnviz::viz::Session& s = p.app.session;
  nlohmann::json heatmaps = nlohmann::json::array();
  for (const attnviz::viz::HeatmapRect& r : p.app.layout)
    heatmaps.push_back({{"slot", r.slot},
                        {"x0", r.x0},
                        {"y0", r.y0},
                        {"x1", r.x1},
                        {"y1", r.y1},
                        {"origin_x", r.origin_x},
                        {"origin_y", r.origin_y},
                        {"cell", r.cell},
                        {"rows", r.rows},
                        {"cols", r.cols}});
  const attnviz::viz::Cell& hover = p.app.view.hover;
  const attnviz::viz::ModelSession& m = p.app.model;
  const attnviz::viz::ModelView& mv = p.app.model_view;
  nlohmann::json model = {
      {"open", m.is_open()},         {"choice", choice_json(mv.choice)}, {"error", m.error()},
      {"open_error", mv.open_error}, {"wanted_file", mv.wanted_file},    {"generation", m.generation()},
      {"layer", mv.layer},           {"thumbs", mv.thumbs.size()},       {"thumb_px", mv.thumb_px},
      {"generating", mv.generating}};
  if (m.is_open()) {
    model["source"] = choice_json(m.choice());
    model["layers"] = m.config().n_layers;
    model["heads"] = m.config().n_heads;
    model["ids"] = m.ids();
    model["pieces"] = m.pieces();
    model["ms"] = m.last_ms();
    model["pass_ms"] = m.result().seconds * 1e3;
    model["reused"] = m.result().reused;
    model["open_ms"] = m.open_ms();
    nlohmann::json next = nlohmann::json::array();
    for (const attnviz::TopToken& t : m.result().next)
      next.push_back({{"id", t.id}, {"probability", t.probability}});
    model["next"] = next;
    nlohmann::json kinds = nlohmann::json::array();
    for (const auto& layer : m.kinds()) {
      nlohmann::json row = nlohmann::json::array();
      for (const attnviz::viz::HeadScores& k : layer) row.push_back(attnviz::viz::to_string(k.kind));
      kinds.push_back(row);
    }
    model["kinds"] = kinds;
  }
  nlohmann::json thumbs = nlohmann::json::array();
  for (const auto& t : mv.thumbs)
    thumbs.push_back(
        {{"layer", t.layer}, {"head", t.head}, {"x0", t.x0}, {"y0", t.y0}, {"x1", t.x1}, {"y1", t.y1}});
  model["thumb_rects"] = thumbs;
  const attnviz::viz::CompareState& cs = p.app.compare;
  return nlohmann::json{
      {"generation", view_generation(p.app)},
      {"model", model},
      {"memory",
       {{"heap_max", attnviz::web::heap_max()},
        {"heap_size", emscripten_get_heap_size()},
        {"free", attnviz::web::heap_free()}}},
      {"compute", p.gpu.status()},
      {"error", s.error()},
      {"message", p.app.message},
      {"view_note", p.app.view_note},
      {"text_pending", p.app.text_pending},
      {"compare",
       {{"on", cs.mode != attnviz::viz::CompareMode::off},
        {"error", cs.mode == attnviz::viz::CompareMode::off ? std::string() : cs.b.error()},
        {"tokens", cs.b.result().tokens_count()}}},
      {"tokens", s.result().tokens_count()},
      {"compute_ms", s.last_ms()},
      {"engine_ms", s.result().seconds * 1e3},
      {"frame_ms", p.app.frame_ms},
      {"frames", p.frames},
      {"drawn_generation", p.drawn_generation},
      {"drawn_at", p.drawn_at},
      {"first_heatmap_at", p.first_heatmap_at},
      {"heatmaps", heatmaps},
      {"hover", hover.active ? nlohmann::json{{"head", hover.head}, {"row", hover.row}, {"col", hover.col}}
                             : nlohmann::json(nullptr)}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" {

// Replaces the sentence (as if typed); "" when it was computed, else why the last good result stays. A text
// longer than the page takes changes nothing.
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_text(const char* text) {
  static std::string error;
  return guarded(error, [&]() -> std::string {
    attnviz::viz::App& app = page->app;
    const std::string t = text;
    if (Status st = attnviz::web::check_text_size(t.size(), "the text"); !st.is_ok()) {
      app.message = st.error;
      wake();
      return st.error;
    }
    release_keyboard();
    app.session.text = t;
    attnviz::viz::start(app);  // recomputes, and brings the compare session up to date
    draw_now();
    return app.model.is_open() ? app.model.error() : app.session.error();
  });
}

// Text the browser gives the box that has the keyboard: a paste, or text inserted without key events
// (keyboard.insertText, an input method). Typed as it arrives; a text that would grow the sentence past
// what the page takes is refused whole. Returns "" or why.
EMSCRIPTEN_KEEPALIVE const char* attnviz_insert_text(const char* text) {
  static std::string error;
  return guarded(error, [&]() -> std::string {
    std::string t;
    for (const char* c = text; *c; ++c) {
      if (*c == '\r') {
        if (c[1] != '\n') t += '\n';  // CR LF and a lone CR are a newline
      } else {
        t += *c == '\t' ? ' ' : *c;  // the box takes no tab: a tab is a space between words there
      }
    }
    const std::size_t total = page->app.session.text.size() + page->paste.size() + t.size();
    if (Status st = attnviz::web::check_text_size(total, "the text with what was pasted"); !st.is_ok()) {
      page->app.message = st.error;
      wake();
      return st.error;
    }
    page->paste += t;
    render_safe();  // at once, as a key
    return std::string();
  });
}

// The current result in attnviz-cli --json's format, or why not (then it does not start with '{'): its
// text must fit in the heap, and in a JavaScript string.
EMSCRIPTEN_KEEPALIVE const char* attnviz_result_json() {
  static std::string json;
  return guarded(json, [&]() -> std::string {
    const attnviz::viz::Session& s = page->app.session;
    const std::uint64_t bytes = attnviz::web::result_json_bytes(s.result());
    const std::uint64_t free = attnviz::web::heap_free();
    if (bytes + attnviz::web::kHeapReserve > free)
      return "the result's JSON would be up to " + attnviz::format_bytes(bytes) + ", more than the " +
             attnviz::format_bytes(free) + " the page has left";
    std::string json =
        attnviz::result_to_json(s.result(), attnviz::state_dict(s.result().config, s.params()));
    constexpr std::size_t kMaxJsString = (1u << 29) - 24;  // V8's longest string, in UTF-16 units
    if (json.size() > kMaxJsString)
      return "the result's JSON is " + attnviz::format_bytes(json.size()) +
             ", more than a JavaScript string holds (" + attnviz::format_bytes(kMaxJsString) +
             "): export it as a file (exportFiles('json'))";
    return json;
  });
}

// The state as [name, value] pairs (the desktop app's flags), defaults left out.
EMSCRIPTEN_KEEPALIVE const char* attnviz_state() {
  static std::string json;
  return guarded(json, [] { return state_json(page->app); });
}

// Sets the whole state from [name, value] pairs (missing names take their defaults). "" when it was
// computed, else why: a bad setting changes nothing, and a state that cannot be computed is kept with the
// last good view.
EMSCRIPTEN_KEEPALIVE const char* attnviz_apply_state(const char* json) {
  static std::string error;
  return guarded(error, [&]() -> std::string {
    release_keyboard();
    wake();
    const Applied a = apply_state_json(json, page->app);
    if (a.refused) page->app.message = "link: " + a.status.error;
    draw_now();
    if (a.refused) return a.status.error;
    return page->app.model.is_open() ? page->app.model.error() : page->app.session.error();
  });
}

// Opens a model: {"kind": "layer" | "seeded" | "file", "size", "seed", "path", "train"} (the page has put a
// file's bytes under /models first). Returns "" or why not (the view keeps what it had).
EMSCRIPTEN_KEEPALIVE const char* attnviz_open_model(const char* json) {
  static std::string error;
  return guarded(error, [&]() -> std::string {
    release_keyboard();
    wake();
    const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
    attnviz::viz::ModelChoice c;
    if (j.is_discarded() || !j.is_object() || !j.value("kind", nlohmann::json()).is_string() ||
        !attnviz::viz::parse_model_kind(j["kind"].get<std::string>(), c.kind))
      return "the model choice is not {kind: layer | seeded | file, ...}";
    if (j.contains("size") && j["size"].is_string()) c.size = j["size"].get<std::string>();
    if (j.contains("seed") && j["seed"].is_number_unsigned()) c.seed = j["seed"].get<std::uint64_t>();
    if (j.contains("path") && j["path"].is_string()) c.path = j["path"].get<std::string>();
    if (j.contains("train") && j["train"].is_boolean()) c.train = j["train"].get<bool>();
    const Status st = attnviz::viz::open_model(page->app, c);
    return st.is_ok() ? page->app.model.error() : st.error;
  });
}

// Shows a message in the control column (the page's refusals of model files).
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_message(const char* text) {
  static std::string error;
  return guarded(error, [&]() -> std::string {
    page->app.message = text;
    wake();
    return std::string();
  });
}

// The whole model's last pass in attnviz-cli --model --json's format (every layer's weights, the top 10);
// "" when no model is open.
EMSCRIPTEN_KEEPALIVE const char* attnviz_model_json() {
  static std::string json;
  return guarded(json, []() -> std::string {
    const attnviz::viz::ModelSession& m = page->app.model;
    if (!m.is_open() || !m.has_result()) return std::string();
    attnviz::GptJsonModel jm;
    jm.seeded = m.choice().kind == attnviz::viz::ModelKind::seeded;
    jm.source = jm.seeded ? m.choice().size : m.choice().path;
    jm.seed = m.choice().seed;
    return attnviz::gpt_result_to_json(m.result(), m.weights(), jm, m.tokenizer());
  });
}

// Figures for tests and benchmarks.
EMSCRIPTEN_KEEPALIVE const char* attnviz_status() {
  static std::string json;
  return guarded(json, status_json);
}

// What the export panel's buttons do: "png" (the view on screen), "heads" (a PNG per head), "json", "csv".
// The files download once written. Returns "" (the outcome is the message, as for the buttons), or why the
// kind is unknown.
EMSCRIPTEN_KEEPALIVE const char* attnviz_export(const char* kind) {
  static std::string error;
  return guarded(error, [&]() -> std::string {
    using attnviz::viz::ExportKind;
    const std::string k = kind;
    wake();
    ExportKind e;
    if (k == "png")
      e = ExportKind::view_png;
    else if (k == "heads")
      e = ExportKind::heads_png;
    else if (k == "json")
      e = ExportKind::json;
    else if (k == "csv")
      e = ExportKind::csv;
    else
      return "unknown export " + attnviz::quote_arg(k) + " (png, heads, json, csv)";
    attnviz::viz::run_export(page->app, e);  // its outcome, a refusal too, is the message
    return std::string();
  });
}

// The compute backend: "auto", "wasm" or "webgpu". Returns "" or why not.
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_backend(const char* name) {
  static std::string error;
  return guarded(error, [&]() -> std::string {
    const std::optional<attnviz::web::Backend> b = attnviz::web::parse_backend(name);
    wake();
    if (!b) return "unknown backend " + attnviz::quote_arg(name) + " (auto, wasm, webgpu)";
    page->gpu.choose(*b);
    return std::string();
  });
}

// A tensor of the view's result (the chapter-3 layer's, or a model's opened layer), for tests that compare
// backends: "[address, float count]" ([0, 0] when there is no such tensor, or no layer in view). Names:
// inputs q k v scores scaled weights dropped context output.
EMSCRIPTEN_KEEPALIVE const char* attnviz_tensor_json(const char* name) {
  static std::string where;
  return guarded(where, [&]() -> std::string {
    static const attnviz::Result none;
    const attnviz::Result* shown = attnviz::viz::shown_result(page->app);
    const attnviz::Result& r = shown ? *shown : none;
    const std::string n = name;
    const attnviz::Tensor* t = n == "inputs"    ? &r.inputs
                               : n == "q"       ? &r.q
                               : n == "k"       ? &r.k
                               : n == "v"       ? &r.v
                               : n == "scores"  ? &r.scores
                               : n == "scaled"  ? &r.scaled
                               : n == "weights" ? &r.weights
                               : n == "dropped" ? &r.dropped
                               : n == "context" ? &r.context
                               : n == "output"  ? &r.output
                                                : nullptr;
    const bool has = t && !t->empty();
    return "[" + std::to_string(has ? reinterpret_cast<std::uintptr_t>(t->ptr()) : 0) + "," +
           std::to_string(has ? t->size() : 0) + "]";
  });
}

// The WebGPU layer's answers (web/src/gpu.cpp starts them).
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_ready(const char* adapter) {
  guarded_void([&] {
    page->gpu.ready(adapter);
    wake();
  });
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_unavailable(const char* why) {
  guarded_void([&] {
    page->gpu.unavailable(why);
    wake();
  });
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_done(int ticket, int ok, const char* error, double ms) {
  guarded_void([&] {
    page->gpu.done(ticket, ok != 0, error, ms);
    wake();
  });
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_model_done(int ticket, int ok, const char* error, double ms) {
  page->gpu.model_done(ticket, ok != 0, error, ms);
  wake();
}
EMSCRIPTEN_KEEPALIVE const float* attnviz_gpu_model_rows(int weights_id, int matrix, int row0, int rows) {
  return page->gpu.model_rows(weights_id, matrix, row0, rows);
}

EMSCRIPTEN_KEEPALIVE void attnviz_set_finish(int on) {
  page->finish = on != 0;
}

// Input arrived: draw the next few frames.
EMSCRIPTEN_KEEPALIVE void attnviz_wake() {
  wake();
}

// Draws one frame now, outside the animation-frame loop: the page calls it right after a key reached the
// UI, so the heatmap follows the key without waiting for the next animation frame.
EMSCRIPTEN_KEEPALIVE void attnviz_frame() {
  guarded_void([] {
    wake();
    render_safe();
  });
}

// Computes the text edit left pending while a slow recompute ran (render() asks the page for this task,
// which runs after the keys queued meanwhile): one recompute of the latest text, then a frame.
EMSCRIPTEN_KEEPALIVE void attnviz_compute_pending() {
  guarded_void([] {
    page->compute_due = false;
    if (attnviz::viz::compute_pending(page->app)) attnviz_frame();
  });
}

}  // extern "C"

namespace {

// The first view: the defaults, computed before the link is applied, so that a link whose state cannot be
// computed still opens on a view (the state is kept, its reason shown), and a link that is refused opens
// on the defaults with the reason.
void start_page() {
  attnviz::viz::App& app = page->app;
  // GPT-2's vocabulary: the page puts it here before it opens a model (site/gpt2/, same origin).
  setenv("ATTNVIZ_VOCAB_DIR", "/gpt2", 1);
  app.model.free_memory = attnviz::web::heap_free;
  app.session.admit = attnviz::web::admit_view;
  app.compare.b.admit = attnviz::web::admit_view;
  app.admit_export = [](attnviz::viz::ExportKind kind) {
    const attnviz::viz::App& a = page->app;
    if (kind != attnviz::viz::ExportKind::json || attnviz::viz::model_mode(a)) return Status::ok();
    const std::uint64_t bytes = attnviz::web::result_json_bytes(a.session.result());
    const std::uint64_t free = attnviz::web::heap_free();
    if (bytes + attnviz::web::kHeapReserve <= free) return Status::ok();
    return Status::fail("the JSON would be up to " + attnviz::format_bytes(bytes) + ", more than the " +
                        attnviz::format_bytes(free) + " the page has left");
  };
  app.model_view.files_dir = "/models";
  app.model_view.choose_file = [](bool folder) { page_choose_model_files(folder ? 1 : 0); };
  // The page fetches the vocabulary (and shows progress) before a model opens.
  app.model_view.open_request = [](const attnviz::viz::ModelChoice& c) {
    page_open_model(choice_json(c).dump().c_str());
  };
  app.downloads = true;
  app.export_dir = "/attnviz-export";
  app.session.offload = &page->gpu;
  app.model.offload = &page->gpu;
  app.host_controls = [] { page->gpu.draw_controls(); };
  app.coalesce_ms = 50.0;  // keys typed while a recompute longer than this runs make one recompute
  attnviz::viz::start(app);
  char* initial = page_initial_state();
  const Applied linked = apply_state_json(initial, app);
  std::free(initial);
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

int main() {
  std::snprintf(out_of_memory, sizeof out_of_memory,
                "the page ran out of memory (it has %s): the last good view stays",
                attnviz::format_bytes(attnviz::web::heap_max()).c_str());
  page = new Page;  // lives as long as the page
  try {
    start_page();
  } catch (const std::exception& e) {
    page_failed(e.what());  // attnviz.ready rejects with it, and the page says it
    return 1;
  } catch (...) {
    page_failed("an unknown C++ exception while starting");
    return 1;
  }
  return 0;
}
