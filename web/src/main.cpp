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
#include <nlohmann/json.hpp>
#include <string>

#include "gpt_json.hpp"
#include "gpu.hpp"
#include "json_io.hpp"
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
  bool finish = false;  // glFinish at the end of each frame (benchmarks: the frame's GPU work counted)
};
Page* page = nullptr;

std::string state_json(const attnviz::viz::App& app) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [name, value] : attnviz::state_args(app)) pairs.push_back({name, value});
  return pairs.dump();
}

Status apply_state_json(const char* json, attnviz::viz::App& app) {
  const nlohmann::json pairs = nlohmann::json::parse(json, nullptr, false);
  if (pairs.is_discarded() || !pairs.is_array()) return Status::fail("the state is not a JSON array");
  std::vector<attnviz::StateArg> args;
  for (const nlohmann::json& p : pairs) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      return Status::fail("each setting is a [name, value] pair of strings");
    args.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  }
  return attnviz::apply_state_args(args, app);
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
EM_JS(void, page_download, (const char* path), { Module.attnvizHooks.download(UTF8ToString(path)); });
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

void render() {
  Page& p = *page;
  p.window.frame(p.app, p.finish);
  ++p.frames;
  // The view's generation: the chapter-3 session's, or the whole model's (its thumbnails, or its opened
  // layer).
  const int generation = view_generation(p.app);
  const bool drew = !p.app.layout.empty() || !p.app.model_view.thumbs.empty();
  if (generation != p.drawn_generation && drew) {
    p.drawn_generation = generation;
    p.drawn_at = emscripten_get_now();
    if (p.first_heatmap_at == 0.0) {
      p.first_heatmap_at = p.drawn_at;
      page_first_heatmap();
    }
  }
  if (!p.app.written.empty()) {
    for (const std::string& path : p.app.written) page_download(path.c_str());
    const std::size_t n = p.app.written.size();
    p.app.message = "downloaded " + p.app.written[0].substr(p.app.written[0].rfind('/') + 1) +
                    (n > 1 ? " and " + std::to_string(n - 1) + " more" : "");
    p.app.written.clear();
  }
  std::string state = state_json(p.app);
  if (state != p.state) {
    p.state = std::move(state);
    page_state_changed(p.state.c_str());
  }
}

// The animation-frame loop: resizes the canvas to its box, and draws when a frame is due.
void tick() {
  Page& p = *page;
  const int w = canvas_width(), h = canvas_height();
  int ww = 0, wh = 0;
  glfwGetWindowSize(p.window.handle(), &ww, &wh);
  if (w != ww || h != wh) {
    glfwSetWindowSize(p.window.handle(), w, h);
    wake();
  }
  if (p.frames_due <= 0) return;
  --p.frames_due;
  render();
}

}  // namespace

// The heap the module may still grow into: its maximum less what malloc holds (the page's memory budget).
std::uint64_t heap_free() {
  const std::uint64_t max = emscripten_get_heap_max();
  const std::uint64_t used = static_cast<std::uint64_t>(mallinfo().uordblks);
  return max > used ? max - used : 0;
}

nlohmann::json choice_json(const attnviz::viz::ModelChoice& c) {
  return {{"kind", attnviz::viz::to_string(c.kind)},
          {"size", c.size},
          {"seed", c.seed},
          {"path", c.path},
          {"train", c.train}};
}

