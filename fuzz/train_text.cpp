// Fuzzes training's text path with arbitrary bytes: Python's universal-newline read, the split at a share of
// the characters and GPTDatasetV1's windows. The first two bytes pick the ratio (0 .. 1) and the window's
// length and stride; the rest is the file. Invariants: the read accepts exactly what check_utf8 accepts, and
// its text is valid UTF-8 without '\r', no longer than the input; the two parts join to the text, the first
// holds int(ratio * characters) characters; every window lies inside the ids, in order, `stride` apart.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/text.hpp"
#include "attnviz/train.hpp"

namespace {

std::size_t chars(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const double ratio = data[0] / 255.0;
  const int max_length = 1 + data[1] % 16, stride = 1 + data[1] / 16;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string text;
  const bool ok = attnviz::read_text_universal(bytes, text).is_ok();
  if (ok != attnviz::check_utf8(bytes).is_ok()) std::abort();
  if (!ok) return 0;
  if (!attnviz::check_utf8(text).is_ok() || text.find('\r') != std::string::npos ||
      text.size() > bytes.size())
    std::abort();
  std::string first, second;
  attnviz::split_text(text, ratio, first, second);
  if (first + second != text) std::abort();
  if (chars(first) != static_cast<std::size_t>(ratio * static_cast<double>(chars(text)))) std::abort();
  // the text's bytes as ids: windows over them
  std::vector<int> ids(text.begin(), text.end());
  const attnviz::Windows w = attnviz::make_windows(ids, max_length, stride);
  for (int i = 0; i < w.size(); ++i) {
    const int start = w.starts[static_cast<std::size_t>(i)];
    if (start != i * stride || start + max_length >= static_cast<int>(ids.size())) std::abort();
  }
  if (static_cast<int>(ids.size()) > max_length && w.size() == 0) std::abort();
  return 0;
}
