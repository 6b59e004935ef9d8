// libFuzzer target: any bytes as a .safetensors file in memory; when the file is valid, every tensor's last
// element is read and the file is loaded as a GPT-2 model under a small memory budget. A `config.json` entry
// in __metadata__ is passed as config.json (so the fuzzer reaches that parser too); without one the head
// count is 1. Seeds: fuzz/corpus/safetensors/ (fuzz/make_safetensors_corpus.py writes them; some have tens of
// thousands of entries, where a parse that is not linear runs past scripts/fuzz's -timeout); dictionary:
// fuzz/safetensors.dict.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/safetensors.hpp"

volatile float g_sink;  // keeps the reads below from being optimized away

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attnviz;
  auto bytes = std::make_shared<const std::vector<unsigned char>>(data, data + size);
  SafetensorsFile file;
  if (!SafetensorsFile::from_memory(bytes, "fuzz.safetensors", file).is_ok()) return 0;

  // A valid file's tensors lie inside the input: ASan reports any read past it.
  float sink = 0.0f;
  for (const SafeTensor& t : file.tensors())
    if (t.numel > 0) sink += load_element(t.data, t.dtype, t.numel - 1);
  g_sink = sink;

  GptLoadOptions opts;
  opts.memory_budget = 8u << 20;  // 8 MB: nothing a tiny input implies is allocated beyond this
  std::optional<std::string> config;
  if (const auto it = file.metadata().find("config.json"); it != file.metadata().end())
    config = it->second;
  else
    opts.heads = 1;
  GptWeights w;
  const Status s = load_gpt(file, config, opts, w);
  if (s.is_ok() && w.bytes() > opts.memory_budget) __builtin_trap();  // the budget must hold
  return 0;
}
