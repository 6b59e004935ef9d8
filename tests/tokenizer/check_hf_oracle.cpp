// tokenizer.hf.*: attnviz's Bpe on a tokenizer.json against Hugging Face's own `tokenizers`
// (tests/tokenizer/oracle_hf.mjs).
//   attnviz_tokenizer_hf_oracle CORPUS.json ORACLE.json DIR
// DIR holds the tokenizer.json (Bpe::load_dir reads it). Every corpus string must encode to exactly the
// oracle's ids (special tokens added), and those ids less the special ones must decode to the oracle's text.
// Prints each mismatch and exits 1 if there is any.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/text.hpp"

namespace {

nlohmann::json read_json(const char* path) {
  std::ifstream f(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: attnviz_tokenizer_hf_oracle CORPUS.json ORACLE.json DIR\n";
    return 2;
  }
  const nlohmann::json corpus = read_json(argv[1]), oracle = read_json(argv[2]);
  if (!corpus.is_array() || !oracle.is_object() || !oracle.contains("ids") || !oracle["ids"].is_array() ||
      oracle["ids"].size() != corpus.size() || !oracle.contains("text") ||
      oracle["text"].size() != corpus.size()) {
    std::cerr << "tokenizer.hf: " << argv[1] << " and " << argv[2] << " do not hold matching lists\n";
    return 1;
  }
  attnviz::Bpe bpe;
  if (attnviz::Status st = attnviz::Bpe::load_dir(argv[3], bpe); !st.is_ok()) {
    std::cerr << "tokenizer.hf: " << st.error << "\n";
    return 1;
  }
  int failures = 0;
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const std::vector<int> expected = oracle["ids"][i].get<std::vector<int>>();
    const std::string expected_text = oracle["text"][i].get<std::string>();
    std::vector<int> ids, plain;
    const attnviz::Status st = bpe.encode(text, ids);
    for (int id : ids)
      if (!bpe.is_special(id)) plain.push_back(id);
    const std::string decoded = attnviz::to_valid_utf8(bpe.decode(plain));
    const bool same = st.is_ok() && ids == expected, same_text = decoded == expected_text;
    tokens += ids.size();
    if (same && same_text) continue;
    ++failures;
    std::cerr << "string " << i + 1 << " " << nlohmann::json(text).dump() << ":"
              << (st.is_ok() ? "" : " encode failed: " + st.error) << (same ? "" : " ids differ")
              << (same_text ? "" : " decoded text differs") << "\n  " << oracle.value("oracle", "oracle")
              << ": " << nlohmann::json(expected).dump() << " " << nlohmann::json(expected_text).dump()
              << "\n  attnviz: " << nlohmann::json(ids).dump() << " " << nlohmann::json(decoded).dump()
              << "\n";
  }
  std::printf("tokenizer.hf: %zu strings, %zu tokens, %d differ from %s\n", corpus.size(), tokens, failures,
              oracle.value("oracle", "the oracle").c_str());
  return failures ? 1 : 0;
}
