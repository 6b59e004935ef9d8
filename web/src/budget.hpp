// The page's memory: the module's heap has a fixed maximum (web/CMakeLists.txt), and running past it kills
// the module. Everything the page computes is counted against what is left of it before anything is
// allocated: a chapter-3 view (its parameters and every stage it keeps), the text, and the JSON of a result.
#pragma once

#include <cstdint>
#include <string>

#include "attnviz/engine.hpp"
#include "attnviz/status.hpp"

namespace attnviz::web {

// The longest text the page takes (sentence A or B), in UTF-8 bytes. Its link must fit in a URL (Chromium
// takes 2 MB; a non-ASCII byte is 3 characters there), and every token fits in far less.
inline constexpr std::size_t kMaxTextBytes = 256 * 1024;

// The heap the module may still grow into: its maximum less what malloc holds.
std::uint64_t heap_free();
std::uint64_t heap_max();

// Room kept for what is not counted: the UI's frames, fonts and strings, the state and status JSON.
inline constexpr std::uint64_t kHeapReserve = 96u << 20;

// What recomputing a chapter-3 view allocates: the engine's run_memory (the parameters when they are
// drawn anew, the result's tensors and the kernels' scratch), the tokenized input and the UI's per-view
// buffers. Saturates instead of wrapping.
std::uint64_t view_bytes(const Config& c, int tokens, std::uint64_t token_bytes, bool new_params);

// Session::admit for the page: refuses a view that does not fit in what the heap has left, naming both
// sizes and how many tokens would fit. Before refusing, it lets the engine free the results it keeps for
// reuse.
Status admit_view(const Config& c, const Input& in, bool new_params);

// What result_to_json takes for `r` (it reserves this bound at once): json_io's result_json_bound.
std::uint64_t result_json_bytes(const Result& r);

// Whether a text of `bytes` bytes may become the sentence; the refusal names the size. `what`: "the text".
Status check_text_size(std::size_t bytes, const std::string& what);

}  // namespace attnviz::web
