// Fuzzes the tokenizer's loader with arbitrary vocabulary and merges contents: the input is the vocabulary
// JSON, a NUL byte, then the merges text (no NUL: all of it is the vocabulary, with no merges). Loading must
// succeed or fail with one line; a loaded tokenizer must encode any text to ids that decode back to it (every
// byte has a token, so that always holds).
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "attnviz/io/bpe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view vocab = input.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  attnviz::Bpe bpe;
  const attnviz::Status st = attnviz::Bpe::from_memory(vocab, merges, bpe);
  if (!st.is_ok()) {
    if (st.error.empty() || st.error.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  for (std::string_view text : {"hello world", "Hello, I'm 42!\n\n  x",
                                "na\xc3\xafve \xe4\xb8\xad \xf0\x9f\x98\x80", "\x01\x7f ab ab ab abab"}) {
    std::vector<int> ids;
    if (!bpe.encode(text, ids).is_ok() || bpe.decode(ids) != text) std::abort();
    for (int id : ids) {
      if (id < 0 || id >= bpe.size()) std::abort();
      (void)bpe.label(id);
    }
  }
  return 0;
}
