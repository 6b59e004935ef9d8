#include "threads.hpp"

#include <emscripten/emscripten.h>
#include <imgui.h>

#include <cstdlib>
#include <string>

// clang-format off
EM_JS(int, page_isolated, (), {
  return (typeof crossOriginIsolated !== 'undefined' && crossOriginIsolated) ? 1 : 0;
});
#ifdef __EMSCRIPTEN_PTHREADS__
// The threads asked for (threads_glue.js), within the Workers this module started with plus the main thread.
EM_JS(int, module_threads, (), { return Math.min(attnvizThreads(), PThread.unusedWorkers.length + 1); });
EM_JS(int, threads_asked, (), { return attnvizThreadsAsked(); });
#else
// The page script's reason for loading the single-thread module (web/page/attnviz-page.js), or "".
EM_JS(char*, page_threads_why, (), {
  return Module.attnvizHooks.toHeap(String(Module.attnvizThreadsWhy || ""));
});
#endif
// clang-format on

namespace attnviz::web {
namespace {

Threads info;

#ifndef __EMSCRIPTEN_PTHREADS__
std::string page_why() {
  char* s = page_threads_why();
  std::string why = s ? s : "";
  std::free(s);
  return why;
}
#endif

}  // namespace

void init_threads() {
  info.isolated = page_isolated() != 0;
#ifdef __EMSCRIPTEN_PTHREADS__
  info.threaded = true;
  // The engine sizes its pool from the hardware thread count: here the Workers the module started with, plus
  // the main thread. A thread beyond them would never start while the main thread waits for it.
  info.count = module_threads();
  setenv("ATTNVIZ_HARDWARE_THREADS", std::to_string(info.count).c_str(), 1);
  if (info.count == 1)
    info.why = threads_asked() == 1 ? "the page's address asks for one (?threads=1)"
                                    : "the browser reports one core";
#else
  info.count = 1;
  info.why = page_why();
  if (info.why.empty())
    info.why = info.isolated ? "this module has no threads" : "the page is not cross-origin isolated";
#endif
}

const Threads& threads() {
  return info;
}

// What the Compute section says of the CPU's threads.
std::string threads_line() {
  if (info.count > 1)
    return "CPU: " + std::to_string(info.count) +
           " threads (WebAssembly threads: the page is cross-origin isolated)";
  return "CPU: 1 thread: " + info.why;
}

void draw_threads_line() {
  ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.65f, 1.0f), "%s", threads_line().c_str());
}

nlohmann::json threads_json() {
  return {{"count", info.count},
          {"isolated", info.isolated},
          {"module", info.threaded ? "attnviz-mt" : "attnviz"},
          {"why", info.why},
          {"line", threads_line()}};
}

}  // namespace attnviz::web