extern "C" {

// Replaces the sentence (as if typed); "" when it was computed, else why the last good result stays.
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_text(const char* text) {
  static std::string error;
  release_keyboard();
  wake();  // an idle page draws the new result (and writes the URL) at once
  page->app.session.text = text;
  attnviz::viz::start(page->app);  // recomputes, and brings the compare session up to date
  error = page->app.session.error();
  return error.c_str();
}

// The current result in attnviz-cli --json's format.
EMSCRIPTEN_KEEPALIVE const char* attnviz_result_json() {
  static std::string json;
  const attnviz::viz::Session& s = page->app.session;
  json = attnviz::result_to_json(s.result(), attnviz::state_dict(s.result().config, s.params()));
  return json.c_str();
}

// The state as [name, value] pairs (the desktop app's flags), defaults left out.
EMSCRIPTEN_KEEPALIVE const char* attnviz_state() {
  static std::string json;
  json = state_json(page->app);
  return json.c_str();
}

// Sets the whole state from [name, value] pairs (missing names take their defaults). "" on success, else
// why (a bad setting changes nothing).
EMSCRIPTEN_KEEPALIVE const char* attnviz_apply_state(const char* json) {
  static std::string error;
  release_keyboard();
  wake();
  const Status st = apply_state_json(json, page->app);
  error = st.is_ok() ? page->app.session.error() : st.error;
  if (!st.is_ok()) page->app.message = "link: " + st.error;
  return error.c_str();
}

// Opens a model: {"kind": "layer" | "seeded" | "file", "size", "seed", "path", "train"} (the page has put a
// file's bytes under /models first). Returns "" or why not (the view keeps what it had).
EMSCRIPTEN_KEEPALIVE const char* attnviz_open_model(const char* json) {
  static std::string error;
  release_keyboard();
  wake();
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  attnviz::viz::ModelChoice c;
  if (j.is_discarded() || !j.is_object() || !j.value("kind", nlohmann::json()).is_string() ||
      !attnviz::viz::parse_model_kind(j["kind"].get<std::string>(), c.kind)) {
    error = "the model choice is not {kind: layer | seeded | file, ...}";
    return error.c_str();
  }
  if (j.contains("size") && j["size"].is_string()) c.size = j["size"].get<std::string>();
  if (j.contains("seed") && j["seed"].is_number_unsigned()) c.seed = j["seed"].get<std::uint64_t>();
  if (j.contains("path") && j["path"].is_string()) c.path = j["path"].get<std::string>();
  if (j.contains("train") && j["train"].is_boolean()) c.train = j["train"].get<bool>();
  const Status st = attnviz::viz::open_model(page->app, c);
  error = st.is_ok() ? page->app.model.error() : st.error;
  return error.c_str();
}

// Shows a message in the control column (the page's refusals of model files).
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_message(const char* text) {
  page->app.message = text;
  wake();
  return "";
}

// The whole model's last pass in attnviz-cli --model --json's format (every layer's weights, the top 10);
// "" when no model is open.
EMSCRIPTEN_KEEPALIVE const char* attnviz_model_json() {
  static std::string json;
  const attnviz::viz::ModelSession& m = page->app.model;
  if (!m.is_open() || !m.has_result()) {
    json.clear();
    return json.c_str();
  }
  attnviz::GptJsonModel jm;
  jm.seeded = m.choice().kind == attnviz::viz::ModelKind::seeded;
  jm.source = jm.seeded ? m.choice().size : m.choice().path;
  jm.seed = m.choice().seed;
  json = attnviz::gpt_result_to_json(m.result(), m.weights(), jm, m.tokenizer());
  return json.c_str();
}

// Figures for tests and benchmarks.
EMSCRIPTEN_KEEPALIVE const char* attnviz_status() {
  static std::string json;
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
  json = nlohmann::json{{"generation", view_generation(p.app)},
                        {"model", model},
                        {"memory",
                         {{"heap_max", emscripten_get_heap_max()},
                          {"heap_size", emscripten_get_heap_size()},
                          {"free", heap_free()}}},
                        {"compute", p.gpu.status()},
                        {"error", s.error()},
                        {"message", p.app.message},
                        {"tokens", s.result().tokens_count()},
                        {"compute_ms", s.last_ms()},
                        {"engine_ms", s.result().seconds * 1e3},
                        {"frame_ms", p.app.frame_ms},
                        {"frames", p.frames},
                        {"drawn_generation", p.drawn_generation},
                        {"drawn_at", p.drawn_at},
                        {"first_heatmap_at", p.first_heatmap_at},
                        {"heatmaps", heatmaps},
                        {"hover",
                         hover.active
                             ? nlohmann::json{{"head", hover.head}, {"row", hover.row}, {"col", hover.col}}
                             : nlohmann::json(nullptr)}}
             .dump();
  return json.c_str();
}

// What the export panel's buttons do: "png" (the view on screen), "heads" (a PNG per head), "json", "csv".
// The files download once written. Returns "" or why nothing was exported.
EMSCRIPTEN_KEEPALIVE const char* attnviz_export(const char* kind) {
  static std::string error;
  using attnviz::viz::ExportKind;
  const std::string k = kind;
  error.clear();
  wake();
  if (k == "png")
    attnviz::viz::run_export(page->app, ExportKind::view_png);
  else if (k == "heads")
    attnviz::viz::run_export(page->app, ExportKind::heads_png);
  else if (k == "json")
    attnviz::viz::run_export(page->app, ExportKind::json);
  else if (k == "csv")
    attnviz::viz::run_export(page->app, ExportKind::csv);
  else
    error = "unknown export '" + k + "' (png, heads, json, csv)";
  return error.c_str();
}

// The compute backend: "auto", "wasm" or "webgpu". Returns "" or why not.
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_backend(const char* name) {
  static std::string error;
  const std::optional<attnviz::web::Backend> b = attnviz::web::parse_backend(name);
  error = b ? "" : std::string("unknown backend '") + name + "' (auto, wasm, webgpu)";
  if (b) page->gpu.choose(*b);
  wake();
  return error.c_str();
}

// A tensor of the view's result (the chapter-3 layer's, or a model's opened layer), for tests that compare
// backends: "[address, float count]" ([0, 0] when there is no such tensor, or no layer in view). Names:
// inputs q k v scores scaled weights dropped context output.
EMSCRIPTEN_KEEPALIVE const char* attnviz_tensor_json(const char* name) {
  static std::string where;
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
  where = "[" + std::to_string(has ? reinterpret_cast<std::uintptr_t>(t->ptr()) : 0) + "," +
          std::to_string(has ? t->size() : 0) + "]";
  return where.c_str();
}

// The WebGPU layer's answers (web/src/gpu.cpp starts them).
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_ready(const char* adapter) {
  page->gpu.ready(adapter);
  wake();
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_unavailable(const char* why) {
  page->gpu.unavailable(why);
  wake();
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_done(int ticket, int ok, const char* error, double ms) {
  page->gpu.done(ticket, ok != 0, error, ms);
  wake();
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
  wake();
  render();
}

}  // extern "C"

int main() {
  page = new Page;  // lives as long as the page
  attnviz::viz::App& app = page->app;
  // GPT-2's vocabulary: the page puts it here before it opens a model (site/gpt2/, same origin).
  setenv("ATTNVIZ_VOCAB_DIR", "/gpt2", 1);
  app.model.free_memory = heap_free;
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
  char* initial = page_initial_state();
  const Status linked = apply_state_json(initial, app);
  std::free(initial);
  if (!linked.is_ok()) {
    app.message = "this link's settings were not used: " + linked.error;
    attnviz::viz::start(app);
  }
  attnviz::WindowOptions wo;
  wo.width = canvas_width();
  wo.height = canvas_height();
  if (Status st = page->window.open(wo); !st.is_ok()) {
    std::fprintf(stderr, "attnviz: %s\n", st.error.c_str());
    return 1;
  }
  ImGui::GetIO().ConfigInputTextCursorBlink = false;  // idle pages draw nothing, so no blinking
  page->gpu.init();  // asynchronous: until WebGPU is up (and measured), everything runs on WASM
  emscripten_set_main_loop(tick, 0, false);
  return 0;
}
