// Fuzzes GPT-2's tokenizer with arbitrary bytes as text, with the real vocabulary (loaded once). Invalid
// UTF-8 must be refused; valid text must encode to ids in the vocabulary that decode back to the same bytes.
// Labels of every token, and of the raw input, must not crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/text.hpp"

namespace {

const attnviz::Bpe& gpt2() {
  static const attnviz::Bpe bpe = [] {
    attnviz::Bpe b;
    const attnviz::Status st = attnviz::Bpe::load_dir(ATTNVIZ_GPT2_DIR, b);
    if (!st.is_ok()) {
      std::fprintf(stderr, "fuzz bpe: %s\n", st.error.c_str());
      std::abort();
    }
    return b;
  }();
  return bpe;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const attnviz::Bpe& bpe = gpt2();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<int> ids;
  const bool encoded = bpe.encode(text, ids).is_ok();
  if (encoded != attnviz::check_utf8(text).is_ok()) std::abort();
  if (encoded && bpe.decode(ids) != text) std::abort();
  for (int id : ids) {
    if (id < 0 || id >= bpe.size() || bpe.label(id).empty()) std::abort();
  }
  if (attnviz::token_label(text).size() < text.size()) std::abort();  // a label never hides a byte
  return 0;
}
