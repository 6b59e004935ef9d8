// Fuzzes Hugging Face tokenizer.json files through Bpe::from_tokenizer_json and, when one loads, its encoder:
// the input is the file, a NUL byte, then a text (no NUL: all of it is the file, and fixed texts are
// encoded). Loading must succeed or fail with one line; a loaded tokenizer must encode valid text to ids
// inside its vocabulary (or fail with one line, such as a regex over its match limit), and decode and label
// them without a crash. scripts/fuzz's -timeout turns a slow input (a parse or a regex that is not bounded)
// into a failure.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/text.hpp"

namespace {

void one_line(const attnviz::Status& st) {
  if (st.error.empty() || st.error.find('\n') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view file = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  attnviz::Bpe bpe;
  if (const attnviz::Status st = attnviz::Bpe::from_tokenizer_json(file, bpe); !st.is_ok()) {
    one_line(st);
    return 0;
  }
  std::vector<std::string_view> texts{"hello world", "Hello, I'm 42!\n\n  x <s></s><|endoftext|>",
                                      "na\xc3\xafve \xe4\xb8\xad \xf0\x9f\x98\x80", ""};
  if (attnviz::check_utf8(text).is_ok()) texts.push_back(text);
  for (std::string_view t : texts) {
    for (bool special : {true, false}) {
      std::vector<int> ids;
      if (const attnviz::Status st = bpe.encode(t, ids, special); !st.is_ok()) {
        one_line(st);
        if (!ids.empty()) std::abort();
        continue;
      }
      for (int id : ids) {
        if (id < 0 || id >= bpe.size()) std::abort();
        (void)bpe.label(id);
      }
      (void)bpe.decode(ids);
    }
  }
  return 0;
}
