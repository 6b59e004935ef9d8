// tokenizer.oracle: attnviz's Bpe against the oracle's ids (tests/tokenizer/oracle.mjs, npm gpt-3-encoder).
//   attnviz_tokenizer_oracle CORPUS.json ORACLE.json VOCAB_DIR
// Every corpus string must encode to exactly the oracle's ids and decode back to itself. Prints each mismatch
// (the string, both id lists) and exits 1 if there is any.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/io/bpe.hpp"

namespace {

nlohmann::json read_json(const char* path) {
  std::ifstream f(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string list(const std::vector<int>& ids) {
  return nlohmann::json(ids).dump();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: attnviz_tokenizer_oracle CORPUS.json ORACLE.json VOCAB_DIR\n";
    return 2;
  }
  const nlohmann::json corpus = read_json(argv[1]), oracle = read_json(argv[2]);
  if (!corpus.is_array() || !oracle.is_object() || !oracle.contains("ids") || !oracle["ids"].is_array() ||
      oracle["ids"].size() != corpus.size()) {
    std::cerr << "tokenizer.oracle: " << argv[1] << " and " << argv[2] << " do not hold matching lists\n";
    return 1;
  }
  attnviz::Bpe bpe;
  if (attnviz::Status st = attnviz::Bpe::load_dir(argv[3], bpe); !st.is_ok()) {
    std::cerr << "tokenizer.oracle: " << st.error << "\n";
    return 1;
  }
  int failures = 0;
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const std::vector<int> expected = oracle["ids"][i].get<std::vector<int>>();
    std::vector<int> ids;
    const attnviz::Status st = bpe.encode(text, ids);
    const bool same = st.is_ok() && ids == expected, round_trip = bpe.decode(ids) == text;
    tokens += ids.size();
    if (same && round_trip) continue;
    ++failures;
    std::cerr << "string " << i + 1 << " " << nlohmann::json(text).dump() << ":"
              << (st.is_ok() ? "" : " encode failed: " + st.error) << (same ? "" : " ids differ")
              << (round_trip ? "" : ", decode(encode(s)) != s") << "\n  " << oracle.value("oracle", "oracle")
              << ": " << list(expected) << "\n  attnviz: " << list(ids) << "\n";
  }
  std::printf("tokenizer.oracle: %zu strings, %zu tokens, %d differ from %s\n", corpus.size(), tokens,
              failures, oracle.value("oracle", "the oracle").c_str());
  return failures ? 1 : 0;
}
