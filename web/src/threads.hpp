// The page's CPU threads: how many the engine runs (the threaded module, attnviz-mt, when the page is
// cross-origin isolated; else one), and why only one when that is so. The Compute section shows it and
// attnviz.status() reports it (`threads`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attnviz::web {

struct Threads {
  int count = 1;          // the engine's threads, the main thread included
  bool isolated = false;  // the page is cross-origin isolated (crossOriginIsolated)
  bool threaded = false;  // this is the threaded module (attnviz-mt)
  const char* why = "";   // when count is 1: why, in a few words
};

// Sizes the engine's pool from the Workers this module started with (call first thing in main).
void init_threads();
const Threads& threads();

std::string threads_line();  // the Compute section's line: how many threads, or why one
void draw_threads_line();
nlohmann::json threads_json();

}  // namespace attnviz::web
