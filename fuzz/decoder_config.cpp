// libFuzzer target: any bytes as the config.json of today's open decoders (engine/io/decoder.cpp's strict
// reader: llama, qwen2, qwen3, gemma3_text, gpt_neox). An accepted config must describe a model the engine
// validates, with sizes its arithmetic can hold. Seeds: fuzz/corpus/decoder_config/ (the fixtures' configs).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attnviz/io/decoder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attnviz;
  DecoderConfig d;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!read_decoder_config("config.json", text, d).is_ok()) return 0;
  if (!validate(d.config).is_ok()) __builtin_trap();  // accepted means runnable
  // what a host computes from an accepted config before loading must not overflow or trap
  (void)packed_bytes(d.config, d.tied, Isa::scalar, Dtype::bf16);
  (void)parameter_count(d.config, d.tied);
  (void)pass_bytes(d.config, 64, GptRequest{});
  std::string type;
  if (!config_model_type("config.json", text, type).is_ok()) __builtin_trap();  // read_decoder_config took it
  return 0;
}
