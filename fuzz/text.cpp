// Fuzzes the chapter-3 text path with arbitrary bytes: the UTF-8 check, the whitespace split and the
// embedding. The first two bytes pick d_in (1..64) and the seed; the rest is the sentence. Invariants: the
// split accepts exactly what check_utf8 accepts; every token is non-empty valid UTF-8 without whitespace at
// its ends, and the tokens appear in the text in order; input_from_text gives T rows of d_in finite values in
// [-1, 1) (or the book's vectors), the same rows twice, and fails only on invalid UTF-8 or a text without
// tokens or more tokens than the context length.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  attnviz::Config c;
  c.d_in = 1 + data[0] % 64;
  c.seed = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const bool valid = attnviz::check_utf8(text).is_ok();
  std::vector<std::string> words;
  if (attnviz::split_words(text, words).is_ok() != valid) std::abort();
  std::size_t at = 0;
  for (const std::string& w : words) {
    if (w.empty() || !attnviz::check_utf8(w).is_ok()) std::abort();
    const std::size_t found = text.find(w, at);
    if (found == std::string_view::npos) std::abort();  // tokens are pieces of the text, in order
    at = found + w.size();
  }
  attnviz::Input in;
  const bool ok = attnviz::input_from_text(text, c, in).is_ok();
  const bool fits = words.size() <= static_cast<std::size_t>(c.context_length);
  if (ok != (valid && !words.empty() && fits)) std::abort();
  if (!ok) return 0;
  if (in.tokens != words || in.x.shape[0] != static_cast<int>(words.size()) || in.x.shape[1] != c.d_in)
    std::abort();
  for (std::size_t i = 0; i < in.x.size(); ++i)
    if (!std::isfinite(in.x.data[i]) || std::fabs(in.x.data[i]) > 1.0f) std::abort();
  attnviz::Input again;
  if (!attnviz::input_from_text(text, c, again).is_ok() || again.x.data != in.x.data) std::abort();
  return 0;
}
