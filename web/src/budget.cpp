#include "budget.hpp"

#include <emscripten/heap.h>
#include <malloc.h>

#include "attnviz/io/json_io.hpp"
#include "attnviz/saturating.hpp"

namespace attnviz::web {
namespace {

std::uint64_t u(long long x) {
  return x > 0 ? static_cast<std::uint64_t>(x) : 0;
}

// What is left for a view: the free heap less the reserve.
std::uint64_t room() {
  const std::uint64_t free = heap_free();
  return free > kHeapReserve ? free - kHeapReserve : 0;
}

}  // namespace

std::uint64_t heap_max() {
  return emscripten_get_heap_max();
}

std::uint64_t heap_free() {
  const std::uint64_t max = heap_max();
  const std::uint64_t used = static_cast<std::uint64_t>(mallinfo().uordblks);
  return max > used ? max - used : 0;
}

std::uint64_t view_bytes(const Config& config, int tokens, std::uint64_t token_bytes, bool new_params) {
  // The engine's own count of a run: the parameters (drawn, packed and their temporaries) and the result
  // with every stage the view keeps, the dropout mask and the kernels' scratch.
  Config c = config;
  c.stages = kStageAll;
  const RunMemory run = run_memory(c, tokens);
  std::uint64_t bytes = sat_add(new_params ? run.params : 0, run.tensors);
  // Beside it: the tokenized input (its rows, and the words' copies in the input and the result), and the
  // UI's per-view buffers (an aggregate or a difference, one heatmap's texels while it is coloured).
  const std::uint64_t T = u(tokens);
  bytes = sat_add(bytes, sat_mul(sizeof(float), sat_mul(T, u(effective(c).d_in))));
  bytes = sat_add(bytes, sat_mul(2, sat_add(sat_mul(T, 32), token_bytes)));
  bytes = sat_add(bytes, sat_mul(4 * sizeof(float), sat_mul(T, T)));
  return bytes;
}

Status admit_view(const Config& c, const Input& in, bool new_params) {
  const int T = in.x.shape[0];
  std::uint64_t token_bytes = 0;
  for (const std::string& t : in.tokens) token_bytes += t.size();
  const std::uint64_t need = view_bytes(c, T, token_bytes, new_params);
  if (need <= room()) return Status::ok();
  release_recycled();  // results the fast path keeps for reuse: give them back before refusing
  const std::uint64_t left = room();
  if (need <= left) return Status::ok();
  // The most tokens that would fit (need grows with T): a binary search over 1..T-1.
  int lo = 0, hi = T;
  const std::uint64_t per_token = T > 0 ? token_bytes / static_cast<std::uint64_t>(T) : 0;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    const std::uint64_t n = static_cast<std::uint64_t>(mid);
    if (view_bytes(c, mid, n * per_token, new_params) <= left)
      lo = mid;
    else
      hi = mid;
  }
  const std::string fits =
      lo > 0 ? "about " + std::to_string(lo) + " tokens fit" : "use smaller sizes or fewer heads";
  const BytesApart b = format_bytes_apart(need, left);
  return Status::fail("this view needs " + b.first + " of memory, more than the " + b.second +
                      " the page has left: " + fits);
}

std::uint64_t result_json_bytes(const Result& r) {
  std::uint64_t token_bytes = 0;
  for (const std::string& t : r.tokens) token_bytes += t.size();
  return result_json_bound(r.config, r.tokens_count(), token_bytes);
}

Status check_text_size(std::size_t bytes, const std::string& what) {
  if (bytes <= kMaxTextBytes) return Status::ok();
  const BytesApart b = format_bytes_apart(bytes, kMaxTextBytes);
  return Status::fail(what + " is " + b.first + ", more than the page takes (" + b.second +
                      ": its link must fit in a URL)");
}

}  // namespace attnviz::web
