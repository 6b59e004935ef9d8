// libFuzzer target: any bytes as a config.json, read against two models' weights: gpt2-small as Hugging Face
// stores it (q, k and v biases, head tied to the embedding) and the book's GPT_CONFIG_124M (no q, k, v
// biases, an output head of its own). Each read must succeed or fail with one line starting "config.json: ";
// what an accepted config states must be what the engine can run. Seeds: fuzz/corpus/config/ (real GPT-2
// and book configs, each refusal kind, and one with many keys so that large inputs are tried too);
// scripts/fuzz runs it with a timeout, so an input that reads slowly fails.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "attnviz/io/gpt_config.hpp"

namespace {

attnviz::GptWeightFacts facts(bool book) {
  attnviz::GptWeightFacts f;
  f.sizes.vocab_size = 50257;
  f.sizes.context_length = 1024;
  f.sizes.d_model = 768;
  f.sizes.n_layers = 12;
  f.sizes.qkv_bias = !book;
  f.tied = !book;
  f.head_tensor = book;
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool book : {false, true}) {
    const attnviz::GptWeightFacts w = facts(book);
    attnviz::GptConfigStated out;
    const attnviz::Status st = attnviz::read_gpt_config("config.json", text, w, out);
    if (!st.is_ok()) {
      if (st.error.rfind("config.json: ", 0) != 0 || st.error.find('\n') != std::string::npos) std::abort();
      continue;
    }
    if (out.heads < 0 || out.heads > w.sizes.d_model) std::abort();
    if (out.drop_rate != -1.0 && !(out.drop_rate >= 0.0 && out.drop_rate < 1.0)) std::abort();
  }
  return 0;
}
