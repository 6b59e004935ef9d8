// attnviz-tokenizer-bench: GPT-2 tokenizer throughput (engine/include/attnviz/io/bpe.hpp) on one thread.
//   attnviz-tokenizer-bench [TEXT_FILE [VOCAB_DIR]]   (default: this repository's README.md, the built
//   vocabulary)
// The text is repeated to at least 8 MB. Prints tokens/s for the first pass (every piece merged and
// remembered), a second pass (pieces found in the memory), and text made of unique words (no piece repeats).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "attnviz/io/bpe.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool timed(const char* what, const attnviz::Bpe& bpe, const std::string& text) {
  std::vector<int> ids;
  const auto t0 = std::chrono::steady_clock::now();
  if (attnviz::Status st = bpe.encode(text, ids); !st.is_ok()) {
    std::fprintf(stderr, "attnviz-tokenizer-bench: %s\n", st.error.c_str());
    return false;
  }
  const double s = seconds_since(t0);
  std::printf("%-28s %9.2f MB %10zu tokens %8.3f s %12.0f tokens/s %7.1f MB/s\n", what,
              static_cast<double>(text.size()) / 1e6, ids.size(), s, static_cast<double>(ids.size()) / s,
              static_cast<double>(text.size()) / 1e6 / s);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : ATTNVIZ_SOURCE_DIR "/README.md";
  std::ifstream f(path, std::ios::binary);
  const std::string sample((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (sample.empty()) {
    std::fprintf(stderr, "attnviz-tokenizer-bench: cannot read %s\n", path.c_str());
    return 1;
  }
  attnviz::Bpe bpe;
  const auto t0 = std::chrono::steady_clock::now();
  if (attnviz::Status st = attnviz::Bpe::load_dir(argc > 2 ? argv[2] : attnviz::default_vocab_dir(), bpe);
      !st.is_ok()) {
    std::fprintf(stderr, "attnviz-tokenizer-bench: %s\n", st.error.c_str());
    return 1;
  }
  std::printf("vocabulary loaded in %.3f s (%d tokens); text: %s\n", seconds_since(t0), bpe.size(),
              path.c_str());
  std::string text;
  while (text.size() < (std::size_t{8} << 20)) text += sample;
  // Unique words: random lowercase letters, 3 to 12 of them, each after a space.
  std::mt19937 rng(7);
  std::string unique;
  while (unique.size() < text.size() / 4) {
    unique += ' ';
    for (auto n = 3 + rng() % 10; n > 0; --n) unique += static_cast<char>('a' + rng() % 26);
  }
  const bool ok =
      timed("first pass", bpe, text) && timed("second pass", bpe, text) && timed("unique words", bpe, unique);
  return ok ? 0 : 1;
}
