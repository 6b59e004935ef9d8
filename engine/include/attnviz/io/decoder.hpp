// Today's open decoders in Hugging Face's layout: config.json's model_type `llama` (SmolLM2, TinyLlama,
// Llama 3.2), `qwen2` (Qwen2.5), `qwen3`, `gemma3_text` (Gemma 3 270M / 1B) and `gpt_neox` (Pythia), their
// weights in one model.safetensors or sharded through model.safetensors.index.json, F32, F16 or BF16.
//
// Each becomes a GptConfig whose `arch` describes its blocks (gpt.hpp: the norm, the positions, the
// attention's key/value heads, q/k norms and windows, the MLP, the residual layout) and a GptWeights the one
// forward pass runs. config.json is read strictly, as gpt_config.hpp reads GPT-2's: every key is honoured,
// checked against the one form the engine computes, or accepted as bookkeeping; anything else is refused by
// name, and so is a missing or misshapen tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/safetensors.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

// The architectures read here, by model_type.
const std::vector<std::string>& decoder_architectures();

// config.json's model_type, which decides the architecture: "" when the object states none (GPT-2's reader,
// the book's configs). A text that fails strict parsing (strict_json.hpp: NaN, a duplicate key, trailing
// text, a NUL, too deep or too large, not an object) and a model_type that is not a string are refused with
// the file's own one-line error starting "WHERE: ": no other architecture's reading is tried in its place.
Status config_model_type(const std::string& where, std::string_view config_text, std::string& type);

// What config.json says of a decoder: its sizes and description, and whether the output head is the token
// embedding. Messages are one line starting "WHERE: " and name the key.
struct DecoderConfig {
  GptConfig config;
  bool tied = false;
};
Status read_decoder_config(const std::string& where, std::string_view text, DecoderConfig& out);

// The weights of one model: one file, or the shards an index names. Shards are plain file names in the
// index's folder (no path separators, no "..").
class WeightFiles {
 public:
  // `dir`: a folder holding model.safetensors or model.safetensors.index.json and its shards.
  static Status open_dir(const std::string& dir, WeightFiles& out);
  // One file already open (the page's bytes, or a .safetensors path).
  static WeightFiles single(SafetensorsFile file);

  const SafeTensor* find(std::string_view name) const;
  const SafetensorsFile* file_of(std::string_view name) const;
  std::vector<std::string> names() const;            // every tensor of every file
  const std::string& name() const { return name_; }  // the file, or the index
  std::uint64_t mapped_bytes() const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::string name_;
};

// Loads a decoder described by `config_json` (read_decoder_config) from `files`.
Status load_decoder(const WeightFiles& files, const std::string& config_where, std::string_view config_json,
                    const GptLoadOptions& opts, GptWeights& out);

}  // namespace attnviz
