#include "threads.hpp"

#include <emscripten/emscripten.h>
#include <imgui.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "attnviz/exec.hpp"

// clang-format off
EM_JS(int, page_isolated, (), {
  return (typeof crossOriginIsolated !== 'undefined' && crossOriginIsolated) ? 1 : 0;
});
#ifdef __EMSCRIPTEN_PTHREADS__
// The threads asked for (threads_glue.js), within the Workers this module started with plus the main thread.
EM_JS(int, module_threads, (), { return Math.min(attnvizThreads(), PThread.unusedWorkers.length + 1); });
EM_JS(int, threads_asked, (), { return attnvizThreadsAsked(); });
#else
// Why the page script loaded the single-thread module (web/page/attnviz-page.js): 1 a page opened from a file,
// 2 the threaded module did not load, 0 not isolated.
EM_JS(int, page_one_thread, (), {
  const why = Module.attnvizOneThread;
  return why === 'file' ? 1 : why === 'no-threaded-module' ? 2 : 0;
});
#endif
// clang-format on

namespace attnviz::web {
namespace {

Threads info;

}  // namespace

// Nothing here allocates in the module's heap: the page's memory tests fill it to the last bytes.
void init_threads() {
  info.isolated = page_isolated() != 0;
#ifdef __EMSCRIPTEN_PTHREADS__
  info.threaded = true;
  // The engine sizes its pool from the hardware thread count: here the Workers the module started with, plus
  // the main thread. A thread beyond them would never start while the main thread waits for it.
  info.count = module_threads();
  char count[16];
  std::snprintf(count, sizeof count, "%d", info.count);
  setenv("ATTNVIZ_HARDWARE_THREADS", count, 1);
  if (info.count == 1)
    info.why = threads_asked() == 1 ? "the page's address asks for one (?threads=1)"
                                    : "the browser reports one core";
#else
  info.count = 1;
  switch (page_one_thread()) {
    case 1:
      info.why = "a page opened from a file is never cross-origin isolated, which WebAssembly threads need";
      break;
    case 2:
      info.why = "the threaded module (attnviz-mt.js) did not load";
      break;
    default:
      info.why = info.isolated ? "this module has no threads"
                               : "the page is not cross-origin isolated (served without the COOP and COEP "
                                 "headers scripts/demo sends)";
  }
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
  return std::string("CPU: 1 thread: ") + info.why;
}

namespace {

// The GEMMs' kernels (engine/simd/wasm_fma.hpp): fused where the browser has relaxed SIMD.
std::string kernels_line() {
  return attnviz::wasm_relaxed_fma()
             ? "CPU kernels: SIMD128 with fused multiply-adds (relaxed SIMD)"
             : "CPU kernels: SIMD128, multiplies and adds apart (relaxed SIMD unavailable)";
}

}  // namespace

void draw_threads_line() {
  const ImVec4 dim(0.6f, 0.6f, 0.65f, 1.0f);
  if (info.count > 1)
    ImGui::TextColored(dim, "CPU: %d threads (WebAssembly threads: the page is cross-origin isolated)",
                       info.count);
  else
    ImGui::TextColored(dim, "CPU: 1 thread: %s", info.why);
  ImGui::TextColored(dim, "%s", kernels_line().c_str());
}

nlohmann::json threads_json() {
  return {{"count", info.count},
          {"isolated", info.isolated},
          {"relaxed_fma", attnviz::wasm_relaxed_fma()},
          {"module", info.threaded ? "attnviz-mt" : "attnviz"},
          {"why", info.why},
          {"line", threads_line()},
          {"kernels", kernels_line()}};
}

}  // namespace attnviz::web
