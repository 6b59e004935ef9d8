#include "guard.hpp"

#include <cstdio>

#include "attnviz/engine.hpp"
#include "budget.hpp"
#include "page.hpp"

namespace attnviz::web {

char out_of_memory[128];

void set_out_of_memory_text() {
  std::snprintf(out_of_memory, sizeof out_of_memory,
                "the page ran out of memory (it has %s): the last good view stays",
                format_bytes(heap_max()).c_str());
}

std::string failure_text(const char* what) {
  return std::string("something went wrong (") + what + "): the last good view stays";
}

void note_failure(const char* why) {
  if (!page) return;
  try {
    page->app.message = why;
  } catch (...) {  // no memory left for the message: the return value still says it
  }
  wake();
}

}  // namespace attnviz::web
