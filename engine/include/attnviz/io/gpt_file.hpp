// GPT-2 weights from a .safetensors file, in either naming scheme:
//   Hugging Face GPT-2 (`wte.weight`, `h.{i}.attn.c_attn.weight`, ...; `transformer.` may prefix every name;
//     Conv1D weights stored (in, out); no lm_head: tied to wte),
//   the book's GPTModel.state_dict() (`tok_emb.weight`, `trf_blocks.{i}.att.W_query.weight`, ...; nn.Linear
//     weights stored (out, in); `out_head.weight`).
// Every size comes from the tensors themselves; the head count from config.json (`n_head`, `num_heads` or
// `n_heads`), else d_model / 64, and GptLoadOptions::heads overrides both. A config.json is read strictly
// (gpt_config.hpp): each key agrees with the weights, states the arithmetic the engine does, or is refused
// by name. Each matrix is widened to float, packed into panels for the kernels, and its file pages released,
// so loading peaks near the packed size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/io/safetensors.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

struct GptLoadOptions {
  Isa isa = Isa::automatic;         // the kernels whose panel width the matrices get
  int heads = 0;                    // overrides config.json and d_model / 64 (0: no override)
  std::uint64_t memory_budget = 0;  // bytes the packed weights may take (0: no limit)
  // An address-space limit (ulimit -v) applies: the mapped file counts against the budget too. Its pages are
  // given back as each tensor is packed, but its addresses are held until the load ends.
  bool count_mapping = false;
  // Another architecture's BF16 / F16 weight matrices stay 16-bit in memory, widened per panel by the kernels
  // (half the memory); false widens them to float32 as GPT-2's loader always does.
  bool keep_16bit = true;
};

enum class GptNaming { hugging_face, book };
const char* to_string(GptNaming n);

// What a file holds, found without packing anything.
struct GptFileInfo {
  GptConfig config;  // drop_rate: config.json's, else GPT-2's 0.1 (weights files do not say)
  GptNaming naming = GptNaming::hugging_face;
  std::string prefix;              // "transformer." when every Hugging Face name has it
  bool tied = true;                // no separate output head (or one identical to the token embedding)
  std::uint64_t packed_bytes = 0;  // what the loaded GptWeights will hold, panels padded, for opts.isa
  std::string config_from;         // GptWeights::config_from
  std::string note;                // GptWeights::note
};

// Checks the file's tensors against a GPT-2 model and finds its configuration. `config_json`: the text of a
// config.json that came with the file, if any.
Status inspect_gpt(const SafetensorsFile& file, const std::optional<std::string>& config_json,
                   const GptLoadOptions& opts, GptFileInfo& out);

// Loads every weight. On failure `out` is unchanged.
Status load_gpt(const SafetensorsFile& file, const std::optional<std::string>& config_json,
                const GptLoadOptions& opts, GptWeights& out);

// `path`: a folder holding model.safetensors, or a .safetensors file; config.json is read from the folder
// (the file's own) when it is there.
Status load_gpt(const std::string& path, const GptLoadOptions& opts, GptWeights& out);

// The browser page's variant: the file's bytes (and config.json's text, if the user gave one) in memory.
Status load_gpt(std::shared_ptr<const std::vector<unsigned char>> bytes, const std::string& name,
                const std::optional<std::string>& config_json, const GptLoadOptions& opts, GptWeights& out);

}  // namespace attnviz
