// The page script's hooks (hooks.hpp). (JavaScript: clang-format stays out.)
#include "hooks.hpp"

#include <emscripten/emscripten.h>

#include <cstdlib>

// clang-format off
EM_JS(char*, page_initial_state, (), {
  return Module.attnvizHooks.toHeap(Module.attnvizHooks.initialState());
});
EM_JS(void, page_state_changed, (const char* json), { Module.attnvizHooks.stateChanged(UTF8ToString(json)); });
EM_JS(void, page_first_heatmap, (), { Module.attnvizHooks.firstHeatmap(); });
EM_JS(void, page_failed, (const char* why), { Module.attnvizHooks.failed(UTF8ToString(why)); });
EM_JS(char*, page_download, (const char* paths_json), {
  return Module.attnvizHooks.toHeap(Module.attnvizHooks.download(JSON.parse(UTF8ToString(paths_json))));
});
EM_JS(void, page_copy, (const char* text), { Module.attnvizHooks.copy(UTF8ToString(text)); });
EM_JS(void, page_compute_later, (), { Module.attnvizHooks.computeLater(); });
EM_JS(void, page_choose_model_files, (int folder), { Module.attnvizHooks.chooseModelFiles(folder); });
EM_JS(void, page_choose_checkpoint, (), { Module.attnvizHooks.chooseCheckpoint(); });
EM_JS(void, page_choose_train_text, (), { Module.attnvizHooks.chooseTrainText(); });
EM_JS(char*, page_vocabulary, (), { return Module.attnvizHooks.toHeap(Module.attnvizHooks.vocabulary()); });
EM_JS(void, page_open_model, (const char* json), { Module.attnvizHooks.openModel(UTF8ToString(json)); });
EM_JS(void, page_fetch_hub, (const char* repo), { Module.attnvizHooks.fetchHub(UTF8ToString(repo)); });
EM_JS(int, page_canvas_width, (), { return Module.canvas.clientWidth | 0; });
EM_JS(int, page_canvas_height, (), { return Module.canvas.clientHeight | 0; });
// clang-format on

namespace attnviz::web::hooks {

namespace {

// A string the page put in the heap (malloc'd), taken over and freed; 0 (no room in the heap) is "".
std::string take(char* p) {
  std::string s = p ? p : "";
  std::free(p);
  return s;
}

}  // namespace

std::string initial_state() {
  return take(page_initial_state());
}
void state_changed(const std::string& json) {
  page_state_changed(json.c_str());
}
void first_heatmap() {
  page_first_heatmap();
}
void failed(const std::string& why) {
  page_failed(why.c_str());
}
std::string download(const std::string& paths_json) {
  return take(page_download(paths_json.c_str()));
}
void copy(const std::string& text) {
  page_copy(text.c_str());
}
void compute_later() {
  page_compute_later();
}
void choose_model_files(bool folder) {
  page_choose_model_files(folder ? 1 : 0);
}
void choose_checkpoint() {
  page_choose_checkpoint();
}
void choose_train_text() {
  page_choose_train_text();
}
std::string vocabulary() {
  return take(page_vocabulary());
}
void open_model(const std::string& choice_json) {
  page_open_model(choice_json.c_str());
}
void fetch_hub(const std::string& repo) {
  page_fetch_hub(repo.c_str());
}
int canvas_width() {
  return page_canvas_width();
}
int canvas_height() {
  return page_canvas_height();
}

}  // namespace attnviz::web::hooks
